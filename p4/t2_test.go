package p4

import (
	"errors"
	"math/rand/v2"
	"testing"

	"github.com/dtakit/dtakit/dta"
	"github.com/dtakit/dtakit/dta/tofino"
	"github.com/dtakit/dtakit/p4/internal/p4gen"
	"github.com/dtakit/dtakit/postcard"
)

// t2Config is testConfig for translator_t2.p4, with a Postcarding instance
// on the first collector beside its Key-Write, Key-Increment and Append
// instances.
func t2Config(t *testing.T) Config {
	t.Helper()
	cfg := testConfig(t)
	cfg.Program = Tofino2Program
	cfg.Collectors[0].Connections = append(cfg.Collectors[0].Connections, pcConnection(t))
	return cfg
}

// TestPlanGoldenT2 pins the control plane's output for translator_t2.p4
// (golden files reviewed by hand) and checks what differs from the Tofino-1
// programs: one instance table for the four primitives, the Postcarding
// groups above the Ingress.copies ones, the chunk mask unscaled.
func TestPlanGoldenT2(t *testing.T) {
	cfg := t2Config(t)
	p, err := NewPlan(cfg)
	if err != nil {
		t.Fatal(err)
	}
	j, err := p.JSON()
	if err != nil {
		t.Fatal(err)
	}
	golden(t, "testdata/plan_t2.json", j)
	golden(t, "testdata/plan_t2.py", p.BfrtPython(Tofino2Program.Name()))
	counts := map[string]int{}
	actions := map[string]int{}
	for _, e := range p.Entries {
		counts[e.Table]++
		if e.Table == "Ingress.instance" {
			actions[e.Action]++
		}
	}
	// Collector 0 (choices 0, 2, ...) has four primitives, collector 1 one.
	if counts["Ingress.instance"] != 128*4+128 || actions["Ingress.to_pc_instance"] != 128 || counts["Ingress.evicted"] != 128 {
		t.Errorf("instance entries %d (%v), evicted %d", counts["Ingress.instance"], actions, counts["Ingress.evicted"])
	}
	// Ingress.copies for the four non-postcard QPs; two Postcarding groups.
	if counts["Ingress.copies"] != 4*p4gen.MaxCopies || len(p.Groups) != 2*p4gen.MaxCopies+2 {
		t.Errorf("copies entries %d, groups %d", counts["Ingress.copies"], len(p.Groups))
	}
	// Every group ID once; the Postcarding groups above the copies groups.
	ids := map[uint16]bool{}
	for _, g := range p.Groups {
		if ids[g.ID] {
			t.Errorf("multicast group %d twice", g.ID)
		}
		ids[g.ID] = true
	}
	top := uint64(cfg.MulticastBase) + uint64(len(cfg.Collectors)*copiesStride)
	pc := pcConnection(t)
	for _, e := range p.Entries {
		if e.Action == "Ingress.to_pc_instance" && e.Data[1].Value <= top {
			t.Errorf("postcard group %d overlaps the copies groups (up to %d)", e.Data[1].Value, top)
		}
	}
	for _, e := range p.Entries {
		if e.Table == "Egress.qp" && e.Key[0] != (Field{"qpi", uint64(pc.Index)}) {
			continue
		}
		if e.Table == "Egress.qp" && e.Data[9] != (Field{"slot_mask", 1<<12 - 1}) {
			t.Errorf("postcard qp entry %+v, want slot_mask C-1", e.Data[9])
		}
	}

	// The program refuses no primitive; unknown programs are refused.
	cfg.Program = Tofino2Program + 1
	if _, err := NewPlan(cfg); !errors.Is(err, ErrConfig) {
		t.Errorf("program %d: error %v, want ErrConfig", cfg.Program, err)
	}
	for _, op := range []dta.Opcode{dta.OpKeyWrite, dta.OpKeyIncrement, dta.OpAppend, dta.OpPostcard} {
		if !Tofino2Program.Serves(op) {
			t.Errorf("translator_t2.p4 does not serve %v", op)
		}
	}
	cfg = t2Config(t)
	cfg.MulticastBase = 0xFFFF - uint16(len(cfg.Collectors)*copiesStride) - 2<<p4gen.QPBits + 1
	if _, err := NewPlan(cfg); !errors.Is(err, ErrConfig) {
		t.Errorf("multicast base %d: error %v, want ErrConfig (group IDs overflow)", cfg.MulticastBase, err)
	}
}

// TestT2ChunkOffset shows translator_t2.p4's chunk offset, (slot hash of
// copy n & (C-1)) << 5, equal to postcard.p4's and to the codec's chunk
// address for every chunk count the switch accepts.
func TestT2ChunkOffset(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	for bits := 0; bits <= p4gen.PostcardChunkBits; bits += 3 {
		l := postcard.Layout{Hops: p4gen.PostcardHops, Chunks: 1 << bits, Copies: p4gen.MaxCopies}
		codec, err := postcard.NewCodec(l)
		if err != nil {
			t.Fatal(err)
		}
		mask := uint32(l.Chunks - 1)
		for range 1000 {
			key, n := rng.Uint32(), rng.IntN(p4gen.MaxCopies)
			t2 := uint64(tofino.PerCopy.Slot(key, uint8(n))&mask) << 5
			if want := uint64(codec.ChunkIndex(key, n)) * uint64(l.ChunkSize()); t2 != want {
				t.Fatalf("C = 2^%d, key %#x, copy %d: offset %#x, codec %#x", bits, key, n, t2, want)
			}
		}
	}
}
