package main

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/dtakit/dtakit/dta"
	"github.com/dtakit/dtakit/internal/udpio"
	"github.com/dtakit/dtakit/reporter"
)

// smallConfig is a run of a second or two: the same loads as the default
// (alpha 1/8 for Key-Write, Key-Increment and Postcarding) on smaller
// memory.
func smallConfig(t testing.TB) config {
	cfg := config{Keys: 1 << 11, Slots: 1 << 14, Reports: 80000, Seed: 7, Quiet: true}
	if testing.Short() {
		cfg.Reports = 20000
	}
	return cfg
}

// rowVerdicts returns the verdict (ok or FAIL) of each primitive's rows in
// the table run printed.
func rowVerdicts(out string) map[string][]string {
	v := map[string][]string{}
	name := ""
	for line := range strings.Lines(out) {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		switch f[0] {
		case "Key-Write", "Key-Increment", "Postcarding", "Append":
			name = f[0]
		case "primitive", "translator:", "target:", "send", "collector", "all", "quickstart:":
			name = ""
			continue
		}
		if name != "" {
			v[name] = append(v[name], f[len(f)-1])
		}
	}
	return v
}

func TestRun(t *testing.T) {
	var out bytes.Buffer
	var st stats
	cfg := smallConfig(t)
	cfg.stats = &st
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Second)
	defer cancel()
	if err := run(ctx, cfg, &out); err != nil {
		t.Fatalf("run: %v\n%s", err, out.String())
	}
	t.Log("\n" + out.String())
	v := rowVerdicts(out.String())
	want := map[string]int{"Key-Write": 1, "Key-Increment": 2, "Postcarding": 1, "Append": 1}
	for name, n := range want {
		if len(v[name]) != n {
			t.Errorf("%s: %d rows %v, want %d", name, len(v[name]), v[name], n)
		}
		for _, verdict := range v[name] {
			if verdict != "ok" {
				t.Errorf("%s: verdict %q, want ok", name, verdict)
			}
		}
	}
	if len(v) != len(want) {
		t.Errorf("rows for %v, want the four primitives", v)
	}
	if !strings.Contains(out.String(), "all checks passed") {
		t.Error("no final verdict")
	}
	if st.received != uint64(cfg.Reports) {
		t.Errorf("translator received %d reports, want %d", st.received, cfg.Reports)
	}
}

// TestCorruptionFails damages the collector's memory between the send phase
// and the queries: run must fail, naming the primitive.
func TestCorruptionFails(t *testing.T) {
	for _, tc := range []struct {
		name    string
		corrupt func(*instances)
		row     string
		message string
	}{
		{"key-write region zeroed", func(in *instances) { clear(in.kw.Region()) }, "Key-Write", "Key-Write: latest data"},
		{"one append entry changed", func(in *instances) {
			in.ap.Region()[0] ^= 0x80 // data of list 0's first entry; its marker intact
		}, "Append", "Append: entries read back once each"},
		{"key-increment counter raised", func(in *instances) {
			r := in.ki.Region()
			for i := range r { // every counter high: no estimate exact, none within ε
				if i%8 == 7 {
					r[i] ^= 0x40
				}
			}
		}, "Key-Increment", "Key-Increment: exact counts"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			cfg := smallConfig(t)
			cfg.Reports = 20000
			cfg.beforeQuery = tc.corrupt
			err := run(context.Background(), cfg, &out)
			if err == nil {
				t.Fatalf("run passed with corrupted memory:\n%s", out.String())
			}
			if !strings.Contains(err.Error(), tc.message) || !strings.Contains(err.Error(), "below the minimum") {
				t.Errorf("error %q does not say %q is below the minimum", err, tc.message)
			}
			if v := rowVerdicts(out.String()); len(v[tc.row]) == 0 || !containsFAIL(v[tc.row]) {
				t.Errorf("%s rows %v, want a FAIL\n%s", tc.row, v[tc.row], out.String())
			}
		})
	}
}

// TestLostReportsCount: reports that never reach the translator (here
// kept from the socket, as a reporter that gave up on them) are counted in
// the table's lost column and fail their queries.
func TestLostReportsCount(t *testing.T) {
	var out bytes.Buffer
	cfg := smallConfig(t)
	cfg.Reports = 20000
	n := cfg.Reports / 4
	// Every tenth key's last Key-Write report, and one Append entry.
	cfg.drop = func(op dta.Opcode, i int) bool {
		return op == dta.OpKeyWrite && i >= n-cfg.Keys && i%10 == 0 || op == dta.OpAppend && i == 100
	}
	dropped := 0
	for i := n - cfg.Keys; i < n; i++ {
		if i%10 == 0 {
			dropped++
		}
	}
	err := run(context.Background(), cfg, &out)
	if err == nil {
		t.Fatalf("run passed with %d Key-Write reports lost:\n%s", dropped, out.String())
	}
	for _, want := range []string{
		"Key-Write: latest data",
		fmt.Sprintf("(%d reports never delivered", dropped),
		"Append: entries read back once each",
		"(1 reports never delivered",
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error does not say %q:\n%v", want, err)
		}
	}
	for line := range strings.Lines(out.String()) {
		if f := strings.Fields(line); len(f) > 3 && f[0] == "Key-Write" && f[3] != fmt.Sprint(dropped) {
			t.Errorf("Key-Write lost column %s, want %d: %s", f[3], dropped, line)
		}
	}
}

func containsFAIL(vs []string) bool {
	for _, v := range vs {
		if v == "FAIL" {
			return true
		}
	}
	return false
}

func TestProgressLine(t *testing.T) {
	var term, plain bytes.Buffer
	pt := progress{w: &term, terminal: true, total: 10, start: time.Now()}
	pp := progress{w: &plain, total: 10, start: time.Now()}
	for i := range 3 {
		pt.show(uint64(i), uint64(i+1), uint64(i), i == 2)
		pp.show(uint64(i), uint64(i+1), uint64(i), i == 2)
	}
	if !strings.Contains(plain.String(), "sent 2/10 reports in 3 datagrams (1 resends and probes), translator received 2 datagrams, ") {
		t.Errorf("plain: %q: want reports, datagrams and resends apart", plain.String())
	}
	// 110 datagrams: 100 reports, 8 resends after NACKs, 2 probes.
	if r, d := sentBy(reporter.Counters{Datagrams: 110, Resent: 8, Probes: 2}); r != 100 || d != 110 {
		t.Errorf("sentBy: %d reports in %d datagrams, want 100 in 110", r, d)
	}
	if got := strings.Count(term.String(), "\r"); got != 3 {
		t.Errorf("terminal: %d carriage returns, want 3: %q", got, term.String())
	}
	if got := strings.Count(term.String(), "\n"); got != 1 {
		t.Errorf("terminal: %d newlines, want 1 (at the end): %q", got, term.String())
	}
	// Not a terminal: the first line, then none until a second has passed,
	// then the final one.
	if got := strings.Count(plain.String(), "\n"); got != 2 || strings.Contains(plain.String(), "\r") {
		t.Errorf("plain: %q, want two lines and no carriage return", plain.String())
	}
	q := progress{w: &plain, quiet: true}
	plain.Reset()
	q.show(1, 1, 1, true)
	if plain.Len() != 0 {
		t.Errorf("quiet printed %q", plain.String())
	}
}

// BenchmarkEndToEnd streams Key-Write and Append reports through
// reporters, the translator and the collector on loopback as fast as the
// translator takes them, b.N reports in all, and reports the rate at which
// the translator received them and had their RDMA operations acknowledged.
// Use -benchtime=2000000x: the pipeline's start-up is not amortised over a
// few reports. Before the pipeline, in the same run, it measures the
// loopback ceiling (udpio.MeasureCeiling: as many 64-byte datagrams, in
// batches of 128) and reports the pipeline's rate as a fraction of it.
func BenchmarkEndToEnd(b *testing.B) {
	n := max(b.N, 1000)
	b.StopTimer()
	ceiling, err := udpio.MeasureCeiling(n, 64, 128)
	if err != nil {
		b.Fatal(err)
	}
	var st stats
	cfg := config{Keys: 1 << 15, Slots: 1 << 18, Reports: n, Seed: 1, Quiet: true, Bench: true, stats: &st}
	var out bytes.Buffer
	b.StartTimer()
	if err := run(context.Background(), cfg, &out); err != nil {
		b.Fatalf("%v\n%s", err, out.String())
	}
	rate := float64(st.received) / st.elapsed.Seconds()
	b.ReportMetric(rate, "reports/s")
	b.ReportMetric(ceiling.Rate(), "ceiling-datagrams/s")
	b.ReportMetric(rate/ceiling.Rate(), "of-ceiling")
}
