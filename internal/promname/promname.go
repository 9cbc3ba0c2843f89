// Package promname exports the counter structs of dtakit's daemons as
// Prometheus metrics named after their fields.
package promname

import (
	"reflect"
	"strings"
	"unicode"

	"github.com/prometheus/client_golang/prometheus"
)

// Counters sends every uint64 field F of the struct v as the counter
// <prefix>_<snake(F)>_total, its help help + " " + F. Other fields are the
// caller's to export.
func Counters(ch chan<- prometheus.Metric, prefix, help string, v any) {
	rv := reflect.ValueOf(v)
	for i := range rv.NumField() {
		f := rv.Type().Field(i)
		if f.Type.Kind() != reflect.Uint64 {
			continue
		}
		desc := prometheus.NewDesc(prefix+"_"+Snake(f.Name)+"_total", help+" "+f.Name, nil, nil)
		ch <- prometheus.MustNewConstMetric(desc, prometheus.CounterValue, float64(rv.Field(i).Uint()))
	}
}

// Snake turns a Go field name into a metric name part: WritePackets ->
// write_packets, BadICRC -> bad_icrc, SeqNAKs -> seq_naks (an acronym's
// plural s stays with it).
func Snake(s string) string {
	var b strings.Builder
	r := []rune(s)
	plural := func(i int) bool { // r[i] is the s of an acronym's plural
		return r[i] == 's' && i > 1 && unicode.IsUpper(r[i-1]) && unicode.IsUpper(r[i-2]) && (i+1 == len(r) || unicode.IsUpper(r[i+1]))
	}
	for i, c := range r {
		if unicode.IsUpper(c) && i > 0 && (unicode.IsLower(r[i-1]) || i+1 < len(r) && unicode.IsLower(r[i+1]) && !plural(i+1)) {
			b.WriteByte('_')
		}
		b.WriteRune(unicode.ToLower(c))
	}
	return b.String()
}
