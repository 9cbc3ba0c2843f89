package tofino

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

// catalogueCheck holds the check value, the CRC of the nine ASCII bytes
// "123456789", of each predefined algorithm, as the CRC catalogue
// (reveng.sourceforge.io/crc-catalogue, under the catalogue's name given in
// the comment) states it. crc_64_jones is not in that catalogue under these
// parameters; its value is from the crcmod predefined list
// (protocoltool.sourceforge.net "CRC list", CRC-64/Jones).
var catalogueCheck = map[string]uint64{
	"crc_8":           0xF4,               // CRC-8/SMBUS
	"crc_8_darc":      0x15,               // CRC-8/DARC
	"crc_8_i_code":    0x7E,               // CRC-8/I-CODE
	"crc_8_maxim":     0xA1,               // CRC-8/MAXIM-DOW
	"crc_8_rohc":      0xD0,               // CRC-8/ROHC
	"crc_8_wcdma":     0x25,               // CRC-8/WCDMA
	"crc_16":          0xBB3D,             // CRC-16/ARC
	"crc_16_bypass":   0xFEE8,             // CRC-16/UMTS (BUYPASS)
	"crc_16_dds_110":  0x9ECF,             // CRC-16/DDS-110
	"crc_16_dect_r":   0x007E,             // CRC-16/DECT-R
	"crc_16_dect_x":   0x007F,             // CRC-16/DECT-X
	"crc_16_dnp":      0xEA82,             // CRC-16/DNP
	"crc_16_en_13757": 0xC2B7,             // CRC-16/EN-13757
	"crc_16_genibus":  0xD64E,             // CRC-16/GENIBUS
	"crc_16_maxim":    0x44C2,             // CRC-16/MAXIM-DOW
	"crc_16_mcrf4xx":  0x6F91,             // CRC-16/MCRF4XX
	"crc_16_riello":   0x63D0,             // CRC-16/RIELLO
	"crc_16_t10_dif":  0xD0DB,             // CRC-16/T10-DIF
	"crc_16_teledisk": 0x0FB3,             // CRC-16/TELEDISK
	"crc_16_usb":      0xB4C8,             // CRC-16/USB
	"x_25":            0x906E,             // CRC-16/IBM-SDLC
	"xmodem":          0x31C3,             // CRC-16/XMODEM
	"modbus":          0x4B37,             // CRC-16/MODBUS
	"kermit":          0x2189,             // CRC-16/KERMIT
	"crc_ccitt_false": 0x29B1,             // CRC-16/IBM-3740 (CCITT-FALSE)
	"crc_aug_ccitt":   0xE5CC,             // CRC-16/SPI-FUJITSU (AUG-CCITT)
	"crc_32":          0xCBF43926,         // CRC-32/ISO-HDLC
	"crc_32_bzip2":    0xFC891918,         // CRC-32/BZIP2
	"crc_32c":         0xE3069283,         // CRC-32/ISCSI
	"crc_32d":         0x87315576,         // CRC-32/BASE91-D
	"crc_32_mpeg":     0x0376E6E7,         // CRC-32/MPEG-2
	"posix":           0x765E7680,         // CRC-32/CKSUM
	"crc_32q":         0x3010BF7F,         // CRC-32/AIXM
	"jamcrc":          0x340BC6D9,         // CRC-32/JAMCRC
	"xfer":            0xBD0BE338,         // CRC-32/XFER
	"crc_64":          0x6C40DF5F0B497347, // CRC-64/ECMA-182
	"crc_64_go_iso":   0xB90956C775A41001, // CRC-64/GO-ISO
	"crc_64_we":       0x62EC59E3F1A4F00A, // CRC-64/WE
	"crc_64_jones":    0xCAA717168609F281, // crcmod crc-64-jones
	"CRC8":            0xF4,
	"CRC16":           0xBB3D,
	"CRC32":           0xCBF43926,
	"CRC64":           0x6C40DF5F0B497347,
}

// noCatalogueEntry are the two bf-utils algorithms whose parameters are in no
// catalogue (bf-utils took crc_8_itu's init from crcmod, where init means
// something else; it keeps crc_16_dect "to not break regressions"). The
// vectors cover them; here their catalogue relatives are checked instead.
var noCatalogueEntry = map[string]struct {
	relative CRC
	check    uint64
}{
	// CRC-8/I-432-1: crc_8_itu with init 0.
	"crc_8_itu": {CRC{Width: 8, Poly: 0x07, XorOut: 0x55}, 0xA1},
	// CRC-16/DECT-R: crc_16_dect with init 0.
	"crc_16_dect": {CRC{Width: 16, Poly: 0x0589, XorOut: 0x0001}, 0x007E},
}

func TestCatalogueCheck(t *testing.T) {
	msg := []byte("123456789")
	for _, name := range Names() {
		if rel, ok := noCatalogueEntry[name]; ok {
			c, _ := Predefined(name)
			c.Init = 0
			if c != (CRC{Width: rel.relative.Width, Poly: rel.relative.Poly, XorOut: rel.relative.XorOut, Extend: true}) {
				t.Errorf("%s with init 0 = %+v, not its catalogue relative %+v", name, c, rel.relative)
			}
			h, err := NewHash(rel.relative.Width, rel.relative)
			if err != nil {
				t.Fatal(err)
			}
			if got := h.SumBytes(msg); got != rel.check {
				t.Errorf("%s's relative: check = %#x, want %#x", name, got, rel.check)
			}
			continue
		}
		want, ok := catalogueCheck[name]
		if !ok {
			t.Errorf("no check value for %s", name)
			continue
		}
		c, err := Predefined(name)
		if err != nil {
			t.Fatal(err)
		}
		h, err := NewHash(c.Width, c)
		if err != nil {
			t.Fatal(err)
		}
		if got := h.SumBytes(msg); got != want {
			t.Errorf("%s: SumBytes(\"123456789\") = %#x, want %#x", name, got, want)
		}
		if got := crcBitwise(c, msg); got != want {
			t.Errorf("%s: reference(\"123456789\") = %#x, want %#x", name, got, want)
		}
	}
	if n := len(catalogueCheck) + len(noCatalogueEntry); n != len(Names()) {
		t.Errorf("%d check values for %d names", n, len(Names()))
	}
}

// bfUtilsNames is bf-utils' bfn_crc_alg_t, in its order.
var bfUtilsNames = []string{
	"crc_8", "crc_8_darc", "crc_8_i_code", "crc_8_itu", "crc_8_maxim", "crc_8_rohc", "crc_8_wcdma",
	"crc_16", "crc_16_bypass", "crc_16_dds_110", "crc_16_dect", "crc_16_dect_r", "crc_16_dect_x",
	"crc_16_dnp", "crc_16_en_13757", "crc_16_genibus", "crc_16_maxim", "crc_16_mcrf4xx",
	"crc_16_riello", "crc_16_t10_dif", "crc_16_teledisk", "crc_16_usb", "x_25", "xmodem",
	"modbus", "kermit", "crc_ccitt_false", "crc_aug_ccitt",
	"crc_32", "crc_32_bzip2", "crc_32c", "crc_32d", "crc_32_mpeg", "posix", "crc_32q", "jamcrc", "xfer",
	"crc_64", "crc_64_go_iso", "crc_64_we", "crc_64_jones",
}

func TestNames(t *testing.T) {
	want := append(slices.Clone(bfUtilsNames), "CRC8", "CRC16", "CRC32", "CRC64")
	if got := Names(); !slices.Equal(got, want) {
		t.Errorf("Names() = %q\nwant %q", got, want)
	}
	if len(bfUtilsNames) != 41 {
		t.Fatalf("bfUtilsNames has %d names", len(bfUtilsNames))
	}
	Names()[0] = "clobbered"
	if Names()[0] != "crc_8" {
		t.Error("Names returns the package's own slice")
	}
}

func TestPredefined(t *testing.T) {
	for _, tc := range []struct{ alias, name string }{
		{"CRC8", "crc_8"}, {"CRC16", "crc_16"}, {"CRC32", "crc_32"}, {"CRC64", "crc_64"},
		{"CRC_32", "crc_32"}, {"Crc_16_Riello", "crc_16_riello"}, {"X_25", "x_25"},
	} {
		a, err := Predefined(tc.alias)
		if err != nil {
			t.Fatal(err)
		}
		b, err := Predefined(tc.name)
		if err != nil {
			t.Fatal(err)
		}
		if a != b {
			t.Errorf("Predefined(%q) = %+v, Predefined(%q) = %+v", tc.alias, a, tc.name, b)
		}
	}
	for _, name := range Names() {
		c, err := Predefined(name)
		if err != nil {
			t.Fatal(err)
		}
		if !c.Extend || c.AllowEven || c.Validate() != nil {
			t.Errorf("Predefined(%q) = %+v: want a valid, extending CRC", name, c)
		}
	}
	for _, bad := range []string{"", "crc32c", "crc_33", "CRC", "crc_8 ", "CUSTOM", "IDENTITY"} {
		_, err := Predefined(bad)
		if !errors.Is(err, ErrUnknownAlgorithm) {
			t.Errorf("Predefined(%q) error = %v, want ErrUnknownAlgorithm", bad, err)
		} else if !strings.Contains(err.Error(), "\""+bad+"\"") {
			t.Errorf("Predefined(%q) error %q does not name it", bad, err)
		}
		if _, err := NewPredefined(32, bad); !errors.Is(err, ErrUnknownAlgorithm) {
			t.Errorf("NewPredefined(32, %q) error = %v, want ErrUnknownAlgorithm", bad, err)
		}
	}
}
