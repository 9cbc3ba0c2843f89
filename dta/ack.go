package dta

import "encoding/binary"

// Acknowledgement header (spec section 2), sent to UDP port 40044, 2 bytes:
//
//	 0                   1
//	 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|      seq      |N|  reserved   |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+

// With W (dtakit's wide sequence numbers, section 8.1) an acknowledgement is
// 16 bytes and carries a reason and the session of the reports it answers:
//
//	 0                   1                   2                   3
//	 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                        seq (32 bits)                          |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|N|R| reserved  |    reason     |           span (16)           |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                    session (bits 63..32)                      |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                    session (bits 31..0)                       |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//
// The two forms are told apart by their length.

// Ack acknowledges, or with NACK set reports the drop of, the sequenced
// report with sequence number Seq.
type Ack struct {
	// Seq is byte 0, or bytes 0-3 when Wide.
	Seq  uint32
	NACK bool // byte 1 (byte 4 when Wide) bit 7: the report was dropped, retransmit it
	// Wide selects the 8-byte form, for reports sent with the W flag.
	Wide bool
	// Reason (byte 5, Wide only) says why a NACKed report was dropped.
	Reason Reason
	// Resend (byte 4 bit 6, Wide only, NACK clear) acknowledges Seq alone,
	// not cumulatively: a resent report applied (or found applied) after
	// a cumulative ack had passed its number.
	Resend bool
	// Span (bytes 6-7, Wide only) is, in a cumulative ack (NACK clear),
	// how many numbers ending at Seq the translator has seen the source's
	// sequence for (capped at 65535): numbers before Seq-Span+1 it never
	// saw, because it started after them. 0 says nothing.
	Span uint16
	// Session (bytes 8-15, Wide only) is the session of the reports it
	// answers ([Header.Session]): a sender believes only acks of its own.
	Session uint64
	// Reserved is byte 1 bits 6..0 (byte 4 bits 5..0 when Wide), kept as
	// received so a decoded ack re-encodes to its bytes. Senders leave it 0.
	Reserved uint8
}

// Reason is why a translator refused a report.
type Reason uint8

// NACK reasons (wide acknowledgements). A sender may retry after Busy,
// NoInstance and Missing; not after Unconfirmed (a retry could apply the
// report twice) nor Rejected; the others would fail the same way again.
const (
	ReasonUnspecified Reason = 0
	ReasonBusy        Reason = 1 // the translator's queue to the collector is full, or its rate limit spent
	ReasonNoInstance  Reason = 2 // no collector instance serves the primitive yet
	ReasonMissing     Reason = 3 // never received: a later number came first (lost on the way, or a socket buffer overflowed)
	// ReasonUnconfirmed: taken, but the collector's acknowledgement of its
	// operations never came (the connection failed): it may or may not
	// have been applied, so it is not resent.
	ReasonUnconfirmed Reason = 4
	// ReasonRejected: the instance cannot hold this report (a Key-Write
	// data size, a list, a hop or path length, a postcard value outside
	// the instance's set): it was not applied, and a retry would fail the
	// same way.
	ReasonRejected Reason = 5
)

// AckLen is the encoded length of an acknowledgement header; WideAckLen of
// the wide form.
const (
	AckLen     = 2
	WideAckLen = 16
)

const (
	flagNACK        = 0x80
	flagResend      = 0x40 // wide only
	ackReservedMask = 0x7f
)

// Len returns the encoded length: AckLen, or WideAckLen when Wide.
func (a Ack) Len() int {
	if a.Wide {
		return WideAckLen
	}
	return AckLen
}

// AppendTo appends the encoded header to b and returns the extended slice
// (Reserved masked to 7 bits, 6 when Wide; without Wide, Seq's low 8
// bits, no reason, span, session or Resend). It does not allocate when b
// has room.
func (a Ack) AppendTo(b []byte) []byte {
	flags := a.Reserved & ackReservedMask
	if a.NACK {
		flags |= flagNACK
	}
	if a.Wide {
		flags &^= flagResend
		if a.Resend {
			flags |= flagResend
		}
		b = binary.BigEndian.AppendUint32(b, a.Seq)
		b = binary.BigEndian.AppendUint16(append(b, flags, byte(a.Reason)), a.Span)
		return binary.BigEndian.AppendUint64(b, a.Session)
	}
	return append(b, byte(a.Seq), flags)
}

// Validate reports what is wrong with a, or nil: Reserved wider than 7
// bits (6 when Wide), or a narrow ack with a Seq above 255, a Reason, a
// Span, a Session or Resend.
func (a Ack) Validate() error {
	if a.Reserved&^ackReservedMask != 0 || a.Wide && a.Reserved&flagResend != 0 {
		return errAckReserved
	}
	if !a.Wide && (a.Seq > 0xff || a.Reason != 0 || a.Span != 0 || a.Session != 0 || a.Resend) {
		return errAckNarrow
	}
	return nil
}

// ParseAck decodes an acknowledgement: b is the whole UDP payload, exactly
// [AckLen] or [WideAckLen] bytes. It does not allocate.
func ParseAck(b []byte) (Ack, error) {
	switch {
	case len(b) == WideAckLen:
		return Ack{Seq: binary.BigEndian.Uint32(b), NACK: b[4]&flagNACK != 0, Wide: true, Resend: b[4]&flagResend != 0,
			Reserved: b[4] & ackReservedMask &^ flagResend,
			Reason:   Reason(b[5]), Span: binary.BigEndian.Uint16(b[6:]), Session: binary.BigEndian.Uint64(b[8:])}, nil
	case len(b) < AckLen:
		return Ack{}, errAckShort
	case len(b) > AckLen:
		return Ack{}, errAckTrailing
	}
	return Ack{Seq: uint32(b[0]), NACK: b[1]&flagNACK != 0, Reserved: b[1] & ackReservedMask}, nil
}
