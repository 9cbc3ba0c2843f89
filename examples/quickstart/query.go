package main

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"text/tabwriter"

	"github.com/dtakit/dtakit/dta"
	"github.com/dtakit/dtakit/internal/app/stream"
	"github.com/dtakit/dtakit/keyincr"
	"github.com/dtakit/dtakit/keywrite"
	"github.com/dtakit/dtakit/postcard"
	"github.com/dtakit/dtakit/reporter"
	"github.com/dtakit/dtakit/rocev2/target"
	"github.com/dtakit/dtakit/translator"
)

// row is one primitive's line of the table.
type row struct {
	name     string
	sent     uint64 // distinct reports the stream produced
	received uint64 // reports the translator took (decoded, not NACKed)
	ops      uint64 // RDMA operations (see query)
	checks   []check
	note     string
}

// check is one query success rate and what the analysis expects of it.
type check struct {
	query   string
	n       int     // queries
	success float64 // fraction answered right
	expect  float64 // expected fraction (or the bound on it)
	min     float64 // the pass mark: expect - sigmas·σ
}

func (c check) ok() bool { return c.success >= c.min }

// expectation accumulates the success probabilities p_i of independent
// queries: the expected success fraction is their mean, its standard
// deviation sqrt(Σ p_i(1-p_i))/n.
type expectation struct {
	sum, variance float64
	n             int
}

func (e *expectation) add(p float64) {
	p = min(max(p, 0), 1)
	e.sum += p
	e.variance += p * (1 - p)
	e.n++
}

func (e *expectation) check(query string, good int) check {
	c := check{query: query, n: e.n, success: 1, expect: 1, min: 1}
	if e.n > 0 {
		c.success = float64(good) / float64(e.n)
		c.expect = e.sum / float64(e.n)
		c.min = c.expect - sigmas*math.Sqrt(e.variance)/float64(e.n)
	}
	return c
}

// query reads back everything the streams sent and compares it with what
// the primitives' analysis predicts. It returns the table's rows and the
// reports the translator received in all.
//
// The RDMA operations of a row: Key-Increment's are the translator's
// FETCH_ADDs (no other primitive uses atomics). RDMA WRITEs are counted by
// the translator for all primitives together, so the rows split them by the
// translation rules: N per Key-Write report, one per Append batch (the rings
// hold every entry, so no batch wraps into two), and Postcarding the rest
// (N per chunk). run checks the total against the target's count of WRITE
// packets applied.
func (p *plan) query(in *instances, tc translator.Counters, _ target.Counters, repc [5]reporter.Counters) ([]row, uint64) {
	var rows []row
	var total uint64
	rx := func(op dta.Opcode) uint64 { return p.delivered(op, repc[op]) }
	lost := func(r *row) {
		if r.received < r.sent {
			r.note = fmt.Sprintf(" (%d reports never delivered; their queries count as failures)", r.sent-r.received)
		}
	}
	var apOps uint64
	var kwOps uint64

	// Key-Write. Each key's data was last written in round (n-1-j)/K; after
	// that, later = n-1-lastpos distinct other keys were written (keys cycle
	// in order, so none repeats within K-1 reports). Its query fails when
	// both copies were overwritten (or, far less likely, a checksum
	// collision answers wrongly): probability EmptyProb + the upper bound of
	// WrongProbBounds at alpha = later/S, eq. 3 of the paper for that key.
	// The expected rate is the mean over keys of 1 minus that. The bound at
	// the final load (the oldest key's alpha) would hold too but is far
	// below what the younger keys achieve, so it would let a broken store
	// pass; the per-key mean is the honest expectation.
	if n := p.n[dta.OpKeyWrite]; n > 0 {
		K := len(p.kwKeys)
		m := min(K, n)
		keys := p.kwKeys[:m]
		res := make([]keywrite.Result, m)
		_ = in.kw.QueryBatch(keys, redundancy, keywrite.Plurality, res)
		var e expectation
		good := 0
		var want [kwData]byte
		for j := range m {
			round := (n - 1 - j) / K
			later := n - 1 - (j + round*K)
			alpha := float64(later) / float64(p.kwSlots)
			_, wrong := keywrite.WrongProbBounds(redundancy, 32, alpha)
			e.add(1 - keywrite.EmptyProb(redundancy, 32, alpha) - wrong)
			binary.BigEndian.PutUint32(want[:], stream.Value(p.cfg.Seed, j, round))
			if res[j].Status == keywrite.Found && bytes.Equal(res[j].Data, want[:]) {
				good++
			}
		}
		r := row{name: "Key-Write", sent: uint64(n), received: rx(dta.OpKeyWrite)}
		kwOps = r.received * redundancy
		r.ops = kwOps
		r.checks = append(r.checks, e.check(fmt.Sprintf("latest data of %d keys, load %.3f", m, float64(m)/float64(p.kwSlots)), good))
		lost(&r)
		rows = append(rows, r)
		total += r.received
	}

	// Key-Increment. A count-min estimate never falls below the key's
	// total, and exceeds it by more than ε·(stream total) with probability
	// at most FailureProb(S, N, ε) = delta. An estimate is exact unless
	// every one of the key's N counters is shared with another key: each is,
	// with probability q = 1 - (1-1/S)^(N·(m-1)) (m keys, all counted), so
	// the expected exact fraction is 1 - q^N.
	if n := p.n[dta.OpKeyIncrement]; n > 0 {
		m := min(len(p.kiKeys), n)
		keys := p.kiKeys[:m]
		est := make([]uint64, m)
		_ = in.ki.QueryBatch(keys, redundancy, est)
		var streamTotal uint64
		for _, t := range p.kiTruth[:m] {
			streamTotal += t
		}
		eps := keyincr.Epsilon(p.kiSlots, redundancy, delta)
		q := keywrite.OverwriteProbSlots(redundancy, uint64(m-1), p.kiSlots)
		var cm, exact expectation
		goodCM, goodExact := 0, 0
		for j := range m {
			cm.add(1 - keyincr.FailureProb(p.kiSlots, redundancy, eps))
			exact.add(1 - math.Pow(q, redundancy))
			t := p.kiTruth[j]
			if est[j] >= t && float64(est[j]-t) <= eps*float64(streamTotal) {
				goodCM++
			}
			if est[j] == t {
				goodExact++
			}
		}
		r := row{name: "Key-Increment", sent: uint64(n), received: rx(dta.OpKeyIncrement), ops: tc.FetchAdds}
		r.checks = append(r.checks,
			cm.check(fmt.Sprintf("count-min within %.2g x total, %d keys", eps, m), goodCM),
			exact.check(fmt.Sprintf("exact counts, load %.3f", float64(m)/float64(p.kiSlots)), goodExact))
		lost(&r)
		rows = append(rows, r)
		total += r.received
	}

	// Append: every entry must come back exactly once; no analysis allows a
	// loss, so the expectation is 1 with no tolerance. A report the
	// translator NACKed is resent after the ones sent since, so its entry
	// can come later in its list than the order sent: counted, not a
	// failure.
	if n := p.n[dta.OpAppend]; n > 0 {
		good, moved := 0, 0
		var readErr error
		buf := make([]byte, 4*1024)
		for l := range lists {
			cnt := (n - l + lists - 1) / lists
			apOps += uint64((cnt + apBatch - 1) / apBatch)
			rd, err := in.ap.Reader(uint32(l))
			if err != nil {
				readErr = err
				continue
			}
			pos := 0
			seen := make([]int, cnt+1) // by value 1..cnt
			for {
				k, err := rd.Read(buf)
				for i := range k {
					v := binary.BigEndian.Uint32(buf[4*i:])
					if v >= 1 && int(v) <= cnt {
						seen[v]++
					}
					if v != uint32(pos+1) {
						moved++
					}
					pos++
				}
				if err != nil {
					readErr = errors.Join(readErr, fmt.Errorf("list %d: %w", l, err))
					break
				}
				if k == 0 {
					break
				}
			}
			for _, c := range seen[1:] {
				if c == 1 {
					good++
				}
			}
		}
		e := expectation{}
		for range n {
			e.add(1)
		}
		r := row{name: "Append", sent: uint64(n), received: rx(dta.OpAppend), ops: apOps}
		r.checks = append(r.checks, e.check(fmt.Sprintf("entries read back once each, %d lists", lists), good))
		lost(&r)
		if moved > 0 {
			r.note += fmt.Sprintf(" (%d entries not where the order sent puts them: a resent report comes after the ones sent since)", moved)
		}
		if readErr != nil {
			r.note += fmt.Sprintf(" (reading: %v)", readErr)
		}
		rows = append(rows, r)
		total += r.received
	}

	// Postcarding. Flows cycle like Key-Write keys, one flow write per five
	// postcards; a flow's query can fail only when its chunk copies were
	// overwritten by the later flows, with the probabilities Layout.Bounds
	// gives at alpha = later/C (NoOutput and Wrong are upper bounds, so the
	// mean of 1 - NoOutput - Wrong is a lower bound on the expected rate).
	if n := p.n[dta.OpPostcard]; n > 0 {
		F := len(p.flows)
		writes := n / hops
		m := min(F, writes)
		keys := p.flows[:m]
		paths := make([]postcard.Path, m)
		outs := make([]postcard.Outcome, m)
		in.pc.QueryBatch(in.table, keys, paths, outs)
		l := p.pcLayout
		var e expectation
		good := 0
		for j := range m {
			round := (writes - 1 - j) / F
			later := writes - 1 - (j + round*F)
			b := l.Bounds(float64(later)/float64(p.chunks), universe)
			e.add(1 - b.NoOutput - b.Wrong)
			ok := outs[j] == postcard.Found && paths[j].Len == hops
			for h := 0; ok && h < hops; h++ {
				ok = paths[j].Hops[h] == p.pcValue(j, round, h)
			}
			if ok {
				good++
			}
		}
		r := row{name: "Postcarding", sent: uint64(n), received: rx(dta.OpPostcard)}
		if w := tc.Writes; w >= kwOps+apOps {
			r.ops = w - kwOps - apOps
		}
		r.checks = append(r.checks, e.check(fmt.Sprintf("paths of %d flows, load %.3f", m, float64(m)/float64(p.chunks)), good))
		lost(&r)
		// Keep the table in the order Key-Write, Key-Increment,
		// Postcarding, Append.
		rows = append(rows[:len(rows)-1], r, rows[len(rows)-1])
		total += r.received
	}
	return rows, total
}

func printTable(w io.Writer, rows []row) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "primitive\treports sent\treceived\tlost\tRDMA ops\tquery\tsuccess\texpected\tminimum\t\t")
	for _, r := range rows {
		for i, c := range r.checks {
			name, sent, recv, lost, ops := "", "", "", "", ""
			if i == 0 {
				name = r.name
				sent = fmt.Sprint(r.sent)
				recv = fmt.Sprint(r.received)
				lost = fmt.Sprint(r.sent - min(r.sent, r.received))
				ops = fmt.Sprint(r.ops)
			}
			verdict := "ok"
			if !c.ok() {
				verdict = "FAIL"
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%.3f%%\t%.3f%%\t%.3f%%\t%s\t\n",
				name, sent, recv, lost, ops, c.query, 100*c.success, 100*c.expect, 100*c.min, verdict)
		}
	}
	tw.Flush()
}

// delivered returns how many of op's reports reached the translator: all
// but those its reporter counted lost (refused more often than it resends,
// or never acknowledged) and those a test dropped. The translator applies
// each wide-numbered report once; run checks its count against this.
func (p *plan) delivered(op dta.Opcode, rc reporter.Counters) uint64 {
	n := uint64(p.n[op])
	return n - min(n, rc.Lost+rc.Unconfirmed+uint64(p.dropped[op]))
}
