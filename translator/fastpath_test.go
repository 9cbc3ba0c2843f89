package translator

import (
	"bytes"
	"math/rand/v2"
	"net/netip"
	"testing"

	"github.com/dtakit/dtakit/rocev2"
)

// TestFastPathMatchesRocev2 checks the fast path's packets byte for byte
// against rocev2's encoder, over both address families, every payload
// length up to the MTU, random PSNs (with wrap), QPNs, addresses and AckReq,
// with the ICRC cache hit and missed.
func TestFastPathMatchesRocev2(t *testing.T) {
	for _, fam := range []struct{ local, remote netip.AddrPort }{
		{testLocal, testTarget},
		{netip.MustParseAddrPort("[fd00::1]:5000"), netip.MustParseAddrPort("[fd00::2]:4791")},
	} {
		e, err := NewEngine(Config{Local: fam.local, Collectors: []netip.AddrPort{fam.remote}, RingSize: 4})
		if err != nil {
			t.Fatal(err)
		}
		rng := rand.New(rand.NewPCG(7, 8))
		q := &qp{remote: fam.remote, mask: 3, ring: make([]byte, 4*slotCap), lens: make([]uint16, 4), slotSize: slotCap}
		data := make([]byte, MTU)
		for i := range data {
			data[i] = byte(rng.Uint32())
		}
		for n := 0; n <= MTU; n++ {
			for range 2 {
				q.next = rocev2.PSN(rng.Uint32() & rocev2.PSNMask)
				q.una = q.next
				q.remoteQPN = rng.Uint32() & rocev2.PSNMask
				q.sinceAckReq = rng.IntN(AckReqInterval)
				va, rkey, imm := rng.Uint64(), rng.Uint32(), rng.IntN(2) == 0
				psn := q.next
				ackReq := q.sinceAckReq+1 >= AckReqInterval
				e.ResetOutput()
				e.postWriteOnly(q, va, rkey, data[:n], imm, 0xA1B2C3D4)
				want := rocev2.Packet{
					BTH:     rocev2.BTH{Opcode: rocev2.RCWriteOnly, PKey: 0xFFFF, DestQP: q.remoteQPN, PSN: psn, AckReq: ackReq},
					RETH:    rocev2.RETH{VA: va, RKey: rkey, DMALength: uint32(n)},
					Payload: data[:n],
				}
				if imm {
					want.BTH.Opcode = rocev2.RCWriteOnlyImm
					want.ImmDt.Data = 0xA1B2C3D4
				}
				if n == 0 {
					want.Payload = nil
				}
				wb, err := want.AppendDatagram(nil, fam.local, fam.remote)
				if err != nil {
					t.Fatal(err)
				}
				if got := roceOut(e)[0].Buf; !bytes.Equal(got, wb) {
					t.Fatalf("%v write of %d bytes:\n got %x\nwant %x", fam.local, n, got, wb)
				}
			}
		}
		// Copies of one report share the linear CRC of their tail.
		for n := 4; n <= 64; n += 4 {
			e.ResetOutput()
			e.shareTail, e.tailOK = true, false
			q.sinceAckReq = 0 // no AckReq in three packets
			var want [][]byte
			for range 3 {
				va, psn := rng.Uint64(), q.next
				e.postWriteOnly(q, va, 0x1234, data[:n], false, 0)
				p := rocev2.Packet{
					BTH:     rocev2.BTH{Opcode: rocev2.RCWriteOnly, PKey: 0xFFFF, DestQP: q.remoteQPN, PSN: psn},
					RETH:    rocev2.RETH{VA: va, RKey: 0x1234, DMALength: uint32(n)},
					Payload: data[:n],
				}
				wb, _ := p.AppendDatagram(nil, fam.local, fam.remote)
				want = append(want, wb)
			}
			e.shareTail = false
			out, _ := e.Output()
			if len(out) != 3 {
				t.Fatalf("%d packets, want 3", len(out))
			}
			for i, d := range out {
				if !bytes.Equal(d.Buf, want[i]) {
					t.Fatalf("copy %d of a %d-byte write:\n got %x\nwant %x", i, n, d.Buf, want[i])
				}
			}
		}
		for range 200 {
			q.next = rocev2.PSN(rng.Uint32() & rocev2.PSNMask)
			q.una = q.next
			q.remoteQPN = rng.Uint32() & rocev2.PSNMask
			va, rkey, add := rng.Uint64(), rng.Uint32(), rng.Uint64()
			psn := q.next
			e.ResetOutput()
			e.postFetchAdd(q, va, rkey, add)
			want := rocev2.Packet{
				BTH:       rocev2.BTH{Opcode: rocev2.RCFetchAdd, PKey: 0xFFFF, DestQP: q.remoteQPN, PSN: psn, AckReq: true},
				AtomicETH: rocev2.AtomicETH{VA: va, RKey: rkey, SwapAddData: add},
			}
			wb, _ := want.AppendDatagram(nil, fam.local, fam.remote)
			if got := roceOut(e)[0].Buf; !bytes.Equal(got, wb) {
				t.Fatalf("fetch-add:\n got %x\nwant %x", got, wb)
			}
		}
	}
}

// roceOut returns the RoCEv2 datagrams of e's round.
func roceOut(e *Engine) []Datagram {
	roce, _ := e.Output()
	return roce
}
