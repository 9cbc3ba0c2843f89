package main

import (
	"context"
	"errors"
	"net/netip"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/dtakit/dtakit/internal/test/keymax"
	"github.com/dtakit/dtakit/translator"
)

// TestMetricsByPrimitive: the per-primitive metrics have a series for
// every registered primitive, Key-Max (registered by its test package)
// included, with its own count.
func TestMetricsByPrimitive(t *testing.T) {
	// A collector that never answers: every report is counted, then
	// refused for want of an instance.
	tr, err := translator.New(translator.Config{NoReports: true, Collectors: []netip.AddrPort{netip.MustParseAddrPort("127.0.0.1:9")}})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close(time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	tr.Start(ctx) // fails: the collector does not answer; the translator serves on
	const n = 5
	for i := range uint32(n) {
		r := keymax.Report(i, uint64(i))
		if err := tr.Submit(&r, -1); !errors.Is(err, translator.ErrNoInstance) {
			t.Fatalf("Submit: %v, want ErrNoInstance", err)
		}
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(metrics{tr})
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "primitive" {
					if got[mf.GetName()] == nil {
						got[mf.GetName()] = map[string]float64{}
					}
					got[mf.GetName()][l.GetValue()] = m.GetCounter().GetValue()
				}
			}
		}
	}
	want := map[string]float64{"keywrite": 0, "append": 0, "keyincrement": 0, "postcard": 0, "keymax": n}
	for _, name := range []string{"dtakit_translator_report_datagrams_total", "dtakit_translator_reports_total"} {
		if name == "dtakit_translator_reports_total" {
			want["keymax"] = 0 // none translated
		}
		if g := got[name]; len(g) != len(want) {
			t.Errorf("%s: %v, want %v", name, g, want)
		}
		for p, v := range want {
			if g, ok := got[name][p]; !ok || g != v {
				t.Errorf("%s{primitive=%q} = %v (%v), want %v", name, p, g, ok, v)
			}
		}
	}
}
