package rocev2_test

import (
	"fmt"
	"net"
	"net/netip"

	"github.com/dtakit/dtakit/rocev2"
	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
)

// Build an RDMA WRITE Only frame into a reused buffer, then decode it and
// verify its ICRC.
func Example() {
	f := rocev2.Frame{
		DstMAC: [6]byte{0x02, 0, 0, 0, 0, 2},
		SrcMAC: [6]byte{0x02, 0, 0, 0, 0, 1},
		Src:    netip.MustParseAddr("10.0.0.1"),
		Dst:    netip.MustParseAddr("10.0.0.2"),
		TTL:    64, DontFragment: true, SrcPort: 0xC000,
	}
	f.BTH = rocev2.BTH{Opcode: rocev2.RCWriteOnly, PKey: rocev2.DefaultPKey, DestQP: 0x11, AckReq: true, PSN: 0xFFFFFF}
	f.RETH = rocev2.RETH{VA: 0x1000, RKey: 0xABCD, DMALength: 8}
	f.Payload = []byte("telemetr")

	buf := make([]byte, 0, 1500)
	buf, err := f.AppendTo(buf[:0])
	if err != nil {
		panic(err)
	}
	var g rocev2.Frame
	if err := g.Decode(buf); err != nil {
		panic(err)
	}
	fmt.Printf("%d bytes: %v to QP %#x, PSN %#x then %#x, %q at %#x, ICRC %#08x\n",
		len(buf), g.BTH.Opcode, g.BTH.DestQP, g.BTH.PSN, g.BTH.PSN.Next(), g.Payload, g.RETH.VA, g.ICRC)
	// Output:
	// 82 bytes: RC RDMA WRITE Only to QP 0x11, PSN 0xffffff then 0x0, "telemetr" at 0x1000, ICRC 0x805d061a
}

// Build the same RDMA WRITE Only frame with gopacket.SerializeLayers: the
// BTH layer sets the pad count and computes the ICRC over the IP and UDP
// layers it is told about, as layers.UDP computes its checksum.
func ExampleBTHLayer_SerializeTo() {
	eth := &layers.Ethernet{
		DstMAC:       net.HardwareAddr{0x02, 0, 0, 0, 0, 2},
		SrcMAC:       net.HardwareAddr{0x02, 0, 0, 0, 0, 1},
		EthernetType: layers.EthernetTypeIPv4,
	}
	ip := &layers.IPv4{Version: 4, TTL: 64, Flags: layers.IPv4DontFragment, Protocol: layers.IPProtocolUDP,
		SrcIP: net.IP{10, 0, 0, 1}, DstIP: net.IP{10, 0, 0, 2}}
	udp := &layers.UDP{SrcPort: 0xC000, DstPort: rocev2.UDPPort}
	bth := &rocev2.BTHLayer{BTH: rocev2.BTH{Opcode: rocev2.RCWriteOnly, PKey: rocev2.DefaultPKey, DestQP: 0x11, AckReq: true, PSN: 0xFFFFFF}}
	reth := &rocev2.RETHLayer{RETH: rocev2.RETH{VA: 0x1000, RKey: 0xABCD, DMALength: 8}}
	if err := udp.SetNetworkLayerForChecksum(ip); err != nil {
		panic(err)
	}
	if err := bth.SetLayersForICRC(ip, udp); err != nil {
		panic(err)
	}

	buf := gopacket.NewSerializeBuffer()
	opts := gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true}
	if err := gopacket.SerializeLayers(buf, opts, eth, ip, udp, bth, reth, gopacket.Payload("telemetr")); err != nil {
		panic(err)
	}
	var f rocev2.Frame
	if err := f.Decode(buf.Bytes()); err != nil { // verifies the ICRC
		panic(err)
	}
	fmt.Printf("%d bytes: %v, %q at %#x, ICRC %#08x\n", len(buf.Bytes()), f.BTH.Opcode, f.Payload, f.RETH.VA, bth.ICRC)
	// Output:
	// 82 bytes: RC RDMA WRITE Only, "telemetr" at 0x1000, ICRC 0x805d061a
}
