package target

import (
	"bytes"
	"math/rand/v2"
	"net/netip"
	"testing"

	"github.com/dtakit/dtakit/rocev2"
)

// TestFastICRCMatchesRocev2 cross-checks the fast paths against
// rocev2.DatagramICRC and Packet.AppendDatagram, over IPv4 and IPv6.
func TestFastICRCMatchesRocev2(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	pairs := [][2]netip.AddrPort{
		{targetAddr, peerAddr},
		{netip.MustParseAddrPort("[2001:db8::1]:4791"), netip.MustParseAddrPort("[2001:db8::2]:49152")},
		{netip.MustParseAddrPort("127.0.0.1:1"), netip.MustParseAddrPort("127.0.0.1:65535")},
	}
	for _, pr := range pairs {
		tg, err := New(Config{Addr: pr[0]})
		if err != nil {
			t.Fatal(err)
		}
		for range 500 {
			qp := &QP{t: tg, remoteQPN: rng.Uint32() & rocev2.PSNMask}
			dst := netip.AddrPortFrom(pr[1].Addr(), uint16(rng.Uint32()))
			psn := rocev2.PSN(rng.Uint32() & rocev2.PSNMask)
			msn := rng.Uint32() & rocev2.PSNMask
			orig := rng.Uint64()
			syn := rocev2.Syndrome(rng.Uint32())
			rb, ok := qp.bases(dst)
			if !ok {
				t.Fatal("no bases")
			}
			got := rb.appendAck(nil, qp.remoteQPN, syn, psn, msn)
			want, err := (&rocev2.Packet{BTH: rocev2.BTH{Opcode: rocev2.RCAcknowledge, PKey: 0xFFFF, DestQP: qp.remoteQPN, PSN: psn},
				AETH: rocev2.AETH{Syndrome: syn, MSN: msn}}).AppendDatagram(nil, pr[0], dst)
			if err != nil || !bytes.Equal(got, want) {
				t.Fatalf("ACK\n got %x\nwant %x (%v)", got, want, err)
			}
			got = rb.appendAtomicAck(nil, qp.remoteQPN, psn, msn, orig)
			want, _ = (&rocev2.Packet{BTH: rocev2.BTH{Opcode: rocev2.RCAtomicAcknowledge, PKey: 0xFFFF, DestQP: qp.remoteQPN, PSN: psn},
				AETH: rocev2.AETH{Syndrome: rocev2.SyndromeACK, MSN: msn}, AtomicAckETH: rocev2.AtomicAckETH{OrigRemoteData: orig}}).AppendDatagram(nil, pr[0], dst)
			if !bytes.Equal(got, want) {
				t.Fatalf("ATOMIC ACK\n got %x\nwant %x", got, want)
			}
			// Verification of a received packet of random length and bytes,
			// right and corrupted.
			b := make([]byte, rocev2.BTHLen+rng.IntN(300))
			for i := range b {
				b[i] = byte(rng.Uint32())
			}
			icrc, err := rocev2.DatagramICRC(dst, pr[0], b)
			if err != nil {
				t.Fatal(err)
			}
			b = append(b, byte(icrc), byte(icrc>>8), byte(icrc>>16), byte(icrc>>24))
			var hc headerCache
			for pass := range 2 { // computing the header CRC, then from the cache
				if !hc.verify(dst, pr[0], b) {
					t.Fatalf("right ICRC refused (%d bytes, pass %d)", len(b), pass)
				}
			}
			i := rng.IntN(len(b))
			if i == 4 {
				i = 0 // byte 4 of the BTH is masked
			}
			b[i] ^= 1 << rng.IntN(8)
			if hc.verify(dst, pr[0], b) {
				t.Fatalf("corrupted byte %d accepted", i)
			}
		}
	}
}
