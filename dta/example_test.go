package dta_test

import (
	"fmt"
	"net/netip"

	"github.com/dtakit/dtakit/dta"
	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
)

// A reporter builds a Key-Write report into a reused buffer; a software
// translator decodes the UDP payload without gopacket.
func ExampleParseReport() {
	r := dta.Report{
		Header:   dta.Header{Opcode: dta.OpKeyWrite, Sequenced: true, Seq: 7},
		KeyWrite: dta.KeyWrite{Redundancy: 4, Key: 0x0a000001, Data: []byte{0, 0, 0, 42}},
	}
	payload, err := dta.AppendPayload(make([]byte, 0, 64), &r)
	if err != nil {
		panic(err)
	}
	fmt.Printf("% x\n", payload)

	got, err := dta.ParseReport(payload)
	if err != nil {
		panic(err)
	}
	fmt.Println(got.Header.Opcode, got.Header.Seq, got.KeyWrite.Redundancy, got.KeyWrite.Key, got.KeyWrite.Data)
	// Output:
	// 01 40 07 04 0a 00 00 01 00 00 00 2a
	// keywrite 7 4 167772161 [0 0 0 42]
}

// Frames built by a FrameBuilder decode through a DecodingLayerParser over
// Ethernet, IPv4, UDP and the DTA layers.
func ExampleFrameBuilder() {
	f := dta.FrameBuilder{
		SrcIP:   netip.MustParseAddr("10.0.0.200"),
		DstIP:   netip.MustParseAddr("10.0.0.51"),
		SrcPort: 40041,
	}
	r := dta.Report{
		Header: dta.Header{Opcode: dta.OpAppend},
		Append: dta.Append{ListID: 3, Data: []byte{0, 0, 0, 1}},
	}
	frame, err := f.AppendFrame(nil, &r)
	if err != nil {
		panic(err)
	}

	var (
		eth     layers.Ethernet
		ip4     layers.IPv4
		udp     layers.UDP
		report  dta.ReportLayer
		ack     dta.AckLayer
		decoded []gopacket.LayerType
	)
	parser := gopacket.NewDecodingLayerParser(layers.LayerTypeEthernet, &eth, &ip4, &udp, &report, &ack)
	if err := parser.DecodeLayers(frame, &decoded); err != nil {
		panic(err)
	}
	fmt.Println(decoded)
	fmt.Println(report.Header.Opcode, report.Append.ListID, report.Append.Data)
	// Output:
	// [Ethernet IPv4 UDP DTA]
	// append 3 [0 0 0 1]
}
