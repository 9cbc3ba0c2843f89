package keywrite

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"math"
	"math/bits"
	"testing"

	"github.com/dtakit/dtakit/dta/tofino"
)

func TestLayout(t *testing.T) {
	for _, tc := range []struct {
		slots    uint64
		data     int
		slotSize int
	}{
		{1, 4, 8}, {1 << 10, 4, 8}, {1 << 10, 8, 16}, {1 << 10, 12, 16},
		{1 << 10, 28, 32}, {1 << 10, 60, 64}, {1 << 10, 64, 128}, {1 << 32, 4, 8},
	} {
		l := Layout{Slots: tc.slots, DataSize: tc.data}
		err := l.Validate()
		if err != nil {
			t.Fatalf("Layout{Slots: %d, DataSize: %d}: %v", tc.slots, tc.data, err)
		}
		if l.SlotSize() != tc.slotSize || l.Slots != tc.slots || l.DataSize != tc.data ||
			l.PayloadSize() != 4+tc.data || l.RegionSize() != tc.slots*uint64(tc.slotSize) {
			t.Errorf("Layout{Slots: %d, DataSize: %d} = slots %d, slot size %d, region %d; want slot size %d",
				tc.slots, tc.data, l.Slots, l.SlotSize(), l.RegionSize(), tc.slotSize)
		}
	}
	for _, tc := range []struct {
		slots uint64
		data  int
	}{
		{0, 4}, {3, 4}, {1<<20 + 1, 4}, {1 << 33, 4}, {1 << 10, 0}, {1 << 10, 3}, {1 << 10, -4}, {1 << 10, 6},
	} {
		if err := (Layout{Slots: tc.slots, DataSize: tc.data}).Validate(); !errors.Is(err, ErrLayout) {
			t.Errorf("Layout{Slots: %d, DataSize: %d} error = %v, want ErrLayout", tc.slots, tc.data, err)
		}
	}
	if err := (Layout{}).Validate(); !errors.Is(err, ErrLayout) {
		t.Errorf("zero Layout: error = %v, want ErrLayout", err)
	}
	if s := mustStore(t, Layout{Slots: 16, DataSize: 4}, nil); s.Layout().Hasher != tofino.PerCopy {
		t.Errorf("a nil hasher is %T in the store, want tofino.PerCopy", s.Layout().Hasher)
	}
}

// crc32Copy computes copy n's slot hash with hash/crc32, independently of
// the tofino package: under reference addressing CRC-32/IEEE, under
// per-copy addressing the same CRC with polynomial tofino.CopyPolynomial(n)
// (hash/crc32 takes it reflected).
func crc32Copy(perCopy bool, le []byte, n uint8) uint32 {
	in := append(le[:4:4], n)
	if !perCopy {
		return crc32.ChecksumIEEE(in)
	}
	return crc32.Checksum(in, crc32.MakeTable(bits.Reverse32(tofino.CopyPolynomial(n))))
}

// TestAppendWritesGolden recomputes every byte of a translation with
// hash/crc32, independently of the package's addressing code, for the
// default (per-copy) and the reference addressing.
func TestAppendWritesGolden(t *testing.T) {
	for _, tc := range []struct {
		name    string
		hasher  tofino.Hasher
		perCopy bool
	}{{"default", nil, true}, {"reference", tofino.Reference, false}} {
		l := Layout{Slots: 1 << 12, DataSize: 12, Hasher: tc.hasher}
		key := uint32(0x0a0b0c0d)
		data := []byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}
		ops, buf, err := l.AppendWrites(make([]Write, 0, 3), make([]byte, 0, 16), key, data, 3)
		if err != nil {
			t.Fatal(err)
		}
		le := []byte{0x0d, 0x0c, 0x0b, 0x0a}
		want := binary.LittleEndian.AppendUint32(nil, crc32.ChecksumIEEE(le))
		want = append(want, data...)
		if !bytes.Equal(buf, want) {
			t.Errorf("%s: payload = % x, want % x", tc.name, buf, want)
		}
		if len(ops) != 3 {
			t.Fatalf("%s: %d writes, want 3", tc.name, len(ops))
		}
		for n, w := range ops {
			slot := uint64(crc32Copy(tc.perCopy, le, uint8(n)) & (1<<12 - 1))
			if w.Offset != slot*16 {
				t.Errorf("%s: copy %d at offset %d, want %d", tc.name, n, w.Offset, slot*16)
			}
			if !bytes.Equal(w.Data, want) {
				t.Errorf("%s: copy %d payload = % x, want % x", tc.name, n, w.Data, want)
			}
		}
		offs, err := l.AppendOffsets(nil, key, 3)
		if err != nil {
			t.Fatal(err)
		}
		for n := range ops {
			if offs[n] != ops[n].Offset || l.Offset(key, uint8(n)) != ops[n].Offset || l.Slot(key, uint8(n))*16 != ops[n].Offset {
				t.Errorf("%s: copy %d: AppendOffsets/Offset/Slot disagree with AppendWrites", tc.name, n)
			}
		}
	}
}

func TestTranslateBadInput(t *testing.T) {
	l := mustLayout(t, 1<<8, 4)
	ops0, buf0 := make([]Write, 1, 4), make([]byte, 2, 16)
	for _, tc := range []struct {
		n    int
		data []byte
		want error
	}{
		{0, []byte{1, 2, 3, 4}, ErrRedundancy},
		{256, []byte{1, 2, 3, 4}, ErrRedundancy},
		{-1, []byte{1, 2, 3, 4}, ErrRedundancy},
		{2, []byte{1, 2, 3}, ErrDataSize},
		{2, []byte{1, 2, 3, 4, 5, 6, 7, 8}, ErrDataSize},
		{2, nil, ErrDataSize},
	} {
		ops, buf, err := l.AppendWrites(ops0, buf0, 7, tc.data, tc.n)
		if !errors.Is(err, tc.want) {
			t.Errorf("AppendWrites(n=%d, %d data bytes) error = %v, want %v", tc.n, len(tc.data), err, tc.want)
		}
		if len(ops) != 1 || len(buf) != 2 {
			t.Errorf("AppendWrites(n=%d, %d data bytes) changed its buffers on error", tc.n, len(tc.data))
		}
		if _, err := l.AppendOffsets(nil, 7, tc.n); tc.want == ErrRedundancy && !errors.Is(err, ErrRedundancy) {
			t.Errorf("AppendOffsets(n=%d) error = %v, want ErrRedundancy", tc.n, err)
		}
		s := mustStore(t, l, nil)
		if err := s.Put(7, tc.data, tc.n); !errors.Is(err, tc.want) {
			t.Errorf("Put(n=%d, %d data bytes) error = %v, want %v", tc.n, len(tc.data), err, tc.want)
		}
	}
}

func TestNewStoreRegion(t *testing.T) {
	l := mustLayout(t, 1<<8, 4)
	if _, err := NewStore(l, make([]byte, l.RegionSize()-1)); !errors.Is(err, ErrRegion) {
		t.Errorf("short region: error = %v, want ErrRegion", err)
	}
	if _, err := NewStore(l, []byte{}); !errors.Is(err, ErrRegion) {
		t.Errorf("empty region: error = %v, want ErrRegion", err)
	}
	if _, err := NewStore(Layout{}, nil); !errors.Is(err, ErrLayout) {
		t.Errorf("zero layout: error = %v, want ErrLayout", err)
	}
	s := mustStore(t, l, nil)
	if uint64(len(s.Region())) != l.RegionSize() {
		t.Errorf("allocated region of %d bytes, want %d", len(s.Region()), l.RegionSize())
	}
	big := make([]byte, l.RegionSize()+100)
	s = mustStore(t, l, big)
	if uint64(len(s.Region())) != l.RegionSize() || &s.Region()[0] != &big[0] {
		t.Error("store does not use the prefix of the caller's region")
	}
	// Nothing may reach the bytes past the layout.
	if err := s.Apply(Write{Offset: l.RegionSize() - 4, Data: []byte{1, 2, 3, 4, 5}}); !errors.Is(err, ErrOutOfRegion) {
		t.Errorf("write past layout: error = %v, want ErrOutOfRegion", err)
	}
	if !bytes.Equal(big[l.RegionSize()-4:], make([]byte, 104)) {
		t.Error("a refused write changed the region")
	}
}

func TestApplyBounds(t *testing.T) {
	l := mustLayout(t, 1<<4, 4)
	s := mustStore(t, l, nil)
	size := l.RegionSize()
	for _, w := range []Write{
		{Offset: size, Data: []byte{1}},
		{Offset: size - 3, Data: []byte{1, 2, 3, 4}},
		{Offset: math.MaxUint64, Data: []byte{1}},
		{Offset: math.MaxUint64 - 2, Data: []byte{1, 2, 3, 4}},
	} {
		if err := s.Apply(w); !errors.Is(err, ErrOutOfRegion) {
			t.Errorf("Apply(offset %d, %d bytes) error = %v, want ErrOutOfRegion", w.Offset, len(w.Data), err)
		}
	}
	if err := s.Apply(Write{Offset: size, Data: nil}); err != nil {
		t.Errorf("empty write at the end: %v", err)
	}
	if err := s.Apply(Write{Offset: size - 4, Data: []byte{9, 9, 9, 9}}); err != nil {
		t.Errorf("last word: %v", err)
	}
	before := bytes.Clone(s.Region())
	err := s.ApplyWrites([]Write{{Offset: 0, Data: []byte{7}}, {Offset: size, Data: []byte{7}}})
	if !errors.Is(err, ErrOutOfRegion) || !bytes.Equal(before, s.Region()) {
		t.Errorf("ApplyWrites with one bad write: error = %v, region changed = %v; want ErrOutOfRegion, unchanged",
			err, !bytes.Equal(before, s.Region()))
	}
	if !bytes.Equal(s.Region()[size-4:], []byte{9, 9, 9, 9}) {
		t.Error("last word not written")
	}
}

func TestPutMatchesApply(t *testing.T) {
	l := mustLayout(t, 1<<10, 12)
	a, b := mustStore(t, l, nil), mustStore(t, l, nil)
	var ops []Write
	var buf []byte
	for i := range uint32(3000) {
		key, n := mix(i), int(i%5)+1
		data := valueOf(key, 12)
		if err := a.Put(key, data, n); err != nil {
			t.Fatal(err)
		}
		var err error
		ops, buf, err = l.AppendWrites(ops[:0], buf[:0], key, data, n)
		if err != nil {
			t.Fatal(err)
		}
		if err := b.ApplyWrites(ops); err != nil {
			t.Fatal(err)
		}
	}
	if !bytes.Equal(a.Region(), b.Region()) {
		t.Error("Put and ApplyWrites(AppendWrites) wrote different memory")
	}
}

// forge writes key's checksum with data into copy n's slot, as a colliding
// key would.
func forge(t *testing.T, s *Store, key uint32, n uint8, data []byte) {
	t.Helper()
	l := s.Layout()
	payload, err := l.AppendPayload(nil, key, data)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Apply(Write{Offset: l.Offset(key, n), Data: payload}); err != nil {
		t.Fatal(err)
	}
}

// distinctKey returns a key whose first n copies land in distinct slots.
func distinctKey(l Layout, n int) uint32 {
	for i := uint32(0); ; i++ {
		seen := map[uint64]bool{}
		for c := range n {
			seen[l.Slot(mix(i), uint8(c))] = true
		}
		if len(seen) == n {
			return mix(i)
		}
	}
}

func TestQueryPolicies(t *testing.T) {
	l := mustLayout(t, 1<<12, 8)
	s := mustStore(t, l, nil)
	key := distinctKey(l, 5)
	v := []byte("value-v!")
	w := []byte("value-w!")
	u := []byte("value-u!")
	check := func(name string, n int, p Policy, status Status, data []byte, matches, votes uint8) {
		t.Helper()
		r, err := s.Query(key, n, p)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if r.Status != status || !bytes.Equal(r.Data, data) || r.Matches != matches || r.Votes != votes {
			t.Errorf("%s: Query(n=%d, %v) = %v %q matches %d votes %d; want %v %q matches %d votes %d",
				name, n, p, r.Status, r.Data, r.Matches, r.Votes, status, data, matches, votes)
		}
		var res [1]Result
		if err := s.QueryBatch([]uint32{key}, n, p, res[:]); err != nil {
			t.Fatalf("%s: batch: %v", name, err)
		}
		b := res[0]
		if p == FirstMatch && b.Status == Found {
			b.Matches = matches // the batch reads every copy
		}
		if b.Status != status || !bytes.Equal(b.Data, data) || b.Matches != matches || b.Votes != votes {
			t.Errorf("%s: QueryBatch(n=%d, %v) = %v %q matches %d votes %d, want as Query", name, n, p, b.Status, b.Data, b.Matches, b.Votes)
		}
	}
	check("never written", 3, Plurality, Empty, nil, 0, 0)
	check("never written, consensus", 3, Consensus(1), Empty, nil, 0, 0)

	if err := s.Put(key, v, 3); err != nil {
		t.Fatal(err)
	}
	check("intact", 3, Plurality, Found, v, 3, 3)
	check("intact, first", 3, FirstMatch, Found, v, 1, 1)
	check("intact, consensus 3", 3, Consensus(3), Found, v, 3, 3)
	check("intact, consensus 4", 3, Consensus(4), NoConsensus, nil, 3, 3)
	check("query N above report N", 5, Plurality, Found, v, 3, 3)
	check("query N below report N", 2, Plurality, Found, v, 2, 2)

	forge(t, s, key, 0, w) // copy 0 now holds w under key's checksum
	check("2 v, 1 w", 3, Plurality, Found, v, 3, 2)
	check("2 v, 1 w, first match", 3, FirstMatch, Found, w, 1, 1)
	check("2 v, 1 w, consensus 2", 3, Consensus(2), Found, v, 3, 2)
	check("2 v, 1 w, consensus 3", 3, Consensus(3), NoConsensus, nil, 3, 2)
	check("1 w, 1 v: tie", 2, Plurality, Ambiguous, nil, 2, 1)
	forge(t, s, key, 2, u)
	check("w, v, u: three-way tie", 3, Plurality, Ambiguous, nil, 3, 1)
	forge(t, s, key, 3, w)
	check("w, v, u, w", 4, Plurality, Found, w, 4, 2)

	// Overwrite every copy with another key's bytes: no checksum matches.
	other := mustLayout(t, 1<<12, 8)
	for c := range uint8(5) {
		payload, _ := other.AppendPayload(nil, key+1, v)
		if err := s.Apply(Write{Offset: l.Offset(key, c), Data: payload}); err != nil {
			t.Fatal(err)
		}
	}
	check("all overwritten", 5, Plurality, Empty, nil, 0, 0)
	check("all overwritten, first", 5, FirstMatch, Empty, nil, 0, 0)
}

// TestQueryDuplicateSlots checks that copies landing in the same slot count
// once. With reference addressing, copy n's slot is copy 0's XOR a constant
// (CRC is affine); with 4 slots copy 2's constant masks to 0.
func TestQueryDuplicateSlots(t *testing.T) {
	l := Layout{Slots: 4, DataSize: 4, Hasher: tofino.Reference}
	s := mustStore(t, l, nil)
	key := uint32(0x1234)
	if l.Slot(key, 0) != l.Slot(key, 2) || l.Slot(key, 0) == l.Slot(key, 1) {
		t.Fatalf("slots %d %d %d: want copies 0 and 2 together, 1 apart", l.Slot(key, 0), l.Slot(key, 1), l.Slot(key, 2))
	}
	if err := s.Put(key, []byte{1, 2, 3, 4}, 3); err != nil {
		t.Fatal(err)
	}
	r, err := s.Query(key, 3, Consensus(3))
	if err != nil {
		t.Fatal(err)
	}
	if r.Status != NoConsensus || r.Matches != 2 || r.Votes != 2 {
		t.Errorf("3 copies in 2 slots: %v matches %d votes %d, want no-consensus 2 2", r.Status, r.Matches, r.Votes)
	}
}

func TestQueryBadInput(t *testing.T) {
	s := mustStore(t, mustLayout(t, 1<<4, 4), nil)
	res := make([]Result, 4)
	for _, n := range []int{0, -1, 256, 1000} {
		if _, err := s.Query(1, n, Plurality); !errors.Is(err, ErrRedundancy) {
			t.Errorf("Query(n=%d) error = %v, want ErrRedundancy", n, err)
		}
		if err := s.QueryBatch([]uint32{1}, n, Plurality, res); !errors.Is(err, ErrRedundancy) {
			t.Errorf("QueryBatch(n=%d) error = %v, want ErrRedundancy", n, err)
		}
	}
	for _, th := range []int{0, -3, 256} {
		if _, err := s.Query(1, 2, Consensus(th)); !errors.Is(err, ErrPolicy) {
			t.Errorf("Consensus(%d) error = %v, want ErrPolicy", th, err)
		}
		if err := s.QueryBatch([]uint32{1}, 2, Consensus(th), res); !errors.Is(err, ErrPolicy) {
			t.Errorf("batch Consensus(%d) error = %v, want ErrPolicy", th, err)
		}
	}
	if err := s.QueryBatch(make([]uint32, 5), 2, Plurality, res); !errors.Is(err, ErrResults) {
		t.Errorf("short results: error = %v, want ErrResults", err)
	}
}

// TestQueryBatchMatchesQuery compares the batch path with single queries on
// crowded stores (collisions, ties, duplicates), for every policy and a
// range of N including ones that split rounds oddly. It covers both of
// QueryBatch's addressing paths (the default hasher called directly, any
// other through the interface) and data wider than a slot's 8-byte head,
// with values that agree in their first 4 bytes and differ after.
func TestQueryBatchMatchesQuery(t *testing.T) {
	for _, c := range []struct {
		name     string
		hasher   tofino.Hasher
		dataSize int
		keys     uint32
	}{
		{"trunc6/data=4", truncHasher{tofino.Reference, 6}, 4, 1500},
		{"trunc6/data=12", truncHasher{tofino.Reference, 6}, 12, 1500},
		{"percopy/data=4", tofino.PerCopy, 4, 1500},
		{"percopy/data=12", tofino.PerCopy, 12, 1500},
		{"percopy/data=4/light", tofino.PerCopy, 4, 300},
	} {
		t.Run(c.name, func(t *testing.T) {
			l := Layout{Slots: 1 << 10, DataSize: c.dataSize, Hasher: c.hasher}
			s := mustStore(t, l, nil)
			for i := range c.keys {
				key := mix(i)
				v := valueOf(key%7, c.dataSize)
				if c.dataSize > 4 {
					copy(v, "same") // only the bytes past the head differ
				}
				if err := s.Put(key, v, int(i%4)+1); err != nil {
					t.Fatal(err)
				}
			}
			keys := make([]uint32, 300)
			for i := range keys {
				keys[i] = mix(uint32(i * 7)) // written and never-written keys
			}
			// Rewrite copy 0 of every fifth key with other data under
			// its checksum, as a colliding key with a 32-bit checksum
			// collision would: ties at N = 2.
			for i := 0; i < len(keys); i += 5 {
				v := valueOf(keys[i]+1, c.dataSize)
				if c.dataSize > 4 {
					copy(v, "same")
				}
				forge(t, s, keys[i], 0, v)
			}
			res := make([]Result, len(keys))
			statuses := map[Status]int{}
			for _, p := range []Policy{Plurality, FirstMatch, Consensus(1), Consensus(2), Consensus(3)} {
				for _, n := range []int{1, 2, 3, 5, 7, 64, 100, 255} {
					if err := s.QueryBatch(keys, n, p, res); err != nil {
						t.Fatal(err)
					}
					for i, key := range keys {
						r, err := s.Query(key, n, p)
						if err != nil {
							t.Fatal(err)
						}
						b := res[i]
						if p == FirstMatch {
							b.Matches, r.Matches = 0, 0
						}
						if b.Status != r.Status || !bytes.Equal(b.Data, r.Data) || b.Matches != r.Matches || b.Votes != r.Votes {
							t.Fatalf("key %#x n=%d %v: batch %+v, single %+v", key, n, p, b, r)
						}
						if n == 2 {
							statuses[r.Status]++
						}
					}
				}
			}
			// The N = 2 path met every outcome it has a branch for.
			for _, st := range []Status{Found, Empty, Ambiguous, NoConsensus} {
				if statuses[st] == 0 {
					t.Errorf("no %v result at N = 2: %v", st, statuses)
				}
			}
		})
	}
}

func TestAllocs(t *testing.T) {
	l := mustLayout(t, 1<<12, 4)
	s := mustStore(t, l, nil)
	data := []byte{1, 2, 3, 4}
	ops := make([]Write, 0, 8)
	buf := make([]byte, 0, 8)
	keys := make([]uint32, 100)
	for i := range keys {
		keys[i] = mix(uint32(i))
		_ = s.Put(keys[i], data, 2)
	}
	res := make([]Result, len(keys))
	offs := make([]uint64, 0, 8)
	for name, f := range map[string]func(){
		"AppendWrites":  func() { ops, buf, _ = l.AppendWrites(ops[:0], buf[:0], 5, data, 4) },
		"AppendOffsets": func() { offs, _ = l.AppendOffsets(offs[:0], 5, 4) },
		"Put":           func() { _ = s.Put(5, data, 4) },
		"Apply":         func() { _ = s.Apply(Write{Offset: 8, Data: data}) },
		"ApplyWrites":   func() { _ = s.ApplyWrites(ops) },
		"Query":         func() { _, _ = s.Query(keys[3], 2, Plurality) },
		"QueryFirst":    func() { _, _ = s.Query(keys[3], 2, FirstMatch) },
		"QueryWide":     func() { _, _ = s.Query(keys[3], 64, Plurality) },
		"QueryBatch":    func() { _ = s.QueryBatch(keys, 2, Plurality, res) },
		"QueryBad":      func() { _, _ = s.Query(keys[3], 0, Plurality) },
		"PutBad":        func() { _ = s.Put(5, data[:3], 2) },
	} {
		if a := testing.AllocsPerRun(100, f); a != 0 {
			t.Errorf("%s: %v allocs per run, want 0", name, a)
		}
	}
}

// TestChecksumIsBijection checks the property that makes wrong outputs
// impossible with tofino.Reference's 32-bit checksums: distinct keys never
// share a checksum (CRC-32 of a 32-bit message is a bijection).
func TestChecksumIsBijection(t *testing.T) {
	n := 1 << 20
	if testing.Short() {
		n = 1 << 16
	}
	seen := make(map[uint32]uint32, n)
	h := tofino.Reference
	for i := range uint32(n) {
		key := mix(i)
		c := h.Checksum(key)
		if k, dup := seen[c]; dup {
			t.Fatalf("keys %#x and %#x share checksum %#x", k, key, c)
		}
		seen[c] = key
	}
}

// FuzzStore applies arbitrary writes to a small store and queries it: never
// a panic, never a byte changed outside the write, and queries on whatever
// the memory holds agree between the single and batch paths.
func FuzzStore(f *testing.F) {
	f.Add(uint64(0), []byte{1, 2, 3, 4, 5, 6, 7, 8}, uint32(7), uint8(2))
	f.Add(uint64(120), []byte{9, 9, 9, 9, 9, 9, 9, 9, 9}, uint32(1), uint8(255))
	f.Add(uint64(math.MaxUint64), []byte{1}, uint32(0), uint8(0))
	f.Fuzz(func(t *testing.T, off uint64, payload []byte, key uint32, n uint8) {
		l := mustLayout(t, 16, 4)
		backing := make([]byte, l.RegionSize()+16)
		s := mustStore(t, l, backing)
		// Seed the region with key's copies so queries have something to find.
		_ = s.Put(key, []byte{1, 2, 3, 4}, 3)
		before := bytes.Clone(backing)
		err := s.Apply(Write{Offset: off, Data: payload})
		fits := off <= l.RegionSize() && uint64(len(payload)) <= l.RegionSize()-off
		if (err == nil) != fits {
			t.Fatalf("Apply(offset %d, %d bytes): error %v", off, len(payload), err)
		}
		for i := range backing {
			inWrite := fits && uint64(i) >= off && uint64(i) < off+uint64(len(payload))
			if !inWrite && backing[i] != before[i] {
				t.Fatalf("byte %d changed by a write at %d of %d bytes", i, off, len(payload))
			}
		}
		for _, p := range []Policy{Plurality, FirstMatch, Consensus(2)} {
			r, err := s.Query(key, int(n), p)
			if (err != nil) != (n == 0) {
				t.Fatalf("Query(n=%d): %v", n, err)
			}
			var res [1]Result
			if err := s.QueryBatch([]uint32{key}, int(n), p, res[:]); (err != nil) != (n == 0) {
				t.Fatalf("QueryBatch(n=%d): %v", n, err)
			}
			if res[0].Status != r.Status || !bytes.Equal(res[0].Data, r.Data) {
				t.Fatalf("n=%d %v: batch %+v, single %+v", n, p, res[0], r)
			}
		}
	})
}

// AppendCopy is AppendWrites' copy c alone, and refuses a copy outside
// 0..n-1.
func TestAppendCopy(t *testing.T) {
	l := Layout{Slots: 1 << 10, DataSize: 4}
	data := []byte{1, 2, 3, 4}
	all, _, err := l.AppendWrites(nil, nil, 77, data, 5)
	if err != nil {
		t.Fatal(err)
	}
	for c := range 5 {
		one, _, err := l.AppendCopy(nil, nil, 77, data, 5, c)
		if err != nil || len(one) != 1 || one[0].Offset != all[c].Offset || !bytes.Equal(one[0].Data, all[c].Data) {
			t.Fatalf("copy %d: %+v %v, AppendWrites %+v", c, one, err, all[c])
		}
	}
	for _, c := range []struct{ n, c int }{{5, 5}, {5, -1}, {0, 0}, {256, 0}} {
		if _, _, err := l.AppendCopy(nil, nil, 77, data, c.n, c.c); !errors.Is(err, ErrRedundancy) {
			t.Fatalf("copy %d of %d: %v", c.c, c.n, err)
		}
	}
	if _, _, err := l.AppendCopy(nil, nil, 77, data[:3], 2, 0); !errors.Is(err, ErrDataSize) {
		t.Fatalf("short data: %v", err)
	}
}
