package target

import (
	"encoding/binary"
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
		p.qp.epsn = 100
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
			frames = append(frames, Datagram{Data: b, Addr: p.addr})
		}
		var out Output
		p.t.Process(t0, frames, &out)
		p.t.Tick(t0.Add(time.Second), &out)
		for _, d := range out.Datagrams() {
			var pkt rocev2.Packet
			if err := pkt.DecodeDatagram(d.Data, targetAddr, d.Addr); err != nil {
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
