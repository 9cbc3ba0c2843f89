package dta

import "encoding/binary"

// Append sub-header (spec section 3, reference-compatible):
//
//	+-------------------------------------------------------------+
//	|                        list ID (4)                          |
//	+-------------------------------------------------------------+
//	|       data (rest of the datagram, 4·k bytes, k >= 1)        |
//	+-------------------------------------------------------------+

// Append is an Append sub-header and its data: append Data to list ListID.
type Append struct {
	ListID uint32 // the list, big-endian on the wire
	Data   []byte // a positive multiple of 4 bytes; aliases the decoded bytes
}

// appendFixed is the sub-header length before the data.
const appendFixed = 4

// Len returns the encoded length, sub-header and data.
func (a Append) Len() int { return appendFixed + len(a.Data) }

// AppendTo appends the encoded sub-header and data to b and returns the
// extended slice. It does not check the fields and does not allocate when
// b has room.
func (a Append) AppendTo(b []byte) []byte {
	b = binary.BigEndian.AppendUint32(b, a.ListID)
	return append(b, a.Data...)
}

// Validate reports what is wrong with a (data empty or not a multiple of 4
// bytes), or nil.
func (a Append) Validate() error {
	return checkData(len(a.Data), errAppendNoData, errAppendDataAlign)
}

// ParseAppend decodes an Append sub-header and its data: b is everything
// after the base header. Data aliases b. It does not allocate.
func ParseAppend(b []byte) (Append, error) {
	if len(b) < appendFixed {
		return Append{}, errAppendShort
	}
	a := Append{
		ListID: binary.BigEndian.Uint32(b[0:4]),
		Data:   b[appendFixed:],
	}
	if err := a.Validate(); err != nil {
		return Append{}, err
	}
	return a, nil
}
