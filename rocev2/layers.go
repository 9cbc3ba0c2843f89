package rocev2

import (
	"errors"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
)

// gopacket layer types of this package: 1420-1439 (dta uses 1400-1419,
// rocev2/cm 1440-1459). LayerTypeBTH is bound to UDP port 4791.
var (
	LayerTypeBTH          = gopacket.RegisterLayerType(1420, gopacket.LayerTypeMetadata{Name: "BTH", Decoder: gopacket.DecodeFunc(decodeRoCEv2)})
	LayerTypeRETH         = gopacket.RegisterLayerType(1421, gopacket.LayerTypeMetadata{Name: "RETH", Decoder: gopacket.DecodeFunc(decodeAlone)})
	LayerTypeAtomicETH    = gopacket.RegisterLayerType(1422, gopacket.LayerTypeMetadata{Name: "AtomicETH", Decoder: gopacket.DecodeFunc(decodeAlone)})
	LayerTypeAETH         = gopacket.RegisterLayerType(1423, gopacket.LayerTypeMetadata{Name: "AETH", Decoder: gopacket.DecodeFunc(decodeAlone)})
	LayerTypeAtomicAckETH = gopacket.RegisterLayerType(1424, gopacket.LayerTypeMetadata{Name: "AtomicAckETH", Decoder: gopacket.DecodeFunc(decodeAlone)})
	LayerTypeImmDt        = gopacket.RegisterLayerType(1425, gopacket.LayerTypeMetadata{Name: "ImmDt", Decoder: gopacket.DecodeFunc(decodeAlone)})
	LayerTypeDETH         = gopacket.RegisterLayerType(1426, gopacket.LayerTypeMetadata{Name: "DETH", Decoder: gopacket.DecodeFunc(decodeAlone)})
	LayerTypeIETH         = gopacket.RegisterLayerType(1427, gopacket.LayerTypeMetadata{Name: "IETH", Decoder: gopacket.DecodeFunc(decodeAlone)})
)

func init() {
	layers.RegisterUDPPortLayerType(UDPPort, LayerTypeBTH)
}

// QP1LayerType is the layer type gopacket decodes the payload of a UD SEND
// Only to QP 1 (the general services interface) with: the MAD layer of
// package rocev2/cm, whose init sets it. It is LayerTypePayload otherwise.
var QP1LayerType = gopacket.LayerTypePayload

// errExtAlone: an extension header layer cannot be decoded without the BTH
// that names it.
var errExtAlone = errors.New("rocev2: an extension header is decoded with its BTH (LayerTypeBTH)")

func decodeAlone([]byte, gopacket.PacketBuilder) error { return errExtAlone }

// The layers gopacket.NewPacket adds for a RoCEv2 UDP payload: one per header,
// in wire order, then the payload. Each embeds the header's value type.
type (
	// BTHLayer is the BTH; it also holds the packet's ICRC, which trails the
	// payload and pad and, like them, belongs to no layer's contents. gopacket.NewPacket does not
	// verify it (it needs the IP header; see VerifyICRC and Frame.Decode).
	BTHLayer struct {
		layers.BaseLayer
		BTH
		ICRC uint32
	}
	RETHLayer struct {
		layers.BaseLayer
		RETH
	}
	AtomicETHLayer struct {
		layers.BaseLayer
		AtomicETH
	}
	AETHLayer struct {
		layers.BaseLayer
		AETH
	}
	AtomicAckETHLayer struct {
		layers.BaseLayer
		AtomicAckETH
	}
	ImmDtLayer struct {
		layers.BaseLayer
		ImmDt
	}
	DETHLayer struct {
		layers.BaseLayer
		DETH
	}
	IETHLayer struct {
		layers.BaseLayer
		IETH
	}
)

func (*BTHLayer) LayerType() gopacket.LayerType          { return LayerTypeBTH }
func (*RETHLayer) LayerType() gopacket.LayerType         { return LayerTypeRETH }
func (*AtomicETHLayer) LayerType() gopacket.LayerType    { return LayerTypeAtomicETH }
func (*AETHLayer) LayerType() gopacket.LayerType         { return LayerTypeAETH }
func (*AtomicAckETHLayer) LayerType() gopacket.LayerType { return LayerTypeAtomicAckETH }
func (*ImmDtLayer) LayerType() gopacket.LayerType        { return LayerTypeImmDt }
func (*DETHLayer) LayerType() gopacket.LayerType         { return LayerTypeDETH }
func (*IETHLayer) LayerType() gopacket.LayerType         { return LayerTypeIETH }

// decodeRoCEv2 decodes a RoCEv2 UDP payload for gopacket.NewPacket: a layer
// per header, then the payload (a MAD on QP 1, see QP1LayerType).
func decodeRoCEv2(data []byte, pb gopacket.PacketBuilder) error {
	var p Packet
	if err := p.Decode(data); err != nil {
		if errors.Is(err, ErrTruncated) {
			pb.SetTruncated()
		}
		return err
	}
	// Layer payloads stop before the pad bytes and the ICRC, which belong to
	// no layer: the last layer's payload is the message payload.
	end := len(data) - ICRCLen - int(p.BTH.PadCount)
	base := func(o, n int) layers.BaseLayer {
		return layers.BaseLayer{Contents: data[o : o+n], Payload: data[o+n : end]}
	}
	pb.AddLayer(&BTHLayer{BaseLayer: base(0, BTHLen), BTH: p.BTH, ICRC: p.ICRC})
	o := BTHLen
	h := p.BTH.Opcode.Headers()
	if h&HasDETH != 0 {
		pb.AddLayer(&DETHLayer{BaseLayer: base(o, DETHLen), DETH: p.DETH})
		o += DETHLen
	}
	if h&HasRETH != 0 {
		pb.AddLayer(&RETHLayer{BaseLayer: base(o, RETHLen), RETH: p.RETH})
		o += RETHLen
	}
	if h&HasAtomicETH != 0 {
		pb.AddLayer(&AtomicETHLayer{BaseLayer: base(o, AtomicETHLen), AtomicETH: p.AtomicETH})
		o += AtomicETHLen
	}
	if h&HasAETH != 0 {
		pb.AddLayer(&AETHLayer{BaseLayer: base(o, AETHLen), AETH: p.AETH})
		o += AETHLen
	}
	if h&HasAtomicAckETH != 0 {
		pb.AddLayer(&AtomicAckETHLayer{BaseLayer: base(o, AtomicAckETHLen), AtomicAckETH: p.AtomicAckETH})
		o += AtomicAckETHLen
	}
	if h&HasImmDt != 0 {
		pb.AddLayer(&ImmDtLayer{BaseLayer: base(o, ImmDtLen), ImmDt: p.ImmDt})
		o += ImmDtLen
	}
	if h&HasIETH != 0 {
		pb.AddLayer(&IETHLayer{BaseLayer: base(o, IETHLen), IETH: p.IETH})
	}
	if len(p.Payload) == 0 {
		return nil
	}
	return pb.NextDecoder(nextLayerType(&p))
}

func nextLayerType(p *Packet) gopacket.LayerType {
	switch {
	case len(p.Payload) == 0:
		return gopacket.LayerTypeZero
	case p.BTH.Opcode == UDSendOnly && p.BTH.DestQP == 1:
		return QP1LayerType
	}
	return gopacket.LayerTypePayload
}

// PacketLayer decodes a whole RoCEv2 UDP payload as one gopacket
// DecodingLayer, for zero-allocation parsing with
// gopacket.DecodingLayerParser: add a *PacketLayer beside the Ethernet, IPv4,
// IPv6 and UDP layers; it decodes LayerTypeBTH into its Packet and hands the
// payload on (as LayerTypePayload, or QP1LayerType for a MAD on QP 1). It does
// not verify the ICRC: VerifyICRC does, given the IP packet.
type PacketLayer struct {
	Packet
}

// DecodeFromBytes decodes data as [Packet.Decode] does.
func (l *PacketLayer) DecodeFromBytes(data []byte, df gopacket.DecodeFeedback) error {
	err := l.Packet.Decode(data)
	if err != nil && errors.Is(err, ErrTruncated) {
		df.SetTruncated()
	}
	return err
}

// CanDecode returns LayerTypeBTH.
func (*PacketLayer) CanDecode() gopacket.LayerClass { return LayerTypeBTH }

// NextLayerType returns the payload's layer type, or LayerTypeZero when there
// is no payload.
func (l *PacketLayer) NextLayerType() gopacket.LayerType { return nextLayerType(&l.Packet) }

// LayerPayload returns the payload without pad bytes.
func (l *PacketLayer) LayerPayload() []byte { return l.Payload }
