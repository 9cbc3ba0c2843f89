package units

import (
	"errors"
	"testing"
)

func TestUnits(t *testing.T) {
	for in, want := range map[string]uint64{"10M": 10_000_000, "2.5K": 2500, "7": 7, "1g": 1e9} {
		if got, err := ParseCount(in); err != nil || got != want {
			t.Errorf("ParseCount(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for in, want := range map[string]uint64{"20B": 20, "4KiB": 4096, "1.5GB": 1.5e9, "64": 64, "2 MiB": 2 << 20} {
		if got, err := ParseBytes(in); err != nil || got != want {
			t.Errorf("ParseBytes(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "ten", "-1", "1.5", "NaNM"} {
		if _, err := ParseCount(bad + "x"); !errors.Is(err, ErrSyntax) {
			t.Errorf("ParseCount(%q): %v", bad+"x", err)
		}
		if _, err := ParseBytes(bad + "q"); !errors.Is(err, ErrSyntax) {
			t.Errorf("ParseBytes(%q): %v", bad+"q", err)
		}
	}
	if _, err := ParseBytes("1.5B"); !errors.Is(err, ErrSyntax) {
		t.Error("a fraction of a byte parsed")
	}
	if got := Bytes(3 << 29); got != "1.5 GiB" {
		t.Errorf("Bytes = %q", got)
	}
}
