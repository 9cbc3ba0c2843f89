package rc

import (
	"testing"

	"github.com/dtakit/dtakit/rocev2"
)

// FuzzResponder drives a Responder with requests whose PSNs, opcodes and
// outcomes come from the input (the Responder decodes nothing itself; the
// requests come decoded by rocev2.Packet): whatever arrives, every
// response decodes with a right ICRC, the expected PSN moves only by an
// executed request, a duplicate or a request ahead is never to be
// executed, and nothing panics.
func FuzzResponder(f *testing.F) {
	f.Add([]byte{0, 0, 1, 0, 2, 3, 0xFF, 1, 5, 2, 0, 0})
	f.Add([]byte{3, 1, 3, 1, 0x80, 0, 1, 2, 2, 2})
	ops := []rocev2.Opcode{rocev2.RCWriteOnly, rocev2.RCFetchAdd, rocev2.RCSendOnly, rocev2.RCCompareSwap}
	f.Fuzz(func(t *testing.T, in []byte) {
		r, err := NewResponder(ResponderConfig{Local: testRemote, Remote: testLocal, RemoteQPN: 0x22, StartPSN: 0xFFFFF8})
		if err != nil {
			t.Fatal(err)
		}
		var buf []byte
		for len(in) >= 2 {
			off, ctl := in[0], in[1]
			in = in[2:]
			psn := r.Expected().Add(uint32(int32(int8(off))) & rocev2.PSNMask)
			before := r.Expected()
			v, b, dgs := r.Receive(buf[:0], &rocev2.BTH{Opcode: ops[ctl&3], PSN: psn})
			switch {
			case v == Execute && psn != before, v != Execute && psn == before:
				t.Fatalf("PSN %#x, expected %#x: verdict %d", psn, before, v)
			case v == Execute && ctl&4 != 0:
				b, dgs = r.Refuse(b, rocev2.SyndromeNAKInvalidRequest|rocev2.Syndrome(ctl>>5))
			case v == Execute && (ops[ctl&3] == rocev2.RCFetchAdd || ops[ctl&3] == rocev2.RCCompareSwap):
				b, dgs = r.AtomicDone(b, uint64(ctl))
			case v == Execute:
				r.Done(ctl&8 != 0, ctl&16 != 0)
			}
			if v != Execute && r.Expected() != before {
				t.Fatalf("verdict %d moved the expected PSN from %#x to %#x", v, before, r.Expected())
			}
			if ctl&0x80 != 0 {
				b, dgs = r.Flush(b)
			}
			decodeResponses(t, r, dgs...)
			buf = b
		}
	})
}
