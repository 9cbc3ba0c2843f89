package p4

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/dtakit/dtakit/dta"
	"github.com/dtakit/dtakit/internal/test/keymax"
	"github.com/dtakit/dtakit/primitive"
)

// TestNotImplemented: a primitive registered beyond the four (Key-Max,
// internal/test/keymax) has a Kind but no Tofino program translates it; the
// crafter and the planner refuse its advertisement with a
// NotImplementedError naming it, its opcode and the programs, and the
// programs do not serve it.
func TestNotImplemented(t *testing.T) {
	if _, ok := primitive.Lookup(keymax.Opcode); !ok {
		t.Fatal("keymax is not registered")
	}
	geo, err := keymax.Layout{LogSlots: 12}.AppendBinary(nil)
	if err != nil {
		t.Fatal(err)
	}
	km := testConnections(t)[0]
	km.Ad.Primitive, km.Ad.Geometry = keymax.Opcode, geo

	check := func(what string, err error, programs ...Program) {
		t.Helper()
		var ni *NotImplementedError
		if !errors.Is(err, ErrAdvertisement) || !errors.As(err, &ni) {
			t.Fatalf("%s: %v, want a NotImplementedError matching ErrAdvertisement", what, err)
		}
		if ni.Primitive != keymax.Opcode || !slices.Equal(ni.Programs, programs) {
			t.Errorf("%s: %+v, want primitive %v, programs %v", what, *ni, keymax.Opcode, programs)
		}
		var names []string
		for _, p := range programs {
			names = append(names, p.String())
		}
		want := "primitive keymax (0x4d) is not implemented by " + strings.Join(names, " or ")
		if !strings.Contains(err.Error(), want) || !strings.HasPrefix(err.Error(), "p4: ") {
			t.Errorf("%s: %q, want \"p4: ...%s\"", what, err, want)
		}
	}

	_, err = km.check()
	check("check", err, TranslatorProgram, PostcardProgram, Tofino2Program)
	_, err = km.ICRCConstant()
	check("ICRCConstant", err, TranslatorProgram, PostcardProgram, Tofino2Program)

	cfg := testConfig(t)
	cfg.Collectors[0].Connections = append(cfg.Collectors[0].Connections, km)
	cfg.Collectors[0].Connections[len(cfg.Collectors[0].Connections)-1].Index = 9
	_, err = NewPlan(cfg)
	check("NewPlan translator.p4", err, TranslatorProgram)
	cfg.Program = Tofino2Program
	_, err = NewPlan(cfg)
	check("NewPlan translator_t2.p4", err, Tofino2Program)

	pc := pcConnection(t)
	km.Index = pc.Index + 1
	_, err = NewPlan(Config{Program: PostcardProgram, Collectors: []Collector{{Port: 8, Connections: []Connection{pc, km}}}})
	check("NewPlan postcard.p4", err, PostcardProgram)

	for _, p := range allPrograms {
		if p.Serves(keymax.Opcode) {
			t.Errorf("%v serves keymax", p)
		}
	}
	// The four built in stay served by their Tofino-1 program and by
	// translator_t2.p4, and only by them.
	for op, p := range map[dta.Opcode]Program{dta.OpKeyWrite: TranslatorProgram, dta.OpKeyIncrement: TranslatorProgram,
		dta.OpAppend: TranslatorProgram, dta.OpPostcard: PostcardProgram} {
		if !p.Serves(op) || (1 - p).Serves(op) || !Tofino2Program.Serves(op) {
			t.Errorf("%v: served by %v %v, by %v %v, by %v %v", op, p, p.Serves(op), 1-p, (1 - p).Serves(op),
				Tofino2Program, Tofino2Program.Serves(op))
		}
	}

	// A postcard instance on translator.p4 is the same error, naming it.
	pcOnTr := testConfig(t)
	pcOnTr.Collectors[0].Connections = append(pcOnTr.Collectors[0].Connections, pcConnection(t))
	pcOnTr.Collectors[0].Connections[len(pcOnTr.Collectors[0].Connections)-1].Index = 9
	var ni *NotImplementedError
	if _, err := NewPlan(pcOnTr); !errors.As(err, &ni) || ni.Primitive != dta.OpPostcard ||
		!strings.Contains(err.Error(), "primitive postcard (0x") {
		t.Errorf("postcard on translator.p4: %v, want a NotImplementedError", err)
	}
}
