package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/netip"
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
