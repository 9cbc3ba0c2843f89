package dta

import (
	"encoding/binary"
	"errors"
)

// The collector advertisement (spec section 5, section 8.1 of the project
// spec): after an RC connection is up the collector SENDs the translator the
// description of the region behind it.
//
//	0   le64 base virtual address    \
//	8   le32 region length            > reference-compatible
//	12  le32 rkey                    /
//	16  "DTAK"                        magic: the project's fields follow
//	20  u8 version (1; 2: list heads follow, Append only)
//	21  u8 primitive (the opcode the region serves)
//	22  le16 geometry length G
//	24  G bytes of geometry, defined by the primitive's package
//
// A 16-byte advertisement is the reference prototype's: region only, the
// primitive and geometry known to the translator by configuration.

// AdvertisementVersion is the version of the project's advertisement fields.
// Version 2 is version 1 followed by ListHeads SENDs (HeadsFollow).
const AdvertisementVersion = 1

const (
	advertRefLen  = 16
	advertHeadLen = 24
	advertMagic   = "DTAK"
	// MaxGeometryLen bounds the primitive-defined geometry so an
	// advertisement fits one SEND at the smallest RoCE path MTU (256 bytes).
	MaxGeometryLen = 256 - advertHeadLen
)

// ErrAdvertisement is wrapped by every error about a collector advertisement.
var ErrAdvertisement = errors.New("bad collector advertisement")

var (
	errAdvertShort   = newError("advertisement", ErrAdvertisement, "shorter than the 16 reference bytes")
	errAdvertMagic   = newError("advertisement", ErrAdvertisement, "bytes after the reference 16 do not start with DTAK")
	errAdvertVersion = newError("advertisement", ErrAdvertisement, "unknown version")
	errAdvertLength  = newError("advertisement", ErrAdvertisement, "geometry length disagrees with the bytes present")
	errAdvertOpcode  = newError("advertisement", ErrAdvertisement, "unknown primitive")
	errAdvertGeomLen = newError("advertisement", ErrAdvertisement, "geometry longer than MaxGeometryLen")
	errAdvertHeads   = newError("advertisement", ErrAdvertisement, "list heads follow only an Append advertisement")
	errHeadsShort    = newError("list heads", ErrAdvertisement, "not DTAH, a first list and at least one head")
	errHeadsLength   = newError("list heads", ErrAdvertisement, "length not 8 + 8 per head, or more than MaxHeadsPerSend heads")
)

// Advertisement describes the memory region a collector serves on one RC
// connection.
type Advertisement struct {
	VA     uint64 // base virtual address of the region
	Length uint32 // region length in bytes
	RKey   uint32
	// Primitive is the primitive the region serves; 0 in a reference-only
	// (16-byte) advertisement.
	Primitive Opcode
	// Geometry is the primitive's layout as its package encodes it; empty in
	// a reference-only advertisement. ParseAdvertisement aliases its input.
	Geometry []byte
	// HeadsFollow (version 2, Append only) says the collector SENDs the
	// lists' heads next, in ListHeads messages covering every list in
	// order: the translator writes each list from there.
	HeadsFollow bool
}

// IsReference reports whether a carries only the reference-compatible
// fields.
func (a *Advertisement) IsReference() bool { return a.Primitive == 0 }

// AppendTo appends the encoded advertisement to b: the 16 reference bytes
// alone when a.IsReference, otherwise the project's fields too. It reports
// an error for an unknown primitive or an oversized geometry.
func (a *Advertisement) AppendTo(b []byte) ([]byte, error) {
	b = binary.LittleEndian.AppendUint64(b, a.VA)
	b = binary.LittleEndian.AppendUint32(b, a.Length)
	b = binary.LittleEndian.AppendUint32(b, a.RKey)
	if a.IsReference() {
		return b, nil
	}
	if !a.Primitive.IsKnown() {
		return b[:len(b)-advertRefLen], errAdvertOpcode
	}
	if len(a.Geometry) > MaxGeometryLen {
		return b[:len(b)-advertRefLen], errAdvertGeomLen
	}
	if a.HeadsFollow && a.Primitive != OpAppend {
		return b[:len(b)-advertRefLen], errAdvertHeads
	}
	v := byte(AdvertisementVersion)
	if a.HeadsFollow {
		v = 2
	}
	b = append(b, advertMagic...)
	b = append(b, v, byte(a.Primitive))
	b = binary.LittleEndian.AppendUint16(b, uint16(len(a.Geometry)))
	return append(b, a.Geometry...), nil
}

// ParseAdvertisement decodes an advertisement. Bytes beyond the declared
// geometry are an error, since a SEND carries exactly one advertisement.
// It does not allocate.
func ParseAdvertisement(b []byte) (Advertisement, error) {
	if len(b) < advertRefLen {
		return Advertisement{}, errAdvertShort
	}
	a := Advertisement{
		VA:     binary.LittleEndian.Uint64(b[0:]),
		Length: binary.LittleEndian.Uint32(b[8:]),
		RKey:   binary.LittleEndian.Uint32(b[12:]),
	}
	if len(b) == advertRefLen {
		return a, nil
	}
	if len(b) < advertHeadLen || string(b[16:20]) != advertMagic {
		return Advertisement{}, errAdvertMagic
	}
	if b[20] != AdvertisementVersion && b[20] != 2 {
		return Advertisement{}, errAdvertVersion
	}
	a.Primitive = Opcode(b[21])
	if !a.Primitive.IsKnown() {
		return Advertisement{}, errAdvertOpcode
	}
	if a.HeadsFollow = b[20] == 2; a.HeadsFollow && a.Primitive != OpAppend {
		return Advertisement{}, errAdvertHeads
	}
	if n := int(binary.LittleEndian.Uint16(b[22:])); n != len(b)-advertHeadLen {
		return Advertisement{}, errAdvertLength
	}
	a.Geometry = b[advertHeadLen:len(b):len(b)]
	return a, nil
}

// List heads (version 2 advertisements): after an Append advertisement with
// HeadsFollow the collector SENDs the heads of every list, in order, as
// many of these as it takes:
//
//	0   "DTAH"
//	4   le32 first list
//	8   le64 head of the first list, then of the next, ...
//
// A head is the absolute position (entries appended since the list began,
// not reduced modulo the ring) the translator's next entry of the list
// takes.
const (
	headsMagic = "DTAH"
	headsHdr   = 8
	// MaxHeadsPerSend is the heads one SEND carries at a 1024-byte path MTU.
	MaxHeadsPerSend = (1024 - headsHdr) / 8
	// MaxHeadLists bounds the lists whose heads a collector SENDs (about
	// 520 SENDs): a larger Append instance is advertised without them.
	MaxHeadLists = 1 << 16
)

// ListHeads is one SEND of list heads.
type ListHeads struct {
	First uint32
	Heads []uint64 // ParseListHeads aliases nothing: it appends to dst
}

// AppendListHeads appends the encoded message of heads, the first for list
// first, to b.
func AppendListHeads(b []byte, first uint32, heads []uint64) []byte {
	b = append(b, headsMagic...)
	b = binary.LittleEndian.AppendUint32(b, first)
	for _, h := range heads {
		b = binary.LittleEndian.AppendUint64(b, h)
	}
	return b
}

// ParseListHeads decodes a list heads message, appending the heads to dst.
func ParseListHeads(b []byte, dst []uint64) (ListHeads, error) {
	if len(b) < headsHdr+8 || string(b[:4]) != headsMagic {
		return ListHeads{}, errHeadsShort
	}
	n := (len(b) - headsHdr) / 8
	if (len(b)-headsHdr)%8 != 0 || n > MaxHeadsPerSend {
		return ListHeads{}, errHeadsLength
	}
	for i := range n {
		dst = append(dst, binary.LittleEndian.Uint64(b[headsHdr+8*i:]))
	}
	return ListHeads{First: binary.LittleEndian.Uint32(b[4:]), Heads: dst}, nil
}
