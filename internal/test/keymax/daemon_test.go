package keymax_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/netip"
	"testing"
	"time"

	"github.com/parquet-go/parquet-go"

	"github.com/dtakit/dtakit/collector/daemon"
	"github.com/dtakit/dtakit/internal/test/keymax"
	"github.com/dtakit/dtakit/translator"
)

// exported is a row of a Key-Max instance's Parquet file, read by name.
type exported struct {
	Epoch    uint64 `parquet:"epoch"`
	Instance int32  `parquet:"instance"`
	Key      uint32 `parquet:"key"`
	Max      uint64 `parquet:"max"`
}

// TestThroughDaemon is the proof's second half: a collector daemon
// configured with a "keymax" instance (its Kind's ParseConfig) serves it,
// the software translator writes it, and the daemon's HTTP query (GET and
// batch POST) and Parquet export (export.Rows) read it back, with no code
// of the collector's, the daemon's or export's knowing Key-Max.
func TestThroughDaemon(t *testing.T) {
	l := keymax.Layout{LogSlots: 12}
	cfg := daemon.Config{Addr: "127.0.0.1:0", HTTP: "127.0.0.1:0", Export: &daemon.ExportConfig{Dir: t.TempDir()},
		Instances: []daemon.Instance{{Primitive: "keymax", Slots: 1 << l.LogSlots}}}
	d, err := daemon.New(cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() { ran <- d.Run(ctx, time.Second) }()
	defer func() {
		cancel()
		if err := <-ran; err != nil {
			t.Errorf("daemon: %v", err)
		}
	}()

	tr, err := translator.New(translator.Config{
		ReportAddr: netip.MustParseAddrPort("127.0.0.1:0"),
		Collectors: []netip.AddrPort{d.RoCEAddr()},
		Shards:     2,
	})
	if err != nil {
		t.Fatal(err)
	}
	sctx, scancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer scancel()
	if err := tr.Start(sctx); err != nil {
		t.Fatal(err)
	}
	if ins := tr.Instances(); len(ins) != 1 || ins[0].Primitive != keymax.Opcode || !ins[0].Ready {
		t.Fatalf("translator instances %+v: want one Key-Max instance, ready", ins)
	}
	const keys, perKey = 200, 8
	want := send(t, tr, keys, perKey)
	waitFor(t, func() bool { return reports(tr) >= keys*perKey+2 })
	if err := tr.Close(5 * time.Second); err != nil {
		t.Fatalf("translator Close: %v (everything should be acknowledged)", err)
	}

	base := "http://" + d.HTTPAddr().String()
	var insts []struct{ Primitive, Kind string }
	if call(t, "GET", base+"/v1/instances", "", &insts); len(insts) != 1 || insts[0].Primitive != "keymax" || insts[0].Kind != "keymax" {
		t.Errorf("/v1/instances: %+v", insts)
	}
	found := checkQueries(t, base, l, want)
	checkExport(t, base, want, found)
}

// checkQueries asks for every key with GET and all at once with a batch
// POST, and returns the keys found.
func checkQueries(t *testing.T, base string, l keymax.Layout, want map[uint32]uint64) map[uint32]bool {
	t.Helper()
	found := map[uint32]bool{}
	var all []uint32
	for k := range want {
		var a keymax.Answer
		call(t, "GET", fmt.Sprintf("%s/v1/instances/0/keymax?key=%d", base, k), "", &a)
		switch {
		case a.Key == k && a.Status == "found" && a.Max == want[k]:
			found[k] = true
		case a.Key == k && a.Status == "not found" && sharesSlot(l, k, want):
		default:
			t.Errorf("GET key %d: %+v, want max %d", k, a, want[k])
		}
		all = append(all, k)
	}
	if len(found) < len(want)*9/10 {
		t.Errorf("%d of %d keys found, fewer than collisions explain", len(found), len(want))
	}
	body, _ := json.Marshal(map[string]any{"keys": all})
	var batch struct{ Results []keymax.Answer }
	call(t, "POST", base+"/v1/instances/0/keymax", string(body), &batch)
	if len(batch.Results) != len(all) {
		t.Fatalf("batch: %d results for %d keys", len(batch.Results), len(all))
	}
	for i, a := range batch.Results {
		if a.Key != all[i] || (a.Status == "found") != found[a.Key] || found[a.Key] && a.Max != want[a.Key] {
			t.Errorf("batch result %d: %+v, want key %d max %d found %v", i, a, all[i], want[all[i]], found[all[i]])
		}
	}
	// A Key-Max instance is not another primitive's.
	if code := call(t, "GET", base+"/v1/instances/0/keywrite?key=1", "", nil); code != http.StatusNotFound {
		t.Errorf("GET .../keywrite on a keymax instance: %d, want 404", code)
	}
	return found
}

// checkExport exports an epoch and reads the instance's Parquet file: one
// row per key found, with its maximum.
func checkExport(t *testing.T, base string, want map[uint32]uint64, found map[uint32]bool) {
	t.Helper()
	var res daemon.ExportResult
	call(t, "POST", base+"/v1/export", "", &res)
	if len(res.Files) != 1 {
		t.Fatalf("export: %+v", res)
	}
	f := res.Files[0]
	if f.Primitive != "keymax" || f.Keys != "scanned" || f.Memory != "kept" || f.Rows != uint64(len(found)) || f.Skipped != "" {
		t.Errorf("exported file %+v: want %d rows of keymax, keys scanned, memory kept", f, len(found))
	}
	rows, err := parquet.ReadFile[exported](f.Path)
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != len(found) {
		t.Errorf("%d rows in %s, want %d", len(rows), f.Path, len(found))
	}
	for _, r := range rows {
		if !found[r.Key] || r.Max != want[r.Key] || r.Epoch != res.Epoch || r.Instance != 0 {
			t.Errorf("row %+v: want key found, max %d, epoch %d", r, want[r.Key], res.Epoch)
		}
	}
}

// call makes an HTTP request and decodes its JSON answer into v (when not
// nil and the status is 200); it returns the status.
func call(t *testing.T, method, url, body string, v any) int {
	t.Helper()
	req, err := http.NewRequest(method, url, bytes.NewBufferString(body))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if v != nil {
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("%s %s: %d %s", method, url, resp.StatusCode, b)
		}
		if err := json.Unmarshal(b, v); err != nil {
			t.Fatalf("%s %s: %v: %s", method, url, err, b)
		}
	}
	return resp.StatusCode
}
