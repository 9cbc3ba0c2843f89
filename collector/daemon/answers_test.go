package daemon

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/dtakit/dtakit/appendlist"
	"github.com/dtakit/dtakit/postcard"
)

// TestAnswerShapes: every primitive answers found and not found with the
// same fields (the primitive's own ones present either way), and an
// Append read peeks or consumes as asked.
func TestAnswerShapes(t *testing.T) {
	cfg := Config{Addr: "127.0.0.1:0", HTTP: "127.0.0.1:0", Instances: []Instance{
		{Primitive: "keywrite", Slots: 1024, DataSize: 4},
		{Primitive: "keyincrement", Slots: 1024},
		{Primitive: "postcard", Hops: 5, Chunks: 1024, Copies: 2, Values: []uint32{1, 2, 3, 4, 5}},
		{Primitive: "append", Lists: 2, Entries: 16, EntrySize: 4},
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
	kw, ki, pc, al := typed(d)
	if err := kw.Put(7, []byte{1, 2, 3, 4}, 2); err != nil {
		t.Fatal(err)
	}
	ops, err := ki.Layout().AppendWrites(nil, 7, 5, 2)
	if err == nil {
		err = ki.ApplyWrites(ops)
	}
	if err != nil {
		t.Fatal(err)
	}
	ca, err := postcard.NewCache(pc.Layout(), 16)
	if err != nil {
		t.Fatal(err)
	}
	var chunks []postcard.Chunk
	for hop := postcard.Hop(1); hop <= 5; hop++ {
		if chunks, err = ca.Insert(chunks, 7, hop, 5, postcard.Value(6-hop)); err != nil {
			t.Fatal(err)
		}
	}
	for i := range chunks {
		for _, w := range ca.Codec().AppendWrites(nil, &chunks[i]) {
			if err := pc.Apply(w); err != nil {
				t.Fatal(err)
			}
		}
	}
	b, _ := appendlist.NewBatcher(al.Layout())
	for v := byte(1); v <= 3; v++ {
		ws, err := b.AppendWrites(nil, 0, []byte{v, 0, 0, 0xaa}, false)
		if err != nil {
			t.Fatal(err)
		}
		for _, w := range ws {
			if err := al.Apply(w); err != nil {
				t.Fatal(err)
			}
		}
	}

	h := d.Handler()
	do := func(method, path, body string) string {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(method, path, strings.NewReader(body)))
		if rec.Code != 200 {
			t.Errorf("%s %s: %d %s", method, path, rec.Code, rec.Body)
		}
		// The shape is the fields and their order; a streamed batch
		// answer may break lines between results.
		var out bytes.Buffer
		if err := json.Compact(&out, rec.Body.Bytes()); err != nil {
			t.Errorf("%s %s: not JSON: %v: %s", method, path, err, rec.Body)
		}
		return out.String()
	}
	for path, want := range map[string]string{
		"/v1/instances/0/keywrite?key=7":          `{"key":7,"status":"found","data":"01020304","votes":2}`,
		"/v1/instances/0/keywrite?key=9":          `{"key":9,"status":"not found","data":"","votes":0}`,
		"/v1/instances/1/keyincrement?key=7":      `{"key":7,"status":"found","count":5}`,
		"/v1/instances/1/keyincrement?key=999999": `{"key":999999,"status":"not found","count":0}`,
		"/v1/instances/2/postcard?key=7":          `{"key":7,"status":"found","path":[5,4,3,2,1]}`,
		"/v1/instances/2/postcard?key=9":          `{"key":9,"status":"not found","path":[]}`,
	} {
		if got := do("GET", path, ""); got != want {
			t.Errorf("GET %s:\n got %s\nwant %s", path, got, want)
		}
	}
	for path, want := range map[string]string{
		"/v1/instances/0/keywrite":     `{"results":[{"key":7,"status":"found","data":"01020304","votes":2},{"key":9,"status":"not found","data":"","votes":0}]}`,
		"/v1/instances/1/keyincrement": `{"results":[{"key":7,"status":"found","count":5},{"key":9,"status":"not found","count":0}]}`,
		"/v1/instances/2/postcard":     `{"results":[{"key":7,"status":"found","path":[5,4,3,2,1]},{"key":9,"status":"not found","path":[]}]}`,
	} {
		if got := do("POST", path, `{"keys":[7,9]}`); got != want {
			t.Errorf("POST %s:\n got %s\nwant %s", path, got, want)
		}
	}
	const entries = `"entries":["010000aa","020000aa","030000aa"],"count":3`
	for _, c := range []struct{ path, want string }{
		{"/v1/instances/3/append?list=0&peek=true", `{"list":0,"status":"found",` + entries + `,"cursor":0,"lost":0,"consumed":false}`},
		{"/v1/instances/3/append?list=0&peek=1&max=2", `{"list":0,"status":"found","entries":["010000aa","020000aa"],"count":2,"cursor":0,"lost":0,"consumed":false}`},
		{"/v1/instances/3/append?list=0", `{"list":0,"status":"found",` + entries + `,"cursor":3,"lost":0,"consumed":true}`},
		{"/v1/instances/3/append?list=0", `{"list":0,"status":"empty","entries":[],"count":0,"cursor":3,"lost":0,"consumed":true}`},
		{"/v1/instances/3/append?list=1&peek=true", `{"list":1,"status":"empty","entries":[],"count":0,"cursor":0,"lost":0,"consumed":false}`},
	} {
		if got := do("GET", c.path, ""); got != c.want {
			t.Errorf("GET %s:\n got %s\nwant %s", c.path, got, c.want)
		}
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/v1/instances/3/append?list=0&peek=maybe", nil))
	if rec.Code != 400 || !strings.Contains(rec.Body.String(), `peek=\"maybe\": want true or false`) {
		t.Errorf("peek=maybe: %d %s", rec.Code, rec.Body)
	}
}
