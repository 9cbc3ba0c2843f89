package appendlist

import (
	"errors"
	"math"
	"math/rand/v2"
	"testing"
	"time"
)

func TestPoissonCDF(t *testing.T) {
	// Small λ against the direct sum; large λ against the normal limit.
	for _, lambda := range []float64{0.5, 3, 20} {
		sum := 0.0
		for k := 0; k < 60; k++ {
			lg, _ := math.Lgamma(float64(k) + 1)
			sum += math.Exp(float64(k)*math.Log(lambda) - lambda - lg)
			if got := poissonCDF(float64(k), lambda); math.Abs(got-sum) > 1e-12 {
				t.Fatalf("CDF(%d; %v) = %v, direct %v", k, lambda, got, sum)
			}
		}
	}
	lambda := 1e6
	k := lambda + 2*math.Sqrt(lambda)
	if got, want := poissonCDF(k, lambda), 0.5*math.Erfc(-2/math.Sqrt2); math.Abs(got-want) > 1e-3 {
		t.Fatalf("CDF(λ+2σ; 1e6) = %v, normal limit %v", got, want)
	}
}

// TestSizeSimulated sizes a ring, then runs lag windows of Poisson arrivals
// through the real batcher, region and reader: windows that lose entries
// are as rare as the sizing says (within 4σ), and the lost fraction
// matches LossFraction.
func TestSizeSimulated(t *testing.T) {
	// λ = 470, σ ≈ 21.7: the 512-entry ring overflows in about 2.5 % of windows.
	w := Workload{Rate: 94_000, Lag: 5 * time.Millisecond, Lists: 1, EntrySize: 4, Success: 0.95}
	sz, err := Size(w)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%+v", sz)
	if sz.Layout.Entries != 512 || sz.Success < 0.95 {
		t.Fatalf("Size = %+v", sz)
	}
	half := sz.Layout
	half.Entries /= 2
	if half.LossFreeProb(w.Rate, w.Lag) >= 0.95 {
		t.Fatalf("half the ring would do: %+v", sz)
	}
	r, _ := NewStore(sz.Layout, make([]byte, sz.Layout.RegionSize()))
	b, _ := NewBatcher(sz.Layout)
	rd, _ := r.Reader(0)
	rng := rand.New(rand.NewPCG(5, 6))
	lambda := w.Rate * w.Lag.Seconds()
	const windows = 4000
	lossy, lost, sent := 0, 0, 0
	buf := make([]byte, 4*sz.Layout.Entries)
	var ws []Write
	for range windows {
		x := poisson(rng, lambda)
		for i := range x {
			sent++
			ws, _ = b.AppendWrites(ws[:0], 0, []byte{byte(sent), byte(sent >> 8), byte(sent >> 16), 1 + byte(i&1)}, false)
			for _, wr := range ws {
				r.Apply(wr)
			}
		}
		windowLost := 0
		for {
			n, err := rd.Read(buf)
			var lap *LapError
			if errors.As(err, &lap) {
				windowLost += int(lap.Lost)
				continue
			}
			if n == 0 {
				break
			}
		}
		if windowLost > 0 {
			lossy++
		}
		lost += windowLost
	}
	p := 1 - sz.Success
	if sd := math.Sqrt(p * (1 - p) / windows); math.Abs(float64(lossy)/windows-p) > 4*sd+1.0/windows {
		t.Fatalf("%d of %d windows lost entries, sizing says %.4f", lossy, windows, p)
	}
	small := sz.Layout
	small.Entries = 256 // well below λ = 470: loses every window
	if f := small.LossFraction(w.Rate, w.Lag); math.Abs(f-(lambda-256)/lambda) > 0.01 {
		t.Fatalf("LossFraction far below the mean: %v", f)
	}
	if got, want := float64(lost)/float64(sent), sz.Loss; lost == 0 || got > want+4*math.Sqrt(want/float64(sent))+1e-4 || got < want/4 {
		t.Fatalf("lost fraction %v, LossFraction %v", got, want)
	}
	if _, err := Size(Workload{Rate: 1, Lag: time.Second, Lists: 1, EntrySize: 4, Success: 1}); !errors.Is(err, ErrSizing) {
		t.Fatal(err)
	}
	if _, err := Size(Workload{Rate: 1, Lag: time.Second, Lists: 1, EntrySize: 3, Success: 0.9}); !errors.Is(err, ErrLayout) {
		t.Fatal(err)
	}
}

// poisson draws from Poisson(lambda) exactly: a sum of Poisson(≤ 50)
// draws, each by Knuth's product method.
func poisson(rng *rand.Rand, lambda float64) int {
	if lambda > 50 {
		return poisson(rng, 50) + poisson(rng, lambda-50)
	}
	l, k, p := math.Exp(-lambda), 0, 1.0
	for {
		p *= rng.Float64()
		if p <= l {
			return k
		}
		k++
	}
}
