package dta

import (
	"encoding/binary"
	"slices"
)

// Report is one DTA report, the whole payload of a UDP datagram to
// [ReportPort]: a base header and the sub-header its opcode names. Only the
// sub-header field matching Header.Opcode is meaningful; the others are
// zero after decoding and ignored when encoding.
//
// A software translator decodes a datagram with [ParseReport] and switches
// on Header.Opcode.
type Report struct {
	Header       Header
	KeyWrite     KeyWrite     // when Header.Opcode is OpKeyWrite
	Append       Append       // when Header.Opcode is OpAppend
	KeyIncrement KeyIncrement // when Header.Opcode is OpKeyIncrement
	Postcard     Postcard     // when Header.Opcode is OpPostcard
	// Body is the sub-header and data of a report whose opcode was
	// registered with [RegisterOpcode] (a primitive beyond the four),
	// undecoded: its primitive decodes it. Nil for the four.
	Body []byte
}

// Len returns the encoded length of r, base header, sub-header and data.
func (r *Report) Len() int {
	n := r.Header.len()
	switch r.Header.Opcode {
	case OpKeyWrite:
		n += r.KeyWrite.Len()
	case OpAppend:
		n += r.Append.Len()
	case OpKeyIncrement:
		n += KeyIncrementLen
	case OpPostcard:
		n += r.Postcard.len()
	default:
		n += len(r.Body)
	}
	return n
}

// AppendTo appends the encoded report to b and returns the extended slice:
// the base header, then the sub-header Header.Opcode names (nothing for an
// unknown opcode). It does not check the fields ([Report.Validate] does)
// and does not allocate when b has room for [Report.Len] more bytes.
//
// It grows b once and writes the sub-header at fixed offsets: this is a
// reporter's hot path. TestRoundTripAllFlags and FuzzParseReport check it against the
// headers' own AppendTo methods.
func (r *Report) AppendTo(b []byte) []byte {
	n := r.Len()
	off := len(b)
	b = slices.Grow(b, n)[:off+n]
	p := b[off:]
	p = p[len(AppendHeader(p[:0], &r.Header)):]
	h := &r.Header
	switch h.Opcode {
	case OpKeyWrite:
		_ = p[4]
		p[0] = r.KeyWrite.Redundancy
		binary.BigEndian.PutUint32(p[1:5], r.KeyWrite.Key)
		copy(p[keyWriteFixed:], r.KeyWrite.Data)
	case OpAppend:
		binary.BigEndian.PutUint32(p[0:4], r.Append.ListID)
		copy(p[appendFixed:], r.Append.Data)
	case OpKeyIncrement:
		_ = p[12]
		p[0] = r.KeyIncrement.Redundancy
		binary.BigEndian.PutUint32(p[1:5], r.KeyIncrement.Key)
		binary.BigEndian.PutUint64(p[5:13], r.KeyIncrement.Counter)
	case OpPostcard:
		r.Postcard.appendTo(p[:0])
	default:
		copy(p, r.Body)
	}
	return b
}

// Validate reports what is wrong with r, or nil: the checks of
// [Header.Validate] and of the sub-header's Validate. A report that passes
// encodes to bytes [ParseReport] accepts.
func (r *Report) Validate() error {
	if err := r.Header.validate(); err != nil {
		return err
	}
	switch r.Header.Opcode {
	case OpKeyWrite:
		return r.KeyWrite.Validate()
	case OpAppend:
		return r.Append.Validate()
	case OpKeyIncrement:
		return r.KeyIncrement.Validate()
	case OpPostcard:
		return r.Postcard.validate()
	default: // registered: its primitive checks the body
		return nil
	}
}

// ParseReport decodes a whole DTA report, the payload of a UDP datagram.
// Data fields alias b. On error the returned report is the zero value.
// It does not allocate. [Report.Decode] fills a report in place, which
// saves copying the value.
func ParseReport(b []byte) (Report, error) {
	var r Report
	err := r.Decode(b)
	return r, err
}

// Decode sets r to the report b holds, as [ParseReport] does: Data fields
// alias b, and on error r is the zero value. It does not allocate.
//
// It is the translator's hot path, so it decodes the base header and the
// sub-header in one pass rather than through [ParseHeader] and the
// sub-header parsers; FuzzParseReport checks that the two agree.
func (r *Report) Decode(b []byte) error {
	*r = Report{}
	// The common report first: Key-Write without a sequence number, with
	// redundancy and data a positive multiple of 4 bytes. FuzzParseReport
	// checks it against the general path and the header parsers.
	if len(b) >= 2+keyWriteFixed+4 && b[0] == byte(OpKeyWrite) && b[1]&(flagSequenced|flagWide) == 0 && b[2] != 0 && (len(b)-2-keyWriteFixed)%4 == 0 {
		r.Header.Opcode = OpKeyWrite
		r.Header.Immediate = b[1]&flagImmediate != 0
		r.Header.Reserved = b[1] & reservedMask
		r.KeyWrite.Redundancy = b[2]
		r.KeyWrite.Key = binary.BigEndian.Uint32(b[3:7])
		r.KeyWrite.Data = b[7:]
		return nil
	}
	if len(b) < 2 {
		return errHeaderShort
	}
	op, flags := Opcode(b[0]), b[1]
	if !op.IsKnown() {
		return errUnknownOpcode[op]
	}
	sq, sess, rest, err := seq(flags, b[2:])
	if err != nil {
		return err
	}
	switch op {
	case OpKeyWrite:
		if len(rest) < keyWriteFixed {
			return errKeyWriteShort
		}
		if rest[0] == 0 {
			return errKeyWriteRedundancy
		}
		if err := checkData(len(rest)-keyWriteFixed, errKeyWriteNoData, errKeyWriteDataAlign); err != nil {
			return err
		}
		r.KeyWrite.Redundancy = rest[0]
		r.KeyWrite.Key = binary.BigEndian.Uint32(rest[1:5])
		r.KeyWrite.Data = rest[keyWriteFixed:]
	case OpAppend:
		if len(rest) < appendFixed {
			return errAppendShort
		}
		if err := checkData(len(rest)-appendFixed, errAppendNoData, errAppendDataAlign); err != nil {
			return err
		}
		r.Append.ListID = binary.BigEndian.Uint32(rest[0:4])
		r.Append.Data = rest[appendFixed:]
	case OpKeyIncrement:
		if len(rest) != KeyIncrementLen {
			if len(rest) < KeyIncrementLen {
				return errKeyIncrementShort
			}
			return errKeyIncrementTrailing
		}
		if rest[0] == 0 {
			return errKeyIncrementRedundancy
		}
		r.KeyIncrement.Redundancy = rest[0]
		r.KeyIncrement.Key = binary.BigEndian.Uint32(rest[1:5])
		r.KeyIncrement.Counter = binary.BigEndian.Uint64(rest[5:13])
	case OpPostcard:
		if err := r.Postcard.decode(rest); err != nil {
			return err // r is still zero
		}
	default: // registered (IsKnown): the primitive decodes the body
		r.Body = rest
	}
	// Field by field: a composite literal is built on the stack from byte
	// stores and copied with one wider load, which stalls store forwarding
	// and once cost about 4 ns of the 8 this function took.
	r.Header.Opcode = op
	r.Header.Immediate = flags&flagImmediate != 0
	r.Header.Sequenced = flags&flagSequenced != 0
	r.Header.Wide = flags&flagWide != 0
	r.Header.Seq = sq
	r.Header.Session = sess
	r.Header.Reserved = flags & reservedMask
	return nil
}
