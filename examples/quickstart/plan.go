package main

import (
	"context"
	"encoding/binary"
	"fmt"
	"math/bits"
	"math/rand/v2"

	"github.com/dtakit/dtakit/appendlist"
	"github.com/dtakit/dtakit/dta"
	"github.com/dtakit/dtakit/internal/app/stream"
	"github.com/dtakit/dtakit/keyincr"
	"github.com/dtakit/dtakit/keywrite"
	"github.com/dtakit/dtakit/postcard"
	"github.com/dtakit/dtakit/reporter"
	"github.com/dtakit/dtakit/translator"
)

// The geometry the demo does not take from flags.
const (
	redundancy = 2    // N of Key-Write, Key-Increment and Postcarding
	kwData     = 4    // Key-Write data bytes
	hops       = 5    // postcard path length
	universe   = 4096 // postcard values are 1..universe (switch IDs, say)
	lists      = 8    // Append lists
	apBatch    = 16   // Append batch B
	// sigmas is the tolerance: a success rate passes when it is at least
	// expected - sigmas·σ, σ the standard deviation of the success fraction
	// of independent queries, sqrt(Σ p_i(1-p_i))/n. Four σ of a binomial
	// is missed by chance about 3 times in 100000; the queries are not quite
	// independent (two keys that collide fail together), which widens the
	// real spread a little: over 200 seeds at the default loads, the
	// z-score of the measured rate had a standard deviation of 1.02 for
	// Key-Write and 1.11 for exact Key-Increment counts, so 4 binomial σ
	// is at least 3.6 real ones.
	sigmas = 4
	// fallbackRate paces each stream where the reporters cannot take NACKs
	// (one loopback address): nothing else would slow them down.
	fallbackRate = 100000
	// delta is the failure probability the count-min error bound is stated
	// for: a Key-Increment estimate may exceed the truth by more than
	// ε·(stream total) with probability at most delta, ε = keyincr.Epsilon.
	delta = 0.01
)

// instances are the collector's four primitive instances.
type instances struct {
	kw    *keywrite.Store
	ki    *keyincr.Store
	pc    *postcard.Store
	table *postcard.Table
	ap    *appendlist.Store
}

// plan is what the streams send, derived from the config: the reports of
// each primitive and the keys they use.
type plan struct {
	cfg                   config
	n                     [5]int // reports per primitive, by dta.Opcode
	dropped               [5]int // reports cfg.drop kept from the sockets
	kwKeys, kiKeys, flows []uint32
	kwSlots, kiSlots      uint64
	chunks                uint32
	entries               int // Append entries per list
	kiTruth               []uint64
	kwLayout              keywrite.Layout
	kiLayout              keyincr.Layout
	pcLayout              postcard.Layout
	apLayout              appendlist.Layout
}

func newPlan(cfg config) (*plan, error) {
	if cfg.Keys < 4 || cfg.Slots < 4 || bits.OnesCount(uint(cfg.Slots)) != 1 || cfg.Reports < 1 || cfg.Rate < 0 {
		return nil, fmt.Errorf("quickstart: -keys and -slots must be at least 4, -slots a power of two, -reports positive, -rate not negative")
	}
	p := &plan{cfg: cfg, kwSlots: uint64(cfg.Slots), kiSlots: uint64(cfg.Slots / 4), chunks: uint32(cfg.Slots / 4)}
	if cfg.Bench {
		p.n[dta.OpKeyWrite] = cfg.Reports / 2
		p.n[dta.OpAppend] = cfg.Reports - cfg.Reports/2
	} else {
		q := cfg.Reports / 4
		p.n[dta.OpKeyWrite], p.n[dta.OpKeyIncrement] = q, q
		p.n[dta.OpPostcard] = q / hops * hops // whole flows only
		p.n[dta.OpAppend] = cfg.Reports - 3*q
	}
	rng := rand.New(rand.NewPCG(cfg.Seed, 0x9e3779b97f4a7c15))
	p.kwKeys = distinctKeys(rng, cfg.Keys)
	p.kiKeys = distinctKeys(rng, cfg.Keys/4)
	p.flows = distinctKeys(rng, cfg.Keys/4)
	p.kiTruth = make([]uint64, len(p.kiKeys))
	perList := (p.n[dta.OpAppend] + lists - 1) / lists
	p.entries = 1 << bits.Len(uint(perList+apBatch)) // room for every entry: nothing is lapped
	var err error
	p.kwLayout = keywrite.Layout{Slots: p.kwSlots, DataSize: kwData}
	if err = p.kwLayout.Validate(); err != nil {
		return nil, err
	}
	p.kiLayout = keyincr.Layout{Slots: p.kiSlots}
	if err = p.kiLayout.Validate(); err != nil {
		return nil, err
	}
	p.pcLayout = postcard.Layout{Hops: hops, Chunks: p.chunks, Copies: redundancy}
	if err := p.pcLayout.Validate(); err != nil {
		return nil, err
	}
	p.apLayout = appendlist.Layout{Lists: lists, Entries: p.entries, EntrySize: 4, Batch: apBatch, Markers: true}
	if err := p.apLayout.Validate(); err != nil {
		return nil, fmt.Errorf("quickstart: too many Append reports for one region: %w", err)
	}
	return p, nil
}

func distinctKeys(rng *rand.Rand, n int) []uint32 {
	seen := make(map[uint32]bool, n)
	keys := make([]uint32, 0, n)
	for len(keys) < n {
		k := rng.Uint32()
		if !seen[k] {
			seen[k] = true
			keys = append(keys, k)
		}
	}
	return keys
}

// The streams. Report i of each primitive is a function of i alone, so the
// queries can recompute what was sent last under every key.
//
// Key-Write: key i mod K, round i/K; the data changes every round, so a
// query that returns an older round's data counts as a failure. The data is
// stream.Value(seed, key index, round).
//
// Key-Increment: key i mod K/4, adding 1..8.
func (p *plan) kiAdd(i int) uint64 { return 1 + uint64(stream.Value(p.cfg.Seed^1, i, 0)%8) }

// Postcarding: report i is hop i mod 5 + 1 of flow write w = i/5, flow w mod
// F, round w/F; each flow's five postcards are sent back to back, so the
// translator's cache completes the flow and writes it.
func (p *plan) pcValue(flow, round, hop int) uint32 {
	return 1 + stream.Value(p.cfg.Seed^2, flow*hops+hop, round)%universe
}

// Append: report i appends be32(i/8 + 1) to list i mod 8.

// send sends op's stream. The reporter paces it and slows it down when the
// translator NACKs (package reporter's flow control): the demo has no flow
// control of its own.
func (p *plan) send(ctx context.Context, op dta.Opcode, rep *reporter.Reporter) error {
	n := p.n[op]
	var buf [4]byte
	for i := range n {
		var err error
		switch {
		case p.cfg.drop != nil && p.cfg.drop(op, i):
			p.dropped[op]++
			if op == dta.OpKeyIncrement {
				p.kiTruth[i%len(p.kiKeys)] += p.kiAdd(i)
			}
		case op == dta.OpKeyWrite:
			K := len(p.kwKeys)
			binary.BigEndian.PutUint32(buf[:], stream.Value(p.cfg.Seed, i%K, i/K))
			err = rep.KeyWrite(p.kwKeys[i%K], buf[:], redundancy)
		case op == dta.OpKeyIncrement:
			k, add := i%len(p.kiKeys), p.kiAdd(i)
			p.kiTruth[k] += add
			err = rep.KeyIncrement(p.kiKeys[k], add, redundancy)
		case op == dta.OpPostcard:
			w, hop := i/hops, i%hops
			f, round := w%len(p.flows), w/len(p.flows)
			err = rep.Postcard(p.flows[f], postcard.Hop(hop+1), hops, postcard.Value(p.pcValue(f, round, hop)))
		case op == dta.OpAppend:
			binary.BigEndian.PutUint32(buf[:], uint32(i/lists+1))
			err = rep.Append(uint32(i%lists), buf[:], false)
		}
		if err != nil {
			return err
		}
		if (i+1)%reporter.DefaultBatch == 0 {
			if err := ctx.Err(); err != nil {
				return err
			}
		}
	}
	return rep.Flush()
}

func (p *plan) streams() int {
	s := 0
	for _, n := range p.n {
		if n > 0 {
			s++
		}
	}
	return s
}

// total returns the reports the plan sends, of every primitive.
func (p *plan) total() (t int) {
	for _, n := range p.n {
		t += n
	}
	return t
}

// decoded returns the reports the translator decoded, of every primitive
// (a registered one beyond the four counts at index 0).
func decoded(tc translator.Counters) (d uint64) {
	for _, n := range tc.Reports {
		d += n
	}
	return d
}
