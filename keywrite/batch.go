package keywrite

import "encoding/binary"

// batchSlots bounds the slots one round of QueryBatch reads: enough
// independent loads to keep every line-fill buffer of a core busy, few
// enough that the scratch arrays stay in L1.
const batchSlots = 128

// maxBatchKeys bounds the keys per round.
const maxBatchKeys = 64

// QueryBatch answers keys[i] into results[i] from the first n copies of each
// key with policy p, as Query would (with FirstMatch, Matches counts every
// matching slot, since all were read).
//
// It overlaps the memory misses of many queries: for each round of up to 64
// keys it computes every slot address first, then loads the checksum word of
// every slot in a loop whose loads do not depend on each other, so the CPU
// has many cache and TLB misses in flight at once, and only then compares
// and votes, from lines already in cache. On a region much larger than the
// caches this is several times faster than one Query after another.
//
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
	for len(keys) > 0 {
		k := min(per, len(keys))
		s.queryRound(keys[:k], n, p, results[:k])
		keys, results = keys[k:], results[k:]
	}
	return nil
}

// queryRound answers len(keys) <= maxBatchKeys keys; len(keys)·n may exceed
// batchSlots only when n does.
func (s *Store) queryRound(keys []uint32, n int, p Policy, results []Result) {
	var (
		sums  [maxBatchKeys]uint32
		offs  [max(batchSlots, MaxRedundancy)]uint64
		words [max(batchSlots, MaxRedundancy)]uint32
	)
	l := &s.layout
	h := l.hasher
	// Pass 1: addresses. Pure computation, no memory traffic.
	j := 0
	for k, key := range keys {
		sums[k] = h.Checksum(key)
		for i := range n {
			offs[j] = uint64(h.Slot(key, uint8(i))&l.mask) << l.slotShift
			j++
		}
	}
	// Pass 2: one independent load per slot; the misses overlap.
	region := s.region
	for i, off := range offs[:j] {
		words[i] = binary.LittleEndian.Uint32(region[off:])
	}
	// Pass 3: compare and vote from cached lines.
	var matched [MaxRedundancy]uint64
	j = 0
	for k := range keys {
		sum := sums[k]
		m := 0
		for i := range n {
			if words[j+i] == sum && !contains(matched[:m], offs[j+i]) {
				matched[m] = offs[j+i]
				m++
			}
		}
		j += n
		results[k] = s.vote(matched[:m], p)
	}
}
