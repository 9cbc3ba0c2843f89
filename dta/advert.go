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
//	20  u8 version (1)
//	21  u8 primitive (the opcode the region serves)
//	22  le16 geometry length G
//	24  G bytes of geometry, defined by the primitive's package
//
// A 16-byte advertisement is the reference prototype's: region only, the
// primitive and geometry known to the translator by configuration.

// AdvertisementVersion is the version of the project's advertisement fields.
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
	if !a.Primitive.IsValid() {
		return b[:len(b)-advertRefLen], errAdvertOpcode
	}
	if len(a.Geometry) > MaxGeometryLen {
		return b[:len(b)-advertRefLen], errAdvertGeomLen
	}
	b = append(b, advertMagic...)
	b = append(b, AdvertisementVersion, byte(a.Primitive))
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
	if b[20] != AdvertisementVersion {
		return Advertisement{}, errAdvertVersion
	}
	a.Primitive = Opcode(b[21])
	if !a.Primitive.IsValid() {
		return Advertisement{}, errAdvertOpcode
	}
	if n := int(binary.LittleEndian.Uint16(b[22:])); n != len(b)-advertHeadLen {
		return Advertisement{}, errAdvertLength
	}
	a.Geometry = b[advertHeadLen:len(b):len(b)]
	return a, nil
}
