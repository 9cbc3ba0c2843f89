package e2e

import (
	"context"
	"encoding/binary"
	"errors"
	"net/netip"
	"testing"
	"time"

	"github.com/dtakit/dtakit/appendlist"
	"github.com/dtakit/dtakit/keywrite"
	"github.com/dtakit/dtakit/postcard"
	"github.com/dtakit/dtakit/reporter"
	"github.com/dtakit/dtakit/translator"
)

// restartSteps is the number of stream steps before and after a restart.
func restartSteps() uint32 {
	if testing.Short() {
		return 200
	}
	return 800
}

// streamPaced sends steps [from, to) of all four primitives through rep,
// applying each to m, paced by what the target executed.
func streamPaced(t *testing.T, rep *reporter.Reporter, tr *translator.Translator, s *served, m *model, from, to uint32) {
	t.Helper()
	base := reports(tr.Counters())
	sent := uint64(0)
	for k := from; k < to; k++ {
		sent += uint64(step(t, rep, m, k, sendAll))
		if k%8 == 7 || k == to-1 {
			waitReports(t, rep, tr, base+sent)
			waitApplied(t, s.c.Counters, tr)
		}
	}
}

// live returns the connections the target holds.
func live(s *served) uint64 {
	c := s.c.Counters()
	return c.Connections - c.Disconnects - c.Replaced - c.CMTimeouts
}

// TestTranslatorRestartClean closes a translator mid-stream (Close: flush,
// wait for every acknowledgement, DREQ) and starts a new one on other ports
// against the same collector: the collector drops the old connections on
// the DREQs and accepts the new ones; every report of both translators is
// in memory, byte for byte. The new translator's Append batchers start at
// the heads the collector advertises (the position a reader reached, or
// after the newest entry in memory), so a reader that read everything the
// old one wrote goes on with the new one's entries.
func TestTranslatorRestartClean(t *testing.T) {
	g := newGeometry(t)
	s := serve(t, g, anyLoopback)
	defer s.close(t)
	m := newModel(t, g)
	n := restartSteps()

	tr := startTranslator(t, translator.Config{Collectors: []netip.AddrPort{s.c.Addr()}})
	rep := newReporter(t, tr)
	streamPaced(t, rep, tr, s, m, 0, n)
	rep.Close()
	if err := tr.Close(5 * time.Second); err != nil {
		t.Fatalf("close: %v", err)
	}
	m.flush()
	m.equal(t, s)
	// Close returns once its DREQs are sent; the target handles them soon
	// after.
	waitFor(t, 2*time.Second, "the target to drop the closed translator's 4 connections", func() bool {
		return s.c.Counters().Disconnects == 4 && live(s) == 0
	})
	// A consumer reads every entry of every list (the model's readers
	// consume its region the same way).
	readers := make([]*appendlist.Reader, g.al.Lists)
	buf := make([]byte, g.al.Entries*g.al.EntrySize)
	for l := range readers {
		readers[l], _ = s.ap.Reader(uint32(l))
		mr, _ := m.ap.Reader(uint32(l))
		got, err := readers[l].Read(buf)
		want, _ := mr.Read(make([]byte, len(buf)))
		if err != nil || got != int(n)/4 || want != got {
			t.Fatalf("list %d: read %d entries (%v), want %d", l, got, err, n/4)
		}
	}

	tr2 := startTranslator(t, translator.Config{Collectors: []netip.AddrPort{s.c.Addr()}})
	if tr2.LocalAddr() == tr.LocalAddr() {
		t.Fatal("the new translator has the old one's address")
	}
	if live(s) != 4 {
		t.Errorf("%d live connections after the restart, want 4", live(s))
	}
	rep2 := newReporter(t, tr2)
	defer rep2.Close()
	// The new translator's state: an empty postcard cache, Append heads
	// where the readers are.
	m.takeHeads(t)
	m.cache, _ = postcard.NewCache(g.pc.Layout(), translator.DefaultPostcardCache)
	half := n / 2
	streamPaced(t, rep2, tr2, s, m, n, n+half)
	if err := tr2.Close(5 * time.Second); err != nil {
		t.Fatalf("close: %v", err)
	}
	m.flush()
	m.equal(t, s)
	for l, rd := range readers {
		got, err := rd.Read(buf)
		if got != int(half)/4 || err != nil || rd.Tail() != uint64(n+half)/4 {
			t.Errorf("list %d: the old reader read %d entries (%v), tail %d; want the new translator's %d, tail %d", l, got, err, rd.Tail(), half/4, (n+half)/4)
		}
	}
}

// TestTranslatorCrash cuts a translator off mid-stream (the relay drops all
// it sends and receives, so the collector hears nothing more from it, not
// even the DREQs of its Close), sends it more reports, and starts a new
// translator against the same collector, on new ports or on the crashed
// one's. The reports in flight at the crash are lost without a trace
// (accepted by the old translator, no NACK, never written); so are the
// postcards and Append entries it held back. A translator on new ports gets
// new connections beside the crashed one's, which the target keeps (they
// count against its MaxQPs); one on the same address and port replaces
// them (the target's Replaced). Either way later reports land: the
// collector's regions equal reference stores fed every report but the lost
// ones, byte for byte.
func TestTranslatorCrash(t *testing.T) {
	for _, samePort := range []bool{false, true} {
		name := "new port"
		if samePort {
			name = "same port"
		}
		t.Run(name, func(t *testing.T) { crash(t, samePort) })
	}
}

func crash(t *testing.T, samePort bool) {
	g := newGeometry(t)
	s := serve(t, g, anyLoopback)
	defer s.close(t)
	r, err := newRelay(s.c.Addr(), 3)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	m := newModel(t, g)
	n := restartSteps()

	// AppendLinger an hour (PostcardLinger too, as everywhere here): the
	// partial batches and the incomplete postcard flow stay held until the
	// crash, however slow the run.
	tr := startTranslator(t, translator.Config{Collectors: []netip.AddrPort{r.Addr()}, AppendLinger: time.Hour})
	rep := newReporter(t, tr)
	streamPaced(t, rep, tr, s, m, 0, n+1) // n+1: a postcard flow and Append entries held back
	before := s.c.Counters()

	r.setCut(true)
	const inFlight = 64
	lost := newModel(t, g) // the reports in flight, applied nowhere
	base := reports(tr.Counters())
	sent := uint64(0)
	for k := n + 1; k < n+1+inFlight; k++ {
		sent += uint64(step(t, rep, lost, k, sendAll))
	}
	waitReports(t, rep, tr, base+sent)
	rep.Close()
	tc := tr.Counters()
	if tc.NACKs != 0 || tc.Dropped != 0 {
		t.Errorf("the crashing translator refused reports: %+v", tc)
	}
	// The crash: Close's flush and DREQs go nowhere; it cannot get its
	// packets acknowledged.
	if err := tr.Close(0); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("close of the cut-off translator: %v, want a deadline error", err)
	}
	// Everything the crashed translator sent is in the relay's queue now;
	// let the relay drop it before it forwards again.
	if err := r.sync(); err != nil {
		t.Fatal(err)
	}
	r.setCut(false)
	after := s.c.Counters()
	if after.WritePackets != before.WritePackets || after.Atomics != before.Atomics || after.Disconnects != before.Disconnects {
		t.Errorf("the target heard from the crashed translator: before %+v\nafter %+v", before, after)
	}

	// The relay forwards in this process, which the crash just left with a
	// backlog: with both cores busy it has held the collector's
	// advertisement past the default wait (600 ms). A slower CM timeout
	// here keeps the test about the crash.
	cfg := translator.Config{Collectors: []netip.AddrPort{r.Addr()}, CMTimeout: 500 * time.Millisecond}
	if samePort {
		cfg.Local, cfg.ReportAddr = tr.LocalAddr(), tr.ReportAddr()
	}
	tr2 := startTranslator(t, cfg)
	cc := s.c.Counters()
	if samePort {
		if cc.Replaced != 4 || live(s) != 4 {
			t.Errorf("same port: %d connections replaced, %d live, want 4 and 4", cc.Replaced, live(s))
		}
	} else if cc.Replaced != 0 || live(s) != 8 {
		t.Errorf("new port: %d connections replaced, %d live, want 0 and 8 (the crashed translator's stay): %+v", cc.Replaced, live(s), cc)
	}
	rep2 := newReporter(t, tr2)
	defer rep2.Close()
	// What the crashed translator held back is gone with it; the new one
	// writes after the entries in memory.
	m.takeHeads(t)
	m.cache, _ = postcard.NewCache(g.pc.Layout(), translator.DefaultPostcardCache)
	streamPaced(t, rep2, tr2, s, m, n+1+inFlight, 2*n+inFlight)
	if err := tr2.Close(5 * time.Second); err != nil {
		t.Fatalf("close: %v", err)
	}
	m.flush()
	m.equal(t, s)
	// The lost reports are absent: their Key-Write keys are not found.
	for k := n + 1; k < n+1+inFlight; k++ {
		if res, _ := s.kw.Query(k, 2, keywrite.Plurality); res.Status == keywrite.Found && binary.BigEndian.Uint32(res.Data) == k+1 {
			t.Errorf("key %d, sent at the crash, is in memory", k)
		}
	}
}
