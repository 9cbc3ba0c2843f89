package primitive_test

import (
	"errors"
	"slices"
	"testing"

	"github.com/dtakit/dtakit/dta"
	"github.com/dtakit/dtakit/primitive"
)

// fake is a Kind with no layouts, to exercise the registry.
type fake struct {
	op   dta.Opcode
	name string
}

func (f fake) Opcode() dta.Opcode                         { return f.op }
func (f fake) Name() string                               { return f.name }
func (fake) Key(r *dta.Report) uint32                     { return uint32(len(r.Body)) }
func (fake) Stateful() bool                               { return false }
func (fake) ParseLayout([]byte) (primitive.Layout, error) { return nil, errors.New("fake: no layout") }

const fakeOp dta.Opcode = 0xF0

func init() { primitive.Register(fake{fakeOp, "fake"}) }

func TestRegistry(t *testing.T) {
	k, ok := primitive.Lookup(fakeOp)
	if !ok || k.Name() != "fake" {
		t.Fatalf("Lookup(%v) = %v, %v", fakeOp, k, ok)
	}
	if k, ok := primitive.ByName("fake"); !ok || k.Opcode() != fakeOp {
		t.Fatalf("ByName(fake) = %v, %v", k, ok)
	}
	if _, ok := primitive.Lookup(0xF1); ok {
		t.Error("Lookup of an opcode never registered succeeded")
	}
	if _, ok := primitive.ByName("nothing"); ok {
		t.Error("ByName of a name never registered succeeded")
	}
	if !slices.Contains(primitive.Names(), "fake") || !slices.IsSorted(primitive.Names()) {
		t.Errorf("Names() = %v", primitive.Names())
	}
	found := false
	for _, k := range primitive.Kinds() {
		found = found || k.Opcode() == fakeOp
	}
	if !found {
		t.Error("Kinds() lacks the registered Kind")
	}
	// Registering reached dta: the opcode's reports decode, the body opaque.
	var r dta.Report
	if err := r.Decode([]byte{byte(fakeOp), 0, 7, 7, 7}); err != nil || len(r.Body) != 3 || k.Key(&r) != 3 {
		t.Errorf("a report of the registered opcode: %v, body % x", err, r.Body)
	}
	if _, err := primitive.Parse(0xF1, nil); !errors.Is(err, primitive.ErrUnknown) {
		t.Errorf("Parse of an unregistered opcode: %v, want ErrUnknown", err)
	}
	if allocs := testing.AllocsPerRun(100, func() { _, _ = primitive.Lookup(fakeOp) }); allocs != 0 {
		t.Errorf("Lookup: %v allocations", allocs)
	}
}

func TestRegisterPanics(t *testing.T) {
	for _, k := range []primitive.Kind{nil, fake{0, "zero"}, fake{fakeOp, "again"}, fake{0xF2, "fake"}, fake{0xF3, ""}} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("Register(%v) did not panic", k)
				}
			}()
			primitive.Register(k)
		}()
	}
	// The refused registrations left nothing behind.
	for _, op := range []dta.Opcode{0xF2, 0xF3} {
		if _, ok := primitive.Lookup(op); ok {
			t.Errorf("opcode %v registered by a refused Register", op)
		}
	}
}
