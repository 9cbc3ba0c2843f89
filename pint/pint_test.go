package pint

import (
	"encoding/binary"
	"errors"
	"hash/crc32"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/dtakit/dtakit/keywrite"
)

// The global hash makes every hop equally likely to be the carrier.
func TestCarrierUniform(t *testing.T) {
	const k, packets = 7, 140000
	var count [k + 1]int
	for pid := range uint32(packets) {
		count[Carrier(pid*2654435761, k)]++
	}
	want := float64(packets) / k
	sd := math.Sqrt(want * (1 - 1.0/k))
	for h := 1; h <= k; h++ {
		if math.Abs(float64(count[h])-want) > 4.5*sd {
			t.Fatalf("hop %d carried %d of %d packets, want %.0f ± %.0f", h, count[h], packets, want, 4.5*sd)
		}
	}
}

func TestEncodeIsCarriersDigest(t *testing.T) {
	path := []uint32{11, 22, 33, 44, 55}
	for pid := range uint32(1000) {
		if got, want := Encode(pid, path, DigestBits), Digest(pid, path[Carrier(pid, len(path))-1], DigestBits); got != want {
			t.Fatalf("packet %d: digest %#x, carrier's %#x", pid, got, want)
		}
	}
}

// universe returns v distinct switch IDs.
func universe(rng *rand.Rand, v int) []uint32 {
	seen := map[uint32]bool{}
	var s []uint32
	for len(s) < v {
		id := rng.Uint32()
		if !seen[id] {
			seen[id] = true
			s = append(s, id)
		}
	}
	return s
}

// TestMonteCarlo runs PINT over Key-Write: each packet of a flow writes its
// entry into copy Copy(pid, N) of the flow's key in a keywrite.Store, and a
// Decoder reads the flow's copies after each packet. The packets it takes
// to decode a k-hop path among v switches have the mean and distribution
// DecodeProb gives, and the path decoded is always the true one.
func TestMonteCarlo(t *testing.T) {
	for _, c := range []struct{ k, b int }{{1, 8}, {3, 8}, {5, 8}, {8, 8}, {10, 8}, {5, 4}, {10, 4}, {5, 12}, {10, 16}} {
		monteCarlo(t, c.k, c.b)
	}
}

func monteCarlo(t *testing.T, k, bits int) {
	const v, copies = 300, 4
	trials := 2000
	if testing.Short() {
		trials = 600
	}
	rng := rand.New(rand.NewPCG(1, uint64(k*100+bits)))
	switches := universe(rng, v)
	l := keywrite.Layout{Slots: 1 << 14, DataSize: DataSize}
	st, _ := keywrite.NewStore(l, nil)
	{
		mean, sd := ExpectedPackets(k, v, bits)
		needed := make([]int, trials)
		var sum float64
		for trial := range trials {
			key := rng.Uint32()
			perm := rng.Perm(v)
			path := make([]uint32, k)
			for i := range path {
				path[i] = switches[perm[i]]
			}
			d, _ := NewDecoder(switches, bits)
			var buf []byte
			for m := 1; ; m++ {
				pid := rng.Uint32()
				buf = AppendEntry(buf[:0], pid, Encode(pid, path, bits), bits, k)
				w, _, _ := l.AppendCopy(nil, nil, key, buf, copies, int(Copy(pid, copies)))
				st.Apply(w[0])
				if _, err := d.Read(st, key, copies); err != nil {
					t.Fatalf("k=%d trial %d packet %d: %v", k, trial, m, err)
				}
				if got, ok := d.Path(); ok {
					if !slices.Equal(got, path) {
						t.Fatalf("k=%d: decoded %v, path %v", k, got, path)
					}
					needed[trial] = m
					sum += float64(m)
					break
				}
				if m > 400*k+400 {
					t.Fatalf("k=%d b=%d: not decoded after %d packets", k, bits, m)
				}
			}
		}
		got := sum / float64(trials)
		tol := 4.5 * sd / math.Sqrt(float64(trials))
		t.Logf("k=%d hops, %d switches, %d-bit digests: %.2f packets on average (analysis %.2f ± %.2f, sd %.2f)", k, v, bits, got, mean, tol, sd)
		if math.Abs(got-mean) > tol {
			t.Fatalf("k=%d b=%d: mean %.3f packets, analysis %.3f ± %.3f", k, bits, got, mean, tol)
		}
		// The distribution too: the fraction decoded within m packets, at
		// the analysis's quartiles.
		p := decodeProbs(k, v, bits, 400*k+400)
		for _, q := range []float64{0.25, 0.5, 0.75, 0.95} {
			m := 0
			for p[m] < q {
				m++
			}
			within := 0
			for _, n := range needed {
				if n <= m {
					within++
				}
			}
			frac := float64(within) / float64(trials)
			ptol := 4.5 * math.Sqrt(p[m]*(1-p[m])/float64(trials))
			if math.Abs(frac-p[m]) > ptol {
				t.Fatalf("k=%d b=%d: %.3f decoded within %d packets, analysis %.3f ± %.3f", k, bits, frac, m, p[m], ptol)
			}
		}
	}
}

// The analysis against what it must be at the edges: one hop among v
// switches with b-bit digests is decoded by c packets with probability
// (1-2^-bc)^(v-1); k hops need at least the coupon collector's k·H_k.
func TestAnalysis(t *testing.T) {
	for c := 0; c < 6; c++ {
		if got, want := DecodeProb(1, 100, 8, c), math.Pow(1-math.Pow(2, -8*float64(c)), 99); math.Abs(got-want) > 1e-12 {
			t.Fatalf("one hop, %d packets: %g, want %g", c, got, want)
		}
	}
	for _, k := range []int{2, 5, 10} {
		mean, _ := ExpectedPackets(k, 1000, 8)
		h := 0.0
		for i := 1; i <= k; i++ {
			h += 1 / float64(i)
		}
		// With many digest bits, decoding is collecting one packet per hop.
		coupon, _ := ExpectedPackets(k, 2, 40)
		if math.Abs(coupon-float64(k)*h) > 1e-6 || mean <= coupon {
			t.Fatalf("k=%d: %g packets, coupon collector %g (k·H_k %g)", k, mean, coupon, float64(k)*h)
		}
	}
}

// A changed path contradicts what was learned: the decoder says so and
// keeps its state.
func TestInconsistent(t *testing.T) {
	switches := []uint32{1, 2, 3, 4, 5, 6, 7, 8}
	d, err := NewDecoder(switches, 0)
	if err != nil {
		t.Fatal(err)
	}
	path := []uint32{3, 5, 7}
	pid := uint32(0)
	for ; ; pid++ {
		if err := d.Observe(pid, Encode(pid, path, DigestBits), 3); err != nil {
			t.Fatal(err)
		}
		if _, ok := d.Path(); ok {
			break
		}
	}
	// A packet over a path through a switch hop 1 does not have.
	for pid++; Carrier(pid, 3) != 1 || Digest(pid, 3, DigestBits) == Digest(pid, 8, DigestBits); pid++ {
	}
	if err := d.Observe(pid, Encode(pid, []uint32{8, 5, 7}, DigestBits), 3); !errors.Is(err, ErrInconsistent) {
		t.Fatalf("changed path: %v", err)
	}
	if err := d.Observe(pid, 0, 4); !errors.Is(err, ErrInconsistent) {
		t.Fatalf("another length: %v", err)
	}
	if got, ok := d.Path(); !ok || !slices.Equal(got, path) {
		t.Fatalf("after refusals: %v %v", got, ok)
	}
	d.Reset()
	if _, ok := d.Path(); ok || d.Hops() != 0 {
		t.Fatal("Reset kept the path")
	}
	if _, err := NewDecoder([]uint32{1, 1}, 0); !errors.Is(err, ErrConfig) {
		t.Fatalf("repeated switch: %v", err)
	}
	if _, err := NewDecoder(nil, 0); !errors.Is(err, ErrConfig) {
		t.Fatalf("no switches: %v", err)
	}
	if _, err := NewDecoder([]uint32{1}, 17); !errors.Is(err, ErrConfig) {
		t.Fatalf("17-bit digests: %v", err)
	}
}

func TestEntry(t *testing.T) {
	for _, c := range []Entry{{0xDEADBEEF, 0x42, 8, 5}, {1, 0xABC, 12, 64}, {2, 0xFFFF, 16, 1}, {3, 1, 1, 2}} {
		b := AppendEntry(nil, c.PID, c.Digest, c.Bits, c.Hops)
		if e, err := ParseEntry(b); err != nil || e != c {
			t.Fatalf("%x: %+v %v, want %+v", b, e, err, c)
		}
	}
	// An 8-bit entry is the layout of 8-bit digests before widths: two
	// zero bytes last.
	if b := AppendEntry(nil, 7, 9, 8, 3); b[6] != 0 || b[7] != 0 {
		t.Fatalf("8-bit entry %x", b)
	}
	for _, bad := range [][]byte{make([]byte, 7), make([]byte, 9), {0, 0, 0, 1, 1, 0, 0, 0}, {0, 0, 0, 1, 1, 65, 0, 0}, {0, 0, 0, 1, 1, 2, 1, 0}, {0, 0, 0, 1, 4, 2, 0, 2}, {0, 0, 0, 1, 1, 2, 0, 17}} {
		if _, err := ParseEntry(bad); !errors.Is(err, ErrEntry) {
			t.Fatalf("% x: %v", bad, err)
		}
	}
	l := keywrite.Layout{Slots: 64, DataSize: 4}
	st, _ := keywrite.NewStore(l, nil)
	d, _ := NewDecoder([]uint32{1}, 0)
	if _, err := d.Read(st, 1, 2); !errors.Is(err, ErrConfig) {
		t.Fatalf("a 4-byte store: %v", err)
	}
	st8, _ := keywrite.NewStore(keywrite.Layout{Slots: 64, DataSize: DataSize}, nil)
	for _, n := range []int{-1, keywrite.MaxRedundancy + 1} {
		if _, err := d.Read(st8, 1, n); !errors.Is(err, ErrConfig) {
			t.Fatalf("%d copies: %v", n, err)
		}
	}
}

// TestPacketHash: the packet hash is the hash unit's CRC-32C of be32(pid),
// checked against the standard library's Castagnoli CRC.
func TestPacketHash(t *testing.T) {
	tab := crc32.MakeTable(crc32.Castagnoli)
	for _, pid := range []uint32{0, 1, 0xDEADBEEF, 0xFFFFFFFF} {
		var b [4]byte
		binary.BigEndian.PutUint32(b[:], pid)
		if got, want := PacketHash(pid), crc32.Checksum(b[:], tab); got != want {
			t.Fatalf("pid %#x: %#x, want %#x", pid, got, want)
		}
	}
}

// TestDigestPairs: no two switches share their digest on more packets
// than chance says, whatever their IDs (a CRC alone would make some pairs
// collide on every packet).
func TestDigestPairs(t *testing.T) {
	const packets, v = 4000, 64
	ids := make([]uint32, 0, 2*v)
	for i := range uint32(v) {
		ids = append(ids, i+1, 1<<31|i<<8) // sequential IDs and IDs differing in one byte
	}
	for _, b := range []int{4, 8} {
		d := make([][]uint16, len(ids))
		for i, s := range ids {
			d[i] = make([]uint16, packets)
			for pid := range uint32(packets) {
				d[i][pid] = Digest(pid*2654435761, s, b)
			}
		}
		p := math.Ldexp(1, -b)
		limit := packets*p + 6*math.Sqrt(packets*p*(1-p))
		for i := range ids {
			for j := i + 1; j < len(ids); j++ {
				n := 0
				for k := range packets {
					if d[i][k] == d[j][k] {
						n++
					}
				}
				if float64(n) > limit {
					t.Fatalf("%d-bit digests: switches %#x and %#x share %d of %d packets (chance %.0f, limit %.0f)", b, ids[i], ids[j], n, packets, packets*p, limit)
				}
			}
		}
	}
}

// FuzzDecoder feeds arbitrary memory, as a Key-Write slot could hold, to a
// decoder: errors, never a panic, and a refused entry changes nothing.
func FuzzDecoder(f *testing.F) {
	f.Add(AppendEntry(nil, 7, 9, 8, 3), AppendEntry(nil, 8, 1, 8, 3))
	f.Add([]byte{0, 0, 0, 0, 0, 64, 0, 0}, []byte{})
	f.Fuzz(func(t *testing.T, a, b []byte) {
		d, _ := NewDecoder([]uint32{1, 2, 3, 4, 5, 70, 80}, 0)
		q, _ := NewQuantiles(0, 16)
		for _, e := range [][]byte{a, b} {
			en, err := ParseEntry(e)
			if err != nil || en.Bits != DigestBits {
				continue
			}
			q.Observe(en.PID, en.Digest, en.Hops)
			before := slices.Clone(d.cand)
			if err := d.Observe(en.PID, en.Digest, en.Hops); err != nil && !slices.Equal(before, d.cand) && before != nil {
				t.Fatalf("a refused entry changed the decoder")
			}
		}
		d.Path()
	})
}

func BenchmarkObserve(b *testing.B) {
	switches := universe(rand.New(rand.NewPCG(3, 4)), 1000)
	path := switches[:5]
	d, _ := NewDecoder(switches, 0)
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		if i%64 == 0 {
			d.Reset()
		}
		pid := uint32(i) * 2654435761
		d.Observe(pid, Encode(pid, path, DigestBits), 5)
	}
}
