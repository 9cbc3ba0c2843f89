package collector

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/dtakit/dtakit/appendlist"
	"github.com/dtakit/dtakit/dta"
	"github.com/dtakit/dtakit/internal/test/keymax"
	"github.com/dtakit/dtakit/keyincr"
	"github.com/dtakit/dtakit/keywrite"
	"github.com/dtakit/dtakit/primitive"
)

// TestAdd adds instances through the one generic Add and through the typed
// wrappers, and checks that each Store is over the served region.
func TestAdd(t *testing.T) {
	c, err := New(Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Add(nil); !errors.Is(err, ErrConfig) {
		t.Errorf("Add(nil): %v, want ErrConfig", err)
	}
	geo, err := keyincr.Layout{Slots: 64}.AppendBinary(nil)
	if err != nil {
		t.Fatal(err)
	}
	l, err := primitive.Parse(dta.OpKeyIncrement, geo)
	if err != nil {
		t.Fatal(err)
	}
	in, err := c.Add(l)
	if err != nil {
		t.Fatal(err)
	}
	if in.Index != 0 || in.Primitive != dta.OpKeyIncrement || in.CMPort != DefaultCMPort || in.Store == nil ||
		uint64(len(in.Store.Region())) != l.RegionSize() || uint64(in.Length) != l.RegionSize() {
		t.Fatalf("Add: %+v", in)
	}
	// The Store is the region served: a FETCH_ADD through it is what the
	// typed store reads.
	ki, ok := keyincr.StoreOf(in.Store)
	if !ok {
		t.Fatalf("keyincr.StoreOf(%T) failed", in.Store)
	}
	if old, err := in.Store.FetchAdd(8, 5); err != nil || old != 0 || ki.Total() != 5 {
		t.Errorf("FetchAdd through the Store: %d, %v; typed total %d", old, err, ki.Total())
	}
	c.Close()
	if _, err := c.Add(l); !errors.Is(err, ErrState) {
		t.Errorf("Add after Close: %v, want ErrState", err)
	}
}

// TestAddTyped checks that the typed Add methods return the typed form of
// the instance's Store.
func TestAddTyped(t *testing.T) {
	c, err := New(Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	kw, err := c.AddKeyWrite(keywrite.Layout{Slots: 16, DataSize: 4})
	if err != nil || kw == nil {
		t.Fatalf("AddKeyWrite: %v, %v", kw, err)
	}
	al, err := c.AddAppend(appendlist.Layout{Lists: 2, Entries: 8, EntrySize: 4})
	if err != nil || al == nil {
		t.Fatalf("AddAppend: %v, %v", al, err)
	}
	ins := c.Instances()
	if len(ins) != 2 || ins[0].Primitive != dta.OpKeyWrite || ins[1].Primitive != dta.OpAppend {
		t.Fatalf("Instances: %+v", ins)
	}
	if s, _ := keywrite.StoreOf(ins[0].Store); s != kw {
		t.Error("AddKeyWrite's store is not the instance's Store")
	}
	// Append's readers wake on the Store the collector notifies.
	if s, _ := appendlist.StoreOf(ins[1].Store); s != al {
		t.Error("AddAppend's store is not the instance's Store")
	}
	if _, ok := ins[1].Store.(primitive.Notifier); !ok {
		t.Error("an Append Store is not a primitive.Notifier")
	}
}

// TestAddErrorsNameTitle: Add's errors name the typed method of a
// primitive with a Go name (primitive.Titled), as the typed method's
// would, whichever way the instance was added; others say Add.
func TestAddErrorsNameTitle(t *testing.T) {
	c, err := New(Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for _, tc := range []struct {
		op     dta.Opcode
		config string
		want   string
	}{
		{dta.OpKeyWrite, `{"slots": 1000, "data_size": 4}`, "collector.AddKeyWrite: keywrite: "},
		{dta.OpKeyIncrement, `{"slots": 1000}`, "collector.AddKeyIncrement: keyincr: "},
		{dta.OpAppend, `{"lists": 2, "entries": 8, "entry_size": 0}`, "collector.AddAppend: appendlist: "},
		{keymax.Opcode, "", "collector.Add: keymax: "},
	} {
		var l primitive.Layout = keymax.Layout{LogSlots: 99}
		if tc.config != "" {
			k, _ := primitive.Lookup(tc.op)
			if l, err = k.(primitive.Configurer).ParseConfig(json.RawMessage(tc.config)); err != nil {
				t.Fatalf("%v: %v", tc.op, err)
			}
		}
		if _, err := c.Add(l); err == nil || !strings.HasPrefix(err.Error(), tc.want) {
			t.Errorf("Add(%v): %v, want an error starting %q", tc.op, err, tc.want)
		}
	}
}
