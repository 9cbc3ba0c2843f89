package rc

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"net/netip"
	"testing"

	"github.com/dtakit/dtakit/rocev2"
)

// The responder's tests: its side of a queue pair runs from testRemote (a
// target) to testLocal (the requester).
func newTestResponder(t *testing.T, start rocev2.PSN) *Responder {
	t.Helper()
	r, err := NewResponder(ResponderConfig{Local: testRemote, Remote: testLocal, RemoteQPN: 0x22, StartPSN: start})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// response is a decoded response.
type response struct {
	op   rocev2.Opcode
	s    rocev2.Syndrome
	psn  rocev2.PSN
	msn  uint32
	orig uint64
}

// decodeResponses checks that each of bs is a well-formed response datagram
// of r's route to QP 0x22 (the ICRC included) and returns them decoded.
func decodeResponses(t *testing.T, r *Responder, bs ...[]byte) []response {
	t.Helper()
	var out []response
	for _, b := range bs {
		var p rocev2.Packet
		if err := p.DecodeDatagram(b, r.cfg.Local, r.Remote()); err != nil {
			t.Fatalf("response % x: %v", b, err)
		}
		if p.BTH.DestQP != 0x22 || p.BTH.PKey != rocev2.DefaultPKey || p.BTH.AckReq {
			t.Fatalf("response BTH %+v", p.BTH)
		}
		out = append(out, response{p.BTH.Opcode, p.AETH.Syndrome, p.BTH.PSN, p.AETH.MSN, p.AtomicAckETH.OrigRemoteData})
	}
	return out
}

func ack(psn rocev2.PSN, msn uint32) response {
	return response{op: rocev2.RCAcknowledge, s: rocev2.SyndromeACK, psn: psn, msn: msn}
}

func nak(s rocev2.Syndrome, psn rocev2.PSN, msn uint32) response {
	return response{op: rocev2.RCAcknowledge, s: s, psn: psn, msn: msn}
}

func wantResponses(t *testing.T, r *Responder, got [][]byte, want ...response) {
	t.Helper()
	d := decodeResponses(t, r, got...)
	if len(d) != len(want) {
		t.Fatalf("responses %+v, want %+v", d, want)
	}
	for i := range d {
		if d[i] != want[i] {
			t.Fatalf("response %d: %+v, want %+v", i, d[i], want[i])
		}
	}
}

func flush(r *Responder) [][]byte {
	_, dgs := r.Flush(nil)
	return dgs
}

// receive runs Receive with no buffer.
func receive(r *Responder, psn rocev2.PSN, op rocev2.Opcode) (Verdict, [][]byte) {
	v, _, dgs := r.Receive(nil, &rocev2.BTH{Opcode: op, PSN: psn})
	return v, dgs
}

func atomicDone(r *Responder, orig uint64) [][]byte {
	_, dgs := r.AtomicDone(nil, orig)
	return dgs
}

func refuse(r *Responder, s rocev2.Syndrome) [][]byte {
	_, dgs := r.Refuse(nil, s)
	return dgs
}

func TestNewResponderRefusesBadConfig(t *testing.T) {
	for name, c := range map[string]ResponderConfig{
		"PSN 2^24": {StartPSN: 1 << 24},
		"QPN 2^24": {RemoteQPN: 1 << 24},
	} {
		if _, err := NewResponder(c); !errors.Is(err, ErrConfig) {
			t.Errorf("%s: %v, want ErrConfig", name, err)
		}
	}
}

// execute runs one in-order request through r as a caller does.
func execute(t *testing.T, r *Responder, psn rocev2.PSN, ackReq, last bool) {
	t.Helper()
	v, rs := receive(r, psn, rocev2.RCWriteOnly)
	if v != Execute || rs != nil {
		t.Fatalf("PSN %d (expected %d): verdict %d, responses %d", psn, r.Expected(), v, len(rs))
	}
	r.Done(ackReq, last)
}

// TestResponderInOrder: requests with the expected PSN are executed and
// consume it (9.7.5.1); the MSN counts messages, not packets (9.7.6.1.1).
func TestResponderInOrder(t *testing.T) {
	r := newTestResponder(t, 100)
	execute(t, r, 100, false, false) // a WRITE First
	execute(t, r, 101, false, true)  // its Last
	execute(t, r, 102, false, true)  // a WRITE Only
	if r.Expected() != 103 || r.MSN() != 2 || r.AckPending() || len(flush(r)) != 0 {
		t.Errorf("expected %d, MSN %d, ack pending %v", r.Expected(), r.MSN(), r.AckPending())
	}
}

// TestResponderCoalescesACKs: AckReq makes an ACK pending, and one ACK of
// the last PSN asked for covers the batch (9.7.5.1.2, coalesced ACKs).
func TestResponderCoalescesACKs(t *testing.T) {
	r := newTestResponder(t, 100)
	execute(t, r, 100, true, true)
	execute(t, r, 101, false, true)
	execute(t, r, 102, true, true)
	execute(t, r, 103, false, true)
	if !r.AckPending() {
		t.Fatal("no ACK pending after AckReq")
	}
	wantResponses(t, r, flush(r), ack(102, 4))
	if r.AckPending() || len(flush(r)) != 0 || r.Counters().ACKs != 1 {
		t.Errorf("second flush: pending %v, counters %+v", r.AckPending(), r.Counters())
	}
}

// TestResponderDuplicate: a request behind the expected PSN is not
// executed and is acknowledged again with ePSN-1 (9.7.5.1.1).
func TestResponderDuplicate(t *testing.T) {
	r := newTestResponder(t, 100)
	execute(t, r, 100, false, true)
	execute(t, r, 101, false, true)
	v, rs := receive(r, 100, rocev2.RCWriteOnly)
	if v != Duplicate || rs != nil {
		t.Fatalf("verdict %d, %d responses", v, len(rs))
	}
	wantResponses(t, r, flush(r), ack(101, 2))
	if c := r.Counters(); c.Duplicates != 1 || r.Expected() != 102 {
		t.Errorf("counters %+v, expected %d", c, r.Expected())
	}
}

// TestResponderSequenceNAKOncePerGap: a request ahead of the expected PSN is
// dropped and NAKed with the expected PSN, once per gap: silent until an
// in-order request, after which a new gap is NAKed again (9.7.5.1.1,
// 9.9.3.1.2). A pending ACK leaves before the NAK.
func TestResponderSequenceNAKOncePerGap(t *testing.T) {
	r := newTestResponder(t, 100)
	execute(t, r, 100, true, true)
	v, rs := receive(r, 102, rocev2.RCWriteOnly)
	if v != OutOfOrder {
		t.Fatalf("verdict %d", v)
	}
	wantResponses(t, r, rs, ack(100, 1), nak(rocev2.SyndromeNAKPSNSequenceError, 101, 1))
	for _, psn := range []rocev2.PSN{103, 102, 104} {
		if v, rs := receive(r, psn, rocev2.RCWriteOnly); v != OutOfOrder || rs != nil {
			t.Fatalf("PSN %d in the same gap: verdict %d, %d responses", psn, v, len(rs))
		}
	}
	execute(t, r, 101, false, true)
	v, rs = receive(r, 105, rocev2.RCWriteOnly)
	if v != OutOfOrder {
		t.Fatalf("verdict %d", v)
	}
	wantResponses(t, r, rs, nak(rocev2.SyndromeNAKPSNSequenceError, 102, 2))
	if c := r.Counters(); c.SeqNAKs != 2 || c.OutOfOrder != 5 || c.ACKs != 1 {
		t.Errorf("counters %+v", c)
	}
}

// TestResponderAtomicReplay: an atomic's ATOMIC ACK carries the value it
// found; a duplicate atomic is not executed again and is answered with the
// saved result (9.7.5.1.4); one older than AtomicResources PSNs, whose
// result is gone, gets an ACK of ePSN-1. A pending ACK leaves first.
func TestResponderAtomicReplay(t *testing.T) {
	r := newTestResponder(t, 100)
	execute(t, r, 100, true, true)
	if v, _ := receive(r, 101, rocev2.RCFetchAdd); v != Execute {
		t.Fatalf("verdict %d", v)
	}
	atomicAck := response{op: rocev2.RCAtomicAcknowledge, s: rocev2.SyndromeACK, psn: 101, msn: 2, orig: 0xABCDEF0123456789}
	// An ACK carries the MSN when it is sent: the atomic's message counts.
	wantResponses(t, r, atomicDone(r, 0xABCDEF0123456789), ack(100, 2), atomicAck)
	execute(t, r, 102, false, true)

	v, rs := receive(r, 101, rocev2.RCFetchAdd)
	if v != Duplicate {
		t.Fatalf("verdict %d", v)
	}
	wantResponses(t, r, rs, atomicAck) // its own MSN, not the current 3
	if r.AckPending() {
		t.Error("a replayed atomic made an ACK pending")
	}

	for psn := rocev2.PSN(103); psn < 103+AtomicResources; psn++ {
		receive(r, psn, rocev2.RCCompareSwap)
		atomicDone(r, uint64(psn))
	}
	if v, rs := receive(r, 101, rocev2.RCFetchAdd); v != Duplicate || rs != nil {
		t.Fatalf("stale atomic: verdict %d, %d responses", v, len(rs))
	}
	wantResponses(t, r, flush(r), ack(102+AtomicResources, 3+AtomicResources))
	if c := r.Counters(); c.StaleAtomics != 1 || c.Duplicates != 2 || c.AtomicACKs != 2+AtomicResources {
		t.Errorf("counters %+v", c)
	}
}

// TestResponderRefuse: a receiver-not-ready NAK leaves the PSN expected, so
// that the retry is executed (9.7.5.2.8); fatal NAKs name the request and
// are counted by kind. A pending ACK leaves first.
func TestResponderRefuse(t *testing.T) {
	r := newTestResponder(t, 100)
	execute(t, r, 100, true, true)
	receive(r, 101, rocev2.RCSendOnly)
	rnr := rocev2.SyndromeRNRNAK | 14
	wantResponses(t, r, refuse(r, rnr), ack(100, 1), nak(rnr, 101, 1))
	execute(t, r, 101, false, true)
	receive(r, 102, rocev2.RCWriteOnly)
	wantResponses(t, r, refuse(r, rocev2.SyndromeNAKRemoteAccessError), nak(rocev2.SyndromeNAKRemoteAccessError, 102, 2))
	wantResponses(t, r, refuse(r, rocev2.SyndromeNAKInvalidRequest), nak(rocev2.SyndromeNAKInvalidRequest, 102, 2))
	if c := r.Counters(); c.RNRNAKs != 1 || c.AccessNAKs != 1 || c.InvalidNAKs != 1 {
		t.Errorf("counters %+v", c)
	}
}

// TestResponderPSNWrap: PSNs compare modulo 2^24 within a window of 2^23
// either side of the expected one (9.7.5.1.1).
func TestResponderPSNWrap(t *testing.T) {
	for _, c := range []struct {
		expected, psn rocev2.PSN
		want          Verdict
	}{
		{0xFFFFFF, 0xFFFFFF, Execute},
		{0xFFFFFF, 0x000000, OutOfOrder},
		{0xFFFFFF, 0xFFFFFE, Duplicate},
		{0x000000, 0xFFFFFF, Duplicate},
		{0x000000, 0x000001, OutOfOrder},
		{0x000005, 0xFFFFF0, Duplicate},
		{0xFFFFF0, 0x000005, OutOfOrder},
		{0x000000, 0x7FFFFF, OutOfOrder}, // 2^23-1 ahead
		{0x000000, 0x800000, Duplicate},  // 2^23 away: behind
		{0x7FFFFF, 0xFFFFFF, Duplicate},  // 2^23 away: behind
		{0x800000, 0xFFFFFF, OutOfOrder},
		{0x800000, 0x000001, Duplicate},
	} {
		r := newTestResponder(t, c.expected)
		if v, _ := receive(r, c.psn, rocev2.RCWriteOnly); v != c.want {
			t.Errorf("expected %#x, PSN %#x: verdict %d, want %d", c.expected, c.psn, v, c.want)
		}
	}
	// Executing across the wrap.
	r := newTestResponder(t, 0xFFFFFE)
	execute(t, r, 0xFFFFFE, false, true)
	execute(t, r, 0xFFFFFF, false, true)
	execute(t, r, 0x000000, true, true)
	wantResponses(t, r, flush(r), ack(0, 3))
	if v, _ := receive(r, 0xFFFFFF, rocev2.RCWriteOnly); v != Duplicate {
		t.Errorf("the PSN before the wrap: verdict %d", v)
	}
	wantResponses(t, r, flush(r), ack(0, 3))
}

// TestResponsesMatchAppendDatagram cross-checks the responses' incremental
// ICRC against rocev2.Packet.AppendDatagram over IPv4, IPv6 and changes of
// route.
func TestResponsesMatchAppendDatagram(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	pairs := [][2]netip.AddrPort{
		{testRemote, testLocal},
		{netip.MustParseAddrPort("[2001:db8::1]:4791"), netip.MustParseAddrPort("[2001:db8::2]:49152")},
		{netip.MustParseAddrPort("127.0.0.1:1"), netip.MustParseAddrPort("127.0.0.1:65535")},
	}
	for i := range 600 {
		pr := pairs[i%len(pairs)]
		qpn := rng.Uint32() & rocev2.PSNMask
		psn := rocev2.PSN(rng.Uint32() & rocev2.PSNMask)
		r, err := NewResponder(ResponderConfig{Local: pr[0], Remote: pr[1], RemoteQPN: qpn, StartPSN: psn})
		if err != nil {
			t.Fatal(err)
		}
		dst := netip.AddrPortFrom(pr[1].Addr(), uint16(rng.Uint32()))
		r.Route(pr[0], dst)
		r.msn = rng.Uint32() & rocev2.PSNMask
		syn := rocev2.Syndrome(rng.Uint32())
		got := refuse(r, syn)
		want, err := (&rocev2.Packet{BTH: rocev2.BTH{Opcode: rocev2.RCAcknowledge, PKey: 0xFFFF, DestQP: qpn, PSN: psn},
			AETH: rocev2.AETH{Syndrome: syn, MSN: r.msn}}).AppendDatagram(nil, pr[0], dst)
		if err != nil || len(got) != 1 || !bytes.Equal(got[0], want) {
			t.Fatalf("ACK\n got %x\nwant %x (%v)", got, want, err)
		}
		orig := rng.Uint64()
		got = atomicDone(r, orig)
		want, _ = (&rocev2.Packet{BTH: rocev2.BTH{Opcode: rocev2.RCAtomicAcknowledge, PKey: 0xFFFF, DestQP: qpn, PSN: psn},
			AETH: rocev2.AETH{Syndrome: rocev2.SyndromeACK, MSN: r.msn}, AtomicAckETH: rocev2.AtomicAckETH{OrigRemoteData: orig}}).AppendDatagram(nil, pr[0], dst)
		if len(got) != 1 || !bytes.Equal(got[0], want) {
			t.Fatalf("ATOMIC ACK\n got %x\nwant %x", got, want)
		}
	}
}

// TestResponderMixedFamilies: a route that mixes IPv4 and IPv6 carries no
// response; it is counted.
func TestResponderMixedFamilies(t *testing.T) {
	r := newTestResponder(t, 100)
	r.Route(testRemote, netip.MustParseAddrPort("[2001:db8::2]:4791"))
	execute(t, r, 100, true, true)
	if b, dgs := r.Flush(nil); len(b) != 0 || len(dgs) != 0 || r.Counters().EncodeErrors != 1 || r.Counters().ACKs != 0 {
		t.Errorf("ACK % x, counters %+v", b, r.Counters())
	}
}

func TestResponderDoesNotAllocate(t *testing.T) {
	r := newTestResponder(t, 0)
	atomicDone(r, 1) // the saved results' array
	buf := make([]byte, 0, 256)
	n := testing.AllocsPerRun(100, func() {
		psn := r.Expected()
		b := buf[:0]
		_, b, _ = r.Receive(b, &rocev2.BTH{Opcode: rocev2.RCWriteOnly, PSN: psn})
		r.Done(true, true)
		_, b, _ = r.Receive(b, &rocev2.BTH{Opcode: rocev2.RCFetchAdd, PSN: r.Expected()})
		b, _ = r.AtomicDone(b, 7)
		_, b, _ = r.Receive(b, &rocev2.BTH{Opcode: rocev2.RCFetchAdd, PSN: psn})
		_, b, _ = r.Receive(b, &rocev2.BTH{Opcode: rocev2.RCWriteOnly, PSN: psn.Add(10)})
		r.Flush(b)
	})
	if n != 0 {
		t.Errorf("%v allocations", n)
	}
}

// TestResponderAppends: responses are appended to the caller's buffer,
// after what it holds, and the datagrams returned are slices of it.
func TestResponderAppends(t *testing.T) {
	r := newTestResponder(t, 100)
	execute(t, r, 100, true, true)
	r.Receive(nil, &rocev2.BTH{Opcode: rocev2.RCFetchAdd, PSN: 101})
	b, dgs := r.AtomicDone([]byte("prefix"), 5)
	if string(b[:6]) != "prefix" || len(dgs) != 2 || len(b) != 6+len(dgs[0])+len(dgs[1]) ||
		&dgs[0][0] != &b[6] || &dgs[1][0] != &b[6+len(dgs[0])] {
		t.Fatalf("buffer % x, datagrams % x", b, dgs)
	}
	wantResponses(t, r, dgs, ack(100, 2), response{op: rocev2.RCAtomicAcknowledge, s: rocev2.SyndromeACK, psn: 101, msn: 2, orig: 5})
}

// BenchmarkResponder measures a batch of 32 WRITEs, the last with AckReq,
// and its ACK, as a target answers them.
func BenchmarkResponder(b *testing.B) {
	r, err := NewResponder(ResponderConfig{Local: testRemote, Remote: testLocal, RemoteQPN: 0x22})
	if err != nil {
		b.Fatal(err)
	}
	buf := make([]byte, 0, 64)
	b.ReportAllocs()
	for b.Loop() {
		for i := range 32 {
			if v, _, _ := r.Receive(buf, &rocev2.BTH{Opcode: rocev2.RCWriteOnly, PSN: r.Expected()}); v == Execute {
				r.Done(i == 31, true)
			}
		}
		r.Flush(buf)
	}
}
