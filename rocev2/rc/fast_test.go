package rc

import (
	"bytes"
	"math/rand/v2"
	"net/netip"
	"testing"

	"github.com/dtakit/dtakit/rocev2"
)

// TestFastPathMatchesPost checks WriteOnly and FetchAdd byte for byte
// against rocev2's encoder, over both address families, every payload
// length up to 1024 bytes, random PSNs (with wrap), QPNs, addresses and
// AckReq, with the ICRC cache hit and missed, and copies of one report
// sharing their tail.
func TestFastPathMatchesPost(t *testing.T) {
	const mtu, every = 1024, 64
	for _, fam := range []struct{ local, remote netip.AddrPort }{
		{netip.MustParseAddrPort("127.0.0.1:5000"), netip.MustParseAddrPort("127.0.0.2:4791")},
		{netip.MustParseAddrPort("[fd00::1]:5000"), netip.MustParseAddrPort("[fd00::2]:4791")},
	} {
		rng := rand.New(rand.NewPCG(7, 8))
		fresh := func() *Requester {
			r, err := New(Config{Local: fam.local, Remote: fam.remote, RemoteQPN: rng.Uint32() & rocev2.PSNMask,
				StartPSN: rocev2.PSN(rng.Uint32() & rocev2.PSNMask), Ring: 4, MaxPacket: MaxDatagram, AckReqEvery: every}, 0)
			if err != nil {
				t.Fatal(err)
			}
			return r
		}
		data := make([]byte, mtu)
		for i := range data {
			data[i] = byte(rng.Uint32())
		}
		r := fresh()
		for n := 0; n <= mtu; n++ {
			for range 2 {
				if rng.IntN(4) == 0 {
					r = fresh() // another QP and PSN: the cache misses
				}
				r.una = r.next // room
				r.sinceAckReq = rng.IntN(every)
				va, rkey, imm := rng.Uint64(), rng.Uint32(), rng.IntN(2) == 0
				psn, ackReq := r.Next(), r.sinceAckReq+1 >= every
				got := r.WriteOnly(va, rkey, data[:n], imm, 0xA1B2C3D4, 0)
				want := rocev2.Packet{
					BTH:     rocev2.BTH{Opcode: rocev2.RCWriteOnly, PKey: 0xFFFF, DestQP: r.cfg.RemoteQPN, PSN: psn, AckReq: ackReq},
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
				if !bytes.Equal(got, wb) || !bytes.Equal(r.Packet(psn), wb) {
					t.Fatalf("%v write of %d bytes:\n got %x\nwant %x", fam.local, n, got, wb)
				}
			}
		}
		for n := 4; n <= 64; n += 4 {
			r.una = r.next
			r.sinceAckReq = 0 // no AckReq in three packets
			r.ShareTail(true)
			for c := range 3 {
				va, psn := rng.Uint64(), r.Next()
				got := r.WriteOnly(va, 0x1234, data[:n], false, 0, 0)
				p := rocev2.Packet{
					BTH:     rocev2.BTH{Opcode: rocev2.RCWriteOnly, PKey: 0xFFFF, DestQP: r.cfg.RemoteQPN, PSN: psn},
					RETH:    rocev2.RETH{VA: va, RKey: 0x1234, DMALength: uint32(n)},
					Payload: data[:n],
				}
				if wb, _ := p.AppendDatagram(nil, fam.local, fam.remote); !bytes.Equal(got, wb) {
					t.Fatalf("copy %d of a %d-byte write:\n got %x\nwant %x", c, n, got, wb)
				}
			}
			r.ShareTail(false)
		}
		for range 200 {
			r = fresh()
			va, rkey, add := rng.Uint64(), rng.Uint32(), rng.Uint64()
			psn := r.Next()
			got := r.FetchAdd(va, rkey, add, 0)
			want := rocev2.Packet{
				BTH:       rocev2.BTH{Opcode: rocev2.RCFetchAdd, PKey: 0xFFFF, DestQP: r.cfg.RemoteQPN, PSN: psn, AckReq: true},
				AtomicETH: rocev2.AtomicETH{VA: va, RKey: rkey, SwapAddData: add},
			}
			if wb, _ := want.AppendDatagram(nil, fam.local, fam.remote); !bytes.Equal(got, wb) {
				t.Fatalf("fetch-add:\n got %x\nwant %x", got, wb)
			}
		}
	}
}

// TestWriteOnlyTooLarge: a packet above MaxPacket is refused and counted,
// and the ring is unchanged.
func TestWriteOnlyTooLarge(t *testing.T) {
	r, err := New(Config{Local: netip.MustParseAddrPort("127.0.0.1:1"), Remote: netip.MustParseAddrPort("127.0.0.2:4791"),
		Ring: 4, MaxPacket: 64}, 0)
	if err != nil {
		t.Fatal(err)
	}
	if b := r.WriteOnly(0, 1, make([]byte, 100), false, 0, 0); b != nil || r.Counters().EncodeErrors != 1 || r.InFlight() != 0 {
		t.Errorf("a 100-byte write into 64-byte slots: %d bytes, counters %+v, %d in flight", len(b), r.Counters(), r.InFlight())
	}
}

// BenchmarkPost measures the fast path per report of two copies, as a
// translator posts them, with an ACK every 32 packets.
func BenchmarkPost(b *testing.B) {
	r, err := New(Config{Local: netip.MustParseAddrPort("127.0.0.1:5000"), Remote: netip.MustParseAddrPort("127.0.0.2:4791"),
		Ring: 64, MaxPacket: 128, AckReqEvery: 64}, 0)
	if err != nil {
		b.Fatal(err)
	}
	data := []byte{1, 2, 3, 4, 5, 6, 7, 8}
	for _, bc := range []struct {
		name string
		post func(i int)
	}{
		{"WriteOnly", func(i int) { r.WriteOnly(uint64(i)*16, 7, data, false, 0, 0) }},
		{"FetchAdd", func(i int) { r.FetchAdd(uint64(i)*8, 7, 1, 0) }},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for i := 0; b.Loop(); i += 2 {
				r.ShareTail(true)
				bc.post(i)
				bc.post(i + 1)
				r.ShareTail(false)
				if i&31 == 30 {
					r.EndRound()
					r.HandleAck(r.Next().Add(rocev2.PSNMask), rocev2.SyndromeACK, 0)
				}
			}
		})
	}
}
