package dta

// Acknowledgement header (spec section 2), sent to UDP port 40044, 2 bytes:
//
//	 0                   1
//	 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|      seq      |N|  reserved   |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+

// Ack acknowledges, or with NACK set reports the drop of, the sequenced
// report with sequence number Seq.
type Ack struct {
	Seq  uint8 // byte 0
	NACK bool  // byte 1 bit 7: the report was dropped, retransmit it
	// Reserved is byte 1 bits 6..0, kept as received so a decoded ack
	// re-encodes to its bytes. Senders leave it 0.
	Reserved uint8
}

// AckLen is the encoded length of an acknowledgement header.
const AckLen = 2

const (
	flagNACK        = 0x80
	ackReservedMask = 0x7f
)

// AppendTo appends the encoded header to b and returns the extended slice
// (Reserved masked to 7 bits). It does not allocate when b has room.
func (a Ack) AppendTo(b []byte) []byte {
	flags := a.Reserved & ackReservedMask
	if a.NACK {
		flags |= flagNACK
	}
	return append(b, a.Seq, flags)
}

// Validate reports what is wrong with a (Reserved wider than 7 bits), or nil.
func (a Ack) Validate() error {
	if a.Reserved&^ackReservedMask != 0 {
		return errAckReserved
	}
	return nil
}

// ParseAck decodes an acknowledgement: b is the whole UDP payload and must
// be exactly [AckLen] bytes. It does not allocate.
func ParseAck(b []byte) (Ack, error) {
	if len(b) < AckLen {
		return Ack{}, errAckShort
	}
	if len(b) > AckLen {
		return Ack{}, errAckTrailing
	}
	return Ack{Seq: b[0], NACK: b[1]&flagNACK != 0, Reserved: b[1] & ackReservedMask}, nil
}
