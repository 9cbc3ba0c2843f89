package cm

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math/rand/v2"
	"net"
	"net/netip"
	"reflect"
	"testing"

	"github.com/dtakit/dtakit/rocev2"
	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
)

func fill(r *rand.Rand, b []byte) {
	for i := range b {
		b[i] = byte(r.Uint32())
	}
}

func randomPath(r *rand.Rand) Path {
	p := Path{
		LocalLID: uint16(r.Uint32()), RemoteLID: uint16(r.Uint32()),
		FlowLabel: r.Uint32() & 0xFFFFF, PacketRate: uint8(r.IntN(64)), TrafficClass: uint8(r.Uint32()),
		HopLimit: uint8(r.Uint32()), SL: uint8(r.IntN(16)), SubnetLocal: r.IntN(2) == 0,
		LocalACKTimeout: uint8(r.IntN(32)),
	}
	fill(r, p.LocalGID[:])
	fill(r, p.RemoteGID[:])
	return p
}

// randomMessages returns one of each message with random in-range fields.
func randomMessages(r *rand.Rand) []Message {
	req := &ConnectRequest{
		LocalCommID: r.Uint32(), VendorID: r.Uint32() & 0xFFFFFF, ServiceID: r.Uint64(), LocalCAGUID: r.Uint64(),
		LocalQKey: r.Uint32(), LocalQPN: r.Uint32() & 0xFFFFFF, ResponderResources: uint8(r.Uint32()),
		LocalEECN: r.Uint32() & 0xFFFFFF, InitiatorDepth: uint8(r.Uint32()), RemoteEECN: r.Uint32() & 0xFFFFFF,
		RemoteCMResponseTimeout: uint8(r.IntN(32)), TransportType: uint8(r.IntN(4)), EndToEndFlowControl: r.IntN(2) == 0,
		StartingPSN: r.Uint32() & 0xFFFFFF, LocalCMResponseTimeout: uint8(r.IntN(32)), RetryCount: uint8(r.IntN(8)),
		PKey: uint16(r.Uint32()), PathMTU: uint8(r.IntN(16)), RDCExists: r.IntN(2) == 0, RNRRetryCount: uint8(r.IntN(8)),
		MaxCMRetries: uint8(r.IntN(16)), SRQ: r.IntN(2) == 0, ExtendedTransportType: uint8(r.IntN(8)),
		Primary: randomPath(r), Alternate: randomPath(r), SAPSupported: r.IntN(2) == 0,
	}
	fill(r, req.PrivateData[:])
	rep := &ConnectReply{
		LocalCommID: r.Uint32(), RemoteCommID: r.Uint32(), LocalQKey: r.Uint32(), LocalQPN: r.Uint32() & 0xFFFFFF,
		VendorID: r.Uint32() & 0xFFFFFF, LocalEECN: r.Uint32() & 0xFFFFFF, StartingPSN: r.Uint32() & 0xFFFFFF,
		ResponderResources: uint8(r.Uint32()), InitiatorDepth: uint8(r.Uint32()), TargetACKDelay: uint8(r.IntN(32)),
		FailoverAccepted: uint8(r.IntN(4)), EndToEndFlowControl: r.IntN(2) == 0, RNRRetryCount: uint8(r.IntN(8)),
		SRQ: r.IntN(2) == 0, LocalCAGUID: r.Uint64(),
	}
	fill(r, rep.PrivateData[:])
	rtu := &ReadyToUse{LocalCommID: r.Uint32(), RemoteCommID: r.Uint32()}
	fill(r, rtu.PrivateData[:])
	rej := &Reject{LocalCommID: r.Uint32(), RemoteCommID: r.Uint32(), MessageRejected: uint8(r.IntN(3)),
		InfoLength: uint8(r.IntN(73)), Reason: uint16(r.Uint32())}
	fill(r, rej.ARI[:])
	fill(r, rej.PrivateData[:])
	dreq := &DisconnectRequest{LocalCommID: r.Uint32(), RemoteCommID: r.Uint32(), RemoteQPN: r.Uint32() & 0xFFFFFF}
	fill(r, dreq.PrivateData[:])
	drep := &DisconnectReply{LocalCommID: r.Uint32(), RemoteCommID: r.Uint32()}
	fill(r, drep.PrivateData[:])
	return []Message{req, rep, rtu, rej, dreq, drep}
}

func TestRoundTrip(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 1))
	for range 200 {
		for _, m := range randomMessages(r) {
			h := Header(r.Uint64(), 0)
			h.AttrModifier = r.Uint32()
			mad, err := AppendMAD(nil, h, m)
			if err != nil {
				t.Fatal(err)
			}
			if len(mad) != MADLen {
				t.Fatalf("%v: MAD of %d bytes", m.AttrID(), len(mad))
			}
			gh, gm, err := DecodeMAD(mad)
			if err != nil {
				t.Fatalf("%v: %v", m.AttrID(), err)
			}
			h.AttrID = m.AttrID()
			if gh != h || !reflect.DeepEqual(gm, m) {
				t.Fatalf("%v round trip:\n got %+v %+v\nwant %+v %+v", m.AttrID(), gh, gm, h, m)
			}
			if again := gm.AppendTo(nil); !bytes.Equal(again, mad[MADHeaderLen:]) {
				t.Fatalf("%v: re-encoded body differs", m.AttrID())
			}
		}
	}
}

// TestLayout pins fields to the byte offsets of IBTA vol. 1 tables 106-113
// (offsets after the MAD header), independently of the decoder.
func TestLayout(t *testing.T) {
	req := &ConnectRequest{LocalCommID: 0x11223344, VendorID: 0x0015B3, ServiceID: ServiceID(4791), LocalQPN: 0xABCDEF,
		ResponderResources: 0x10, StartingPSN: 0x123456, LocalCMResponseTimeout: 20, RetryCount: 7, PKey: 0xFFFF,
		PathMTU: MTU1024, RNRRetryCount: 7, MaxCMRetries: 15, TransportType: 0, RemoteCMResponseTimeout: 20}
	req.Primary = Path{RemoteLID: 0xFFFF, HopLimit: 64, LocalGID: GID(netip.MustParseAddr("10.0.0.1")),
		FlowLabel: 0xABCDE, PacketRate: 0x3F, SL: 5, LocalACKTimeout: 18}
	mad, err := AppendMAD(nil, Header(0x0102030405060708, 0), req)
	if err != nil {
		t.Fatal(err)
	}
	if w := binary.BigEndian.Uint32(mad); w != 0x01070203 {
		t.Errorf("MAD word 0 = %#x, want 0x01070203", w)
	}
	if a := binary.BigEndian.Uint16(mad[16:]); a != 0x0010 {
		t.Errorf("attribute %#x", a)
	}
	b := mad[MADHeaderLen:]
	expect := func(off int, want ...byte) {
		t.Helper()
		if !bytes.Equal(b[off:off+len(want)], want) {
			t.Errorf("REQ byte %d: % x, want % x", off, b[off:off+len(want)], want)
		}
	}
	expect(0, 0x11, 0x22, 0x33, 0x44)
	expect(5, 0x00, 0x15, 0xB3)
	expect(8, 0, 0, 0, 0, 0x01, 0x06, 0x12, 0xB7)
	expect(32, 0xAB, 0xCD, 0xEF, 0x10)
	expect(43, 20<<3)
	expect(44, 0x12, 0x34, 0x56, 20<<3|7)
	expect(48, 0xFF, 0xFF, 0x37, 0xF0)
	expect(54, 0xFF, 0xFF)
	expect(56, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xFF, 0xFF, 10, 0, 0, 1)
	expect(88, 0xAB, 0xCD, 0xE0, 0x3F, 0, 64, 0x50, 18<<3)

	rep := &ConnectReply{LocalQPN: 0x010203, VendorID: 0xAABBCC, StartingPSN: 0x040506, TargetACKDelay: 31,
		FailoverAccepted: 1, EndToEndFlowControl: true, RNRRetryCount: 7, SRQ: true}
	b = rep.AppendTo(nil)
	expect(12, 0x01, 0x02, 0x03, 0xAA)
	expect(19, 0xBB, 0x04, 0x05, 0x06, 0xCC)
	expect(26, 0xFB, 0xF0)

	rej := &Reject{MessageRejected: 1, InfoLength: 72, Reason: RejectInvalidServiceID}
	b = rej.AppendTo(nil)
	expect(8, 0x40, 72<<1, 0, 8)
	dreq := &DisconnectRequest{RemoteQPN: 0xABCDEF}
	b = dreq.AppendTo(nil)
	expect(8, 0xAB, 0xCD, 0xEF, 0)
}

func TestBadMADs(t *testing.T) {
	good, err := AppendMAD(nil, Header(1, 0), &ReadyToUse{})
	if err != nil {
		t.Fatal(err)
	}
	mod := func(i int, v byte) []byte { b := bytes.Clone(good); b[i] = v; return b }
	cases := []struct {
		name string
		mad  []byte
		want error
	}{
		{"empty", nil, ErrTruncated},
		{"short", good[:255], ErrTruncated},
		{"long", append(bytes.Clone(good), 0), ErrLength},
		{"base version", mod(0, 2), ErrClass},
		{"subnet management class", mod(1, 0x01), ErrClass},
		{"class version 1", mod(2, 1), ErrClass},
		{"response method", mod(3, 0x83), ErrClass},
		{"MRA attribute", mod(17, 0x11), ErrAttribute},
		{"unknown attribute", mod(17, 0x99), ErrAttribute},
	}
	// A REJ whose reject info length (body byte 9, 7 bits) is above the 72
	// bytes of ARI: found by FuzzDecodeMAD, which checks that what decodes
	// validates.
	rej, err := AppendMAD(nil, Header(1, 0), &Reject{InfoLength: 72})
	if err != nil {
		t.Fatal(err)
	}
	rej[MADHeaderLen+9] = 73 << 1
	cases = append(cases, struct {
		name string
		mad  []byte
		want error
	}{"REJ info length 73", rej, ErrField})
	for _, c := range cases {
		if _, _, err := DecodeMAD(c.mad); !errors.Is(err, c.want) {
			t.Errorf("%s: err %v, want %v", c.name, err, c.want)
		}
	}
	for _, m := range []Message{
		&ConnectRequest{LocalQPN: 1 << 24}, &ConnectRequest{PathMTU: 16}, &ConnectRequest{Primary: Path{FlowLabel: 1 << 20}},
		&ConnectReply{StartingPSN: 1 << 24}, &Reject{InfoLength: 73}, &DisconnectRequest{RemoteQPN: 1 << 24},
	} {
		if b, err := AppendMAD([]byte{9}, Header(1, 0), m); !errors.Is(err, ErrField) || len(b) != 1 {
			t.Errorf("%T: err %v", m, err)
		}
	}
}

func TestIPHeader(t *testing.T) {
	for _, c := range []IPHeader{
		{SrcPort: 0xC001, Src: netip.MustParseAddr("10.0.0.1"), Dst: netip.MustParseAddr("192.168.1.2")},
		{SrcPort: 1, Src: netip.MustParseAddr("fe80::1"), Dst: netip.MustParseAddr("2001:db8::2")},
	} {
		b := c.AppendTo(nil)
		if len(b) != IPHeaderLen || b[0] != 0 {
			t.Fatalf("%v: % x", c, b)
		}
		if c.Src.Is4() {
			want := append(make([]byte, 12), 10, 0, 0, 1)
			if b[1] != 0x40 || !bytes.Equal(b[4:20], want) {
				t.Errorf("IPv4 header % x", b)
			}
		} else if b[1] != 0x60 {
			t.Errorf("IPv6 version byte %#x", b[1])
		}
		g, err := DecodeIPHeader(b)
		if err != nil || g != c {
			t.Errorf("round trip %v: %v, %v", c, g, err)
		}
	}
	if _, err := DecodeIPHeader([]byte{1, 0x40}); !errors.Is(err, ErrTruncated) {
		t.Errorf("short: %v", err)
	}
	bad := IPHeader{Src: netip.MustParseAddr("10.0.0.1"), Dst: netip.MustParseAddr("::1")}
	if err := bad.Validate(); !errors.Is(err, ErrField) {
		t.Errorf("mixed: %v", err)
	}
	b := IPHeader{Src: netip.MustParseAddr("10.0.0.1"), Dst: netip.MustParseAddr("10.0.0.2")}.AppendTo(nil)
	b[0] = 1
	if _, err := DecodeIPHeader(b); !errors.Is(err, ErrField) {
		t.Errorf("CMA version 1: %v", err)
	}
	b[0], b[1] = 0, 0x50
	if _, err := DecodeIPHeader(b); !errors.Is(err, ErrField) {
		t.Errorf("IP version 5: %v", err)
	}
	var req ConnectRequest
	if err := req.SetIPPrivateData(IPHeader{Src: netip.MustParseAddr("10.0.0.1"), Dst: netip.MustParseAddr("10.0.0.2")}, make([]byte, 57)); !errors.Is(err, ErrLength) {
		t.Errorf("57 bytes of user data: %v", err)
	}
	if err := req.SetIPPrivateData(IPHeader{SrcPort: 7, Src: netip.MustParseAddr("10.0.0.1"), Dst: netip.MustParseAddr("10.0.0.2")}, []byte("hi")); err != nil {
		t.Fatal(err)
	}
	if h, err := DecodeIPHeader(req.PrivateData[:]); err != nil || h.SrcPort != 7 || string(req.PrivateData[36:38]) != "hi" {
		t.Errorf("private data % x", req.PrivateData)
	}
}

// connectFrame returns a REQ from 10.0.0.1 to a librdmacm listener on
// 10.0.0.2 port 4791+1, as a whole RoCEv2 frame.
func connectFrame(t testing.TB, req *ConnectRequest) []byte {
	mad, err := AppendMAD(nil, Header(0xDEADBEEF00000001, 0), req)
	if err != nil {
		t.Fatal(err)
	}
	f := rocev2.Frame{
		Src: netip.MustParseAddr("10.0.0.1"), Dst: netip.MustParseAddr("10.0.0.2"),
		TTL: 64, DontFragment: true, SrcPort: 0xC000,
		Packet: Packet(mad, 7),
	}
	b, err := f.AppendTo(nil)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func sampleREQ(t testing.TB) *ConnectRequest {
	src, dst := netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("10.0.0.2")
	req := &ConnectRequest{
		LocalCommID: 0x1234, ServiceID: ServiceID(4792), LocalCAGUID: 0x0202C9FFFE000001, LocalQPN: 0x000111,
		ResponderResources: 16, InitiatorDepth: 16, RemoteCMResponseTimeout: 20, StartingPSN: 0x00ABCD,
		LocalCMResponseTimeout: 20, RetryCount: 7, PKey: 0xFFFF, PathMTU: MTU1024, RNRRetryCount: 7, MaxCMRetries: 15,
		Primary: Path{LocalLID: 0, RemoteLID: 0xFFFF, LocalGID: GID(src), RemoteGID: GID(dst), HopLimit: 64,
			TrafficClass: 0, LocalACKTimeout: 18},
	}
	if err := req.SetIPPrivateData(IPHeader{SrcPort: 0xC000, Src: src, Dst: dst}, []byte{1, 2, 3, 4}); err != nil {
		t.Fatal(err)
	}
	return req
}

func TestGopacketMADLayer(t *testing.T) {
	req := sampleREQ(t)
	b := connectFrame(t, req)
	var f rocev2.Frame
	if err := f.Decode(b); err != nil {
		t.Fatal(err)
	}
	if f.BTH.Opcode != rocev2.UDSendOnly || f.BTH.DestQP != 1 || f.DETH != (rocev2.DETH{QKey: 0x80010000, SrcQP: 1}) {
		t.Errorf("QP1 headers %+v %+v", f.BTH, f.DETH)
	}
	pkt := gopacket.NewPacket(b, layers.LayerTypeEthernet, gopacket.Default)
	if el := pkt.ErrorLayer(); el != nil {
		t.Fatal(el.Error())
	}
	l, ok := pkt.Layer(LayerTypeMAD).(*MADLayer)
	if !ok {
		t.Fatalf("no MAD layer in %v", pkt)
	}
	if l.Header.AttrID != AttrREQ || l.Header.TransactionID != 0xDEADBEEF00000001 || !reflect.DeepEqual(l.Message, req) {
		t.Errorf("MAD layer %+v", l)
	}
}

// TestSerializeMADLayer: gopacket.SerializeLayers builds the frame
// connectFrame builds with Frame.AppendTo, the MAD layer as its payload; a
// layer without a message is an error.
func TestSerializeMADLayer(t *testing.T) {
	req := sampleREQ(t)
	want := connectFrame(t, req)
	p := Packet(nil, 7)
	eth := &layers.Ethernet{SrcMAC: make(net.HardwareAddr, 6), DstMAC: make(net.HardwareAddr, 6), EthernetType: layers.EthernetTypeIPv4}
	ip := &layers.IPv4{Version: 4, TTL: 64, Flags: layers.IPv4DontFragment, Protocol: layers.IPProtocolUDP,
		SrcIP: net.IP{10, 0, 0, 1}, DstIP: net.IP{10, 0, 0, 2}}
	udp := &layers.UDP{SrcPort: 0xC000, DstPort: rocev2.UDPPort}
	bth := &rocev2.BTHLayer{BTH: p.BTH}
	if err := udp.SetNetworkLayerForChecksum(ip); err != nil {
		t.Fatal(err)
	}
	if err := bth.SetLayersForICRC(ip, udp); err != nil {
		t.Fatal(err)
	}
	mad := &MADLayer{Header: Header(0xDEADBEEF00000001, 0), Message: req}
	buf := gopacket.NewSerializeBuffer()
	opts := gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true}
	if err := gopacket.SerializeLayers(buf, opts, eth, ip, udp, bth, &rocev2.DETHLayer{DETH: p.DETH}, mad); err != nil {
		t.Fatal(err)
	}
	got := buf.Bytes()
	copy(got[40:42], want[40:42]) // the UDP checksum gopacket computed, masked by the ICRC
	if !bytes.Equal(got, want) {
		t.Errorf("SerializeLayers\n got %x\nwant %x", got, want)
	}
	if err := (&MADLayer{}).SerializeTo(gopacket.NewSerializeBuffer(), opts); !errors.Is(err, ErrAttribute) {
		t.Errorf("no message: %v", err)
	}
}

func TestStrings(t *testing.T) {
	req := sampleREQ(t)
	want := "REQ comm 0x1234 service 0x10612b8 QPN 0x111 PSN 0xabcd P_Key 0xffff MTU code 3 resp res 16 init depth 16 retry 7 RNR retry 7 GIDs 10.0.0.1 -> 10.0.0.2 IP CM 10.0.0.1:49152 -> 10.0.0.2"
	if s := req.String(); s != want {
		t.Errorf("REQ string\n got %q\nwant %q", s, want)
	}
	b := connectFrame(t, req)
	pkt := gopacket.NewPacket(b, layers.LayerTypeEthernet, gopacket.Default)
	if s := gopacket.LayerString(pkt.Layer(LayerTypeMAD)); !bytes.Contains([]byte(s), []byte(want)) || !bytes.Contains([]byte(s), []byte("AttrID=ConnectRequest")) {
		t.Errorf("MAD layer string %q", s)
	}
	for _, m := range []Message{&ConnectReply{LocalCommID: 5}, &ReadyToUse{LocalCommID: 5}, &Reject{LocalCommID: 5},
		&DisconnectRequest{LocalCommID: 5}, &DisconnectReply{LocalCommID: 5}} {
		if s := m.String(); !bytes.Contains([]byte(s), []byte("comm 0x5")) {
			t.Errorf("%T: %q", m, s)
		}
	}
}
