package translator

import (
	"encoding/binary"
	"fmt"

	"github.com/dtakit/dtakit/appendlist"
	"github.com/dtakit/dtakit/postcard"
)

// Geometry decoding of the advertisement. TEMPORARY: until each primitive
// package provides Layout.AppendBinary / ParseLayout (the lead adds them on
// main), the translator reads a provisional encoding of its own, written by
// appendGeometry for its tests. These functions are replaced by the
// packages' ParseLayout when main has them.

func parsePostcardGeometry(b []byte) (postcard.Layout, error) {
	if len(b) != 12 {
		return postcard.Layout{}, fmt.Errorf("postcarding geometry of %d bytes", len(b))
	}
	l := postcard.Layout{
		Hops: int(b[0]), SlotBits: int(b[1]), Copies: int(b[2]),
		Checksums: postcard.Checksums(b[3]), Addressing: postcard.Addressing(b[4]),
		Chunks: binary.LittleEndian.Uint32(b[8:]),
	}
	return l, l.Validate()
}

func parseAppendGeometry(b []byte) (appendlist.Layout, error) {
	if len(b) != 17 {
		return appendlist.Layout{}, fmt.Errorf("append geometry of %d bytes", len(b))
	}
	l := appendlist.Layout{
		Lists:     int(binary.LittleEndian.Uint32(b[0:])),
		Entries:   int(binary.LittleEndian.Uint32(b[4:])),
		EntrySize: int(binary.LittleEndian.Uint32(b[8:])),
		Batch:     int(binary.LittleEndian.Uint32(b[12:])),
		Markers:   b[16] != 0,
	}
	return l, l.Validate()
}

// appendGeometry encodes a layout as the parse functions above read it.
func appendGeometry(b []byte, layout any) []byte {
	switch l := layout.(type) {
	case postcard.Layout:
		b = append(b, byte(l.Hops), byte(l.SlotBits), byte(l.Copies), byte(l.Checksums), byte(l.Addressing), 0, 0, 0)
		return binary.LittleEndian.AppendUint32(b, l.Chunks)
	case appendlist.Layout:
		for _, v := range []int{l.Lists, l.Entries, l.EntrySize, l.Batch} {
			b = binary.LittleEndian.AppendUint32(b, uint32(v))
		}
		m := byte(0)
		if l.Markers {
			m = 1
		}
		return append(b, m)
	}
	return b
}
