package dta

import (
	"encoding/binary"
	"math/rand/v2"
	"testing"

	"github.com/dtakit/dtakit/dta/tofino"
)

func TestChoiceHash(t *testing.T) {
	h, err := tofino.NewPredefined(8, "CRC8")
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(3, 4))
	for range 100000 {
		k := rng.Uint32()
		if got, want := ChoiceHash(k), uint8(h.SumBytes(binary.BigEndian.AppendUint32(nil, k))); got != want {
			t.Fatalf("ChoiceHash(%#x) = %#x, tofino CRC8 %#x", k, got, want)
		}
	}
	c := DefaultCollectorChoice(3)
	if c[0] != 0 || c[1] != 1 || c[2] != 2 || c[3] != 0 || c[255] != 0 {
		t.Fatalf("default table %v", c[:8])
	}
	if got := c.Collector(0x01020304); got != int(ChoiceHash(0x01020304))%3 {
		t.Fatalf("Collector = %d", got)
	}
}
