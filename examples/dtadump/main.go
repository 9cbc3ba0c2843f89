// Command dtadump prints every packet of a capture as one JSON object per
// line, with each decoded Ethernet, IPv4 or IPv6, UDP and DTA field (reports
// on UDP port 40040, acknowledgements on 40044), and the RoCEv2 packets a
// translator sends and receives (UDP port 4791): the BTH and extension
// headers, the payload, whether the ICRC is right, and the RDMA CM messages
// on QP 1, and INT (2.x, 1.0, 0.5) and Telemetry Reports (2.0, 1.0, 0.5, on
// UDP port 32766 or -report-port; INT over UDP on -int-port, and with
// -int-after-l4 after any TCP or UDP header of a report's inner packet),
// with each report's metadata and its truncated inner packet, INT hops
// included. A packet
// that decodes as none of these gets an "error" field saying why; dtadump
// goes on to the next one.
//
// It needs only a capture: a pcap or pcapng file named on the command line,
// or read from standard input.
//
//	go run ./examples/dtadump testdata/reports.pcap
//	go run ./examples/dtadump examples/dtadump/testdata/rocev2.pcap
//	tcpdump -w - udp port 40040 | go run ./examples/dtadump
package main

//go:generate go test -run ^(TestReportsPcap|TestRoCEv2Pcap)$ -update .

import (
	"bufio"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/dtakit/dtakit/dta"
	"github.com/dtakit/dtakit/internal/app/cli"
	"github.com/dtakit/dtakit/primitive"
	"github.com/dtakit/dtakit/rocev2"
	"github.com/dtakit/dtakit/rocev2/cm"
	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/gopacket/gopacket/pcapgo"
)

func main() {
	cli.Usage(flag.CommandLine, synopsis, exitStatus)
	flag.Parse()
	registerInband()
	in := io.Reader(os.Stdin)
	if name := flag.Arg(0); name != "" && name != "-" {
		f, err := os.Open(name)
		if err != nil {
			fmt.Fprintln(os.Stderr, "dtadump:", err)
			os.Exit(1)
		}
		defer f.Close()
		in = f
	}
	out := bufio.NewWriter(os.Stdout)
	err := dump(in, out)
	if ferr := out.Flush(); err == nil {
		err = ferr
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "dtadump:", err)
		os.Exit(1)
	}
}

// packetSource is what both pcapgo readers offer.
type packetSource interface {
	gopacket.PacketDataSource
	LinkType() layers.LinkType
}

// dump writes one JSON line per packet of the capture in r to w. It returns
// an error only when the capture itself cannot be read; packets that do
// not decode are reported in their line's "error" field.
func dump(r io.Reader, w io.Writer) error {
	br := bufio.NewReader(r)
	magic, err := br.Peek(4)
	if err != nil {
		return fmt.Errorf("reading capture header: %w", err)
	}
	var src packetSource
	if string(magic) == "\x0a\x0d\x0d\x0a" {
		src, err = pcapgo.NewNgReader(br, pcapgo.DefaultNgReaderOptions)
	} else {
		src, err = pcapgo.NewReader(br)
	}
	if err != nil {
		return fmt.Errorf("reading capture header: %w", err)
	}
	opts := gopacket.DecodeOptions{NoCopy: true}
	for n := 1; ; n++ {
		data, ci, err := src.ReadPacketData()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			// A damaged record leaves no way to find the next one.
			return fmt.Errorf("packet %d: %w", n, err)
		}
		p := gopacket.NewPacket(data, src.LinkType(), opts)
		line, err := json.Marshal(describe(n, ci, p))
		if err != nil {
			return err
		}
		if _, err := w.Write(append(line, '\n')); err != nil {
			return err
		}
	}
}

// object is a JSON object whose fields keep their order.
type object []field

type field struct {
	key   string
	value any
}

func (o object) MarshalJSON() ([]byte, error) {
	b := []byte{'{'}
	for i, f := range o {
		if i > 0 {
			b = append(b, ',')
		}
		k, _ := json.Marshal(f.key)
		v, err := json.Marshal(f.value)
		if err != nil {
			return nil, fmt.Errorf("field %s: %w", f.key, err)
		}
		b = append(append(append(b, k...), ':'), v...)
	}
	return append(b, '}'), nil
}

// A layerPrinter shows one layer type as a JSON field. To show a new layer
// (the RoCEv2 layers, say), add an entry to printers.
type layerPrinter struct {
	name   string                        // the field's key
	fields func(l gopacket.Layer) object // the layer's fields
	// target marks the layers dtadump exists for: a packet with none of
	// them gets an "error" field.
	target bool
}

var printers = map[gopacket.LayerType]layerPrinter{
	layers.LayerTypeEthernet: {name: "ethernet", fields: ethernetFields},
	layers.LayerTypeIPv4:     {name: "ipv4", fields: ipv4Fields},
	layers.LayerTypeIPv6:     {name: "ipv6", fields: ipv6Fields},
	layers.LayerTypeUDP:      {name: "udp", fields: udpFields},
	dta.LayerTypeReport:      {name: "dta", fields: reportFields, target: true},
	dta.LayerTypeAck:         {name: "dta_ack", fields: ackFields, target: true},
	// RoCEv2 (rocev2.go).
	rocev2.LayerTypeBTH:          {name: "bth", fields: bthFields, target: true},
	rocev2.LayerTypeDETH:         {name: "deth", fields: dethFields},
	rocev2.LayerTypeRETH:         {name: "reth", fields: rethFields},
	rocev2.LayerTypeAtomicETH:    {name: "atomic_eth", fields: atomicETHFields},
	rocev2.LayerTypeAETH:         {name: "aeth", fields: aethFields},
	rocev2.LayerTypeAtomicAckETH: {name: "atomic_ack_eth", fields: atomicAckETHFields},
	rocev2.LayerTypeImmDt:        {name: "immdt", fields: immDtFields},
	rocev2.LayerTypeIETH:         {name: "ieth", fields: iethFields},
	cm.LayerTypeMAD:              {name: "cm", fields: madFields},
}

// describe returns the JSON object for packet number n.
func describe(n int, ci gopacket.CaptureInfo, p gopacket.Packet) object {
	o := object{
		{"packet", n},
		{"time", ci.Timestamp.UTC().Format(time.RFC3339Nano)},
		{"length", ci.Length},
	}
	if ci.CaptureLength != ci.Length {
		o = append(o, field{"captured", ci.CaptureLength})
	}
	found := false
	for _, l := range p.Layers() {
		if pr, ok := printers[l.LayerType()]; ok {
			fs := pr.fields(l)
			if l.LayerType() == rocev2.LayerTypeBTH {
				// What the BTH layer alone cannot tell: the payload and
				// whether the ICRC (which covers the IP header) is right.
				fs = append(fs, roceTrailer(p)...)
			}
			o = append(o, field{pr.name, fs})
			found = found || pr.target
		}
	}
	switch el := p.ErrorLayer(); {
	case el != nil:
		o = append(o, field{"error", el.Error().Error()})
		if raw := el.LayerContents(); len(raw) > 0 {
			o = append(o, field{"undecoded", hex.EncodeToString(raw)})
		}
	case found:
	case emptyDTADatagram(p):
		// gopacket stops at an empty UDP payload; say what is missing.
		_, err := dta.ParseReport(nil)
		o = append(o, field{"error", err.Error()})
	case emptyRoCEv2Datagram(p):
		var pk rocev2.Packet
		o = append(o, field{"error", pk.Decode(nil).Error()})
	default:
		o = append(o, field{"error", "not a DTA, RoCEv2, INT or Telemetry Report packet"})
	}
	return o
}

// emptyDTADatagram reports whether p is a UDP datagram with no payload to
// a DTA port.
func emptyDTADatagram(p gopacket.Packet) bool {
	udp, ok := p.Layer(layers.LayerTypeUDP).(*layers.UDP)
	return ok && len(udp.Payload) == 0 && (udp.DstPort == dta.ReportPort || udp.DstPort == dta.AckPort)
}

func ethernetFields(l gopacket.Layer) object {
	e := l.(*layers.Ethernet)
	return object{{"src", e.SrcMAC.String()}, {"dst", e.DstMAC.String()}, {"type", e.EthernetType.String()}}
}

func ipv4Fields(l gopacket.Layer) object {
	ip := l.(*layers.IPv4)
	return object{{"src", ip.SrcIP.String()}, {"dst", ip.DstIP.String()}, {"ttl", ip.TTL}, {"length", ip.Length}}
}

func udpFields(l gopacket.Layer) object {
	u := l.(*layers.UDP)
	return object{{"src_port", uint16(u.SrcPort)}, {"dst_port", uint16(u.DstPort)}, {"length", u.Length}}
}

// reportFields shows every field of a DTA report: the base header, then
// the fields of the sub-header its opcode names.
func reportFields(l gopacket.Layer) object {
	r := &l.(*dta.ReportLayer).Report
	h := r.Header
	o := object{
		{"opcode", h.Opcode.String()},
		{"immediate", h.Immediate},
		{"sequenced", h.Sequenced},
	}
	if h.Wide {
		o = append(o, field{"wide", true})
	}
	if h.Sequenced {
		o = append(o, field{"seq", h.Seq})
	}
	if h.Sequenced && h.Wide {
		o = append(o, field{"session", fmt.Sprintf("%016x", h.Session)})
	}
	o = append(o, field{"reserved", h.Reserved})
	// The primitive names its fields; a registered one that does not
	// shows its body as it came.
	if k, ok := primitive.Lookup(h.Opcode); ok {
		if d, ok := k.(primitive.Describer); ok {
			d.Describe(r, func(name string, v any) { o = append(o, field{name, v}) })
		} else {
			o = append(o, field{"body", hex.EncodeToString(r.Body)})
		}
	}
	return o
}

func ackFields(l gopacket.Layer) object {
	a := l.(*dta.AckLayer).Ack
	o := object{{"seq", a.Seq}, {"nack", a.NACK}, {"reserved", a.Reserved}}
	if a.Wide {
		o = append(o, field{"wide", true}, field{"resend", a.Resend}, field{"reason", a.Reason}, field{"span", a.Span}, field{"session", fmt.Sprintf("%016x", a.Session)})
	}
	return o
}
