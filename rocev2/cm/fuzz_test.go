package cm

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"testing"
)

// FuzzDecodeMAD: DecodeMAD never panics, returns only this package's errors,
// and a MAD it accepts re-encodes to the same bytes up to reserved bits and
// decodes again to the same message.
func FuzzDecodeMAD(f *testing.F) {
	r := rand.New(rand.NewPCG(9, 9))
	for _, m := range randomMessages(r) {
		mad, err := AppendMAD(nil, Header(r.Uint64(), 0), m)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(mad)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		h, m, err := DecodeMAD(b)
		if err != nil {
			for _, e := range []error{ErrTruncated, ErrLength, ErrClass, ErrAttribute, ErrField} {
				if errors.Is(err, e) {
					return
				}
			}
			t.Fatalf("foreign error %v", err)
		}
		if err := m.Validate(); err != nil {
			t.Fatalf("decoded %v does not validate: %v", m.AttrID(), err)
		}
		enc, err := AppendMAD(nil, h, m)
		if err != nil {
			t.Fatal(err)
		}
		h2, m2, err := DecodeMAD(enc)
		if err != nil || h2 != h || !bytes.Equal(m2.AppendTo(nil), m.AppendTo(nil)) {
			t.Fatalf("re-decoded %v differs: %v", m.AttrID(), err)
		}
		// Only reserved bits may differ from the input; the 16-bit
		// reserved word of the header is one of them.
		for i := range enc {
			if enc[i]&^b[i] != 0 {
				t.Fatalf("byte %d: encoded %#x sets bits the input %#x lacks", i, enc[i], b[i])
			}
		}
	})
}

// FuzzDecodeIPHeader: DecodeIPHeader never panics and what it accepts
// re-encodes to the same bytes, up to the bytes an IPv4 header ignores.
func FuzzDecodeIPHeader(f *testing.F) {
	f.Add(make([]byte, 36))
	f.Add(append([]byte{0, 0x40, 0xC0, 0}, make([]byte, 32)...))
	f.Add(append([]byte{0, 0x60, 0xC0, 0}, bytes.Repeat([]byte{0xAB}, 32)...))
	f.Fuzz(func(t *testing.T, b []byte) {
		h, err := DecodeIPHeader(b)
		if err != nil {
			if !errors.Is(err, ErrTruncated) && !errors.Is(err, ErrField) {
				t.Fatalf("foreign error %v", err)
			}
			return
		}
		enc := h.AppendTo(nil)
		if h.Src.Is4() {
			if !bytes.Equal(enc[2:4], b[2:4]) || !bytes.Equal(enc[16:20], b[16:20]) || !bytes.Equal(enc[32:36], b[32:36]) {
				t.Fatalf("IPv4 header re-encodes differently")
			}
		} else if !bytes.Equal(enc[2:36], b[2:36]) {
			t.Fatalf("IPv6 header re-encodes differently")
		}
		if enc[1] != b[1]&0xF0 {
			t.Fatalf("version byte %#x from %#x", enc[1], b[1])
		}
	})
}
