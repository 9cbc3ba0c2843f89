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
		l := newLossyRun(t, seed, ops)
		for round := 0; l.acked < ops; round++ {
			if round > 100*ops {
				t.Fatalf("seed %d: no progress, %d of %d acknowledged", seed, l.acked, ops)
			}
			l.round()
		}
		l.check()
	}
}

const lossyCounters, lossySlots = 8, 64

// lossyRun is one seed of TestLossyChannel: the operations, what they
// must leave, and the requester's state.
type lossyRun struct {
	t         *testing.T
	seed      uint64
	rng       *rand.Rand
	p         *peer
	g         *guarded
	r         *Region
	first     rocev2.PSN
	frames    [][]byte
	isAtomic  []bool
	wantCount []uint64
	wantSlot  []uint32
	origs     map[int]uint64 // first ATOMIC ACK per op
	acked     int            // ops 0..acked-1 are acknowledged
	next      int            // next op to send
}

func newLossyRun(t *testing.T, seed uint64, ops int) *lossyRun {
	l := &lossyRun{t: t, seed: seed, rng: rand.New(rand.NewPCG(seed, 99)), p: newPeer(t, 1024), g: newGuarded(4096),
		frames: make([][]byte, ops), isAtomic: make([]bool, ops),
		wantCount: make([]uint64, lossyCounters), wantSlot: make([]uint32, lossySlots), origs: map[int]uint64{}}
	l.r = register(t, l.p.t, l.g, RemoteWrite|RemoteAtomic)
	l.first = l.p.psn
	for i := range ops {
		if l.rng.IntN(2) == 0 {
			c := l.rng.IntN(lossyCounters)
			l.wantCount[c]++
			l.isAtomic[i] = true
			l.frames[i] = l.p.atomic(rocev2.RCFetchAdd, l.r.VA()+uint64(8*c), l.r.RKey(), 1, 0)
		} else {
			s := l.rng.IntN(lossySlots)
			l.wantSlot[s] = uint32(i + 1)
			l.frames[i] = l.p.write(l.r.VA()+1024+uint64(4*s), l.r.RKey(), binary.LittleEndian.AppendUint32(nil, uint32(i+1)), l.rng.IntN(8) == 0)
		}
	}
	return l
}

// lossy drops, duplicates and reorders datagrams.
func (l *lossyRun) lossy(in [][]byte) [][]byte {
	var out [][]byte
	for _, f := range in {
		switch x := l.rng.IntN(10); {
		case x == 0: // lost
		case x == 1:
			out = append(out, f, f)
		default:
			out = append(out, f)
		}
	}
	if len(out) > 1 && l.rng.IntN(3) == 0 {
		i, j := l.rng.IntN(len(out)), l.rng.IntN(len(out))
		out[i], out[j] = out[j], out[i]
	}
	return out
}

// window returns up to 32 packets from next; the last asks for an ACK.
func (l *lossyRun) window() [][]byte {
	var batch [][]byte
	end := min(l.next+32, len(l.frames))
	for i := l.next; i < end; i++ {
		f := l.frames[i]
		if i == end-1 && !l.isAtomic[i] && f[8]&0x80 == 0 {
			// AckReq on the batch's last packet: re-encode with the bit.
			var pkt rocev2.Packet
			_ = pkt.Decode(f)
			pkt.BTH.AckReq = true
			f = l.p.frame(pkt)
			l.frames[i] = f
		}
		batch = append(batch, f)
	}
	l.next = end
	return batch
}

// round sends a window through the channel and takes the answers that
// come back through it, as a go-back-N requester.
func (l *lossyRun) round() {
	progress := false
	for _, resp := range l.lossy(encodeAll(l.p.send(l.lossy(l.window())...), l.p)) {
		progress = l.answer(resp) || progress
	}
	if !progress && l.next >= len(l.frames) || !progress && l.rng.IntN(4) == 0 {
		l.next = l.acked // timeout: resend from the oldest unacknowledged
	}
	l.next = max(l.next, l.acked)
}

// answer takes one response and reports whether it acknowledged more.
func (l *lossyRun) answer(resp []byte) bool {
	var a rocev2.Packet
	if err := a.Decode(resp); err != nil {
		l.t.Fatal(err)
	}
	idx := int(a.BTH.PSN.Diff(l.first))
	switch {
	case a.AETH.Syndrome == rocev2.SyndromeNAKPSNSequenceError:
		progress := idx > l.acked
		l.acked = max(l.acked, idx)
		l.next = l.acked // go back to the expected PSN
		return progress
	case a.AETH.Syndrome.IsACK():
		if a.BTH.Opcode == rocev2.RCAtomicAcknowledge {
			if _, seen := l.origs[idx]; !seen {
				l.origs[idx] = a.AtomicAckETH.OrigRemoteData
			}
		}
		if idx+1 > l.acked {
			l.acked = idx + 1
			return true
		}
	default:
		l.t.Fatalf("seed %d: syndrome %#x", l.seed, a.AETH.Syndrome)
	}
	return false
}

// check checks that every operation was applied exactly once.
func (l *lossyRun) check() {
	t, seed := l.t, l.seed
	c := l.p.t.Counters()
	if c.Duplicates == 0 || c.OutOfOrder == 0 {
		t.Errorf("seed %d: the channel did not exercise duplicates and gaps: %+v", seed, c)
	}
	seen := make([]map[uint64]bool, lossyCounters)
	for i := range seen {
		seen[i] = map[uint64]bool{}
	}
	for i := range l.frames {
		if !l.isAtomic[i] {
			continue
		}
		var pkt rocev2.Packet
		_ = pkt.Decode(l.frames[i])
		cn := (pkt.AtomicETH.VA - l.r.VA()) / 8
		if o, ok := l.origs[i]; ok {
			if seen[cn][o] || o >= l.wantCount[cn] {
				t.Fatalf("seed %d: original value %d of counter %d returned twice or out of 0..%d", seed, o, cn, l.wantCount[cn]-1)
			}
			seen[cn][o] = true
		}
	}
	for cn := range lossyCounters {
		if v := binary.NativeEndian.Uint64(l.g.mem[8*cn:]); v != l.wantCount[cn] {
			t.Errorf("seed %d: counter %d = %d, want %d (applied twice or lost)", seed, cn, v, l.wantCount[cn])
		}
	}
	for s := range lossySlots {
		if v := binary.LittleEndian.Uint32(l.g.mem[1024+4*s:]); v != l.wantSlot[s] {
			t.Errorf("seed %d: slot %d = %d, want %d", seed, s, v, l.wantSlot[s])
		}
	}
	l.g.check(t)
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
