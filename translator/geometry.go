package translator

import (
	"encoding/binary"
	"fmt"

	"github.com/dtakit/dtakit/appendlist"
	"github.com/dtakit/dtakit/dta/tofino"
	"github.com/dtakit/dtakit/keyincr"
	"github.com/dtakit/dtakit/keywrite"
	"github.com/dtakit/dtakit/postcard"
)

// tempGeometry stands for the packages' layout encodings in tests.
type tempKeyWrite struct {
	Slots    uint64
	DataSize int
	XXHash   bool
}

type tempKeyIncrement struct {
	Slots  uint64
	XXHash bool
}

func tempHasher(b byte) (tofino.Hasher, error) {
	switch b {
	case 0:
		return tofino.Switch, nil
	case 1:
		return tofino.XXHash, nil
	}
	return nil, fmt.Errorf("hasher %d", b)
}

func parseKeyWriteGeometry(b []byte) (keywrite.Layout, error) {
	if len(b) != 13 {
		return keywrite.Layout{}, fmt.Errorf("key-write geometry of %d bytes", len(b))
	}
	h, err := tempHasher(b[12])
	if err != nil {
		return keywrite.Layout{}, err
	}
	return keywrite.NewLayout(binary.LittleEndian.Uint64(b), int(binary.LittleEndian.Uint32(b[8:])), keywrite.WithHasher(h))
}

func parseKeyIncrementGeometry(b []byte) (keyincr.Layout, error) {
	if len(b) != 9 {
		return keyincr.Layout{}, fmt.Errorf("key-increment geometry of %d bytes", len(b))
	}
	h, err := tempHasher(b[8])
	if err != nil {
		return keyincr.Layout{}, err
	}
	return keyincr.NewLayout(binary.LittleEndian.Uint64(b), keyincr.WithHasher(h))
}

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
	case tempKeyWrite:
		b = binary.LittleEndian.AppendUint64(b, l.Slots)
		b = binary.LittleEndian.AppendUint32(b, uint32(l.DataSize))
		return append(b, boolByte(l.XXHash))
	case tempKeyIncrement:
		b = binary.LittleEndian.AppendUint64(b, l.Slots)
		return append(b, boolByte(l.XXHash))
	case postcard.Layout:
		b = append(b, byte(l.Hops), byte(l.SlotBits), byte(l.Copies), byte(l.Checksums), byte(l.Addressing), 0, 0, 0)
		return binary.LittleEndian.AppendUint32(b, l.Chunks)
	case appendlist.Layout:
		for _, v := range []int{l.Lists, l.Entries, l.EntrySize, l.Batch} {
			b = binary.LittleEndian.AppendUint32(b, uint32(v))
		}
		return append(b, boolByte(l.Markers))
	}
	return b
}

func boolByte(v bool) byte {
	if v {
		return 1
	}
	return 0
}
