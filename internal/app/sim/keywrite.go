package sim

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/dtakit/dtakit/dta/tofino"
	"github.com/dtakit/dtakit/keywrite"
)

// mix is a bijection on uint32: distinct counters give distinct keys.
func mix(i uint32) uint32 {
	i ^= i >> 16
	i *= 0x7feb352d
	i ^= i >> 15
	i *= 0x846ca68b
	return i ^ i>>16
}

// kwRun is a Key-Write store written as the translator writes it.
type kwRun struct {
	s    *keywrite.Store
	l    keywrite.Layout
	n    int
	ops  []keywrite.Write
	buf  []byte
	data []byte
	base uint32 // keys are mix(base + i): distinct within a run
}

func newKWRun(slots uint64, n int, h tofino.Hasher, base uint32) (*kwRun, error) {
	l := keywrite.Layout{Slots: slots, DataSize: 4, Hasher: h}
	s, err := keywrite.NewStore(l, nil)
	if err != nil {
		return nil, err
	}
	return &kwRun{s: s, l: l, n: n, data: make([]byte, 4), base: base}, nil
}

func (r *kwRun) key(i int) uint32 { return mix(r.base + uint32(i)) }

// value is key i's data: distinct for distinct keys.
func value(key uint32) uint32 { return key*0x9e3779b1 + 1 }

// write writes report i through the translator's writes.
func (r *kwRun) write(i int) error {
	k := r.key(i)
	binary.LittleEndian.PutUint32(r.data, value(k))
	var err error
	r.ops, r.buf, err = r.l.AppendWrites(r.ops[:0], r.buf[:0], k, r.data, r.n)
	if err != nil {
		return err
	}
	return r.s.ApplyWrites(r.ops)
}

// query asks for key i: found (with its own value), wrong (another value),
// or neither.
func (r *kwRun) query(i int) (found, wrong bool, err error) {
	k := r.key(i)
	res, err := r.s.Query(k, r.n, keywrite.Plurality)
	if err != nil || res.Status != keywrite.Found {
		return false, false, err
	}
	ok := binary.LittleEndian.Uint32(res.Data) == value(k)
	return ok, !ok, nil
}

// emptyProb is the finite-S probability that a key written before later
// others has no copy left (eq. 1, per-copy hashing).
func emptyProb(n int, later, slots uint64) float64 {
	return math.Pow(keywrite.OverwriteProbSlots(n, later, slots), float64(n))
}

// probeRun writes probes keys, then later more, and counts how many probes
// are found and answered wrongly; sumLater accumulates each probe's later
// count (probe i has later + probes-1-i keys written after it).
func probeRun(slots uint64, n int, h tofino.Hasher, base uint32, probes, later int) (found, wrong int, err error) {
	r, err := newKWRun(slots, n, h, base)
	if err != nil {
		return 0, 0, err
	}
	for i := range probes + later {
		if err := r.write(i); err != nil {
			return 0, 0, err
		}
	}
	for i := range probes {
		f, w, err := r.query(i)
		if err != nil {
			return 0, 0, err
		}
		if f {
			found++
		}
		if w {
			wrong++
		}
	}
	return found, wrong, nil
}

// KeyWriteAlpha is DTA's Fig. 12: the share of keys found against the
// load α (later keys per slot) for N = 1..4, with the analysis (eq. 1) and
// marks where the best N changes.
func KeyWriteAlpha(c Config) (*Figure, error) {
	slots, samples := uint64(1<<20), 40000
	if c.Quick {
		slots, samples = 1<<14, 4000
	}
	probes := int(slots / 32)
	trials := (samples + probes - 1) / probes
	f := &Figure{Name: "keywrite-alpha", Title: "Key-Write: keys found vs load",
		XLabel: "load α (keys written after the key, per slot)", YLabel: "share of keys found",
		Note: fmt.Sprintf("S = %d slots, 4-byte values, per-copy hashing; %d probe keys per point (%d runs of %d), written before α·S others; S enters only through (1-1/S)^(N·α·S) = e^(-Nα)(1 - O(1/S)), so the papers' larger S give the same curves", slots, trials*probes, trials, probes)}
	alphas := []float64{0.05, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0}
	for n := 1; n <= 4; n++ {
		m := Series{Name: fmt.Sprintf("N=%d measured", n)}
		a := Series{Name: fmt.Sprintf("N=%d analysis", n), Analytic: true}
		for ai, alpha := range alphas {
			later := int(math.Round(alpha * float64(slots)))
			found, total := 0, 0
			var want float64
			for t := range trials {
				base := uint32(c.Seed)*0x01000193 + uint32((n*64+ai)*trials+t)<<24
				fnd, _, err := probeRun(slots, n, nil, base, probes, later)
				if err != nil {
					return nil, err
				}
				found += fnd
				total += probes
			}
			for i := range probes {
				want += 1 - emptyProb(n, uint64(later+probes-1-i), slots)
			}
			m.Points = append(m.Points, proportion(alpha, found, total))
			a.Points = append(a.Points, Point{X: alpha, Y: want / float64(probes), Lo: want / float64(probes), Hi: want / float64(probes)})
		}
		f.Series = append(f.Series, m, a)
	}
	// The best N along α, from the analysis at this S.
	best := 0
	for alpha := alphas[0]; alpha <= 1.0001; alpha += 0.01 {
		b, bp := 0, -1.0
		for n := 1; n <= 4; n++ {
			if p := 1 - emptyProb(n, uint64(alpha*float64(slots)), slots); p > bp+1e-12 {
				b, bp = n, p
			}
		}
		if best != 0 && b != best {
			f.Marks = append(f.Marks, Mark{X: alpha, Label: fmt.Sprintf("best N: %d → %d", best, b)})
		}
		best = b
	}
	return f, nil
}

// KeyWriteAge is DTA's Fig. 13 (DART's Fig. 4): the share of keys found
// against their age, for three storage sizes at one report rate, N = 2.
// Scaled down from switch rates: the load a key of age t has seen is
// rate·t/S, so dividing rate and S by the same factor keeps every curve.
func KeyWriteAge(c Config) (*Figure, error) {
	rate, perBin := 1<<20, 4000
	if c.Quick {
		rate, perBin = 1<<14, 1000
	}
	const n, seconds = 2, 8
	sizes := []uint64{uint64(rate) / 2, uint64(rate), uint64(rate) * 2}
	f := &Figure{Name: "keywrite-age", Title: "Key-Write: keys found vs key age (N=2)",
		XLabel: "key age (s)", YLabel: "share of keys found", LogX: true,
		XTicks: []float64{0.0625, 0.125, 0.25, 0.5, 1, 2, 4, 8},
		Note:   fmt.Sprintf("%d keys/s for %d s into S = %d, %d, %d slots (a switch's rate and memory scaled down by the same factor keep these curves); %d keys per age bin", rate, seconds, sizes[0], sizes[1], sizes[2], perBin)}
	ages := []float64{0.0625, 0.125, 0.25, 0.5, 1, 2, 4, 8}
	for si, slots := range sizes {
		r, err := newKWRun(slots, n, nil, uint32(c.Seed)*0x01000193+uint32(si)<<28)
		if err != nil {
			return nil, err
		}
		total := rate * seconds
		for i := range total {
			if err := r.write(i); err != nil {
				return nil, err
			}
		}
		label := fmt.Sprintf("S=%d", slots)
		if slots >= 1<<20 {
			label = fmt.Sprintf("S=%dMi", slots>>20)
		} else if slots >= 1<<10 {
			label = fmt.Sprintf("S=%dKi", slots>>10)
		}
		m := Series{Name: label + " measured"}
		a := Series{Name: label + " analysis", Analytic: true}
		for _, age := range ages {
			// The perBin keys written just before age·rate later ones.
			later := int(age * float64(rate))
			first := total - 1 - later - perBin + 1
			if first < 0 {
				continue
			}
			found := 0
			var want float64
			for i := first; i < first+perBin; i++ {
				fnd, _, err := r.query(i)
				if err != nil {
					return nil, err
				}
				if fnd {
					found++
				}
				want += 1 - emptyProb(n, uint64(total-1-i), slots)
			}
			want /= float64(perBin)
			m.Points = append(m.Points, proportion(age, found, perBin))
			a.Points = append(a.Points, Point{X: age, Y: want, Lo: want, Hi: want})
		}
		f.Series = append(f.Series, m, a)
	}
	return f, nil
}

// truncHasher addresses slots as tofino.PerCopy does and keeps b bits of
// a checksum: DART's checksum width as a parameter of the real store. With
// independent set, the bits are XXH64's (tofino.XXHash), independent of
// the CRC slot hashes as eq. 4 assumes; otherwise they are the low bits of
// the switch's CRC32 checksum, which is affine in the key like the slot
// CRCs, so keys that share a slot agree on those bits far more often than
// 2^-b.
type truncHasher struct {
	tofino.Hasher
	bits        int
	independent bool
}

func (h truncHasher) Checksum(key uint32) uint32 {
	c := h.Hasher.Checksum(key)
	if h.independent {
		c = tofino.XXHash.Checksum(key)
	}
	if h.bits >= 32 {
		return c
	}
	return c & (1<<h.bits - 1)
}

// KeyWriteWrong is DART's Fig. 5: the share of queries answered with a
// wrong value against the checksum width b, at load α = 1, with eq. 4's
// bounds. At b = 32 no wrong answer is expected in a feasible run: the CSV
// gives the 95 % upper bound of the rate (3/queries).
func KeyWriteWrong(c Config) (*Figure, error) {
	slots, samples := uint64(1<<18), 1<<22
	if c.Quick {
		slots, samples = 1<<15, 1<<19
	}
	const alpha = 1.0
	probes := int(slots / 2)
	trials := (samples + probes - 1) / probes
	later := int(alpha * float64(slots))
	f := &Figure{Name: "keywrite-wrong", Title: "Key-Write: wrong answers vs checksum bits (α = 1)",
		XLabel: "checksum bits b", YLabel: "share of queries answered wrongly", LogY: true,
		XTicks: []float64{8, 10, 12, 14, 16, 32},
		Note:   fmt.Sprintf("S = %d slots, %d probe queries per point (%d runs of %d probes written before %d others), plurality vote; b-bit checksums from XXH64, independent of the slot CRCs as eq. 4 assumes (the last series truncates the switch's CRC32 checksum instead); analysis: eq. 4 upper bound at each probe's load", slots, trials*probes, trials, probes, later)}
	bitsList := []int{8, 10, 12, 14, 16, 32}
	for _, n := range []int{1, 2, 4, -2} {
		independent := n > 0
		m := Series{Name: fmt.Sprintf("N=%d measured", n)}
		a := Series{Name: fmt.Sprintf("N=%d eq. 4", n), Analytic: true}
		if !independent {
			n = -n
			m.Name = fmt.Sprintf("N=%d, CRC32 checksum truncated", n)
		}
		for bi, b := range bitsList {
			wrong, total := 0, 0
			for t := range trials {
				base := uint32(c.Seed)*0x01000193 + uint32((n*16+bi)*trials+t)<<20
				if !independent {
					base ^= 0x5bd1e995
				}
				_, w, err := probeRun(slots, n, truncHasher{tofino.PerCopy, b, independent}, base, probes, later)
				if err != nil {
					return nil, err
				}
				wrong += w
				total += probes
			}
			var lo, hi float64
			for i := 0; i < probes; i += max(1, probes/256) {
				l, h := keywrite.WrongProbBounds(n, b, float64(later+probes-1-i)/float64(slots))
				lo, hi = lo+l, hi+h
			}
			cnt := float64((probes + max(1, probes/256) - 1) / max(1, probes/256))
			m.Points = append(m.Points, proportion(float64(b), wrong, total))
			a.Points = append(a.Points, Point{X: float64(b), Y: hi / cnt, Lo: lo / cnt, Hi: hi / cnt})
		}
		f.Series = append(f.Series, m)
		if independent {
			f.Series = append(f.Series, a)
		}
	}
	return f, nil
}
