package pint

import (
	"fmt"
	"math"
	"slices"

	"github.com/dtakit/dtakit/keywrite"
)

// The latency query: each switch that overwrites a packet's digest writes
// its hop latency, log-encoded in b bits, so the sink learns one hop's
// latency per packet, each hop equally often, and per-hop quantiles come
// from the packets of a flow.

// valueScale is the codes per doubling of a b-bit code over 32-bit values.
func valueScale(b int) float64 { return float64(int(1)<<b-1) / 32 }

// EncodeValue returns v's b-bit code, round(log2(1+v)·(2^b-1)/32): a
// multiplicative approximation whose relative error is at most
// ValueError(b) (a switch reads it from a table indexed by v's leading
// bits).
func EncodeValue(v uint32, b int) uint16 {
	return uint16(math.Round(math.Log2(1+float64(v)) * valueScale(b)))
}

// DecodeValue returns the value of a b-bit code.
func DecodeValue(code uint16, b int) float64 {
	return math.Exp2(float64(code)/valueScale(b)) - 1
}

// ValueError returns the largest relative error of a b-bit code, 1+v
// against 1 plus its decoded value: 2^(16/(2^b-1)) - 1 (4.4% at 8 bits).
func ValueError(b int) float64 { return math.Exp2(0.5/valueScale(b)) - 1 }

// EncodeLatency returns the b-bit digest packet pid carries after a path
// whose hops had latencies (source first): what the switches do hop by hop.
func EncodeLatency(pid uint32, latencies []uint32, b int) uint16 {
	var d uint16
	for i, v := range latencies {
		if Overwrites(pid, i+1) {
			d = EncodeValue(v, b)
		}
	}
	return d
}

// Quantiles answers a flow's per-hop latency quantiles from its packets'
// latency digests: each packet's value is its carrier hop's. It keeps the
// most recent Window values of each hop. It is not safe for concurrent
// use.
type Quantiles struct {
	bits, window, hops int
	vals               [][]float64 // per hop, a ring of decoded values
	next               []int       // per hop, the ring's next slot
	count              []uint64    // per hop, values seen
	last               []uint32    // pid last read from each copy (Read), +1
	scratch            []float64
}

// NewQuantiles returns a Quantiles for b-bit digests (0: DigestBits)
// keeping window values per hop (0: 4096).
func NewQuantiles(b, window int) (*Quantiles, error) {
	if b == 0 {
		b = DigestBits
	}
	if window == 0 {
		window = 4096
	}
	if b < 1 || b > MaxDigestBits || window < 1 {
		return nil, fmt.Errorf("%w: %d-bit digests (1..%d), window %d", ErrConfig, b, MaxDigestBits, window)
	}
	return &Quantiles{bits: b, window: window}, nil
}

// Observe records one packet's (pid, code) over a path of hops hops. The
// first packet fixes the path length; a packet of another length is an
// error wrapping ErrInconsistent.
func (q *Quantiles) Observe(pid uint32, code uint16, hops int) error {
	if hops < 1 || hops > MaxHops || code>>q.bits != 0 {
		return fmt.Errorf("%w: %d hops (1..%d), code %#x of %d bits", ErrEntry, hops, MaxHops, code, q.bits)
	}
	if q.hops == 0 {
		q.hops = hops
		q.vals = make([][]float64, hops)
		q.next = make([]int, hops)
		q.count = make([]uint64, hops)
	}
	if hops != q.hops {
		return fmt.Errorf("%w: a %d-hop packet on a %d-hop path", ErrInconsistent, hops, q.hops)
	}
	h := Carrier(pid, hops) - 1
	v := DecodeValue(code, q.bits)
	if len(q.vals[h]) < q.window {
		q.vals[h] = append(q.vals[h], v)
	} else {
		q.vals[h][q.next[h]] = v
		q.next[h] = (q.next[h] + 1) % q.window
	}
	q.count[h]++
	return nil
}

// Read observes the entries of key held in copies 0..n-1 of s that it has
// not read before, as Decoder.Read does, and returns how many.
func (q *Quantiles) Read(s *keywrite.Store, key uint32, n int) (int, error) {
	return readEntries(s, key, n, q.bits, &q.last, "%d-bit quantiles", q.Observe)
}

// Hops returns the path length seen (0 before the first packet).
func (q *Quantiles) Hops() int { return q.hops }

// Count returns the values hop (1-based) has contributed.
func (q *Quantiles) Count(hop int) uint64 {
	if hop < 1 || hop > q.hops {
		return 0
	}
	return q.count[hop-1]
}

// Quantile returns the p-quantile (0..1; 0.5 the median, 0.99 a tail) of
// hop's recent latencies (nearest rank), or false before hop has a value.
func (q *Quantiles) Quantile(hop int, p float64) (float64, bool) {
	if hop < 1 || hop > q.hops || len(q.vals[hop-1]) == 0 || p < 0 || p > 1 {
		return 0, false
	}
	q.scratch = append(q.scratch[:0], q.vals[hop-1]...)
	slices.Sort(q.scratch)
	i := int(math.Ceil(p*float64(len(q.scratch)))) - 1
	return q.scratch[max(i, 0)], true
}

// Reset forgets every packet.
func (q *Quantiles) Reset() {
	q.hops, q.vals, q.next, q.count = 0, nil, nil, nil
	clear(q.last)
}
