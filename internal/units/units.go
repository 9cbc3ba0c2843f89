// Package units prints and parses the quantities sizing speaks in: byte
// sizes in binary units, counts with K/M/G suffixes.
package units

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// ErrSyntax is wrapped by every parse error.
var ErrSyntax = errors.New("units: invalid quantity")

// Bytes prints b in binary units: "512 MiB", "1.5 GiB", "24 B".
func Bytes(b uint64) string {
	units := []string{"B", "KiB", "MiB", "GiB", "TiB", "PiB"}
	v, i := float64(b), 0
	for v >= 1024 && i < len(units)-1 {
		v, i = v/1024, i+1
	}
	return strconv.FormatFloat(v, 'g', 4, 64) + " " + units[i]
}

// ParseCount parses a count with an optional decimal suffix: 10M is ten
// million, 2.5K 2500; K, M, G, T (or k, m, g, t).
func ParseCount(s string) (uint64, error) {
	mult := 1.0
	if n := len(s); n > 0 {
		switch strings.ToUpper(s[n-1:]) {
		case "K":
			mult, s = 1e3, s[:n-1]
		case "M":
			mult, s = 1e6, s[:n-1]
		case "G":
			mult, s = 1e9, s[:n-1]
		case "T":
			mult, s = 1e12, s[:n-1]
		}
	}
	v, err := strconv.ParseFloat(s, 64)
	if err != nil || v < 0 || math.IsInf(v, 0) || v*mult > math.MaxUint64/2 {
		return 0, fmt.Errorf("%w: count %q (want e.g. 10M, 2500, 1.5K)", ErrSyntax, s)
	}
	return uint64(math.Round(v * mult)), nil
}

// ParseBytes parses a size: a number with B, KB/MB/GB (powers of 1000)
// or KiB/MiB/GiB (powers of 1024), or a bare number of bytes.
func ParseBytes(s string) (uint64, error) {
	t := strings.TrimSpace(s)
	mult := 1.0
	for _, u := range []struct {
		suffix string
		mult   float64
	}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"TiB", 1 << 40}, {"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"TB", 1e12}, {"B", 1}} {
		if strings.HasSuffix(t, u.suffix) {
			t, mult = strings.TrimSpace(strings.TrimSuffix(t, u.suffix)), u.mult
			break
		}
	}
	v, err := strconv.ParseFloat(t, 64)
	if err != nil || v < 0 || math.IsInf(v, 0) || v*mult > math.MaxUint64/2 || v*mult != math.Trunc(v*mult) {
		return 0, fmt.Errorf("%w: size %q (want e.g. 20B, 4KiB, 1.5GB)", ErrSyntax, s)
	}
	return uint64(v * mult), nil
}
