package crc32s

import (
	"hash/crc32"
	"math/rand/v2"
	"testing"
)

func TestMatchesLibrary(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	buf := make([]byte, 300)
	for i := range buf {
		buf[i] = byte(rng.Uint32())
	}
	for n := 0; n <= 200; n++ {
		for _, start := range []int{0, 1, 3} { // alignments
			p := buf[start : start+n]
			for _, crc := range []uint32{0, 0xFFFFFFFF, rng.Uint32()} {
				if got, want := Update(crc, p), crc32.Update(crc, crc32.IEEETable, p); got != want {
					t.Fatalf("Update(%#x, %d bytes at %d) = %#x, want %#x", crc, n, start, got, want)
				}
			}
			if got, want := Linear(p), ^crc32.Update(0xFFFFFFFF, crc32.IEEETable, p); got != want {
				t.Fatalf("Linear(%d bytes) = %#x, want %#x", n, got, want)
			}
		}
	}
	if got := Update(0, []byte("123456789")); got != 0xCBF43926 {
		t.Errorf("check value %#x, want 0xcbf43926 (CRC-32/ISO-HDLC)", got)
	}
}

func TestLinearIsLinear(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	x, y, z := make([]byte, 37), make([]byte, 37), make([]byte, 37)
	for i := range x {
		x[i], y[i] = byte(rng.Uint32()), byte(rng.Uint32())
		z[i] = x[i] ^ y[i]
	}
	if Linear(z) != Update(0, x)^Update(0, y) {
		t.Error("Linear(x^y) != CRC(x)^CRC(y)")
	}
}

func TestStackBufferDoesNotEscape(t *testing.T) {
	if n := testing.AllocsPerRun(100, func() {
		var b [24]byte
		b[3] = 7
		_ = Update(0, b[:])
	}); n != 0 {
		t.Errorf("Update of a stack buffer allocates %v times", n)
	}
}
