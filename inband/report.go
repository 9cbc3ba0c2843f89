package inband

import (
	"encoding/binary"
	"fmt"
	"math/bits"
	"slices"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
)

// Individual report types (RepType) and inner types (InType).
const (
	RepInnerOnly = 0
	RepINT       = 1
	RepIOAM      = 2

	InNone     = 0
	InTLV      = 1
	InDSExt    = 2
	InEthernet = 3
	InIPv4     = 4
	InIPv6     = 5
)

// Telemetry Report versions: the first nibble of every version's header.
const (
	Version05 = 0 // Telemetry Report 0.5: 12-byte fixed header, one report
	Version1  = 1 // 1.0: 16-byte header and RepMdBits metadata, one report
	Version2  = 2 // 2.0: group header and individual reports
)

// Next Protocol values of the 0.5 and 1.0 headers (Individual.NProto).
const (
	NProtoEthernet = 0 // both: an Ethernet frame follows
	NProtoDrop     = 1 // 0.5: a Telemetry Drop Report header, then Ethernet
	NProtoLocal    = 2 // 0.5: a Switch Local Report header, then Ethernet
	NProtoIPv4     = 1 // 1.0: an IPv4 packet follows
	NProtoIPv6     = 2 // 1.0: an IPv6 packet follows
)

// Telemetry Report sizes.
const (
	FixedHeaderLen05    = 12 // 0.5 fixed header
	DropHeaderLen05     = 12 // 0.5 drop report header
	LocalHeaderLen05    = 16 // 0.5 switch local report header
	FixedHeaderLen1     = 16 // 1.0 header before its optional metadata
	GroupHeaderLen      = 8
	IndividualHeaderLen = 4
	INTMainLen          = 8   // RepMdBits, Domain Specific ID, DSMdBits, DSMdStatus
	LengthToEnd         = 255 // Report Length: the report runs to the end of the packet
)

var (
	errGroupShort    = newError("report group", ErrTruncated, "need 8 bytes")
	errGroupVersion  = newError("report group", ErrVersion, "want 0 (0.5), 1 (1.0) or 2")
	errFixedShort    = newError("report header", ErrTruncated, "need the 12-byte (0.5) or 16-byte (1.0) header and its metadata")
	errFixedLength   = newError("report header", ErrLength, "Length differs from the 4 words and RepMdBits' metadata")
	errFixedNProto   = newError("report header", ErrType, "Next Protocol: want 0, 1 or 2")
	errFixedMany     = newError("report header", ErrLength, "a 0.5 or 1.0 report (Format) holds exactly one report")
	errIndivShort    = newError("individual report", ErrTruncated, "need 4 bytes")
	errIndivLength   = newError("individual report", ErrLength, "Report Length runs past the packet")
	errIndivMain     = newError("individual report", ErrLength, "an INT report shorter than its 8-byte main contents and MD Length")
	errIndivMDLength = newError("individual report", ErrLength, "MD Length differs from what RepMdBits request and leaves no room for DSMdBits")
	errIndivMany     = newError("individual report", ErrLength, "more individual reports than MaxIndividual")
)

// MaxIndividual bounds the individual reports one packet may hold when
// decoded (a 9000-byte jumbo of 4-byte reports is 2248).
const MaxIndividual = 4096

// Individual is one individual report. Its byte slices alias the packet.
type Individual struct {
	RepType, InType uint8
	// Length is the Report Length field: words after the first, or
	// LengthToEnd.
	Length                                    uint8
	MDLength                                  uint8 // words of metadata
	Dropped, Congested, Tracked, Intermediate bool  // D, Q, F, I

	// INT main contents (RepType 1).
	RepMdBits  uint16
	DomainID   uint16
	DSMdBits   uint16
	DSMdStatus uint16
	// MD is the metadata: baseline by RepMdBits, then domain-specific.
	MD []byte
	// Inner is the inner contents: a truncated packet (InType 3, 4, 5),
	// domain-specific extension data or TLVs.
	Inner []byte

	// NProto is a 0.5 or 1.0 header's Next Protocol (NProtoEthernet, ...).
	// In those versions RepType is RepINT when the header carries
	// metadata (0.5: a drop or local report header; 1.0: always, the
	// switch ID and ingress timestamp), RepMdBits is 1.0's 6-bit bitmap,
	// and MD the drop or local header (0.5) or the optional metadata (1.0).
	// Decoding sets InType from NProto; encoding writes NProto.
	NProto uint8

	// Set by decoding a 0.5 or 1.0 report, for Metadata.
	format   uint8 // formatV2, formatV05, formatV1
	node, ts uint32
}

const (
	formatV2 = iota
	formatV05
	formatV1
)

// Metadata decodes the report's metadata into m (RepType INT only): in
// 2.0 the baseline metadata by RepMdBits (the domain-specific words are
// m.DomainSpecific; the node ID is the group header's, not in m); in 1.0
// the switch ID, the ingress timestamp (32 bits) and the metadata by
// RepMdBits; in 0.5 the ingress timestamp and the drop or local report
// header. It does not allocate.
func (r *Individual) Metadata(m *Metadata) error {
	if r.RepType != RepINT {
		return newError("metadata", ErrType, fmt.Sprintf("RepType %d carries no metadata", r.RepType))
	}
	switch r.format {
	case formatV1:
		decodeMetadata(m, &layoutReport1, r.RepMdBits<<10, r.MD)
		m.NodeID, m.IngressTimestamp = r.node, uint64(r.ts)
		m.Present |= 0x8000>>BitNodeID | 0x8000>>BitIngressTS
	case formatV05:
		*m = Metadata{IngressTimestamp: uint64(r.ts), Present: 0x8000 >> BitIngressTS}
		if len(r.MD) >= DropHeaderLen05 {
			b := r.MD
			m.NodeID, m.L1Ingress, m.L1Egress, m.QueueID = binary.BigEndian.Uint32(b), binary.BigEndian.Uint16(b[4:]), binary.BigEndian.Uint16(b[6:]), b[8]
			m.Present |= 0x8000>>BitNodeID | 0x8000>>BitL1Ports
			if r.NProto == NProtoDrop {
				m.DropQueueID, m.DropReason = b[8], b[9]
				m.Present |= 0x8000 >> BitDropReason
			} else if len(b) >= LocalHeaderLen05 {
				m.QueueOccupancy = binary.BigEndian.Uint32(b[8:]) & 0xFFFFFF
				m.EgressTimestamp = uint64(binary.BigEndian.Uint32(b[12:]))
				m.Present |= 0x8000>>BitQueue | 0x8000>>BitEgressTS
			}
		}
	default:
		decodeMetadata(m, &layoutReport2, r.RepMdBits, r.MD)
	}
	return nil
}

// Report is a Telemetry Report, after a UDP header on the deployment's
// report port: version 2.0 (the group header and its individual reports),
// 1.0 or 0.5 (one fixed header and one report, held as Individuals[0]).
// Decoding reuses Individuals' storage, so a Report decoded again and again
// allocates nothing once it has seen its largest packet.
type Report struct {
	layers.BaseLayer
	Version    uint8  // Version05, Version1 or Version2
	HardwareID uint8  // 6 bits
	Sequence   uint32 // 22 bits in 2.0, 32 in 0.5 and 1.0
	// NodeID is the node (switch) ID: the group header's (2.0), the
	// header's (1.0), the drop or local report header's (0.5; 0 without).
	NodeID uint32
	// IngressTimestamp is the 0.5 and 1.0 header's (nanoseconds, 32 bits).
	IngressTimestamp uint32
	// Format is the layout: decoding sets it from the header, encoding
	// writes it (the zero value is 2.0). Version is the number in the
	// header; encoding writes 2 for 2.0, 1 for 1.0, and for 0.5 Version
	// itself (0, or 1 for INTCollector's variant, the 0.5 layout under
	// version number 1, which decoding recognises by a Length nibble below
	// 4: a 1.0 header is 4 words at least).
	Format      Format
	Individuals []Individual
}

// Format is a Telemetry Report layout.
type Format uint8

// Telemetry Report layouts.
const (
	FormatV2  Format = iota // 2.0: group header, individual reports
	FormatV1                // 1.0: 16-byte header, RepMdBits metadata
	FormatV05               // 0.5: 12-byte header, drop or local report header
)

// LayerTypeReport is the Telemetry Report layer's type.
var LayerTypeReport = gopacket.RegisterLayerType(1461, gopacket.LayerTypeMetadata{Name: "TelemetryReport", Decoder: gopacket.DecodeFunc(decodeReport)})

// LayerType returns LayerTypeReport.
func (r *Report) LayerType() gopacket.LayerType { return LayerTypeReport }

// CanDecode returns LayerTypeReport.
func (r *Report) CanDecode() gopacket.LayerClass { return LayerTypeReport }

// NextLayerType is gopacket.LayerTypeZero: the inner packets are the
// individual reports' Inner bytes, decoded by the caller if wanted.
func (r *Report) NextLayerType() gopacket.LayerType { return gopacket.LayerTypeZero }

// DecodeFromBytes decodes the group header and every individual report.
func (r *Report) DecodeFromBytes(data []byte, df gopacket.DecodeFeedback) error {
	if len(data) < 1 {
		return errGroupShort
	}
	r.Version, r.IngressTimestamp, r.Format = data[0]>>4, 0, FormatV2
	switch {
	case r.Version == Version05 || r.Version == Version1 && data[0]&0xF < 4:
		r.Format = FormatV05
		return r.decodeFixed(data, true)
	case r.Version == Version1:
		r.Format = FormatV1
		return r.decodeFixed(data, false)
	case r.Version != Version2:
		return errGroupVersion
	}
	if len(data) < GroupHeaderLen {
		return errGroupShort
	}
	w := binary.BigEndian.Uint32(data)
	r.HardwareID = uint8(w >> 22 & 0x3F)
	r.Sequence = w & 0x3FFFFF
	r.NodeID = binary.BigEndian.Uint32(data[4:])
	r.Individuals = r.Individuals[:0]
	rest := data[GroupHeaderLen:]
	for len(rest) > 0 {
		if len(r.Individuals) == MaxIndividual {
			return errIndivMany
		}
		// decode writes the whole report: grow without zeroing it first.
		k := len(r.Individuals)
		if k == cap(r.Individuals) {
			r.Individuals = slices.Grow(r.Individuals, 1)
		}
		r.Individuals = r.Individuals[:k+1]
		n, err := r.Individuals[k].decode(rest)
		if err != nil {
			r.Individuals = r.Individuals[:len(r.Individuals)-1]
			return err
		}
		rest = rest[n:]
	}
	r.Contents, r.Payload = data, nil
	return nil
}

// decodeFixed decodes a 0.5 (v05) or 1.0 header and its one report.
func (r *Report) decodeFixed(data []byte, v05 bool) error {
	r.Individuals = r.Individuals[:0]
	hdr := FixedHeaderLen1
	if v05 {
		hdr = FixedHeaderLen05
	}
	if len(data) < hdr {
		return errFixedShort
	}
	w := binary.BigEndian.Uint32(data)
	r.HardwareID = uint8(w & 0x3F)
	ind := Individual{MDLength: 0}
	var md int
	if v05 {
		// Ver(4) NProto(4) D Q F Reserved(15) hw_id(6)
		ind.NProto = uint8(w >> 24 & 0xF)
		ind.Dropped, ind.Congested, ind.Tracked = w&(1<<23) != 0, w&(1<<22) != 0, w&(1<<21) != 0
		r.Sequence = binary.BigEndian.Uint32(data[4:])
		r.IngressTimestamp = binary.BigEndian.Uint32(data[8:])
		r.NodeID = 0
		ind.format, ind.InType, ind.RepType = formatV05, InEthernet, RepINT
		switch ind.NProto {
		case NProtoEthernet:
			ind.RepType = RepInnerOnly
		case NProtoDrop:
			md = DropHeaderLen05
		case NProtoLocal:
			md = LocalHeaderLen05
		default:
			return errFixedNProto
		}
		if len(data) < hdr+md {
			return errFixedShort
		}
		if md > 0 {
			r.NodeID = binary.BigEndian.Uint32(data[hdr:])
		}
	} else {
		// Ver(4) Length(4) NProt(3) RepMdBits(6) Reserved(6) D Q F hw_id(6)
		length := int(w >> 24 & 0xF)
		ind.NProto = uint8(w >> 21 & 7)
		ind.RepMdBits = uint16(w >> 15 & 0x3F)
		ind.Dropped, ind.Congested, ind.Tracked = w&(1<<8) != 0, w&(1<<7) != 0, w&(1<<6) != 0
		md = 4 * bits.OnesCount16(ind.RepMdBits)
		if length*4 != hdr+md {
			return errFixedLength
		}
		if len(data) < hdr+md {
			return errFixedShort
		}
		r.NodeID = binary.BigEndian.Uint32(data[4:])
		r.Sequence = binary.BigEndian.Uint32(data[8:])
		r.IngressTimestamp = binary.BigEndian.Uint32(data[12:])
		ind.format, ind.RepType = formatV1, RepINT
		switch ind.NProto {
		case NProtoEthernet:
			ind.InType = InEthernet
		case NProtoIPv4:
			ind.InType = InIPv4
		case NProtoIPv6:
			ind.InType = InIPv6
		default:
			return errFixedNProto
		}
	}
	ind.node, ind.ts = r.NodeID, r.IngressTimestamp
	ind.MDLength = uint8(md / 4)
	ind.MD = data[hdr : hdr+md]
	ind.Inner = data[hdr+md:]
	r.Individuals = append(r.Individuals, ind)
	r.Contents, r.Payload = data, nil
	return nil
}

// appendFixed appends a 0.5 or 1.0 header and its one report.
func (r *Report) appendFixed(b []byte) ([]byte, error) {
	if len(r.Individuals) != 1 {
		return b, errFixedMany
	}
	ind := &r.Individuals[0]
	flags := func(d, q, f uint32) uint32 {
		var w uint32
		if ind.Dropped {
			w |= d
		}
		if ind.Congested {
			w |= q
		}
		if ind.Tracked {
			w |= f
		}
		return w
	}
	if r.Format == FormatV05 {
		if r.Version > Version1 {
			return b, newError("report header", ErrVersion, fmt.Sprintf("version %d in the 0.5 layout: want 0 or 1", r.Version))
		}
		n := -1
		switch ind.NProto {
		case NProtoEthernet:
			n = 0
		case NProtoDrop:
			n = DropHeaderLen05
		case NProtoLocal:
			n = LocalHeaderLen05
		}
		if len(ind.MD) != n {
			return b, newError("report header", ErrLength, fmt.Sprintf("0.5 Next Protocol %d with %d bytes of metadata: want 0 with none, 1 with 12, 2 with 16", ind.NProto, len(ind.MD)))
		}
		b = binary.BigEndian.AppendUint32(b, uint32(r.Version)<<28|uint32(ind.NProto&0xF)<<24|flags(1<<23, 1<<22, 1<<21)|uint32(r.HardwareID&0x3F))
		b = binary.BigEndian.AppendUint32(b, r.Sequence)
		b = binary.BigEndian.AppendUint32(b, r.IngressTimestamp)
	} else {
		if ind.NProto > 2 || ind.RepMdBits > 0x3F || len(ind.MD) != 4*bits.OnesCount16(ind.RepMdBits) {
			return b, newError("report header", ErrLength, fmt.Sprintf("1.0 Next Protocol %d, RepMdBits %#x with %d bytes of metadata", ind.NProto, ind.RepMdBits, len(ind.MD)))
		}
		length := uint32(FixedHeaderLen1+len(ind.MD)) / 4
		b = binary.BigEndian.AppendUint32(b, uint32(Version1)<<28|length<<24|uint32(ind.NProto)<<21|uint32(ind.RepMdBits)<<15|flags(1<<8, 1<<7, 1<<6)|uint32(r.HardwareID&0x3F))
		b = binary.BigEndian.AppendUint32(b, r.NodeID)
		b = binary.BigEndian.AppendUint32(b, r.Sequence)
		b = binary.BigEndian.AppendUint32(b, r.IngressTimestamp)
	}
	b = append(b, ind.MD...)
	return append(b, ind.Inner...), nil
}

// SetLocalMetadata lays m out as a 0.5 or 1.0 report's metadata
// (Individuals[0].MD): 0.5 by NProto (a drop report header from m's node
// ID, ports, drop queue ID and reason; a local report header from its
// node ID, ports, queue and 32-bit egress timestamp), 1.0 by RepMdBits.
// The node ID and ingress timestamp of a 1.0 header are Report fields.
func (r *Report) SetLocalMetadata(m *Metadata) error {
	if len(r.Individuals) != 1 || r.Format == FormatV2 {
		return errFixedMany
	}
	ind := &r.Individuals[0]
	ind.RepType = RepINT
	if r.Format == FormatV05 {
		b := ind.MD[:0]
		switch ind.NProto {
		case NProtoDrop:
			b = binary.BigEndian.AppendUint32(b, m.NodeID)
			b = binary.BigEndian.AppendUint32(b, uint32(m.L1Ingress)<<16|uint32(m.L1Egress))
			b = binary.BigEndian.AppendUint32(b, uint32(m.DropQueueID)<<24|uint32(m.DropReason)<<16)
		case NProtoLocal:
			b = binary.BigEndian.AppendUint32(b, m.NodeID)
			b = binary.BigEndian.AppendUint32(b, uint32(m.L1Ingress)<<16|uint32(m.L1Egress))
			b = binary.BigEndian.AppendUint32(b, uint32(m.QueueID)<<24|m.QueueOccupancy&0xFFFFFF)
			b = binary.BigEndian.AppendUint32(b, uint32(m.EgressTimestamp))
		default:
			ind.RepType = RepInnerOnly
		}
		ind.MD = b
	} else {
		ind.MD = appendMetadata(ind.MD[:0], m, &layoutReport1, ind.RepMdBits<<10)
	}
	ind.MDLength = uint8(len(ind.MD) / 4)
	return nil
}

// decode decodes one individual report from b and returns its length.
func (r *Individual) decode(b []byte) (int, error) {
	if len(b) < IndividualHeaderLen {
		return 0, errIndivShort
	}
	// Zeroed and filled in place: a literal would be built aside and
	// copied.
	*r = Individual{}
	r.RepType, r.InType, r.Length, r.MDLength = b[0]>>4, b[0]&0xF, b[1], b[2]
	r.Dropped, r.Congested, r.Tracked, r.Intermediate = b[3]&0x80 != 0, b[3]&0x40 != 0, b[3]&0x20 != 0, b[3]&0x10 != 0
	end := len(b)
	if r.Length != LengthToEnd {
		end = IndividualHeaderLen + 4*int(r.Length)
		if end > len(b) {
			return 0, errIndivLength
		}
	}
	body := b[IndividualHeaderLen:end]
	if r.RepType == RepINT {
		md := 4 * int(r.MDLength)
		if len(body) < INTMainLen+md {
			return 0, errIndivMain
		}
		r.RepMdBits = binary.BigEndian.Uint16(body)
		r.DomainID = binary.BigEndian.Uint16(body[2:])
		r.DSMdBits = binary.BigEndian.Uint16(body[4:])
		r.DSMdStatus = binary.BigEndian.Uint16(body[6:])
		// RepMdBits' metadata must fit MD Length; the rest of it is the
		// domain-specific metadata, present only with DSMdBits.
		base := layoutReport2.words(r.RepMdBits)
		if base > int(r.MDLength) || (base < int(r.MDLength) && r.DSMdBits == 0) {
			return 0, errIndivMDLength
		}
		r.MD = body[INTMainLen : INTMainLen+md]
		r.Inner = body[INTMainLen+md:]
	} else {
		// Inner Only, IOAM (main contents not yet defined) and reserved
		// types: everything is inner contents.
		r.Inner = body
	}
	return end, nil
}

// appendTo appends the individual report (Length from the contents
// unless it is LengthToEnd; MDLength from MD).
func (r *Individual) appendTo(dst []byte, last bool) ([]byte, error) {
	n := len(r.Inner)
	if r.RepType == RepINT {
		n += INTMainLen + len(r.MD)
	}
	if n%4 != 0 || len(r.MD)%4 != 0 || len(r.MD) > 255*4 {
		return dst, newError("individual report", ErrLength, fmt.Sprintf("%d bytes of contents, %d of metadata: want multiples of 4", n, len(r.MD)))
	}
	length := r.Length
	if length != LengthToEnd || !last {
		if n/4 >= LengthToEnd {
			if !last {
				return dst, newError("individual report", ErrLength, "a report of 255 words or more must be the last")
			}
			length = LengthToEnd
		} else {
			length = uint8(n / 4)
		}
	}
	var flags byte
	for i, f := range []bool{r.Dropped, r.Congested, r.Tracked, r.Intermediate} {
		if f {
			flags |= 0x80 >> i
		}
	}
	md := uint8(0)
	if r.RepType == RepINT {
		md = uint8(len(r.MD) / 4)
	}
	dst = append(dst, r.RepType<<4|r.InType&0xF, length, md, flags)
	if r.RepType == RepINT {
		dst = binary.BigEndian.AppendUint16(dst, r.RepMdBits)
		dst = binary.BigEndian.AppendUint16(dst, r.DomainID)
		dst = binary.BigEndian.AppendUint16(dst, r.DSMdBits)
		dst = binary.BigEndian.AppendUint16(dst, r.DSMdStatus)
		dst = append(dst, r.MD...)
	}
	return append(dst, r.Inner...), nil
}

// SetMetadata lays m out as the report's MD by RepMdBits (and MDLength).
func (r *Individual) SetMetadata(m *Metadata) {
	r.RepType = RepINT
	r.MD = appendMetadata(r.MD[:0], m, &layoutReport2, r.RepMdBits)
	r.MDLength = uint8(len(r.MD) / 4)
}

// AppendTo appends the report's encoding to b, in its Version's format.
func (r *Report) AppendTo(b []byte) ([]byte, error) {
	switch r.Format {
	case FormatV05, FormatV1:
		return r.appendFixed(b)
	case FormatV2:
	default:
		return b, newError("report group", ErrVersion, fmt.Sprintf("format %d", r.Format))
	}
	b = binary.BigEndian.AppendUint32(b, 2<<28|uint32(r.HardwareID&0x3F)<<22|r.Sequence&0x3FFFFF)
	b = binary.BigEndian.AppendUint32(b, r.NodeID)
	for i := range r.Individuals {
		var err error
		if b, err = r.Individuals[i].appendTo(b, i == len(r.Individuals)-1); err != nil {
			return b, err
		}
	}
	return b, nil
}

// SerializeTo writes the report.
func (r *Report) SerializeTo(b gopacket.SerializeBuffer, _ gopacket.SerializeOptions) error {
	enc, err := r.AppendTo(nil)
	if err != nil {
		return err
	}
	buf, err := b.PrependBytes(len(enc))
	if err != nil {
		return err
	}
	copy(buf, enc)
	return nil
}

func decodeReport(data []byte, p gopacket.PacketBuilder) error {
	r := &Report{}
	if err := r.DecodeFromBytes(data, p); err != nil {
		return err
	}
	p.AddLayer(r)
	return nil
}

// RegisterReportPort makes gopacket decode UDP packets to port as
// Telemetry Reports (the port is deployment-assigned).
func RegisterReportPort(port uint16) {
	layers.RegisterUDPPortLayerType(layers.UDPPort(port), LayerTypeReport)
}
