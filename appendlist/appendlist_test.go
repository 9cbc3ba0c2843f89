package appendlist

import (
	"context"
	"encoding/binary"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"
)

type rig struct {
	l  Layout
	b  *Batcher
	r  *Store
	ws []Write
}

func newRig(t testing.TB, l Layout) *rig {
	t.Helper()
	b, err := NewBatcher(l)
	if err != nil {
		t.Fatal(err)
	}
	r, err := NewStore(l, make([]byte, l.RegionSize()))
	if err != nil {
		t.Fatal(err)
	}
	return &rig{l: l.withDefaults(), b: b, r: r}
}

const mix = 0xA5A5A5A5

func value(b []byte) uint32 { return binary.LittleEndian.Uint32(b) ^ mix }

func entry(e int, v uint32) []byte {
	d := make([]byte, e)
	binary.LittleEndian.PutUint32(d, v^mix) // never all zero, also for v = 0
	for i := 4; i < e; i++ {
		d[i] = byte(i)
	}
	return d
}

func (g *rig) appendN(t testing.TB, list uint32, from, n uint32, imm bool) {
	t.Helper()
	for v := from; v < from+n; v++ {
		var err error
		g.ws, err = g.b.AppendWrites(g.ws[:0], list, entry(g.l.EntrySize, v), imm)
		if err != nil {
			t.Fatal(err)
		}
		g.apply(t)
	}
}

func (g *rig) apply(t testing.TB) {
	t.Helper()
	for _, w := range g.ws {
		if err := g.r.Apply(w); err != nil {
			t.Fatal(err)
		}
	}
}

// readAll drains rd and checks the values are from, from+1, ...
func readAll(t testing.TB, rd *Reader, e int, from uint32) uint32 {
	t.Helper()
	dst := make([]byte, 7*e) // odd size: runs split across calls
	for {
		n, err := rd.Read(dst)
		if err != nil {
			t.Fatalf("Read: %v", err)
		}
		for i := range n {
			if got := value(dst[i*e:]); got != from {
				t.Fatalf("entry %d, want %d", got, from)
			}
			from++
		}
		if n == 0 {
			return from
		}
	}
}

func TestAppendReadInOrder(t *testing.T) {
	for _, l := range []Layout{
		{Lists: 3, Entries: 16, EntrySize: 4, Batch: 4},
		{Lists: 2, Entries: 64, EntrySize: 12, Batch: 8, Markers: true},
		{Lists: 1, Entries: 8, EntrySize: 4, Batch: 1},
		{Lists: 2, Entries: 32, EntrySize: 4, Batch: 32, Markers: true},
	} {
		g := newRig(t, l)
		rd, err := g.r.Reader(1 % uint32(l.Lists))
		if err != nil {
			t.Fatal(err)
		}
		list := rd.list
		next := uint32(0)
		for round := range 10 {
			n := uint32(min(l.Entries, l.withDefaults().Batch*(1+round%3)))
			g.appendN(t, list, next, n, false)
			got := readAll(t, rd, l.EntrySize, next)
			if got != next+n {
				t.Fatalf("%+v: read up to %d, want %d", l, got, next+n)
			}
			next = got
		}
		for _, b := range g.r.Region() {
			if b != 0 {
				t.Fatalf("%+v: consumed entries not zeroed", l)
			}
		}
	}
}

func TestBatchingAndHead(t *testing.T) {
	g := newRig(t, Layout{Lists: 4, Entries: 16, EntrySize: 8, Batch: 4})
	for i := range 3 {
		ws, err := g.b.AppendWrites(nil, 2, entry(8, uint32(i+1)), false)
		if err != nil || len(ws) != 0 {
			t.Fatalf("entry %d: %d writes, %v; want held back", i, len(ws), err)
		}
	}
	if g.b.Pending(2) != 3 {
		t.Fatalf("pending %d", g.b.Pending(2))
	}
	ws, _ := g.b.AppendWrites(nil, 2, entry(8, 4), false)
	if len(ws) != 1 || ws[0].Offset != 2*16*8 || len(ws[0].Data) != 32 || ws[0].Imm {
		t.Fatalf("batch write %+v, want 32 bytes at list 2's base %d", ws, 2*16*8)
	}
	// Four batches wrap the head back to the list's base.
	for i := range 12 {
		ws, _ = g.b.AppendWrites(ws[:0], 2, entry(8, uint32(i+5)), false)
	}
	if len(ws) != 1 || ws[0].Offset != 2*16*8+12*8 || g.b.Head(2) != 16 {
		t.Fatalf("4th batch at %d, head %d", ws[0].Offset, g.b.Head(2))
	}
	ws, _ = g.b.AppendWrites(ws[:0], 2, entry(8, 99), false)
	ws, _ = g.b.AppendWrites(ws[:0], 2, entry(8, 99), false)
	ws, _ = g.b.AppendWrites(ws[:0], 2, entry(8, 99), false)
	ws, _ = g.b.AppendWrites(ws[:0], 2, entry(8, 99), false)
	if len(ws) != 1 || ws[0].Offset != 2*16*8 {
		t.Fatalf("5th batch at %d, want the list's base after wrapping", ws[0].Offset)
	}
}

func TestPartialFlushKeepsReaderWorking(t *testing.T) {
	for _, markers := range []bool{false, true} {
		g := newRig(t, Layout{Lists: 1, Entries: 16, EntrySize: 4, Batch: 4, Markers: markers})
		rd, _ := g.r.Reader(0)
		next := uint32(1)
		// 3 entries flushed: head at 3, the next batches are unaligned and
		// one crosses the ring's end as two writes.
		g.appendN(t, 0, next, 3, false)
		var err error
		g.ws, err = g.b.Flush(g.ws[:0], 0)
		if err != nil || len(g.ws) != 1 || len(g.ws[0].Data) != 3*g.l.SlotSize() {
			t.Fatalf("flush: %v, %+v", err, g.ws)
		}
		g.apply(t)
		next = readAll(t, rd, 4, next)
		split := false
		for round := range 8 {
			for v := next; v < next+4; v++ {
				imm := round%2 == 1
				g.ws, _ = g.b.AppendWrites(g.ws[:0], 0, entry(4, v), imm)
				if len(g.ws) == 2 {
					split = true
					if g.ws[0].Imm || g.ws[1].Imm != imm || g.ws[1].Offset != 0 {
						t.Errorf("split batch: %+v; immediate belongs on the last write", g.ws)
					}
				}
				g.apply(t)
			}
			got := readAll(t, rd, 4, next)
			if got != next+4 {
				t.Fatalf("markers=%v round %d: read to %d, want %d", markers, round, got, next+4)
			}
			next = got
		}
		if !split {
			t.Error("no batch crossed the ring's end")
		}
		if ws := g.b.FlushAll(nil); len(ws) != 0 {
			t.Errorf("FlushAll with nothing pending wrote %d", len(ws))
		}
	}
}

func TestBadInput(t *testing.T) {
	l := Layout{Lists: 2, Entries: 8, EntrySize: 8, Batch: 2}
	g := newRig(t, l)
	for _, tc := range []struct {
		list uint32
		data []byte
		want error
	}{
		{2, entry(8, 1), ErrList},
		{1 << 31, entry(8, 1), ErrList},
		{0, entry(4, 1), ErrData},
		{0, make([]byte, 12), ErrData},
		{0, make([]byte, 8), ErrData}, // all zero
	} {
		if ws, err := g.b.AppendWrites(nil, tc.list, tc.data, false); !errors.Is(err, tc.want) || len(ws) != 0 {
			t.Errorf("Append(%d, %d bytes) = %v, want %v", tc.list, len(tc.data), err, tc.want)
		}
	}
	if g.b.Pending(0) != 0 {
		t.Error("rejected data was kept")
	}
	if _, err := g.b.Flush(nil, 2); !errors.Is(err, ErrList) {
		t.Error("Flush(2) accepted")
	}
	if _, err := g.r.Reader(2); !errors.Is(err, ErrList) {
		t.Error("Reader(2) accepted")
	}
	if err := g.r.Notify(2); !errors.Is(err, ErrList) {
		t.Error("Notify(2) accepted")
	}
	d := entry(8, 1)
	for _, w := range []Write{
		{Offset: 128, Data: d},              // past the end
		{Offset: 4, Data: d},                // unaligned
		{Offset: 0, Data: d[:4]},            // partial entry
		{Offset: 0, Data: nil},              // empty
		{Offset: 56, Data: append(d, d...)}, // crosses into list 1
		{Offset: ^uint64(7), Data: d},       // wraps
		{Offset: 0, Data: d, Imm: true, ImmData: 5},
	} {
		if err := g.r.Apply(w); !errors.Is(err, ErrRegion) && !errors.Is(err, ErrList) {
			t.Errorf("Apply(%d bytes at %d) = %v", len(w.Data), w.Offset, err)
		}
	}
	for _, b := range g.r.Region() {
		if b != 0 {
			t.Fatal("a rejected write touched memory")
		}
	}
	if _, err := NewStore(l, make([]byte, 127)); !errors.Is(err, ErrRegion) {
		t.Error("short region accepted")
	}
	for _, bad := range []Layout{
		{Lists: 0, Entries: 8, EntrySize: 4},
		{Lists: 1, Entries: 12, EntrySize: 4},
		{Lists: 1, Entries: 8, EntrySize: 6},
		{Lists: 1, Entries: 8, EntrySize: 0},
		{Lists: 1, Entries: 8, EntrySize: 4, Batch: 16},
		{Lists: 1, Entries: 8, EntrySize: 4, Batch: 3},
		{Lists: 1 << 24, Entries: 1 << 30, EntrySize: 4096},
	} {
		if err := bad.Validate(); !errors.Is(err, ErrLayout) {
			t.Errorf("%+v: %v, want ErrLayout", bad, err)
		}
		if _, err := NewBatcher(bad); err == nil {
			t.Errorf("%+v: NewBatcher accepted", bad)
		}
	}
	huge := Layout{Lists: 1 << 20, Entries: 1 << 12, EntrySize: 4096, Batch: 1 << 12}
	if _, err := NewBatcher(huge); !errors.Is(err, ErrLayout) {
		t.Errorf("batcher of 16 TiB of buffers: %v", err)
	}
}

func TestLapDetection(t *testing.T) {
	const E = 16
	g := newRig(t, Layout{Lists: 1, Entries: E, EntrySize: 4, Batch: 4, Markers: true})
	rd, _ := g.r.Reader(0)
	g.appendN(t, 0, 0, 8, false)
	if got := readAll(t, rd, 4, 0); got != 8 {
		t.Fatalf("read to %d", got)
	}
	// The writer runs 2.5 laps ahead: positions 8..47 written, 16 survive.
	g.appendN(t, 0, 8, 40, false)
	dst := make([]byte, 4*64)
	n, err := rd.Read(dst)
	var lap *LapError
	if n != 0 || !errors.As(err, &lap) || !errors.Is(err, ErrLapped) {
		t.Fatalf("Read = %d, %v; want a lap error", n, err)
	}
	if lap.Lost != 48-E-8 {
		t.Errorf("lost %d, want %d", lap.Lost, 48-E-8)
	}
	if got := readAll(t, rd, 4, 48-E); got != 48 {
		t.Errorf("after the loss read to %d, want 48", got)
	}
	// Lapped mid-read: entries before the loss come first.
	g.appendN(t, 0, 48, 4, false)
	n, err = rd.Read(dst[:4*2])
	if n != 2 || err != nil {
		t.Fatalf("partial read %d %v", n, err)
	}
	g.appendN(t, 0, 52, 2*E, false)
	n, err = rd.Read(dst)
	if n != 0 || !errors.As(err, &lap) || lap.Lost != (52+2*E-E)-50 {
		t.Fatalf("second lap: %d, %v", n, err)
	}
}

func TestReferenceLayoutCannotSeeLaps(t *testing.T) {
	// Documented limit: without markers a lapped reader returns the newer
	// entries as if they were next.
	g := newRig(t, Layout{Lists: 1, Entries: 8, EntrySize: 4, Batch: 4})
	rd, _ := g.r.Reader(0)
	g.appendN(t, 0, 0, 12, false)
	dst := make([]byte, 4*8)
	n, err := rd.Read(dst)
	if err != nil || n != 8 || value(dst) != 8 {
		t.Errorf("got %d entries starting %d, %v", n, binary.LittleEndian.Uint32(dst), err)
	}
}

func TestImmediateWakesReader(t *testing.T) {
	g := newRig(t, Layout{Lists: 2, Entries: 16, EntrySize: 4, Batch: 2})
	rd, _ := g.r.Reader(1)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	if err := rd.Wait(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Wait without notification = %v", err)
	}
	cancel()
	got := make(chan uint32)
	dst := make([]byte, 64)
	ctx, cancel = context.WithTimeout(context.Background(), 20*time.Millisecond)
	if n, err := rd.ReadWait(ctx, dst); n != 0 || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("ReadWait on an empty list = %d, %v", n, err)
	}
	cancel()
	go func() {
		// Wait touches no list memory, so the writes below do not race.
		if err := rd.Wait(context.Background()); err != nil {
			t.Error(err)
		}
		n, _ := rd.Read(dst)
		got <- uint32(n)
	}()
	g.appendN(t, 0, 0, 2, true) // list 0's immediate must not wake list 1
	g.appendN(t, 1, 0, 1, false)
	g.appendN(t, 1, 1, 1, true)
	if g.ws[0].Imm != true || g.ws[0].ImmData != 1 {
		t.Fatalf("write %+v, want an immediate carrying list 1", g.ws[0])
	}
	if n := <-got; n != 2 {
		t.Errorf("woken reader read %d entries, want 2", n)
	}
	// ReadWait returns written entries at once, notified or not.
	g.appendN(t, 1, 2, 2, false)
	if n, err := rd.ReadWait(context.Background(), dst); n != 2 || err != nil {
		t.Errorf("ReadWait = %d, %v; want the 2 written entries", n, err)
	}
}

func TestListsReadConcurrently(t *testing.T) {
	const lists, per = 8, 2000
	l := Layout{Lists: lists, Entries: 64, EntrySize: 8, Batch: 4, Markers: true}
	r, err := NewStore(l, make([]byte, l.RegionSize()))
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for list := range uint32(lists) {
		wg.Add(2)
		ready := make(chan struct{}, 1)
		// One writer goroutine and one reader goroutine per list; the
		// writer waits for the reader between batches so the two never
		// touch the same bytes at once (the NIC's writes are not seen by
		// the race detector; ours are).
		go func() {
			defer wg.Done()
			b, _ := NewBatcher(l)
			var ws []Write
			for v := uint32(1); v <= per; v++ {
				ws, _ = b.AppendWrites(ws[:0], list, entry(8, v), true)
				for _, w := range ws {
					if err := r.Apply(w); err != nil {
						t.Error(err)
						return
					}
				}
				if len(ws) > 0 {
					<-ready
				}
			}
		}()
		rd, err := r.Reader(list) // before the writer can notify
		if err != nil {
			t.Fatal(err)
		}
		go func() {
			defer wg.Done()
			dst := make([]byte, 8*16)
			next := uint32(1)
			for next <= per {
				if err := rd.Wait(context.Background()); err != nil {
					t.Error(err)
					return
				}
				n, err := rd.Read(dst)
				if err != nil {
					t.Error(err)
					return
				}
				for i := range n {
					if v := value(dst[8*i:]); v != next {
						t.Errorf("list %d: %d, want %d", list, v, next)
						return
					}
					next++
				}
				ready <- struct{}{}
			}
		}()
	}
	wg.Wait()
}

func TestHotPathsDoNotAllocate(t *testing.T) {
	for _, markers := range []bool{false, true} {
		l := Layout{Lists: 2, Entries: 64, EntrySize: 4, Batch: 4, Markers: markers}
		g := newRig(t, l)
		rd, _ := g.r.Reader(0)
		d := entry(4, 7)
		ws := make([]Write, 0, 2)
		dst := make([]byte, 64*4)
		if a := testing.AllocsPerRun(100, func() {
			ws, _ = g.b.AppendWrites(ws[:0], 0, d, false)
			for _, w := range ws {
				_ = g.r.Apply(w)
			}
			_, _ = rd.Read(dst)
		}); a != 0 {
			t.Errorf("markers=%v: %.1f allocs per append/apply/read", markers, a)
		}
	}
}

func TestMarkerLayoutInMemory(t *testing.T) {
	g := newRig(t, Layout{Lists: 2, Entries: 4, EntrySize: 8, Batch: 2, Markers: true})
	g.appendN(t, 1, 0, 6, false) // one lap and a half
	mem := g.r.Region()[4*12:]   // list 1: 4 slots of 12 bytes
	for slot, want := range []struct{ v, marker uint32 }{{4, 2}, {5, 2}, {2, 1}, {3, 1}} {
		s := mem[slot*12:]
		if value(s) != want.v || binary.LittleEndian.Uint32(s[8:]) != want.marker {
			t.Errorf("slot %d: value %d marker %d, want %d and %d", slot, value(s), binary.LittleEndian.Uint32(s[8:]), want.v, want.marker)
		}
	}
	for _, b := range g.r.Region()[:4*12] {
		if b != 0 {
			t.Fatal("list 0 written")
		}
	}
}

// TestHeadsRestartWriter: a new batcher that takes the heads the region
// reports continues each list where the old one stopped, so a reader that
// kept reading sees the new entries after the old, none lost or twice:
// with unread entries in memory, with everything read (slots cleared, the
// reader's tail counts), after the ring wrapped, and with the old batcher's
// partial batch lost.
func TestHeadsRestartWriter(t *testing.T) {
	l := Layout{Lists: 3, Entries: 16, EntrySize: 8, Batch: 4, Markers: true}
	g := newRig(t, l)
	g.appendN(t, 0, 0, 8, false)  // two batches, unread
	g.appendN(t, 1, 0, 40, false) // ten batches: wrapped twice
	g.appendN(t, 2, 0, 6, false)  // one batch and two pending, lost
	rd := make([]*Reader, 3)
	for i := range rd {
		var err error
		if rd[i], err = g.r.Reader(uint32(i)); err != nil {
			t.Fatal(err)
		}
	}
	next := []uint32{0, 24, 0} // list 1: the reader finds the last 16
	rd[1].tail = 24
	next[1] = readAll(t, rd[1], l.EntrySize, 24)
	heads, err := g.r.Heads(nil)
	if err != nil {
		t.Fatal(err)
	}
	if want := []uint64{8, 40, 4}; !slices.Equal(heads, want) {
		t.Fatalf("heads %v, want %v", heads, want)
	}
	// A new writer (the old one's pending entries of list 2 are gone).
	b, err := NewBatcher(l)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.AppendWrites(nil, 0, entry(l.EntrySize, 8), false); err != nil { // pending before SetHead: re-marked
		t.Fatal(err)
	}
	for i, h := range heads {
		if err := b.SetHead(uint32(i), h); err != nil {
			t.Fatal(err)
		}
	}
	g.b = b
	g.appendN(t, 0, 9, 7, false)
	g.appendN(t, 1, 40, 8, false)
	g.appendN(t, 2, 4, 4, false) // the two lost (4, 5) are sent again
	if n := readAll(t, rd[0], l.EntrySize, 0); n != 16 {
		t.Errorf("list 0 read up to %d, want 16", n)
	}
	if n := readAll(t, rd[1], l.EntrySize, next[1]); n != 48 {
		t.Errorf("list 1 read up to %d, want 48", n)
	}
	if n := readAll(t, rd[2], l.EntrySize, 0); n != 8 {
		t.Errorf("list 2 read up to %d, want 8", n)
	}
	// Everything read: the slots are clear, the readers' tails hold the heads.
	if heads, err = g.r.Heads(heads[:0]); err != nil || !slices.Equal(heads, []uint64{16, 48, 8}) {
		t.Fatalf("heads %v (%v) with every entry read, want [16 48 8]", heads, err)
	}
	// One Read that takes entries moves its list's head with it.
	g.appendN(t, 0, 16, 8, false)
	if n, err := rd[0].Read(make([]byte, 64*l.EntrySize)); n != 8 || err != nil {
		t.Fatalf("read %d (%v), want 8", n, err)
	}
	if heads, err = g.r.Heads(heads[:0]); err != nil || heads[0] != 24 {
		t.Fatalf("heads %v (%v) after one read of 8 more, want list 0 at 24", heads, err)
	}
	if _, err := (&Store{l: Layout{Lists: 1, Entries: 1, EntrySize: 4}}).Heads(nil); !errors.Is(err, ErrLayout) {
		t.Errorf("heads without markers: %v, want ErrLayout", err)
	}
}
