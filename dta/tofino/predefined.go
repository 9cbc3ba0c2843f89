package tofino

import (
	"fmt"
	"strings"
)

// predefined lists the 41 algorithms bf-utils (dynamic_hash) names, in its
// order and with its parameters, then the TNA HashAlgorithm_t names, which are
// bf-utils crc_8, crc_16, crc_32 and crc_64.
//
// Two differ from the CRC catalogue entry of the same name, as they do in
// bf-utils: crc_8_itu has init 0x55 (the catalogue's CRC-8/I-432-1 has 0), and
// crc_16_dect (init 1, xor 1) is in no catalogue. crc_64_jones has init
// all-ones, unlike the catalogue's CRC-64/REDIS with the same polynomial.
var predefined = [...]struct {
	name string
	crc  CRC
}{
	{"crc_8", CRC{Width: 8, Poly: 0x07, Reversed: false, Init: 0x00, XorOut: 0x00, Extend: true}},
	{"crc_8_darc", CRC{Width: 8, Poly: 0x39, Reversed: true, Init: 0x00, XorOut: 0x00, Extend: true}},
	{"crc_8_i_code", CRC{Width: 8, Poly: 0x1D, Reversed: false, Init: 0xFD, XorOut: 0x00, Extend: true}},
	{"crc_8_itu", CRC{Width: 8, Poly: 0x07, Reversed: false, Init: 0x55, XorOut: 0x55, Extend: true}},
	{"crc_8_maxim", CRC{Width: 8, Poly: 0x31, Reversed: true, Init: 0x00, XorOut: 0x00, Extend: true}},
	{"crc_8_rohc", CRC{Width: 8, Poly: 0x07, Reversed: true, Init: 0xFF, XorOut: 0x00, Extend: true}},
	{"crc_8_wcdma", CRC{Width: 8, Poly: 0x9B, Reversed: true, Init: 0x00, XorOut: 0x00, Extend: true}},
	{"crc_16", CRC{Width: 16, Poly: 0x8005, Reversed: true, Init: 0x0000, XorOut: 0x0000, Extend: true}},
	{"crc_16_bypass", CRC{Width: 16, Poly: 0x8005, Reversed: false, Init: 0x0000, XorOut: 0x0000, Extend: true}},
	{"crc_16_dds_110", CRC{Width: 16, Poly: 0x8005, Reversed: false, Init: 0x800D, XorOut: 0x0000, Extend: true}},
	{"crc_16_dect", CRC{Width: 16, Poly: 0x0589, Reversed: false, Init: 0x0001, XorOut: 0x0001, Extend: true}},
	{"crc_16_dect_r", CRC{Width: 16, Poly: 0x0589, Reversed: false, Init: 0x0000, XorOut: 0x0001, Extend: true}},
	{"crc_16_dect_x", CRC{Width: 16, Poly: 0x0589, Reversed: false, Init: 0x0000, XorOut: 0x0000, Extend: true}},
	{"crc_16_dnp", CRC{Width: 16, Poly: 0x3D65, Reversed: true, Init: 0x0000, XorOut: 0xFFFF, Extend: true}},
	{"crc_16_en_13757", CRC{Width: 16, Poly: 0x3D65, Reversed: false, Init: 0x0000, XorOut: 0xFFFF, Extend: true}},
	{"crc_16_genibus", CRC{Width: 16, Poly: 0x1021, Reversed: false, Init: 0xFFFF, XorOut: 0xFFFF, Extend: true}},
	{"crc_16_maxim", CRC{Width: 16, Poly: 0x8005, Reversed: true, Init: 0x0000, XorOut: 0xFFFF, Extend: true}},
	{"crc_16_mcrf4xx", CRC{Width: 16, Poly: 0x1021, Reversed: true, Init: 0xFFFF, XorOut: 0x0000, Extend: true}},
	{"crc_16_riello", CRC{Width: 16, Poly: 0x1021, Reversed: true, Init: 0xB2AA, XorOut: 0x0000, Extend: true}},
	{"crc_16_t10_dif", CRC{Width: 16, Poly: 0x8BB7, Reversed: false, Init: 0x0000, XorOut: 0x0000, Extend: true}},
	{"crc_16_teledisk", CRC{Width: 16, Poly: 0xA097, Reversed: false, Init: 0x0000, XorOut: 0x0000, Extend: true}},
	{"crc_16_usb", CRC{Width: 16, Poly: 0x8005, Reversed: true, Init: 0xFFFF, XorOut: 0xFFFF, Extend: true}},
	{"x_25", CRC{Width: 16, Poly: 0x1021, Reversed: true, Init: 0xFFFF, XorOut: 0xFFFF, Extend: true}},
	{"xmodem", CRC{Width: 16, Poly: 0x1021, Reversed: false, Init: 0x0000, XorOut: 0x0000, Extend: true}},
	{"modbus", CRC{Width: 16, Poly: 0x8005, Reversed: true, Init: 0xFFFF, XorOut: 0x0000, Extend: true}},
	{"kermit", CRC{Width: 16, Poly: 0x1021, Reversed: true, Init: 0x0000, XorOut: 0x0000, Extend: true}},
	{"crc_ccitt_false", CRC{Width: 16, Poly: 0x1021, Reversed: false, Init: 0xFFFF, XorOut: 0x0000, Extend: true}},
	{"crc_aug_ccitt", CRC{Width: 16, Poly: 0x1021, Reversed: false, Init: 0x1D0F, XorOut: 0x0000, Extend: true}},
	{"crc_32", CRC{Width: 32, Poly: 0x04C11DB7, Reversed: true, Init: 0xFFFFFFFF, XorOut: 0xFFFFFFFF, Extend: true}},
	{"crc_32_bzip2", CRC{Width: 32, Poly: 0x04C11DB7, Reversed: false, Init: 0xFFFFFFFF, XorOut: 0xFFFFFFFF, Extend: true}},
	{"crc_32c", CRC{Width: 32, Poly: 0x1EDC6F41, Reversed: true, Init: 0xFFFFFFFF, XorOut: 0xFFFFFFFF, Extend: true}},
	{"crc_32d", CRC{Width: 32, Poly: 0xA833982B, Reversed: true, Init: 0xFFFFFFFF, XorOut: 0xFFFFFFFF, Extend: true}},
	{"crc_32_mpeg", CRC{Width: 32, Poly: 0x04C11DB7, Reversed: false, Init: 0xFFFFFFFF, XorOut: 0x00000000, Extend: true}},
	{"posix", CRC{Width: 32, Poly: 0x04C11DB7, Reversed: false, Init: 0x00000000, XorOut: 0xFFFFFFFF, Extend: true}},
	{"crc_32q", CRC{Width: 32, Poly: 0x814141AB, Reversed: false, Init: 0x00000000, XorOut: 0x00000000, Extend: true}},
	{"jamcrc", CRC{Width: 32, Poly: 0x04C11DB7, Reversed: true, Init: 0xFFFFFFFF, XorOut: 0x00000000, Extend: true}},
	{"xfer", CRC{Width: 32, Poly: 0x000000AF, Reversed: false, Init: 0x00000000, XorOut: 0x00000000, Extend: true}},
	{"crc_64", CRC{Width: 64, Poly: 0x42F0E1EBA9EA3693, Reversed: false, Init: 0x0000000000000000, XorOut: 0x0000000000000000, Extend: true}},
	{"crc_64_go_iso", CRC{Width: 64, Poly: 0x000000000000001B, Reversed: true, Init: 0xFFFFFFFFFFFFFFFF, XorOut: 0xFFFFFFFFFFFFFFFF, Extend: true}},
	{"crc_64_we", CRC{Width: 64, Poly: 0x42F0E1EBA9EA3693, Reversed: false, Init: 0xFFFFFFFFFFFFFFFF, XorOut: 0xFFFFFFFFFFFFFFFF, Extend: true}},
	{"crc_64_jones", CRC{Width: 64, Poly: 0xAD93D23594C935A9, Reversed: true, Init: 0xFFFFFFFFFFFFFFFF, XorOut: 0x0000000000000000, Extend: true}},
	{"CRC8", CRC{Width: 8, Poly: 0x07, Reversed: false, Init: 0x00, XorOut: 0x00, Extend: true}},
	{"CRC16", CRC{Width: 16, Poly: 0x8005, Reversed: true, Init: 0x0000, XorOut: 0x0000, Extend: true}},
	{"CRC32", CRC{Width: 32, Poly: 0x04C11DB7, Reversed: true, Init: 0xFFFFFFFF, XorOut: 0xFFFFFFFF, Extend: true}},
	{"CRC64", CRC{Width: 64, Poly: 0x42F0E1EBA9EA3693, Reversed: false, Init: 0x0000000000000000, XorOut: 0x0000000000000000, Extend: true}},
}

// Predefined returns the predefined algorithm called name: one of the 41
// bf-utils names (crc_8 … crc_64_jones, as [Names] lists them) or a TNA
// HashAlgorithm_t name (CRC8, CRC16, CRC32, CRC64). Names match regardless of
// case, as bf-utils accepts both crc_32 and CRC_32. The CRC extends, as
// predefined algorithms do on the switch. An unknown name gets an error
// wrapping ErrUnknownAlgorithm.
func Predefined(name string) (CRC, error) {
	for _, p := range predefined {
		if strings.EqualFold(p.name, name) {
			return p.crc, nil
		}
	}
	return CRC{}, fmt.Errorf("%w: %q is neither a bf-utils algorithm (crc_8 … crc_64_jones) nor CRC8, CRC16, CRC32 or CRC64", ErrUnknownAlgorithm, name)
}

// Names returns the names Predefined knows: the 41 bf-utils names in bf-utils
// order, then CRC8, CRC16, CRC32 and CRC64.
func Names() []string {
	names := make([]string, len(predefined))
	for i, p := range predefined {
		names[i] = p.name
	}
	return names
}

// NewPredefined returns Hash<bit<outBits>>(name) for a predefined algorithm.
func NewPredefined(outBits int, name string) (*Hash, error) {
	c, err := Predefined(name)
	if err != nil {
		return nil, err
	}
	return NewHash(outBits, c)
}
