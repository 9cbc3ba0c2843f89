package main

import (
	"io"
	"strings"
	"testing"
)

// TestWhyNamesEveryByte: each explanation names what a slot holds, so that
// its figures multiply to the memory printed (markers, padding, rounding).
func TestWhyNamesEveryByte(t *testing.T) {
	for _, c := range []struct {
		args []string
		want []string
	}{
		{[]string{"append", "-rate", "1M", "-lag", "10ms", "-entry", "16B"},
			[]string{"16384 entries per list of 20-byte slots (16 bytes of data and a 4-byte lap marker), 320 KiB in all"}},
		{[]string{"keywrite", "-keys", "10M", "-value", "20B"},
			[]string{"134217728 slots of 32 bytes (4 GiB)", "A slot is a 4-byte checksum and 20 data bytes, padded with 8 bytes to a power of two."}},
		{[]string{"keywrite", "-keys", "10M", "-value", "28B"},
			[]string{"A slot is a 4-byte checksum and 28 data bytes."}},
		{[]string{"keyincrement", "-reports", "100M", "-error", "1K"},
			[]string{"2097152 counters of 8 bytes (16 MiB)"}},
		{[]string{"postcard", "-flows", "1M", "-values", "4096"},
			[]string{"16777216 chunks of 16 bytes", "A chunk is 5 hops of 2 bytes, padded with 6 bytes to a power of two."}},
	} {
		ans, err := size(c.args[0], c.args[1:], io.Discard)
		if err != nil {
			t.Fatalf("%v: %v", c.args, err)
		}
		for _, w := range c.want {
			if !strings.Contains(ans.Why, w) {
				t.Errorf("%v: %q does not say %q", c.args, ans.Why, w)
			}
		}
	}
}
