package target

import (
	"encoding/binary"
	"net/netip"
	"testing"
	"time"

	"github.com/dtakit/dtakit/rocev2"
	"github.com/dtakit/dtakit/rocev2/cm"
)

// Fuzz input: a batch of datagrams, each as
//
//	mode (1) · length (1) · that many bytes
//
// Mode bits let mutations reach the target's random QPN, rkeys and VAs:
// fixQP puts the QP's number in the BTH, fixKey the region's rkey and
// VA (the VA field read as an offset into region (mode>>4)&1) into the
// RETH or AtomicETH right after the BTH, fixICRC appends the right ICRC
// (otherwise the last 4 bytes are the ICRC as given).
const (
	fixICRC = 1 << iota
	fixQP
	fixKey
)

func fuzzSeed(mode byte, pkt rocev2.Packet) []byte {
	b, err := pkt.AppendTo(nil)
	if err != nil {
		panic(err)
	}
	return append([]byte{mode | fixICRC, byte(len(b))}, b...)
}

func addFuzzSeeds(f *testing.F) {
	w := func(op rocev2.Opcode, psn rocev2.PSN, va uint64, n int, dma uint32) rocev2.Packet {
		return rocev2.Packet{BTH: rocev2.BTH{Opcode: op, PSN: psn, AckReq: true}, RETH: rocev2.RETH{VA: va, DMALength: dma}, Payload: make([]byte, n)}
	}
	const all = fixQP | fixKey
	f.Add(fuzzSeed(all, w(rocev2.RCWriteOnly, 100, 8, 8, 8)))
	f.Add(append(fuzzSeed(all, w(rocev2.RCWriteFirst, 100, 40, 256, 600)),
		append(fuzzSeed(fixQP, rocev2.Packet{BTH: rocev2.BTH{Opcode: rocev2.RCWriteMiddle, PSN: 101}, Payload: make([]byte, 256)}),
			fuzzSeed(fixQP, rocev2.Packet{BTH: rocev2.BTH{Opcode: rocev2.RCWriteLastImm, PSN: 102}, Payload: make([]byte, 88)})...)...))
	f.Add(fuzzSeed(all|1<<4, rocev2.Packet{BTH: rocev2.BTH{Opcode: rocev2.RCFetchAdd, PSN: 100}, AtomicETH: rocev2.AtomicETH{VA: 16, SwapAddData: 3}}))
	f.Add(fuzzSeed(all|1<<4, rocev2.Packet{BTH: rocev2.BTH{Opcode: rocev2.RCCompareSwap, PSN: 100}, AtomicETH: rocev2.AtomicETH{VA: 248, SwapAddData: 3}}))
	f.Add(fuzzSeed(fixQP, rocev2.Packet{BTH: rocev2.BTH{Opcode: rocev2.RCSendOnlyImm, PSN: 100}, Payload: []byte("0123456789")}))
	f.Add(fuzzSeed(fixQP, rocev2.Packet{BTH: rocev2.BTH{Opcode: rocev2.RCAcknowledge, PSN: 7}, AETH: rocev2.AETH{Syndrome: rocev2.SyndromeNAKPSNSequenceError}}))
	req := &cm.ConnectRequest{LocalCommID: 1, ServiceID: cm.ServiceID(40050), LocalQPN: 9, PathMTU: cm.MTU256}
	_ = req.SetIPPrivateData(cm.IPHeader{SrcPort: 1, Src: peerAddr.Addr(), Dst: targetAddr.Addr()}, nil)
	mad, _ := cm.AppendMAD(nil, cm.Header(1, cm.AttrREQ), req)
	f.Add(fuzzSeed(0, cm.Packet(mad, 0)))
}

// FuzzProcess feeds arbitrary datagrams, and mutations of valid ones, to a
// target whose regions sit in larger buffers with guard bytes: whatever
// arrives, no guard byte changes, a deregistered region is never written, a
// region without remote write is changed only by atomics, every response
// decodes, and nothing panics.
func FuzzProcess(f *testing.F) {
	addFuzzSeeds(f)
	f.Fuzz(func(t *testing.T, in []byte) {
		p := newPeer(t, 256)
		p.psn = 100
		setExpected(p.qp, 100)
		_ = p.t.Listen(40050, ListenConfig{Greeting: []byte("hi")})
		_ = p.qp.PostRecv(make([]byte, 300))
		gw, ga, gd := newGuarded(256), newGuarded(256), newGuarded(256)
		regions := [2]*Region{register(t, p.t, gw, RemoteWrite), register(t, p.t, ga, RemoteAtomic)}
		dead := register(t, p.t, gd, RemoteWrite|RemoteAtomic)
		if err := p.t.Deregister(dead); err != nil {
			t.Fatal(err)
		}
		var frames []Datagram
		for len(in) >= 2 {
			mode, n := in[0], int(in[1])
			in = in[2:]
			n = min(n, len(in))
			b := append([]byte(nil), in[:n]...)
			in = in[n:]
			if mode&fixQP != 0 && len(b) >= rocev2.BTHLen {
				b[5], b[6], b[7] = byte(p.qp.qpn>>16), byte(p.qp.qpn>>8), byte(p.qp.qpn)
			}
			if mode&fixKey != 0 && len(b) >= rocev2.BTHLen+12 {
				r := regions[mode>>4&1]
				if mode>>5&1 != 0 {
					r = dead
				}
				off := binary.BigEndian.Uint64(b[rocev2.BTHLen:])
				binary.BigEndian.PutUint64(b[rocev2.BTHLen:], r.VA()+off)
				binary.BigEndian.PutUint32(b[rocev2.BTHLen+8:], r.RKey())
			}
			if mode&fixICRC != 0 && len(b) >= rocev2.BTHLen {
				icrc, err := rocev2.DatagramICRC(p.addr, targetAddr, b)
				if err == nil {
					b = binary.LittleEndian.AppendUint32(b, icrc)
				}
			}
			frames = append(frames, Datagram{Buf: b, Addr: p.addr})
		}
		var out Output
		p.t.Process(t0.UnixNano(), frames, &out)
		p.t.Tick(t0.Add(time.Second).UnixNano(), &out)
		for _, d := range out.Datagrams() {
			var pkt rocev2.Packet
			if err := pkt.DecodeDatagram(d.Buf, targetAddr, d.Addr); err != nil {
				t.Fatalf("undecodable response: %v", err)
			}
		}
		gw.check(t)
		ga.check(t)
		gd.check(t)
		for i, c := range gd.mem {
			if c != 0 {
				t.Fatalf("deregistered region written at %d", i)
			}
		}
		if p.t.Counters().Atomics == 0 {
			for i, c := range ga.mem {
				if c != 0 {
					t.Fatalf("region without remote write written at %d, and no atomic ran", i)
				}
			}
		}
	})
}

// FuzzCM drives the target's connection manager past the REQ: a peer
// connects (REQ, REP, RTU), then the fuzzer's CM messages follow, each as
//
//	kind (1) · flags (1) · local comm ID (4) · remote comm ID (4)
//
// kind picks RTU, DREQ, DREP, REJ, REQ or REP; flags bit 0 sends it from
// another address, bit 1 uses the connection's real comm IDs instead of
// the given ones, bits 2-7 first advance the clock by that many 50 ms and
// tick. Whatever comes: every datagram the target sends decodes, messages
// from another address never end the connection (while the peer itself
// sent nothing but the handshake, its QP still takes a WRITE), and a new
// peer can still connect at the end. (The peer acknowledges the greeting
// first, so that the QP lives while time passes.)
func FuzzCM(f *testing.F) {
	f.Add([]byte{0, 2, 0, 0, 0, 0, 0, 0, 0, 0})
	f.Add([]byte{1, 3, 0, 0, 0, 0, 0, 0, 0, 0, 1, 2, 0, 0, 0, 0, 0, 0, 0, 0})
	f.Add([]byte{3, 2, 0, 0, 0, 0, 0, 0, 0, 0, 4, 2, 0, 0, 0, 0, 0, 0, 0, 0})
	f.Add([]byte{4, 1, 0, 0, 0, 1, 0, 0, 0, 2, 5, 0, 1, 2, 3, 4, 5, 6, 7, 8})
	f.Add([]byte{2, 0xfe, 0, 0, 0, 0, 0, 0, 0, 0})
	f.Fuzz(func(t *testing.T, in []byte) {
		if len(in) > 10*64 {
			return
		}
		c, _ := newCMPeer(t)
		rep, greet := c.connect(t)
		c.qp = c.t.qps[rep.LocalQPN]
		c.send(c.frame(rocev2.Packet{BTH: rocev2.BTH{Opcode: rocev2.RCAcknowledge, PSN: greet.BTH.PSN}, AETH: rocev2.AETH{Syndrome: rocev2.SyndromeACK, MSN: 1}}))
		foreign := &cmPeer{peer: &peer{tb: t, t: c.t, addr: netip.MustParseAddrPort("10.0.0.3:50000"), qpn: 0x321}, commID: c.commID, tid: 5}
		now := t0
		peerSpoke := false
		for ; len(in) >= 10; in = in[10:] {
			kind, flags := in[0]%6, in[1]
			local, remote := binary.BigEndian.Uint32(in[2:]), binary.BigEndian.Uint32(in[6:])
			if flags&2 != 0 {
				local, remote = c.commID, rep.LocalCommID
			}
			from := c
			if flags&1 != 0 {
				from = foreign
			} else {
				peerSpoke = true
			}
			if d := time.Duration(flags>>2) * 50 * time.Millisecond; d > 0 {
				now = now.Add(d)
				from.tick(now)
			}
			var h cm.MADHeader
			var m cm.Message
			switch kind {
			case 0:
				h, m = cm.Header(from.tid, cm.AttrRTU), &cm.ReadyToUse{LocalCommID: local, RemoteCommID: remote}
			case 1:
				h, m = cm.Header(from.tid, cm.AttrDREQ), &cm.DisconnectRequest{LocalCommID: local, RemoteCommID: remote, RemoteQPN: rep.LocalQPN}
			case 2:
				h, m = cm.Header(from.tid, cm.AttrDREP), &cm.DisconnectReply{LocalCommID: local, RemoteCommID: remote}
			case 3:
				h, m = cm.Header(from.tid, cm.AttrREJ), &cm.Reject{LocalCommID: local, RemoteCommID: remote, Reason: uint16(flags)}
			case 4:
				from.commID = local
				from.sendAt(now, from.req(40050))
				continue
			case 5:
				h, m = cm.Header(from.tid, cm.AttrREP), &cm.ConnectReply{LocalCommID: local, RemoteCommID: remote, LocalQPN: 7}
			}
			from.sendAt(now, from.mad(h, m))
		}
		if !peerSpoke {
			c.qp = c.t.qps[rep.LocalQPN]
			if c.qp == nil {
				t.Fatal("messages from another address ended the connection")
			}
			c.psn = rocev2.PSN(rep.StartingPSN) // the RTU left it there
			g := newGuarded(64)
			r := register(t, c.t, g, RemoteWrite)
			psn := c.psn
			wantAck(t, c.sendAt(now, c.write(r.VA(), r.RKey(), []byte{1, 2, 3, 4}, true)), rocev2.SyndromeACK, psn)
		}
		late := &cmPeer{peer: &peer{tb: t, t: c.t, addr: netip.MustParseAddrPort("10.0.0.9:50000"), qpn: 0x999, psn: 5}, commID: 0xABC, tid: 9}
		ms := cmMessages(t, late.sendAt(now, late.req(40050)))
		if len(ms) != 1 {
			t.Fatalf("a new peer's REQ answered with %v", ms)
		}
		if _, ok := ms[0].(*cm.ConnectReply); !ok {
			t.Fatalf("a new peer's REQ answered with %v", ms[0])
		}
	})
}
