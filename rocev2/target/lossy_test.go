package target

import (
	"encoding/binary"
	"math/rand/v2"
	"testing"

	"github.com/dtakit/dtakit/rocev2"
)

// TestLossyChannel runs a go-back-N requester against the target through a
// channel that drops, duplicates and reorders datagrams both ways, and
// checks that every acknowledged operation was applied exactly once: each
// counter holds the number of FETCH_ADDs sent to it, the original values of
// its FETCH_ADDs are exactly 0..k-1, and each slot holds its last WRITE.
func TestLossyChannel(t *testing.T) {
	ops := 3000
	if testing.Short() {
		ops = 600
	}
	for seed := range uint64(4) {
		rng := rand.New(rand.NewPCG(seed, 99))
		p := newPeer(t, 1024)
		g := newGuarded(4096)
		r := register(t, p.t, g, RemoteWrite|RemoteAtomic)
		const counters, slots = 8, 64
		first := p.psn
		frames := make([][]byte, ops)
		wantCount := make([]uint64, counters)
		wantSlot := make([]uint32, slots)
		isAtomic := make([]bool, ops)
		for i := range ops {
			if rng.IntN(2) == 0 {
				c := rng.IntN(counters)
				wantCount[c]++
				isAtomic[i] = true
				frames[i] = p.atomic(rocev2.RCFetchAdd, r.VA()+uint64(8*c), r.RKey(), 1, 0)
			} else {
				s := rng.IntN(slots)
				wantSlot[s] = uint32(i + 1)
				frames[i] = p.write(r.VA()+1024+uint64(4*s), r.RKey(), binary.LittleEndian.AppendUint32(nil, uint32(i+1)), rng.IntN(8) == 0)
			}
		}
		origs := make(map[int]uint64) // first ATOMIC ACK per op
		acked := 0                    // ops 0..acked-1 are acknowledged
		next := 0                     // next op to send
		lossy := func(in [][]byte) [][]byte {
			var out [][]byte
			for _, f := range in {
				switch x := rng.IntN(10); {
				case x == 0: // lost
				case x == 1:
					out = append(out, f, f)
				default:
					out = append(out, f)
				}
			}
			if len(out) > 1 && rng.IntN(3) == 0 {
				i, j := rng.IntN(len(out)), rng.IntN(len(out))
				out[i], out[j] = out[j], out[i]
			}
			return out
		}
		for round := 0; acked < ops; round++ {
			if round > 100*ops {
				t.Fatalf("seed %d: no progress, %d of %d acknowledged", seed, acked, ops)
			}
			// Send a window of up to 32 packets from next; the last asks
			// for an ACK.
			var batch [][]byte
			end := min(next+32, ops)
			for i := next; i < end; i++ {
				f := frames[i]
				if i == end-1 && !isAtomic[i] && f[8]&0x80 == 0 {
					// AckReq on the batch's last packet: re-encode with the bit.
					var pkt rocev2.Packet
					_ = pkt.Decode(f)
					pkt.BTH.AckReq = true
					f = p.frame(pkt)
					frames[i] = f
				}
				batch = append(batch, f)
			}
			next = end
			progress := false
			for _, resp := range lossy(encodeAll(p.send(lossy(batch)...), p)) {
				var a rocev2.Packet
				if err := a.Decode(resp); err != nil {
					t.Fatal(err)
				}
				idx := int(a.BTH.PSN.Diff(first))
				switch {
				case a.AETH.Syndrome == rocev2.SyndromeNAKPSNSequenceError:
					if idx > acked {
						acked, progress = idx, true
					}
					next = acked // go back to the expected PSN
				case a.AETH.Syndrome.IsACK():
					if a.BTH.Opcode == rocev2.RCAtomicAcknowledge {
						if _, seen := origs[idx]; !seen {
							origs[idx] = a.AtomicAckETH.OrigRemoteData
						}
					}
					if idx+1 > acked {
						acked, progress = idx+1, true
					}
				default:
					t.Fatalf("seed %d: syndrome %#x", seed, a.AETH.Syndrome)
				}
			}
			if !progress && next >= ops || !progress && rng.IntN(4) == 0 {
				next = acked // timeout: resend from the oldest unacknowledged
			}
			next = max(next, acked)
		}
		c := p.t.Counters()
		if c.Duplicates == 0 || c.OutOfOrder == 0 {
			t.Errorf("seed %d: the channel did not exercise duplicates and gaps: %+v", seed, c)
		}
		seen := make([]map[uint64]bool, counters)
		for i := range seen {
			seen[i] = map[uint64]bool{}
		}
		for i := range ops {
			if !isAtomic[i] {
				continue
			}
			var pkt rocev2.Packet
			_ = pkt.Decode(frames[i])
			cn := (pkt.AtomicETH.VA - r.VA()) / 8
			if o, ok := origs[i]; ok {
				if seen[cn][o] || o >= wantCount[cn] {
					t.Fatalf("seed %d: original value %d of counter %d returned twice or out of 0..%d", seed, o, cn, wantCount[cn]-1)
				}
				seen[cn][o] = true
			}
		}
		for cn := range counters {
			if v := binary.NativeEndian.Uint64(g.mem[8*cn:]); v != wantCount[cn] {
				t.Errorf("seed %d: counter %d = %d, want %d (applied twice or lost)", seed, cn, v, wantCount[cn])
			}
		}
		for s := range slots {
			if v := binary.LittleEndian.Uint32(g.mem[1024+4*s:]); v != wantSlot[s] {
				t.Errorf("seed %d: slot %d = %d, want %d", seed, s, v, wantSlot[s])
			}
		}
		g.check(t)
	}
}

// encodeAll re-encodes decoded responses as datagrams, for the lossy channel.
func encodeAll(pkts []rocev2.Packet, p *peer) [][]byte {
	var out [][]byte
	for _, pk := range pkts {
		b, err := pk.AppendTo(nil)
		if err != nil {
			p.tb.Fatal(err)
		}
		out = append(out, append(b, 0, 0, 0, 0))
	}
	return out
}
