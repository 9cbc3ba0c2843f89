package dta

import "encoding/binary"

// Base header (spec section 2), 2 bytes, or 3 when S is set, or 6 when S
// and W are set (section 8.1, dtakit's wide sequence numbers):
//
//	 0                   1                   2
//	 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|    opcode     |I|S|W|reserved |  seq (if S)   |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//
// With W, seq is 4 bytes, big-endian (bytes 2-5).

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

// Len returns the encoded length: 2, 3 when Sequenced, 6 when also Wide.
func (h Header) Len() int {
	switch {
	case h.Sequenced && h.Wide:
		return 6
	case h.Sequenced:
		return 3
	}
	return 2
}

// AppendTo appends the encoded header to b and returns the extended slice.
// It encodes the fields as they are (Reserved masked to 5 bits, Seq only
// when Sequenced, its low 8 bits unless Wide); [Header.Validate] reports
// fields out of range. It does not allocate when b has room.
func (h Header) AppendTo(b []byte) []byte {
	flags := h.Reserved & reservedMask
	if h.Immediate {
		flags |= flagImmediate
	}
	if h.Wide {
		flags |= flagWide
	}
	switch {
	case h.Sequenced && h.Wide:
		return binary.BigEndian.AppendUint32(append(b, byte(h.Opcode), flags|flagSequenced), h.Seq)
	case h.Sequenced:
		return append(b, byte(h.Opcode), flags|flagSequenced, byte(h.Seq))
	}
	return append(b, byte(h.Opcode), flags)
}

// Validate reports what is wrong with h, or nil: an unknown opcode,
// Reserved wider than 5 bits, a Seq without Sequenced, or a Seq wider than
// 8 bits without Wide. (Wide without Sequenced means nothing and is kept,
// like a reserved bit.)
func (h Header) Validate() error {
	if !h.Opcode.IsValid() {
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
	return nil
}

// seq decodes the sequence number after byte 1 when flags has S: rest is
// what follows byte 1. It returns the number and what follows it.
func seq(flags byte, rest []byte) (uint32, []byte, error) {
	switch {
	case flags&flagSequenced == 0:
		// W without S means nothing; like a reserved bit it is kept.
		return 0, rest, nil
	case flags&flagWide != 0:
		if len(rest) < 4 {
			return 0, nil, errHeaderWideShort
		}
		return binary.BigEndian.Uint32(rest), rest[4:], nil
	case len(rest) == 0:
		return 0, nil, errHeaderSeqShort
	}
	return uint32(rest[0]), rest[1:], nil
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
	if !h.Opcode.IsValid() {
		return Header{}, errUnknownOpcode[b[0]]
	}
	s, _, err := seq(b[1], b[2:])
	if err != nil {
		return Header{}, err
	}
	h.Seq = s
	return h, nil
}
