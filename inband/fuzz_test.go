package inband

import (
	"bytes"
	"reflect"
	"testing"

	"github.com/gopacket/gopacket"
)

// FuzzINT: any bytes decode without panicking; what decodes re-encodes to
// bytes that decode to the same headers, hops and payload.
func FuzzINT(f *testing.F) {
	in := mdHeader()
	for _, h := range hops() {
		in.AppendHop(&h)
	}
	f.Add(serialize(f, in, gopacket.Payload("x")), uint8(0))
	f.Add(serialize(f, &INT{Type: TypeMX, Version: 2, Stack: []byte{1, 2, 3, 4}}), uint8(0))
	f.Add([]byte{0x10, 3, 0, 0, 0x20, 0, 0, 1, 0x80, 0, 0, 0, 0, 0, 0, 0}, uint8(4))
	// INT 0.5 (one hop of node ID, the tail) and 1.0 (one hop of node ID).
	f.Add(words(1<<24|5<<8, 1<<16|8<<8|1, 0x8000<<16, 7, 17<<24|80<<8), uint8(0))
	f.Add(words(1<<24|4<<8|3<<2, 1<<28|1<<8|5, 0x8000<<16, 7), uint8(0))
	f.Fuzz(func(t *testing.T, b []byte, sourceOnly uint8) {
		var i INT
		if err := i.DecodeFromBytes(b, gopacket.NilDecodeFeedback); err != nil {
			return
		}
		i.SetSourceOnly(int(sourceOnly))
		var m Metadata
		if n, err := i.Hops(); err == nil {
			for h := range n {
				if err := i.Hop(h, &m); err != nil {
					t.Fatal(err)
				}
			}
		}
		enc := serialize(t, &i, gopacket.Payload(i.Payload))
		var again INT
		if err := again.DecodeFromBytes(enc, gopacket.NilDecodeFeedback); err != nil {
			t.Fatalf("re-encoded %x does not decode: %v", enc, err)
		}
		again.SourceOnly = i.SourceOnly
		a, c := i, again
		a.BaseLayer, c.BaseLayer = again.BaseLayer, again.BaseLayer
		if !reflect.DeepEqual(a, c) || !bytes.Equal(again.Payload, i.Payload) {
			t.Fatalf("decoded %+v\nre-decoded %+v", i, again)
		}
	})
}

// FuzzReport: any bytes decode without panicking; what decodes re-encodes
// to bytes that decode to the same reports.
func FuzzReport(f *testing.F) {
	f.Add(serialize(f, report()))
	f.Add([]byte{0x20, 0, 0, 0, 0, 0, 0, 1, 0x14, 0xFF, 0, 0, 1, 2, 3, 4})
	f.Add(words(1<<28|6<<24|1<<21|0x21<<15|1<<6|3, 9, 1, 2, 3<<16|4, 80, 0x45000014))
	f.Add(words(2<<24|1<<22, 1, 2, 42, 1<<16|2, 3<<24|4000, 5555, 0xAAAAAAAA))
	f.Add(words(1<<28|1<<21, 0, 1524138290, 0xAAAAAAAA))
	f.Fuzz(func(t *testing.T, b []byte) {
		var r Report
		if err := r.DecodeFromBytes(b, gopacket.NilDecodeFeedback); err != nil {
			return
		}
		var m Metadata
		for k := range r.Individuals {
			r.Individuals[k].Metadata(&m)
		}
		enc, err := r.AppendTo(nil)
		if err != nil {
			return // e.g. a 0xFF-length report whose contents are not whole words
		}
		var again Report
		if err := again.DecodeFromBytes(enc, gopacket.NilDecodeFeedback); err != nil {
			t.Fatalf("re-encoded %x does not decode: %v", enc, err)
		}
		if again.Version != r.Version || again.Format != r.Format || again.HardwareID != r.HardwareID || again.Sequence != r.Sequence ||
			again.NodeID != r.NodeID || again.IngressTimestamp != r.IngressTimestamp || len(again.Individuals) != len(r.Individuals) {
			t.Fatalf("decoded %+v\nre-decoded %+v", r, again)
		}
		for k := range r.Individuals {
			x, y := r.Individuals[k], again.Individuals[k]
			x.Length, y.Length = 0, 0 // recomputed: 0xFF may become exact
			if x.RepType != RepINT {
				x.MDLength, y.MDLength = 0, 0 // ignored on reception
			}
			if !reflect.DeepEqual(normalize(x), normalize(y)) {
				t.Fatalf("report %d: %+v\nre-decoded %+v", k, x, y)
			}
		}
	})
}

func normalize(r Individual) Individual {
	if len(r.MD) == 0 {
		r.MD = nil
	}
	if len(r.Inner) == 0 {
		r.Inner = nil
	}
	return r
}
