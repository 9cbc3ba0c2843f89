package sim

import (
	"bytes"
	"html"
	"image/png"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dtakit/dtakit/keyincr"
	"github.com/dtakit/dtakit/keywrite"
	"github.com/dtakit/dtakit/postcard"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgsvg"
)

// z is how many standard errors a measured point may stray from the
// analysis: with about 200 points checked, 4.5σ makes a false alarm a
// one-in-10^4 event, while a model error of a few percent still shows.
const z = 4.5

// sigma is the standard error of a proportion p measured over n trials.
func sigma(p float64, n int) float64 { return math.Sqrt(p * (1 - p) / float64(n)) }

// quickFigs are the quick figures, made once for every test.
var quickFigs map[string]*Figure

func quick(t *testing.T) map[string]*Figure {
	t.Helper()
	if raceEnabled {
		t.Skip("the simulations take minutes under the race detector; go test without -race runs them")
	}
	if quickFigs != nil {
		return quickFigs
	}
	figs := map[string]*Figure{}
	for _, spec := range Figures {
		f, err := spec.Run(Config{Quick: true, Seed: 1})
		if err != nil {
			t.Fatalf("%s: %v", spec.Name, err)
		}
		figs[spec.Name] = f
	}
	quickFigs = figs
	return figs
}

// pairs checks every point of the measured series against the analytic
// one at the same x, with check.
func pairs(t *testing.T, f *Figure, measured, analytic string, check func(m, a Point) bool) {
	t.Helper()
	ms, as := f.Find(measured), f.Find(analytic)
	if ms == nil || as == nil || len(ms.Points) != len(as.Points) || len(ms.Points) == 0 {
		t.Fatalf("%s: series %q / %q missing or uneven", f.Name, measured, analytic)
	}
	for i, m := range ms.Points {
		a := as.Points[i]
		if m.X != a.X || !check(m, a) {
			t.Errorf("%s: %s at x=%g: measured %.5g [%.5g, %.5g] of %d, analysis %.5g [%.5g, %.5g]", f.Name, measured, m.X, m.Y, m.Lo, m.Hi, m.N, a.Y, a.Lo, a.Hi)
		}
	}
}

func proportionOK(m, a Point) bool {
	return math.Abs(m.Y-a.Y) <= z*sigma(a.Y, m.N)+1e-9
}

// TestFiguresMatchAnalysis: every measured point of every quick figure is
// within z standard errors of its analytic value (or under its bound).
func TestFiguresMatchAnalysis(t *testing.T) {
	figs := quick(t)
	for n := 1; n <= 4; n++ {
		pairs(t, figs["keywrite-alpha"], nameN("N=%d measured", n), nameN("N=%d analysis", n), proportionOK)
	}
	if len(figs["keywrite-alpha"].Marks) != 3 {
		t.Errorf("keywrite-alpha marks %v: want the best N to go 4 → 3 → 2 → 1", figs["keywrite-alpha"].Marks)
	}
	for _, s := range []string{"S=8Ki", "S=16Ki", "S=32Ki"} {
		pairs(t, figs["keywrite-age"], s+" measured", s+" analysis", proportionOK)
	}
	w := figs["keywrite-wrong"]
	for _, n := range []int{1, 2, 4} {
		// Between eq. 4's bounds, give or take sampling error.
		pairs(t, w, nameN("N=%d measured", n), nameN("N=%d eq. 4", n), func(m, a Point) bool {
			return m.Y >= a.Lo-z*sigma(a.Lo, m.N)-1e-9 && m.Y <= a.Hi+z*sigma(a.Hi, m.N)+1e-9
		})
		// Measurable at b = 8 and 16.
		for _, p := range w.Find(nameN("N=%d measured", n)).Points {
			if (p.X == 8 || p.X == 16) && p.Y == 0 {
				t.Errorf("N=%d: no wrong answer measured at b=%g", n, p.X)
			}
		}
	}
	// The switch's CRC32 checksum truncated to 16 bits errs far more than
	// a 16-bit checksum independent of the slot hash.
	crc, ind := w.Find("N=2, CRC32 checksum truncated").Points, w.Find("N=2 eq. 4").Points
	for i := range crc {
		if crc[i].X == 16 && crc[i].Lo < 10*ind[i].Hi {
			t.Errorf("truncated CRC32 at b=16: %.3g, eq. 4 %.3g: the correlation the figure shows is gone", crc[i].Y, ind[i].Hi)
		}
	}
	pc := figs["postcard-flows"]
	pairs(t, pc, "cache 65536, dtakit eviction", "analysis (no eviction)", proportionOK)
	big, small := pc.Find("cache 65536, dtakit eviction").Points, pc.Find("cache 128, dtakit eviction").Points
	// A flow evicted early is written in parts that never blank each
	// other's hops (docs/DTA-WIRE.md 8.5), so a small cache costs writes,
	// not paths.
	if small[0].Hi < big[0].Lo {
		t.Errorf("a 128-entry cache loses paths a 65536-entry one keeps: %v vs %v", small[0], big[0])
	}
	for _, e := range []string{"E=256", "E=512", "E=1024"} {
		pairs(t, figs["append-loss"], e+" measured", e+" analysis", func(m, a Point) bool {
			return math.Abs(m.Y-a.Y) <= z*(m.Hi-m.Y)/1.96+2e-4
		})
	}
	for n := 1; n <= 4; n++ {
		pairs(t, figs["keyincr-error"], nameN("N=%d measured", n), nameN("N=%d bound", n), func(m, a Point) bool {
			return m.Y <= a.Y+z*sigma(math.Min(a.Y, 0.5), m.N)
		})
	}
}

func nameN(format string, n int) string { return strings.Replace(format, "%d", string(rune('0'+n)), 1) }

// TestPaperNumbers: the DTA paper's Key-Write and Postcarding numbers,
// measured (Appendix A.5: at α = 0.1, an empty return for 9.5 % of keys at
// N=1, 3.3 % at N=2, 1.2 % at N=4, and wrong answers at most 1.6·10^-11;
// A.6: Postcarding without output for 3.3 % of flows at N=2).
func TestPaperNumbers(t *testing.T) {
	if raceEnabled {
		t.Skip("minutes under the race detector; go test without -race runs it")
	}
	// Probes few enough that their loads spread by ±0.002 around 0.1 (the
	// empty rate is convex in the load: a wide spread raises it), later
	// keys so that their mean load is 0.1.
	const slots, probes, runs = 1 << 16, 1 << 8, 80
	later := int(math.Round(0.1*slots)) - (probes-1)/2
	wrongTotal, queries := 0, 0
	for _, c := range []struct {
		n     int
		paper float64
	}{{1, 0.095}, {2, 0.033}, {4, 0.012}} {
		found, total := 0, 0
		for r := range runs {
			f, w, err := probeRun(slots, c.n, nil, uint32(c.n*runs+r)<<24, probes, later)
			if err != nil {
				t.Fatal(err)
			}
			found += f
			total += probes
			wrongTotal += w
		}
		queries += total
		empty := 1 - float64(found)/float64(total)
		// The paper rounds to 0.1 %.
		if math.Abs(empty-c.paper) > z*sigma(c.paper, total)+0.0005 {
			t.Errorf("N=%d: %.4f of keys empty, the paper says %.3f", c.n, empty, c.paper)
		}
		t.Logf("N=%d: %.2f %% empty (paper %.1f %%) over %d keys", c.n, 100*empty, 100*c.paper, total)
	}
	// 1.6e-11 cannot be measured; none of these queries may be wrong.
	if wrongTotal != 0 {
		t.Errorf("%d wrong answers in %d queries with 32-bit checksums", wrongTotal, queries)
	}
	if _, hi := keywrite.WrongProbBounds(2, 32, 0.1); hi > 1.6e-11 {
		t.Errorf("eq. 4 at N=2: %.3g > 1.6e-11", hi)
	}

	// Postcarding at α = 0.1, N = 2, a cache large enough that the 64 flows
	// in flight almost never evict each other.
	const chunks = 1 << 15
	l := postcard.Layout{Hops: pcHops, Chunks: chunks, Copies: 2}
	pcProbes := chunks / 256
	pcLater := int(math.Round(0.1*chunks)) - (pcProbes-1)/2
	right, total := 0, 0
	for r := range 160 {
		run, err := newPCRun(l, 1<<20, false, rand.New(rand.NewPCG(9, uint64(r))), uint32(r)<<26)
		if err != nil {
			t.Fatal(err)
		}
		if err := run.run(pcProbes + pcLater); err != nil {
			t.Fatal(err)
		}
		for i := range pcProbes {
			if run.right(i) {
				right++
			}
		}
		total += pcProbes
	}
	none := 1 - float64(right)/float64(total)
	if math.Abs(none-0.033) > z*sigma(0.033, total)+0.0005 {
		t.Errorf("Postcarding: %.4f of flows without their path, the paper says 0.033", none)
	}
	t.Logf("Postcarding: %.2f %% without output (paper 3.3 %%) over %d flows", 100*none, total)
}

// TestSizingSimulated builds the geometry each sizing API returns for a
// small workload and measures it through the real stores.
func TestSizingSimulated(t *testing.T) {
	if raceEnabled {
		t.Skip("slow under the race detector; go test without -race runs it")
	}
	kw, err := keywrite.Size(keywrite.Workload{Keys: 20000, DataSize: 4, Success: 0.95})
	if err != nil {
		t.Fatal(err)
	}
	found, total := 0, 0
	for r := range 8 {
		// 500 probes whose later keys average w.Keys.
		f, _, err := probeRun(kw.Slots, kw.N, nil, uint32(r)<<24, 500, 20000-249)
		if err != nil {
			t.Fatal(err)
		}
		found, total = found+f, total+500
	}
	if p := float64(found) / float64(total); p < 0.95-z*sigma(0.95, total) || math.Abs(p-kw.Success) > z*sigma(kw.Success, total) {
		t.Errorf("keywrite sizing %+v: measured %.4f", kw, p)
	}

	ki, err := keyincr.Size(keyincr.Workload{Epsilon: 0.01, Success: 0.95})
	if err != nil {
		t.Fatal(err)
	}
	s, _ := keyincr.NewStore(ki.Layout, nil)
	rng := rand.New(rand.NewPCG(3, 3))
	counts := make([]uint64, 20000)
	var sum uint64
	for i := range counts {
		counts[i] = 1 + uint64(rng.IntN(20))
		sum += counts[i]
		s.Add(mix(uint32(i)), counts[i], ki.N)
	}
	over := 0
	for i, c := range counts {
		if est, _ := s.Query(mix(uint32(i)), ki.N); float64(est-c) > 0.01*float64(sum) {
			over++
		}
	}
	if p := float64(over) / float64(len(counts)); p > 0.05+z*sigma(0.05, len(counts)) {
		t.Errorf("keyincr sizing %+v: %.4f of keys over the error", ki, p)
	}

	pc, err := postcard.Size(postcard.Workload{Flows: 3000, Hops: pcHops, Values: pcValues, Success: 0.95})
	if err != nil {
		t.Fatal(err)
	}
	right, total := 0, 0
	for r := range 8 {
		run, err := newPCRun(pc.Layout, 1<<16, false, rand.New(rand.NewPCG(4, uint64(r))), uint32(r)<<26)
		if err != nil {
			t.Fatal(err)
		}
		if err := run.run(300 + 3000 - 149); err != nil {
			t.Fatal(err)
		}
		for i := range 300 {
			if run.right(i) {
				right++
			}
		}
		total += 300
	}
	if p := float64(right) / float64(total); p < 0.95-z*sigma(0.95, total) {
		t.Errorf("postcard sizing %+v: measured %.4f", pc, p)
	}
}

// TestCheckedInFigures: the figures README shows are what dtasim -quick
// -seed 1 writes, data and drawing.
func TestCheckedInFigures(t *testing.T) {
	if raceEnabled {
		t.Skip("slow under the race detector; go test without -race runs it")
	}
	for _, name := range []string{"keywrite-alpha", "postcard-flows"} {
		f, err := Lookup(name).Run(Config{Quick: true, Seed: 1})
		if err != nil {
			t.Fatal(err)
		}
		dir := t.TempDir()
		if err := Write(f, dir); err != nil {
			t.Fatal(err)
		}
		for _, ext := range []string{".csv", ".svg"} {
			got, _ := os.ReadFile(filepath.Join(dir, name+ext))
			want, err := os.ReadFile(filepath.Join("..", "..", "..", "docs", "figures", name+ext))
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("docs/figures/%s%s differs from what dtasim -quick -seed 1 makes now: regenerate with go run ./cmd/dtasim -quick -out docs/figures -only %s", name, ext, name)
			}
		}
	}
}

// TestRender draws every quick figure as SVG and PNG: the PNG is at print
// resolution, and every point of every measured series and at least two of
// every analytic line are on the figure (a measured share of zero on a log
// axis as its upper bound).
func TestRender(t *testing.T) {
	for name, f := range quick(t) {
		for _, s := range f.Series {
			if len(s.Points) == 0 {
				t.Errorf("%s: series %q has no points", name, s.Name)
			}
		}
		drawn, err := f.draw(draw.New(vgsvg.New(figWidth, figHeight)))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		for _, s := range f.Series {
			if want := len(s.Points); !s.Analytic && drawn[s.Name] != want {
				t.Errorf("%s: %d of series %q's %d points drawn", name, drawn[s.Name], s.Name, want)
			}
			if s.Analytic && drawn[s.Name] < 2 {
				t.Errorf("%s: line %q has %d points drawn", name, s.Name, drawn[s.Name])
			}
		}
		b, err := f.Render("png")
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		cfg, err := png.DecodeConfig(bytes.NewReader(b))
		if err != nil {
			t.Fatalf("%s.png: %v", name, err)
		}
		if cfg.Width < 1600 || cfg.Height < 1000 {
			t.Errorf("%s.png is %d×%d px: want at least 1600 wide for print", name, cfg.Width, cfg.Height)
		}
		b, err = f.Render("svg")
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if !bytes.Contains(b, []byte(`width="504pt" height="324pt"`)) {
			t.Errorf("%s.svg: want 7 × 4.5 in:\n%.300s", name, b)
		}
		for _, s := range f.Series {
			if !bytes.Contains(b, []byte(html.EscapeString(s.Name))) {
				t.Errorf("%s.svg: no legend entry %q", name, s.Name)
			}
		}
	}
}
