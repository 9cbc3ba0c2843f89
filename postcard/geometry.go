package postcard

import (
	"fmt"
	"math/bits"
)

// GeometryVersion is the version byte that starts an encoded Layout.
const GeometryVersion = 1

// GeometryLen is the length of an encoded Layout.
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
// defaults they stand for.

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

// ParseLayout decodes a geometry AppendBinary wrote, every field explicit.
// Malformed bytes (a wrong length, an unknown version or value code) get an
// error wrapping ErrGeometry; fields Validate rejects get its error,
// wrapping ErrLayout.
func ParseLayout(b []byte) (Layout, error) {
	if len(b) != GeometryLen {
		return Layout{}, fmt.Errorf("parse layout: %w: %d bytes, want %d", ErrGeometry, len(b), GeometryLen)
	}
	if b[0] != GeometryVersion {
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
