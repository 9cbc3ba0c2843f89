package pint

import (
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/dtakit/dtakit/keywrite"
)

func TestValueCode(t *testing.T) {
	for _, b := range []int{6, 8, 12, 16} {
		for _, v := range []uint32{0, 1, 2, 100, 999, 123456, 1 << 31, math.MaxUint32} {
			c := EncodeValue(v, b)
			if c>>b != 0 {
				t.Fatalf("%d bits: %d encodes to %#x", b, v, c)
			}
			got := DecodeValue(c, b)
			if r := (1 + got) / (1 + float64(v)); math.Abs(r-1) > ValueError(b)+1e-9 {
				t.Fatalf("%d bits: %d decodes to %.1f (ratio %.4f, bound %.4f)", b, v, got, r, ValueError(b))
			}
		}
	}
	if e := ValueError(8); e < 0.04 || e > 0.05 {
		t.Fatalf("8-bit error %.4f", e)
	}
}

// TestQuantiles runs the latency query over Key-Write: every switch of a
// 5-hop path has its own latency distribution (exponential, mean 1 µs ×
// hop), each packet carries its carrier hop's latency in 8 bits, the sink
// writes the entry into copy Copy(pid, N), and Quantiles reads the copies
// after every packet. Each hop's median and 99th percentile match those of
// the latencies that hop's packets carried to within the code's error, and
// the distribution's own to within sampling error.
func TestQuantiles(t *testing.T) {
	const k, copies, packets, bits = 5, 4, 40000, 8
	rng := rand.New(rand.NewPCG(5, 6))
	l := keywrite.Layout{Slots: 1 << 12, DataSize: DataSize}
	st, _ := keywrite.NewStore(l, nil)
	q, err := NewQuantiles(bits, packets)
	if err != nil {
		t.Fatal(err)
	}
	const key = 0xF10
	carried := make([][]float64, k) // the latencies each hop's packets carried, exactly
	lat := make([]uint32, k)
	var buf []byte
	for range packets {
		pid := rng.Uint32()
		for h := range lat {
			lat[h] = uint32(rng.ExpFloat64() * 1000 * float64(h+1))
		}
		c := Carrier(pid, k) - 1
		carried[c] = append(carried[c], float64(lat[c]))
		buf = AppendEntry(buf[:0], pid, EncodeLatency(pid, lat, bits), bits, k)
		w, _, _ := l.AppendCopy(nil, nil, key, buf, copies, int(Copy(pid, copies)))
		st.Apply(w[0])
		if _, err := q.Read(st, key, copies); err != nil {
			t.Fatal(err)
		}
	}
	if q.Hops() != k {
		t.Fatalf("%d hops", q.Hops())
	}
	for h := 1; h <= k; h++ {
		n := len(carried[h-1])
		if q.Count(h) != uint64(n) || n < packets/k*9/10 {
			t.Fatalf("hop %d: %d values, %d carried", h, q.Count(h), n)
		}
		slices.Sort(carried[h-1])
		mean := 1000 * float64(h)
		for _, p := range []float64{0.5, 0.99} {
			got, ok := q.Quantile(h, p)
			exact := carried[h-1][int(math.Ceil(p*float64(n)))-1]
			if !ok || math.Abs((1+got)/(1+exact)-1) > ValueError(bits)+1e-9 {
				t.Fatalf("hop %d p%.0f: %.0f ns, the carried values' %.0f (code error %.3f)", h, 100*p, got, exact, ValueError(bits))
			}
			// The exponential's quantile, and the sampling error of an
			// order statistic: sd = mean·sqrt(p/((1-p)n)).
			want := -mean * math.Log(1-p)
			tol := 4.5*mean*math.Sqrt(p/((1-p)*float64(n))) + ValueError(bits)*want
			t.Logf("hop %d p%.0f: %.0f ns (distribution %.0f ± %.0f, %d packets)", h, 100*p, got, want, tol, n)
			if math.Abs(got-want) > tol {
				t.Fatalf("hop %d p%.0f: %.0f ns, distribution %.0f ± %.0f", h, 100*p, got, want, tol)
			}
		}
	}
	if err := q.Observe(1, 0, 4); !errors.Is(err, ErrInconsistent) {
		t.Fatalf("another length: %v", err)
	}
	if _, ok := q.Quantile(k+1, 0.5); ok {
		t.Fatal("a quantile beyond the path")
	}
	// A window keeps the most recent values.
	w, _ := NewQuantiles(bits, 2)
	for i, v := range []uint32{1000, 5, 7} {
		pid := uint32(i)
		for Carrier(pid, 1) != 1 {
			pid++
		}
		w.Observe(pid, EncodeValue(v, bits), 1)
	}
	if hi, _ := w.Quantile(1, 1); hi > 10 || w.Count(1) != 3 {
		t.Fatalf("window of 2: max %.1f after 1000, 5, 7", hi)
	}
}
