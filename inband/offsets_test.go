package inband

import (
	"encoding/binary"
	"math/rand/v2"
	"testing"
)

// TestOffsets: the words at a layout's Offsets are what its accessors
// read, for every layout and random bitmaps and bytes (all-ones words
// among them), and a field the layout lacks is at -1.
func TestOffsets(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for name, l := range map[string]*layout{"int2": &layoutINT2, "int1": &layoutINT1, "int05": &layoutINT05} {
		for range 2000 {
			var f Fields
			f.compile(l, uint16(rng.Uint32()))
			b := make([]byte, 4*f.Words())
			for i := 0; i < len(b); i += 4 {
				w := rng.Uint32()
				if rng.IntN(4) == 0 {
					w = 0xFFFFFFFF
				}
				binary.BigEndian.PutUint32(b[i:], w)
			}
			o := f.Offsets()
			checkMasked := func(what string, at int, wide bool, mask, got uint64, ok bool) {
				t.Helper()
				if at < 0 {
					if ok {
						t.Fatalf("%s %#x: %s read with no offset", name, f.bitmap, what)
					}
					return
				}
				want := uint64(binary.BigEndian.Uint32(b[at:]))
				all := want == 0xFFFFFFFF
				if wide {
					want = binary.BigEndian.Uint64(b[at:])
					all = want == ^uint64(0)
				}
				if ok == all || ok && got != want&mask {
					t.Fatalf("%s %#x: %s at %d: accessor %#x %v, offset reads %#x", name, f.bitmap, what, at, got, ok, want)
				}
			}
			check := func(what string, at int, wide bool, got uint64, ok bool) {
				t.Helper()
				checkMasked(what, at, wide, ^uint64(0), got, ok)
			}
			v, ok := f.NodeID(b)
			check("node", o.NodeID, false, uint64(v), ok)
			in, out, ok := f.L1Ports(b)
			check("l1 ports", o.L1Ports, false, uint64(in)<<16|uint64(out), ok)
			in2, out2, ok := f.L2Ports(b)
			check("l2 ports", o.L2Ports, true, uint64(in2)<<32|uint64(out2), ok)
			v, ok = f.HopLatency(b)
			check("latency", o.HopLatency, false, uint64(v), ok)
			id, occ, ok := f.Queue(b)
			if o.Queue >= 0 && o.Queue16 != (l == &layoutINT05) {
				t.Fatalf("%s: Queue16 %v", name, o.Queue16)
			}
			if o.Queue16 {
				// A 16-bit queue ID, of which a Metadata keeps 8 bits.
				checkMasked("queue", o.Queue, false, 0xFFFFFF, uint64(id)<<16|uint64(occ), ok)
			} else {
				check("queue", o.Queue, false, uint64(id)<<24|uint64(occ), ok)
			}
			id, st, ok := f.Congestion(b)
			checkMasked("congestion", o.Congestion, false, 0xFFFFFF, uint64(id)<<16|uint64(st), ok)
			ts, ok := f.IngressTimestamp(b)
			check("ingress", o.IngressTS, o.IngressTS64, ts, ok)
			ts, ok = f.EgressTimestamp(b)
			check("egress", o.EgressTS, o.EgressTS64, ts, ok)
			v, ok = f.TxUtilization(b)
			check("tx", o.TxUtil, false, uint64(v), ok)
			id, occ, ok = f.Buffer(b)
			check("buffer", o.Buffer, false, uint64(id)<<24|uint64(occ), ok)
		}
	}
}
