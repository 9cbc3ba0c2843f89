// Package dta reads and writes the Direct Telemetry Access wire format:
// the base header, the four primitive sub-headers (Key-Write, Key-Increment,
// Append, Postcarding) and the acknowledgement header, as sections 1 to 3 of
// docs/DTA-WIRE.md define them.
//
// Each header is a small value type with an AppendTo encoder and a Parse
// decoder. [Report] is one whole DTA datagram (base header, sub-header and
// data); [ParseReport] and [Report.Decode] decode a UDP payload into one
// without gopacket, which is what a software translator needs, and
// [AppendPayload] encodes one for a socket sender.
//
// [ReportLayer] and [AckLayer] are the gopacket layers, bound to UDP ports
// [ReportPort] and [AckPort] when the package is imported. Each holds the
// whole UDP payload and is the packet's last layer, so a
// gopacket.DecodingLayerParser over Ethernet, IPv4, UDP, ReportLayer and
// AckLayer decodes a frame without allocating (DecodingLayerSparse is the
// fastest container). [FrameBuilder] builds whole Ethernet/IPv4/UDP frames
// for reporters, and acknowledgement frames for translators.
//
// Decoders alias their input (Data fields point into the decoded bytes),
// never allocate, and report malformed input with an [*Error] wrapping one
// of the sentinel errors below. Section 8.1 of docs/DTA-WIRE.md records the
// details this package decides.
package dta

import (
	"errors"
	"fmt"
)

// UDP destination ports (spec section 1).
const (
	ReportPort = 40040 // DTA reports, reporter to translator
	AckPort    = 40044 // acknowledgements and NACKs, translator to reporter
)

// Opcode names a DTA primitive (base header byte 0).
type Opcode uint8

// The opcodes of spec section 2.
const (
	OpKeyWrite     Opcode = 0x01
	OpAppend       Opcode = 0x02
	OpKeyIncrement Opcode = 0x03
	OpPostcard     Opcode = 0x04
)

// IsValid reports whether op is one of the four defined opcodes.
func (op Opcode) IsValid() bool { return op >= OpKeyWrite && op <= OpPostcard }

// String returns the primitive's identifier ("keywrite", "append",
// "keyincrement", "postcard": the names collector configurations, HTTP
// paths, logs and metrics use), or "opcode(0xNN)" for an unknown opcode.
func (op Opcode) String() string {
	switch op {
	case OpKeyWrite:
		return "keywrite"
	case OpAppend:
		return "append"
	case OpKeyIncrement:
		return "keyincrement"
	case OpPostcard:
		return "postcard"
	}
	return fmt.Sprintf("opcode(%#02x)", uint8(op))
}

// Sentinel errors: every error this package returns for malformed bytes or
// an invalid value is an [*Error] wrapping exactly one of these, so callers
// match the problem with errors.Is and the header with errors.As.
var (
	ErrTruncated     = errors.New("truncated header")
	ErrUnknownOpcode = errors.New("unknown opcode")
	ErrRedundancy    = errors.New("redundancy 0")
	ErrDataLength    = errors.New("bad data length")
	ErrHopZero       = errors.New("hop number 0")
	ErrTrailingBytes = errors.New("trailing bytes after fixed-size header")
	// ErrInvalidField is returned only when encoding: a field out of its
	// range (reserved bits wider than their field, a sequence number
	// without the S flag, a non-IPv4 address, an oversized frame).
	ErrInvalidField = errors.New("field out of range")
)

// Error is a decoding or encoding error: which header or value (Op) and
// what was wrong (Err, one of the sentinels). Errors for malformed input are
// allocated once, at package initialisation, so rejecting a packet does not
// allocate either.
type Error struct {
	Op  string // "base header", "keywrite", "keyincrement", "append", "postcard", "ack", "frame"
	Err error  // the sentinel
	msg string
}

func newError(op string, err error, detail string) *Error {
	msg := "dta: " + op + ": " + err.Error()
	if detail != "" {
		msg += " (" + detail + ")"
	}
	return &Error{Op: op, Err: err, msg: msg}
}

func (e *Error) Error() string { return e.msg }

// Unwrap returns the sentinel.
func (e *Error) Unwrap() error { return e.Err }

// The errors the decoders and Validate methods return, allocated once.
var (
	errHeaderShort         = newError("base header", ErrTruncated, "need 2 bytes")
	errHeaderSeqShort      = newError("base header", ErrTruncated, "S flag set, need 3 bytes")
	errHeaderReserved      = newError("base header", ErrInvalidField, "reserved bits wider than 5 bits")
	errHeaderSeqWithoutS   = newError("base header", ErrInvalidField, "sequence number set without the S flag")
	errHeaderSeqNarrow     = newError("base header", ErrInvalidField, "sequence number wider than 8 bits without the W flag")
	errHeaderWideShort     = newError("base header", ErrTruncated, "S and W flags set, need 14 bytes")
	errHeaderSessionNarrow = newError("base header", ErrInvalidField, "session set without the S and W flags")
	errUnknownOpcode       [256]*Error

	errKeyWriteShort      = newError("keywrite", ErrTruncated, "need 5 bytes before the data")
	errKeyWriteRedundancy = newError("keywrite", ErrRedundancy, "")
	errKeyWriteNoData     = newError("keywrite", ErrDataLength, "no data, want a positive multiple of 4 bytes")
	errKeyWriteDataAlign  = newError("keywrite", ErrDataLength, "not a multiple of 4 bytes")

	errKeyIncrementShort      = newError("keyincrement", ErrTruncated, "need 13 bytes")
	errKeyIncrementTrailing   = newError("keyincrement", ErrTrailingBytes, "sub-header is 13 bytes")
	errKeyIncrementRedundancy = newError("keyincrement", ErrRedundancy, "")

	errAppendShort     = newError("append", ErrTruncated, "need 4 bytes before the data")
	errAppendNoData    = newError("append", ErrDataLength, "no data, want a positive multiple of 4 bytes")
	errAppendDataAlign = newError("append", ErrDataLength, "not a multiple of 4 bytes")

	errPostcardShort    = newError("postcard", ErrTruncated, "need 9 bytes")
	errPostcardTrailing = newError("postcard", ErrTrailingBytes, "sub-header is at most 10 bytes")
	errPostcardHopZero  = newError("postcard", ErrHopZero, "")

	errAckShort    = newError("ack", ErrTruncated, "need 2 bytes")
	errAckTrailing = newError("ack", ErrTrailingBytes, "header is 2 bytes (16 when wide)")
	errAckNarrow   = newError("ack", ErrInvalidField, "a 2-byte ack has an 8-bit sequence number and no reason, span or session")
	errAckReserved = newError("ack", ErrInvalidField, "reserved bits wider than 7 bits")

	errFrameNotIPv4  = newError("frame", ErrInvalidField, "source and destination must be IPv4 addresses")
	errFrameTooLarge = newError("frame", ErrInvalidField, "report too long for one IPv4 datagram")
)

func init() {
	for i := range errUnknownOpcode {
		if op := Opcode(i); !op.IsValid() {
			errUnknownOpcode[i] = newError("base header", ErrUnknownOpcode, fmt.Sprintf("%#02x", i))
		}
	}
}
