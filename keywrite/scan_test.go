package keywrite

import (
	"errors"
	"testing"

	"github.com/dtakit/dtakit/dta/tofino"
)

func TestScanFindsEveryStoredKeyOnce(t *testing.T) {
	for _, h := range []tofino.Hasher{tofino.PerCopy, tofino.Reference} {
		for _, n := range []int{1, 2, 3} {
			l := Layout{Slots: 1 << 12, DataSize: 8, Hasher: h}
			err := l.Validate()
			if err != nil {
				t.Fatal(err)
			}
			s, _ := NewStore(l, nil)
			written := map[uint32]bool{}
			for i := range uint32(3000) { // load 0.73 per copy: many overwrites
				k := mix(i)
				if err := s.Put(k, valueOf(k, 8), n); err != nil {
					t.Fatal(err)
				}
				written[k] = true
			}
			want := map[uint32]bool{}
			for k := range written {
				if r, _ := s.Query(k, n, Plurality); r.Status != Empty {
					want[k] = true
				}
			}
			got := map[uint32]bool{}
			buf := make([]uint32, 7) // small: many resumed calls
			for next := uint64(0); next < l.Slots; {
				var c int
				c, next, err = s.Scan(next, n, buf)
				if err != nil {
					t.Fatal(err)
				}
				for _, k := range buf[:c] {
					if got[k] {
						t.Fatalf("%T n=%d: key %#x listed twice", h, n, k)
					}
					if !written[k] {
						t.Fatalf("%T n=%d: key %#x listed but never written", h, n, k)
					}
					got[k] = true
				}
			}
			if len(got) != len(want) || len(want) == 0 {
				t.Fatalf("%T n=%d: scan found %d keys, %d written keys answer", h, n, len(got), len(want))
			}
			for k := range want {
				if !got[k] {
					t.Fatalf("%T n=%d: key %#x answers but was not listed", h, n, k)
				}
			}
		}
	}
}

func TestScanErrors(t *testing.T) {
	l := Layout{Slots: 64, DataSize: 4, Hasher: tofino.XXHash}
	s, _ := NewStore(l, nil)
	if _, _, err := s.Scan(0, 1, make([]uint32, 4)); !errors.Is(err, ErrScan) {
		t.Fatalf("XXHash scan: %v, want ErrScan", err)
	}
	l = Layout{Slots: 64, DataSize: 4}
	s, _ = NewStore(l, nil)
	if _, _, err := s.Scan(65, 1, make([]uint32, 4)); !errors.Is(err, ErrScan) {
		t.Fatalf("scan from past the end: %v, want ErrScan", err)
	}
	if _, _, err := s.Scan(0, 0, make([]uint32, 4)); !errors.Is(err, ErrRedundancy) {
		t.Fatalf("scan n=0: %v, want ErrRedundancy", err)
	}
	if c, next, err := s.Scan(64, 1, make([]uint32, 4)); c != 0 || next != 64 || err != nil {
		t.Fatalf("scan at the end: %d %d %v", c, next, err)
	}
	// A slot holding a checksum at a place that is none of its key's copies
	// (a torn or foreign write) is not listed.
	k := uint32(42)
	off := l.Offset(k, 0) ^ uint64(l.SlotSize()) // a neighbour slot
	copy(s.Region()[off:], []byte{byte(l.Checksum(k)), byte(l.Checksum(k) >> 8), byte(l.Checksum(k) >> 16), byte(l.Checksum(k) >> 24)})
	if c, _, _ := s.Scan(0, 1, make([]uint32, 4)); c != 0 {
		t.Fatalf("a misplaced checksum was listed")
	}
}

func TestSnapshot(t *testing.T) {
	l := Layout{Slots: 256, DataSize: 4}
	s, _ := NewStore(l, nil)
	s.Put(7, []byte{1, 2, 3, 4}, 2)
	snap, _ := NewStore(l, nil)
	if err := s.Snapshot(snap); err != nil {
		t.Fatal(err)
	}
	s.Put(7, []byte{9, 9, 9, 9}, 2)
	if r, _ := snap.Query(7, 2, Plurality); r.Status != Found || string(r.Data) != "\x01\x02\x03\x04" {
		t.Fatalf("snapshot lost the epoch's value: %+v", r)
	}
	if r, _ := s.Query(7, 2, Plurality); string(r.Data) != "\x09\x09\x09\x09" {
		t.Fatalf("live store: %+v", r)
	}
	other := Layout{Slots: 512, DataSize: 4}
	o, _ := NewStore(other, nil)
	if err := s.Snapshot(o); !errors.Is(err, ErrSnapshot) {
		t.Fatalf("snapshot into another layout: %v", err)
	}
	buf := make([]uint32, 8)
	if a := testing.AllocsPerRun(10, func() { s.Scan(0, 2, buf) }); a != 0 {
		t.Fatalf("Scan allocates: %v", a)
	}
}

func BenchmarkScan(b *testing.B) {
	l := Layout{Slots: 1 << 20, DataSize: 4}
	s, _ := NewStore(l, nil)
	for i := range uint32(1 << 19) {
		s.Put(mix(i), valueOf(mix(i), 4), 2)
	}
	keys := make([]uint32, 4096)
	b.ResetTimer()
	slots := 0
	for range b.N {
		for next := uint64(0); next < l.Slots; {
			_, next, _ = s.Scan(next, 2, keys)
		}
		slots += int(l.Slots)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(slots), "ns/slot")
}
