package rocev2

import "encoding/binary"

// BTHLen is the length of the base transport header.
const BTHLen = 12

// BTH is the InfiniBand base transport header (IBTA vol. 1, 9.2):
//
//	 0                   1                   2                   3
//	 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|    OpCode     |S|M|Pad| TVer  |            P_Key              |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|F|B|  Resv6    |              Destination QP                   |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|A|   Resv7     |                    PSN                        |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//
// The reserved bits are sent as zero and ignored on receipt. The zero value is
// an RC SEND First to QP 0 with P_Key 0: set at least Opcode, PKey and DestQP.
type BTH struct {
	Opcode    Opcode
	Solicited bool   // SE: solicited event
	MigReq    bool   // M: migration state
	PadCount  uint8  // 2 bits: pad bytes after the payload
	Version   uint8  // TVer, 4 bits: transport header version, always 0
	PKey      uint16 // partition key
	FECN      bool   // F: forward explicit congestion notification
	BECN      bool   // B: backward explicit congestion notification
	DestQP    uint32 // 24 bits: destination queue pair number
	AckReq    bool   // A: the requester asks for an acknowledgement
	PSN       PSN    // 24 bits
}

// Validate reports a field wider than its bits, or an opcode this package does
// not implement.
func (h BTH) Validate() error {
	switch {
	case h.PadCount > 3:
		return errBTHPad
	case h.Version > 15:
		return errBTHVersion
	case h.DestQP > PSNMask:
		return errBTHQP
	case !h.PSN.Valid():
		return errBTHPSN
	}
	return h.Opcode.check()
}

// AppendTo appends the 12-byte header to b and returns the extended slice.
// Bits of a field beyond its width are dropped; Validate reports them. It
// does not allocate when b has room.
func (h BTH) AppendTo(b []byte) []byte { return h.appendTo(b) }

// appendTo is AppendTo without copying h, for Packet's encoder.
func (h *BTH) appendTo(b []byte) []byte {
	b = AppendBTH(b, h.Opcode, bit(h.Solicited, 7)|bit(h.MigReq, 6)|(h.PadCount&3)<<4|h.Version&15,
		h.PKey, h.DestQP, h.AckReq, h.PSN)
	b[len(b)-8] = bit(h.FECN, 7) | bit(h.BECN, 6)
	return b
}

// AppendBTH appends a BTH to b: opcode op, byte 1 (SE, M, pad count,
// TVer) flags, P_Key pkey, destination QP qpn, AckReq ackReq and PSN psn,
// FECN and BECN clear. It is the one BTH encoder: [BTH.AppendTo] calls it,
// and so does a sender that builds packets in place, whose per-packet cost
// a header struct would double. It does not allocate when b has room.
func AppendBTH(b []byte, op Opcode, flags byte, pkey uint16, qpn uint32, ackReq bool, psn PSN) []byte {
	return append(b, byte(op), flags, byte(pkey>>8), byte(pkey), 0, byte(qpn>>16), byte(qpn>>8), byte(qpn),
		bit(ackReq, 7), byte(psn>>16), byte(psn>>8), byte(psn))
}

// DecodeBTH decodes a BTH from the first 12 bytes of b. It checks only the
// length: opcode and version are checked by [Packet.Decode]. It does not
// allocate.
func DecodeBTH(b []byte) (BTH, error) {
	if len(b) < BTHLen {
		return BTH{}, errShortBTH
	}
	var h BTH
	h.decode((*[BTHLen]byte)(b))
	return h, nil
}

// decode sets every field of h from b; [Packet.Decode] decodes in place
// with it rather than copying a BTH from DecodeBTH. Field by field: a
// composite literal is built on the stack from byte stores and copied with
// wider loads, which stall store forwarding.
func (h *BTH) decode(b *[BTHLen]byte) {
	h.Opcode = Opcode(b[0])
	h.Solicited = b[1]&0x80 != 0
	h.MigReq = b[1]&0x40 != 0
	h.PadCount = b[1] >> 4 & 3
	h.Version = b[1] & 15
	h.PKey = binary.BigEndian.Uint16(b[2:])
	h.FECN = b[4]&0x80 != 0
	h.BECN = b[4]&0x40 != 0
	h.DestQP = binary.BigEndian.Uint32(b[4:]) & PSNMask
	h.AckReq = b[8]&0x80 != 0
	h.PSN = PSN(binary.BigEndian.Uint32(b[8:]) & PSNMask)
}

func bit(v bool, n uint) byte {
	if v {
		return 1 << n
	}
	return 0
}
