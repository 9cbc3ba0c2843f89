package target

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"net/netip"
	"testing"
	"time"
	"unsafe"

	"github.com/dtakit/dtakit/rocev2"
	"github.com/dtakit/dtakit/rocev2/rc"
)

func unsafeBytes(w []uint64) []byte {
	return unsafe.Slice((*byte)(unsafe.Pointer(&w[0])), len(w)*8)
}

func register(tb testing.TB, tg *Target, g *guarded, a Access) *Region {
	tb.Helper()
	r, err := tg.Register(g.mem, a)
	if err != nil {
		tb.Fatal(err)
	}
	return r
}

func TestNewRejectsWildcard(t *testing.T) {
	for _, a := range []string{"0.0.0.0:4791", "[::]:4791"} {
		if _, err := New(Config{Addr: mustAddrPort(a)}); !errors.Is(err, ErrConfig) {
			t.Errorf("New(%s) = %v, want ErrConfig", a, err)
		}
	}
}

func TestRegister(t *testing.T) {
	tg, _ := New(Config{Addr: targetAddr, Peers: testPeers})
	g1, g2 := newGuarded(100), newGuarded(5000)
	r1 := register(t, tg, g1, RemoteWrite)
	r2 := register(t, tg, g2, RemoteWrite|RemoteAtomic)
	if r1.RKey() == r2.RKey() || r1.RKey() == 0 {
		t.Errorf("rkeys %#x and %#x", r1.RKey(), r2.RKey())
	}
	if r1.VA()%pageSize != 0 || r2.VA()%pageSize != 0 || r2.VA() < r1.VA()+uint64(r1.Len())+pageSize {
		t.Errorf("VAs %#x (len %d) and %#x: want page-aligned with a guard page between", r1.VA(), r1.Len(), r2.VA())
	}
	if _, err := tg.Register(nil, RemoteWrite); !errors.Is(err, ErrRegion) {
		t.Errorf("empty region: %v", err)
	}
	if _, err := tg.Register(g1.all[1:9], RemoteAtomic); !errors.Is(err, ErrRegion) {
		t.Errorf("misaligned atomic region: %v", err)
	}
	if err := tg.Deregister(r1); err != nil {
		t.Fatal(err)
	}
	if err := tg.Deregister(r1); !errors.Is(err, ErrRegion) {
		t.Errorf("second Deregister: %v", err)
	}
}

func TestWriteOnlyACK(t *testing.T) {
	p := newPeer(t, 1024)
	g := newGuarded(256)
	r := register(t, p.t, g, RemoteWrite)
	data := []byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}
	psn := p.psn
	resp := p.send(p.write(r.VA()+16, r.RKey(), data, true))
	ack := wantAck(t, resp, rocev2.SyndromeACK, psn)
	if ack.AETH.MSN != 1 {
		t.Errorf("MSN %d, want 1", ack.AETH.MSN)
	}
	if !bytes.Equal(g.mem[16:28], data) || g.mem[15] != 0 || g.mem[28] != 0 {
		t.Errorf("memory %x", g.mem[:32])
	}
	g.check(t)
	c := p.t.Counters()
	if c.WritePackets != 1 || c.WriteBytes != 12 || c.ACKs != 1 || c.Frames != 1 {
		t.Errorf("counters %+v", c)
	}
}

func TestACKsCoalesced(t *testing.T) {
	p := newPeer(t, 1024)
	g := newGuarded(1024)
	r := register(t, p.t, g, RemoteWrite)
	var frames [][]byte
	var last rocev2.PSN
	for i := range 20 { // crosses the PSN wrap at 2^24
		if i == 13 {
			last = p.psn
		}
		frames = append(frames, p.write(r.VA()+uint64(8*i), r.RKey(), []byte{byte(i + 1), 0, 0, 0, 0, 0, 0, 0}, i == 6 || i == 13))
	}
	resp := p.send(frames...)
	ack := wantAck(t, resp, rocev2.SyndromeACK, last)
	if ack.AETH.MSN != 20 {
		t.Errorf("MSN %d, want 20", ack.AETH.MSN)
	}
	for i := range 20 {
		if g.mem[8*i] != byte(i+1) {
			t.Fatalf("write %d missing", i)
		}
	}
	// The last 6 packets asked for no ACK and get none, until a packet does.
	resp = p.send(p.write(r.VA(), r.RKey(), []byte{9, 9, 9, 9}, false))
	if len(resp) != 0 {
		t.Errorf("unrequested ACK: %+v", resp)
	}
}

func TestMultiPacketWriteWithImmediate(t *testing.T) {
	p := newPeer(t, 256)
	g := newGuarded(2048)
	r := register(t, p.t, g, RemoteWrite)
	var got []Completion
	p.qp.onRecv = func(_ *QP, c Completion) { got = append(got, c) }
	msg := make([]byte, 256*3+20)
	for i := range msg {
		msg[i] = byte(i*7 + 1)
	}
	va := r.VA() + 100
	f := p.frame(rocev2.Packet{BTH: rocev2.BTH{Opcode: rocev2.RCWriteFirst, PSN: p.next()},
		RETH: rocev2.RETH{VA: va, RKey: r.RKey(), DMALength: uint32(len(msg))}, Payload: msg[:256]})
	m1 := p.frame(rocev2.Packet{BTH: rocev2.BTH{Opcode: rocev2.RCWriteMiddle, PSN: p.next()}, Payload: msg[256:512]})
	m2 := p.frame(rocev2.Packet{BTH: rocev2.BTH{Opcode: rocev2.RCWriteMiddle, PSN: p.next()}, Payload: msg[512:768]})
	lastPSN := p.psn
	l := p.frame(rocev2.Packet{BTH: rocev2.BTH{Opcode: rocev2.RCWriteLastImm, PSN: p.next(), AckReq: true},
		ImmDt: rocev2.ImmDt{Data: 0xDEADBEEF}, Payload: msg[768:]})
	resp := p.send(f, m1, m2, l)
	ack := wantAck(t, resp, rocev2.SyndromeACK, lastPSN)
	if ack.AETH.MSN != 1 {
		t.Errorf("MSN %d, want 1 (one message)", ack.AETH.MSN)
	}
	if !bytes.Equal(g.mem[100:100+len(msg)], msg) {
		t.Errorf("message not written")
	}
	if len(got) != 1 || !got[0].Write || !got[0].HasImm || got[0].Imm != 0xDEADBEEF || got[0].Data != nil {
		t.Errorf("completions %+v", got)
	}
	g.check(t)
}

func TestDuplicateWriteNotReexecuted(t *testing.T) {
	p := newPeer(t, 1024)
	g := newGuarded(64)
	r := register(t, p.t, g, RemoteWrite)
	first := p.write(r.VA(), r.RKey(), []byte{1, 1, 1, 1}, true)
	p.send(first)
	psn2 := p.psn
	p.send(p.write(r.VA(), r.RKey(), []byte{2, 2, 2, 2}, true))
	// The first packet again: acknowledged with the last executed PSN, not
	// written again.
	resp := p.send(first)
	wantAck(t, resp, rocev2.SyndromeACK, psn2)
	if g.mem[0] != 2 {
		t.Errorf("duplicate re-executed: memory %x", g.mem[:4])
	}
	if c := p.t.Counters(); c.Duplicates != 1 || c.WritePackets != 2 {
		t.Errorf("counters %+v", c)
	}
}

func TestAtomics(t *testing.T) {
	p := newPeer(t, 1024)
	g := newGuarded(64)
	r := register(t, p.t, g, RemoteWrite|RemoteAtomic)
	fa := p.atomic(rocev2.RCFetchAdd, r.VA()+8, r.RKey(), 5, 0)
	psn := p.psn - 1
	resp := p.send(fa)
	if len(resp) != 1 || resp[0].BTH.Opcode != rocev2.RCAtomicAcknowledge || resp[0].BTH.PSN != psn ||
		resp[0].AtomicAckETH.OrigRemoteData != 0 || resp[0].AETH.Syndrome != rocev2.SyndromeACK {
		t.Fatalf("response %+v", resp)
	}
	p.send(p.atomic(rocev2.RCFetchAdd, r.VA()+8, r.RKey(), math.MaxUint64, 0)) // -1: 4
	// The first FETCH_ADD again: answered from the saved result (0), not re-added.
	resp = p.send(fa)
	if len(resp) != 1 || resp[0].BTH.Opcode != rocev2.RCAtomicAcknowledge || resp[0].AtomicAckETH.OrigRemoteData != 0 || resp[0].BTH.PSN != psn {
		t.Fatalf("duplicate answered %+v", resp)
	}
	if v := binary.NativeEndian.Uint64(g.mem[8:]); v != 4 {
		t.Errorf("counter %d, want 4 (host byte order)", v)
	}
	// COMPARE_SWAP: fails against the wrong value, then succeeds.
	resp = p.send(p.atomic(rocev2.RCCompareSwap, r.VA()+8, r.RKey(), 100, 3))
	if resp[0].AtomicAckETH.OrigRemoteData != 4 || binary.NativeEndian.Uint64(g.mem[8:]) != 4 {
		t.Errorf("failed CmpSwap: orig %d, value %d", resp[0].AtomicAckETH.OrigRemoteData, binary.NativeEndian.Uint64(g.mem[8:]))
	}
	resp = p.send(p.atomic(rocev2.RCCompareSwap, r.VA()+8, r.RKey(), 100, 4))
	if resp[0].AtomicAckETH.OrigRemoteData != 4 || binary.NativeEndian.Uint64(g.mem[8:]) != 100 {
		t.Errorf("CmpSwap: orig %d, value %d", resp[0].AtomicAckETH.OrigRemoteData, binary.NativeEndian.Uint64(g.mem[8:]))
	}
	if c := p.t.Counters(); c.Atomics != 4 || c.Duplicates != 1 || c.AtomicACKs != 5 {
		t.Errorf("counters %+v", c)
	}
	g.check(t)
}

func TestPSNSequenceError(t *testing.T) {
	p := newPeer(t, 1024)
	g := newGuarded(64)
	r := register(t, p.t, g, RemoteWrite)
	expected := p.psn
	p.next() // lost
	a := p.write(r.VA(), r.RKey(), []byte{1, 0, 0, 0}, true)
	b := p.write(r.VA()+4, r.RKey(), []byte{2, 0, 0, 0}, true)
	resp := p.send(a, b)
	wantAck(t, resp, rocev2.SyndromeNAKPSNSequenceError, expected) // one NAK, then silence
	if g.mem[0] != 0 || g.mem[4] != 0 {
		t.Errorf("out-of-order packets executed")
	}
	// Go-back-N from the expected PSN: all three execute, one ACK.
	p.psn = expected
	resp = p.send(p.write(r.VA()+8, r.RKey(), []byte{3, 0, 0, 0}, false), p.write(r.VA(), r.RKey(), []byte{1, 0, 0, 0}, false), p.write(r.VA()+4, r.RKey(), []byte{2, 0, 0, 0}, true))
	wantAck(t, resp, rocev2.SyndromeACK, p.psn-1)
	if g.mem[0] != 1 || g.mem[4] != 2 || g.mem[8] != 3 {
		t.Errorf("memory %x", g.mem[:12])
	}
	// A new gap gets a new NAK.
	p.next()
	resp = p.send(p.write(r.VA(), r.RKey(), []byte{1, 0, 0, 0}, true))
	wantAck(t, resp, rocev2.SyndromeNAKPSNSequenceError, p.psn-2)
	if c := p.t.Counters(); c.NAKSequence != 2 || c.OutOfOrder != 3 {
		t.Errorf("counters %+v", c)
	}
}

// TestBadRequests: each hostile request gets its documented answer and
// writes nothing.
func TestBadRequests(t *testing.T) {
	const nak, drop = true, false
	type tc struct {
		name   string
		frame  func(p *peer, r, ro *Region) []byte
		answer bool            // a NAK, else silently dropped
		syn    rocev2.Syndrome // the NAK
		fatal  bool            // the QP enters the error state
	}
	w := func(p *peer, va uint64, rkey uint32, n int, dma uint32) []byte {
		return p.frame(rocev2.Packet{BTH: rocev2.BTH{Opcode: rocev2.RCWriteOnly, PSN: p.next(), AckReq: true},
			RETH: rocev2.RETH{VA: va, RKey: rkey, DMALength: dma}, Payload: bytes.Repeat([]byte{0xEE}, n)})
	}
	cases := []tc{
		{"wrong rkey", func(p *peer, r, _ *Region) []byte { return w(p, r.VA(), r.RKey()^1, 8, 8) }, nak, rocev2.SyndromeNAKRemoteAccessError, true},
		{"past the end", func(p *peer, r, _ *Region) []byte { return w(p, r.VA()+uint64(r.Len())-4, r.RKey(), 8, 8) }, nak, rocev2.SyndromeNAKRemoteAccessError, true},
		{"before the start", func(p *peer, r, _ *Region) []byte { return w(p, r.VA()-4, r.RKey(), 8, 8) }, nak, rocev2.SyndromeNAKRemoteAccessError, true},
		{"VA wraps", func(p *peer, r, _ *Region) []byte { return w(p, math.MaxUint64-3, r.RKey(), 8, 8) }, nak, rocev2.SyndromeNAKRemoteAccessError, true},
		{"huge DMA length", func(p *peer, r, _ *Region) []byte {
			return p.frame(rocev2.Packet{BTH: rocev2.BTH{Opcode: rocev2.RCWriteFirst, PSN: p.next()},
				RETH: rocev2.RETH{VA: r.VA() + 8, RKey: r.RKey(), DMALength: math.MaxUint32}, Payload: make([]byte, 1024)})
		}, nak, rocev2.SyndromeNAKRemoteAccessError, true},
		{"read-only region", func(p *peer, _, ro *Region) []byte { return w(p, ro.VA(), ro.RKey(), 8, 8) }, nak, rocev2.SyndromeNAKRemoteAccessError, true},
		{"fetch-add without atomic access", func(p *peer, r, _ *Region) []byte {
			return p.atomic(rocev2.RCFetchAdd, r.VA(), r.RKey(), 1, 0)
		}, nak, rocev2.SyndromeNAKRemoteAccessError, true},
		{"misaligned atomic", func(p *peer, _, ro *Region) []byte {
			return p.atomic(rocev2.RCFetchAdd, ro.VA()+4, ro.RKey(), 1, 0)
		}, nak, rocev2.SyndromeNAKInvalidRequest, true},
		{"atomic past the end", func(p *peer, _, ro *Region) []byte {
			return p.atomic(rocev2.RCFetchAdd, ro.VA()+uint64(ro.Len()), ro.RKey(), 1, 0)
		}, nak, rocev2.SyndromeNAKRemoteAccessError, true},
		{"length differs from DMA length", func(p *peer, r, _ *Region) []byte { return w(p, r.VA(), r.RKey(), 8, 12) }, nak, rocev2.SyndromeNAKInvalidRequest, true},
		{"payload above MTU", func(p *peer, r, _ *Region) []byte { return w(p, r.VA(), r.RKey(), 1028, 1028) }, nak, rocev2.SyndromeNAKInvalidRequest, true},
		{"middle without first", func(p *peer, _, _ *Region) []byte {
			return p.frame(rocev2.Packet{BTH: rocev2.BTH{Opcode: rocev2.RCWriteMiddle, PSN: p.next()}, Payload: make([]byte, 1024)})
		}, nak, rocev2.SyndromeNAKInvalidRequest, true},
		{"RDMA READ", func(p *peer, r, _ *Region) []byte {
			return p.frame(rocev2.Packet{BTH: rocev2.BTH{Opcode: rocev2.RCReadRequest, PSN: p.next()}, RETH: rocev2.RETH{VA: r.VA(), RKey: r.RKey(), DMALength: 8}})
		}, nak, rocev2.SyndromeNAKInvalidRequest, true},
		{"bad ICRC", func(p *peer, r, _ *Region) []byte {
			b := w(p, r.VA(), r.RKey(), 8, 8)
			b[len(b)-1] ^= 1
			return b
		}, drop, 0, false},
		{"corrupted payload", func(p *peer, r, _ *Region) []byte {
			b := w(p, r.VA(), r.RKey(), 8, 8)
			b[30] ^= 0x40
			return b
		}, drop, 0, false},
		{"unknown QP", func(p *peer, r, _ *Region) []byte {
			return p.frame(rocev2.Packet{BTH: rocev2.BTH{Opcode: rocev2.RCWriteOnly, PSN: p.next(), DestQP: p.qp.QPN() ^ 0x10},
				RETH: rocev2.RETH{VA: r.VA(), RKey: r.RKey(), DMALength: 4}, Payload: []byte{1, 2, 3, 4}})
		}, drop, 0, false},
		{"UC opcode", func(p *peer, r, _ *Region) []byte {
			return p.frame(rocev2.Packet{BTH: rocev2.BTH{Opcode: rocev2.UCWriteOnly, PSN: p.next()},
				RETH: rocev2.RETH{VA: r.VA(), RKey: r.RKey(), DMALength: 4}, Payload: []byte{1, 2, 3, 4}})
		}, drop, 0, false},
		{"truncated", func(p *peer, r, _ *Region) []byte { return w(p, r.VA(), r.RKey(), 8, 8)[:20] }, drop, 0, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := newPeer(t, 1024)
			g, gro := newGuarded(256), newGuarded(256)
			r := register(t, p.t, g, RemoteWrite)
			ro := register(t, p.t, gro, RemoteAtomic)
			psn := p.psn
			resp := p.send(c.frame(p, r, ro))
			if c.answer {
				wantAck(t, resp, c.syn, psn)
			} else if len(resp) != 0 {
				t.Fatalf("dropped packet answered: %+v", resp)
			}
			for i, b := range g.mem {
				if b != 0 || gro.mem[i] != 0 {
					t.Fatalf("byte %d written", i)
				}
			}
			g.check(t)
			gro.check(t)
			// A valid write at the next PSN: executed unless the QP failed.
			p.psn = psn // neither NAKed nor dropped packets consume their PSN
			resp = p.send(p.write(r.VA(), r.RKey(), []byte{7, 7, 7, 7}, true))
			if c.fatal {
				if len(resp) != 0 || g.mem[0] != 0 {
					t.Fatalf("QP in error state still executes: %+v", resp)
				}
				if p.t.Counters().Flushed != 1 {
					t.Errorf("flushed not counted: %+v", p.t.Counters())
				}
			} else {
				wantAck(t, resp, rocev2.SyndromeACK, psn)
				if g.mem[0] != 7 {
					t.Fatalf("valid write after a dropped packet not executed")
				}
			}
		})
	}
}

func TestSendIntoPostedBuffer(t *testing.T) {
	p := newPeer(t, 256)
	var got []Completion
	p.qp.onRecv = func(_ *QP, c Completion) { got = append(got, c) }
	send := func(op rocev2.Opcode, data []byte, ack bool) []byte {
		return p.frame(rocev2.Packet{BTH: rocev2.BTH{Opcode: op, PSN: p.next(), AckReq: ack}, ImmDt: rocev2.ImmDt{Data: 42}, Payload: data})
	}
	psn := p.psn
	resp := p.send(send(rocev2.RCSendOnly, []byte("hello"), true))
	wantAck(t, resp, rocev2.SyndromeRNRNAK|rnrTimer, psn) // nothing posted
	// Buffers are used in the order posted: "hello" takes the 16-byte one.
	if err := p.qp.PostRecv(make([]byte, 16)); err != nil {
		t.Fatal(err)
	}
	if err := p.qp.PostRecv(make([]byte, 600)); err != nil {
		t.Fatal(err)
	}
	p.psn = psn // the requester retries the RNR-NAKed PSN
	long := bytes.Repeat([]byte("0123456789abcdef"), 33)[:520]
	resp = p.send(send(rocev2.RCSendOnly, []byte("hello"), false),
		send(rocev2.RCSendFirst, long[:256], false), send(rocev2.RCSendMiddle, long[256:512], false),
		send(rocev2.RCSendLastImm, long[512:], true))
	wantAck(t, resp, rocev2.SyndromeACK, p.psn-1)
	if len(got) != 2 || string(got[0].Data) != "hello" || got[0].HasImm || !bytes.Equal(got[1].Data, long) || !got[1].HasImm || got[1].Imm != 42 {
		t.Fatalf("completions %+v", got)
	}
	if cap(got[0].Data) != 5 {
		t.Errorf("completion data capacity %d", cap(got[0].Data))
	}
}

func TestSendTooLongForBuffer(t *testing.T) {
	p := newPeer(t, 1024)
	if err := p.qp.PostRecv(make([]byte, 4)); err != nil {
		t.Fatal(err)
	}
	psn := p.psn
	resp := p.send(p.frame(rocev2.Packet{BTH: rocev2.BTH{Opcode: rocev2.RCSendOnly, PSN: p.next(), AckReq: true}, Payload: []byte("too long")}))
	wantAck(t, resp, rocev2.SyndromeNAKInvalidRequest, psn)
}

func TestOwnSendRetransmitted(t *testing.T) {
	p := newPeer(t, 1024)
	if err := p.qp.PostSend([]byte("advert")); err != nil {
		t.Fatal(err)
	}
	isSend := func(resp []rocev2.Packet) bool {
		return len(resp) == 1 && resp[0].BTH.Opcode == rocev2.RCSendOnly && resp[0].BTH.PSN == 0x777 &&
			resp[0].BTH.AckReq && string(resp[0].Payload) == "advert" && resp[0].BTH.DestQP == 0x123
	}
	if resp := p.tick(t0); !isSend(resp) {
		t.Fatalf("first send %+v", resp)
	}
	if resp := p.tick(t0.Add(RetryInterval / 2)); len(resp) != 0 {
		t.Fatalf("resent early: %+v", resp)
	}
	if resp := p.tick(t0.Add(RetryInterval)); !isSend(resp) {
		t.Fatalf("not resent: %+v", resp)
	}
	// The peer's ACK ends it.
	ack := p.frame(rocev2.Packet{BTH: rocev2.BTH{Opcode: rocev2.RCAcknowledge, PSN: 0x777}, AETH: rocev2.AETH{Syndrome: rocev2.SyndromeACK, MSN: 1}})
	p.send(ack)
	if resp := p.tick(t0.Add(10 * RetryInterval)); len(resp) != 0 {
		t.Fatalf("resent after ACK: %+v", resp)
	}
	// Unacknowledged: MaxTries sends, then failure.
	if err := p.qp.PostSend([]byte("again")); err != nil {
		t.Fatal(err)
	}
	n := 0
	for i := range 10 {
		n += len(p.tick(t0.Add(RetryInterval * time.Duration(20+2*i))))
	}
	c := p.t.Counters()
	if n != MaxTries || c.SendFailures != 1 || c.SendRetransmits != 1+MaxTries-1 {
		t.Errorf("%d sends, counters %+v", n, c)
	}
	if err := p.qp.PostSend([]byte("x")); !errors.Is(err, ErrQP) {
		t.Errorf("PostSend on a failed QP: %v", err)
	}
}

func mustAddrPort(s string) netip.AddrPort { return netip.MustParseAddrPort(s) }

func timeDur(i int) time.Duration { return time.Duration(i) }

func TestStaleDuplicateAtomic(t *testing.T) {
	p := newPeer(t, 1024)
	g := newGuarded(64)
	r := register(t, p.t, g, RemoteWrite|RemoteAtomic)
	old := p.atomic(rocev2.RCFetchAdd, r.VA(), r.RKey(), 1, 0)
	p.send(old)
	// rc.AtomicResources more atomics: the first one's saved result is
	// overwritten (same PSN modulo rc.AtomicResources).
	var frames [][]byte
	for range rc.AtomicResources {
		frames = append(frames, p.atomic(rocev2.RCFetchAdd, r.VA(), r.RKey(), 1, 0))
	}
	if resp := p.send(frames...); len(resp) != rc.AtomicResources {
		t.Fatalf("%d responses", len(resp))
	}
	// The old one again: not re-executed, answered with a plain ACK of the
	// last executed PSN.
	wantAck(t, p.send(old), rocev2.SyndromeACK, p.psn-1)
	if v := binary.NativeEndian.Uint64(g.mem); v != rc.AtomicResources+1 {
		t.Errorf("counter %d, want %d", v, rc.AtomicResources+1)
	}
	if c := p.t.Counters(); c.StaleAtomics != 1 || c.Duplicates != 1 {
		t.Errorf("counters %+v", c)
	}
}
