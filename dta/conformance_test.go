package dta

import (
	"bytes"
	"testing"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
)

// Frames laid out as the reference prototype's traffic generator sends them
// (Ether / IPv4 10.0.0.200 -> 10.0.0.51 / UDP 40041 -> 40040 / 2-byte base
// header / sub-header), written out byte by byte from the spec. The
// checksums were computed separately (Python's struct module, RFC 1071).
var prototypeFrames = []struct {
	name string
	hex  string
	want Report
}{
	{
		name: "key-write redundancy 4, key 1, data 1",
		hex: "b8cef6d212c7 0c42a1000001 0800" + // Ethernet
			"4500 0027 0001 0000 4011 65cb 0a0000c8 0a000033" + // IPv4, total length 39
			"9c69 9c68 0013 aafb" + // UDP 40041 -> 40040, length 19
			"01 00" + // base header: Key-Write, no flags
			"04 00000001" + // redundancy 4, key 1
			"00000001", // data
		want: Report{Header: Header{Opcode: OpKeyWrite}, KeyWrite: KeyWrite{Redundancy: 4, Key: 1, Data: []byte{0, 0, 0, 1}}},
	},
	{
		name: "key-write 28-byte data (compile-time option)",
		hex: "b8cef6d212c7 0c42a1000001 0800" +
			"4500 003f 0001 0000 4011 65b3 0a0000c8 0a000033" +
			"9c69 9c68 002b c51f" +
			"01 00" +
			"02 0000abcd" +
			"00000001 00000002 00000003 00000004 00000005 00000006 00000007",
		want: Report{Header: Header{Opcode: OpKeyWrite}, KeyWrite: KeyWrite{Redundancy: 2, Key: 0xabcd, Data: []byte{
			0, 0, 0, 1, 0, 0, 0, 2, 0, 0, 0, 3, 0, 0, 0, 4, 0, 0, 0, 5, 0, 0, 0, 6, 0, 0, 0, 7}}},
	},
	{
		name: "append list 3, data 42",
		hex: "b8cef6d212c7 0c42a1000001 0800" +
			"4500 0026 0001 0000 4011 65cc 0a0000c8 0a000033" +
			"9c69 9c68 0012 afd0" +
			"02 00" + // base header: Append
			"00000003" + // list ID
			"0000002a", // data
		want: Report{Header: Header{Opcode: OpAppend}, Append: Append{ListID: 3, Data: []byte{0, 0, 0, 42}}},
	},
}

func TestPrototypeFramesNewPacket(t *testing.T) {
	for _, tt := range prototypeFrames {
		t.Run(tt.name, func(t *testing.T) {
			frame := unhex(t, tt.hex)
			p := gopacket.NewPacket(frame, layers.LayerTypeEthernet, gopacket.Default)
			if el := p.ErrorLayer(); el != nil {
				t.Fatalf("decode error: %v", el.Error())
			}
			var got []gopacket.LayerType
			for _, l := range p.Layers() {
				got = append(got, l.LayerType())
			}
			want := []gopacket.LayerType{layers.LayerTypeEthernet, layers.LayerTypeIPv4, layers.LayerTypeUDP, LayerTypeReport}
			if len(got) != len(want) {
				t.Fatalf("layers = %v, want %v", got, want)
			}
			for i := range want {
				if got[i] != want[i] {
					t.Fatalf("layers = %v, want %v", got, want)
				}
			}
			udp := p.Layer(layers.LayerTypeUDP).(*layers.UDP)
			if err := udp.SetNetworkLayerForChecksum(p.NetworkLayer()); err != nil {
				t.Fatal(err)
			}
			if err, res := udp.VerifyChecksum(); err != nil || !res.Valid {
				t.Errorf("UDP checksum of the hand-assembled frame: %v %+v", err, res)
			}
			l := p.Layer(LayerTypeReport).(*ReportLayer)
			if !equalReport(l.Report, tt.want) {
				t.Errorf("report = %+v, want %+v", l.Report, tt.want)
			}
			if app := p.ApplicationLayer(); app != l {
				t.Errorf("application layer = %v, want the DTA layer", app)
			}
			if !bytes.Equal(l.LayerContents(), frame[42:]) {
				t.Errorf("contents = % x, want the UDP payload", l.LayerContents())
			}
		})
	}
}

func TestPrototypeFramesDecodingLayerParser(t *testing.T) {
	var (
		eth  layers.Ethernet
		ip4  layers.IPv4
		udp  layers.UDP
		rep  ReportLayer
		ack  AckLayer
		seen []gopacket.LayerType
	)
	parser := gopacket.NewDecodingLayerParser(layers.LayerTypeEthernet, &eth, &ip4, &udp, &rep, &ack)
	for _, tt := range prototypeFrames {
		frame := unhex(t, tt.hex)
		if err := parser.DecodeLayers(frame, &seen); err != nil {
			t.Fatalf("%s: DecodeLayers: %v", tt.name, err)
		}
		if len(seen) != 4 || seen[3] != LayerTypeReport {
			t.Fatalf("%s: decoded %v", tt.name, seen)
		}
		if !equalReport(rep.Report, tt.want) {
			t.Errorf("%s: report = %+v, want %+v", tt.name, rep.Report, tt.want)
		}
		if ip4.SrcIP.String() != "10.0.0.200" || udp.SrcPort != 40041 || udp.DstPort != ReportPort {
			t.Errorf("%s: addresses %v:%d -> %d", tt.name, ip4.SrcIP, udp.SrcPort, udp.DstPort)
		}
	}
}

// equalReport compares reports, treating nil and empty Data alike.
func equalReport(a, b Report) bool {
	return a.Header == b.Header &&
		a.KeyWrite.Redundancy == b.KeyWrite.Redundancy && a.KeyWrite.Key == b.KeyWrite.Key && bytes.Equal(a.KeyWrite.Data, b.KeyWrite.Data) &&
		a.Append.ListID == b.Append.ListID && bytes.Equal(a.Append.Data, b.Append.Data) &&
		a.KeyIncrement == b.KeyIncrement && a.Postcard == b.Postcard &&
		bytes.Equal(a.Body, b.Body) && (a.Body == nil) == (b.Body == nil)
}
