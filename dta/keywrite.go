package dta

import "encoding/binary"

// Key-Write sub-header (spec section 3, reference-compatible):
//
//	+---------------+---------------------------------------------+
//	| redundancy N  |                  key (4)                    |
//	+---------------+---------------------------------------------+
//	|       data (rest of the datagram, 4·k bytes, k >= 1)        |
//	+-------------------------------------------------------------+

// KeyWrite is a Key-Write sub-header and its data: write Data under Key
// into N = Redundancy slots of the collector's key-value store.
type KeyWrite struct {
	Redundancy uint8  // copies to write, 1..255
	Key        uint32 // the key as sent, big-endian on the wire
	Data       []byte // a positive multiple of 4 bytes; aliases the decoded bytes
}

// keyWriteFixed is the sub-header length before the data.
const keyWriteFixed = 5

// Len returns the encoded length, sub-header and data.
func (k KeyWrite) Len() int { return keyWriteFixed + len(k.Data) }

// AppendTo appends the encoded sub-header and data to b and returns the
// extended slice. It does not check the fields ([KeyWrite.Validate] does)
// and does not allocate when b has room.
func (k KeyWrite) AppendTo(b []byte) []byte {
	b = append(b, k.Redundancy)
	b = binary.BigEndian.AppendUint32(b, k.Key)
	return append(b, k.Data...)
}

// Validate reports what is wrong with k, or nil: redundancy 0, or data
// empty or not a multiple of 4 bytes.
func (k KeyWrite) Validate() error {
	if k.Redundancy == 0 {
		return errKeyWriteRedundancy
	}
	return checkData(len(k.Data), errKeyWriteNoData, errKeyWriteDataAlign)
}

// ParseKeyWrite decodes a Key-Write sub-header and its data: b is
// everything after the base header. Data aliases b. It does not allocate.
func ParseKeyWrite(b []byte) (KeyWrite, error) {
	if len(b) < keyWriteFixed {
		return KeyWrite{}, errKeyWriteShort
	}
	k := KeyWrite{
		Redundancy: b[0],
		Key:        binary.BigEndian.Uint32(b[1:5]),
		Data:       b[keyWriteFixed:],
	}
	if err := k.Validate(); err != nil {
		return KeyWrite{}, err
	}
	return k, nil
}

func checkData(n int, empty, unaligned error) error {
	if n == 0 {
		return empty
	}
	if n%4 != 0 {
		return unaligned
	}
	return nil
}
