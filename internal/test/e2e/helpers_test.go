package e2e

import (
	"bytes"
	"context"
	"encoding/binary"
	"net/netip"
	"runtime"
	"testing"
	"time"

	"github.com/dtakit/dtakit/appendlist"
	"github.com/dtakit/dtakit/collector"
	"github.com/dtakit/dtakit/dta"
	"github.com/dtakit/dtakit/keyincr"
	"github.com/dtakit/dtakit/keywrite"
	"github.com/dtakit/dtakit/postcard"
	"github.com/dtakit/dtakit/reporter"
	"github.com/dtakit/dtakit/rocev2/target"
	"github.com/dtakit/dtakit/translator"
)

var anyLoopback = netip.AddrPortFrom(loopback, 0)

// geometry is the one set of layouts every test uses: one instance of
// each primitive, small enough for the tests' streams not to lap.
type geometry struct {
	kw keywrite.Layout
	ki keyincr.Layout
	pc *postcard.Codec
	al appendlist.Layout
}

func newGeometry(tb testing.TB) geometry {
	tb.Helper()
	kw := keywrite.Layout{Slots: 1 << 12, DataSize: 4}
	err := kw.Validate()
	if err != nil {
		tb.Fatal(err)
	}
	ki := keyincr.Layout{Slots: 1 << 12}
	err = ki.Validate()
	if err != nil {
		tb.Fatal(err)
	}
	pc, err := postcard.NewCodec(postcard.Layout{Chunks: 1 << 12, Copies: 2})
	if err != nil {
		tb.Fatal(err)
	}
	return geometry{kw: kw, ki: ki, pc: pc, al: appendlist.Layout{Lists: 4, Entries: 1024, EntrySize: 4, Batch: 8, Markers: true}}
}

// served is a software collector serving one instance of each primitive
// (CM ports 40050..40053 in the order Key-Write, Key-Increment,
// Postcarding, Append).
type served struct {
	c      *collector.Collector
	kw     *keywrite.Store
	ki     *keyincr.Store
	pc     *postcard.Store
	ap     *appendlist.Store
	cancel context.CancelFunc
	done   chan error
}

// serve starts a collector at addr (port 0: any) with g's instances.
func serve(tb testing.TB, g geometry, addr netip.AddrPort) *served {
	tb.Helper()
	c, err := collector.New(collector.Config{Addr: addr})
	if err != nil {
		tb.Fatal(err)
	}
	s := &served{c: c, done: make(chan error, 1)}
	if s.kw, err = c.AddKeyWrite(g.kw); err != nil {
		tb.Fatal(err)
	}
	if s.ki, err = c.AddKeyIncrement(g.ki); err != nil {
		tb.Fatal(err)
	}
	if s.pc, err = c.AddPostcard(g.pc.Layout()); err != nil {
		tb.Fatal(err)
	}
	if s.ap, err = c.AddAppend(g.al); err != nil {
		tb.Fatal(err)
	}
	if err := c.Start(); err != nil {
		tb.Fatal(err)
	}
	var ctx context.Context
	ctx, s.cancel = context.WithCancel(context.Background())
	go func() { s.done <- c.Serve(ctx) }()
	return s
}

// close stops the collector and waits for Serve to return.
func (s *served) close(tb testing.TB) {
	tb.Helper()
	s.cancel()
	if err := s.c.Close(); err != nil {
		tb.Errorf("collector close: %v", err)
	}
	if err := <-s.done; err != nil {
		tb.Errorf("collector serve: %v", err)
	}
}

// model holds reference stores fed the same reports as the pipeline, the
// way the translator translates them: region bytes to compare with the
// collector's.
type model struct {
	kw      *keywrite.Store
	ki      *keyincr.Store
	pc      *postcard.Store
	cache   *postcard.Cache
	ap      *appendlist.Store
	batcher *appendlist.Batcher
	g       geometry
}

// takeHeads gives the model a new batcher (a new translator's) whose heads
// are what the model's region says, as the collector advertises them.
func (m *model) takeHeads(tb testing.TB) {
	tb.Helper()
	heads, err := m.ap.Heads(nil)
	if err != nil {
		tb.Fatal(err)
	}
	m.batcher, _ = appendlist.NewBatcher(m.g.al)
	for l, h := range heads {
		if err := m.batcher.SetHead(uint32(l), h); err != nil {
			tb.Fatal(err)
		}
	}
}

func newModel(tb testing.TB, g geometry) *model {
	tb.Helper()
	m := &model{g: g}
	var err error
	if m.kw, err = keywrite.NewStore(g.kw, nil); err != nil {
		tb.Fatal(err)
	}
	if m.ki, err = keyincr.NewStore(g.ki, nil); err != nil {
		tb.Fatal(err)
	}
	if m.pc, err = postcard.NewStore(g.pc.Layout(), make([]byte, g.pc.Layout().RegionSize())); err != nil {
		tb.Fatal(err)
	}
	if m.cache, err = postcard.NewCache(g.pc.Layout(), translator.DefaultPostcardCache); err != nil {
		tb.Fatal(err)
	}
	if m.ap, err = appendlist.NewStore(g.al, make([]byte, g.al.RegionSize())); err != nil {
		tb.Fatal(err)
	}
	if m.batcher, err = appendlist.NewBatcher(g.al); err != nil {
		tb.Fatal(err)
	}
	return m
}

// report kinds a stream step sends.
const (
	sendKW = 1 << iota
	sendKI
	sendPC
	sendAP
	sendAll = sendKW | sendKI | sendPC | sendAP
)

// step sends report set k of the tests' stream with rep (kinds: which of the
// four), and applies it to m when m is not nil. It returns the number of
// reports sent.
func step(tb testing.TB, rep *reporter.Reporter, m *model, k uint32, kinds int) int {
	tb.Helper()
	d := binary.BigEndian.AppendUint32(nil, k+1)
	n := 0
	check := func(err error) {
		if err != nil {
			tb.Fatal(err)
		}
		n++
	}
	if kinds&sendKW != 0 {
		check(rep.KeyWrite(k, d, 2))
		if m != nil {
			_ = m.kw.Put(k, d, 2)
		}
	}
	if kinds&sendKI != 0 {
		check(rep.KeyIncrement(k%50, uint64(k)+1, 2))
		if m != nil {
			_ = m.ki.Add(k%50, uint64(k)+1, 2)
		}
	}
	if kinds&sendPC != 0 {
		p := dta.Postcard{Key: k / 2, Hop: uint8(k%2) + 1, Value: k + 1, PathLength: 2, HasPathLength: true}
		check(rep.Postcard(p.Key, postcard.Hop(p.Hop), postcard.PathLength(p.PathLength), postcard.Value(p.Value)))
		if m != nil {
			chunks, _ := m.cache.Insert(nil, p.Key, postcard.Hop(p.Hop), postcard.PathLength(p.PathLength), postcard.Value(p.Value))
			m.applyChunks(chunks)
		}
	}
	if kinds&sendAP != 0 {
		imm := k%32 == 31
		check(rep.Append(k%4, d, imm))
		if m != nil {
			ws, _ := m.batcher.AppendWrites(nil, k%4, d, imm)
			m.applyAppends(ws)
		}
	}
	return n
}

func (m *model) applyChunks(chunks []postcard.Chunk) {
	for i := range chunks {
		for _, w := range m.g.pc.AppendWrites(nil, &chunks[i]) {
			_ = m.pc.Apply(w)
		}
	}
}

func (m *model) applyAppends(ws []appendlist.Write) {
	for _, w := range ws {
		_ = m.ap.Apply(w)
	}
}

// flush does what Translator.Close flushes: cached postcards, then partial
// append batches, list by list.
func (m *model) flush() {
	m.applyChunks(m.cache.Flush(nil))
	for l := range m.g.al.Lists {
		ws, _ := m.batcher.Flush(nil, uint32(l))
		m.applyAppends(ws)
	}
}

// equal compares the collector's regions with m's, byte for byte.
func (m *model) equal(tb testing.TB, s *served) {
	tb.Helper()
	s.c.Counters() // orders this goroutine after the target's writes
	if !bytes.Equal(s.kw.Region(), m.kw.Region()) {
		tb.Errorf("key-write region differs from the reference in %d bytes", diff(s.kw.Region(), m.kw.Region()))
	}
	if !bytes.Equal(s.ki.Region(), m.ki.Region()) {
		tb.Errorf("key-increment region differs from the reference in %d bytes", diff(s.ki.Region(), m.ki.Region()))
	}
	if !bytes.Equal(s.pc.Region(), m.pc.Region()) {
		tb.Errorf("postcarding region differs from the reference in %d bytes", diff(s.pc.Region(), m.pc.Region()))
	}
	if !bytes.Equal(s.ap.Region(), m.ap.Region()) {
		tb.Errorf("append region differs from the reference in %d bytes", diff(s.ap.Region(), m.ap.Region()))
	}
}

func diff(a, b []byte) int {
	n := 0
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			n++
		}
	}
	return n + max(len(a), len(b)) - min(len(a), len(b))
}

// startTranslator starts a translator reporting to collectors with cfg's
// other fields; it fails the test unless every instance is ready.
func startTranslator(tb testing.TB, cfg translator.Config) *translator.Translator {
	tb.Helper()
	if !cfg.ReportAddr.IsValid() {
		cfg.ReportAddr = anyLoopback
	}
	if cfg.PostcardLinger == 0 {
		// The model's cache writes a flow when it completes, is evicted or
		// is flushed. A slow run could see an incomplete flow written
		// after its linger, before another flow's chunk that the model
		// writes first at a shared chunk index (and the crash tests hold
		// one back on purpose).
		cfg.PostcardLinger = time.Hour
	}
	tr, err := translator.New(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := tr.Start(ctx); err != nil {
		tr.Close(0)
		tb.Fatalf("translator start: %v", err)
	}
	for _, in := range tr.Instances() {
		if !in.Ready {
			tr.Close(0)
			tb.Fatalf("instance %+v not ready", in)
		}
	}
	return tr
}

func newReporter(tb testing.TB, tr *translator.Translator) *reporter.Reporter {
	tb.Helper()
	rep, err := reporter.New(reporter.Config{Translator: tr.ReportAddr(), Delivery: reporter.FireAndForget})
	if err != nil {
		tb.Fatal(err)
	}
	return rep
}

// reports returns the reports the translator decoded.
func reports(c translator.Counters) uint64 {
	return c.Reports[1] + c.Reports[2] + c.Reports[3] + c.Reports[4]
}

// waitReports flushes rep and waits until tr has decoded want reports:
// pacing, so that no report is lost in a socket buffer.
func waitReports(tb testing.TB, rep *reporter.Reporter, tr *translator.Translator, want uint64) {
	tb.Helper()
	if err := rep.Flush(); err != nil {
		tb.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for reports(tr.Counters()) < want {
		if time.Now().After(deadline) {
			tb.Fatalf("translator decoded %d of %d reports", reports(tr.Counters()), want)
		}
		time.Sleep(100 * time.Microsecond)
	}
}

// waitApplied waits until the target has executed every data packet the
// translator has sent (first transmissions; the target executes each PSN
// once). Pacing a lossy stream this way keeps each QP's go-back-N window
// small: the translator has no congestion control, and resending large
// windows through a hop slower than itself (the relay, under the race
// detector) overflows that hop's socket buffer, which loses more than the
// faults under test.
//
// Packets a reconnection abandoned (Lost) were not executed in these tests'
// cases, and count as done.
func waitApplied(tb testing.TB, counters func() target.Counters, tr *translator.Translator) {
	tb.Helper()
	waitFor(tb, 10*time.Second, "the target to execute every packet", func() bool {
		tc, cc := tr.Counters(), counters()
		return cc.WritePackets+cc.Atomics+tc.Lost >= tc.Packets
	})
}

// waitFor polls cond every millisecond until it holds or d passes.
func waitFor(tb testing.TB, d time.Duration, what string, cond func() bool) {
	tb.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			tb.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// goroutines returns a function that fails tb if, within a grace period,
// the number of goroutines has not come back to what it is now.
func goroutines(tb testing.TB) func() {
	before := runtime.NumGoroutine()
	return func() {
		tb.Helper()
		deadline := time.Now().Add(2 * time.Second)
		for {
			n := runtime.NumGoroutine()
			if n <= before {
				return
			}
			if time.Now().After(deadline) {
				buf := make([]byte, 1<<16)
				buf = buf[:runtime.Stack(buf, true)]
				tb.Errorf("%d goroutines after close, %d before:\n%s", n, before, buf)
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
}
