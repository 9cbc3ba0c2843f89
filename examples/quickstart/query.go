package main

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"text/tabwriter"

	"github.com/dtakit/dtakit/appendlist"
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
// The translator counts RDMA WRITEs for all primitives together, so the
// rows split them by the translation rules: N per Key-Write report, one per
// Append batch, and Postcarding the rest. run checks the total against the
// target's count of WRITE packets applied.
func (p *plan) query(in *instances, tc translator.Counters, _ target.Counters, repc [5]reporter.Counters) ([]row, uint64) {
	var kw, ki, pc, ap []row // each empty or one row
	if p.n[dta.OpKeyWrite] > 0 {
		kw = []row{p.queryKeyWrite(in.kw, repc[dta.OpKeyWrite])}
	}
	if p.n[dta.OpKeyIncrement] > 0 {
		ki = []row{p.queryKeyIncrement(in.ki, repc[dta.OpKeyIncrement], tc.FetchAdds)}
	}
	if p.n[dta.OpAppend] > 0 {
		ap = []row{p.queryAppend(in.ap, repc[dta.OpAppend])}
	}
	if p.n[dta.OpPostcard] > 0 {
		// The WRITEs neither Key-Write nor Append account for.
		var others uint64
		for _, r := range append(kw, ap...) {
			others += r.ops
		}
		pc = []row{p.queryPostcard(in, repc[dta.OpPostcard], tc.Writes-min(tc.Writes, others))}
	}
	rows := slices.Concat(kw, ki, pc, ap)
	var total uint64
	for _, r := range rows {
		total += r.received
	}
	return rows, total
}

// newRow returns op's row before its checks: reports sent and received,
// and a note when some were never delivered.
func (p *plan) newRow(name string, op dta.Opcode, rc reporter.Counters) row {
	r := row{name: name, sent: uint64(p.n[op]), received: p.delivered(op, rc)}
	if r.received < r.sent {
		r.note = fmt.Sprintf(" (%d reports never delivered; their queries count as failures)", r.sent-r.received)
	}
	return r
}

// queryKeyWrite: each key's data was last written in round (n-1-j)/K; after
// that, later = n-1-lastpos distinct other keys were written (keys cycle in
// order, so none repeats within K-1 reports). Its query fails when both
// copies were overwritten (or, far less likely, a checksum collision
// answers wrongly): probability EmptyProb + the upper bound of
// WrongProbBounds at alpha = later/S, eq. 3 of the paper for that key. The
// expected rate is the mean over keys of 1 minus that. The bound at the
// final load (the oldest key's alpha) would hold too but is far below what
// the younger keys achieve, so it would let a broken store pass; the
// per-key mean is the honest expectation.
func (p *plan) queryKeyWrite(kw *keywrite.Store, rc reporter.Counters) row {
	n := p.n[dta.OpKeyWrite]
	K := len(p.kwKeys)
	m := min(K, n)
	keys := p.kwKeys[:m]
	res := make([]keywrite.Result, m)
	_ = kw.QueryBatch(keys, redundancy, keywrite.Plurality, res)
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
	r := p.newRow("Key-Write", dta.OpKeyWrite, rc)
	r.ops = r.received * redundancy
	r.checks = append(r.checks, e.check(fmt.Sprintf("latest data of %d keys, load %.3f", m, float64(m)/float64(p.kwSlots)), good))
	return r
}

// queryKeyIncrement: a count-min estimate never falls below the key's
// total, and exceeds it by more than ε·(stream total) with probability at
// most FailureProb(S, N, ε) = delta. An estimate is exact unless every one
// of the key's N counters is shared with another key: each is, with
// probability q = 1 - (1-1/S)^(N·(m-1)) (m keys, all counted), so the
// expected exact fraction is 1 - q^N. Its RDMA operations are the
// translator's FETCH_ADDs (no other primitive uses atomics).
func (p *plan) queryKeyIncrement(ki *keyincr.Store, rc reporter.Counters, fetchAdds uint64) row {
	n := p.n[dta.OpKeyIncrement]
	m := min(len(p.kiKeys), n)
	keys := p.kiKeys[:m]
	est := make([]uint64, m)
	_ = ki.QueryBatch(keys, redundancy, est)
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
	r := p.newRow("Key-Increment", dta.OpKeyIncrement, rc)
	r.ops = fetchAdds
	r.checks = append(r.checks,
		cm.check(fmt.Sprintf("count-min within %.2g x total, %d keys", eps, m), goodCM),
		exact.check(fmt.Sprintf("exact counts, load %.3f", float64(m)/float64(p.kiSlots)), goodExact))
	return r
}

// queryAppend: every entry must come back exactly once; no analysis allows
// a loss, so the expectation is 1 with no tolerance. A report the
// translator NACKed is resent after the ones sent since, so its entry can
// come later in its list than the order sent: counted, not a failure. Its
// RDMA operations are one WRITE per batch (the rings hold every entry, so
// no batch wraps into two).
func (p *plan) queryAppend(ap *appendlist.Store, rc reporter.Counters) row {
	n := p.n[dta.OpAppend]
	var good, moved int
	var ops uint64
	var readErr error
	buf := make([]byte, 4*1024)
	for l := range lists {
		cnt := (n - l + lists - 1) / lists
		ops += uint64((cnt + apBatch - 1) / apBatch)
		g, mv, err := readList(ap, l, cnt, buf)
		good, moved = good+g, moved+mv
		readErr = errors.Join(readErr, err)
	}
	e := expectation{}
	for range n {
		e.add(1)
	}
	r := p.newRow("Append", dta.OpAppend, rc)
	r.ops = ops
	r.checks = append(r.checks, e.check(fmt.Sprintf("entries read back once each, %d lists", lists), good))
	if moved > 0 {
		r.note += fmt.Sprintf(" (%d entries not where the order sent puts them: a resent report comes after the ones sent since)", moved)
	}
	if readErr != nil {
		r.note += fmt.Sprintf(" (reading: %v)", readErr)
	}
	return r
}

// readList reads Append list l, to which cnt entries 1..cnt were sent, and
// returns how many came back exactly once and how many are not where the
// order sent puts them.
func readList(ap *appendlist.Store, l, cnt int, buf []byte) (good, moved int, err error) {
	rd, err := ap.Reader(uint32(l))
	if err != nil {
		return 0, 0, err
	}
	pos := 0
	seen := make([]int, cnt+1) // by value 1..cnt
	for {
		k, rerr := rd.Read(buf)
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
		if rerr != nil {
			err = fmt.Errorf("list %d: %w", l, rerr)
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
	return good, moved, err
}

// queryPostcard: flows cycle like Key-Write keys, one flow write per five
// postcards; a flow's query can fail only when its chunk copies were
// overwritten by the later flows, with the probabilities Layout.Bounds
// gives at alpha = later/C (NoOutput and Wrong are upper bounds, so the
// mean of 1 - NoOutput - Wrong is a lower bound on the expected rate). ops
// is its share of the translator's WRITEs (N per chunk).
func (p *plan) queryPostcard(in *instances, rc reporter.Counters, ops uint64) row {
	n := p.n[dta.OpPostcard]
	F := len(p.flows)
	writes := n / hops
	m := min(F, writes)
	keys := p.flows[:m]
	paths := make([]postcard.Path, m)
	outs := make([]postcard.Outcome, m)
	in.pc.QueryBatch(in.table, keys, paths, outs)
	var e expectation
	good := 0
	for j := range m {
		round := (writes - 1 - j) / F
		later := writes - 1 - (j + round*F)
		b := p.pcLayout.Bounds(float64(later)/float64(p.chunks), universe)
		e.add(1 - b.NoOutput - b.Wrong)
		ok := outs[j] == postcard.Found && paths[j].Len == hops
		for h := 0; ok && h < hops; h++ {
			ok = paths[j].Hops[h] == p.pcValue(j, round, h)
		}
		if ok {
			good++
		}
	}
	r := p.newRow("Postcarding", dta.OpPostcard, rc)
	r.ops = ops
	r.checks = append(r.checks, e.check(fmt.Sprintf("paths of %d flows, load %.3f", m, float64(m)/float64(p.chunks)), good))
	return r
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
