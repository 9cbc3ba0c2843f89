package dta

// Base header (spec section 2), 2 bytes, or 3 when S is set:
//
//	 0                   1                   2
//	 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|    opcode     |I|S| reserved  |  seq (if S)   |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+

// Header is the DTA base header. The zero value is not valid (opcode 0);
// a sender sets Opcode and, when it wants acknowledgements, Sequenced and Seq.
type Header struct {
	Opcode    Opcode // byte 0
	Immediate bool   // byte 1 bit 7 (I): notify the collector's CPU
	Sequenced bool   // byte 1 bit 6 (S): Seq is on the wire
	Seq       uint8  // byte 2, present only when Sequenced
	// Reserved is byte 1 bits 5..0. Receivers ignore it; decoding keeps
	// it so a decoded header re-encodes to the bytes it came from.
	// Senders leave it 0.
	Reserved uint8
}

const (
	flagImmediate = 0x80
	flagSequenced = 0x40
	reservedMask  = 0x3f
)

// Len returns the encoded length: 2, or 3 when Sequenced.
func (h Header) Len() int {
	if h.Sequenced {
		return 3
	}
	return 2
}

// AppendTo appends the encoded header to b and returns the extended slice.
// It encodes the fields as they are (Reserved masked to 6 bits, Seq only
// when Sequenced); [Header.Validate] reports fields out of range.
// It does not allocate when b has room.
func (h Header) AppendTo(b []byte) []byte {
	flags := h.Reserved & reservedMask
	if h.Immediate {
		flags |= flagImmediate
	}
	if h.Sequenced {
		return append(b, byte(h.Opcode), flags|flagSequenced, h.Seq)
	}
	return append(b, byte(h.Opcode), flags)
}

// Validate reports what is wrong with h, or nil: an unknown opcode,
// Reserved wider than 6 bits, or a Seq without Sequenced.
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
	return nil
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
		Reserved:  b[1] & reservedMask,
	}
	if !h.Opcode.IsValid() {
		return Header{}, errUnknownOpcode[b[0]]
	}
	if h.Sequenced {
		if len(b) < 3 {
			return Header{}, errHeaderSeqShort
		}
		h.Seq = b[2]
	}
	return h, nil
}
