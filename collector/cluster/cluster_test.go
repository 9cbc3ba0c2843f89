package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"sync"
	"testing"

	"github.com/dtakit/dtakit/collector/daemon"
	"github.com/dtakit/dtakit/dta"
)

// fake is a collector's HTTP API that answers Key-Write queries with the
// collector's index as the status, so routing is visible.
func fake(t *testing.T, name, roce string, kinds ...string) *httptest.Server {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/collector", func(w http.ResponseWriter, _ *http.Request) {
		json.NewEncoder(w).Encode(daemon.CollectorInfo{Name: name, RoCEv2: roce})
	})
	mux.HandleFunc("GET /v1/instances", func(w http.ResponseWriter, _ *http.Request) {
		var out []map[string]any
		for i, k := range kinds {
			out = append(out, map[string]any{"index": i, "kind": k})
		}
		json.NewEncoder(w).Encode(out)
	})
	mux.HandleFunc("POST /v1/instances/{i}/keywrite", func(w http.ResponseWriter, r *http.Request) {
		var body struct{ Keys []uint32 }
		json.NewDecoder(r.Body).Decode(&body)
		var res []daemon.KeyResult
		for _, k := range body.Keys {
			res = append(res, daemon.KeyResult{Key: k, Status: name + "/" + r.PathValue("i")})
		}
		json.NewEncoder(w).Encode(map[string]any{"results": res})
	})
	mux.HandleFunc("POST /v1/instances/{i}/keyincrement", func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusBadRequest)
		json.NewEncoder(w).Encode(map[string]string{"error": "no such thing"})
	})
	s := httptest.NewServer(mux)
	t.Cleanup(s.Close)
	return s
}

func TestRouting(t *testing.T) {
	a := fake(t, "a", "10.0.0.1:4791", "append", "keywrite", "keywrite")
	b := fake(t, "b", "10.0.0.2:4791", "keywrite", "keyincrement")
	ctx := context.Background()
	choice := dta.DefaultCollectorChoice(2)
	choice[7] = 1
	c, err := New(ctx, Config{Collectors: []string{a.URL, b.URL + "/"}, Choice: &choice,
		RoCEv2: []netip.AddrPort{netip.MustParseAddrPort("10.0.0.1:4791"), netip.MustParseAddrPort("10.0.0.2:4791")}})
	if err != nil {
		t.Fatal(err)
	}
	var keys []uint32
	for k := range uint32(500) {
		keys = append(keys, k*7919)
	}
	res, err := c.KeyWrite(ctx, keys)
	if err != nil {
		t.Fatal(err)
	}
	for i, k := range keys {
		// The first keywrite instance: 1 on a, 0 on b.
		want := map[int]string{0: "a/1", 1: "b/0"}[choice.Collector(k)]
		if res[i].Key != k || res[i].Status != want || c.Collector(k) != choice.Collector(k) {
			t.Fatalf("key %d: %+v, want %s", k, res[i], want)
		}
	}
	if _, err := c.KeyIncrement(ctx, keys); !errors.Is(err, ErrConfig) {
		t.Fatalf("a primitive a collector lacks: %v", err)
	}
	if _, err := c.KeyIncrement(ctx, []uint32{keyOn(&choice, 1)}); !errors.Is(err, ErrCollector) {
		t.Fatalf("a collector's error: %v", err)
	}
	if r, err := c.Postcard(ctx, nil); err != nil || len(r) != 0 {
		t.Fatalf("no keys: %v %v", r, err)
	}
}

func keyOn(c *dta.CollectorChoice, coll int) uint32 {
	for k := uint32(0); ; k++ {
		if c.Collector(k) == coll {
			return k
		}
	}
}

func TestNewErrors(t *testing.T) {
	a := fake(t, "a", "10.0.0.1:4791", "keywrite")
	ctx := context.Background()
	bad := dta.CollectorChoice{3}
	for name, cfg := range map[string]Config{
		"no collectors":   {},
		"choice too wide": {Collectors: []string{a.URL}, Choice: &bad},
		"address count":   {Collectors: []string{a.URL}, RoCEv2: []netip.AddrPort{{}, {}}},
		"wrong address":   {Collectors: []string{a.URL}, RoCEv2: []netip.AddrPort{netip.MustParseAddrPort("10.0.0.9:4791")}},
	} {
		if _, err := New(ctx, cfg); !errors.Is(err, ErrConfig) {
			t.Errorf("%s: %v, want ErrConfig", name, err)
		}
	}
	if _, err := New(ctx, Config{Collectors: []string{"http://127.0.0.1:1"}}); !errors.Is(err, ErrCollector) {
		t.Errorf("a collector that does not answer: %v", err)
	}
}

// A query of more keys than BatchKeys is split, and every request carries
// the token.
func TestBatchSplitAndToken(t *testing.T) {
	var mu sync.Mutex
	most, untokened := 0, 0
	mux := http.NewServeMux()
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer s3cret" {
			mu.Lock()
			untokened++
			mu.Unlock()
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		switch r.URL.Path {
		case "/v1/collector":
			json.NewEncoder(w).Encode(daemon.CollectorInfo{Name: "a"})
		case "/v1/instances":
			json.NewEncoder(w).Encode([]map[string]any{{"index": 0, "kind": "keywrite"}})
		default:
			var body struct{ Keys []uint32 }
			json.NewDecoder(r.Body).Decode(&body)
			mu.Lock()
			most = max(most, len(body.Keys))
			mu.Unlock()
			var res []daemon.KeyResult
			for _, k := range body.Keys {
				res = append(res, daemon.KeyResult{Key: k, Count: uint64(k) * 3})
			}
			json.NewEncoder(w).Encode(map[string]any{"results": res})
		}
	})
	s := httptest.NewServer(mux)
	defer s.Close()
	ctx := context.Background()
	c, err := New(ctx, Config{Collectors: []string{s.URL}, Token: "s3cret", BatchKeys: 10})
	if err != nil {
		t.Fatal(err)
	}
	var keys []uint32
	for k := range uint32(95) {
		keys = append(keys, k+1)
	}
	res, err := c.KeyWrite(ctx, keys)
	if err != nil {
		t.Fatal(err)
	}
	for i, k := range keys {
		if res[i].Key != k || res[i].Count != uint64(k)*3 {
			t.Fatalf("key %d: %+v", k, res[i])
		}
	}
	if most != 10 || untokened != 0 {
		t.Fatalf("largest request %d keys (want 10), %d requests without the token", most, untokened)
	}
}
