package reporter

import (
	"bytes"
	"encoding/binary"
	"errors"
	"net"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dtakit/dtakit/dta"
	"github.com/dtakit/dtakit/internal/udpio"
	"github.com/dtakit/dtakit/postcard"
)

// sink is a UDP socket standing in for the translator.
type sink struct {
	t  *testing.T
	uc *net.UDPConn
}

func newSink(t *testing.T) *sink {
	uc, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { uc.Close() })
	return &sink{t: t, uc: uc}
}

func (s *sink) addr() netip.AddrPort { return s.uc.LocalAddr().(*net.UDPAddr).AddrPort() }

// read returns the next datagram and its source, failing after a second.
func (s *sink) read() ([]byte, netip.AddrPort) {
	s.t.Helper()
	buf := make([]byte, 65536)
	s.uc.SetReadDeadline(time.Now().Add(time.Second))
	n, from, err := s.uc.ReadFromUDPAddrPort(buf)
	if err != nil {
		s.t.Fatalf("sink: %v", err)
	}
	return buf[:n], from
}

// freePort returns a UDP port that was free a moment ago.
func freePort(t *testing.T) uint16 {
	uc, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer uc.Close()
	return uint16(uc.LocalAddr().(*net.UDPAddr).Port)
}

func TestSendBatchesAndFlush(t *testing.T) {
	s := newSink(t)
	r, err := New(Config{Translator: s.addr(), Delivery: FireAndForget, Batch: 4})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	data := []byte{1, 2, 3, 4}
	if err := r.KeyWrite(7, data, 2); err != nil {
		t.Fatal(err)
	}
	if err := r.KeyIncrement(8, 1000, 3); err != nil {
		t.Fatal(err)
	}
	if err := r.Append(9, []byte{0, 0, 0, 5}, true); err != nil {
		t.Fatal(err)
	}
	// Nothing sent yet: the batch holds 4.
	s.uc.SetReadDeadline(time.Now().Add(20 * time.Millisecond))
	if _, _, err := s.uc.ReadFromUDPAddrPort(make([]byte, 64)); err == nil {
		t.Fatal("a report left before the batch was full")
	}
	if err := r.Postcard(10, 2, 5, 77); err != nil { // the fourth: the batch goes
		t.Fatal(err)
	}
	want := []dta.Report{
		{Header: dta.Header{Opcode: dta.OpKeyWrite}, KeyWrite: dta.KeyWrite{Redundancy: 2, Key: 7, Data: data}},
		{Header: dta.Header{Opcode: dta.OpKeyIncrement}, KeyIncrement: dta.KeyIncrement{Redundancy: 3, Key: 8, Counter: 1000}},
		{Header: dta.Header{Opcode: dta.OpAppend, Immediate: true}, Append: dta.Append{ListID: 9, Data: []byte{0, 0, 0, 5}}},
		{Header: dta.Header{Opcode: dta.OpPostcard}, Postcard: dta.Postcard{Key: 10, Hop: 2, Value: 77, PathLength: 5, HasPathLength: true}},
	}
	for i, w := range want {
		b, from := s.read()
		if from != r.LocalAddr() {
			t.Errorf("report %d from %v, want %v", i, from, r.LocalAddr())
		}
		wb, _ := dta.AppendPayload(nil, &w)
		if !bytes.Equal(b, wb) {
			t.Errorf("report %d = %x, want %x", i, b, wb)
		}
	}
	if err := r.KeyWrite(11, data, 1); err != nil {
		t.Fatal(err)
	}
	if err := r.Flush(); err != nil {
		t.Fatal(err)
	}
	if b, _ := s.read(); b[0] != byte(dta.OpKeyWrite) {
		t.Errorf("flushed report %x", b)
	}
	if c := r.Counters(); c.Datagrams != 5 || c.Unconfirmed != 5 {
		t.Errorf("counters %+v: want 5 sent, all 5 unconfirmed (fire and forget)", c)
	}
	// Invalid reports are refused by dta, not sent.
	if err := r.KeyWrite(1, []byte{1, 2, 3}, 1); !errors.Is(err, dta.ErrDataLength) {
		t.Errorf("3-byte data: %v", err)
	}
}

// TestFireAndForgetNumbers: a fire-and-forget reporter numbers its
// reports 0..255 and round again when asked, takes no acks, and counts
// every report unconfirmed.
func TestFireAndForgetNumbers(t *testing.T) {
	s := newSink(t)
	r, err := New(Config{Translator: s.addr(), Delivery: FireAndForget, Sequenced: true, Batch: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	for i := range 300 {
		if err := r.KeyWrite(uint32(i), binary.BigEndian.AppendUint32(nil, uint32(i)+1), 1); err != nil {
			t.Fatal(err)
		}
		b, _ := s.read()
		rep, err := dta.ParseReport(b)
		if err != nil || !rep.Header.Sequenced || rep.Header.Wide || rep.Header.Seq != uint32(uint8(i)) {
			t.Fatalf("report %d: %+v, %v: want 8-bit number %d", i, rep.Header, err, uint8(i))
		}
	}
	if r.ack != nil {
		t.Error("a fire-and-forget reporter listens for acks")
	}
	if c := r.Counters(); c.Datagrams != 300 || c.Unconfirmed != 300 || c.Lost != 0 {
		t.Errorf("counters %+v: want 300 sent, 300 unconfirmed", c)
	}
}

func TestNACKForUnsentSequenceNumber(t *testing.T) {
	s := newSink(t)
	ackPort := freePort(t)
	r, err := New(Config{Translator: s.addr(), AckPort: ackPort})
	if err != nil {
		t.Fatal(err)
	}
	to := net.UDPAddrFromAddrPort(netip.AddrPortFrom(r.LocalAddr().Addr(), ackPort))
	s.uc.WriteToUDP(dta.Ack{Seq: 5, NACK: true, Wide: true, Session: r.Session()}.AppendTo(nil), to)
	deadline := time.Now().Add(time.Second)
	for r.Counters().Unknown == 0 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if c := r.Counters(); c.NACKs != 1 || c.Unknown != 1 || c.Resent != 0 {
		t.Errorf("counters %+v", c)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if err := r.KeyWrite(1, []byte{1, 2, 3, 4}, 1); !errors.Is(err, ErrClosed) {
		t.Errorf("send after close: %v", err)
	}
}

func TestConfig(t *testing.T) {
	for _, c := range []struct {
		name string
		cfg  Config
	}{
		{"batch 2000", Config{Batch: 2000}},
		{"NACKs with fire and forget", Config{Delivery: FireAndForget, Sequenced: true, WideSequence: true, HandleNACKs: true}},
		{"wide without Sequenced", Config{Delivery: FireAndForget, WideSequence: true}},
		{"unknown delivery", Config{Delivery: 7}},
		{"unspecified local address", Config{Local: netip.MustParseAddrPort("0.0.0.0:0")}},
		{"negative rate", Config{Rate: -1}},
	} {
		if _, err := New(c.cfg); !errors.Is(err, ErrConfig) {
			t.Errorf("%s: %v, want ErrConfig", c.name, err)
		}
	}
}

// TestNarrowNACKsRefused: NACK resends of 8-bit numbers are refused when
// configured, with an error saying why: after a wrap a late NACK names a
// different report.
func TestNarrowNACKsRefused(t *testing.T) {
	for _, cfg := range []Config{
		{Sequenced: true, HandleNACKs: true},
		{Sequenced: true}, // Confirmed delivery takes NACKs
	} {
		r, err := New(cfg)
		if err == nil {
			r.Close()
		}
		if !errors.Is(err, ErrNarrowNACKs) || !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), "WideSequence") {
			t.Errorf("%+v: %v, want ErrNarrowNACKs (and ErrConfig) naming WideSequence", cfg, err)
		}
	}
}

func TestSendDoesNotAllocate(t *testing.T) {
	s := newSink(t)
	r, err := New(Config{Translator: s.addr(), Delivery: FireAndForget, Sequenced: true})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	d := []byte{1, 2, 3, 4}
	for i := range 512 { // fill the window once
		_ = r.KeyWrite(uint32(i), d, 2)
	}
	allocs := testing.AllocsPerRun(1000, func() { _ = r.KeyWrite(5, d, 2) })
	if allocs != 0 {
		t.Errorf("%v allocations per report", allocs)
	}
}

func BenchmarkSend(b *testing.B) {
	uc, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		b.Fatal(err)
	}
	defer uc.Close()
	r, err := New(Config{Translator: uc.LocalAddr().(*net.UDPAddr).AddrPort(), Delivery: FireAndForget})
	if err != nil {
		b.Fatal(err)
	}
	defer r.Close()
	d := []byte{1, 2, 3, 4}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		_ = r.KeyWrite(uint32(i), d, 2)
	}
}

// TestForgedNACKIgnored: a NACK from anywhere but the translator's report
// socket resends nothing.
func TestForgedNACKIgnored(t *testing.T) {
	s := newSink(t)
	ackPort := freePort(t)
	r, err := New(Config{Translator: s.addr(), AckPort: ackPort, Batch: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	for i := range 10 {
		if err := r.KeyWrite(uint32(i), []byte{0, 0, 0, 1}, 1); err != nil {
			t.Fatal(err)
		}
		s.read()
	}
	forger, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer forger.Close()
	to := net.UDPAddrFromAddrPort(netip.AddrPortFrom(r.LocalAddr().Addr(), ackPort))
	for seq := range uint8(10) {
		if _, err := forger.WriteToUDP(dta.Ack{Seq: uint32(seq), NACK: true, Wide: true}.AppendTo(nil), to); err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.Now().Add(5 * time.Second)
	for r.Counters().Foreign < 10 {
		if time.Now().After(deadline) {
			t.Fatalf("counters %+v: want 10 foreign acks", r.Counters())
		}
		time.Sleep(time.Millisecond)
	}
	if c := r.Counters(); c.Resent != 0 || c.NACKs != 0 || c.Datagrams != 10 {
		t.Fatalf("counters %+v: forged NACKs made resends", c)
	}
}

// TestWideSequenceLateNACK: with 32-bit sequence numbers a NACK names one
// report: it is resent, and a NACK that arrives after the window moved on
// resends nothing, where an 8-bit number would name a later report.
func TestWideSequenceLateNACK(t *testing.T) {
	s := newSink(t)
	ackPort := freePort(t)
	r, err := New(Config{Translator: s.addr(), Sequenced: true, WideSequence: true, HandleNACKs: true, AckPort: ackPort, Batch: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var sent [][]byte
	for i := range WideWindow + 300 {
		if err := r.KeyWrite(uint32(i), binary.BigEndian.AppendUint32(nil, uint32(i)+1), 1); err != nil {
			t.Fatal(err)
		}
		b, _ := s.read()
		rep, err := dta.ParseReport(b)
		// Waiting for credit (the sink sends no ack), the reporter sends
		// copies of the last report to probe.
		for err == nil && i > 0 && rep.Header.Seq == uint32(i-1) && bytes.Equal(b, sent[i-1]) {
			b, _ = s.read()
			rep, err = dta.ParseReport(b)
		}
		if err != nil || !rep.Header.Wide || rep.Header.Seq != uint32(i) {
			t.Fatalf("report %d: %+v, %v", i, rep.Header, err)
		}
		sent = append(sent, b)
	}
	to := net.UDPAddrFromAddrPort(netip.AddrPortFrom(r.LocalAddr().Addr(), ackPort))
	// A NACK for report 4200, in the window: that report again.
	if _, err := s.uc.WriteToUDP(dta.Ack{Seq: 4200, NACK: true, Wide: true, Reason: dta.ReasonBusy, Session: r.Session()}.AppendTo(nil), to); err != nil {
		t.Fatal(err)
	}
	if b, _ := s.read(); !bytes.Equal(b, sent[4200]) {
		t.Fatalf("resent %x, want report 4200", b)
	}
	// A late NACK for report 100, whose slot now holds report 4196: nothing.
	// (An 8-bit NACK for 100 would have resent report 4196's number.)
	s.uc.WriteToUDP(dta.Ack{Seq: 100, NACK: true, Wide: true, Session: r.Session()}.AppendTo(nil), to)
	// A narrow ack means nothing to a wide reporter: foreign.
	s.uc.WriteToUDP(dta.Ack{Seq: 7, NACK: true}.AppendTo(nil), to)
	deadline := time.Now().Add(5 * time.Second)
	for c := r.Counters(); c.Unknown < 1 || c.Foreign < 1; c = r.Counters() {
		if time.Now().After(deadline) {
			t.Fatalf("counters %+v: want 1 unknown NACK and 1 foreign", c)
		}
		time.Sleep(time.Millisecond)
	}
	if c := r.Counters(); c.Resent != 1 {
		t.Fatalf("counters %+v: a late NACK resent a report", c)
	}
}

// TestForeignSessionAcks: acks and NACKs from the translator's address but
// of another session than the reporter's (a forgery, or the answer to
// reports forged in its name) are neither believed nor taken as signs that
// the translator is there: they give no credit, resend nothing, and a
// reporter that hears nothing else counts its reports unconfirmed after
// ackStall instead of waiting for credit for ever. The same ack with its
// session is believed.
func TestForeignSessionAcks(t *testing.T) {
	s := newSink(t)
	ackPort := freePort(t)
	r, err := New(Config{Translator: s.addr(), Sequenced: true, WideSequence: true, HandleNACKs: true, AckPort: ackPort})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	forged := r.Session() ^ 0x8000_0000_0000_0001
	for i := range 10 {
		if err := r.KeyWrite(uint32(i), []byte{1, 2, 3, 4}, 1); err != nil {
			t.Fatal(err)
		}
	}
	if err := r.Flush(); err != nil {
		t.Fatal(err)
	}
	r.mu.Lock()
	before := r.credit.lastAckAt
	r.mu.Unlock()
	ms := []udpio.Datagram{
		{Addr: s.addr(), Buf: dta.Ack{Seq: 9, Wide: true, Span: 10, Session: forged}.AppendTo(nil)},
		{Addr: s.addr(), Buf: dta.Ack{Seq: 3, Wide: true, NACK: true, Reason: dta.ReasonBusy, Session: forged}.AppendTo(nil)},
		{Addr: s.addr(), Buf: dta.Ack{Seq: 4, Wide: true, Resend: true, Session: forged}.AppendTo(nil)},
		{Addr: s.addr(), Buf: dta.Ack{Seq: 5, NACK: true}.AppendTo(nil)},
	}
	r.handleAcks(ms, time.Now())
	r.mu.Lock()
	acked, last := r.credit.acked, r.credit.lastAckAt
	r.mu.Unlock()
	if c := r.Counters(); c.Acks != 0 || c.NACKs != 0 || c.Foreign != 4 || c.Resent != 0 || acked != 0 || !last.Equal(before) {
		t.Fatalf("counters %+v, acked to %d, last ack moved %v: want 4 foreign and nothing believed", c, acked, !last.Equal(before))
	}

	// Waiting for credit with only forged acks coming, Send gives up on
	// the translator after ackStall.
	stop := make(chan struct{})
	done := make(chan struct{})
	to := net.UDPAddrFromAddrPort(netip.AddrPortFrom(r.LocalAddr().Addr(), ackPort))
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			case <-time.After(10 * time.Millisecond):
			}
			_, _ = s.uc.WriteToUDP(dta.Ack{Seq: 0xffffffff, Wide: true, Session: forged}.AppendTo(nil), to)
		}
	}()
	start := time.Now()
	for i := 10; i <= credit; i++ {
		if err := r.KeyWrite(uint32(i), []byte{1, 2, 3, 4}, 1); err != nil {
			t.Fatal(err)
		}
		if time.Since(start) > 4*time.Second {
			break
		}
	}
	close(stop)
	<-done
	if c := r.Counters(); c.Unconfirmed != credit || c.Acks != 0 || c.Foreign < 10 {
		t.Fatalf("after %v: counters %+v; want the %d reports in flight unconfirmed after ackStall, forged acks ignored", time.Since(start), c, credit)
	}

	// With the reporter's own session the same ack is believed.
	r.mu.Lock()
	seq := r.seq
	r.mu.Unlock()
	r.handleAcks([]udpio.Datagram{{Addr: s.addr(), Buf: dta.Ack{Seq: seq - 1, Wide: true, Session: r.Session()}.AppendTo(nil)}}, time.Now())
	r.mu.Lock()
	acked = r.credit.acked
	r.mu.Unlock()
	if c := r.Counters(); c.Acks != 1 || acked != seq {
		t.Fatalf("counters %+v, acked to %d: want the ack of its own session taken, to %d", c, acked, seq)
	}
}

// TestLateNACKOfSettledReport: a NACK for a number gone from the window
// that a cumulative ack or the ack stall already passed (a restarted
// translator NACKs as missing the numbers it never saw) is unknown: the
// report was acknowledged, or counted unconfirmed, and is not counted
// lost as well.
func TestLateNACKOfSettledReport(t *testing.T) {
	s := newSink(t)
	r, err := New(Config{Translator: s.addr(), Sequenced: true, WideSequence: true, HandleNACKs: true, AckPort: freePort(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	ack := func(a dta.Ack) {
		// The translator answers reports it got: those sent.
		if err := r.Flush(); err != nil {
			t.Fatal(err)
		}
		a.Wide, a.Session = true, r.Session()
		r.handleAcks([]udpio.Datagram{{Addr: s.addr(), Buf: a.AppendTo(nil)}}, time.Now())
	}
	for i := range uint32(WideWindow + 100) {
		if err := r.KeyIncrement(i, 1, 1); err != nil {
			t.Fatal(err)
		}
		switch {
		case i == 9:
			ack(dta.Ack{Seq: 3, NACK: true, Reason: dta.ReasonUnconfirmed}) // 3 unconfirmed
			ack(dta.Ack{Seq: 9})                                            // 0..9 acknowledged
		case i%1000 == 999:
			ack(dta.Ack{Seq: i})
		}
	}
	ack(dta.Ack{Seq: 3, NACK: true, Reason: dta.ReasonMissing})
	ack(dta.Ack{Seq: 5, NACK: true, Reason: dta.ReasonMissing})
	if c := r.Counters(); c.Unconfirmed != 1 || c.Lost != 0 || c.Unknown != 2 {
		t.Fatalf("counters %+v: want 3 unconfirmed once, and the late NACKs of 3 and 5 unknown", c)
	}
}

// TestBatchGroupedByOpcode: a batch of mixed primitives goes grouped by
// opcode (equal sizes, which the kernel sends as one message each), the
// groups in the order of their first report, each primitive's reports in
// the order sent, and numbered in the order they go, so that the
// translator sees no number after a higher one (it would NACK the skipped
// one as missing).
func TestBatchGroupedByOpcode(t *testing.T) {
	s := newSink(t)
	// A batch a socket's default buffer holds, read before the next.
	const batch = 64
	r, err := New(Config{Translator: s.addr(), Delivery: FireAndForget, Sequenced: true, WideSequence: true, Batch: batch})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	want := []dta.Opcode{dta.OpKeyWrite, dta.OpKeyIncrement, dta.OpAppend, dta.OpPostcard}
	for b := range 3 {
		// A batch (Send sends it once full), then what the sink got.
		for i := uint32(b * batch); i < uint32((b+1)*batch); i++ {
			switch i % 4 {
			case 0:
				err = r.KeyWrite(i, []byte{1, 2, 3, 4}, 1)
			case 1:
				err = r.KeyIncrement(i, 1, 1)
			case 2:
				err = r.Append(i, []byte{1, 2, 3, 4, 5, 6, 7, 8}, false)
			case 3:
				err = r.Postcard(i, 1, 2, postcard.Value(i))
			}
			if err != nil {
				t.Fatal(err)
			}
		}
		var ops []dta.Opcode
		last := map[dta.Opcode]uint32{}
		for j := range batch {
			buf, _ := s.read()
			rep, err := dta.ParseReport(buf)
			if err != nil {
				t.Fatal(err)
			}
			h := rep.Header
			if n := uint32(b*batch + j); h.Seq != n {
				t.Fatalf("batch %d, datagram %d: number %d, want %d (ascending on the wire)", b, j, h.Seq, n)
			}
			if len(ops) == 0 || ops[len(ops)-1] != h.Opcode {
				ops = append(ops, h.Opcode)
			}
			// Each primitive's reports in the order sent: its first
			// field (key, list) is the index of the Send.
			var id uint32
			switch h.Opcode {
			case dta.OpKeyWrite:
				id = rep.KeyWrite.Key
			case dta.OpKeyIncrement:
				id = rep.KeyIncrement.Key
			case dta.OpAppend:
				id = rep.Append.ListID
			case dta.OpPostcard:
				id = rep.Postcard.Key
			}
			if p, ok := last[h.Opcode]; ok && id <= p {
				t.Fatalf("batch %d: %v report %d after %d: a primitive's order changed", b, h.Opcode, id, p)
			}
			last[h.Opcode] = id
		}
		if !slices.Equal(ops, want) {
			t.Fatalf("batch %d went in runs of opcodes %v, want one run each, %v", b, ops, want)
		}
	}
}

// TestOnLossSendOrder: OnLoss names a report by its place in the order of
// Send, though a grouped batch numbers it on the wire by the order it
// left: callers (dtareport's -losses) map losses to what they sent.
func TestOnLossSendOrder(t *testing.T) {
	s := newSink(t)
	type lossAt struct {
		seq uint32
		key uint32
	}
	var got []lossAt
	r, err := New(Config{Translator: s.addr(), AckPort: freePort(t), OnLoss: func(seq uint32, b []byte, reason dta.Reason) {
		if reason == dta.ReasonUnconfirmed {
			return // at Close: no ack comes from the sink
		}
		rep, err := dta.ParseReport(b)
		if err != nil || reason != dta.ReasonRejected {
			t.Errorf("loss of %d: %v, reason %d", seq, err, reason)
		}
		got = append(got, lossAt{seq, rep.KeyWrite.Key | rep.KeyIncrement.Key})
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	// Send order 0..7 alternates the two; the wire has 0, 2, 4, 6
	// (Key-Writes, numbered 0..3), then 1, 3, 5, 7 (numbered 4..7).
	for i := range uint32(8) {
		if i%2 == 0 {
			err = r.KeyWrite(100+i, []byte{1, 2, 3, 4}, 1)
		} else {
			err = r.KeyIncrement(100+i, 1, 1)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := r.Flush(); err != nil {
		t.Fatal(err)
	}
	for wire := range uint32(8) {
		b, _ := s.read()
		rep, err := dta.ParseReport(b)
		if err != nil {
			t.Fatal(err)
		}
		if rep.Header.Seq != wire {
			t.Fatalf("datagram %d numbered %d", wire, rep.Header.Seq)
		}
	}
	nack := func(wire uint32, reason dta.Reason) {
		a := dta.Ack{Seq: wire, NACK: true, Reason: reason, Wide: true, Session: r.Session()}
		r.handleAcks([]udpio.Datagram{{Addr: s.addr(), Buf: a.AppendTo(nil)}}, time.Now())
	}
	// The Key-Write sent third, the Key-Increment sent fourth: named from
	// the numbers sent; the Key-Increment sent sixth, refused once held
	// for a resend: named from its copy.
	nack(1, dta.ReasonRejected)
	nack(5, dta.ReasonRejected)
	nack(6, dta.ReasonBusy)
	nack(6, dta.ReasonRejected)
	r.deliverLosses()
	want := []lossAt{{2, 102}, {3, 103}, {5, 105}}
	if !slices.Equal(got, want) {
		t.Fatalf("OnLoss got (send order, key) %v, want %v", got, want)
	}
}
