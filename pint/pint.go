// Package pint is PINT (Ben Basat et al., "PINT: Probabilistic In-band
// Network Telemetry", SIGCOMM 2020) stored in DTA's Key-Write: per-flow
// path tracing and per-hop latency quantiles from per-packet digests.
//
// Each packet carries one digest of b bits (1..16; DigestBits by default).
// Switch i of a k-hop path (i from 1) overwrites it when a global hash of
// the packet ID says so (Overwrites: probability 1/i, reservoir sampling),
// so the digest that reaches the sink is hop Carrier(pid, k)'s, each hop
// equally likely, and anyone who knows pid and k knows which hop it is.
// For path tracing the digest is Digest(pid, switch ID, b); for the
// latency query it is the hop's latency, log-encoded (EncodeValue).
//
// The sink reports (pid, digest, k) as a Key-Write of the flow's key that
// writes only copy Copy(pid, N) of the N (dart.Reporter.KeyWriteCopy), so
// the flow's N slots hold the digests of its N most recent packets, spread
// by packet ID. A Decoder reads the copies (keywrite.Store.Copy) and keeps,
// per hop, the switches whose digests match every packet carried from that
// hop; the path is decoded when one is left per hop. How many packets that
// takes is DecodeProb and ExpectedPackets. A Quantiles reads the same
// entries of a latency query and answers each hop's latency quantiles.
//
// The hashes are switch-feasible: no multiply. The packet ID goes through
// the hash unit's CRC-32C (dta/tofino), then through simple tabulation
// (four 256-entry tables XORed, one per byte), which a switch holds as
// match tables; the hop decision compares the result with a per-hop
// threshold 2^32/i from a table. Tabulation makes the digests nonlinear: a
// CRC alone is affine, so two switch IDs whose CRCs differ by a multiple of
// 2^b would share their digest on every packet and never be told apart.
// Switches, sinks and decoders must all use these (HashTables gives the
// tables' contents).
package pint

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/bits"
	"slices"

	"github.com/dtakit/dtakit/dta/tofino"
	"github.com/dtakit/dtakit/keywrite"
)

// DataSize is the Key-Write data size of a PINT entry: be32(pid) ‖ digest
// low byte ‖ hops ‖ digest high byte ‖ digest bits (0 for 8).
const DataSize = 8

// DigestBits is the default bits of a digest; MaxDigestBits the most.
const (
	DigestBits    = 8
	MaxDigestBits = 16
)

// MaxHops is the longest path an entry or a Decoder takes.
const MaxHops = 64

// Errors of the package.
var (
	// ErrEntry: an entry is not one AppendEntry writes.
	ErrEntry = errors.New("pint: malformed entry")
	// ErrInconsistent: a digest matches no switch left for its hop: the
	// path changed, or the universe lacks a switch. Reset the Decoder.
	ErrInconsistent = errors.New("pint: inconsistent digest")
	// ErrConfig: a Decoder's switch list is empty or repeats a switch, or
	// a digest width is outside 1..MaxDigestBits.
	ErrConfig = errors.New("pint: invalid configuration")
)

// tab is a simple tabulation hash of 32-bit keys: one table per byte.
type tab [4][256]uint32

func (t *tab) sum(z uint32) uint32 {
	return t[0][byte(z)] ^ t[1][byte(z>>8)] ^ t[2][byte(z>>16)] ^ t[3][z>>24]
}

var (
	// pidCRC is the hash unit's CRC over be32(pid).
	pidCRC *tofino.Hash
	// The three global hashes' tables: the hop decision, the digest and
	// the copy must be independent of each other.
	hopTab, digestTab, copyTab tab
	// threshold[i] is 2^32/i: hop i overwrites when its hash is below.
	threshold [MaxHops + 1]uint64
)

func init() {
	var err error
	if pidCRC, err = tofino.NewPredefined(32, "crc_32c"); err != nil {
		panic(err)
	}
	// The tables' contents are constants, drawn once from SplitMix64 with
	// fixed seeds (a switch's control plane loads them).
	for i, t := range []*tab{&hopTab, &digestTab, &copyTab} {
		x := uint64(0x9E3779B97F4A7C15) + uint64(i)<<32
		for j := range t {
			for k := range t[j] {
				x += 0x9E3779B97F4A7C15
				t[j][k] = uint32(splitmix(x))
			}
		}
	}
	for i := 1; i <= MaxHops; i++ {
		threshold[i] = (1 << 32) / uint64(i)
	}
}

// splitmix is SplitMix64's finaliser; it only fills the tables.
func splitmix(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xBF58476D1CE4E5B9
	x ^= x >> 27
	x *= 0x94D049BB133111EB
	return x ^ x>>31
}

// HashTables returns the contents of the hop, digest and copy tabulation
// tables (table j is indexed by byte j of the key, least significant
// first), for a switch's control plane.
func HashTables() (hop, digest, copies [4][256]uint32) { return hopTab, digestTab, copyTab }

// PacketHash is the hash unit's CRC-32C of be32(pid), the key every
// tabulation hash starts from.
func PacketHash(pid uint32) uint32 {
	var b [4]byte
	binary.BigEndian.PutUint32(b[:], pid)
	return uint32(pidCRC.SumBytes(b[:]))
}

// hopKey spreads hop over every byte, so each hop reads other entries of
// every table.
func hopKey(hop int) uint32 {
	h := uint32(hop)
	return h | h<<8 | h<<16 | h<<24
}

// Overwrites reports whether the switch at hop (1-based) overwrites the
// digest of packet pid: with probability 1/hop, from a hash every switch
// and the decoder compute alike.
func Overwrites(pid uint32, hop int) bool {
	if hop <= 1 {
		return true
	}
	if hop > MaxHops {
		return false
	}
	return uint64(hopTab.sum(PacketHash(pid)^hopKey(hop))) < threshold[hop]
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

// Digest returns switch's b-bit digest for packet pid: the digest
// tabulation of PacketHash(pid) XOR PacketHash(switchID), the switch's
// constant (its CRC spreads IDs that differ in one byte over all four, so
// every pair of switches collides with probability 2^-b per packet).
func Digest(pid, switchID uint32, b int) uint16 {
	return digestOf(PacketHash(pid), PacketHash(switchID), uint16(1<<b-1))
}

// digestOf is Digest from the packet's and the switch's hashes.
func digestOf(u, sw uint32, mask uint16) uint16 { return uint16(digestTab.sum(u^sw)) & mask }

// Encode returns the b-bit digest packet pid carries after path (the
// switch IDs from the source): what the switches do hop by hop.
func Encode(pid uint32, path []uint32, b int) uint16 {
	var d uint16
	for i, s := range path {
		if Overwrites(pid, i+1) {
			d = Digest(pid, s, b)
		}
	}
	return d
}

// Copy returns the Key-Write copy, of n, that packet pid's entry is
// written to. The sink chooses it, so the reduction is a remainder.
func Copy(pid uint32, n int) int {
	if n < 1 {
		return 0
	}
	return int(copyTab.sum(PacketHash(pid)) % uint32(n))
}

// Entry is one packet's PINT entry.
type Entry struct {
	PID    uint32
	Digest uint16
	Bits   int // digest bits, 1..MaxDigestBits
	Hops   int
}

// AppendEntry appends the Key-Write data of packet pid carrying a
// digest of b bits over a path of hops hops.
func AppendEntry(dst []byte, pid uint32, digest uint16, b, hops int) []byte {
	dst = binary.BigEndian.AppendUint32(dst, pid)
	wb := uint8(b)
	if b == DigestBits {
		wb = 0
	}
	return append(dst, byte(digest), uint8(hops), byte(digest>>8), wb)
}

// ParseEntry decodes an entry AppendEntry wrote.
func ParseEntry(b []byte) (Entry, error) {
	if len(b) != DataSize {
		return Entry{}, fmt.Errorf("%w: %d bytes, want %d", ErrEntry, len(b), DataSize)
	}
	e := Entry{PID: binary.BigEndian.Uint32(b), Digest: uint16(b[6])<<8 | uint16(b[4]), Bits: int(b[7]), Hops: int(b[5])}
	if e.Bits == 0 {
		e.Bits = DigestBits
	}
	if e.Hops == 0 || e.Hops > MaxHops || e.Bits > MaxDigestBits || e.Digest>>e.Bits != 0 {
		return Entry{}, fmt.Errorf("%w: % x (want hops 1..%d, digest bits 1..%d, a digest that fits them)", ErrEntry, b, MaxHops, MaxDigestBits)
	}
	return e, nil
}

// Decoder reconstructs one flow's path from its packets' digests, among a
// known universe of switch IDs. It is not safe for concurrent use.
type Decoder struct {
	bits     int
	switches []uint32
	swHash   []uint32 // PacketHash of each switch ID, Digest's constant
	words    int
	hops     int
	cand     []uint64 // hops × words bitset: switch s still possible at hop h
	left     []int    // candidates per hop
	next     []uint64 // Observe's scratch: one hop's survivors
	last     []uint32 // pid last read from each copy (Read), +1 (0: none)
}

// NewDecoder returns a decoder for paths through switches with b-bit
// digests (0: DigestBits).
func NewDecoder(switches []uint32, b int) (*Decoder, error) {
	if b == 0 {
		b = DigestBits
	}
	if b < 1 || b > MaxDigestBits {
		return nil, fmt.Errorf("%w: %d-bit digests (1..%d)", ErrConfig, b, MaxDigestBits)
	}
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
	sw := make([]uint32, len(switches))
	for i, s := range switches {
		sw[i] = PacketHash(s)
	}
	return &Decoder{bits: b, switches: append([]uint32(nil), switches...), swHash: sw, words: words, next: make([]uint64, words)}, nil
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
func (d *Decoder) Observe(pid uint32, digest uint16, hops int) error {
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
	u, mask := PacketHash(pid), uint16(1<<d.bits-1)
	for w, word := range set {
		d.next[w] = 0
		for ; word != 0; word &= word - 1 {
			b := bits.TrailingZeros64(word)
			if digestOf(u, d.swHash[w*64+b], mask) == digest {
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
func (d *Decoder) Read(s *keywrite.Store, key uint32, n int) (int, error) {
	return readEntries(s, key, n, d.bits, &d.last, "a %d-bit decoder", d.Observe)
}

// readEntries hands observe each entry of key in copies 0..n-1 of s whose
// packet ID differs from the one last read from that copy (last[c], +1),
// and returns how many it handed. what names the reader in an error.
func readEntries(s *keywrite.Store, key uint32, n int, bits int, last *[]uint32, what string, observe func(pid uint32, digest uint16, hops int) error) (int, error) {
	if s.Layout().DataSize != DataSize {
		return 0, fmt.Errorf("%w: the store's data size is %d, PINT entries are %d", ErrConfig, s.Layout().DataSize, DataSize)
	}
	if n < 0 || n > keywrite.MaxRedundancy {
		return 0, fmt.Errorf("%w: %d copies, want 0..%d", ErrConfig, n, keywrite.MaxRedundancy)
	}
	if len(*last) < n {
		*last = append(*last, make([]uint32, n-len(*last))...)
	}
	seen := 0
	for c := range n {
		b, ok := s.Copy(key, uint8(c))
		if !ok {
			continue
		}
		e, err := ParseEntry(b)
		if err != nil {
			return seen, err
		}
		if e.Bits != bits {
			return seen, fmt.Errorf("%w: a %d-bit digest for "+what, ErrEntry, e.Bits, bits)
		}
		if (*last)[c] == e.PID+1 && e.PID+1 != 0 {
			continue
		}
		if err := observe(e.PID, e.Digest, e.Hops); err != nil {
			return seen, err
		}
		(*last)[c] = e.PID + 1
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
