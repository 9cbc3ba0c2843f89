package reporter

import (
	"bytes"
	"net"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/dtakit/dtakit/dta"
	"github.com/dtakit/dtakit/internal/udpio"
)

// fakeTranslator reads wide sequenced reports and decides, per report,
// whether to take it or to NACK it (with reason busy) to the reporter's
// ack port.
type fakeTranslator struct {
	t      *testing.T
	uc     *net.UDPConn
	ack    uint16
	decide func(seq uint32, attempt int) bool // true: take it
	// lose, when set, drops a report before the translator sees it (as a
	// full socket buffer does); the translator NACKs the numbers a later
	// one skips (reason Missing), as dtakit's does.
	lose func(seq uint32, attempt int) bool
	next uint32
	// noAcks stops the cumulative acks it sends after each batch;
	// holdAcks keeps sending them (and keepalives) without moving them.
	noAcks, holdAcks bool
	// reason is the NACKs' reason (0: busy).
	reason dta.Reason
	// down drops every report unseen, as a dead translator; fresh makes
	// the next report seen the first, as a restarted one; first is it,
	// and the acks carry the span from it.
	down, fresh bool
	first       uint32
	ackedTo     uint32 // one past the last cumulative ack
	// owed holds the numbers NACKed for a resend and not taken since:
	// while there are some, the cumulative ack is sent again every 50
	// ms to peer, as the translator does.
	owed map[uint32]bool
	peer netip.AddrPort
	// sess is the session of the last report, which every ack carries.
	sess uint64
	// hold holds back the numbers in it once taken, as the translator
	// holds an Append entry until its batch is written: no ack of its
	// own, and no answer to its copies, until release; the cumulative ack
	// is sent every 50 ms meanwhile.
	hold map[uint32]bool

	mu       sync.Mutex
	attempts map[uint32]int
	taken    map[uint32][]byte
	dups     int
	nacks    int
	done     chan struct{}
}

func newFakeTranslator(t *testing.T, ackPort uint16, decide func(seq uint32, attempt int) bool) *fakeTranslator {
	uc, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	_ = uc.SetReadBuffer(8 << 20)
	ft := &fakeTranslator{t: t, uc: uc, ack: ackPort, decide: decide,
		attempts: map[uint32]int{}, taken: map[uint32][]byte{}, owed: map[uint32]bool{}, done: make(chan struct{})}
	conn, err := udpio.New(uc, 64)
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		defer close(ft.done)
		var acks []udpio.Datagram
		_ = conn.ReadLoop(udpio.Buffers(64, 256), 50*time.Millisecond, func(ms []udpio.Datagram, _ time.Time) bool {
			acks = acks[:0]
			ft.mu.Lock()
			if len(ms) == 0 && ft.keepalive() {
				ack := dta.Ack{Seq: ft.ackedTo - 1, Wide: true, Span: uint16(ft.ackedTo - ft.first), Session: ft.sess}.AppendTo(nil)
				acks = append(acks, udpio.Datagram{Buf: ack, Addr: ft.peer})
			}
			for _, m := range ms {
				ft.peer = netip.AddrPortFrom(m.Addr.Addr(), ft.ack)
				b := m.Buf
				h, err := dta.ParseHeader(b)
				if err != nil || !h.Wide {
					t.Errorf("fake translator: report %x: %v", b, err)
					continue
				}
				if ft.down {
					continue
				}
				ft.sess = h.Session
				if ft.fresh {
					ft.next, ft.first, ft.fresh = h.Seq, h.Seq, false
				}
				ft.attempts[h.Seq]++
				if ft.lose != nil && ft.lose(h.Seq, ft.attempts[h.Seq]) {
					continue
				}
				for ; int32(h.Seq-ft.next) > 0; ft.next++ {
					ft.owed[ft.next] = true
					nack := dta.Ack{Seq: ft.next, NACK: true, Wide: true, Reason: dta.ReasonMissing, Session: ft.sess}.AppendTo(nil)
					acks = append(acks, udpio.Datagram{Buf: nack, Addr: netip.AddrPortFrom(m.Addr.Addr(), ft.ack)})
				}
				if h.Seq == ft.next {
					ft.next++
				}
				// As the translator: a number taken is a duplicate,
				// dropped without a NACK (Close's tail probes are); one
				// taken, or found taken, after the cumulative ack passed
				// it is acknowledged on its own.
				resendAck := func() {
					if int32(h.Seq-ft.ackedTo) < 0 && !ft.hold[h.Seq] {
						a := dta.Ack{Seq: h.Seq, Wide: true, Resend: true, Session: ft.sess}.AppendTo(nil)
						acks = append(acks, udpio.Datagram{Buf: a, Addr: netip.AddrPortFrom(m.Addr.Addr(), ft.ack)})
					}
				}
				if _, ok := ft.taken[h.Seq]; ok {
					ft.dups++
					resendAck()
					continue
				}
				if ft.decide(h.Seq, ft.attempts[h.Seq]) {
					ft.taken[h.Seq] = append([]byte(nil), b...)
					delete(ft.owed, h.Seq)
					resendAck()
					continue
				}
				ft.nacks++
				if ft.reason != dta.ReasonUnconfirmed && ft.reason != dta.ReasonRejected {
					ft.owed[h.Seq] = true
				}
				why := ft.reason
				if why == 0 {
					why = dta.ReasonBusy
				}
				nack := dta.Ack{Seq: h.Seq, NACK: true, Wide: true, Reason: why, Session: ft.sess}.AppendTo(nil)
				acks = append(acks, udpio.Datagram{Buf: nack, Addr: netip.AddrPortFrom(m.Addr.Addr(), ft.ack)})
			}
			if len(ms) > 0 && !ft.noAcks && !ft.down {
				if !ft.holdAcks {
					ft.ackedTo = ft.next
				}
				ack := dta.Ack{Seq: ft.ackedTo - 1, Wide: true, Span: uint16(ft.ackedTo - ft.first), Session: ft.sess}.AppendTo(nil)
				acks = append(acks, udpio.Datagram{Buf: ack, Addr: netip.AddrPortFrom(ms[0].Addr.Addr(), ft.ack)})
			}
			ft.mu.Unlock()
			_, _ = conn.WriteAll(acks)
			return true
		})
	}()
	t.Cleanup(func() { uc.Close(); <-ft.done })
	return ft
}

// keepalive reports whether the cumulative ack is due again on a quiet
// round, as the translator sends it every 50 ms while numbers are owed,
// held or not acknowledged. ft.mu is held.
func (ft *fakeTranslator) keepalive() bool {
	return (len(ft.owed) > 0 || len(ft.hold) > 0 || ft.next != ft.ackedTo) && !ft.down && !ft.noAcks
}

// release ends the hold of seq, taken: its write is acknowledged, and so
// is the report, on its own.
func (ft *fakeTranslator) release(seq uint32) {
	ft.mu.Lock()
	delete(ft.hold, seq)
	a := dta.Ack{Seq: seq, Wide: true, Resend: true, Session: ft.sess}.AppendTo(nil)
	peer := ft.peer
	ft.mu.Unlock()
	if _, err := ft.uc.WriteToUDPAddrPort(a, peer); err != nil {
		ft.t.Error(err)
	}
}

func (ft *fakeTranslator) addr() netip.AddrPort { return ft.uc.LocalAddr().(*net.UDPAddr).AddrPort() }

func (ft *fakeTranslator) stats() (taken, dups, nacks int) {
	ft.mu.Lock()
	defer ft.mu.Unlock()
	return len(ft.taken), ft.dups, ft.nacks
}

// capacity returns a decide function that takes at most rate reports per
// second (a token bucket 64 deep) and NACKs the rest.
func capacity(rate float64) func(uint32, int) bool {
	tokens, last := 64.0, time.Now()
	return func(uint32, int) bool {
		now := time.Now()
		tokens = min(tokens+now.Sub(last).Seconds()*rate, 64)
		last = now
		if tokens < 1 {
			return false
		}
		tokens--
		return true
	}
}

func wideReporter(t *testing.T, ft *fakeTranslator, ackPort uint16, cfg Config) *Reporter {
	cfg.Translator, cfg.Sequenced, cfg.WideSequence, cfg.HandleNACKs, cfg.AckPort = ft.addr(), true, true, true, ackPort
	r, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestBackpressure streams 20 000 reports at 200 000/s into a translator
// that takes 20 000/s and NACKs the rest as busy: the reporter slows down
// and resends until every report is taken once, loses none, and is NACKed
// less than once per report on average.
func TestBackpressure(t *testing.T) {
	const n = 20000
	ackPort := freePort(t)
	ft := newFakeTranslator(t, ackPort, capacity(20000))
	r := wideReporter(t, ft, ackPort, Config{Rate: 200000})
	start := time.Now()
	for i := range n {
		if err := r.KeyWrite(uint32(i), []byte{1, 2, 3, 4}, 1); err != nil {
			t.Fatal(err)
		}
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	el := time.Since(start)
	taken, dups, nacks := ft.stats()
	c := r.Counters()
	t.Logf("%v, reporter %+v, translator took %d, %d duplicates, %d NACKs", el, c, taken, dups, nacks)
	if taken != n || dups > int(c.Probes) || c.Lost != 0 {
		t.Errorf("%d of %d reports taken, %d sent again after taken (%d tail probes), %d lost", taken, n, dups, c.Probes, c.Lost)
	}
	if c.Backoffs == 0 || c.Waits == 0 || nacks >= n {
		t.Errorf("backoffs %d, waits %d, %d NACKs for %d reports", c.Backoffs, c.Waits, nacks, n)
	}
}

// TestPacing: with Rate, Send blocks: 400 reports at 2000/s take at least
// (400 - burst) / 2000 seconds, and all arrive.
func TestPacing(t *testing.T) {
	ackPort := freePort(t)
	ft := newFakeTranslator(t, ackPort, func(uint32, int) bool { return true })
	r := wideReporter(t, ft, ackPort, Config{Rate: 2000, Batch: 8})
	start := time.Now()
	for i := range 400 {
		if err := r.KeyWrite(uint32(i), []byte{1, 2, 3, 4}, 1); err != nil {
			t.Fatal(err)
		}
	}
	el := time.Since(start)
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if min := time.Duration(400-8) * time.Second / 2000; el < min {
		t.Errorf("400 reports at 2000/s sent in %v, less than %v", el, min)
	}
	if taken, _, _ := ft.stats(); taken != 400 || r.Counters().Waits == 0 {
		t.Errorf("%d taken, counters %+v", taken, r.Counters())
	}
}

// TestCloseAnswersLateNACKs: the translator NACKs every report's first
// attempt; Close, called right after the last Send, still resends them all.
func TestCloseAnswersLateNACKs(t *testing.T) {
	ackPort := freePort(t)
	ft := newFakeTranslator(t, ackPort, func(_ uint32, attempt int) bool { return attempt > 1 })
	r := wideReporter(t, ft, ackPort, Config{})
	for i := range 100 {
		if err := r.KeyWrite(uint32(i), []byte{1, 2, 3, 4}, 1); err != nil {
			t.Fatal(err)
		}
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if taken, dups, _ := ft.stats(); taken != 100 || dups > 2 || r.Counters().Lost != 0 {
		t.Errorf("%d of 100 taken, %d twice, counters %+v", taken, dups, r.Counters())
	}
}

// TestOnLoss: a translator that refuses everything (no instance serves
// it): each report is resent MaxResends times, then counted lost and
// handed to OnLoss with its bytes and the NACK's reason.
func TestOnLoss(t *testing.T) {
	ackPort := freePort(t)
	ft := newFakeTranslator(t, ackPort, func(uint32, int) bool { return false })
	ft.mu.Lock()
	ft.reason = dta.ReasonNoInstance
	ft.mu.Unlock()
	var mu sync.Mutex
	lost := map[uint32][]byte{}
	r := wideReporter(t, ft, ackPort, Config{MaxResends: 2, OnLoss: func(seq uint32, b []byte, reason dta.Reason) {
		mu.Lock()
		defer mu.Unlock()
		if reason != dta.ReasonNoInstance {
			t.Errorf("reason %v", reason)
		}
		lost[seq] = b
	}})
	var sent [][]byte
	for i := range 5 {
		rep := dta.Report{Header: dta.Header{Opcode: dta.OpKeyWrite, Sequenced: true, Wide: true, Seq: uint32(i), Session: r.Session()},
			KeyWrite: dta.KeyWrite{Redundancy: 1, Key: uint32(i), Data: []byte{byte(i), 2, 3, 4}}}
		b, err := dta.AppendPayload(nil, &rep)
		if err != nil {
			t.Fatal(err)
		}
		sent = append(sent, b)
		if err := r.Send(&rep); err != nil {
			t.Fatal(err)
		}
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	c := r.Counters()
	mu.Lock()
	defer mu.Unlock()
	// Each report is resent MaxResends times at most; Close adds up to two
	// probes of the last report, and a probe NACKed can stand for one of
	// its resends.
	if c.Lost != 5 || c.GaveUp != 5 || c.Resent > 10 || c.Probes > 2 || c.Resent+c.Probes < 10 || len(lost) != 5 {
		t.Fatalf("counters %+v, %d handed to OnLoss", c, len(lost))
	}
	for i, b := range sent {
		if !bytes.Equal(lost[uint32(i)], b) {
			t.Errorf("OnLoss got %x for %d, sent %x", lost[uint32(i)], i, b)
		}
	}
}

// TestTailProbe: the last three reports are lost before the translator
// sees them, so no later number reveals them; Close's copy of the last
// report does, and they are resent.
func TestTailProbe(t *testing.T) {
	ackPort := freePort(t)
	ft := newFakeTranslator(t, ackPort, func(uint32, int) bool { return true })
	ft.mu.Lock()
	ft.lose = func(seq uint32, attempt int) bool { return seq >= 47 && attempt == 1 }
	ft.mu.Unlock()
	r := wideReporter(t, ft, ackPort, Config{})
	for i := range 50 {
		if err := r.KeyWrite(uint32(i), []byte{1, 2, 3, 4}, 1); err != nil {
			t.Fatal(err)
		}
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	c := r.Counters()
	if taken, _, _ := ft.stats(); taken != 50 || c.Lost != 0 || c.Probes == 0 || c.Resent != 2 {
		t.Errorf("%d of 50 taken, counters %+v", taken, c)
	}
}

// TestTailProbeNotNeeded: a translator that acknowledges every report
// before Close's first copy of the last one has seen them all: Close sends
// no copy (the translator sees no duplicate) and loses nothing.
func TestTailProbeNotNeeded(t *testing.T) {
	ackPort := freePort(t)
	ft := newFakeTranslator(t, ackPort, func(uint32, int) bool { return true })
	r := wideReporter(t, ft, ackPort, Config{})
	for i := range 50 {
		if err := r.KeyWrite(uint32(i), []byte{1, 2, 3, 4}, 1); err != nil {
			t.Fatal(err)
		}
	}
	if err := r.Flush(); err != nil {
		t.Fatal(err)
	}
	// Close waits 5 ms for the ack of the last report before its first
	// copy; the test waits for that ack itself, so that a slow machine
	// cannot make the copy needed.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		r.mu.Lock()
		acked := r.credit.acked == 50
		r.mu.Unlock()
		if acked {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the 50 reports were not acknowledged in 10 s")
		}
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	c := r.Counters()
	if taken, dups, _ := ft.stats(); taken != 50 || dups != 0 || c.Probes != 0 || c.Lost+c.Unconfirmed != 0 {
		t.Errorf("%d of 50 taken, %d duplicates, counters %+v", taken, dups, c)
	}
}

// TestCredit: Send keeps within 3072 reports of the translator's last
// cumulative ack; when acks stop, it waits a second, then counts the
// reports in flight Unconfirmed and goes on, a credit per second.
func TestCredit(t *testing.T) {
	ackPort := freePort(t)
	ft := newFakeTranslator(t, ackPort, func(uint32, int) bool { return true })
	r := wideReporter(t, ft, ackPort, Config{})
	defer r.Close()
	send := func(n int) {
		for i := range n {
			if err := r.KeyWrite(uint32(i), []byte{1, 2, 3, 4}, 1); err != nil {
				t.Fatal(err)
			}
		}
	}
	send(10000)
	if c := r.Counters(); c.Acks == 0 || c.Unconfirmed != 0 {
		t.Fatalf("with acks: %+v", c)
	}
	ft.mu.Lock()
	ft.noAcks = true
	ft.mu.Unlock()
	start := time.Now()
	send(5000)
	c := r.Counters()
	// The 5000 and those in flight before, less the last credit's worth,
	// were unconfirmed, a credit (3072) per second at most.
	el := time.Since(start)
	if el < time.Second || c.Unconfirmed < 5000-3072 || c.Unconfirmed > 5000+3072 || c.Unconfirmed > 3072*uint64(el/time.Second) {
		t.Fatalf("without acks: 5000 reports in %v, counters %+v", el, c)
	}
}

// TestSupersededKeyWrite: a NACKed Key-Write report whose key was written
// again since is not resent: its older data would land over the newer.
func TestSupersededKeyWrite(t *testing.T) {
	ackPort := freePort(t)
	ft := newFakeTranslator(t, ackPort, func(seq uint32, attempt int) bool { return seq != 0 || attempt > 1 })
	r := wideReporter(t, ft, ackPort, Config{})
	if err := r.KeyWrite(7, []byte{0, 0, 0, 1}, 1); err != nil { // number 0: NACKed
		t.Fatal(err)
	}
	if err := r.KeyWrite(7, []byte{0, 0, 0, 2}, 1); err != nil { // number 1, in the same batch
		t.Fatal(err)
	}
	if err := r.KeyWrite(8, []byte{0, 0, 0, 3}, 1); err != nil {
		t.Fatal(err)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	c := r.Counters()
	ft.mu.Lock()
	_, resent := ft.taken[0]
	ft.mu.Unlock()
	if c.Superseded != 1 || c.Resent != 0 || c.Lost != 0 || resent {
		t.Errorf("counters %+v; number 0 taken after its NACK: %v", c, resent)
	}
}

// TestUnconfirmedNACK: a report NACKed with reason Unconfirmed (its
// collector connection failed before acknowledging it) is not resent: it
// may have been applied. It is counted and handed to OnLoss.
func TestUnconfirmedNACK(t *testing.T) {
	ackPort := freePort(t)
	ft := newFakeTranslator(t, ackPort, func(seq uint32, _ int) bool { return seq != 5 })
	ft.mu.Lock()
	ft.reason = dta.ReasonUnconfirmed
	ft.mu.Unlock()
	var mu sync.Mutex
	var losses []uint32
	r := wideReporter(t, ft, ackPort, Config{OnLoss: func(seq uint32, b []byte, why dta.Reason) {
		mu.Lock()
		defer mu.Unlock()
		if why != dta.ReasonUnconfirmed || len(b) == 0 {
			t.Errorf("OnLoss(%d, %x, %v): want its bytes and reason Unconfirmed", seq, b, why)
		}
		losses = append(losses, seq)
	}})
	for i := range 20 {
		if err := r.KeyIncrement(uint32(i), 1, 1); err != nil {
			t.Fatal(err)
		}
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	c := r.Counters()
	ft.mu.Lock()
	tries := ft.attempts[5]
	ft.mu.Unlock()
	mu.Lock()
	defer mu.Unlock()
	if tries != 1 || c.Unconfirmed != 1 || c.Lost != 0 || c.Resent != 0 || len(losses) != 1 || losses[0] != 5 {
		t.Fatalf("report 5 sent %d times, losses %v, counters %+v; want sent once, unconfirmed once", tries, losses, c)
	}
}

// TestRestartedTranslatorSpan: a translator that died and restarted acks
// from the first number it saw; the reports before it, which the dead one
// never acknowledged, are counted Unconfirmed (with OnLoss), not taken as
// acknowledged.
func TestRestartedTranslatorSpan(t *testing.T) {
	ackPort := freePort(t)
	ft := newFakeTranslator(t, ackPort, func(uint32, int) bool { return true })
	var mu sync.Mutex
	lost := map[uint32]bool{}
	r := wideReporter(t, ft, ackPort, Config{OnLoss: func(seq uint32, _ []byte, why dta.Reason) {
		mu.Lock()
		defer mu.Unlock()
		if why != dta.ReasonUnconfirmed {
			t.Errorf("OnLoss(%d) reason %v", seq, why)
		}
		lost[seq] = true
	}})
	defer r.Close()
	send := func(from, to int) {
		for i := from; i < to; i++ {
			if err := r.KeyIncrement(uint32(i), 1, 1); err != nil {
				t.Fatal(err)
			}
		}
		if err := r.Flush(); err != nil {
			t.Fatal(err)
		}
	}
	send(0, 100)
	waitFor(t, "the first 100 acknowledged", func() bool {
		r.mu.Lock()
		defer r.mu.Unlock()
		return r.credit.acked == 100
	})
	ft.mu.Lock()
	ft.down = true
	ft.mu.Unlock()
	send(100, 150) // into the void
	time.Sleep(20 * time.Millisecond)
	ft.mu.Lock()
	ft.down, ft.fresh = false, true
	ft.mu.Unlock()
	send(150, 200)
	waitFor(t, "the reports before the restart counted", func() bool { return r.Counters().Unconfirmed == 50 })
	mu.Lock()
	defer mu.Unlock()
	for i := uint32(100); i < 150; i++ {
		if !lost[i] {
			t.Fatalf("report %d, sent while the translator was down, not handed to OnLoss (%d were)", i, len(lost))
		}
	}
	if c := r.Counters(); c.Lost != 0 || c.Unconfirmed != 50 {
		t.Fatalf("counters %+v, want 50 unconfirmed and none lost", c)
	}
}

// waitFor polls cond for up to 5 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for end := time.Now().Add(5 * time.Second); !cond(); time.Sleep(time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// TestCreditProbe: waiting for credit while acks do not move, Send sends a
// copy of the last report every 20 ms, so that a translator that never got
// the last reports learns their numbers (and NACKs them as missing) instead
// of the reporter counting them unconfirmed a second later.
func TestCreditProbe(t *testing.T) {
	ackPort := freePort(t)
	ft := newFakeTranslator(t, ackPort, func(uint32, int) bool { return true })
	ft.mu.Lock()
	ft.holdAcks = true // it talks, but its acks do not move
	ft.mu.Unlock()
	// The last report before the credit runs out is lost the first time.
	ft.mu.Lock()
	ft.lose = func(seq uint32, attempt int) bool { return seq == credit-1 && attempt == 1 }
	ft.mu.Unlock()
	r := wideReporter(t, ft, ackPort, Config{})
	defer r.Close()
	for i := range credit {
		if err := r.KeyWrite(uint32(i), []byte{1, 2, 3, 4}, 1); err != nil {
			t.Fatal(err)
		}
	}
	done := make(chan error, 1)
	go func() { done <- r.KeyWrite(0, []byte{1, 2, 3, 4}, 1) }() // waits for credit
	waitFor(t, "probes", func() bool {
		ft.mu.Lock()
		defer ft.mu.Unlock()
		_, got := ft.taken[credit-1]
		return got && ft.dups >= 3
	})
	ft.mu.Lock()
	ft.holdAcks = false // the next ack gives credit back
	ft.mu.Unlock()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if c := r.Counters(); c.Probes < 4 || c.Unconfirmed != 0 {
		t.Fatalf("counters %+v: want probes and nothing unconfirmed", c)
	}
}

// TestSilentTranslatorGetsNoCopies: once the translator has been silent
// for 150 ms (it may have died after applying them, and one restarted on
// its address would apply copies again), Send stops its credit probes and
// a resend that drew no answer is counted unconfirmed, not sent again.
func TestSilentTranslatorGetsNoCopies(t *testing.T) {
	ft, r := lostResend(t)
	defer r.Close()
	waitFor(t, "the resend", func() bool {
		ft.mu.Lock()
		defer ft.mu.Unlock()
		return ft.attempts[5] == 2
	})
	ft.mu.Lock()
	ft.down = true // dies: no more acks
	ft.mu.Unlock()
	done := make(chan error, 1)
	go func() { // the credit runs out, and Send waits
		for i := range credit {
			if err := r.KeyIncrement(uint32(i), 1, 1); err != nil {
				done <- err
				return
			}
		}
		done <- nil
	}()
	waitFor(t, "the resend counted unconfirmed", func() bool { return r.Counters().Unconfirmed >= 1 })
	probes := r.Counters().Probes
	time.Sleep(300 * time.Millisecond) // Send still waits: a second of silence ends that
	c := r.Counters()
	ft.mu.Lock()
	tries := ft.attempts[5]
	ft.mu.Unlock()
	if c.Retimed != 0 || tries != 2 || c.Probes != probes {
		t.Fatalf("silent translator: report 5 tried %d times, counters %+v (probes %d before)", tries, c, probes)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// lostResend sends 20 reports to a fake translator that NACKs number 5
// and loses its first resend.
func lostResend(t *testing.T) (*fakeTranslator, *Reporter) {
	ackPort := freePort(t)
	ft := newFakeTranslator(t, ackPort, func(seq uint32, attempt int) bool { return seq != 5 || attempt > 1 })
	ft.mu.Lock()
	ft.lose = func(seq uint32, attempt int) bool { return seq == 5 && attempt == 2 }
	ft.mu.Unlock()
	r := wideReporter(t, ft, ackPort, Config{})
	for i := range 20 {
		if err := r.KeyIncrement(uint32(i), 1, 1); err != nil {
			t.Fatal(err)
		}
	}
	if err := r.Flush(); err != nil {
		t.Fatal(err)
	}
	return ft, r
}

// TestLostResendRetimed: a resend lost on the way draws neither an ack nor
// a NACK, and the cumulative ack had passed its number when it was
// NACKed: after 200 ms it is sent again, and that one is acknowledged on
// its own. Nothing is lost silently.
func TestLostResendRetimed(t *testing.T) {
	ft, r := lostResend(t)
	waitFor(t, "the resend sent again and acknowledged", func() bool { return r.Counters().ResendAcks == 1 })
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	c := r.Counters()
	ft.mu.Lock()
	tries := ft.attempts[5]
	_, taken := ft.taken[5]
	ft.mu.Unlock()
	if !taken || tries != 3 || c.Retimed != 1 || c.Lost != 0 || c.Unconfirmed != 0 {
		t.Fatalf("report 5 taken %v after %d tries, counters %+v", taken, tries, c)
	}
}

// TestZeroConfigDroppingTranslator: a reporter configured with nothing
// but where to send (and an ack port of its own, so that tests run side
// by side) against a translator whose socket drops a third of the
// reports: every report is either taken by the translator or counted
// Lost or Unconfirmed; none is silently counted delivered.
func TestZeroConfigDroppingTranslator(t *testing.T) {
	const n = 1000
	ackPort := freePort(t)
	ft := newFakeTranslator(t, ackPort, func(uint32, int) bool { return true })
	ft.mu.Lock()
	ft.lose = func(seq uint32, attempt int) bool { return attempt == 1 && seq%3 == 1 }
	ft.mu.Unlock()
	r, err := New(Config{Translator: ft.addr(), AckPort: ackPort})
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		if err := r.KeyWrite(uint32(i), []byte{1, 2, 3, 4}, 1); err != nil {
			t.Fatal(err)
		}
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	taken, _, _ := ft.stats()
	c := r.Counters()
	if missing := uint64(n - taken); c.Lost+c.Unconfirmed < missing {
		t.Fatalf("the translator took %d of %d reports, but the reporter counts %d lost and %d unconfirmed: %d missing reports uncounted (counters %+v)",
			taken, n, c.Lost, c.Unconfirmed, missing-c.Lost-c.Unconfirmed, c)
	}
	if c.Resent == 0 {
		t.Errorf("counters %+v: want the dropped reports resent after the translator's NACKs", c)
	}
	t.Logf("taken %d of %d; counters %+v", taken, n, c)
}

// TestZeroConfigSilentTranslator: against a translator that never
// answers (its socket is bound, unread, with a small buffer), a reporter
// with the zero Delivery counts every report Unconfirmed by Close.
func TestZeroConfigSilentTranslator(t *testing.T) {
	const n = 1000
	uc, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer uc.Close()
	_ = uc.SetReadBuffer(4096)
	r, err := New(Config{Translator: uc.LocalAddr().(*net.UDPAddr).AddrPort(), AckPort: freePort(t)})
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		if err := r.KeyWrite(uint32(i), []byte{1, 2, 3, 4}, 1); err != nil {
			t.Fatal(err)
		}
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if c := r.Counters(); c.Unconfirmed+c.Lost != n {
		t.Fatalf("counters %+v: %d lost + %d unconfirmed, want all %d reports unconfirmed", c, c.Lost, c.Unconfirmed, n)
	}
}

// TestUnansweredResendsUnconfirmed: a report NACKed once whose resends all
// go unanswered (the translator took them, its acks were lost) while the
// cumulative acks keep coming: once MaxResends are spent it is counted
// Unconfirmed, since a copy may have been applied, never Lost.
func TestUnansweredResendsUnconfirmed(t *testing.T) {
	ackPort := freePort(t)
	ft := newFakeTranslator(t, ackPort, func(seq uint32, attempt int) bool { return seq != 5 || attempt > 1 })
	ft.mu.Lock()
	ft.lose = func(seq uint32, attempt int) bool { return seq == 5 && attempt > 1 } // applied, unanswered
	ft.mu.Unlock()
	r := wideReporter(t, ft, ackPort, Config{MaxResends: 2})
	for i := range 20 {
		if err := r.KeyIncrement(uint32(i), 1, 1); err != nil {
			t.Fatal(err)
		}
	}
	if err := r.Flush(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "report 5 given up", func() bool { return r.Counters().GaveUp == 1 })
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if c := r.Counters(); c.Lost != 0 || c.Unconfirmed != 1 {
		t.Fatalf("counters %+v: want report 5 unconfirmed (its resends may have been applied), none lost", c)
	}
}

// TestProbeOfHeldResendIsNotAResend: a report NACKed once whose resend the
// translator takes and holds (an Append entry waiting for its batch: its
// copies draw no answer until it is written). The copies sent meanwhile,
// 200 ms after the last without an answer, are probes, not resends: they
// do not spend MaxResends, so the report is acknowledged on its own when
// the translator writes it, neither lost nor unconfirmed.
func TestProbeOfHeldResendIsNotAResend(t *testing.T) {
	ackPort := freePort(t)
	ft := newFakeTranslator(t, ackPort, func(seq uint32, attempt int) bool { return seq != 5 || attempt > 1 })
	ft.mu.Lock()
	ft.hold = map[uint32]bool{5: true}
	ft.mu.Unlock()
	r := wideReporter(t, ft, ackPort, Config{MaxResends: 2})
	for i := range 20 {
		if err := r.KeyIncrement(uint32(i), 1, 1); err != nil {
			t.Fatal(err)
		}
	}
	if err := r.Flush(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "report 5's resend taken", func() bool {
		ft.mu.Lock()
		defer ft.mu.Unlock()
		_, ok := ft.taken[5]
		return ok
	})
	// One resend, then a copy each 200 ms without an answer: with
	// MaxResends 2, a reporter that counts them as resends gives up
	// before the second.
	waitFor(t, "two unanswered copies, or report 5 given up", func() bool {
		c := r.Counters()
		return c.Retimed == 2 || c.GaveUp != 0 || c.Unconfirmed != 0
	})
	ft.release(5)
	waitFor(t, "report 5 acknowledged on its own, or given up", func() bool {
		c := r.Counters()
		return c.ResendAcks == 1 || c.GaveUp != 0 || c.Unconfirmed != 0
	})
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	ft.mu.Lock()
	tries := ft.attempts[5]
	ft.mu.Unlock()
	if c := r.Counters(); c.ResendAcks != 1 || c.GaveUp != 0 || c.Lost != 0 || c.Unconfirmed != 0 {
		t.Fatalf("report 5 sent %d times; counters %+v: want one resend, acknowledged on its own, none given up, lost or unconfirmed", tries, c)
	}
}

// TestCloseWaitsForALiveTranslator: at Close, the translator still talks
// (its keepalive acks come every 50 ms) but acknowledges the last reports
// only after 1.5 s, as one whose collector is slow under load: Close waits
// for them instead of counting them unconfirmed after a second.
func TestCloseWaitsForALiveTranslator(t *testing.T) {
	ackPort := freePort(t)
	ft := newFakeTranslator(t, ackPort, func(uint32, int) bool { return true })
	ft.mu.Lock()
	ft.holdAcks = true // it talks, but its acks do not move
	ft.mu.Unlock()
	r := wideReporter(t, ft, ackPort, Config{})
	for i := range 100 {
		if err := r.KeyWrite(uint32(i), []byte{1, 2, 3, 4}, 1); err != nil {
			t.Fatal(err)
		}
	}
	go func() {
		time.Sleep(1500 * time.Millisecond)
		ft.mu.Lock()
		ft.holdAcks, ft.ackedTo = false, ft.next
		a := dta.Ack{Seq: ft.next - 1, Wide: true, Span: uint16(ft.next - ft.first), Session: ft.sess}.AppendTo(nil)
		peer := ft.peer
		ft.mu.Unlock()
		if _, err := ft.uc.WriteToUDPAddrPort(a, peer); err != nil {
			t.Error(err)
		}
	}()
	start := time.Now()
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if c := r.Counters(); c.Unconfirmed != 0 || c.Lost != 0 || time.Since(start) < 1400*time.Millisecond {
		t.Fatalf("Close returned after %v with counters %+v: want it to wait for the acks, nothing unconfirmed", time.Since(start), c)
	}
}

// TestBusyIsNotGivenUp: busy NACKs are flow control, not refusals: a report
// the translator NACKs busy 20 times, far more than MaxResends, is resent
// until taken, and nothing is lost (TestThreeProcessesBusyCores lost one
// report so, NACKed busy 9 times while the cores were starved).
func TestBusyIsNotGivenUp(t *testing.T) {
	ackPort := freePort(t)
	ft := newFakeTranslator(t, ackPort, func(seq uint32, attempt int) bool { return seq != 5 || attempt > 20 })
	r := wideReporter(t, ft, ackPort, Config{MaxResends: 2})
	for i := range 20 {
		if err := r.KeyIncrement(uint32(i), 1, 1); err != nil {
			t.Fatal(err)
		}
	}
	if err := r.Flush(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "report 5 taken", func() bool {
		ft.mu.Lock()
		defer ft.mu.Unlock()
		_, ok := ft.taken[5]
		return ok
	})
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	ft.mu.Lock()
	defer ft.mu.Unlock()
	if c := r.Counters(); ft.attempts[5] != 21 || c.GaveUp != 0 || c.Lost != 0 || c.Unconfirmed != 0 || c.Resent != 20 {
		t.Errorf("report 5 sent %d times, counters %+v; want 21 copies (20 busy NACKs, each resent), nothing given up or lost", ft.attempts[5], c)
	}
}
