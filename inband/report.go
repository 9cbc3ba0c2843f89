package inband

import (
	"encoding/binary"
	"fmt"

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

// Telemetry Report sizes.
const (
	GroupHeaderLen      = 8
	IndividualHeaderLen = 4
	INTMainLen          = 8   // RepMdBits, Domain Specific ID, DSMdBits, DSMdStatus
	LengthToEnd         = 255 // Report Length: the report runs to the end of the packet
)

var (
	errGroupShort    = newError("report group", ErrTruncated, "need 8 bytes")
	errGroupVersion  = newError("report group", ErrVersion, "want 2")
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
}

// Metadata decodes the report's baseline metadata by RepMdBits into m
// (RepType INT only; the domain-specific words are m.DomainSpecific).
func (r *Individual) Metadata(m *Metadata) error {
	if r.RepType != RepINT {
		return newError("metadata", ErrType, fmt.Sprintf("RepType %d carries no metadata", r.RepType))
	}
	decodeMetadata(m, r.RepMdBits, r.MD, true)
	return nil
}

// Report is a Telemetry Report (v2.0): the group header and its individual
// reports, after a UDP header on the deployment's report port. Decoding
// reuses Individuals' storage, so a Report decoded again and again
// allocates nothing once it has seen its largest packet.
type Report struct {
	layers.BaseLayer
	Version     uint8
	HardwareID  uint8  // 6 bits
	Sequence    uint32 // 22 bits
	NodeID      uint32
	Individuals []Individual
}

// LayerTypeReport is the Telemetry Report layer's type.
var LayerTypeReport = gopacket.RegisterLayerType(4041, gopacket.LayerTypeMetadata{Name: "TelemetryReport", Decoder: gopacket.DecodeFunc(decodeReport)})

// LayerType returns LayerTypeReport.
func (r *Report) LayerType() gopacket.LayerType { return LayerTypeReport }

// CanDecode returns LayerTypeReport.
func (r *Report) CanDecode() gopacket.LayerClass { return LayerTypeReport }

// NextLayerType is gopacket.LayerTypeZero: the inner packets are the
// individual reports' Inner bytes, decoded by the caller if wanted.
func (r *Report) NextLayerType() gopacket.LayerType { return gopacket.LayerTypeZero }

// DecodeFromBytes decodes the group header and every individual report.
func (r *Report) DecodeFromBytes(data []byte, df gopacket.DecodeFeedback) error {
	if len(data) < GroupHeaderLen {
		return errGroupShort
	}
	r.Version = data[0] >> 4
	if r.Version != 2 {
		return errGroupVersion
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
		r.Individuals = append(r.Individuals, Individual{})
		n, err := r.Individuals[len(r.Individuals)-1].decode(rest)
		if err != nil {
			r.Individuals = r.Individuals[:len(r.Individuals)-1]
			return err
		}
		rest = rest[n:]
	}
	r.BaseLayer = layers.BaseLayer{Contents: data, Payload: nil}
	return nil
}

// decode decodes one individual report from b and returns its length.
func (r *Individual) decode(b []byte) (int, error) {
	if len(b) < IndividualHeaderLen {
		return 0, errIndivShort
	}
	*r = Individual{RepType: b[0] >> 4, InType: b[0] & 0xF, Length: b[1], MDLength: b[2],
		Dropped: b[3]&0x80 != 0, Congested: b[3]&0x40 != 0, Tracked: b[3]&0x20 != 0, Intermediate: b[3]&0x10 != 0}
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
		base := BaselineWords(r.RepMdBits)
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
	r.MD = appendMetadata(r.MD[:0], m, r.RepMdBits, true)
	r.MDLength = uint8(len(r.MD) / 4)
}

// AppendTo appends the report's encoding to b.
func (r *Report) AppendTo(b []byte) ([]byte, error) {
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
