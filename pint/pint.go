// Package pint is PINT's per-flow path tracing (Ben Basat et al., "PINT:
// Probabilistic In-band Network Telemetry", SIGCOMM 2020) stored in DTA's
// Key-Write.
//
// Each packet carries one 1-byte digest. Switch i of a k-hop path (i from
// 1) overwrites it with Digest(pid, switch ID) when a global hash of the
// packet ID says so (Overwrites: probability 1/i, reservoir sampling), so
// the digest that reaches the sink is hop Carrier(pid, k)'s, each hop
// equally likely, and anyone who knows pid and k knows which hop it is.
//
// The sink reports (pid, digest, k) as a Key-Write of the flow's key that
// writes only copy Copy(pid, N) of the N (dart.Reporter.KeyWriteCopy), so
// the flow's N slots hold the digests of its N most recent packets, spread
// by packet ID. A Decoder reads the copies (keywrite.Store.Copy) and keeps,
// per hop, the switches whose digests match every packet carried from that
// hop; the path is decoded when one is left per hop. How many packets that
// takes is DecodeProb and ExpectedPackets.
//
// The hashes are the package's own (seeded 64-bit mixes): switches, sinks
// and decoders must all use these.
package pint

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/bits"
	"slices"

	"github.com/dtakit/dtakit/keywrite"
)

// DataSize is the Key-Write data size of a PINT entry: be32(pid) ‖ digest ‖
// hops ‖ two zero bytes.
const DataSize = 8

// DigestBits is the bits of a digest.
const DigestBits = 8

// MaxHops is the longest path an entry or a Decoder takes.
const MaxHops = 64

// Errors of the package.
var (
	// ErrEntry: an entry is not one AppendEntry writes.
	ErrEntry = errors.New("pint: malformed entry")
	// ErrInconsistent: a digest matches no switch left for its hop: the
	// path changed, or the universe lacks a switch. Reset the Decoder.
	ErrInconsistent = errors.New("pint: inconsistent digest")
	// ErrConfig: a Decoder's switch list is empty or repeats a switch.
	ErrConfig = errors.New("pint: invalid configuration")
)

// Seeds of the global hashes: the hop decision, the digest and the copy
// must be independent of each other.
const (
	seedHop    = 0x9E3779B97F4A7C15
	seedDigest = 0xC2B2AE3D27D4EB4F
	seedCopy   = 0x165667B19E3779F9
)

// mix is a 64-bit finaliser (SplitMix64's): every input bit reaches every
// output bit.
func mix(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xBF58476D1CE4E5B9
	x ^= x >> 27
	x *= 0x94D049BB133111EB
	return x ^ x>>31
}

// Overwrites reports whether the switch at hop (1-based) overwrites the
// digest of packet pid: with probability 1/hop, from a hash every switch
// and the decoder compute alike.
func Overwrites(pid uint32, hop int) bool {
	if hop <= 1 {
		return true
	}
	u := mix(uint64(pid)<<8 ^ uint64(hop) ^ seedHop)
	hi, _ := bits.Mul64(u, uint64(hop)) // u/2^64 < 1/hop
	return hi == 0
}

// Carrier returns the hop (1..k) whose digest packet pid carries at the end
// of a k-hop path.
func Carrier(pid uint32, k int) int {
	for i := k; i > 1; i-- {
		if Overwrites(pid, i) {
			return i
		}
	}
	return 1
}

// Digest returns switch's digest for packet pid.
func Digest(pid, switchID uint32) uint8 {
	return uint8(mix(uint64(pid)<<32 | uint64(switchID) ^ seedDigest))
}

// Encode returns the digest packet pid carries after path (the switch IDs
// from the source): what the switches do hop by hop.
func Encode(pid uint32, path []uint32) uint8 {
	var d uint8
	for i, s := range path {
		if Overwrites(pid, i+1) {
			d = Digest(pid, s)
		}
	}
	return d
}

// Copy returns the Key-Write copy, of n, that packet pid's entry is
// written to.
func Copy(pid uint32, n uint8) uint8 {
	if n == 0 {
		return 0
	}
	hi, _ := bits.Mul64(mix(uint64(pid)^seedCopy), uint64(n))
	return uint8(hi)
}

// AppendEntry appends the Key-Write data of packet pid carrying digest
// over a path of hops hops.
func AppendEntry(dst []byte, pid uint32, digest uint8, hops int) []byte {
	dst = binary.BigEndian.AppendUint32(dst, pid)
	return append(dst, digest, uint8(hops), 0, 0)
}

// ParseEntry decodes an entry AppendEntry wrote.
func ParseEntry(b []byte) (pid uint32, digest uint8, hops int, err error) {
	if len(b) != DataSize || b[6] != 0 || b[7] != 0 || b[5] == 0 || b[5] > MaxHops {
		return 0, 0, 0, fmt.Errorf("%w: % x (want %d bytes, hops 1..%d, two zero bytes)", ErrEntry, b, DataSize, MaxHops)
	}
	return binary.BigEndian.Uint32(b), b[4], int(b[5]), nil
}

// Decoder reconstructs one flow's path from its packets' digests, among a
// known universe of switch IDs. It is not safe for concurrent use.
type Decoder struct {
	switches []uint32
	words    int
	hops     int
	cand     []uint64 // hops × words bitset: switch s still possible at hop h
	left     []int    // candidates per hop
	next     []uint64 // Observe's scratch: one hop's survivors
	last     []uint32 // pid last read from each copy (Read), +1 (0: none)
}

// NewDecoder returns a decoder for paths through switches.
func NewDecoder(switches []uint32) (*Decoder, error) {
	if len(switches) == 0 {
		return nil, fmt.Errorf("%w: no switches", ErrConfig)
	}
	seen := make(map[uint32]bool, len(switches))
	for _, s := range switches {
		if seen[s] {
			return nil, fmt.Errorf("%w: switch %d listed twice", ErrConfig, s)
		}
		seen[s] = true
	}
	words := (len(switches) + 63) / 64
	return &Decoder{switches: append([]uint32(nil), switches...), words: words, next: make([]uint64, words)}, nil
}

// Reset forgets every packet, as for a new flow or a changed path.
func (d *Decoder) Reset() {
	d.hops = 0
	d.cand, d.left = d.cand[:0], d.left[:0]
	clear(d.last)
}

// Observe narrows the path by one packet's (pid, digest) over a path of
// hops hops. The first packet fixes the path length; a packet of another
// length, or a digest no remaining switch of its hop has, is an error
// wrapping ErrInconsistent, and changes nothing.
func (d *Decoder) Observe(pid uint32, digest uint8, hops int) error {
	if hops < 1 || hops > MaxHops {
		return fmt.Errorf("%w: %d hops (1..%d)", ErrEntry, hops, MaxHops)
	}
	if d.hops == 0 {
		d.hops = hops
		d.cand = slices.Grow(d.cand[:0], hops*d.words)[:hops*d.words]
		d.left = slices.Grow(d.left[:0], hops)[:hops]
		clear(d.cand)
		for h := range hops {
			for i := range d.switches {
				d.cand[h*d.words+i/64] |= 1 << (i % 64)
			}
			d.left[h] = len(d.switches)
		}
	}
	if hops != d.hops {
		return fmt.Errorf("%w: a %d-hop packet on a %d-hop path", ErrInconsistent, hops, d.hops)
	}
	h := Carrier(pid, hops) - 1
	set := d.cand[h*d.words : (h+1)*d.words]
	// The survivors go to scratch first, so that a contradiction changes
	// nothing.
	keep := 0
	for w, word := range set {
		d.next[w] = 0
		for ; word != 0; word &= word - 1 {
			b := bits.TrailingZeros64(word)
			if Digest(pid, d.switches[w*64+b]) == digest {
				d.next[w] |= 1 << b
				keep++
			}
		}
	}
	if keep == 0 {
		return fmt.Errorf("%w: no switch left at hop %d has digest %#02x for packet %#x", ErrInconsistent, h+1, digest, pid)
	}
	copy(set, d.next)
	d.left[h] = keep
	return nil
}

// Read observes the entries of key held in copies 0..n-1 of s that it has
// not read before (an entry is identified by its packet ID), and returns
// how many it observed. A copy holding another key's entry is skipped.
func (d *Decoder) Read(s *keywrite.Store, key uint32, n uint8) (int, error) {
	if s.Layout().DataSize != DataSize {
		return 0, fmt.Errorf("%w: the store's data size is %d, PINT entries are %d", ErrConfig, s.Layout().DataSize, DataSize)
	}
	if len(d.last) < int(n) {
		d.last = append(d.last, make([]uint32, int(n)-len(d.last))...)
	}
	seen := 0
	for c := range n {
		b, ok := s.Copy(key, c)
		if !ok {
			continue
		}
		pid, digest, hops, err := ParseEntry(b)
		if err != nil {
			return seen, err
		}
		if d.last[c] == pid+1 && pid+1 != 0 {
			continue
		}
		if err := d.Observe(pid, digest, hops); err != nil {
			return seen, err
		}
		d.last[c] = pid + 1
		seen++
	}
	return seen, nil
}

// Hops returns the path length seen (0 before the first packet).
func (d *Decoder) Hops() int { return d.hops }

// Candidates returns how many switches remain possible at hop (1-based).
func (d *Decoder) Candidates(hop int) int {
	if hop < 1 || hop > d.hops {
		return 0
	}
	return d.left[hop-1]
}

// Path returns the path, source first, once every hop has one switch left.
func (d *Decoder) Path() ([]uint32, bool) {
	if d.hops == 0 {
		return nil, false
	}
	for _, n := range d.left {
		if n != 1 {
			return nil, false
		}
	}
	path := make([]uint32, d.hops)
	for h := range d.hops {
		for w, word := range d.cand[h*d.words : (h+1)*d.words] {
			if word != 0 {
				path[h] = d.switches[w*64+bits.TrailingZeros64(word)]
			}
		}
	}
	return path, true
}

// DecodeProb is the probability that m packets of a flow decode its k-hop
// path among v switches with b-bit digests: each packet carries a uniform
// hop's digest, and a switch other than hop h's survives c packets of hop h
// with probability 2^-bc, independently. It sums over how the m packets
// fall on the hops (exactly, by conditioning hop by hop).
func DecodeProb(k, v, b, m int) float64 {
	return decodeProbs(k, v, b, m)[m]
}

// decodeProbs returns DecodeProb(k, v, b, r) for r = 0..m.
func decodeProbs(k, v, b, m int) []float64 {
	// f[c]: one hop decoded by c of its packets.
	f := make([]float64, m+1)
	for c := range f {
		f[c] = math.Pow(1-math.Pow(2, -float64(b*c)), float64(v-1))
	}
	lf := make([]float64, m+1) // log r!
	for r := 1; r <= m; r++ {
		lf[r] = lf[r-1] + math.Log(float64(r))
	}
	// q[r]: j hops all decoded by r packets spread uniformly over them.
	q := append([]float64(nil), f...)
	next := make([]float64, m+1)
	for j := 2; j <= k; j++ {
		// Of r packets, c land on hop j (binomial, 1/j), r-c on the others.
		lp, lq := math.Log(1/float64(j)), math.Log(1-1/float64(j))
		for r := range next {
			s := 0.0
			for c := 0; c <= r; c++ {
				s += math.Exp(lf[r]-lf[c]-lf[r-c]+float64(c)*lp+float64(r-c)*lq) * f[c] * q[r-c]
			}
			next[r] = s
		}
		q, next = next, q
	}
	return q
}

// ExpectedPackets is the mean number of packets needed to decode a k-hop
// path among v switches with b-bit digests, and its standard deviation.
func ExpectedPackets(k, v, b int) (mean, sd float64) {
	for m := 64 * k; ; m *= 2 {
		p := decodeProbs(k, v, b, m)
		if 1-p[m] > 1e-12 {
			continue
		}
		var e, e2 float64
		for r := range p {
			tail := 1 - p[r] // P(M > r)
			e += tail
			e2 += float64(2*r+1) * tail
		}
		return e, math.Sqrt(e2 - e*e)
	}
}
