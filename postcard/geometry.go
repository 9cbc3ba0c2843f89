package postcard

import (
	"fmt"
	"math/bits"
)

// GeometryVersion is the version byte that starts an encoded Layout;
// GeometryVersionValues starts one followed by its ValueSet.
const (
	GeometryVersion       = 1
	GeometryVersionValues = 2
)

// GeometryLen is the length of an encoded Layout (version 1; version 2
// adds its ValueSet).
const GeometryLen = 8

// ValueCodeDefault is the only value code geometry version 1 knows: the
// identity for 32-bit slots, the CRC-8 (0x07) or CRC-16 (0x1021) over
// be32(v) for 8- and 16-bit slots (docs/DTA-WIRE.md section 8.5).
const ValueCodeDefault = 0

// The geometry of a Postcarding region, as a collector advertises it
// (dta.Advertisement.Geometry, docs/DTA-WIRE.md section 8.5):
//
//	0  u8  geometry version, 1
//	1  u8  hops B, 1..16
//	2  u8  slot bits b: 8, 16 or 32
//	3  u8  log2 C, 0..31
//	4  u8  copies N, 1..16
//	5  u8  addressing: 0 per-copy, 1 reference, 2 prototype (Addressing)
//	6  u8  checksum set: 0 dtakit's default, 1 prototype (Checksums)
//	7  u8  value code: 0, ValueCodeDefault
//
// Every field is explicit: a Layout's zero fields are encoded as the
// defaults they stand for. Version 2 (GeometryVersionValues) has version
// 1's fields after its version byte, then the instance's ValueSet:
//
//	8  u8  ranges n, 1..MaxValueRanges
//	9  n × (le32 low, le32 high), ascending, neither overlapping nor adjacent, low >= 1

// AppendBinary appends l's geometry, defaults filled in, to b. An invalid
// layout gets Validate's error (wrapping ErrLayout) and b is returned
// unchanged.
func (l Layout) AppendBinary(b []byte) ([]byte, error) {
	if err := l.Validate(); err != nil {
		return b, err
	}
	l = l.withDefaults()
	return append(b, GeometryVersion, byte(l.Hops), byte(l.SlotBits), byte(bits.Len32(l.Chunks)-1),
		byte(l.Copies), byte(l.Addressing), byte(l.Checksums), ValueCodeDefault), nil
}

// AppendGeometry appends l's geometry with the instance's value set v to
// b: version 1 (AppendBinary's) for the zero set, which holds every value,
// version 2 otherwise.
func (l Layout) AppendGeometry(b []byte, v ValueSet) ([]byte, error) {
	n := len(b)
	b, err := l.AppendBinary(b)
	if err != nil || v.IsAll() {
		return b, err
	}
	b[n] = GeometryVersionValues
	return v.appendBinary(b), nil
}

// ParseGeometry decodes a geometry AppendGeometry wrote: the layout, and
// the value set (the zero set from version 1). Errors are ParseLayout's.
func ParseGeometry(b []byte) (Layout, ValueSet, error) {
	if len(b) > GeometryLen && b[0] == GeometryVersionValues {
		v, err := parseValueSet(b[GeometryLen:])
		if err != nil {
			return Layout{}, ValueSet{}, fmt.Errorf("parse layout: %w", err)
		}
		l, err := parseLayout(b[:GeometryLen], GeometryVersionValues)
		return l, v, err
	}
	l, err := parseLayout(b, GeometryVersion)
	return l, ValueSet{}, err
}

// ParseLayout decodes a geometry AppendBinary (or AppendGeometry) wrote,
// every field explicit; a version 2 geometry's value set is checked and
// dropped. Malformed bytes (a wrong length, an unknown version or value
// code, a bad value set) get an error wrapping ErrGeometry; fields
// Validate rejects get its error, wrapping ErrLayout.
func ParseLayout(b []byte) (Layout, error) {
	l, _, err := ParseGeometry(b)
	return l, err
}

// parseLayout decodes the 8 bytes of a version 1 layout, b[0] being
// version.
func parseLayout(b []byte, version byte) (Layout, error) {
	if len(b) != GeometryLen {
		return Layout{}, fmt.Errorf("parse layout: %w: %d bytes, want %d", ErrGeometry, len(b), GeometryLen)
	}
	if b[0] != version {
		return Layout{}, fmt.Errorf("parse layout: %w: version %d, want %d", ErrGeometry, b[0], GeometryVersion)
	}
	if b[7] != ValueCodeDefault {
		return Layout{}, fmt.Errorf("parse layout: %w: unknown value code %d", ErrGeometry, b[7])
	}
	// Zero would stand for a default in a Layout; on the wire it is an error.
	if b[1] == 0 || b[2] == 0 || b[4] == 0 {
		return Layout{}, fmt.Errorf("parse layout: %w: hops %d, slot bits %d, copies %d: none may be 0", ErrLayout, b[1], b[2], b[4])
	}
	if b[3] > 31 {
		return Layout{}, fmt.Errorf("parse layout: %w: log2 chunk count %d above 31", ErrLayout, b[3])
	}
	l := Layout{
		Hops:       int(b[1]),
		SlotBits:   int(b[2]),
		Chunks:     1 << b[3],
		Copies:     int(b[4]),
		Addressing: Addressing(b[5]),
		Checksums:  Checksums(b[6]),
	}
	if err := l.Validate(); err != nil {
		return Layout{}, fmt.Errorf("parse layout: %w", err)
	}
	return l, nil
}
