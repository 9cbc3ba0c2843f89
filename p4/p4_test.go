package p4

import (
	"bytes"
	"encoding/binary"
	"hash/crc32"
	"math/rand/v2"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dtakit/dtakit/appendlist"
	"github.com/dtakit/dtakit/dta"
	"github.com/dtakit/dtakit/dta/tofino"
	"github.com/dtakit/dtakit/keyincr"
	"github.com/dtakit/dtakit/keywrite"
	"github.com/dtakit/dtakit/p4/internal/p4gen"
	"github.com/dtakit/dtakit/postcard"
	"github.com/dtakit/dtakit/rocev2"
)

func TestConstantsCurrent(t *testing.T) {
	got, err := os.ReadFile("include/dta_constants.p4")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, p4gen.Generate()) {
		t.Fatal("include/dta_constants.p4 is stale: run go generate ./p4")
	}
	if !bytes.HasPrefix(got, []byte("// Code generated ")) {
		t.Fatal("the include does not say it is generated")
	}
}

// TestIncludeCRCs checks every CRC macro of the include against the Go
// package that owns it, not against the generator's own list.
func TestIncludeCRCs(t *testing.T) {
	crcs := includeCRCs(t)
	crc32, err := tofino.Predefined("CRC32")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]tofino.CRC{
		"DTA_CRC32":    crc32,
		"DTA_CRC_ICRC": {Width: 32, Poly: 0x04C11DB7, Reversed: true},
	}
	for n := 1; n < p4gen.MaxCopies; n++ {
		want["DTA_CRC_COPY"+string(rune('0'+n))] = tofino.CopyCRC(uint8(n))
	}
	for i := 1; i <= p4gen.PostcardHops; i++ {
		want["DTA_CRC_HOP"+string(rune('0'+i))] = postcard.HopCRC(postcard.DefaultChecksums, i)
	}
	if len(crcs) != len(want) {
		t.Errorf("include defines %d CRCs, want %d", len(crcs), len(want))
	}
	for name, w := range want {
		if got, ok := crcs[name]; !ok || got != w {
			t.Errorf("%s = %+v, want %+v", name, got, w)
		}
	}
}

// TestHashesMatchModel evaluates every Hash.get of the programs, as written,
// with the dta/tofino model and compares it with the Go function it stands
// for. A Hash the table does not know fails the test.
func TestHashesMatchModel(t *testing.T) {
	crcs := includeCRCs(t)
	rng := rand.New(rand.NewPCG(1, 2))
	crc8, err := tofino.NewPredefined(8, "CRC8")
	if err != nil {
		t.Fatal(err)
	}
	type check func(r *rand.Rand) (env map[string]uint64, want uint64)
	checks := map[string]check{}
	for n := 0; n < p4gen.MaxCopies; n++ {
		checks["translator.p4/slot"+string(rune('0'+n))] = func(r *rand.Rand) (map[string]uint64, uint64) {
			key := r.Uint32()
			return map[string]uint64{"report_key": uint64(key), "copy": uint64(n)}, uint64(tofino.PerCopy.Slot(key, uint8(n)))
		}
	}
	checks["translator.p4/key_checksum"] = func(r *rand.Rand) (map[string]uint64, uint64) {
		key := r.Uint32()
		return map[string]uint64{"report_key": uint64(key)}, uint64(tofino.PerCopy.Checksum(key))
	}
	// Collector choice: CRC8(be32(key)), section 4.
	collector := func(r *rand.Rand) (map[string]uint64, uint64) {
		key := r.Uint32()
		var b [4]byte
		binary.BigEndian.PutUint32(b[:], key)
		return map[string]uint64{"h.kw.key": uint64(key), "h.ki.key": uint64(key), "m.key": uint64(key),
			"h.pc.key": uint64(key), "m.old_key": uint64(key)}, crc8.SumBytes(b[:])
	}
	// postcard.p4: collector choice of the postcard's and the evicted flow,
	// the cache index, each copy's chunk (its low PostcardChunkBits bits)
	// and the hop checksums, against the postcard codec.
	checks["postcard.p4/collector"] = collector
	checks["postcard.p4/collector_ev"] = collector
	checks["postcard.p4/cache_index"] = func(r *rand.Rand) (map[string]uint64, uint64) {
		key := r.Uint32()
		return map[string]uint64{"h.pc.key": uint64(key)}, uint64(tofino.Reference.Checksum(key))
	}
	wide, err := postcard.NewCodec(postcard.Layout{Chunks: 1 << p4gen.PostcardChunkBits, Copies: p4gen.MaxCopies})
	if err != nil {
		t.Fatal(err)
	}
	for n := 0; n < p4gen.MaxCopies; n++ {
		checks["postcard.p4/chunk"+string(rune('0'+n))] = func(r *rand.Rand) (map[string]uint64, uint64) {
			key := r.Uint32()
			return map[string]uint64{"m.key": uint64(key), "copy": uint64(n)}, uint64(wide.ChunkIndex(key, n))
		}
	}
	for i := 1; i <= p4gen.PostcardHops; i++ {
		checks["postcard.p4/hop"+string(rune('0'+i))] = func(r *rand.Rand) (map[string]uint64, uint64) {
			key := r.Uint32()
			return map[string]uint64{"m.key": uint64(key), "report_key": uint64(key)}, uint64(wide.Checksum(i, key))
		}
	}
	checks["translator.p4/collector_kw"] = collector
	checks["translator.p4/collector_ki"] = collector
	checks["translator.p4/collector_ap"] = func(r *rand.Rand) (map[string]uint64, uint64) {
		env, want := collector(r)
		env["h.ap.list"] = env["m.key"]
		return env, want
	}
	checks["reporter.p4/collector_choice"] = collector
	// The reporter's flow key: CRC-32 (hash/crc32, independent of the model)
	// of the 5-tuple's 13 bytes in wire order.
	checks["reporter.p4/flow_key"] = func(r *rand.Rand) (map[string]uint64, uint64) {
		b := make([]byte, 13)
		for i := range b {
			b[i] = byte(r.Uint32())
		}
		env := map[string]uint64{
			"h.ipv4.src": uint64(binary.BigEndian.Uint32(b[0:])), "h.ipv4.dst": uint64(binary.BigEndian.Uint32(b[4:])),
			"h.ipv4.protocol": uint64(b[8]),
			"sport":           uint64(binary.BigEndian.Uint16(b[9:])), "dport": uint64(binary.BigEndian.Uint16(b[11:])),
		}
		return env, uint64(crc32.ChecksumIEEE(b))
	}
	// translator_t2.p4 is translator.p4 and postcard.p4 joined: each Hash
	// stands for the same function as its namesake there; the chunk of
	// copy n is slot n's hash (its low PostcardChunkBits bits are the
	// chunk index: postcard.p4/chunkN).
	for name, from := range map[string]string{
		"collector_kw": "translator.p4/collector_kw", "collector_ki": "translator.p4/collector_ki",
		"collector_ap": "translator.p4/collector_ap", "key_checksum": "translator.p4/key_checksum",
		"collector_pc": "postcard.p4/collector", "collector_ev": "postcard.p4/collector_ev",
		"cache_index": "postcard.p4/cache_index",
	} {
		checks["translator_t2.p4/"+name] = checks[from]
	}
	for n := 0; n < p4gen.MaxCopies; n++ {
		checks["translator_t2.p4/slot"+string(rune('0'+n))] = checks["translator.p4/slot"+string(rune('0'+n))]
	}
	for i := 1; i <= p4gen.PostcardHops; i++ {
		checks["translator_t2.p4/hop"+string(rune('0'+i))] = checks["postcard.p4/hop"+string(rune('0'+i))]
	}
	seen := 0
	for _, prog := range programs {
		p := parseProgram(t, prog)
		for name, h := range p.hashes {
			if name == "icrc_write" || name == "icrc_atomic" || name == "icrc_append" || name == "icrc_chunk" || name == "icrc_probe" {
				continue // TestICRCSplit
			}
			id := filepath.Base(prog) + "/" + name
			if strings.HasPrefix(id, "postcard.p4/chunk") && h.width != p4gen.PostcardChunkBits {
				t.Errorf("%s is %d bits wide, p4gen.PostcardChunkBits is %d", id, h.width, p4gen.PostcardChunkBits)
			}
			check, ok := checks[id]
			if !ok {
				t.Errorf("Hash %s has no check", id)
				continue
			}
			if len(h.lists) == 0 {
				t.Errorf("Hash %s is never used", id)
			}
			for _, list := range h.lists {
				for range 200 {
					env, want := check(rng)
					if got := p.sum(t, h, crcs, list, env); got != want {
						t.Fatalf("%s(%v) with %v = %#x, Go side %#x", id, list, env, got, want)
					}
				}
				seen++
			}
		}
	}
	if seen != len(checks) {
		t.Fatalf("checked %d hash uses, want %d", seen, len(checks))
	}
}

// testConnections returns a Key-Write and a Key-Increment connection.
func testConnections(t *testing.T) []Connection {
	t.Helper()
	kw := keywrite.Layout{Slots: 1 << 16, DataSize: p4gen.KeyWriteData}
	err := kw.Validate()
	if err != nil {
		t.Fatal(err)
	}
	kwGeo, _ := kw.AppendBinary(nil)
	ki := keyincr.Layout{Slots: 1 << 16}
	err = ki.Validate()
	if err != nil {
		t.Fatal(err)
	}
	kiGeo, _ := ki.AppendBinary(nil)
	base := Connection{
		SrcMAC: [6]byte{0x02, 0, 0, 0, 0, 1}, DstMAC: [6]byte{0x02, 0, 0, 0, 0, 2},
		Src: netip.MustParseAddr("10.0.0.1"), Dst: netip.MustParseAddr("10.0.0.2"),
		SrcPort: 0xC000,
	}
	ap := appendlist.Layout{Lists: 1 << p4gen.AppendListBits, Entries: 1 << p4gen.AppendEntryBits, EntrySize: p4gen.AppendEntry, Batch: p4gen.AppendBatch}
	apGeo, err := ap.AppendBinary(nil)
	if err != nil {
		t.Fatal(err)
	}
	a, b, c := base, base, base
	a.Index, a.TranslatorQPN, a.CollectorQPN, a.StartPSN = 0, 0x11, 0x1234, 0xABCDE
	a.Ad = dta.Advertisement{VA: 0x7f0012340000, Length: uint32(kw.RegionSize()), RKey: 0x1000, Primitive: dta.OpKeyWrite, Geometry: kwGeo}
	b.Index, b.TranslatorQPN, b.CollectorQPN, b.StartPSN, b.SrcPort = 1, 0x12, 0x1235, 0xFFFFFE, 0xC001
	b.Ad = dta.Advertisement{VA: 0x7f0056780000, Length: uint32(ki.RegionSize()), RKey: 0x2000, Primitive: dta.OpKeyIncrement, Geometry: kiGeo}
	c.Index, c.TranslatorQPN, c.CollectorQPN, c.StartPSN, c.SrcPort = 3, 0x14, 0x1236, 0, 0xC002
	c.Ad = dta.Advertisement{VA: 0x7f0080000000, Length: uint32(ap.RegionSize()), RKey: 0x3000, Primitive: dta.OpAppend, Geometry: apGeo}
	return []Connection{a, b, c}
}

// frameEnv maps every field of the headers the egress deparser emits for the
// frame to its value in the frame's bytes, so a P4 field list is evaluated
// at the positions the P4 headers give the fields.
func frameEnv(t *testing.T, p *program, frame []byte, order []string) map[string]uint64 {
	t.Helper()
	env := map[string]uint64{}
	bit := 0
	for _, member := range order {
		typ := p.members[member]
		for _, f := range p.headers[typ] {
			w := p.widths[typ+"."+f]
			var v uint64
			for i := range w {
				b := bit + i
				v = v<<1 | uint64(frame[b/8]>>(7-b%8)&1)
			}
			env["h."+member+"."+f] = v
			bit += w
		}
	}
	if bit != 8*len(frame) {
		t.Fatalf("headers %v cover %d bits of a %d-bit frame", order, bit, 8*len(frame))
	}
	return env
}

// TestICRCSplit proves the data-plane ICRC: for random frames of every shape
// each translator program sends, the control plane's per-QP constant XOR the
// model's hash of the P4 field list (fields read where the P4 headers put
// them) equals the full ICRC rocev2 computes.
func TestICRCSplit(t *testing.T) {
	tr := parseProgram(t, "translator/translator.p4")
	pc := parseProgram(t, "translator/postcard.p4")
	t.Run("tofino1", func(t *testing.T) { icrcSplit(t, tr, pc) })
	t2 := parseProgram(t, "translator/translator_t2.p4")
	t.Run("tofino2", func(t *testing.T) { icrcSplit(t, t2, t2) })
}

// probeSplit checks the ICRC split of c's probe, the zero-length WRITE
// (Connection.zeroWrite), against Hash icrc_probe and the probe constant.
func probeSplit(t *testing.T, p *program, crcs map[string]tofino.CRC, c *Connection, rng *rand.Rand) {
	t.Helper()
	h := p.hashes["icrc_probe"]
	if h == nil || len(h.lists) != 1 {
		t.Fatal("want one use of Hash icrc_probe")
	}
	k, err := c.probeICRCConstant()
	if err != nil {
		t.Fatal(err)
	}
	for range 500 {
		f := c.zeroWrite(rng.Uint32() & rocev2.PSNMask)
		b, err := f.AppendTo(nil)
		if err != nil {
			t.Fatal(err)
		}
		env := frameEnv(t, p, b, []string{"ethernet", "ipv4", "udp", "bth", "reth", "icrc"})
		want, err := rocev2.ICRC(b[dta.EthernetLen : len(b)-rocev2.ICRCLen])
		if err != nil {
			t.Fatal(err)
		}
		if got := uint32(p.sum(t, h, crcs, h.lists[0], env)) ^ k; got != want {
			t.Fatalf("probe: constant %#x XOR hash = %#x, ICRC %#x", k, got, want)
		}
	}
}

// icrcSplit checks the ICRC split of tr's Key-Write, Key-Increment and
// Append writes and of pc's chunks.
func icrcSplit(t *testing.T, tr, pc *program) {
	crcs := includeCRCs(t)
	rng := rand.New(rand.NewPCG(3, 4))
	for _, c := range append(testConnections(t), pcConnection(t)) {
		s, err := c.check()
		if err != nil {
			t.Fatal(err)
		}
		k, err := c.ICRCConstant()
		if err != nil {
			t.Fatal(err)
		}
		p, name, order := tr, "icrc_write", []string{"ethernet", "ipv4", "udp", "bth", "reth", "kw_payload", "icrc"}
		switch s.op {
		case dta.OpPostcard:
			p, name, order = pc, "icrc_chunk", []string{"ethernet", "ipv4", "udp", "bth", "reth", "chunk", "icrc"}
		case dta.OpKeyIncrement:
			name, order = "icrc_atomic", []string{"ethernet", "ipv4", "udp", "bth", "atomic", "icrc"}
		case dta.OpAppend:
			name, order = "icrc_append", []string{"ethernet", "ipv4", "udp", "bth", "reth", "ap_payload", "icrc"}
		}
		h := p.hashes[name]
		if h == nil || len(h.lists) != 1 {
			t.Fatalf("%s: want one use of Hash %s", c.Ad.Primitive, name)
		}
		if s.op == dta.OpKeyIncrement {
			probeSplit(t, p, crcs, &c, rng)
		}
		for i := range 500 {
			value := make([]byte, 16)
			binary.BigEndian.PutUint64(value, rng.Uint64())
			binary.BigEndian.PutUint64(value[8:], rng.Uint64())
			key := rng.Uint32()
			switch s.op {
			case dta.OpPostcard:
				vals := make([]uint32, p4gen.PostcardHops)
				for j := range vals {
					vals[j] = rng.Uint32() >> rng.IntN(32)
				}
				value = make([]byte, s.pc.Layout().ChunkSize())
				s.pc.EncodeChunk(value, key, vals)
			case dta.OpKeyWrite:
				value = value[:p4gen.KeyWriteData]
			case dta.OpKeyIncrement:
				value = value[:8]
			case dta.OpAppend:
				key &= 1<<p4gen.AppendListBits - 1
			}
			psn := rng.Uint32() & rocev2.PSNMask
			if i < 2 {
				psn = uint32(i) * 64 // AckReq set
			}
			n := rng.IntN(p4gen.MaxCopies)
			if s.pc != nil {
				n = rng.IntN(s.pc.Layout().Copies)
			}
			f := c.craft(s, key, value, uint8(n), uint32(rng.IntN(1<<p4gen.AppendEntryBits))&^(p4gen.AppendBatch-1), psn)
			b, err := f.AppendTo(nil)
			if err != nil {
				t.Fatal(err)
			}
			env := frameEnv(t, p, b, order)
			got := uint32(p.sum(t, h, crcs, h.lists[0], env)) ^ k
			want, err := rocev2.ICRC(b[dta.EthernetLen : len(b)-rocev2.ICRCLen])
			if err != nil {
				t.Fatal(err)
			}
			if got != want {
				t.Fatalf("%s frame %d: constant %#x XOR hash = %#x, ICRC %#x", c.Ad.Primitive, i, k, got, want)
			}
			// The icrc header holds the ICRC least-significant byte first.
			swapped := uint32(env["h.icrc.b0"]<<24 | env["h.icrc.b1"]<<16 | env["h.icrc.b2"]<<8 | env["h.icrc.b3"])
			if swapped != want>>24|want>>8&0xFF00|want<<8&0xFF0000|want<<24 {
				t.Fatalf("icrc header %#x, ICRC %#x", swapped, want)
			}
		}
	}
}
