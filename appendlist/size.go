package appendlist

import (
	"fmt"
	"math"
	"time"

	"github.com/dtakit/dtakit/internal/units"
)

// Workload is what an Append region must absorb, for Size.
type Workload struct {
	// Rate is the entries per second appended to each list, arriving as a
	// Poisson process.
	Rate float64
	// Lag is the longest a reader leaves its list unread: between two
	// reads that each drain it.
	Lag time.Duration
	// Lists, EntrySize and Batch are the layout's (Batch 0 means 1).
	Lists, EntrySize, Batch int
	// Success is the probability that a lag window loses nothing.
	Success float64
}

// Sizing is an Append geometry that meets a workload's target.
type Sizing struct {
	Layout  Layout  // with Markers, so that a loss is detected
	Bytes   uint64  // Layout.RegionSize()
	Success float64 // LossFreeProb of the layout
	Loss    float64 // LossFraction: the expected fraction of entries lost
	Why     string  // the choice of ring size, in a line
}

// LossFreeProb returns the probability that a reader draining a list
// every lag loses nothing: the entries written in a lag window, X ~
// Poisson(rate·lag), plus at most Batch-1 held back by the batcher before
// it, must fit in the ring: P(X ≤ E - B + 1).
func (l Layout) LossFreeProb(rate float64, lag time.Duration) float64 {
	l = l.withDefaults()
	return poissonCDF(float64(l.Entries-l.Batch+1), rate*lag.Seconds())
}

// LossFraction returns the expected fraction of entries lost when a
// reader drains the list every lag, with Batch 1: E[(X - E)⁺]/E[X] for X ~
// Poisson(rate·lag), the entries written while the reader was away beyond
// the ring's E.
func (l Layout) LossFraction(rate float64, lag time.Duration) float64 {
	l = l.withDefaults()
	lambda := rate * lag.Seconds()
	if lambda <= 0 {
		return 0
	}
	// E[(X-E)⁺] = λ·P(X ≥ E) - E·P(X ≥ E+1), using k·pmf(k) = λ·pmf(k-1).
	e := float64(l.Entries)
	over := lambda*(1-poissonCDF(e-1, lambda)) - e*(1-poissonCDF(e, lambda))
	return math.Max(0, over) / lambda
}

// poissonCDF returns P(X ≤ k) for X ~ Poisson(lambda), summing from the
// mode outwards in log space (no underflow of e^-λ for large λ).
func poissonCDF(k, lambda float64) float64 {
	k = math.Floor(k)
	switch {
	case k < 0:
		return 0
	case lambda <= 0:
		return 1
	}
	logPMF := func(i float64) float64 {
		lg, _ := math.Lgamma(i + 1)
		return i*math.Log(lambda) - lambda - lg
	}
	mode := math.Floor(lambda)
	// Sum the side of k away from the mode's far tail: the lower tail when
	// k < mode, the upper tail otherwise, then complement.
	sum := 0.0
	if k < mode {
		for i := k; i >= 0; i-- {
			t := math.Exp(logPMF(i))
			sum += t
			if t < sum*1e-17 {
				break
			}
		}
		return sum
	}
	for i := k + 1; ; i++ {
		t := math.Exp(logPMF(i))
		sum += t
		if t < sum*1e-17 || (t == 0 && i > lambda) {
			break
		}
	}
	return math.Max(0, 1-sum)
}

// Size returns the smallest power-of-two ring per list (with Markers) in
// which a reader lagging w.Lag loses nothing with probability at least
// w.Success.
func Size(w Workload) (Sizing, error) {
	if w.Batch == 0 {
		w.Batch = 1
	}
	if !(w.Success > 0 && w.Success < 1) || !(w.Rate >= 0) || w.Lag < 0 || math.IsInf(w.Rate, 0) {
		return Sizing{}, fmt.Errorf("size: %w: success %v not in (0, 1), rate %v, lag %v", ErrSizing, w.Success, w.Rate, w.Lag)
	}
	for e := 0; e <= 30; e++ {
		l := Layout{Lists: w.Lists, Entries: 1 << e, EntrySize: w.EntrySize, Batch: w.Batch, Markers: true}
		if 1<<e < w.Batch {
			continue
		}
		if err := l.Validate(); err != nil {
			return Sizing{}, fmt.Errorf("size: %w", err)
		}
		p := l.LossFreeProb(w.Rate, w.Lag)
		if p < w.Success {
			continue
		}
		mean := w.Rate * w.Lag.Seconds()
		return Sizing{Layout: l, Bytes: l.RegionSize(), Success: p, Loss: l.LossFraction(w.Rate, w.Lag),
			Why: fmt.Sprintf("%d entries per list of %s, %s in all: a %v lag brings %.0f entries on average; P(more than fit) = %.3g.",
				l.Entries, slotWhy(l), units.Bytes(l.RegionSize()), w.Lag, mean, 1-p)}, nil
	}
	return Sizing{}, fmt.Errorf("size: %w: %v entries/s over %v need more than 2^30 entries per list", ErrSizing, w.Rate, w.Lag)
}

// slotWhy says what an entry's slot holds.
func slotWhy(l Layout) string {
	if l.Markers {
		return fmt.Sprintf("%d-byte slots (%d bytes of data and a %d-byte lap marker)", l.SlotSize(), l.EntrySize, MarkerSize)
	}
	return fmt.Sprintf("%d bytes", l.EntrySize)
}
