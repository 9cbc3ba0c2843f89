package dta

import "encoding/binary"

// Base header (spec section 2), 2 bytes, or 3 when S is set, or 14 when S
// and W are set (section 8.1, dtakit's wide sequence numbers):
//
//	 0                   1                   2
//	 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|    opcode     |I|S|W|reserved |  seq (if S)   |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//
// With W, seq is 4 bytes, big-endian (bytes 2-5), and the sender's session
// follows it (bytes 6-13):
//
//	 0                   1                   2                   3
//	 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|    opcode     |I|1|1|reserved |        seq (bits 31..16)      |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|       seq (bits 15..0)        |    session (bits 63..48)      |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                   session (bits 47..16)                       |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|    session (bits 15..0)       |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+

// Header is the DTA base header. The zero value is not valid (opcode 0);
// a sender sets Opcode and, when it wants acknowledgements, Sequenced and Seq.
type Header struct {
	Opcode    Opcode // byte 0
	Immediate bool   // byte 1 bit 7 (I): notify the collector's CPU
	Sequenced bool   // byte 1 bit 6 (S): Seq is on the wire
	// Wide is byte 1 bit 5 (W): Seq takes 4 bytes, so that it does not
	// wrap within any window a sender keeps. It needs Sequenced.
	Wide bool
	// Seq is byte 2 (8 bits), or bytes 2-5 with Wide, present only when
	// Sequenced.
	Seq uint32
	// Session is bytes 6-13 (64 bits, big-endian), present only when
	// Sequenced and Wide: the sender's random identifier, chosen at its
	// start, that the translator keys the sender's sequence state and
	// acknowledgements by, so that a sender who cannot see the traffic
	// cannot forge either (docs/DTA-WIRE.md, "Threat model").
	Session uint64
	// Reserved is byte 1 bits 4..0. Receivers ignore it; decoding keeps
	// it so a decoded header re-encodes to the bytes it came from.
	// Senders leave it 0.
	Reserved uint8
}

const (
	flagImmediate = 0x80
	flagSequenced = 0x40
	flagWide      = 0x20
	reservedMask  = 0x1f
)

// WideHeaderLen is the length of a base header with S and W set.
const WideHeaderLen = 14

// Len returns the encoded length: 2, 3 when Sequenced, [WideHeaderLen]
// when also Wide.
func (h Header) Len() int { return h.len() }

// len is Len without copying h: a Header is too big to live in registers,
// and a copy loaded just after a reporter set its fields stalls store
// forwarding. Report's methods use these pointer forms.
func (h *Header) len() int {
	switch {
	case h.Sequenced && h.Wide:
		return WideHeaderLen
	case h.Sequenced:
		return 3
	}
	return 2
}

// AppendTo appends the encoded header to b and returns the extended slice.
// It encodes the fields as they are (Reserved masked to 5 bits, Seq only
// when Sequenced, its low 8 bits unless Wide, Session only when Sequenced
// and Wide); [Header.Validate] reports
// fields out of range. It does not allocate when b has room.
func (h Header) AppendTo(b []byte) []byte { return AppendHeader(b, &h) }

// AppendHeader is [Header.AppendTo] without copying h, for a sender that
// sets a header's fields and encodes it straight after (a reporter
// numbering its reports): a copy loaded just after those stores stalls.
func AppendHeader(b []byte, h *Header) []byte {
	flags := h.Reserved & reservedMask
	if h.Immediate {
		flags |= flagImmediate
	}
	if h.Wide {
		flags |= flagWide
	}
	switch {
	case h.Sequenced && h.Wide:
		b = binary.BigEndian.AppendUint32(append(b, byte(h.Opcode), flags|flagSequenced), h.Seq)
		return binary.BigEndian.AppendUint64(b, h.Session)
	case h.Sequenced:
		return append(b, byte(h.Opcode), flags|flagSequenced, byte(h.Seq))
	}
	return append(b, byte(h.Opcode), flags)
}

// Validate reports what is wrong with h, or nil: an unknown opcode (not
// defined nor registered, [Opcode.IsKnown]),
// Reserved wider than 5 bits, a Seq without Sequenced, a Seq wider than
// 8 bits without Wide, or a Session without both. (Wide without Sequenced
// means nothing and is kept, like a reserved bit.)
func (h Header) Validate() error { return h.validate() }

// validate is Validate without copying h.
func (h *Header) validate() error {
	if !h.Opcode.IsKnown() {
		return errUnknownOpcode[h.Opcode]
	}
	if h.Reserved&^reservedMask != 0 {
		return errHeaderReserved
	}
	if h.Seq != 0 && !h.Sequenced {
		return errHeaderSeqWithoutS
	}
	if !h.Wide && h.Seq > 0xff {
		return errHeaderSeqNarrow
	}
	if h.Session != 0 && !(h.Sequenced && h.Wide) {
		return errHeaderSessionNarrow
	}
	return nil
}

// seq decodes the sequence number (and with W the session) after byte 1
// when flags has S: rest is what follows byte 1. It returns the number, the
// session and what follows them.
func seq(flags byte, rest []byte) (uint32, uint64, []byte, error) {
	switch {
	case flags&flagSequenced == 0:
		// W without S means nothing; like a reserved bit it is kept.
		return 0, 0, rest, nil
	case flags&flagWide != 0:
		if len(rest) < WideHeaderLen-2 {
			return 0, 0, nil, errHeaderWideShort
		}
		return binary.BigEndian.Uint32(rest), binary.BigEndian.Uint64(rest[4:]), rest[WideHeaderLen-2:], nil
	case len(rest) == 0:
		return 0, 0, nil, errHeaderSeqShort
	}
	return uint32(rest[0]), 0, rest[1:], nil
}

// ParseHeader decodes the base header at the start of b; the sub-header
// follows at b[h.Len():]. It fails when b is too short or the opcode is
// unknown. It does not allocate.
func ParseHeader(b []byte) (Header, error) {
	if len(b) < 2 {
		return Header{}, errHeaderShort
	}
	h := Header{
		Opcode:    Opcode(b[0]),
		Immediate: b[1]&flagImmediate != 0,
		Sequenced: b[1]&flagSequenced != 0,
		Wide:      b[1]&flagWide != 0,
		Reserved:  b[1] & reservedMask,
	}
	if !h.Opcode.IsKnown() {
		return Header{}, errUnknownOpcode[b[0]]
	}
	s, sess, _, err := seq(b[1], b[2:])
	if err != nil {
		return Header{}, err
	}
	h.Seq, h.Session = s, sess
	return h, nil
}
