package tofino

import (
	"hash/crc32"
	"testing"
)

func TestSwitchMatchesIEEE(t *testing.T) {
	var dst [16]uint32
	for _, key := range []uint32{0, 1, 0xdeadbeef, 0xffffffff, 0x80000000} {
		b := []byte{byte(key), byte(key >> 8), byte(key >> 16), byte(key >> 24), 0}
		Switch.Slots(key, dst[:])
		for n := range 256 {
			b[4] = byte(n)
			want := crc32.ChecksumIEEE(b)
			if got := Switch.Slot(key, uint8(n)); got != want {
				t.Errorf("Slot(%#x, %d) = %#x, want %#x", key, n, got, want)
			}
			if got := crc32Hash.SumBytes(b); got != uint64(want) {
				t.Errorf("crc_32 SumBytes(%x) = %#x, want %#x", b, got, want)
			}
			if n < len(dst) && dst[n] != want {
				t.Errorf("Slots(%#x)[%d] = %#x, want %#x", key, n, dst[n], want)
			}
		}
		if got, want := Switch.Checksum(key), crc32.ChecksumIEEE(b[:4]); got != want {
			t.Errorf("Checksum(%#x) = %#x, want %#x", key, got, want)
		}
	}
}
