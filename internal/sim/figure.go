// Package sim reproduces the DTA and DART papers' figures from dtakit's own
// code: every measured point comes from reports written through the
// primitives' real translator-side operations into their real Stores and
// answered by their real queries; every analytic line from the packages'
// bounds. cmd/dtasim writes the figures as CSV, SVG and PNG.
package sim

import (
	"bytes"
	"encoding/csv"
	"fmt"
	"image/color"
	"io"
	"math"
	"strconv"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// Config chooses the scale of a run.
type Config struct {
	// Quick runs every figure small enough for CI (seconds); otherwise the
	// figures run at the scale each names, up to the papers' where memory
	// allows.
	Quick bool
	// Seed makes a run reproducible: the same seed gives the same data.
	Seed uint64
}

// Point is a measured or analytic value at X. Measured points carry a 95 %
// confidence interval [Lo, Hi] (Wilson's, for proportions) and the number
// of trials behind them; analytic points have Lo = Hi = Y and N = 0.
type Point struct {
	X, Y, Lo, Hi float64
	N            int
}

// Series is one curve of a figure.
type Series struct {
	Name     string
	Analytic bool // a line from the analysis; otherwise measured points
	Points   []Point
}

// Mark is a vertical line with a label, e.g. where the best N changes.
type Mark struct {
	X     float64
	Label string
}

// Figure is one figure's data and how to draw it.
type Figure struct {
	Name           string // file name stem, e.g. "keywrite-alpha"
	Title          string
	XLabel, YLabel string
	LogX, LogY     bool
	Legend         string // "top-left", "top-right"; default bottom left
	Series         []Series
	Marks          []Mark
	Note           string // how the run was scaled, for the CSV's header and the README
}

// Series returns the series named name, or nil.
func (f *Figure) Find(name string) *Series {
	for i := range f.Series {
		if f.Series[i].Name == name {
			return &f.Series[i]
		}
	}
	return nil
}

// WriteCSV writes the figure's data: a comment line with the note, then
// series, kind, x, y, lo, hi, n per point.
func (f *Figure) WriteCSV(w io.Writer) error {
	if _, err := fmt.Fprintf(w, "# %s: %s\n", f.Name, f.Note); err != nil {
		return err
	}
	cw := csv.NewWriter(w)
	cw.Write([]string{"series", "kind", "x", "y", "lo", "hi", "n"})
	g := func(v float64) string { return strconv.FormatFloat(v, 'g', 8, 64) }
	for _, s := range f.Series {
		kind := "measured"
		if s.Analytic {
			kind = "analytic"
		}
		for _, p := range s.Points {
			cw.Write([]string{s.Name, kind, g(p.X), g(p.Y), g(p.Lo), g(p.Hi), strconv.Itoa(p.N)})
		}
	}
	cw.Flush()
	return cw.Error()
}

// logTicks are gonum's log ticks with labels like 1e-05, not 9.9999e-06.
type logTicks struct{}

func (logTicks) Ticks(min, max float64) []plot.Tick {
	ts := plot.LogTicks{Prec: -1}.Ticks(min, max)
	for i := range ts {
		if ts[i].Label != "" {
			ts[i].Label = strconv.FormatFloat(ts[i].Value, 'g', 2, 64)
		}
	}
	return ts
}

// Render draws the figure in format ("svg" or "png").
func (f *Figure) Render(format string) ([]byte, error) {
	p := plot.New()
	p.Title.Text = f.Title
	p.X.Label.Text = f.XLabel
	p.Y.Label.Text = f.YLabel
	p.Legend.Top = f.Legend == "top-left" || f.Legend == "top-right"
	p.Legend.Left = f.Legend != "top-right"
	if f.LogX {
		p.X.Scale = plot.LogScale{}
		p.X.Tick.Marker = logTicks{}
	}
	if f.LogY {
		p.Y.Scale = plot.LogScale{}
		p.Y.Tick.Marker = logTicks{}
	}
	// On a log axis, zero (a lower confidence limit with no event) shows
	// a decade below the smallest positive value.
	// Analytic lines are cut there too: the figure is about what was
	// measured.
	floor := math.Inf(1)
	for _, s := range f.Series {
		for _, pt := range s.Points {
			if pt.Y > 0 && !s.Analytic {
				floor = math.Min(floor, pt.Y/10)
			}
		}
	}
	p.Add(plotter.NewGrid())
	clamp := func(v float64) float64 {
		if f.LogY && v < floor {
			return floor
		}
		return v
	}
	measured := 0
	for i, s := range f.Series {
		c := palette[i%len(palette)]
		xys := make(plotter.XYs, 0, len(s.Points))
		for _, pt := range s.Points {
			if f.LogY && pt.Y <= 0 && !s.Analytic {
				continue // no event: the CSV has its upper bound
			}
			xys = append(xys, plotter.XY{X: pt.X, Y: clamp(pt.Y)})
		}
		if len(xys) == 0 {
			continue
		}
		if s.Analytic {
			l, err := plotter.NewLine(xys)
			if err != nil {
				return nil, err
			}
			l.Color, l.Width = c, vg.Points(1.2)
			l.Dashes = []vg.Length{vg.Points(4), vg.Points(2)}
			p.Add(l)
			p.Legend.Add(s.Name, l)
			continue
		}
		var errs errPoints
		for _, pt := range s.Points {
			if f.LogY && pt.Y <= 0 {
				continue
			}
			errs = append(errs, errPoint{pt.X, clamp(pt.Y), clamp(pt.Y) - clamp(pt.Lo), clamp(pt.Hi) - clamp(pt.Y)})
		}
		sc, err := plotter.NewScatter(xys)
		if err != nil {
			return nil, err
		}
		sc.Color = c
		sc.Shape = shapes[measured%len(shapes)]
		sc.Radius = vg.Points(2.5)
		eb, err := plotter.NewYErrorBars(errs)
		if err != nil {
			return nil, err
		}
		eb.Color = c
		p.Add(eb, sc)
		p.Legend.Add(s.Name, sc)
		measured++
	}
	if len(f.Marks) > 0 {
		ymin, ymax := p.Y.Min, p.Y.Max
		var lx plotter.XYLabels
		for _, m := range f.Marks {
			l, err := plotter.NewLine(plotter.XYs{{X: m.X, Y: ymin}, {X: m.X, Y: ymax}})
			if err != nil {
				return nil, err
			}
			l.Color = color.Gray{Y: 120}
			l.Dashes = []vg.Length{vg.Points(1), vg.Points(2)}
			p.Add(l)
			lx.XYs = append(lx.XYs, plotter.XY{X: m.X, Y: ymin})
			lx.Labels = append(lx.Labels, m.Label)
		}
		labels, err := plotter.NewLabels(lx)
		if err != nil {
			return nil, err
		}
		for i := range labels.TextStyle {
			labels.TextStyle[i].Rotation = math.Pi / 2
			labels.TextStyle[i].Font.Size = vg.Points(8)
		}
		p.Add(labels)
	}
	wt, err := p.WriterTo(7*vg.Inch, 4.5*vg.Inch, format)
	if err != nil {
		return nil, err
	}
	var b bytes.Buffer
	if _, err := wt.WriteTo(&b); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

type errPoint struct{ x, y, lo, hi float64 }
type errPoints []errPoint

func (e errPoints) Len() int                        { return len(e) }
func (e errPoints) XY(i int) (float64, float64)     { return e[i].x, e[i].y }
func (e errPoints) YError(i int) (float64, float64) { return e[i].lo, e[i].hi }

var palette = []color.Color{
	color.RGBA{0x1f, 0x77, 0xb4, 0xff}, color.RGBA{0xd6, 0x27, 0x28, 0xff},
	color.RGBA{0x2c, 0xa0, 0x2c, 0xff}, color.RGBA{0x94, 0x67, 0xbd, 0xff},
	color.RGBA{0xff, 0x7f, 0x0e, 0xff}, color.RGBA{0x8c, 0x56, 0x4b, 0xff},
	color.RGBA{0x17, 0xbe, 0xcf, 0xff}, color.RGBA{0x7f, 0x7f, 0x7f, 0xff},
}

var shapes = []draw.GlyphDrawer{draw.CircleGlyph{}, draw.SquareGlyph{}, draw.TriangleGlyph{}, draw.PlusGlyph{}, draw.CrossGlyph{}, draw.RingGlyph{}, draw.BoxGlyph{}, draw.PyramidGlyph{}}

// wilson returns the 95 % Wilson score interval of k successes in n.
func wilson(k, n int) (lo, hi float64) {
	if n == 0 {
		return 0, 1
	}
	const z = 1.959964
	p, nf := float64(k)/float64(n), float64(n)
	den := 1 + z*z/nf
	mid := (p + z*z/(2*nf)) / den
	half := z * math.Sqrt(p*(1-p)/nf+z*z/(4*nf*nf)) / den
	return math.Max(0, mid-half), math.Min(1, mid+half)
}

// proportion is a measured point of k successes in n trials at x.
func proportion(x float64, k, n int) Point {
	lo, hi := wilson(k, n)
	return Point{X: x, Y: float64(k) / float64(n), Lo: lo, Hi: hi, N: n}
}
