package rocev2

import "encoding/binary"

// The extension transport headers (IBTA vol. 1, 9.3). Each decoder reads the
// first bytes of its input and checks only the length; none allocates.

// Extension header lengths in bytes.
const (
	RETHLen         = 16
	AtomicETHLen    = 28
	AETHLen         = 4
	AtomicAckETHLen = 8
	ImmDtLen        = 4
	DETHLen         = 8
	IETHLen         = 4
)

// RETH is the RDMA extended transport header of RDMA WRITE First and Only and
// of RDMA READ Request:
//
//	+--------------------------------+
//	| Virtual Address (64)           |
//	+--------------------------------+
//	| R_Key (32) | DMA Length (32)   |
//	+--------------------------------+
type RETH struct {
	VA        uint64 // virtual address of the first byte at the responder
	RKey      uint32 // remote key of the memory region
	DMALength uint32 // length of the whole message in bytes
}

// AppendTo appends the 16-byte header to b.
func (h RETH) AppendTo(b []byte) []byte {
	b = binary.BigEndian.AppendUint64(b, h.VA)
	b = binary.BigEndian.AppendUint32(b, h.RKey)
	return binary.BigEndian.AppendUint32(b, h.DMALength)
}

// DecodeRETH decodes a RETH from the first 16 bytes of b.
func DecodeRETH(b []byte) (RETH, error) {
	if len(b) < RETHLen {
		return RETH{}, errShortRETH
	}
	_ = b[15]
	return RETH{
		VA:        binary.BigEndian.Uint64(b),
		RKey:      binary.BigEndian.Uint32(b[8:]),
		DMALength: binary.BigEndian.Uint32(b[12:]),
	}, nil
}

// AtomicETH is the atomic extended transport header of CmpSwap and FetchAdd:
//
//	+-----------------------------------------------+
//	| Virtual Address (64)                          |
//	| R_Key (32)                                    |
//	| Swap (or Add) Data (64)                       |
//	| Compare Data (64)                             |
//	+-----------------------------------------------+
type AtomicETH struct {
	VA          uint64 // address of the 8-byte aligned target
	RKey        uint32
	SwapAddData uint64 // the value to swap in (CmpSwap) or to add (FetchAdd)
	CompareData uint64 // the value to compare with (CmpSwap); ignored by FetchAdd
}

// AppendTo appends the 28-byte header to b.
func (h AtomicETH) AppendTo(b []byte) []byte {
	b = binary.BigEndian.AppendUint64(b, h.VA)
	b = binary.BigEndian.AppendUint32(b, h.RKey)
	b = binary.BigEndian.AppendUint64(b, h.SwapAddData)
	return binary.BigEndian.AppendUint64(b, h.CompareData)
}

// DecodeAtomicETH decodes an AtomicETH from the first 28 bytes of b.
func DecodeAtomicETH(b []byte) (AtomicETH, error) {
	if len(b) < AtomicETHLen {
		return AtomicETH{}, errShortAtomicETH
	}
	_ = b[27]
	return AtomicETH{
		VA:          binary.BigEndian.Uint64(b),
		RKey:        binary.BigEndian.Uint32(b[8:]),
		SwapAddData: binary.BigEndian.Uint64(b[12:]),
		CompareData: binary.BigEndian.Uint64(b[20:]),
	}, nil
}

// AETH is the ACK extended transport header: syndrome (8) | MSN (24).
type AETH struct {
	Syndrome Syndrome
	MSN      uint32 // 24 bits: message sequence number
}

// Syndrome is the AETH syndrome: ACK 0x00-0x1F (credit count in the low five
// bits), RNR NAK 0x20-0x3F (timer in the low five bits), NAK 0x60-0x7F (NAK
// code in the low five bits).
type Syndrome uint8

// Syndromes a responder sends.
const (
	SyndromeACK                  Syndrome = 0x1F // ACK, unlimited credits
	SyndromeRNRNAK               Syndrome = 0x20 // RNR NAK; OR in the timer code
	SyndromeNAKPSNSequenceError  Syndrome = 0x60
	SyndromeNAKInvalidRequest    Syndrome = 0x61
	SyndromeNAKRemoteAccessError Syndrome = 0x62
	SyndromeNAKRemoteOperational Syndrome = 0x63
)

// syndromeKind keeps the reserved bit 7 and the two kind bits 6..5.
const syndromeKind Syndrome = 0xE0

// IsACK reports whether s is a positive acknowledgement.
func (s Syndrome) IsACK() bool { return s&syndromeKind == 0x00 }

// IsRNRNAK reports whether s is a receiver-not-ready NAK.
func (s Syndrome) IsRNRNAK() bool { return s&syndromeKind == 0x20 }

// IsNAK reports whether s is a NAK (not RNR).
func (s Syndrome) IsNAK() bool { return s&syndromeKind == 0x60 }

// Value returns the low five bits: the credit count of an ACK, the timer of an
// RNR NAK, the code of a NAK.
func (s Syndrome) Value() uint8 { return uint8(s & 0x1F) }

// AppendTo appends the 4-byte header to b. MSN bits beyond 24 are dropped.
func (h AETH) AppendTo(b []byte) []byte {
	return binary.BigEndian.AppendUint32(b, uint32(h.Syndrome)<<24|h.MSN&PSNMask)
}

// DecodeAETH decodes an AETH from the first 4 bytes of b.
func DecodeAETH(b []byte) (AETH, error) {
	if len(b) < AETHLen {
		return AETH{}, errShortAETH
	}
	v := binary.BigEndian.Uint32(b)
	return AETH{Syndrome: Syndrome(v >> 24), MSN: v & PSNMask}, nil
}

// AtomicAckETH is the atomic ACK extended transport header: the original
// 64-bit value at the target before the atomic operation.
type AtomicAckETH struct {
	OrigRemoteData uint64
}

// AppendTo appends the 8-byte header to b.
func (h AtomicAckETH) AppendTo(b []byte) []byte {
	return binary.BigEndian.AppendUint64(b, h.OrigRemoteData)
}

// DecodeAtomicAckETH decodes an AtomicAckETH from the first 8 bytes of b.
func DecodeAtomicAckETH(b []byte) (AtomicAckETH, error) {
	if len(b) < AtomicAckETHLen {
		return AtomicAckETH{}, errShortAtomicAckETH
	}
	return AtomicAckETH{OrigRemoteData: binary.BigEndian.Uint64(b)}, nil
}

// ImmDt is the immediate data header: 32 bits delivered to the receiver's
// completion, big-endian on the wire as verbs' imm_data.
type ImmDt struct {
	Data uint32
}

// AppendTo appends the 4-byte header to b.
func (h ImmDt) AppendTo(b []byte) []byte { return binary.BigEndian.AppendUint32(b, h.Data) }

// DecodeImmDt decodes an ImmDt from the first 4 bytes of b.
func DecodeImmDt(b []byte) (ImmDt, error) {
	if len(b) < ImmDtLen {
		return ImmDt{}, errShortImmDt
	}
	return ImmDt{Data: binary.BigEndian.Uint32(b)}, nil
}

// DETH is the datagram extended transport header of UD packets:
// Q_Key (32) | reserved (8) | source QP (24).
type DETH struct {
	QKey  uint32
	SrcQP uint32 // 24 bits
}

// AppendTo appends the 8-byte header to b. SrcQP bits beyond 24 are dropped.
func (h DETH) AppendTo(b []byte) []byte {
	b = binary.BigEndian.AppendUint32(b, h.QKey)
	return binary.BigEndian.AppendUint32(b, h.SrcQP&PSNMask)
}

// DecodeDETH decodes a DETH from the first 8 bytes of b. The reserved byte is
// ignored.
func DecodeDETH(b []byte) (DETH, error) {
	if len(b) < DETHLen {
		return DETH{}, errShortDETH
	}
	_ = b[7]
	return DETH{QKey: binary.BigEndian.Uint32(b), SrcQP: binary.BigEndian.Uint32(b[4:]) & PSNMask}, nil
}

// IETH is the invalidate extended transport header of SEND with Invalidate:
// the R_Key the responder invalidates.
type IETH struct {
	RKey uint32
}

// AppendTo appends the 4-byte header to b.
func (h IETH) AppendTo(b []byte) []byte { return binary.BigEndian.AppendUint32(b, h.RKey) }

// DecodeIETH decodes an IETH from the first 4 bytes of b.
func DecodeIETH(b []byte) (IETH, error) {
	if len(b) < IETHLen {
		return IETH{}, errShortIETH
	}
	return IETH{RKey: binary.BigEndian.Uint32(b)}, nil
}
