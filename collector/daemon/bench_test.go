package daemon

import (
	"encoding/binary"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
)

// benchDaemon is a daemon of a Key-Write and a Key-Increment instance of
// 2^16 slots each (the Key-Increment's keys from the Key-Write's), with
// keys 0..n-1 written to both.
func benchDaemon(b *testing.B, n int, export bool) *Daemon {
	cfg := Config{Addr: "127.0.0.1:0", HTTP: "127.0.0.1:0", Instances: []Instance{
		{Primitive: "keywrite", Slots: 1 << 16, DataSize: 4},
		{Primitive: "keyincrement", Slots: 1 << 16, KeysFrom: new(int)},
	}}
	if export {
		cfg.Export = &ExportConfig{Dir: b.TempDir()}
	}
	d, err := New(cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { d.c.Close() })
	kw, ki := benchStores(d)
	for k := range uint32(n) {
		if err := kw.Put(k, binary.BigEndian.AppendUint32(nil, k), 2); err != nil {
			b.Fatal(err)
		}
		ops, _ := ki.Layout().AppendWrites(nil, k, 3, 2)
		if err := ki.ApplyWrites(ops); err != nil {
			b.Fatal(err)
		}
	}
	return d
}

// BenchmarkQueryBatch is a batch POST of 1024 keys to each instance,
// answered by the handler.
func BenchmarkQueryBatch(b *testing.B) {
	d := benchDaemon(b, 4096, false)
	keys := make([]string, 1024)
	for i := range keys {
		keys[i] = strconv.Itoa(i * 3)
	}
	body := `{"keys":[` + strings.Join(keys, ",") + `]}`
	h := d.Handler()
	for _, prim := range []string{"keywrite", "keyincrement"} {
		b.Run(prim, func(b *testing.B) {
			i := map[string]string{"keywrite": "0", "keyincrement": "1"}[prim]
			b.ReportAllocs()
			for b.Loop() {
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/v1/instances/"+i+"/"+prim, strings.NewReader(body)))
				if rec.Code != http.StatusOK {
					b.Fatalf("%d %s", rec.Code, rec.Body)
				}
			}
		})
	}
}

// BenchmarkQueryGet is a GET of one key.
func BenchmarkQueryGet(b *testing.B) {
	d := benchDaemon(b, 4096, false)
	h := d.Handler()
	b.ReportAllocs()
	for b.Loop() {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/v1/instances/0/keywrite?key=7", nil))
		if rec.Code != http.StatusOK {
			b.Fatalf("%d %s", rec.Code, rec.Body)
		}
	}
}

// BenchmarkExport exports an epoch of both instances (the Key-Increment's
// keys scanned from the Key-Write's).
func BenchmarkExport(b *testing.B) {
	d := benchDaemon(b, 16384, true)
	b.Cleanup(d.exp.close)
	b.ReportAllocs()
	for b.Loop() {
		res, err := d.Export(nil)
		if err != nil {
			b.Fatal(err)
		}
		if len(res.Files) != 2 || res.Files[0].Rows == 0 || res.Files[1].Rows != res.Files[0].Rows {
			out, _ := json.Marshal(res)
			b.Fatalf("export: %s", out)
		}
	}
}
