package keywrite

import (
	"encoding/binary"

	"github.com/dtakit/dtakit/dta/tofino"
)

// batchSlots bounds the slots one round of QueryBatch reads: enough
// independent loads to keep every line-fill buffer of a core busy, few
// enough that the scratch arrays stay in L1.
const batchSlots = 128

// maxBatchKeys bounds the keys per round.
const maxBatchKeys = 64

// round is the scratch of one round of QueryBatch.
type round struct {
	sums  [maxBatchKeys]uint32                   // the keys' checksums
	offs  [max(batchSlots, MaxRedundancy)]uint64 // their slots' offsets, key by key
	heads [max(batchSlots, MaxRedundancy)]uint64 // the first 8 bytes of each slot
}

// QueryBatch answers keys[i] into results[i] from the first n copies of each
// key with policy p, as Query would (with FirstMatch, Matches counts every
// matching slot, since all were read).
//
// It overlaps the memory misses of many queries. For each round of up to 64
// keys it computes every slot address first, then loads the head of every
// slot (its checksum and first data bytes, one 8-byte load) in a tight loop
// whose loads do not depend on each other, so the CPU has as many cache and
// TLB misses in flight as it can hold, and only then compares and votes,
// from values already in registers or cache. On a region much larger than
// the caches this is several times faster than one Query after another.
// (Software prefetching, an assembly PREFETCHT0 in bursts or interleaved
// with the hashing, measured slower than these plain loads.)
//
// Give it many keys per call, 64 or more: a round is the unit of overlap.
// results must be at least as long as keys. It does not allocate.
func (s *Store) QueryBatch(keys []uint32, n int, p Policy, results []Result) error {
	if n < 1 || n > MaxRedundancy {
		return errRedundancy
	}
	if err := p.validate(); err != nil {
		return err
	}
	if len(results) < len(keys) {
		return errResultsShort
	}
	per := max(1, min(maxBatchKeys, batchSlots/n))
	var r round
	for len(keys) > 0 {
		k := min(per, len(keys))
		s.address(&r, keys[:k], n)
		s.loadHeads(&r, k*n)
		if n == 2 {
			s.vote2(&r, k, p, results[:k])
		} else {
			s.vote(&r, k, n, p, results[:k])
		}
		keys, results = keys[k:], results[k:]
	}
	return nil
}

// address fills r's checksums and slot offsets for keys.
func (s *Store) address(r *round, keys []uint32, n int) {
	l := &s.layout
	mask, shift := l.mask(), l.slotShift()
	if h, ok := l.hasher().(tofino.PerCopyHasher); ok {
		// The default hasher, called directly: no interface dispatch,
		// and, for N = 2, one merged table lookup per key byte for the
		// checksum and both copies.
		if n == 2 {
			for k, key := range keys {
				sum, s0, s1 := h.Hashes2(key)
				r.sums[k] = sum
				r.offs[2*k] = uint64(s0&mask) << shift
				r.offs[2*k+1] = uint64(s1&mask) << shift
			}
			return
		}
		var slots [MaxRedundancy]uint32
		j := 0
		for k, key := range keys {
			r.sums[k] = h.Hashes(key, slots[:n])
			for _, slot := range slots[:n] {
				r.offs[j] = uint64(slot&mask) << shift
				j++
			}
		}
		return
	}
	h := l.hasher()
	j := 0
	for k, key := range keys {
		r.sums[k] = h.Checksum(key)
		for i := range n {
			r.offs[j] = uint64(h.Slot(key, uint8(i))&mask) << shift
			j++
		}
	}
}

// loadHeads loads the heads of r's first count slots. The loads do not
// depend on each other, so their misses overlap. A slot is at least 8 bytes.
func (s *Store) loadHeads(r *round, count int) {
	region := s.region
	for i, off := range r.offs[:count] {
		r.heads[i] = binary.LittleEndian.Uint64(region[off:])
	}
}

// vote answers k keys from the round r for any n.
func (s *Store) vote(r *round, k, n int, p Policy, results []Result) {
	var matched [MaxRedundancy]uint64
	j := 0
	for q := range k {
		sum := r.sums[q]
		m := 0
		for i := range n {
			off := r.offs[j+i]
			if uint32(r.heads[j+i]) == sum && !contains(matched[:m], off) {
				matched[m] = off
				m++
			}
		}
		j += n
		results[q] = s.voteSlots(matched[:m], p)
	}
}

// vote2 is vote for N = 2, the common redundancy. It looks each query's
// outcome up in a table made for p instead of branching on which copies
// matched, which the CPU cannot predict: the same results as vote, in
// about half the time.
func (s *Store) vote2(r *round, k int, p Policy, results []Result) {
	table := outcomes2(p)
	region := s.region
	size := uint64(s.layout.DataSize)
	wide := size > 8-checksumSize // data past the slot head
	for q := range k {
		sum := r.sums[q]
		o0, o1 := r.offs[2*q], r.offs[2*q+1]
		h0, h1 := r.heads[2*q], r.heads[2*q+1]
		// Bit arithmetic, not &&: every short-circuit is a branch.
		m0 := b2u(uint32(h0) == sum)
		m1 := b2u(uint32(h1) == sum) & b2u(o1 != o0)
		same := m0 & m1 & b2u(h0 == h1)
		if wide && same != 0 {
			same = b2u(s.sameData(o0, o1))
		}
		o := table[m0|m1<<1|same<<2]
		res := Result{Status: o.status, Matches: o.matches, Votes: o.votes}
		if o.status == Found {
			off := o0
			if o.second {
				off = o1
			}
			off += checksumSize
			res.Data = region[off : off+size : off+size]
		}
		results[q] = res
	}
}

// outcome2 is the result of a query with N = 2, but for the data: found in
// the first copy, or in the second when second is set.
type outcome2 struct {
	status         Status
	matches, votes uint8
	second         bool
}

// outcomes2 returns, for policy p, the outcome of every combination of
// m0 (copy 0 matches), m1 (copy 1 matches, in another slot) and same (both
// match and hold the same data), indexed by m0 | m1<<1 | same<<2. It
// applies voteSlots's rules: FirstMatch takes the first matching copy;
// otherwise p.verdict decides, two different values being a tie.
func outcomes2(p Policy) [8]outcome2 {
	one := outcome2{status: Found, matches: 1, votes: 1}
	tie := outcome2{status: Found, matches: 2, votes: 1}
	same := outcome2{status: Found, matches: 2, votes: 1}
	if p.kind != firstMatchKind {
		one.status = p.verdict(1, false)
		tie.status = p.verdict(1, true)
		same.status, same.votes = p.verdict(2, false), 2
	}
	second := one
	second.second = true
	return [8]outcome2{1: one, 2: second, 3: tie, 7: same}
}

func b2u(b bool) uint8 {
	if b {
		return 1
	}
	return 0
}
