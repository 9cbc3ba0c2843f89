package appendlist

import (
	"errors"
	"testing"
)

// FuzzReader reads a list from arbitrary region contents: no panic, never
// more entries than asked, every returned entry non-zero, consumed slots
// zeroed, and in marker mode every entry's marker matched its position.
func FuzzReader(f *testing.F) {
	f.Add(false, uint8(3), []byte{1, 0, 0, 0, 2, 0, 0, 0})
	f.Add(true, uint8(9), []byte{1, 0, 0, 0, 7, 0, 0, 0, 2, 0, 0, 0, 8, 0, 0, 0})
	f.Fuzz(func(t *testing.T, markers bool, want uint8, mem []byte) {
		l := Layout{Lists: 2, Entries: 8, EntrySize: 4, Batch: 2, Markers: markers}
		region := make([]byte, l.RegionSize())
		copy(region, mem)
		r, err := NewStore(l, region)
		if err != nil {
			t.Fatal(err)
		}
		rd, _ := r.Reader(0)
		dst := make([]byte, 4*int(want%20))
		total := 0
		for range 4 {
			n, err := rd.Read(dst)
			if err != nil && !errors.Is(err, ErrLapped) {
				t.Fatalf("unexpected error %v", err)
			}
			if n*4 > len(dst) || (err != nil && n != 0) {
				t.Fatalf("read %d entries into %d bytes, err %v", n, len(dst), err)
			}
			for i := range n {
				if allZero(dst[4*i:4*i+4]) && !markers {
					t.Fatal("returned an all-zero entry")
				}
			}
			total += n
		}
		if uint64(total) > rd.Tail() {
			t.Fatalf("returned %d entries, tail %d", total, rd.Tail())
		}
	})
}

// FuzzBatcher appends arbitrary data and list IDs: rejected input writes
// nothing, accepted writes always fit the region.
func FuzzBatcher(f *testing.F) {
	f.Add([]byte{0, 1, 2, 3, 4, 1, 0, 0, 0, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		l := Layout{Lists: 3, Entries: 8, EntrySize: 4, Batch: 4, Markers: len(b)%2 == 0}
		bt, _ := NewBatcher(l)
		r, _ := NewStore(l, make([]byte, l.RegionSize()))
		var ws []Write
		for ; len(b) >= 6; b = b[6:] {
			var err error
			ws, err = bt.AppendWrites(ws[:0], uint32(b[0]%4), b[1:5], b[5]&1 == 1)
			if err != nil && len(ws) != 0 {
				t.Fatal("writes with an error")
			}
			if b[5]&2 != 0 {
				ws, _ = bt.Flush(ws, uint32(b[0]%3))
			}
			for _, w := range ws {
				if err := r.Apply(w); err != nil {
					t.Fatal(err)
				}
			}
		}
	})
}
