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
	ShimLen     = 4
	MDHeaderLen = 12 // also the INT-MX header's
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
)

// INT is an INT shim header and the INT header it introduces (INT-MD with
// its metadata stack, INT-MX, or a destination header kept raw), as found
// after a TCP or UDP header. Decoding allocates nothing; the stack aliases
// the packet.
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
}

// LayerTypeINT is the INT layer's type.
var LayerTypeINT = gopacket.RegisterLayerType(4040, gopacket.LayerTypeMetadata{Name: "INT", Decoder: gopacket.DecodeFunc(decodeINT)})

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
	i.BaseLayer = layers.BaseLayer{Contents: data[:end], Payload: data[end:]}
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
	decodeMetadata(m, i.Instructions, i.Stack[h*per:(h+1)*per], false)
	return nil
}

// SourceOnlyMetadata returns the source-only bytes at the end of the stack.
func (i *INT) SourceOnlyMetadata() []byte { return i.Stack[len(i.Stack)-i.SourceOnly:] }

// AppendHop appends hop m's metadata, laid out by the header's
// Instructions and padded with all ones to HopML words, to an INT-MD's
// stack being built (push order is the caller's: hop 0 first).
func (i *INT) AppendHop(m *Metadata) error {
	start := len(i.Stack)
	i.Stack = appendMetadata(i.Stack, m, i.Instructions, false)
	want := start + 4*int(i.HopML)
	if len(i.Stack) > want {
		i.Stack = i.Stack[:start]
		return newError("int-md", ErrHopML, fmt.Sprintf("hop metadata of %d bytes exceeds HopML %d words", len(i.Stack)-start, i.HopML))
	}
	for len(i.Stack) < want {
		i.Stack = append(i.Stack, 0xFF)
	}
	return nil
}

// SerializeTo writes the shim and the INT header (Length from the stack
// when opts.FixLengths is set).
func (i *INT) SerializeTo(b gopacket.SerializeBuffer, opts gopacket.SerializeOptions) error {
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
