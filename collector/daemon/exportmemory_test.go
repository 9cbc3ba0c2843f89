package daemon

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"
)

// TestExportSaysMemory: each exported file says what the export left in
// its instance's memory, and the memory is so: Key-Write kept, Key-Increment
// zeroed, Append drained.
func TestExportSaysMemory(t *testing.T) {
	cfg := Config{Addr: "127.0.0.1:0", HTTP: "127.0.0.1:0", Export: &ExportConfig{Dir: t.TempDir()}, Instances: []Instance{
		{Primitive: "keywrite", Slots: 1024, DataSize: 4},
		{Primitive: "keyincrement", Slots: 1024, KeysFrom: new(int)},
		{Primitive: "postcard", Hops: 5, Chunks: 1024, Copies: 2, Values: []uint32{1, 2, 3}, KeysFrom: new(int)},
		{Primitive: "append", Lists: 1, Entries: 16, EntrySize: 4},
	}}
	d, err := New(cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		d.Run(ctx, time.Second)
	}()
	kw, ki, _, _ := typed(d)
	if err := kw.Put(7, []byte{1, 2, 3, 4}, 2); err != nil {
		t.Fatal(err)
	}
	ops, _ := ki.Layout().AppendWrites(nil, 7, 5, 2)
	if err := ki.ApplyWrites(ops); err != nil {
		t.Fatal(err)
	}
	res, err := d.Export(nil)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"kept", "zeroed", "kept", "drained"}
	for i, f := range res.Files {
		if f.Memory != want[i] {
			t.Errorf("instance %d (%s): memory %q, want %q", i, f.Primitive, f.Memory, want[i])
		}
	}
	if len(res.Files) != 4 || res.Files[0].Rows != 1 || res.Files[1].Rows != 1 {
		t.Errorf("files %+v", res.Files)
	}
	if r, _ := d.insts[0].one("keywrite", 7, 2); r.Status != StatusFound {
		t.Errorf("Key-Write after the export: %+v, want kept", r)
	}
	if r, _ := d.insts[1].one("keyincrement", 7, 2); r.Status != StatusNotFound || r.Count != 0 {
		t.Errorf("Key-Increment after the export: %+v, want zeroed", r)
	}
}
