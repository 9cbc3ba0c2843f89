package sim

import (
	"fmt"
	"math"
	"math/rand/v2"
	"time"

	"github.com/dtakit/dtakit/appendlist"
	"github.com/dtakit/dtakit/keyincr"
	"github.com/dtakit/dtakit/postcard"
)

// pcParams are the Postcarding figure's fixed parameters.
const (
	pcHops   = 5
	pcCopies = 2
	pcValues = 1024
	pcActive = 64 // flows whose postcards interleave at the translator
)

// pcRun writes flows' postcards through the translator's cache into a
// Postcarding store, probes first, then later flows, and returns how many
// probes' paths come back right.
type pcRun struct {
	codec *postcard.Codec
	store *postcard.Store
	table *postcard.Table
	cache *postcard.Cache
	// prototype writes an evicted flow's chunk at the evicting flow's
	// address, as the reference prototype does (docs/DTA-WIRE.md 8.5).
	prototype bool
	rng       *rand.Rand
	base      uint32
	chunks    []postcard.Chunk
	writes    []postcard.Write
}

func newPCRun(l postcard.Layout, cache int, prototype bool, rng *rand.Rand, base uint32) (*pcRun, error) {
	store, err := postcard.NewStore(l, make([]byte, l.RegionSize()))
	if err != nil {
		return nil, err
	}
	values := make([]uint32, pcValues)
	for i := range values {
		values[i] = uint32(i + 1)
	}
	table, err := postcard.NewTable(l, values)
	if err != nil {
		return nil, err
	}
	ca, err := postcard.NewCache(l, cache)
	if err != nil {
		return nil, err
	}
	return &pcRun{codec: ca.Codec(), store: store, table: table, cache: ca, prototype: prototype, rng: rng, base: base}, nil
}

// path returns flow i's true path.
func (r *pcRun) path(i int) (p [pcHops]uint32) {
	h := uint64(mix(r.base+uint32(i))) * 0x9E3779B97F4A7C15
	for j := range p {
		h ^= h >> 29
		h *= 0xBF58476D1CE4E5B9
		p[j] = uint32(h>>40)%pcValues + 1
	}
	return p
}

// run sends flows 0..n-1, at most pcActive at a time with their postcards
// interleaved at random, then flushes the cache.
func (r *pcRun) run(n int) error {
	type active struct{ flow, next int }
	var act []active
	started := 0
	for started < n || len(act) > 0 {
		for len(act) < pcActive && started < n {
			act = append(act, active{flow: started})
			started++
		}
		j := r.rng.IntN(len(act))
		a := &act[j]
		p := r.path(a.flow)
		key := mix(r.base + uint32(a.flow))
		var err error
		r.chunks, err = r.cache.Insert(r.chunks[:0], key, postcard.Hop(a.next+1), 0, postcard.Value(p[a.next]))
		if err != nil {
			return err
		}
		if err := r.apply(key); err != nil {
			return err
		}
		if a.next++; a.next == pcHops {
			act[j] = act[len(act)-1]
			act = act[:len(act)-1]
		}
	}
	r.chunks = r.cache.Flush(r.chunks[:0])
	return r.apply(0)
}

// apply writes the chunks the cache emitted while inserting a postcard of
// key (0: a flush).
func (r *pcRun) apply(key uint32) error {
	for i := range r.chunks {
		ch := &r.chunks[i]
		if r.prototype && key != 0 && ch.Key != key {
			ch.Key = key // the prototype's address for an evicted chunk
		}
		r.writes = r.codec.AppendWrites(r.writes[:0], ch)
		for _, w := range r.writes {
			if err := r.store.Apply(w); err != nil {
				return err
			}
		}
	}
	return nil
}

// right reports whether flow i's path comes back right.
func (r *pcRun) right(i int) bool {
	p, o := r.store.Query(r.table, mix(r.base+uint32(i)))
	return o == postcard.Found && p.Len == pcHops && [pcHops]uint32(p.Hops[:pcHops]) == r.path(i)
}

// PostcardFlows is DTA's Fig. 14: the share of flows whose path comes back
// right against the flows written after them, for translator caches of
// three sizes, with dtakit's eviction (an evicted flow is written to its
// own chunks) and the prototype's (to the evicting flow's), beside the
// analysis (Appendix A.6, no eviction).
func PostcardFlows(c Config) (*Figure, error) {
	chunks, samples := uint32(1<<16), 20000
	if c.Quick {
		chunks, samples = 1<<12, 3000
	}
	probes := int(chunks / 8)
	trials := (samples + probes - 1) / probes
	f := &Figure{Name: "postcard-flows", Title: "Postcarding: paths found vs intermediate flows (N=2, B=5)",
		XLabel: "intermediate flows per chunk (α)", YLabel: "share of paths found right",
		Note: fmt.Sprintf("C = %d chunks, N = %d, B = %d hops, b = 32, |V| = %d; %d flows' postcards interleaved at a time; %d probe flows per point (%d runs of %d)", chunks, pcCopies, pcHops, pcValues, pcActive, trials*probes, trials, probes)}
	alphas := []float64{0.05, 0.1, 0.2, 0.4, 0.6, 0.8, 1.0}
	type variant struct {
		cache     int
		prototype bool
	}
	variants := []variant{{1 << 16, false}, {1 << 10, false}, {1 << 10, true}, {1 << 7, false}, {1 << 7, true}}
	for vi, v := range variants {
		name := fmt.Sprintf("cache %d, dtakit eviction", v.cache)
		if v.prototype {
			name = fmt.Sprintf("cache %d, prototype eviction", v.cache)
		}
		m := Series{Name: name}
		for ai, alpha := range alphas {
			later := int(math.Round(alpha * float64(chunks)))
			right := 0
			for t := range trials {
				rng := rand.New(rand.NewPCG(c.Seed, uint64((vi*64+ai)*trials+t)))
				r, err := newPCRun(postcard.Layout{Hops: pcHops, Chunks: chunks, Copies: pcCopies}, v.cache, v.prototype, rng, uint32(c.Seed)*0x01000193+uint32((vi*64+ai)*trials+t)<<18)
				if err != nil {
					return nil, err
				}
				if err := r.run(probes + later); err != nil {
					return nil, err
				}
				for i := range probes {
					if r.right(i) {
						right++
					}
				}
			}
			m.Points = append(m.Points, proportion(alpha, right, trials*probes))
		}
		f.Series = append(f.Series, m)
	}
	a := Series{Name: "analysis (no eviction)", Analytic: true}
	l := postcard.Layout{Hops: pcHops, Chunks: chunks, Copies: pcCopies}
	for _, alpha := range alphas {
		later := int(math.Round(alpha * float64(chunks)))
		var want float64
		for i := range probes {
			b := l.Bounds(float64(later+probes-1-i)/float64(chunks), pcValues)
			want += 1 - b.NoOutput - b.Wrong
		}
		want /= float64(probes)
		a.Points = append(a.Points, Point{X: alpha, Y: want, Lo: want, Hi: want})
	}
	f.Series = append(f.Series, a)
	return f, nil
}

// AppendLoss: the share of entries lost against the reader's lag, for
// three ring sizes at one rate, beside the analysis (Layout.LossFraction). Each lag window sends
// a Poisson number of entries through the translator's batcher into the
// region; the reader then drains the list and counts what lapping lost.
func AppendLoss(c Config) (*Figure, error) {
	windows := 2000
	if c.Quick {
		windows = 300
	}
	const rate = 100_000
	rings := []int{256, 512, 1024}
	f := &Figure{Name: "append-loss", Title: "Append: entries lost vs reader lag (100 k entries/s)",
		XLabel: "reader lag (ms)", YLabel: "share of entries lost",
		Note: fmt.Sprintf("%d entries/s per list (Poisson), batch 1, markers on; the reader drains the list every lag; %d lag windows per point", rate, windows)}
	lags := []float64{1, 2, 3, 4, 5, 6, 8, 10, 12, 15}
	rng := rand.New(rand.NewPCG(c.Seed, 7))
	for _, e := range rings {
		l := appendlist.Layout{Lists: 1, Entries: e, EntrySize: 4, Markers: true}
		m := Series{Name: fmt.Sprintf("E=%d measured", e)}
		a := Series{Name: fmt.Sprintf("E=%d analysis", e), Analytic: true}
		for _, lagMS := range lags {
			lag := time.Duration(lagMS * float64(time.Millisecond))
			r, err := appendlist.NewStore(l, make([]byte, l.RegionSize()))
			if err != nil {
				return nil, err
			}
			b, _ := appendlist.NewBatcher(l)
			rd, _ := r.Reader(0)
			buf := make([]byte, 4*e)
			var ws []appendlist.Write
			lambda := rate * lag.Seconds()
			var lostW []float64
			sent, lost := 0, 0
			for range windows {
				x := poisson(rng, lambda)
				for range x {
					sent++
					ws, err = b.AppendWrites(ws[:0], 0, []byte{byte(sent), byte(sent >> 8), byte(sent >> 16), 1}, false)
					if err != nil {
						return nil, err
					}
					for _, w := range ws {
						if err := r.Apply(w); err != nil {
							return nil, err
						}
					}
				}
				wl := 0
				for {
					n, err := rd.Read(buf)
					if lap, ok := err.(*appendlist.LapError); ok {
						wl += int(lap.Lost)
						continue
					}
					if err != nil {
						return nil, err
					}
					if n == 0 {
						break
					}
				}
				lost += wl
				lostW = append(lostW, float64(wl))
			}
			// A ratio of sums over windows; its error from the windows'
			// spread.
			y := float64(lost) / float64(sent)
			var sd float64
			meanLost := float64(lost) / float64(windows)
			for _, v := range lostW {
				sd += (v - meanLost) * (v - meanLost)
			}
			se := math.Sqrt(sd/float64(windows-1)/float64(windows)) / (float64(sent) / float64(windows))
			m.Points = append(m.Points, Point{X: lagMS, Y: y, Lo: math.Max(0, y-1.96*se), Hi: y + 1.96*se, N: windows})
			want := l.LossFraction(rate, lag)
			a.Points = append(a.Points, Point{X: lagMS, Y: want, Lo: want, Hi: want})
		}
		f.Series = append(f.Series, m, a)
	}
	return f, nil
}

// poisson draws from Poisson(lambda) exactly: a sum of Poisson(≤ 50)
// draws, each by Knuth's product method.
func poisson(rng *rand.Rand, lambda float64) int {
	n := 0
	for ; lambda > 50; lambda -= 50 {
		n += poisson(rng, 50)
	}
	l, p := math.Exp(-lambda), 1.0
	for {
		p *= rng.Float64()
		if p <= l {
			return n
		}
		n++
	}
}

// KeyIncrementError: the share of keys whose count-min estimate exceeds
// their true count by more than ε·T, against the number of counters S,
// for N = 1..4, beside FailureProb's bound (N/(εS))^N.
func KeyIncrementError(c Config) (*Figure, error) {
	keys := 1 << 16
	if c.Quick {
		keys = 1 << 13
	}
	const eps = 1e-3
	f := &Figure{Name: "keyincr-error", Title: "Key-Increment: estimates off by more than ε·T (ε = 0.001)",
		XLabel: "counters S", YLabel: "share of keys over ε·T", LogX: true, LogY: true,
		XTicks: []float64{1 << 10, 1 << 11, 1 << 12, 1 << 13, 1 << 14, 1 << 15, 1 << 16, 1 << 17},
		Note:   fmt.Sprintf("%d keys with counts 1 + Geometric(1/8) added through the translator's fetch-and-adds; bound: keyincr.FailureProb", keys)}
	rng := rand.New(rand.NewPCG(c.Seed, 11))
	counts := make([]uint64, keys)
	var total uint64
	for i := range counts {
		counts[i] = 1 + uint64(rng.ExpFloat64()*8)
		total += counts[i]
	}
	for n := 1; n <= 4; n++ {
		m := Series{Name: fmt.Sprintf("N=%d measured", n)}
		a := Series{Name: fmt.Sprintf("N=%d bound", n), Analytic: true}
		for e := 10; e <= 17; e++ {
			l := keyincr.Layout{Slots: 1 << e}
			s, err := keyincr.NewStore(l, nil)
			if err != nil {
				return nil, err
			}
			var ops []keyincr.Write
			base := uint32(c.Seed)*0x01000193 + uint32(n*32+e)<<24
			for i, cnt := range counts {
				if ops, err = l.AppendWrites(ops[:0], mix(base+uint32(i)), cnt, n); err != nil {
					return nil, err
				}
				if err := s.ApplyWrites(ops); err != nil {
					return nil, err
				}
			}
			over := 0
			for i, cnt := range counts {
				est, err := s.Query(mix(base+uint32(i)), n)
				if err != nil {
					return nil, err
				}
				if float64(est-cnt) > eps*float64(total) {
					over++
				}
			}
			x := float64(uint64(1) << e)
			m.Points = append(m.Points, proportion(x, over, keys))
			b := keyincr.FailureProb(1<<e, n, eps)
			a.Points = append(a.Points, Point{X: x, Y: b, Lo: b, Hi: b})
		}
		f.Series = append(f.Series, m, a)
	}
	return f, nil
}
