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
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/font"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/text"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
	"gonum.org/v1/plot/vg/vgsvg"
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
	// XTicks, if set, are the x axis's labelled ticks (the values the
	// points sit at, say; those beyond the data are left out); otherwise
	// the axis chooses its own.
	XTicks []float64
	Series []Series
	Marks  []Mark
	Note   string // how the run was scaled, for the CSV's header and the README
}

// Find returns the series named name, or nil.
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

// The figures' size, a two-column-wide figure, and the PNG's resolution:
// 7 in at 300 dpi is 2100 px wide.
const (
	figWidth, figHeight = 7 * vg.Inch, 4.5 * vg.Inch
	pngDPI              = 300
)

// Render draws the figure in format ("svg" or "png").
func (f *Figure) Render(format string) ([]byte, error) {
	var c vg.CanvasWriterTo
	switch format {
	case "svg":
		c = vgsvg.New(figWidth, figHeight)
	case "png":
		c = vgimg.PngCanvas{Canvas: vgimg.NewWith(vgimg.UseWH(figWidth, figHeight), vgimg.UseDPI(pngDPI))}
	default:
		return nil, fmt.Errorf("sim: render %s: unknown format %q", f.Name, format)
	}
	if _, err := f.draw(draw.New(c)); err != nil {
		return nil, fmt.Errorf("sim: render %s: %w", f.Name, err)
	}
	var b bytes.Buffer
	if _, err := c.WriteTo(&b); err != nil {
		return nil, fmt.Errorf("sim: render %s: %w", f.Name, err)
	}
	return b.Bytes(), nil
}

// draw draws the figure on dc and returns how many marks each series got
// on it (a point, a point's upper bound, or a line's vertex).
func (f *Figure) draw(dc draw.Canvas) (map[string]int, error) {
	dc = draw.Crop(dc, vg.Points(4), -vg.Points(4), vg.Points(4), -vg.Points(4))
	p := plot.New()
	p.Title.Text = f.Title
	p.Title.Padding = vg.Points(6)
	// The legend goes beside the axes, where it hides no data and no
	// mark's label.
	leg := plot.NewLegend()
	leg.Top, leg.Left = true, true
	leg.TextStyle.Font.Size = vg.Points(10)
	drawn := map[string]int{}

	// On a log axis, zero (a measured share with no event) cannot be
	// drawn: the point is drawn at its 95 % upper bound instead, as an
	// open downward triangle, and the axis starts a decade below the
	// smallest value drawn.
	lowest := f.lowest()
	floor := math.Pow(10, math.Floor(math.Log10(lowest/2)))
	p.Add(plotter.NewGrid())
	var bounds upperBounds // no event: the upper bounds, in every series' colour
	measured := 0
	for i, s := range f.Series {
		c := palette[i%len(palette)]
		var n int
		var err error
		if s.Analytic {
			n, err = f.addLine(p, &leg, s, c)
		} else {
			n, err = f.addMeasured(p, &leg, s, c, shapes[measured%len(shapes)], floor, &bounds)
			measured++
		}
		if err != nil {
			return nil, err
		}
		drawn[s.Name] += n
	}
	if err := bounds.add(p, &leg); err != nil {
		return nil, err
	}

	setRange(&p.X, f.LogX, f.XTicks)
	setRange(&p.Y, f.LogY, nil)
	if f.LogY && !math.IsInf(lowest, 1) {
		p.Y.Min = floor
	}
	for _, m := range f.Marks {
		l, err := plotter.NewLine(plotter.XYs{{X: m.X, Y: p.Y.Min}, {X: m.X, Y: p.Y.Max}})
		if err != nil {
			return nil, err
		}
		l.Color = color.Gray{Y: 120}
		l.Dashes = []vg.Length{vg.Points(1), vg.Points(2)}
		p.Add(l)
	}

	// The axes' labels are drawn here, not by gonum, which pads a log
	// axis for its label as if it sat at the data's arithmetic mean (a
	// fifth of the height left blank).
	xl, yl := labelStyle(), labelStyle()
	xl.XAlign, xl.YAlign = draw.XCenter, draw.YBottom
	yl.XAlign, yl.YAlign, yl.Rotation = draw.XCenter, draw.YTop, math.Pi/2
	gap := vg.Points(6)
	legW := leg.Rectangle(dc).Size().X
	pc := draw.Crop(dc, yl.Height(f.YLabel)+gap, -(legW + 3*gap), xl.Height(f.XLabel)+gap, 0)
	p.Draw(pc)
	da := p.DataCanvas(pc)
	dc.FillText(xl, vg.Point{X: da.Center().X, Y: dc.Min.Y}, f.XLabel)
	dc.FillText(yl, vg.Point{X: dc.Min.X, Y: da.Center().Y}, f.YLabel)
	leg.Draw(draw.Canvas{Canvas: dc.Canvas, Rectangle: vg.Rectangle{
		Min: vg.Point{X: da.Max.X + 3*gap, Y: da.Min.Y}, Max: vg.Point{X: dc.Max.X, Y: da.Max.Y}}})

	// Marks' labels run up from the bottom, right of their line.
	ml := labelStyle()
	ml.Font.Size = vg.Points(9)
	ml.XAlign, ml.YAlign, ml.Rotation = draw.XLeft, draw.YTop, math.Pi/2
	for _, m := range f.Marks {
		x := da.X(p.X.Norm(m.X))
		da.FillText(ml, vg.Point{X: x + vg.Points(2), Y: da.Min.Y + vg.Points(4)}, m.Label)
	}
	return drawn, nil
}

// lowest returns the smallest measured value drawn on a log axis: a
// point's value, or its upper bound when it is zero.
func (f *Figure) lowest() float64 {
	lowest := math.Inf(1)
	for _, s := range f.Series {
		for _, pt := range s.Points {
			switch {
			case s.Analytic:
			case pt.Y > 0:
				lowest = math.Min(lowest, pt.Y)
			case pt.Hi > 0:
				lowest = math.Min(lowest, pt.Hi)
			}
		}
	}
	return lowest
}

// addLine adds analytic series s to p as a dashed line in colour c and
// returns the vertices drawn.
func (f *Figure) addLine(p *plot.Plot, leg *plot.Legend, s Series, c color.Color) (int, error) {
	xys := make(plotter.XYs, 0, len(s.Points))
	for _, pt := range s.Points {
		if f.LogY && pt.Y <= 0 {
			continue // below every axis; the CSV has it
		}
		xys = append(xys, plotter.XY{X: pt.X, Y: pt.Y})
	}
	if len(xys) == 0 {
		return 0, nil
	}
	l, err := plotter.NewLine(xys)
	if err != nil {
		return 0, err
	}
	l.Color, l.Width = c, vg.Points(1.2)
	l.Dashes = []vg.Length{vg.Points(4), vg.Points(2)}
	p.Add(l)
	leg.Add(s.Name, l)
	return len(xys), nil
}

// addMeasured adds measured series s to p as points of shape and colour c
// with error bars cut at floor on a log axis, where a point with no event
// goes to bounds instead. It returns the marks drawn.
func (f *Figure) addMeasured(p *plot.Plot, leg *plot.Legend, s Series, c color.Color, shape draw.GlyphDrawer, floor float64, bounds *upperBounds) (int, error) {
	var xys plotter.XYs
	var errs errPoints
	drawn := 0
	for _, pt := range s.Points {
		drawn++
		if f.LogY && pt.Y <= 0 {
			bounds.xys = append(bounds.xys, plotter.XY{X: pt.X, Y: pt.Hi})
			bounds.colors = append(bounds.colors, c)
			continue
		}
		xys = append(xys, plotter.XY{X: pt.X, Y: pt.Y})
		lo := pt.Lo
		if f.LogY && lo < floor {
			lo = floor // the axis's bottom
		}
		errs = append(errs, errPoint{pt.X, pt.Y, pt.Y - lo, pt.Hi - pt.Y})
	}
	sc, err := plotter.NewScatter(xys)
	if err != nil {
		return drawn, err
	}
	sc.Color, sc.Shape, sc.Radius = c, shape, vg.Points(2.5)
	leg.Add(s.Name, sc)
	if len(xys) == 0 {
		return drawn, nil
	}
	eb, err := plotter.NewYErrorBars(errs)
	if err != nil {
		return drawn, err
	}
	eb.Color = c
	p.Add(eb, sc)
	return drawn, nil
}

// upperBounds are the points with no event on a log axis, drawn at their
// upper bound in their series' colour.
type upperBounds struct {
	xys    plotter.XYs
	colors []color.Color
}

// add adds the bounds to p, with one legend entry for them all. Bounds
// that coincide (several series with no event at the same x, out of as
// many trials) stand side by side.
func (b *upperBounds) add(p *plot.Plot, leg *plot.Legend) error {
	if len(b.xys) == 0 {
		return nil
	}
	type at struct{ x, y float64 }
	count, seen := map[at]int{}, map[at]int{}
	for _, xy := range b.xys {
		count[at{xy.X, xy.Y}]++
	}
	styles := make([]draw.GlyphStyle, len(b.xys))
	r := vg.Points(3)
	for i, xy := range b.xys {
		k := at{xy.X, xy.Y}
		dx := (vg.Length(seen[k]) - vg.Length(count[k]-1)/2) * 2.4 * r
		seen[k]++
		styles[i] = draw.GlyphStyle{Color: b.colors[i], Radius: r, Shape: downTriangle{dx}}
	}
	sc, err := plotter.NewScatter(b.xys)
	if err != nil {
		return err
	}
	sc.GlyphStyleFunc = func(i int) draw.GlyphStyle { return styles[i] }
	p.Add(sc)
	thumb, err := plotter.NewScatter(plotter.XYs{{}})
	if err != nil {
		return err
	}
	thumb.Shape, thumb.Radius, thumb.Color = downTriangle{}, r, color.Black
	leg.Add("none seen: 95 % upper bound", thumb)
	return nil
}

// labelStyle is the axes' label style.
func labelStyle() text.Style {
	return plot.New().X.Label.TextStyle
}

// setRange gives an axis its ticks, each axis one format: a linear axis
// spans whole steps of 1, 2 or 5 times a power of ten, each labelled with
// the step's decimals; a log axis is labelled at each power of ten as
// 10^k; explicit ticks are labelled in plain decimals.
func setRange(a *plot.Axis, log bool, ticks []float64) {
	switch {
	case ticks != nil:
		var ts plot.ConstantTicks
		for _, v := range ticks {
			if v >= a.Min && v <= a.Max {
				ts = append(ts, plot.Tick{Value: v, Label: strconv.FormatFloat(v, 'f', -1, 64)})
			}
		}
		a.Tick.Marker = ts
	case log:
		a.Min = math.Pow(10, math.Floor(math.Log10(a.Min)))
		a.Max = math.Pow(10, math.Ceil(math.Log10(a.Max)))
		a.Tick.Marker = powerTicks{}
		a.Tick.Label.Handler = powers{text.Plain{Fonts: a.Tick.Label.Handler.Cache()}}
	default:
		step := niceStep((a.Max - a.Min) / 7)
		a.Min = math.Floor(a.Min/step+1e-9) * step
		a.Max = math.Ceil(a.Max/step-1e-9) * step
		a.Tick.Marker = stepTicks(step)
	}
	if log {
		a.Scale = plot.LogScale{}
	}
}

// niceStep is the least of 1, 2 and 5 times a power of ten at least raw.
func niceStep(raw float64) float64 {
	if raw <= 0 {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(raw)))
	for _, m := range []float64{1, 2, 5, 10} {
		if m*p >= raw*(1-1e-9) {
			return m * p
		}
	}
	return 10 * p
}

// stepTicks labels every multiple of the step with the step's decimals.
type stepTicks float64

func (s stepTicks) Ticks(lo, hi float64) []plot.Tick {
	step := float64(s)
	dec := max(int(-math.Floor(math.Log10(step)+1e-9)), 0)
	var ts []plot.Tick
	for i := math.Ceil(lo/step - 1e-9); i*step <= hi+step*1e-9; i++ {
		v := i * step
		if v == 0 {
			v = 0 // not -0
		}
		ts = append(ts, plot.Tick{Value: v, Label: strconv.FormatFloat(v, 'f', dec, 64)})
	}
	return ts
}

// powerTicks labels each power of ten as 10^k, with minor ticks between.
type powerTicks struct{}

func (powerTicks) Ticks(min, max float64) []plot.Tick {
	var ts []plot.Tick
	for k := math.Floor(math.Log10(min) + 1e-9); math.Pow(10, k) <= max*(1+1e-9); k++ {
		v := math.Pow(10, k)
		ts = append(ts, plot.Tick{Value: v, Label: strings.Replace(fmt.Sprintf("10^%d", int(k)), "-", "−", 1)})
		for m := 2.0; m < 10 && m*v <= max; m++ {
			ts = append(ts, plot.Tick{Value: m * v})
		}
	}
	return ts
}

// powers draws "10^k" as 10 with k raised and smaller (the fonts have
// no superscript minus), other text as text.Plain does. Tick labels only:
// it does not rotate.
type powers struct{ text.Plain }

const supScale, supRise = 0.7, 0.45

func (h powers) Box(txt string, fnt font.Font) (w, ht, d vg.Length) {
	base, exp, ok := strings.Cut(txt, "^")
	w, ht, d = h.Plain.Box(base, fnt)
	if ok {
		ew, eh, _ := h.Plain.Box(exp, small(fnt))
		w += ew
		ht = max(ht, fnt.Size*supRise+eh)
	}
	return w, ht, d
}

func (h powers) Draw(c vg.Canvas, txt string, sty text.Style, pt vg.Point) {
	base, exp, ok := strings.Cut(txt, "^")
	if !ok {
		h.Plain.Draw(c, txt, sty, pt)
		return
	}
	f := h.Fonts.Lookup(sty.Font, sty.Font.Size)
	x := pt.X + vg.Length(sty.XAlign)*sty.Width(txt)
	y := pt.Y + vg.Length(sty.YAlign)*sty.Height(txt) - f.Extents().Ascent + sty.Font.Size
	c.SetColor(sty.Color)
	c.FillString(f, vg.Point{X: x, Y: y}, base)
	sf := small(sty.Font)
	c.FillString(h.Fonts.Lookup(sf, sf.Size), vg.Point{X: x + f.Width(base), Y: y + sty.Font.Size*supRise}, exp)
}

func small(f font.Font) font.Font {
	f.Size *= supScale
	return f
}

// downTriangle is an open triangle pointing down, a value at most here,
// drawn dx to the right of its point.
type downTriangle struct{ dx vg.Length }

func (d downTriangle) DrawGlyph(c *draw.Canvas, sty draw.GlyphStyle, pt vg.Point) {
	pt.X += d.dx
	c.SetLineStyle(draw.LineStyle{Color: sty.Color, Width: vg.Points(0.8)})
	r := sty.Radius
	var p vg.Path
	p.Move(vg.Point{X: pt.X - r, Y: pt.Y + r*0.6})
	p.Line(vg.Point{X: pt.X + r, Y: pt.Y + r*0.6})
	p.Line(vg.Point{X: pt.X, Y: pt.Y - r*1.1})
	p.Close()
	c.Stroke(p)
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
