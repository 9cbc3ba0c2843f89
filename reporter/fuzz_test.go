package reporter

import (
	"bytes"
	"net/netip"
	"testing"
	"time"

	"github.com/dtakit/dtakit/dta"
	"github.com/dtakit/dtakit/internal/udpio"
)

// FuzzNACKs hands a reporter that sent some reports a batch of acks built
// from the input:
//
//	flags (1) · reports sent (1) · then per ack: source (1) · length (1) · bytes
//
// flags bit 0 selects wide sequence numbers (of session 0); an ack's source
// byte, when odd, makes it come from another address than the translator.
// A wide reporter takes only wide acks of its session. Whatever
// the acks say, the reporter resends only reports it sent, each the report
// whose number a NACK from the translator named, never more than
// MaxResends times besides once per busy NACK (flow control, which spends
// no resend), and counts every ack it cannot use.
func FuzzNACKs(f *testing.F) {
	nack := func(seq uint32, wide bool) []byte {
		return dta.Ack{Seq: seq, NACK: true, Wide: wide}.AppendTo(nil)
	}
	n5 := nack(5, false)
	w5 := nack(5, true)
	f.Add(append([]byte{0, 10, 0, byte(len(n5))}, n5...))
	f.Add(append([]byte{1, 10, 0, byte(len(w5))}, w5...))
	f.Add(append([]byte{1, 10, 1, byte(len(w5))}, w5...))
	other := dta.Ack{Seq: 5, NACK: true, Wide: true, Session: 1}.AppendTo(nil)
	f.Add(append(append([]byte{1, 10, 0, byte(len(other))}, other...), append([]byte{0, byte(len(w5))}, w5...)...))
	f.Add(append(append([]byte{0, 255, 0, byte(len(n5))}, n5...), append([]byte{0, byte(len(n5))}, n5...)...))
	rej := dta.Ack{Seq: 5, NACK: true, Wide: true, Reason: dta.ReasonRejected}.AppendTo(nil)
	f.Add(append(append([]byte{1, 10, 0, byte(len(rej))}, rej...), append([]byte{0, byte(len(rej))}, rej...)...))
	f.Fuzz(func(t *testing.T, in []byte) {
		if len(in) < 2 || len(in) > 1024 {
			return
		}
		s := newSink(t)
		wide := in[0]&1 != 0
		r, err := New(Config{Translator: s.addr(), Delivery: FireAndForget, Sequenced: true, WideSequence: wide, Batch: 1, MaxResends: 2})
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		r.session = 0 // the session the inputs' acks can name
		sent := sendKeys(t, r, s, int(in[1])+300*int(in[0]>>7))
		ms := fuzzAcks(in[2:], s.addr())
		now := time.Now()
		r.handleAcks(ms, now)
		// Idle ticks until every resend's backoff and pace allowed it.
		for i := 0; i < 10000 && r.pending() > 0; i++ {
			now = now.Add(10 * time.Millisecond)
			r.handleAcks(nil, now)
		}
		c := r.Counters()
		if r.pending() != 0 || c.Lost < c.GaveUp {
			t.Fatalf("%d resends pending, counters %+v", r.pending(), c)
		}
		// Every NACK is resent, given up, unknown, (wide) taken as
		// unconfirmed or refused for good as rejected, or its resend
		// dropped: superseded, or moot.
		unconf := reasonNACKs(ms, s.addr(), wide, dta.ReasonUnconfirmed)
		rejected := reasonNACKs(ms, s.addr(), wide, dta.ReasonRejected)
		if c.Retimed != 0 || c.NACKs != c.Resent+c.GaveUp+c.Unknown+unconf+rejected+c.Superseded+c.Moot-malformed(ms, s.addr()) {
			t.Fatalf("NACKs %d, unconfirmed NACKs %d, rejected NACKs %d, %d malformed; counters %+v", c.NACKs, unconf, rejected, malformed(ms, s.addr()), c)
		}
		if c.Rejected > rejected || c.Rejected > c.Lost {
			t.Fatalf("%d rejected NACKs, counters %+v", rejected, c)
		}
		checkResends(t, s, c.Resent, sent, ms, wide)
		if c.Foreign != foreign(ms, s.addr(), wide) {
			t.Fatalf("foreign %d, want %d", c.Foreign, foreign(ms, s.addr(), wide))
		}
	})
}

// sendKeys sends n Key-Write reports through r and returns them as s
// received them, by sequence number.
func sendKeys(t *testing.T, r *Reporter, s *sink, n int) map[uint32][]byte {
	t.Helper()
	sent := map[uint32][]byte{}
	for i := range n {
		if err := r.KeyWrite(uint32(i), []byte{byte(i), 1, 2, 3}, 1); err != nil {
			t.Fatal(err)
		}
		b, _ := s.read()
		h, err := dta.ParseHeader(b)
		if err != nil {
			t.Fatal(err)
		}
		sent[h.Seq] = b
	}
	return sent
}

// fuzzAcks cuts the fuzzer's input into datagrams (a source byte, whose
// low bit says another address than the translator's, a length, the
// bytes).
func fuzzAcks(in []byte, translator netip.AddrPort) []udpio.Datagram {
	var ms []udpio.Datagram
	other := netip.MustParseAddrPort("127.0.0.1:9")
	for len(in) >= 2 {
		src, n := in[0], min(int(in[1]), len(in)-2)
		m := udpio.Datagram{Buf: append([]byte(nil), in[2:2+n]...), Addr: translator}
		if src&1 != 0 {
			m.Addr = other
		}
		ms = append(ms, m)
		in = in[2+n:]
	}
	return ms
}

// checkResends reads the n resends s received and checks each is a copy
// of what was sent, at most MaxResends (2) times, under a NACK of the
// translator's naming it.
func checkResends(t *testing.T, s *sink, n uint64, sent map[uint32][]byte, ms []udpio.Datagram, wide bool) {
	t.Helper()
	resends := map[uint32]int{}
	for range n {
		b, _ := s.read()
		h, err := dta.ParseHeader(b)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(b, sent[h.Seq]) {
			t.Fatalf("resent %x as number %d, which was sent as %x", b, h.Seq, sent[h.Seq])
		}
		if resends[h.Seq]++; resends[h.Seq] > 2+busyNACKs(ms, s.addr(), h.Seq, wide) {
			t.Fatalf("number %d resent more than MaxResends times and once per busy NACK", h.Seq)
		}
		named := false
		for _, m := range ms {
			a, err := dta.ParseAck(m.Buf)
			named = named || (err == nil && m.Addr == s.addr() && a.NACK && a.Seq == h.Seq && a.Wide == wide && a.Session == 0)
		}
		if !named {
			t.Fatalf("number %d resent, but no NACK from the translator names it", h.Seq)
		}
	}
}

// busyNACKs counts the wide busy NACKs from the translator naming seq,
// each of which a wide reporter resends without spending MaxResends.
func busyNACKs(ms []udpio.Datagram, from netip.AddrPort, seq uint32, wide bool) int {
	n := 0
	for _, m := range ms {
		a, err := dta.ParseAck(m.Buf)
		if err == nil && m.Addr == from && wide && a.NACK && a.Wide && a.Session == 0 && a.Seq == seq && a.Reason == dta.ReasonBusy {
			n++
		}
	}
	return n
}

// reasonNACKs counts the wide NACKs from the translator of session 0 with
// the given reason. A wide reporter never resends one with reason
// unconfirmed or rejected: it counts the report unconfirmed or lost.
func reasonNACKs(ms []udpio.Datagram, from netip.AddrPort, wide bool, reason dta.Reason) uint64 {
	n := uint64(0)
	for _, m := range ms {
		a, err := dta.ParseAck(m.Buf)
		if err == nil && m.Addr == from && wide && a.NACK && a.Wide && a.Session == 0 && a.Reason == reason {
			n++
		}
	}
	return n
}

// malformed counts the acks from the translator that do not parse.
func malformed(ms []udpio.Datagram, from netip.AddrPort) uint64 {
	n := uint64(0)
	for _, m := range ms {
		if _, err := dta.ParseAck(m.Buf); err != nil && m.Addr == from {
			n++
		}
	}
	return n
}

// foreign counts the acks a reporter ignores: from another address than
// from, or when wide, narrow or of another session than 0.
func foreign(ms []udpio.Datagram, from netip.AddrPort, wide bool) uint64 {
	n := uint64(0)
	for _, m := range ms {
		a, err := dta.ParseAck(m.Buf)
		if m.Addr != from || wide && err == nil && (!a.Wide || a.Session != 0) {
			n++
		}
	}
	return n
}

// pending returns the number of resends waiting.
func (r *Reporter) pending() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.resends)
}
