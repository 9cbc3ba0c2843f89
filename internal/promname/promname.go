// Package promname names Prometheus metrics after Go struct fields, for the
// daemons that export counter structs.
package promname

import (
	"strings"
	"unicode"
)

// Snake turns a Go field name into a metric name part: WritePackets ->
// write_packets, BadICRC -> bad_icrc.
func Snake(s string) string {
	var b strings.Builder
	r := []rune(s)
	for i, c := range r {
		if unicode.IsUpper(c) && i > 0 && (unicode.IsLower(r[i-1]) || i+1 < len(r) && unicode.IsLower(r[i+1])) {
			b.WriteByte('_')
		}
		b.WriteRune(unicode.ToLower(c))
	}
	return b.String()
}
