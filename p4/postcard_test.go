package p4

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"testing"
	"time"

	"github.com/dtakit/dtakit/dta"
	"github.com/dtakit/dtakit/dta/tofino"
	"github.com/dtakit/dtakit/p4/internal/p4gen"
	"github.com/dtakit/dtakit/postcard"
	"github.com/dtakit/dtakit/rocev2"
	"github.com/dtakit/dtakit/rocev2/target"
)

// pcConnection returns a Postcarding connection: 2^12 chunks, 3 copies.
func pcConnection(t *testing.T) Connection {
	t.Helper()
	l := postcard.Layout{Hops: p4gen.PostcardHops, Chunks: 1 << 12, Copies: 3}
	geo, err := l.AppendBinary(nil)
	if err != nil {
		t.Fatal(err)
	}
	c := testConnections(t)[0]
	c.Index, c.TranslatorQPN, c.CollectorQPN, c.StartPSN, c.SrcPort = 4, 0x15, 0x1237, 0xFFFFF0, 0xC003
	c.Ad = dta.Advertisement{VA: 0x7f00a0000000, Length: uint32(l.RegionSize()), RKey: 0x4000, Primitive: dta.OpPostcard, Geometry: geo}
	return c
}

// pcSwitch is postcard.p4's ingress cache written out register by register
// (Ingress.hops, pc_key, pc_have, pc_v0..4) and its egress chunk (slot i =
// CRC_hop_i(le32(key)) XOR value i), so the Go side can compare the switch
// with postcard.Cache.
type pcSwitch struct {
	key   []uint32
	have  []uint8
	val   [p4gen.PostcardHops][]uint32
	codec *postcard.Codec
	hops  map[p4gen.HopEntry]p4gen.HopEntry // keyed with Bit and Need zero
}

func newPCSwitch(t *testing.T, codec *postcard.Codec) *pcSwitch {
	t.Helper()
	n := 1 << p4gen.PostcardCacheBits
	s := &pcSwitch{key: make([]uint32, n), have: make([]uint8, n), codec: codec, hops: map[p4gen.HopEntry]p4gen.HopEntry{}}
	for i := range s.val {
		s.val[i] = make([]uint32, n)
	}
	for _, e := range p4gen.HopEntries() {
		k := e
		k.Bit, k.Need = 0, 0
		if _, dup := s.hops[k]; dup {
			t.Fatalf("Ingress.hops entry %+v twice", k)
		}
		s.hops[k] = e
	}
	return s
}

// postcard runs one report through the switch: ok is false when Ingress.hops
// misses or the value is the blank (dropped as malformed). The chunks are
// the evicted flow's first, then the postcard's flow's, as Cache.Insert.
func (s *pcSwitch) postcard(p dta.Postcard, seq bool) (out []postcard.Chunk, ok bool) {
	udp := 8 + 2 + dta.PostcardLen
	if seq {
		udp++
	}
	if p.HasPathLength {
		udp++
	}
	e, hit := s.hops[p4gen.HopEntry{Hop: int(p.Hop), Sequenced: seq, HasPathLen: p.HasPathLength, PathLen: int(p.PathLength), UDPLen: udp}]
	if !hit || p.Value == 0 {
		return nil, false
	}
	i := tofino.Reference.Checksum(p.Key) & (1<<p4gen.PostcardCacheBits - 1) // cache_index
	old := s.key[i]
	s.key[i] = p.Key // swap_key
	same := old == p.Key
	have := s.have[i]
	switch { // add_hop, take_done, take
	case same && have == e.Need:
		s.have[i] = 0
	case same:
		s.have[i] |= e.Bit
	case e.Need == 0:
		s.have[i] = 0
	default:
		s.have[i] = e.Bit
	}
	fresh := !same || have == 0
	var r [p4gen.PostcardHops]uint32
	for j := range r { // put, set, clear, get
		v := &s.val[j][i]
		switch {
		case int(p.Hop) == j+1 && fresh:
			r[j], *v = *v, p.Value
		case int(p.Hop) == j+1:
			*v = p.Value
			r[j] = *v
		case fresh:
			r[j], *v = *v, 0
		default:
			r[j] = *v
		}
	}
	complete := e.Need == 0
	if same {
		complete = have == e.Need
	}
	if !same && have != 0 {
		out = append(out, s.chunk(old, r))
	}
	if complete {
		if fresh { // own_single
			r = [p4gen.PostcardHops]uint32{p.Value}
		}
		out = append(out, s.chunk(p.Key, r))
	}
	return out, true
}

func (s *pcSwitch) chunk(key uint32, v [p4gen.PostcardHops]uint32) postcard.Chunk {
	c := postcard.Chunk{Key: key, Len: s.codec.Layout().ChunkSize()}
	for j := range v {
		binary.BigEndian.PutUint32(c.Data[4*j:], s.codec.Checksum(j+1, key)^v[j])
	}
	return c
}

// pcStream returns postcards of flows whose reports are consistent: each
// flow sends its path length in every postcard or in none; hops arrive in
// random order, interleaved with other flows', some lost and some repeated.
type pcReport struct {
	p   dta.Postcard
	seq bool
}

func pcStream(rng *rand.Rand, flows int) []pcReport {
	type flow struct {
		key     uint32
		pending []pcReport
	}
	var active []*flow
	var out []pcReport
	used := map[uint32]bool{0: true}
	next := 0
	for next < flows || len(active) > 0 {
		for next < flows && len(active) < 3000 {
			f := &flow{} // key 0 first: the registers' initial key
			for next > 0 && used[f.key] {
				f.key = rng.Uint32()
			}
			used[f.key] = true
			l := 1 + rng.IntN(p4gen.PostcardHops)
			withLen := rng.IntN(3) != 0
			seq := rng.IntN(2) == 0
			for _, h := range rng.Perm(l) {
				if rng.IntN(20) == 0 {
					continue // lost
				}
				r := pcReport{p: dta.Postcard{Key: f.key, Hop: uint8(h + 1), Value: 1 + rng.Uint32N(1<<31)}, seq: seq}
				if withLen {
					r.p.HasPathLength, r.p.PathLength = true, uint8(l)
				}
				f.pending = append(f.pending, r)
				if rng.IntN(20) == 0 {
					r.p.Value++
					f.pending = append(f.pending, r) // repeated
				}
			}
			active = append(active, f)
			next++
		}
		k := rng.IntN(len(active))
		f := active[k]
		if len(f.pending) > 0 {
			out = append(out, f.pending[0])
			f.pending = f.pending[1:]
		}
		if len(f.pending) == 0 {
			active[k] = active[len(active)-1]
			active = active[:len(active)-1]
		}
	}
	return out
}

func pcCodec(t *testing.T, c Connection) *postcard.Codec {
	t.Helper()
	s, err := c.check()
	if err != nil {
		t.Fatal(err)
	}
	return s.pc
}

// TestSwitchCacheMatchesCache runs consistent postcard streams through the
// switch's cache and postcard.Cache: the same chunks, byte for byte, in the
// same order, evictions included.
func TestSwitchCacheMatchesCache(t *testing.T) {
	codec := pcCodec(t, pcConnection(t))
	sw := newPCSwitch(t, codec)
	cache, err := postcard.NewCache(codec.Layout(), 1<<p4gen.PostcardCacheBits)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(7, 8))
	var evicted, complete int
	var want []postcard.Chunk
	for i, r := range pcStream(rng, 20000) {
		got, ok := sw.postcard(r.p, r.seq)
		if !ok {
			t.Fatalf("report %d %+v: the switch drops it as malformed", i, r.p)
		}
		want, err = cache.Insert(want[:0], r.p.Key, postcard.Hop(r.p.Hop), postcard.PathLength(r.p.PathLength), postcard.Value(r.p.Value))
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != len(want) {
			t.Fatalf("report %d %+v: the switch emits %d chunks, Cache %d", i, r.p, len(got), len(want))
		}
		for j := range got {
			if got[j].Key != want[j].Key || !bytes.Equal(got[j].Bytes(), want[j].Bytes()) {
				t.Fatalf("report %d %+v chunk %d: switch %x (flow %#x), Cache %x (flow %#x)",
					i, r.p, j, got[j].Bytes(), got[j].Key, want[j].Bytes(), want[j].Key)
			}
			if got[j].Key != r.p.Key {
				evicted++
			} else {
				complete++
			}
		}
	}
	if evicted < 100 || complete < 5000 {
		t.Fatalf("%d evictions and %d completions: the stream does not exercise the cache", evicted, complete)
	}
	t.Logf("%d chunks of completed flows, %d of evicted flows", complete, evicted)
}

// TestHopEntries checks the generated Ingress.hops table against the Go
// cache's rules: a postcard is in the table exactly when Cache.Insert takes
// it (value aside), and a path length the switch completes on is the one
// Cache counts.
func TestHopEntries(t *testing.T) {
	codec := pcCodec(t, pcConnection(t))
	for _, seq := range []bool{false, true} {
		for hop := 0; hop <= p4gen.PostcardHops+1; hop++ {
			for pl := -1; pl <= p4gen.PostcardHops+1; pl++ {
				p := dta.Postcard{Key: 1, Hop: uint8(hop), Value: 1, HasPathLength: pl >= 0, PathLength: uint8(max(pl, 0))}
				cache, _ := postcard.NewCache(codec.Layout(), 1)
				_, err := cache.Insert(nil, p.Key, postcard.Hop(p.Hop), postcard.PathLength(p.PathLength), postcard.Value(p.Value))
				sw := newPCSwitch(t, codec)
				_, ok := sw.postcard(p, seq)
				if ok != (err == nil) {
					t.Errorf("hop %d, path length %d, sequenced %v: switch takes it %v, Cache error %v", hop, pl, seq, ok, err)
				}
			}
		}
	}
	for _, e := range p4gen.HopEntries() {
		want := p4gen.PostcardHops
		if e.PathLen != 0 {
			want = e.PathLen
		}
		if e.Bit != 1<<(e.Hop-1) || e.Need|e.Bit != 1<<want-1 || e.Need&e.Bit != 0 {
			t.Errorf("entry %+v", e)
		}
	}
}

// TestTargetAcceptsCraftedChunks writes the switch's chunks, every copy as
// its egress crafts it, through the software target: the region equals the
// one postcard.Cache's chunks, written whole, and Codec.Writes produce, and
// flows query back.
func TestTargetAcceptsCraftedChunks(t *testing.T) {
	tgtAddr := netip.MustParseAddrPort("10.0.0.2:4791")
	tgt, err := target.New(target.Config{Addr: tgtAddr, Peers: []netip.Prefix{netip.MustParsePrefix("10.0.0.1/32")}})
	if err != nil {
		t.Fatal(err)
	}
	defer tgt.Close()
	conn := pcConnection(t)
	codec := pcCodec(t, conn)
	mem := make([]byte, codec.Layout().RegionSize())
	attach(t, tgt, &conn, mem, target.RemoteWrite)
	s, err := conn.check()
	if err != nil {
		t.Skipf("skipping: the target's region placement does not fit the switch: %v", err)
	}
	want, err := postcard.NewStore(codec.Layout(), make([]byte, len(mem)))
	if err != nil {
		t.Fatal(err)
	}
	cache, _ := postcard.NewCache(codec.Layout(), 1<<p4gen.PostcardCacheBits)
	sw := newPCSwitch(t, codec)
	rng := rand.New(rand.NewPCG(9, 10))
	psn := conn.StartPSN
	var out target.Output
	var chunks []postcard.Chunk
	var writes []postcard.Write
	frames := 0
	reports := pcStream(rng, 2000)
	for _, rep := range reports {
		got, _ := sw.postcard(rep.p, rep.seq)
		for _, ch := range got {
			for n := range codec.Layout().Copies {
				f := conn.craft(s, ch.Key, ch.Bytes(), uint8(n), 0, psn)
				psn = (psn + 1) & rocev2.PSNMask
				b, err := f.AppendTo(nil)
				if err != nil {
					t.Fatal(err)
				}
				tgt.Process(time.Now().UnixNano(), []target.Datagram{{Buf: b[dta.EthernetLen+20+8:], Addr: netip.AddrPortFrom(conn.Src, conn.SrcPort)}}, &out)
				frames++
			}
		}
		chunks, err = cache.Insert(chunks[:0], rep.p.Key, postcard.Hop(rep.p.Hop), postcard.PathLength(rep.p.PathLength), postcard.Value(rep.p.Value))
		if err != nil {
			t.Fatal(err)
		}
		for i := range chunks {
			// The switch writes every chunk whole, as the paper's does.
			chunks[i].Skip = 0
			for _, w := range codec.AppendWrites(writes[:0], &chunks[i]) {
				if err := want.Apply(w); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	cs := tgt.Counters()
	if cs.BadICRC != 0 || cs.Malformed != 0 || cs.Unknown != 0 || cs.OutOfOrder != 0 || cs.NAKAccess != 0 || cs.WritePackets != uint64(frames) {
		t.Fatalf("target counters %+v after %d crafted chunk writes", cs, frames)
	}
	if !bytes.Equal(mem, want.Region()) {
		t.Fatal("region written through the target differs from postcard.Cache's chunks at Codec.Writes' offsets")
	}
	// Flows that completed read back.
	var values []uint32
	for _, rep := range reports {
		values = append(values, rep.p.Value)
	}
	table, err := postcard.NewTable(codec.Layout(), values)
	if err != nil {
		t.Fatal(err)
	}
	store, _ := postcard.NewStore(codec.Layout(), mem)
	found := 0
	for _, rep := range reports {
		if _, o := store.Query(table, rep.p.Key); o == postcard.Found {
			found++
		}
	}
	if found < len(reports)/2 {
		t.Fatalf("%d of %d postcards belong to flows that query as found", found, len(reports))
	}
}

// TestPlanGoldenPostcard pins the control plane's output for postcard.p4:
// two collectors with a Postcarding instance each (golden files reviewed by
// hand).
func TestPlanGoldenPostcard(t *testing.T) {
	a := pcConnection(t)
	b := a
	b.Index, b.TranslatorQPN, b.CollectorQPN, b.Dst = 5, 0x16, 0x888, b.Dst.Next()
	l := postcard.Layout{Hops: p4gen.PostcardHops, Chunks: 1 << 20, Copies: 1}
	b.Ad.Geometry, _ = l.AppendBinary(nil)
	b.Ad.Length = uint32(l.RegionSize())
	cfg := Config{
		Program:       PostcardProgram,
		Collectors:    []Collector{{Port: 8, Connections: []Connection{a}}, {Port: 12, Connections: []Connection{b}}},
		MulticastBase: 100, CPUPort: 64, RatePPS: 1_000_000, BurstPackets: 10_000,
		ReportPorts: []uint16{0},
	}
	p, err := NewPlan(cfg)
	if err != nil {
		t.Fatal(err)
	}
	j, err := p.JSON()
	if err != nil {
		t.Fatal(err)
	}
	golden(t, "testdata/plan_postcard.json", j)
	golden(t, "testdata/plan_postcard.py", p.BfrtPython("postcard"))
	counts := map[string]int{}
	for _, e := range p.Entries {
		counts[e.Table]++
	}
	if counts["Ingress.instance"] != 256 || counts["Ingress.evicted"] != 256 || len(p.Groups) != 4 || len(p.Nodes) != 2*3+2*1 {
		t.Fatalf("entries %v, %d groups, %d nodes", counts, len(p.Groups), len(p.Nodes))
	}
	for _, n := range p.Nodes[3:6] {
		if n.RID&p4gen.PostcardEvicted == 0 {
			t.Fatalf("evicted group node %+v without DTA_PC_EVICTED", n)
		}
	}
	// Each program refuses the other's primitives.
	cfg.Program = TranslatorProgram
	if _, err := NewPlan(cfg); !errors.Is(err, ErrAdvertisement) {
		t.Fatalf("translator.p4 with Postcarding: %v", err)
	}
	kw := testConfig(t)
	kw.Program = PostcardProgram
	if _, err := NewPlan(kw); !errors.Is(err, ErrAdvertisement) {
		t.Fatalf("postcard.p4 with Key-Write: %v", err)
	}
	for name, l := range map[string]postcard.Layout{
		"4 hops":        {Hops: 4, Chunks: 1 << 10},
		"16-bit slots":  {SlotBits: 16, Chunks: 1 << 10},
		"5 copies":      {Chunks: 1 << 10, Copies: 5},
		"2^28 chunks":   {Chunks: 1 << 28},
		"reference":     {Chunks: 1 << 10, Copies: 2, Addressing: postcard.ReferenceAddressing},
		"prototype sum": {Chunks: 1 << 10, Checksums: postcard.PrototypeChecksums},
	} {
		c := a
		c.Ad.Geometry, _ = l.AppendBinary(nil)
		c.Ad.Length = 1 << 20
		cfg := Config{Program: PostcardProgram, Collectors: []Collector{{Port: 1, Connections: []Connection{c}}}}
		if _, err := NewPlan(cfg); !errors.Is(err, ErrAdvertisement) {
			t.Errorf("%s: error %v, want ErrAdvertisement", name, err)
		}
	}
}

func ExampleNewPlan_postcard() {
	l := postcard.Layout{Chunks: 1 << 16, Copies: 2}
	geo, _ := l.AppendBinary(nil)
	c := Connection{
		Src: netip.MustParseAddr("10.0.0.1"), Dst: netip.MustParseAddr("10.0.0.2"), SrcPort: 0xC000,
		TranslatorQPN: 0x11, CollectorQPN: 0x1234, StartPSN: 1,
		Ad: dta.Advertisement{VA: 0x10000000, Length: uint32(l.RegionSize()), RKey: 7, Primitive: dta.OpPostcard, Geometry: geo},
	}
	p, err := NewPlan(Config{Program: PostcardProgram, Collectors: []Collector{{Port: 8, Connections: []Connection{c}}}})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(len(p.Groups), "multicast groups,", len(p.Entries), "entries")
	// Output: 2 multicast groups, 514 entries
}
