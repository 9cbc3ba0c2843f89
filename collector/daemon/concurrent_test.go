package daemon

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
)

// TestConcurrentQueries: queries of every keyed primitive run at once, as
// the HTTP server runs them, each answered (under -race: without a data
// race; a Postcarding store made its Table at the first query, which
// raced before the daemon made it at start).
func TestConcurrentQueries(t *testing.T) {
	cfg := Config{Addr: "127.0.0.1:0", HTTP: "127.0.0.1:0", Instances: []Instance{
		{Primitive: "keywrite", Slots: 1024, DataSize: 4},
		{Primitive: "keyincrement", Slots: 1024},
		{Primitive: "postcard", Hops: 5, Chunks: 1024, Copies: 2, Values: []uint32{1, 2, 3}},
	}}
	d, err := New(cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	defer d.c.Close()
	h := d.Handler()
	var wg sync.WaitGroup
	for _, path := range []string{"/v1/instances/0/keywrite?key=7", "/v1/instances/1/keyincrement?key=7", "/v1/instances/2/postcard?key=7"} {
		for range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
				if rec.Code != http.StatusOK {
					t.Errorf("GET %s: %d %s", path, rec.Code, rec.Body)
				}
			}()
		}
	}
	wg.Wait()
}
