package tofino

import (
	"hash/crc32"
	"testing"
)

func TestSwitchMatchesIEEE(t *testing.T) {
	for _, key := range []uint32{0, 1, 0xdeadbeef} {
		b := []byte{byte(key), byte(key >> 8), byte(key >> 16), byte(key >> 24), 3}
		if got, want := Switch.Slot(key, 3), crc32.ChecksumIEEE(b); got != want {
			t.Errorf("Slot(%#x, 3) = %#x, want %#x", key, got, want)
		}
		if got, want := Switch.Checksum(key), crc32.ChecksumIEEE(b[:4]); got != want {
			t.Errorf("Checksum(%#x) = %#x, want %#x", key, got, want)
		}
	}
}
