package rocev2

import (
	"encoding/binary"
	"errors"
	"fmt"

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

		// The IP and UDP layers SerializeTo computes the ICRC with
		// (SetLayersForICRC), and its scratch buffer.
		ip      gopacket.SerializableLayer
		udp     *layers.UDP
		scratch gopacket.SerializeBuffer
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

// Serializing: gopacket.SerializeLayers calls SerializeTo from the last layer
// to the first, each prepending its header to what the layers after it wrote.
// The extension headers and the payload are in the buffer when the BTH's turn
// comes, so the BTH appends the pad and the ICRC; the IP and UDP headers the
// ICRC also covers come after it, so it serializes them ahead of time in a
// scratch buffer (SetLayersForICRC names them).

// SetLayersForICRC names the IP layer (*layers.IPv4 or *layers.IPv6) and the
// UDP layer that carry l, which SerializeTo needs to compute the ICRC when
// asked to compute checksums, as layers.UDP needs its network layer.
func (l *BTHLayer) SetLayersForICRC(ip gopacket.SerializableLayer, udp *layers.UDP) error {
	switch ip.(type) {
	case *layers.IPv4, *layers.IPv6:
	default:
		return errICRCLayerType
	}
	if udp == nil {
		return errICRCLayers
	}
	l.ip, l.udp = ip, udp
	return nil
}

// SerializeTo prepends the BTH to b, which holds the extension header layers
// its opcode carries (in their order, as gopacket.SerializeLayers records
// them) and the payload, and appends the pad bytes (zeros) and the ICRC. With
// opts.FixLengths it sets the pad count from the payload length, else sends
// PadCount as given; with opts.ComputeChecksums it computes the ICRC over the
// IP and UDP layers named by SetLayersForICRC, else sends ICRC as given. It
// stores the pad count and ICRC it sent in l. It rejects what
// [Packet.Validate] rejects and extension header layers that are not those
// of the opcode.
func (l *BTHLayer) SerializeTo(b gopacket.SerializeBuffer, opts gopacket.SerializeOptions) error {
	h := &l.BTH
	if h.Version != 0 {
		return errTVer
	}
	if err := h.Validate(); err != nil {
		return err
	}
	if ext, ok := extHeaders(b.Layers()); !ok || ext != h.Opcode.Headers() {
		return fmt.Errorf("serialize bth: %w: the layers after the BTH are not the extension headers of %v, in order", ErrHeader, h.Opcode)
	}
	n := len(b.Bytes()) - int(opcodeTable[h.Opcode].extLen) // payload length
	if n > 0 && !h.Opcode.HasPayload() {
		return errEncodePayload
	}
	if opts.FixLengths {
		h.PadCount = uint8(-n & 3)
	}
	tail, err := b.AppendBytes(int(h.PadCount) + ICRCLen)
	if err != nil {
		return err
	}
	clear(tail)
	w, err := b.PrependBytes(BTHLen)
	if err != nil {
		return err
	}
	h.appendTo(w[:0])
	p := b.Bytes() // PrependBytes may have moved tail
	if opts.ComputeChecksums {
		if l.ICRC, err = l.computeICRC(p, opts); err != nil {
			return err
		}
	}
	binary.LittleEndian.PutUint32(p[len(p)-ICRCLen:], l.ICRC)
	return nil
}

// computeICRC returns the ICRC of the UDP payload p (BTH through ICRC) sent
// in the layers SetLayersForICRC named: it serializes them around a copy of
// p as gopacket.SerializeLayers will (the checksums they would compute are
// fields the ICRC masks) and hands the IP packet to [ICRC].
func (l *BTHLayer) computeICRC(p []byte, opts gopacket.SerializeOptions) (uint32, error) {
	if l.ip == nil {
		return 0, errICRCLayers
	}
	if l.scratch == nil {
		l.scratch = gopacket.NewSerializeBuffer()
	}
	s := l.scratch
	if err := s.Clear(); err != nil {
		return 0, err
	}
	w, err := s.PrependBytes(len(p))
	if err != nil {
		return 0, err
	}
	copy(w, p)
	opts.ComputeChecksums = false
	if err := l.udp.SerializeTo(s, opts); err != nil {
		return 0, fmt.Errorf("serialize bth: icrc: udp: %w", err)
	}
	if err := l.ip.SerializeTo(s, opts); err != nil {
		return 0, fmt.Errorf("serialize bth: icrc: ip: %w", err)
	}
	ip := s.Bytes()
	if len(ip) > 0xFFFF {
		return 0, errTooLong
	}
	return ICRC(ip[:len(ip)-ICRCLen])
}

// extHeaders returns the extension headers whose layers were serialized
// just before the BTH's turn (the last of pushed, which gopacket records in
// serialization order), and false when they are out of order or repeated.
func extHeaders(pushed []gopacket.LayerType) (Headers, bool) {
	var h, last Headers
	for i := len(pushed) - 1; i >= 0; i-- {
		bit := layerHeader(pushed[i])
		if bit == 0 {
			break
		}
		if bit <= last { // in a packet they come in the order of their bits
			return h, false
		}
		h, last = h|bit, bit
	}
	return h, true
}

// layerHeader returns the extension header of layer type t, 0 for another
// layer.
func layerHeader(t gopacket.LayerType) Headers {
	switch t {
	case LayerTypeDETH:
		return HasDETH
	case LayerTypeRETH:
		return HasRETH
	case LayerTypeAtomicETH:
		return HasAtomicETH
	case LayerTypeAETH:
		return HasAETH
	case LayerTypeAtomicAckETH:
		return HasAtomicAckETH
	case LayerTypeImmDt:
		return HasImmDt
	case LayerTypeIETH:
		return HasIETH
	}
	return 0
}

// prepend prepends n bytes to b and returns them emptied, for an extension
// header's AppendTo to fill.
func prepend(b gopacket.SerializeBuffer, n int) ([]byte, error) {
	w, err := b.PrependBytes(n)
	return w[:0], err
}

// SerializeTo prepends the 8-byte DETH to b. It rejects a source QP wider
// than 24 bits.
func (l *DETHLayer) SerializeTo(b gopacket.SerializeBuffer, _ gopacket.SerializeOptions) error {
	if l.SrcQP > PSNMask {
		return errDETHQP
	}
	w, err := prepend(b, DETHLen)
	if err == nil {
		l.DETH.AppendTo(w)
	}
	return err
}

// SerializeTo prepends the 16-byte RETH to b.
func (l *RETHLayer) SerializeTo(b gopacket.SerializeBuffer, _ gopacket.SerializeOptions) error {
	w, err := prepend(b, RETHLen)
	if err == nil {
		l.RETH.AppendTo(w)
	}
	return err
}

// SerializeTo prepends the 28-byte AtomicETH to b.
func (l *AtomicETHLayer) SerializeTo(b gopacket.SerializeBuffer, _ gopacket.SerializeOptions) error {
	w, err := prepend(b, AtomicETHLen)
	if err == nil {
		l.AtomicETH.AppendTo(w)
	}
	return err
}

// SerializeTo prepends the 4-byte AETH to b. It rejects an MSN wider than 24
// bits.
func (l *AETHLayer) SerializeTo(b gopacket.SerializeBuffer, _ gopacket.SerializeOptions) error {
	if l.MSN > PSNMask {
		return errAETHMSN
	}
	w, err := prepend(b, AETHLen)
	if err == nil {
		l.AETH.AppendTo(w)
	}
	return err
}

// SerializeTo prepends the 8-byte AtomicAckETH to b.
func (l *AtomicAckETHLayer) SerializeTo(b gopacket.SerializeBuffer, _ gopacket.SerializeOptions) error {
	w, err := prepend(b, AtomicAckETHLen)
	if err == nil {
		l.AtomicAckETH.AppendTo(w)
	}
	return err
}

// SerializeTo prepends the 4-byte ImmDt to b.
func (l *ImmDtLayer) SerializeTo(b gopacket.SerializeBuffer, _ gopacket.SerializeOptions) error {
	w, err := prepend(b, ImmDtLen)
	if err == nil {
		l.ImmDt.AppendTo(w)
	}
	return err
}

// SerializeTo prepends the 4-byte IETH to b.
func (l *IETHLayer) SerializeTo(b gopacket.SerializeBuffer, _ gopacket.SerializeOptions) error {
	w, err := prepend(b, IETHLen)
	if err == nil {
		l.IETH.AppendTo(w)
	}
	return err
}
