package daemon

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// TestOldSpellings: a configuration may name a primitive as logs and
// /v1/instances used to (key-write, postcarding, ...); it runs, a warning
// names the new spelling, and everything after says the new one. The old
// spellings also work in HTTP paths.
func TestOldSpellings(t *testing.T) {
	var logs bytes.Buffer
	log := slog.New(slog.NewJSONHandler(&logs, nil))
	cfg := Config{Addr: "127.0.0.1:0", HTTP: "127.0.0.1:0", Instances: []Instance{
		{Primitive: "Key-Write", Slots: 1024, DataSize: 4},
		{Primitive: "key-increment", Slots: 1024},
		{Primitive: "postcarding", Hops: 5, Chunks: 1024, Copies: 2, Values: []uint32{1, 2, 3}},
		{Primitive: "appendlist", Lists: 1, Entries: 16, EntrySize: 4},
		{Primitive: "keyincr", Slots: 1024, KeysFrom: new(int)},
	}}
	d, err := New(cfg, log)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		d.Run(ctx, time.Second)
	}()
	if cfg.Instances[0].Primitive != "Key-Write" {
		t.Errorf("New changed the caller's configuration: %q", cfg.Instances[0].Primitive)
	}
	for _, w := range []string{
		`instance 0: primitive \"Key-Write\" is an old spelling, use \"keywrite\"`,
		`instance 1: primitive \"key-increment\" is an old spelling, use \"keyincrement\"`,
		`instance 2: primitive \"postcarding\" is an old spelling, use \"postcard\"`,
		`instance 3: primitive \"appendlist\" is an old spelling, use \"append\"`,
		`instance 4: primitive \"keyincr\" is an old spelling, use \"keyincrement\"`,
	} {
		if !strings.Contains(logs.String(), w) {
			t.Errorf("no warning %s in\n%s", w, logs.String())
		}
	}
	if n := strings.Count(logs.String(), `"level":"WARN"`); n != 5 {
		t.Errorf("%d warnings, want 5", n)
	}
	h := d.Handler()
	get := func(path string) string {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("GET", path, nil))
		if rec.Code != 200 {
			t.Errorf("GET %s: %d %s", path, rec.Code, rec.Body)
		}
		return rec.Body.String()
	}
	var insts []struct{ Primitive, Kind string }
	if err := json.Unmarshal([]byte(get("/v1/instances")), &insts); err != nil {
		t.Fatal(err)
	}
	want := []string{"keywrite", "keyincrement", "postcard", "append", "keyincrement"}
	for i, in := range insts {
		if in.Primitive != want[i] || in.Kind != want[i] {
			t.Errorf("instance %d: %+v, want %s", i, in, want[i])
		}
	}
	for _, path := range []string{"/v1/instances/0/key-write?key=1", "/v1/instances/0/keywrite?key=1", "/v1/instances/2/postcarding?key=1", "/v1/instances/1/key-increment?key=1"} {
		get(path)
	}
}
