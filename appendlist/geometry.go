package appendlist

import (
	"encoding/binary"
	"fmt"
	"math/bits"
)

// GeometryVersion is the version byte that starts an encoded Layout.
const GeometryVersion = 1

// GeometryLen is the length of an encoded Layout.
const GeometryLen = 10

// geometryMarkers is the flags bit of Layout.Markers.
const geometryMarkers = 1

// The geometry of an Append region, as a collector advertises it
// (dta.Advertisement.Geometry, docs/DTA-WIRE.md section 8.5):
//
//	0  u8   geometry version, 1
//	1  le32 lists L, 1..2^24
//	5  u8   log2 E, 0..30
//	6  le16 entry size e, a multiple of 4 in 4..4096
//	8  u8   log2 B, 0..log2 E
//	9  u8   flags: bit 0 Markers; bits 7..1 zero
//
// The batch is explicit: a Layout's Batch 0 is encoded as 1.

// AppendBinary appends l's geometry to b. An invalid layout gets Validate's
// error (wrapping ErrLayout) and b is returned unchanged.
func (l Layout) AppendBinary(b []byte) ([]byte, error) {
	if err := l.Validate(); err != nil {
		return b, err
	}
	l = l.withDefaults()
	var flags byte
	if l.Markers {
		flags |= geometryMarkers
	}
	b = append(b, GeometryVersion)
	b = binary.LittleEndian.AppendUint32(b, uint32(l.Lists))
	b = append(b, byte(bits.Len(uint(l.Entries))-1))
	b = binary.LittleEndian.AppendUint16(b, uint16(l.EntrySize))
	return append(b, byte(bits.Len(uint(l.Batch))-1), flags), nil
}

// ParseLayout decodes a geometry AppendBinary wrote, Batch explicit.
// Malformed bytes (a wrong length, an unknown version or flag) get an error
// wrapping ErrGeometry; fields Validate rejects get its error, wrapping
// ErrLayout.
func ParseLayout(b []byte) (Layout, error) {
	if len(b) != GeometryLen {
		return Layout{}, fmt.Errorf("parse layout: %w: %d bytes, want %d", ErrGeometry, len(b), GeometryLen)
	}
	if b[0] != GeometryVersion {
		return Layout{}, fmt.Errorf("parse layout: %w: version %d, want %d", ErrGeometry, b[0], GeometryVersion)
	}
	if b[9]&^geometryMarkers != 0 {
		return Layout{}, fmt.Errorf("parse layout: %w: unknown flags %#x", ErrGeometry, b[9])
	}
	lists := binary.LittleEndian.Uint32(b[1:])
	if lists > 1<<24 {
		return Layout{}, fmt.Errorf("parse layout: %w: %d lists, want 1..2^24", ErrLayout, lists)
	}
	if b[5] > 30 || b[8] > b[5] {
		return Layout{}, fmt.Errorf("parse layout: %w: log2 entries %d, log2 batch %d, want log2 batch <= log2 entries <= 30", ErrLayout, b[5], b[8])
	}
	l := Layout{
		Lists:     int(lists),
		Entries:   1 << b[5],
		EntrySize: int(binary.LittleEndian.Uint16(b[6:])),
		Batch:     1 << b[8],
		Markers:   b[9]&geometryMarkers != 0,
	}
	if err := l.Validate(); err != nil {
		return Layout{}, fmt.Errorf("parse layout: %w", err)
	}
	return l, nil
}
