package tofino

import (
	"errors"
	"testing"
)

// FuzzSumBytes cross-checks the table-driven SumBytes with the bitwise
// reference for arbitrary parameters and input, and checks that NewHash
// rejects, never panics on, invalid parameters.
func FuzzSumBytes(f *testing.F) {
	f.Add([]byte("123456789"), uint8(32), uint64(0x04C11DB7), true, uint64(0xFFFFFFFF), uint64(0xFFFFFFFF), true, uint8(32))
	f.Add([]byte{0x56, 0xD9}, uint8(16), uint64(0x1021), true, uint64(0xB2AA), uint64(0), false, uint8(13))
	f.Add([]byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13}, uint8(64), uint64(0x42F0E1EBA9EA3693), false, uint64(1), uint64(2), true, uint8(64))
	f.Add([]byte{}, uint8(8), uint64(0x06), false, uint64(0x1FF), uint64(0), true, uint8(0))
	f.Fuzz(func(t *testing.T, data []byte, width uint8, poly uint64, reversed bool, init, xor uint64, extend bool, outBits uint8) {
		c := CRC{Width: int(width), Poly: poly, Reversed: reversed, Init: init, XorOut: xor, Extend: extend, AllowEven: poly&2 != 0}
		h, err := NewHash(int(outBits), c)
		if err != nil {
			if h != nil || !errors.Is(err, ErrInvalidCRC) {
				t.Fatalf("NewHash(%d, %+v) = %v, %v", outBits, c, h, err)
			}
			return
		}
		want := outputReference(c, int(outBits), crcBitwise(c, data))
		if got := h.SumBytes(data); got != want {
			t.Fatalf("%+v W=%d %x: SumBytes = %#x, reference %#x", c, outBits, data, got, want)
		}
	})
}

// FuzzSum builds a field list from data, two bytes of width then up to eight
// bytes of value per field, and cross-checks Sum with the reference, or
// checks that a bad field is reported.
func FuzzSum(f *testing.F) {
	f.Add([]byte{15, 0x56, 0xD9, 1, 1}, uint8(16), true)
	f.Add([]byte{32, 0xDE, 0xAD, 0xBE, 0xEF, 8, 7}, uint8(32), false)
	f.Add([]byte{0, 1, 65, 1}, uint8(64), true)
	f.Fuzz(func(t *testing.T, data []byte, width uint8, reversed bool) {
		crcs := map[uint8]CRC{
			8:  {Width: 8, Poly: 0x1D, Init: 0xFD, Reversed: reversed},
			16: {Width: 16, Poly: 0x1021, Init: 0xB2AA, Reversed: reversed, Extend: true},
			32: {Width: 32, Poly: 0x04C11DB7, Init: 0xFFFFFFFF, XorOut: 0xFFFFFFFF, Reversed: reversed, Extend: true},
			64: {Width: 64, Poly: 0x42F0E1EBA9EA3693, Init: 0xFFFFFFFFFFFFFFFF, Reversed: reversed},
		}
		c, ok := crcs[width]
		if !ok {
			return
		}
		h, err := NewHash(64, c)
		if err != nil {
			t.Fatal(err)
		}
		var fl FieldList
		var values []uint64
		var widths []int
		bad := false
		total := 0
		for len(data) > 0 {
			w := int(data[0])
			data = data[1:]
			var v uint64
			for i := 0; i < (w+7)/8 && len(data) > 0; i++ {
				v = v<<8 | uint64(data[0])
				data = data[1:]
			}
			fl.Add(v, w)
			if w < 1 || w > 64 || (w < 64 && v>>w != 0) || total+w > MaxFieldListBits {
				bad = true
				break
			}
			values = append(values, v)
			widths = append(widths, w)
			total += w
		}
		got, err := h.Sum(&fl)
		if bad {
			if !errors.Is(err, ErrFieldList) || got != 0 {
				t.Fatalf("bad field: Sum = %#x, %v; want ErrFieldList", got, err)
			}
			return
		}
		if want := sumReference(c, 64, values, widths); err != nil || got != want {
			t.Fatalf("%v/%v: Sum = %#x, %v; reference %#x", values, widths, got, err, want)
		}
		if fl.Len() != total {
			t.Fatalf("Len = %d, want %d", fl.Len(), total)
		}
	})
}

// FuzzPerCopy cross-checks PerCopy's Slot and Slots with the bitwise
// reference CRC of CopyCRC(n) over le32(key) ‖ u8(n), for any key and copy.
func FuzzPerCopy(f *testing.F) {
	f.Add(uint32(0), uint8(0))
	f.Add(uint32(0xdeadbeef), uint8(1))
	f.Add(uint32(0xffffffff), uint8(255))
	f.Fuzz(func(t *testing.T, key uint32, n uint8) {
		in := []byte{byte(key), byte(key >> 8), byte(key >> 16), byte(key >> 24), n}
		want := uint32(crcBitwise(CopyCRC(n), in))
		if got := PerCopy.Slot(key, n); got != want {
			t.Fatalf("Slot(%#x, %d) = %#x, reference %#x", key, n, got, want)
		}
		dst := make([]uint32, int(n)+1)
		PerCopy.Slots(key, dst)
		if dst[n] != want {
			t.Fatalf("Slots(%#x)[%d] = %#x, reference %#x", key, n, dst[n], want)
		}
	})
}
