package rocev2

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/netip"
	"testing"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
)

var fixAll = gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true}

// gopacketFrame is f as gopacket layers, for gopacket.SerializeLayers: the
// layers in wire order, and the UDP and BTH layers among them. The BTH's pad
// count and ICRC are left zero, for SerializeTo to compute.
type gopacketFrame struct {
	all []gopacket.SerializableLayer
	udp *layers.UDP
	bth *BTHLayer
}

func newGopacketFrame(t testing.TB, f *Frame) gopacketFrame {
	t.Helper()
	eth := &layers.Ethernet{SrcMAC: net.HardwareAddr(f.SrcMAC[:]), DstMAC: net.HardwareAddr(f.DstMAC[:])}
	var ip interface {
		gopacket.NetworkLayer
		gopacket.SerializableLayer
	}
	if f.IsIPv6() {
		eth.EthernetType = layers.EthernetTypeIPv6
		s, d := f.Src.As16(), f.Dst.As16()
		ip = &layers.IPv6{Version: 6, TrafficClass: f.TOS, FlowLabel: f.FlowLabel, NextHeader: layers.IPProtocolUDP,
			HopLimit: f.TTL, SrcIP: s[:], DstIP: d[:]}
	} else {
		eth.EthernetType = layers.EthernetTypeIPv4
		s, d := f.Src.As4(), f.Dst.As4()
		ip4 := &layers.IPv4{Version: 4, TOS: f.TOS, Id: f.ID, TTL: f.TTL, Protocol: layers.IPProtocolUDP, SrcIP: s[:], DstIP: d[:]}
		if f.DontFragment {
			ip4.Flags = layers.IPv4DontFragment
		}
		ip = ip4
	}
	udp := &layers.UDP{SrcPort: layers.UDPPort(f.SrcPort), DstPort: UDPPort}
	if err := udp.SetNetworkLayerForChecksum(ip); err != nil {
		t.Fatal(err)
	}
	bth := &BTHLayer{BTH: f.BTH}
	bth.PadCount = 0
	if err := bth.SetLayersForICRC(ip, udp); err != nil {
		t.Fatal(err)
	}
	g := gopacketFrame{all: []gopacket.SerializableLayer{eth, ip, udp, bth}, udp: udp, bth: bth}
	h := f.BTH.Opcode.Headers()
	for _, e := range []struct {
		has Headers
		l   gopacket.SerializableLayer
	}{
		{HasDETH, &DETHLayer{DETH: f.DETH}},
		{HasRETH, &RETHLayer{RETH: f.RETH}},
		{HasAtomicETH, &AtomicETHLayer{AtomicETH: f.AtomicETH}},
		{HasAETH, &AETHLayer{AETH: f.AETH}},
		{HasAtomicAckETH, &AtomicAckETHLayer{AtomicAckETH: f.AtomicAckETH}},
		{HasImmDt, &ImmDtLayer{ImmDt: f.ImmDt}},
		{HasIETH, &IETHLayer{IETH: f.IETH}},
	} {
		if h&e.has != 0 {
			g.all = append(g.all, e.l)
		}
	}
	if len(f.Payload) > 0 {
		g.all = append(g.all, gopacket.Payload(f.Payload))
	}
	return g
}

// serialize returns what gopacket.SerializeLayers builds from g with opts.
func (g gopacketFrame) serialize(opts gopacket.SerializeOptions) ([]byte, error) {
	buf := gopacket.NewSerializeBuffer()
	err := gopacket.SerializeLayers(buf, opts, g.all...)
	return buf.Bytes(), err
}

// wantFrame returns what Frame.AppendTo encodes f to with the UDP checksum
// gopacket computed, padded to the Ethernet minimum as layers.Ethernet pads.
func wantFrame(t testing.TB, f Frame, udpChecksum uint16) []byte {
	t.Helper()
	f.UDPChecksum = udpChecksum
	b, err := f.AppendTo(nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) < 60 {
		b = append(b, make([]byte, 60-len(b))...)
	}
	return b
}

// randomOpFrame returns a frame with opcode op, every field random and
// valid, and n payload bytes.
func randomOpFrame(r *rand.Rand, op Opcode, v6 bool, n int) Frame {
	f := Frame{
		DstMAC: [6]byte{0x02, byte(r.Uint32()), 0, 0, 0, 2}, SrcMAC: [6]byte{0x02, 0, byte(r.Uint32()), 0, 0, 1},
		Src: netip.AddrFrom4([4]byte{10, 0, 0, byte(r.Uint32())}), Dst: netip.AddrFrom4([4]byte{10, 0, 1, byte(r.Uint32())}),
		TOS: uint8(r.Uint32()), TTL: uint8(r.Uint32()), ID: uint16(r.Uint32()), DontFragment: r.IntN(2) == 0,
		SrcPort: uint16(r.Uint32()),
	}
	if v6 {
		f.Src = netip.AddrFrom16([16]byte{0xfd, 0, 15: byte(r.Uint32())})
		f.Dst = netip.AddrFrom16([16]byte{0xfd, 1, 15: byte(r.Uint32())})
		f.ID, f.DontFragment, f.FlowLabel = 0, false, r.Uint32N(1<<20)
	}
	f.BTH = BTH{Opcode: op, Solicited: r.IntN(2) == 0, MigReq: r.IntN(2) == 0, PKey: uint16(r.Uint32()),
		FECN: r.IntN(2) == 0, BECN: r.IntN(2) == 0, DestQP: r.Uint32N(1 << 24), AckReq: r.IntN(2) == 0, PSN: PSN(r.Uint32N(1 << 24))}
	f.DETH = DETH{QKey: r.Uint32(), SrcQP: r.Uint32N(1 << 24)}
	f.RETH = RETH{VA: r.Uint64(), RKey: r.Uint32(), DMALength: r.Uint32()}
	f.AtomicETH = AtomicETH{VA: r.Uint64(), RKey: r.Uint32(), SwapAddData: r.Uint64(), CompareData: r.Uint64()}
	f.AETH = AETH{Syndrome: Syndrome(r.Uint32()), MSN: r.Uint32N(1 << 24)}
	f.AtomicAckETH = AtomicAckETH{OrigRemoteData: r.Uint64()}
	f.ImmDt = ImmDt{Data: r.Uint32()}
	f.IETH = IETH{RKey: r.Uint32()}
	if n > 0 {
		f.Payload = make([]byte, n)
		for i := range f.Payload {
			f.Payload[i] = byte(r.Uint32())
		}
	}
	return f
}

// TestSerializeLayersMatchesFrame: for every opcode this package implements,
// over IPv4 and IPv6, with every pad count, gopacket.SerializeLayers builds
// byte for byte the frame Frame.AppendTo encodes, ICRC included.
func TestSerializeLayersMatchesFrame(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	var ops int
	for op := range 256 {
		op := Opcode(op)
		if !op.Valid() {
			continue
		}
		ops++
		sizes := []int{0}
		if op.HasPayload() {
			sizes = []int{0, 1, 2, 3, 4, 37, 1024}
		}
		for _, v6 := range []bool{false, true} {
			for _, n := range sizes {
				f := randomOpFrame(r, op, v6, n)
				name := fmt.Sprintf("%v/v6=%v/payload=%d", op, v6, n)
				g := newGopacketFrame(t, &f)
				got, err := g.serialize(fixAll)
				if err != nil {
					t.Fatalf("%s: %v", name, err)
				}
				if want := wantFrame(t, f, g.udp.Checksum); !bytes.Equal(got, want) {
					t.Fatalf("%s: SerializeLayers\n got %x\nwant %x", name, got, want)
				}
				var back Frame
				if err := back.Decode(got); err != nil || back.ICRC != g.bth.ICRC || g.bth.PadCount != uint8(-n&3) {
					t.Fatalf("%s: decode %v, ICRC %#x (layer %#x), pad %d", name, err, back.ICRC, g.bth.ICRC, g.bth.PadCount)
				}
			}
		}
	}
	if ops != 37 {
		t.Errorf("%d opcodes, want 37 (23 RC, 12 UC, 2 UD)", ops)
	}
}

// TestSerializeLayersVectors: the hidden vectors, decoded by gopacket, are
// serialized back to the same bytes as given (no fixing), and with their
// lengths, pad count, checksums and ICRC cleared, to the same bytes with
// everything recomputed: the ICRC the independent implementation computed.
// Only the UDP checksum (random in the vectors, masked by the ICRC) is then
// gopacket's, and the pad bytes zeros.
func TestSerializeLayersVectors(t *testing.T) {
	for n, v := range loadVectors(t) {
		frame := mustHex(t, v.Frame)
		pkt := gopacket.NewPacket(frame, layers.LayerTypeEthernet, gopacket.Default)
		if el := pkt.ErrorLayer(); el != nil {
			t.Fatalf("line %d: %v", n+1, el.Error())
		}
		var all []gopacket.SerializableLayer
		for _, l := range pkt.Layers() {
			all = append(all, l.(gopacket.SerializableLayer))
		}
		ip := pkt.Layer(layers.LayerTypeIPv4).(*layers.IPv4)
		udp := pkt.Layer(layers.LayerTypeUDP).(*layers.UDP)
		bth := pkt.Layer(LayerTypeBTH).(*BTHLayer)
		pad := int(bth.PadCount)
		end := len(frame) - ICRCLen
		want := bytes.Clone(frame)
		clear(want[end-pad : end]) // pad bytes are sent as zeros

		buf := gopacket.NewSerializeBuffer()
		if err := gopacket.SerializeLayers(buf, gopacket.SerializeOptions{}, all...); err != nil {
			t.Fatalf("line %d: as given: %v", n+1, err)
		}
		if !bytes.Equal(buf.Bytes(), want) {
			t.Fatalf("line %d (%s): as given\n got %x\nwant %x", n+1, v.Name, buf.Bytes(), want)
		}

		ip.Length, ip.IHL, ip.Checksum, udp.Length, udp.Checksum = 0, 0, 0, 0, 0
		bth.PadCount, bth.ICRC = 0, 0
		if err := udp.SetNetworkLayerForChecksum(ip); err != nil {
			t.Fatal(err)
		}
		if err := bth.SetLayersForICRC(ip, udp); err != nil {
			t.Fatal(err)
		}
		if err := gopacket.SerializeLayers(buf, fixAll, all...); err != nil {
			t.Fatalf("line %d: fixed: %v", n+1, err)
		}
		got := buf.Bytes()
		udpChecksum := etherHeaderLen + ipv4HeaderLen + 6
		copy(want[udpChecksum:udpChecksum+2], got[udpChecksum:udpChecksum+2])
		if !bytes.Equal(got, want) {
			t.Fatalf("line %d (%s): fixed\n got %x\nwant %x", n+1, v.Name, got, want)
		}
		if wire := binary.LittleEndian.AppendUint32(nil, bth.ICRC); !bytes.Equal(wire, mustHex(t, v.ICRCWire)) || int(bth.PadCount) != pad {
			t.Errorf("line %d: computed ICRC % x pad %d, vector %s pad %d", n+1, wire, bth.PadCount, v.ICRCWire, pad)
		}
	}
}

// TestSerializeLayersErrors: what cannot make a RoCEv2 packet is an error of
// this package saying why, never a panic or a wrong packet.
func TestSerializeLayersErrors(t *testing.T) {
	f := writeOnlyFrame()
	f.BTH.Opcode = RCWriteOnlyImm
	cases := []struct {
		name string
		edit func(g *gopacketFrame)
		want error
	}{
		{"missing RETH", func(g *gopacketFrame) { g.all = append(g.all[:4], g.all[5:]...) }, ErrHeader},
		{"RETH and ImmDt swapped", func(g *gopacketFrame) { g.all[4], g.all[5] = g.all[5], g.all[4] }, ErrHeader},
		{"extra AETH", func(g *gopacketFrame) {
			g.all = append(g.all[:6], append([]gopacket.SerializableLayer{&AETHLayer{}}, g.all[6:]...)...)
		}, ErrHeader},
		{"no ICRC layers", func(g *gopacketFrame) { g.bth.ip, g.bth.udp = nil, nil }, ErrHeader},
		{"payload on an ACK", func(g *gopacketFrame) {
			g.bth.Opcode = RCAcknowledge
			g.all = []gopacket.SerializableLayer{g.all[0], g.all[1], g.all[2], g.bth, &AETHLayer{}, gopacket.Payload("x")}
		}, ErrLength},
		{"longer than IP allows", func(g *gopacketFrame) { g.all[6] = gopacket.Payload(make([]byte, 0xFFFF-60)) }, ErrLength},
		{"reserved opcode", func(g *gopacketFrame) { g.bth.Opcode = 0x15 }, ErrReservedOpcode},
		{"version", func(g *gopacketFrame) { g.bth.Version = 1 }, ErrHeader},
		{"destination QP", func(g *gopacketFrame) { g.bth.DestQP = 1 << 24 }, ErrHeader},
		{"PSN", func(g *gopacketFrame) { g.bth.PSN = 1 << 24 }, ErrHeader},
		{"IPv4 options", func(g *gopacketFrame) {
			g.all[1].(*layers.IPv4).Options = []layers.IPv4Option{{OptionType: 1}, {OptionType: 1}, {OptionType: 1}, {OptionType: 0}}
		}, ErrHeader},
	}
	for _, c := range cases {
		g := newGopacketFrame(t, &f)
		c.edit(&g)
		if _, err := g.serialize(fixAll); !errors.Is(err, c.want) {
			t.Errorf("%s: %v, want %v", c.name, err, c.want)
		}
	}
	for name, l := range map[string]gopacket.SerializableLayer{
		"AETH MSN":   &AETHLayer{AETH: AETH{MSN: 1 << 24}},
		"DETH SrcQP": &DETHLayer{DETH: DETH{SrcQP: 1 << 24}},
	} {
		if err := l.SerializeTo(gopacket.NewSerializeBuffer(), fixAll); !errors.Is(err, ErrHeader) {
			t.Errorf("%s: %v", name, err)
		}
	}
	var bth BTHLayer
	if err := bth.SetLayersForICRC(&layers.Ethernet{}, &layers.UDP{}); !errors.Is(err, ErrHeader) {
		t.Errorf("SetLayersForICRC(Ethernet): %v", err)
	}
	if err := bth.SetLayersForICRC(&layers.IPv4{}, nil); !errors.Is(err, ErrHeader) {
		t.Errorf("SetLayersForICRC(nil UDP): %v", err)
	}
}

// FuzzSerializeLayers: whatever the fields, SerializeLayers refuses exactly
// what Frame.AppendTo refuses; what it builds is the frame Frame.AppendTo
// builds, and gopacket decodes it back to the same layers (decode(serialize(x))
// == x).
func FuzzSerializeLayers(f *testing.F) {
	f.Add(uint8(RCWriteOnly), uint8(0x81), uint16(0xFFFF), uint32(0x11), uint32(0xFFFFFF), uint64(0x1000), uint32(0xABCD), uint64(7), uint32(3), []byte("telemetry"), false)
	f.Add(uint8(RCAtomicAcknowledge), uint8(0x3C), uint16(1), uint32(1<<24), uint32(5), uint64(0), uint32(0), uint64(1<<63), uint32(1<<24-1), []byte(nil), true)
	f.Add(uint8(UDSendOnlyImm), uint8(0xFF), uint16(2), uint32(1), uint32(2), uint64(3), uint32(4), uint64(5), uint32(6), []byte{1, 2, 3, 4, 5}, true)
	f.Fuzz(func(t *testing.T, op, flags uint8, pkey uint16, qp, psn uint32, va uint64, key uint32, data uint64, msn uint32, payload []byte, v6 bool) {
		fr := Frame{
			DstMAC: [6]byte{2, 0, 0, 0, 0, 2}, SrcMAC: [6]byte{2, 0, 0, 0, 0, 1},
			Src: netip.MustParseAddr("10.0.0.1"), Dst: netip.MustParseAddr("10.0.0.2"),
			TOS: flags, TTL: uint8(key), ID: uint16(data), DontFragment: flags&1 != 0, SrcPort: pkey,
		}
		if v6 {
			fr.Src, fr.Dst = netip.MustParseAddr("fd00::1"), netip.MustParseAddr("fd00::2")
			fr.ID, fr.DontFragment, fr.FlowLabel = 0, false, key&0xFFFFF
		}
		fr.BTH = BTH{Opcode: Opcode(op), Solicited: flags&0x80 != 0, MigReq: flags&0x40 != 0, Version: flags >> 1 & 1,
			PKey: pkey, FECN: flags&0x08 != 0, BECN: flags&0x04 != 0, DestQP: qp, AckReq: flags&0x02 != 0, PSN: PSN(psn)}
		fr.DETH = DETH{QKey: key, SrcQP: msn}
		fr.RETH = RETH{VA: va, RKey: key, DMALength: uint32(len(payload))}
		fr.AtomicETH = AtomicETH{VA: va, RKey: key, SwapAddData: data, CompareData: ^data}
		fr.AETH = AETH{Syndrome: Syndrome(flags), MSN: msn}
		fr.AtomicAckETH = AtomicAckETH{OrigRemoteData: data}
		fr.ImmDt = ImmDt{Data: uint32(data)}
		fr.IETH = IETH{RKey: key}
		fr.Payload = payload
		if len(payload) == 0 {
			fr.Payload = nil
		}
		g := newGopacketFrame(t, &fr)
		got, err := g.serialize(fixAll)
		if verr := fr.Validate(); (err == nil) != (verr == nil) {
			t.Fatalf("SerializeLayers: %v; Frame.Validate: %v", err, verr)
		}
		if err != nil {
			if !isPackageError(err) {
				t.Fatalf("foreign error %v", err)
			}
			return
		}
		if want := wantFrame(t, fr, g.udp.Checksum); !bytes.Equal(got, want) {
			t.Fatalf("SerializeLayers\n got %x\nwant %x", got, want)
		}
		pkt := gopacket.NewPacket(got, layers.LayerTypeEthernet, gopacket.Default)
		if el := pkt.ErrorLayer(); el != nil {
			t.Fatalf("decode: %v", el.Error())
		}
		back := pkt.Layers()[3:]
		if len(back) != len(g.all)-3 {
			t.Fatalf("decoded %d RoCEv2 layers, serialized %d", len(back), len(g.all)-3)
		}
		bth := back[0].(*BTHLayer)
		if bth.BTH != g.bth.BTH || bth.ICRC != g.bth.ICRC {
			t.Fatalf("BTH %+v ICRC %#x, serialized %+v ICRC %#x", bth.BTH, bth.ICRC, g.bth.BTH, g.bth.ICRC)
		}
		for i, l := range back[1:] {
			sent := g.all[4+i]
			var same bool
			switch l := l.(type) {
			case *DETHLayer:
				same = l.DETH == sent.(*DETHLayer).DETH
			case *RETHLayer:
				same = l.RETH == sent.(*RETHLayer).RETH
			case *AtomicETHLayer:
				same = l.AtomicETH == sent.(*AtomicETHLayer).AtomicETH
			case *AETHLayer:
				same = l.AETH == sent.(*AETHLayer).AETH
			case *AtomicAckETHLayer:
				same = l.AtomicAckETH == sent.(*AtomicAckETHLayer).AtomicAckETH
			case *ImmDtLayer:
				same = l.ImmDt == sent.(*ImmDtLayer).ImmDt
			case *IETHLayer:
				same = l.IETH == sent.(*IETHLayer).IETH
			case *gopacket.Payload:
				same = bytes.Equal(*l, sent.(gopacket.Payload))
			}
			if !same {
				t.Fatalf("layer %d: decoded %#v, serialized %#v", 4+i, l, sent)
			}
		}
	})
}
