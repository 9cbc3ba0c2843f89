package dta

import (
	"fmt"
	"testing"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
)

// keyWriteBench is the reference prototype's report: Key-Write,
// redundancy 4, 4 bytes of data.
var keyWriteBench = Report{Header: Header{Opcode: OpKeyWrite}, KeyWrite: KeyWrite{Redundancy: 4, Key: 0x0a000001, Data: []byte{0, 0, 0, 1}}}

// BenchmarkParseReport decodes the DTA part alone (the UDP payload), as a
// software translator does.
func BenchmarkParseReport(b *testing.B) {
	payload := keyWriteBench.AppendTo(nil)
	b.SetBytes(int64(len(payload)))
	b.ReportAllocs()
	var sink uint32
	for b.Loop() {
		r, err := ParseReport(payload)
		if err != nil {
			b.Fatal(err)
		}
		sink += r.KeyWrite.Key
	}
	_ = sink
}

// BenchmarkReportDecode is ParseReport without the copy of the result.
func BenchmarkReportDecode(b *testing.B) { benchDecode(b, keyWriteBench.AppendTo(nil)) }

// benchDecode decodes payload into one Report, b.N times.
func benchDecode(b *testing.B, payload []byte) {
	var r Report
	b.SetBytes(int64(len(payload)))
	b.ReportAllocs()
	for b.Loop() {
		if err := r.Decode(payload); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkReportLayerDecode is the DTA layer's DecodeFromBytes alone, the
// DTA share of a DecodingLayerParser pass.
func BenchmarkReportLayerDecode(b *testing.B) {
	payload := keyWriteBench.AppendTo(nil)
	var l ReportLayer
	df := gopacket.NilDecodeFeedback
	b.SetBytes(int64(len(payload)))
	b.ReportAllocs()
	for b.Loop() {
		if err := l.DecodeFromBytes(payload, df); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkDecodingLayerParser decodes a Key-Write report through a
// DecodingLayerParser: the UDP payload alone, as a program reading a
// socket has it (layers=dta), and a whole Ethernet/IPv4/UDP/DTA frame with
// gopacket's default map container and with the faster sparse one, where
// gopacket's own Ethernet, IPv4 and UDP layers take most of the time.
func BenchmarkDecodingLayerParser(b *testing.B) {
	// ignorepanic=true drops the recover that DecodeLayers otherwise
	// defers on every call; the dta layers are fuzzed never to panic.
	for _, ignorePanic := range []bool{false, true} {
		b.Run(fmt.Sprintf("layers=dta/ignorepanic=%v", ignorePanic), func(b *testing.B) {
			payload := keyWriteBench.AppendTo(nil)
			var rep ReportLayer
			seen := make([]gopacket.LayerType, 0, 2)
			parser := gopacket.NewDecodingLayerParser(LayerTypeReport, &rep)
			parser.IgnorePanic = ignorePanic
			b.SetBytes(int64(len(payload)))
			b.ReportAllocs()
			for b.Loop() {
				if err := parser.DecodeLayers(payload, &seen); err != nil {
					b.Fatal(err)
				}
			}
			if len(seen) != 1 || rep.KeyWrite.Key != keyWriteBench.KeyWrite.Key {
				b.Fatalf("decoded %v, %+v", seen, rep.Report)
			}
		})
	}
	frame, err := testBuilder.AppendFrame(nil, &keyWriteBench)
	if err != nil {
		b.Fatal(err)
	}
	for _, c := range []struct {
		name      string
		container gopacket.DecodingLayerContainer
	}{
		{"container=map", nil},
		{"container=sparse", gopacket.DecodingLayerSparse(nil)},
	} {
		b.Run("layers=eth-ip4-udp-dta/"+c.name, func(b *testing.B) {
			var (
				eth  layers.Ethernet
				ip4  layers.IPv4
				udp  layers.UDP
				rep  ReportLayer
				seen = make([]gopacket.LayerType, 0, 8)
			)
			parser := gopacket.NewDecodingLayerParser(layers.LayerTypeEthernet)
			if c.container != nil {
				parser.SetDecodingLayerContainer(c.container)
			}
			for _, l := range []gopacket.DecodingLayer{&eth, &ip4, &udp, &rep} {
				parser.AddDecodingLayer(l)
			}
			b.SetBytes(int64(len(frame)))
			b.ReportAllocs()
			for b.Loop() {
				if err := parser.DecodeLayers(frame, &seen); err != nil {
					b.Fatal(err)
				}
			}
			if len(seen) != 4 || rep.KeyWrite.Key != keyWriteBench.KeyWrite.Key {
				b.Fatalf("decoded %v, %+v", seen, rep.Report)
			}
		})
	}
}

// BenchmarkAppendPayload encodes a Key-Write report (validated) into a
// reused buffer, as a socket sender does.
func BenchmarkAppendPayload(b *testing.B) {
	buf := make([]byte, 0, 64)
	b.ReportAllocs()
	for b.Loop() {
		var err error
		if buf, err = AppendPayload(buf[:0], &keyWriteBench); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkAppendFrame builds a whole Ethernet/IPv4/UDP/DTA Key-Write
// frame, both checksums included, into a reused buffer.
func BenchmarkAppendFrame(b *testing.B) {
	buf := make([]byte, 0, 128)
	f := testBuilder
	b.ReportAllocs()
	for b.Loop() {
		var err error
		if buf, err = f.AppendFrame(buf[:0], &keyWriteBench); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkReportSend is what a reporter does with each report: copy it,
// set its header's sequence fields, check its length against the room left
// and encode it, validated.
func BenchmarkReportSend(b *testing.B) {
	buf := make([]byte, 0, 64)
	var r Report
	n := 0
	b.ReportAllocs()
	for b.Loop() {
		r = keyWriteBench
		h := &r.Header
		h.Sequenced, h.Wide, h.Seq, h.Session = true, true, 0, 0x1122334455667788
		n += r.Len()
		var err error
		if buf, err = AppendPayload(buf[:0], &r); err != nil {
			b.Fatal(err)
		}
	}
	if n == 0 {
		b.Fatal("no length")
	}
}

// BenchmarkReportDecodeWide decodes the reports of a reporter with
// exactly-once delivery (wide sequence numbers and a session), one per
// primitive: Key-Write and Append with 4 bytes of data, Postcard with a
// path length. Goal: 0 allocs.
func BenchmarkReportDecodeWide(b *testing.B) {
	h := Header{Sequenced: true, Wide: true, Seq: 0x01020304, Session: 0x1122334455667788}
	with := func(op Opcode) Header { h.Opcode = op; return h }
	for _, c := range []struct {
		name string
		r    Report
	}{
		{"op=KeyWrite", Report{Header: with(OpKeyWrite), KeyWrite: KeyWrite{Redundancy: 4, Key: 0x0a000001, Data: []byte{0, 0, 0, 1}}}},
		{"op=KeyIncrement", Report{Header: with(OpKeyIncrement), KeyIncrement: KeyIncrement{Redundancy: 4, Key: 0x0a000001, Counter: 5}}},
		{"op=Postcard", Report{Header: with(OpPostcard), Postcard: Postcard{Key: 0x0a000001, Hop: 2, Value: 9, PathLength: 5}}},
		{"op=Append", Report{Header: with(OpAppend), Append: Append{ListID: 3, Data: []byte{0, 0, 0, 1}}}},
	} {
		b.Run(c.name, func(b *testing.B) {
			if err := c.r.Validate(); err != nil {
				b.Fatal(err)
			}
			benchDecode(b, c.r.AppendTo(nil))
		})
	}
}
