package inband

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
)

// Sentinel errors, wrapped in an *Error saying where.
var (
	ErrTruncated = errors.New("truncated")
	ErrVersion   = errors.New("unsupported version")
	ErrType      = errors.New("unknown type")
	ErrLength    = errors.New("inconsistent length")
	ErrHopML     = errors.New("hop metadata length does not fit the instructions")
)

// INT header types (the shim's Type).
const (
	TypeMD          = 1
	TypeDestination = 2
	TypeMX          = 3
)

// Next protocol types (the shim's NPT, with the INT UDP port).
const (
	NPTNone       = 0 // Field carries the original DSCP (INT over TCP/UDP marked by DSCP)
	NPTUDPPayload = 1 // Field is the original UDP destination port
	NPTL4Header   = 2 // Field's low byte is the IP protocol of the L4 header after INT
)

// ShimLen and MDHeaderLen are the fixed header sizes.
const (
	ShimLen       = 4
	MDHeaderLen   = 12 // also the INT-MX header's
	MDHeaderLenV1 = 8  // INT 0.5 and 1.0
	TailLen       = 4  // INT 0.5's tail header
)

var (
	errShimShort   = newError("int shim", ErrTruncated, "need 4 bytes")
	errShimType    = newError("int shim", ErrType, "want 1 (MD), 2 (destination) or 3 (MX)")
	errShimLength  = newError("int shim", ErrLength, "the INT headers run past the packet")
	errMDShort     = newError("int-md", ErrTruncated, "the shim's length leaves less than the 12-byte header")
	errMDVersion   = newError("int-md", ErrVersion, "want 2")
	errMDHopML     = newError("int-md", ErrHopML, "")
	errMDStack     = newError("int-md", ErrLength, "the metadata stack is not a whole number of hops")
	errMXShort     = newError("int-mx", ErrTruncated, "the shim's length leaves less than the 12-byte header")
	errMXVersion   = newError("int-mx", ErrVersion, "want 2")
	errHopRange    = newError("int-md", ErrLength, "hop index out of range")
	errSourceRange = newError("int-md", ErrLength, "source-only metadata longer than the stack")
	errV1Short     = newError("int-md", ErrTruncated, "the shim's length leaves less than the 8-byte header (and 0.5's tail)")
	errV1Version   = newError("int-md", ErrVersion, "want 0 (INT 0.5) or 1 (INT 1.0) after an 8-bit-type shim")
	errV1HopML     = newError("int-md", ErrHopML, "Instruction Count or HopML below the words the instructions request")
	errV05Hops     = newError("int-md", ErrLength, "the stack's hops differ from Total Hop Count")
)

// INT is an INT shim header and the INT header it introduces (INT-MD with
// its metadata stack, INT-MX, or a destination header kept raw), as found
// after a TCP or UDP header. INT 2.x, 1.0 and 0.5 decode alike: a shim
// whose first byte is 1 or 2 is 0.5's or 1.0's (an 8-bit Type), and the
// metadata header's version tells those two apart. Decoding allocates
// nothing; the stack aliases the packet.
type INT struct {
	layers.BaseLayer
	// Shim.
	Type   uint8  // TypeMD, TypeDestination or TypeMX
	NPT    uint8  // next protocol type
	Length uint8  // words of INT headers after the shim
	Field  uint16 // original UDP port, IP protocol or DSCP (see NPT)

	// INT-MD and INT-MX header.
	Version           uint8
	Discard           bool // D
	HopCountExceeded  bool // E (INT-MD)
	MTUExceeded       bool // M (INT-MD)
	HopML             uint8
	RemainingHopCount uint8
	Instructions      uint16
	DomainID          uint16
	DSInstructions    uint16
	DSFlags           uint16

	// Stack is the INT-MD metadata stack (hop metadata, most recent hop
	// first, then SourceOnly bytes of source-only metadata), the INT-MX
	// source-inserted metadata, or a destination header's bytes.
	Stack []byte
	// V1Length, set before decoding, reads the shim's Length as INT 1.0
	// counted it, the shim's own word included, as some INT 2.0 encoders
	// still do (the cablelabs test vectors in testdata do). Encoding writes
	// the 2.0 count unless it is set.
	V1Length bool
	// SourceOnly is the length of the source-only domain-specific metadata
	// at the end of an INT-MD stack (see Decoder.SourceOnly); 0 unless
	// known.
	SourceOnly int

	// INT 0.5 and 1.0 (Legacy). Their shim is Type (8 bits), Length (8,
	// words of every INT header, the shim's and 0.5's tail included) and,
	// in 1.0, the original DSCP (Field). Version is the metadata header's:
	// 0 for 0.5, 1 for 1.0. HopML holds 0.5's Instruction Count (its
	// fields are all one word); 1.0's HopML and Remaining Hop Count are
	// 2.x's.
	Legacy                     bool
	Replication                uint8 // Rep, 2 bits
	Copy                       bool  // C
	MaxHopCount, TotalHopCount uint8 // 0.5
	// TailProto, TailPort and TailDSCP are 0.5's tail header: the
	// original IP protocol, destination port and DSCP.
	TailProto uint8
	TailPort  uint16
	TailDSCP  uint8
}

// LayerTypeINT is the INT layer's type.
var LayerTypeINT = gopacket.RegisterLayerType(1460, gopacket.LayerTypeMetadata{Name: "INT", Decoder: gopacket.DecodeFunc(decodeINT)})

// LayerType returns LayerTypeINT.
func (i *INT) LayerType() gopacket.LayerType { return LayerTypeINT }

// CanDecode returns LayerTypeINT.
func (i *INT) CanDecode() gopacket.LayerClass { return LayerTypeINT }

// NextLayerType is the payload's: gopacket.LayerTypePayload.
func (i *INT) NextLayerType() gopacket.LayerType { return gopacket.LayerTypePayload }

// DecodeFromBytes decodes the shim and the INT header after it; the
// payload is what follows the INT headers.
func (i *INT) DecodeFromBytes(data []byte, df gopacket.DecodeFeedback) error {
	if len(data) < ShimLen {
		return errShimShort
	}
	i.Legacy, i.Replication, i.Copy, i.MaxHopCount, i.TotalHopCount, i.TailProto, i.TailPort, i.TailDSCP = false, 0, false, 0, 0, 0, 0, 0
	if data[0] == TypeMD || data[0] == TypeDestination {
		return i.decodeLegacy(data)
	}
	i.Type, i.NPT = data[0]>>4, data[0]>>2&3
	i.Length = data[1]
	i.Field = binary.BigEndian.Uint16(data[2:])
	end := ShimLen + 4*int(i.Length)
	if i.V1Length {
		if i.Length == 0 {
			return errShimLength
		}
		end -= ShimLen
	}
	if end > len(data) {
		return errShimLength
	}
	body := data[ShimLen:end]
	i.Contents, i.Payload = data[:end], data[end:]
	i.Version, i.Discard, i.HopCountExceeded, i.MTUExceeded = 0, false, false, false
	i.HopML, i.RemainingHopCount, i.Instructions, i.DomainID, i.DSInstructions, i.DSFlags = 0, 0, 0, 0, 0, 0
	i.SourceOnly = 0
	switch i.Type {
	case TypeMD:
		if len(body) < MDHeaderLen {
			return errMDShort
		}
		i.Version = body[0] >> 4
		if i.Version != 2 {
			return errMDVersion
		}
		i.Discard, i.HopCountExceeded, i.MTUExceeded = body[0]&8 != 0, body[0]&4 != 0, body[0]&2 != 0
		i.HopML, i.RemainingHopCount = body[2]&0x1F, body[3]
		i.decodeInstructions(body)
		i.Stack = body[MDHeaderLen:]
		if BaselineWords(i.Instructions) > int(i.HopML) {
			return errMDHopML
		}
		if i.HopML == 0 && len(i.Stack) != 0 {
			return errMDHopML
		}
	case TypeMX:
		if len(body) < MDHeaderLen {
			return errMXShort
		}
		i.Version = body[0] >> 4
		if i.Version != 2 {
			return errMXVersion
		}
		i.Discard = body[0]&8 != 0
		i.decodeInstructions(body)
		i.Stack = body[MDHeaderLen:]
	case TypeDestination:
		i.Stack = body
	default:
		return errShimType
	}
	return nil
}

// decodeLegacy decodes INT 0.5's or 1.0's shim and header.
func (i *INT) decodeLegacy(data []byte) error {
	i.Legacy = true
	i.Type, i.NPT, i.Length = data[0], 0, data[2]
	i.Field = uint16(data[3] >> 2)
	i.Version, i.Discard, i.HopCountExceeded, i.MTUExceeded = 0, false, false, false
	i.HopML, i.RemainingHopCount, i.Instructions, i.DomainID, i.DSInstructions, i.DSFlags = 0, 0, 0, 0, 0, 0
	i.SourceOnly = 0
	end := 4 * int(i.Length)
	if end < ShimLen || end > len(data) {
		return errShimLength
	}
	i.Contents, i.Payload = data[:end], data[end:]
	if i.Type == TypeDestination {
		i.Stack = data[ShimLen:end]
		return nil
	}
	body := data[ShimLen:end]
	if len(body) < MDHeaderLenV1 {
		return errV1Short
	}
	i.Version = body[0] >> 4
	i.Replication, i.Copy, i.HopCountExceeded = body[0]>>2&3, body[0]&2 != 0, body[0]&1 != 0
	i.Instructions = binary.BigEndian.Uint16(body[4:])
	var l *layout
	switch i.Version {
	case 0:
		if len(body) < MDHeaderLenV1+TailLen {
			return errV1Short
		}
		i.HopML, i.MaxHopCount, i.TotalHopCount = body[1]&0x1F, body[2], body[3]
		t := body[len(body)-TailLen:]
		i.TailProto, i.TailPort, i.TailDSCP = t[0], binary.BigEndian.Uint16(t[1:]), t[3]
		i.Stack = body[MDHeaderLenV1 : len(body)-TailLen]
		l = &layoutINT05
	case 1:
		i.MTUExceeded = body[1]&0x80 != 0
		i.HopML, i.RemainingHopCount = body[2]&0x1F, body[3]
		i.Stack = body[MDHeaderLenV1:]
		l = &layoutINT1
	default:
		return errV1Version
	}
	if l.words(i.Instructions) > int(i.HopML) || i.HopML == 0 && len(i.Stack) != 0 {
		return errV1HopML
	}
	return nil
}

// layout returns the metadata layout of the header's version.
func (i *INT) layout() *layout {
	switch {
	case !i.Legacy:
		return &layoutINT2
	case i.Version == 0:
		return &layoutINT05
	}
	return &layoutINT1
}

func (i *INT) decodeInstructions(body []byte) {
	i.Instructions = binary.BigEndian.Uint16(body[4:])
	i.DomainID = binary.BigEndian.Uint16(body[6:])
	i.DSInstructions = binary.BigEndian.Uint16(body[8:])
	i.DSFlags = binary.BigEndian.Uint16(body[10:])
}

// SetSourceOnly declares the length of the source-only domain-specific
// metadata at the end of the stack (known from the domain's definition of
// DomainID and DSInstructions), so that the rest divides into hops.
func (i *INT) SetSourceOnly(n int) error {
	if n < 0 || n > len(i.Stack) {
		return errSourceRange
	}
	i.SourceOnly = n
	return nil
}

// Hops returns the number of hops in an INT-MD stack, or an error when the
// stack (less its source-only metadata) is not a whole number of
// HopML-word hops.
func (i *INT) Hops() (int, error) {
	if i.Type != TypeMD || i.HopML == 0 {
		return 0, nil
	}
	n := len(i.Stack) - i.SourceOnly
	per := 4 * int(i.HopML)
	if n%per != 0 {
		return 0, errMDStack
	}
	if i.Legacy && i.Version == 0 && n/per != int(i.TotalHopCount) {
		return 0, errV05Hops
	}
	return n / per, nil
}

// Hop decodes hop h of an INT-MD stack into m: h = 0 is the hop that
// pushed last (nearest the sink), Hops()-1 the source. Fields the hop
// filled with all ones are not Present; the words after the baseline
// metadata are its DomainSpecific bytes.
func (i *INT) Hop(h int, m *Metadata) error {
	n, err := i.Hops()
	if err != nil {
		return err
	}
	if h < 0 || h >= n {
		return errHopRange
	}
	per := 4 * int(i.HopML)
	decodeMetadata(m, i.layout(), i.Instructions, i.Stack[h*per:(h+1)*per])
	return nil
}

// SourceOnlyMetadata returns the source-only bytes at the end of the stack.
func (i *INT) SourceOnlyMetadata() []byte { return i.Stack[len(i.Stack)-i.SourceOnly:] }

// AppendHop appends hop m's metadata, laid out by the header's
// Instructions and padded with all ones to HopML words, to an INT-MD's
// stack being built (push order is the caller's: hop 0 first).
func (i *INT) AppendHop(m *Metadata) error {
	start := len(i.Stack)
	i.Stack = appendMetadata(i.Stack, m, i.layout(), i.Instructions)
	want := start + 4*int(i.HopML)
	if len(i.Stack) > want {
		i.Stack = i.Stack[:start]
		return newError("int-md", ErrHopML, fmt.Sprintf("hop metadata of %d bytes exceeds HopML %d words", len(i.Stack)-start, i.HopML))
	}
	for len(i.Stack) < want {
		i.Stack = append(i.Stack, 0xFF)
	}
	if i.Legacy && i.Version == 0 {
		i.TotalHopCount++
	}
	return nil
}

// SerializeTo writes the shim and the INT header (Length from the stack
// when opts.FixLengths is set).
func (i *INT) SerializeTo(b gopacket.SerializeBuffer, opts gopacket.SerializeOptions) error {
	if i.Legacy {
		return i.serializeLegacy(b, opts)
	}
	hdr := ShimLen
	if i.Type == TypeMD || i.Type == TypeMX {
		hdr += MDHeaderLen
	}
	total := hdr + len(i.Stack)
	if total%4 != 0 || total-ShimLen > 255*4 {
		return newError("int shim", ErrLength, fmt.Sprintf("%d bytes of INT headers: want a multiple of 4 up to 1020", total-ShimLen))
	}
	if opts.FixLengths {
		i.Length = uint8((total - ShimLen) / 4)
		if i.V1Length {
			i.Length++
		}
	}
	buf, err := b.PrependBytes(total)
	if err != nil {
		return err
	}
	buf[0] = i.Type<<4 | i.NPT&3<<2
	buf[1] = i.Length
	binary.BigEndian.PutUint16(buf[2:], i.Field)
	if hdr > ShimLen {
		h := buf[ShimLen:]
		h[0] = i.Version << 4
		if i.Discard {
			h[0] |= 8
		}
		h[1], h[2], h[3] = 0, 0, 0
		if i.Type == TypeMD {
			if i.HopCountExceeded {
				h[0] |= 4
			}
			if i.MTUExceeded {
				h[0] |= 2
			}
			h[2], h[3] = i.HopML&0x1F, i.RemainingHopCount
		}
		binary.BigEndian.PutUint16(h[4:], i.Instructions)
		binary.BigEndian.PutUint16(h[6:], i.DomainID)
		binary.BigEndian.PutUint16(h[8:], i.DSInstructions)
		binary.BigEndian.PutUint16(h[10:], i.DSFlags)
	}
	copy(buf[hdr:], i.Stack)
	return nil
}

// serializeLegacy writes INT 0.5's or 1.0's shim, header (and 0.5's tail).
func (i *INT) serializeLegacy(b gopacket.SerializeBuffer, opts gopacket.SerializeOptions) error {
	hdr, tail := ShimLen, 0
	if i.Type == TypeMD {
		hdr += MDHeaderLenV1
		if i.Version == 0 {
			tail = TailLen
		}
	}
	total := hdr + len(i.Stack) + tail
	if i.Type != TypeMD && i.Type != TypeDestination || i.Type == TypeMD && i.Version > 1 || total%4 != 0 || total > 255*4 {
		return newError("int shim", ErrLength, fmt.Sprintf("type %d version %d with %d bytes of INT headers: want type 1 or 2, version 0 or 1, a multiple of 4 up to 1020", i.Type, i.Version, total))
	}
	if opts.FixLengths {
		i.Length = uint8(total / 4)
	}
	buf, err := b.PrependBytes(total)
	if err != nil {
		return err
	}
	buf[0], buf[1], buf[2], buf[3] = i.Type, 0, i.Length, uint8(i.Field)<<2
	if i.Type == TypeMD {
		h := buf[ShimLen:]
		h[0] = i.Version<<4 | i.Replication&3<<2
		if i.Copy {
			h[0] |= 2
		}
		if i.HopCountExceeded {
			h[0] |= 1
		}
		if i.Version == 0 {
			h[1], h[2], h[3] = i.HopML&0x1F, i.MaxHopCount, i.TotalHopCount
			t := buf[total-TailLen:]
			t[0] = i.TailProto
			binary.BigEndian.PutUint16(t[1:], i.TailPort)
			t[3] = i.TailDSCP
		} else {
			h[1], h[2], h[3] = 0, i.HopML&0x1F, i.RemainingHopCount
			if i.MTUExceeded {
				h[1] = 0x80
			}
		}
		binary.BigEndian.PutUint16(h[4:], i.Instructions)
		h[6], h[7] = 0, 0
	}
	copy(buf[hdr:], i.Stack)
	return nil
}

func decodeINT(data []byte, p gopacket.PacketBuilder) error {
	i := &INT{}
	if err := i.DecodeFromBytes(data, p); err != nil {
		return err
	}
	p.AddLayer(i)
	return p.NextDecoder(gopacket.LayerTypePayload)
}

// RegisterUDPPort makes gopacket decode the payload of UDP packets to port
// as INT (the INT-over-UDP destination port is deployment-assigned: the
// specification leaves it TBD).
func RegisterUDPPort(port uint16) {
	layers.RegisterUDPPortLayerType(layers.UDPPort(port), LayerTypeINT)
}

// RegisterTCPPort is RegisterUDPPort for TCP.
func RegisterTCPPort(port uint16) {
	layers.RegisterTCPPortLayerType(layers.TCPPort(port), LayerTypeINT)
}
