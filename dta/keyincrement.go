package dta

import "encoding/binary"

// Key-Increment sub-header (spec section 3, reference-compatible), 13 bytes:
//
//	+---------------+---------------------------------------------+
//	| redundancy N  |                  key (4)                    |
//	+---------------+---------------------------------------------+
//	|                    counter (8, unsigned)                    |
//	+-------------------------------------------------------------+

// KeyIncrement is a Key-Increment sub-header: add Counter to the N =
// Redundancy counters of Key in the collector's count-min sketch.
type KeyIncrement struct {
	Redundancy uint8  // copies to increment, 1..255
	Key        uint32 // the key as sent, big-endian on the wire
	Counter    uint64 // the increment
}

// KeyIncrementLen is the encoded length of a Key-Increment sub-header.
const KeyIncrementLen = 13

// AppendTo appends the encoded sub-header to b and returns the extended
// slice. It does not check the fields and does not allocate when b has room.
func (k KeyIncrement) AppendTo(b []byte) []byte {
	b = append(b, k.Redundancy)
	b = binary.BigEndian.AppendUint32(b, k.Key)
	return binary.BigEndian.AppendUint64(b, k.Counter)
}

// Validate reports what is wrong with k (redundancy 0), or nil.
func (k KeyIncrement) Validate() error {
	if k.Redundancy == 0 {
		return errKeyIncrementRedundancy
	}
	return nil
}

// ParseKeyIncrement decodes a Key-Increment sub-header: b is everything
// after the base header and must be exactly [KeyIncrementLen] bytes.
// It does not allocate.
func ParseKeyIncrement(b []byte) (KeyIncrement, error) {
	if len(b) < KeyIncrementLen {
		return KeyIncrement{}, errKeyIncrementShort
	}
	if len(b) > KeyIncrementLen {
		return KeyIncrement{}, errKeyIncrementTrailing
	}
	k := KeyIncrement{
		Redundancy: b[0],
		Key:        binary.BigEndian.Uint32(b[1:5]),
		Counter:    binary.BigEndian.Uint64(b[5:13]),
	}
	if k.Redundancy == 0 {
		return KeyIncrement{}, errKeyIncrementRedundancy
	}
	return k, nil
}
