package keywrite

import (
	"encoding/binary"
	"fmt"
	"math/bits"

	"github.com/dtakit/dtakit/dta/tofino"
)

// GeometryVersion is the version byte that starts an encoded Layout.
const GeometryVersion = 1

// GeometryLen is the length of an encoded Layout.
const GeometryLen = 7

// The geometry of a Key-Write region, as a collector advertises it
// (dta.Advertisement.Geometry, docs/DTA-WIRE.md section 8.4):
//
//	0  u8   geometry version, 1
//	1  u8   log2 S, 0..32
//	2  u8   hasher ID (tofino.HasherID: 0 Reference, 1 PerCopy, 2 XXHash)
//	3  le32 data size D, a positive multiple of 4 up to 2^30

// AppendBinary appends l's geometry to b. An invalid layout gets Validate's
// error (wrapping ErrLayout); a layout whose hasher is not one of tofino's
// built-ins has no encoding and gets an error wrapping ErrGeometry; either
// way b is returned unchanged.
func (l Layout) AppendBinary(b []byte) ([]byte, error) {
	if err := l.Validate(); err != nil {
		return b, err
	}
	id, ok := tofino.HasherID(l.hasher())
	if !ok {
		return b, fmt.Errorf("%w: hasher %T is not built in (tofino.HasherID)", ErrGeometry, l.Hasher)
	}
	b = append(b, GeometryVersion, byte(bits.Len64(l.Slots)-1), id)
	return binary.LittleEndian.AppendUint32(b, uint32(l.DataSize)), nil
}

// ParseLayout decodes a geometry AppendBinary wrote. Malformed bytes (a wrong
// length, an unknown version or hasher ID) get an error wrapping
// ErrGeometry; a geometry Validate rejects gets Validate's error, wrapping
// ErrLayout.
func ParseLayout(b []byte) (Layout, error) {
	if len(b) != GeometryLen {
		return Layout{}, fmt.Errorf("parse layout: %w: %d bytes, want %d", ErrGeometry, len(b), GeometryLen)
	}
	if b[0] != GeometryVersion {
		return Layout{}, fmt.Errorf("parse layout: %w: version %d, want %d", ErrGeometry, b[0], GeometryVersion)
	}
	if b[1] > 32 {
		return Layout{}, fmt.Errorf("parse layout: %w: log2 slot count %d above 32", ErrLayout, b[1])
	}
	h, err := tofino.HasherByID(b[2])
	if err != nil {
		return Layout{}, fmt.Errorf("parse layout: %w: %w", ErrGeometry, err)
	}
	d := binary.LittleEndian.Uint32(b[3:])
	if d > 1<<30 {
		return Layout{}, fmt.Errorf("parse layout: %w: data size %d above 2^30", ErrLayout, d)
	}
	l := Layout{Slots: 1 << b[1], DataSize: int(d), Hasher: h}
	if err := l.Validate(); err != nil {
		return Layout{}, fmt.Errorf("parse layout: %w", err)
	}
	return l, nil
}
