package e2e

import (
	"context"
	"encoding/binary"
	"errors"
	"net"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/dtakit/dtakit/dta"
	"github.com/dtakit/dtakit/keywrite"
	"github.com/dtakit/dtakit/reporter"
	"github.com/dtakit/dtakit/rocev2"
	"github.com/dtakit/dtakit/rocev2/cm"
	"github.com/dtakit/dtakit/rocev2/target"
	"github.com/dtakit/dtakit/translator"
)

// silent is a UDP socket that answers nothing and counts the CM REQs it
// receives, by CM port.
type silent struct {
	uc   *net.UDPConn
	addr netip.AddrPort
	mu   sync.Mutex
	reqs map[uint16]int
	done chan struct{}
}

func newSilent(tb testing.TB, addr netip.AddrPort) *silent {
	tb.Helper()
	uc, err := net.ListenUDP("udp", net.UDPAddrFromAddrPort(addr))
	if err != nil {
		tb.Fatal(err)
	}
	s := &silent{uc: uc, addr: unmap(uc.LocalAddr().(*net.UDPAddr).AddrPort()), reqs: make(map[uint16]int), done: make(chan struct{})}
	go func() {
		defer close(s.done)
		buf := make([]byte, 4096)
		var p rocev2.Packet
		for {
			n, src, err := uc.ReadFromUDPAddrPort(buf)
			if err != nil {
				return
			}
			if p.DecodeDatagram(buf[:n], unmap(src), s.addr) != nil || p.BTH.DestQP != cm.GSIQP {
				continue
			}
			if _, msg, err := cm.DecodeMAD(p.Payload); err == nil {
				if req, ok := msg.(*cm.ConnectRequest); ok {
					for port := uint16(translator.DefaultCMPort); port < translator.DefaultCMPort+64; port++ {
						if cm.ServiceID(port) == req.ServiceID {
							s.mu.Lock()
							s.reqs[port]++
							s.mu.Unlock()
						}
					}
				}
			}
		}
	}()
	return s
}

func (s *silent) count() map[uint16]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	m := make(map[uint16]int)
	for k, v := range s.reqs {
		m[k] = v
	}
	return m
}

func (s *silent) close() {
	s.uc.Close()
	<-s.done
}

// freePort returns a loopback address whose port nothing is bound to (it
// was free a moment ago).
func freeAddr(tb testing.TB) netip.AddrPort {
	tb.Helper()
	uc, err := net.ListenUDP("udp", net.UDPAddrFromAddrPort(anyLoopback))
	if err != nil {
		tb.Fatal(err)
	}
	a := unmap(uc.LocalAddr().(*net.UDPAddr).AddrPort())
	uc.Close()
	return a
}

// TestNotListening starts translators against collectors that do not
// answer: a socket that swallows everything (the translator sends CMTries
// REQs, CMTimeout apart, then Start fails with ErrNotListening), a port
// nothing is bound to (the same: the translator's socket is not connected,
// so the ICMP port unreachable is not reported to it), and a target with
// no instance (it rejects port 40050 with reason 8: discovery ends with no
// instance, Start returns nil, and reports are refused as NoInstance).
// Close leaves no goroutine behind.
func TestNotListening(t *testing.T) {
	leak := goroutines(t)
	const tries, timeout = 3, 20 * time.Millisecond
	cfg := func(a netip.AddrPort) translator.Config {
		return translator.Config{ReportAddr: anyLoopback, Collectors: []netip.AddrPort{a}, CMTries: tries, CMTimeout: timeout}
	}
	// start starts a translator, closed when t ends.
	start := func(t *testing.T, cfg translator.Config) (*translator.Translator, time.Duration, error) {
		tr, err := translator.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { tr.Close(time.Second) })
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		t0 := time.Now()
		err = tr.Start(ctx)
		return tr, time.Since(t0), err
	}

	t.Run("silent", func(t *testing.T) {
		s := newSilent(t, anyLoopback)
		defer s.close()
		tr, took, err := start(t, cfg(s.addr))
		if !errors.Is(err, translator.ErrNotListening) {
			t.Fatalf("start: %v, want ErrNotListening", err)
		}
		reqs := s.count()
		if len(reqs) != 1 || reqs[translator.DefaultCMPort] != tries {
			t.Errorf("REQs by CM port %v, want %d to port %d only", reqs, tries, translator.DefaultCMPort)
		}
		// (When the REQs arrive says little on a loaded machine: the reading
		// goroutine may lag. Start's duration bounds their spacing.)
		if took < tries*timeout {
			t.Errorf("Start failed after %v, before %d timeouts of %v", took, tries, timeout)
		}
		if ins := tr.Instances(); len(ins) != 0 {
			t.Errorf("instances %+v", ins)
		}
		t.Logf("start: %v after %v", err, took)
	})
	t.Run("unbound port", func(t *testing.T) {
		_, took, err := start(t, cfg(freeAddr(t)))
		if !errors.Is(err, translator.ErrNotListening) || took < tries*timeout {
			t.Fatalf("start: %v after %v, want ErrNotListening after %v", err, took, tries*timeout)
		}
	})
	t.Run("no instance", func(t *testing.T) {
		tg, err := target.New(target.Config{Addr: anyLoopback})
		if err != nil {
			t.Fatal(err)
		}
		uc, err := net.ListenUDP("udp", net.UDPAddrFromAddrPort(anyLoopback))
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- tg.Serve(ctx, uc) }()
		defer func() { cancel(); <-done; uc.Close(); tg.Close() }()
		// The REJ ends discovery at once; a timeout longer than the others'
		// keeps a REJ delayed on a loaded machine from crossing a resent
		// REQ, which the target would reject a second time.
		c := cfg(unmap(uc.LocalAddr().(*net.UDPAddr).AddrPort()))
		c.CMTimeout = time.Second
		tr, _, err := start(t, c)
		if err != nil || len(tr.Instances()) != 0 {
			t.Fatalf("start: %v, instances %+v; want nil and none", err, tr.Instances())
		}
		if c := tg.Counters(); c.Rejects != 1 {
			t.Errorf("target sent %d REJs, want 1", c.Rejects)
		}
		rep := newReporter(t, tr)
		defer rep.Close()
		_ = rep.KeyWrite(1, []byte{1, 2, 3, 4}, 2)
		waitReports(t, rep, tr, 1)
		if c := tr.Counters(); c.NoInstance != 1 || c.Dropped != 1 {
			t.Errorf("a report without instance: %+v", c)
		}
	})
	leak()
}

// TestCollectorGone closes the collector under a running stream of
// sequenced reports and later starts a new one at the same address. The
// translator's QPs stop making progress, time out MaxRetries+1 times and
// reconnect (the unacknowledged packets counted Lost); the REQs go
// unanswered, so each instance fails with ErrNotListening and tries again
// every RetryInterval (CMTries REQs each time), while every report for it is
// refused and NACKed to its reporter, which resends it up to MaxResends
// times. When the new collector is up, the next retry connects and
// reports land again. The new collector advertises its Append heads, at 0
// in its new memory, and the translator takes them, so a reader of the new
// region reads the entries written after. Nothing panics, and once
// everything is closed no goroutine is left.
func TestCollectorGone(t *testing.T) {
	leak := goroutines(t)
	g := newGeometry(t)
	s := serve(t, g, anyLoopback)
	addr := s.c.Addr()
	ackPort := freeAddr(t).Port()
	const retry = 150 * time.Millisecond
	tr := startTranslator(t, translator.Config{
		Collectors: []netip.AddrPort{addr}, AckPort: ackPort,
		CMTries: 3, CMTimeout: 20 * time.Millisecond, RetryInterval: retry, DeadAfter: time.Millisecond,
	})
	rep, err := reporter.New(reporter.Config{Translator: tr.ReportAddr(), AckPort: ackPort, MaxResends: 3})
	if err != nil {
		t.Fatal(err)
	}
	m := newModel(t, g)
	const n = 200
	streamPaced(t, rep, tr, s, m, 0, n)

	// The collector goes away; the stream goes on.
	s.close(t)
	sl := newSilent(t, addr)
	streamWhileAway(t, rep, tr, sl, n, retry)
	time.Sleep(50 * time.Millisecond)
	tc, rc := tr.Counters(), rep.Counters()
	reqs := sl.count()
	sl.close()
	t.Logf("translator: %d timeouts, %d reconnects, %d lost, %d NACKs; reporter: %d NACKs, %d resent, %d gave up; REQs %v",
		tc.Timeouts, tc.Reconnects, tc.Lost, tc.NACKs, rc.NACKs, rc.Resent, rc.GaveUp, reqs)
	checkAway(t, tr, tc, rc, reqs)

	// A new collector at the same address: the next retry connects.
	s2 := serve(t, g, addr)
	waitFor(t, 5*time.Second, "the instances to reconnect", func() bool {
		for _, in := range tr.Instances() {
			if !in.Ready {
				return false
			}
		}
		return true
	})
	before := tr.Counters()
	keyWritesSent(t, rep, tr, s2, before, newModel(t, g))
	// Append: the translator took the new collector's heads; a reader of
	// the new region, starting at 0, reads the entries.
	base := reports(tr.Counters())
	for l := range uint32(4) {
		_ = rep.Append(l, []byte{9, 9, 9, byte(l) + 1}, false)
	}
	waitReports(t, rep, tr, base+4) // before Close flushes the batches
	if err := rep.Close(); err != nil {
		t.Error(err)
	}
	// Close returned once every report was acknowledged (or counted):
	// an acknowledged Key-Write is in the collector's memory.
	keyWritesLanded(t, rep, s2)
	if err := tr.Close(2 * time.Second); err != nil {
		t.Errorf("close: %v", err)
	}
	after := tr.Counters()
	if after.Reports[dta.OpKeyWrite]-before.Reports[dta.OpKeyWrite] < 64 {
		t.Errorf("translator got %d Key-Write reports after the reconnection, want at least 64 (and resends of earlier ones)", after.Reports[dta.OpKeyWrite]-before.Reports[dta.OpKeyWrite])
	}
	checkAppendAfterReturn(t, s2)
	s2.close(t)
	leak()
}

// streamWhileAway streams reports from key n on while the collector is
// away (sl answers its address), until every queue pair reconnected and
// every CM port saw two rounds of REQs.
func streamWhileAway(t *testing.T, rep *reporter.Reporter, tr *translator.Translator, sl *silent, n uint32, retry time.Duration) {
	k := n
	sendFor := func(d time.Duration) {
		for end := time.Now().Add(d); time.Now().Before(end); k++ {
			step(t, rep, nil, k, sendAll)
			if k%8 == 7 {
				_ = rep.Flush()
				time.Sleep(2 * time.Millisecond)
			}
		}
		_ = rep.Flush()
	}
	twoRounds := func() bool {
		c := sl.count()
		for port := uint16(translator.DefaultCMPort); port < translator.DefaultCMPort+4; port++ {
			if c[port] < 2*3 {
				return false
			}
		}
		return true
	}
	sendFor(2*retry + 200*time.Millisecond)
	// A queue pair finds its collector gone only once it has something to
	// write (an Append batch fills), and on a loaded machine a retry's
	// REQs can run late: keep the stream going, up to 10 s more, until
	// every queue pair reconnected and every port showed the two rounds
	// checked below.
	for end := time.Now().Add(10 * time.Second); (!twoRounds() || tr.Counters().Reconnects < 4) && time.Now().Before(end); {
		sendFor(20 * time.Millisecond)
	}
}

// checkAway: while the collector was away, every queue pair timed out and
// reconnected, reports for it were NACKed and resent, each CM port saw
// two rounds of REQs, and no instance is ready.
func checkAway(t *testing.T, tr *translator.Translator, tc translator.Counters, rc reporter.Counters, reqs map[uint16]int) {
	if tc.Reconnects < 4 || tc.Timeouts < 4*uint64(translator.DefaultMaxRetries+1) || tc.Lost == 0 {
		t.Errorf("translator did not time out and reconnect every QP: %+v", tc)
	}
	if tc.NACKs == 0 || tc.NoInstance == 0 || rc.NACKs == 0 || rc.Resent == 0 {
		t.Errorf("reports for a missing collector were not NACKed and resent: translator %+v, reporter %+v", tc, rc)
	}
	for port := uint16(translator.DefaultCMPort); port < translator.DefaultCMPort+4; port++ {
		// The reconnection's REQs, then at least one retry's.
		if reqs[port] < 2*3 {
			t.Errorf("CM port %d: %d REQs while the collector was away, want at least 2 rounds of 3", port, reqs[port])
		}
	}
	for _, in := range tr.Instances() {
		if in.Ready || !errors.Is(in.Err, translator.ErrNotListening) {
			t.Errorf("instance %+v: want not ready, ErrNotListening", in)
		}
	}
}

// keyWritesSent writes 64 keys after the collector s2 came back (m2 their
// reference store) and waits until the translator took them; before is
// the translator's counters at its return.
func keyWritesSent(t *testing.T, rep *reporter.Reporter, tr *translator.Translator, s2 *served, before translator.Counters, m2 *model) {
	for k2 := range uint32(64) {
		d := []byte{0, 0, byte(k2 >> 8), byte(k2) + 1}
		_ = rep.KeyWrite(1000+k2, d, 2)
		_ = m2.kw.Put(1000+k2, d, 2)
	}
	_ = rep.Flush()
	// Reports NACKed while the collector was away may be resent now and
	// land too: wait until the translator has every datagram the reporter
	// sent and the target about as many writes as Key-Write reports taken
	// since. Whether each key landed is checked once the reporter has its
	// acknowledgement (keyWritesLanded): the target's write count includes
	// other primitives' writes, so it cannot tell.
	waitFor(t, 5*time.Second, "the reports to land", func() bool {
		sent, tc := rep.Counters().Datagrams, tr.Counters()
		kw := tc.Reports[dta.OpKeyWrite] - before.Reports[dta.OpKeyWrite]
		return reports(tc) >= sent && kw >= 64 && s2.c.Counters().WritePackets >= 2*kw
	})
}

// keyWritesLanded checks, after the reporter closed, that the 64 keys
// keyWritesSent wrote are in s2's memory and none was counted lost or
// unconfirmed.
func keyWritesLanded(t *testing.T, rep *reporter.Reporter, s2 *served) {
	s2.c.Counters() // orders this goroutine after the target's writes
	for k2 := range uint32(64) {
		res, _ := s2.kw.Query(1000+k2, 2, keywrite.Plurality)
		if res.Status != keywrite.Found || res.Data[3] != byte(k2)+1 {
			t.Errorf("key %d after the collector came back: %+v (reporter %+v)", 1000+k2, res, rep.Counters())
		}
	}
}

// checkAppendAfterReturn: the translator took the new collector's heads,
// so a reader of the new region, starting at 0, reads the entries.
func checkAppendAfterReturn(t *testing.T, s2 *served) {
	s2.c.Counters()
	written := 0
	for _, b := range s2.ap.Region() {
		if b != 0 {
			written++
		}
	}
	buf := make([]byte, 4096)
	for l := range uint32(4) {
		rd, _ := s2.ap.Reader(l)
		// With the entries the translator held, and resends of earlier
		// ones (which land after later entries).
		got, err := rd.Read(buf)
		n := 0
		for e := range got {
			if binary.BigEndian.Uint32(buf[e*4:]) == 0x09090900+l+1 {
				n++
			}
		}
		if err != nil || n != 1 {
			t.Errorf("list %d: a new reader read %d entries (%v), %d of them the one appended last; want it once", l, got, err, n)
		}
	}
	if written == 0 {
		t.Error("no append entry was written into the new collector")
	}
}
