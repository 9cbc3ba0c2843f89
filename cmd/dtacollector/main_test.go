package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dtakit/dtakit/internal/test/proctest"
	"github.com/dtakit/dtakit/keyincr"
	"github.com/dtakit/dtakit/postcard"
	"github.com/dtakit/dtakit/translator"
)

// build compiles the daemon once per test.
func build(t *testing.T) string { return proctest.Build(t, ".", "dtacollector") }

func freePort(t *testing.T, network string) int { return proctest.FreePort(t, network) }

func getJSON(t *testing.T, url string, v any) int {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		t.Fatalf("%s: %v", url, err)
	}
	return resp.StatusCode
}

// TestDaemon starts dtacollector as a process, writes into it with a
// translator and a reporter, queries it over HTTP, reads its metrics and
// stops it with SIGTERM.
func TestDaemon(t *testing.T) {
	bin := build(t)
	roce := fmt.Sprintf("127.0.0.1:%d", freePort(t, "udp"))
	web := fmt.Sprintf("127.0.0.1:%d", freePort(t, "tcp"))
	cmPort := 42000 + os.Getpid()%1000
	cfg := fmt.Sprintf(`{"addr": %q, "http": %q, "cm_port": %d, "instances": [
		{"primitive": "keywrite", "slots": 4096, "data_size": 4},
		{"primitive": "keyincrement", "slots": 1024},
		{"primitive": "postcard", "hops": 3, "chunks": 1024, "values": [11, 12, 13, 21, 22, 23]},
		{"primitive": "append", "lists": 2, "entries": 64, "entry_size": 4, "batch": 4, "markers": true}]}`, roce, web, cmPort)
	d := startDaemon(t, bin, cfg, netip.MustParseAddrPort(roce), web)
	base := d.base

	feedDaemon(t, roce, cmPort)
	checkDaemonQueries(t, base)
	checkDaemonMetrics(t, base)

	if err := d.Cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := d.Cmd.Wait(); err != nil {
		t.Fatalf("exit after SIGTERM: %v\n%s", err, d.Logs())
	}
	if !strings.Contains(d.Logs(), `"msg":"stopped"`) {
		t.Errorf("no clean-stop log line:\n%s", d.Logs())
	}
}

// feedDaemon writes Key-Write, Key-Increment, Postcarding and Append
// reports into the collector at roce through a translator.
func feedDaemon(t *testing.T, roce string, cmPort int) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	tr, rep := startTranslator(t, ctx, translator.Config{Collectors: []netip.AddrPort{netip.MustParseAddrPort(roce)}, CMPort: uint16(cmPort)})
	for k := uint32(1); k <= 100; k++ {
		rep.KeyWrite(k, binary.BigEndian.AppendUint32(nil, k*5), 2)
		rep.KeyIncrement(k, 3, 2)
	}
	for h := postcard.Hop(1); h <= 3; h++ {
		rep.Postcard(7, h, 3, 10+postcard.Value(h))
		rep.Postcard(8, h, 3, 20+postcard.Value(h))
	}
	for i := uint32(0); i < 8; i++ {
		rep.Append(1, binary.BigEndian.AppendUint32(nil, 1000+i), false)
	}
	closeReporter(t, rep)
	if err := tr.Close(5 * time.Second); err != nil {
		t.Fatal(err)
	}
}

// checkDaemonQueries queries what feedDaemon wrote over HTTP.
func checkDaemonQueries(t *testing.T, base string) {
	var kw struct {
		Status, Data string
	}
	if getJSON(t, base+"/v1/instances/0/keywrite?key=42", &kw); kw.Status != "found" || kw.Data != hex.EncodeToString(binary.BigEndian.AppendUint32(nil, 210)) {
		t.Errorf("key-write 42: %+v", kw)
	}
	var batch struct {
		Results []struct {
			Key   uint32
			Count uint64
		}
	}
	resp, err := http.Post(base+"/v1/instances/1/keyincrement", "application/json", strings.NewReader(`{"keys": [1, 50, 100, 555]}`))
	if err != nil {
		t.Fatal(err)
	}
	json.NewDecoder(resp.Body).Decode(&batch)
	resp.Body.Close()
	// The answers are a store's fed the same reports (count-min may count a
	// key never sent: both its counters shared with sent keys).
	l := keyincr.Layout{Slots: 1024}
	model, _ := keyincr.NewStore(l, make([]byte, l.RegionSize()))
	for k := uint32(1); k <= 100; k++ {
		model.Add(k, 3, 2)
	}
	for i, k := range []uint32{1, 50, 100, 555} {
		want, _ := model.Query(k, 2)
		if len(batch.Results) != 4 || batch.Results[i].Key != k || batch.Results[i].Count != want {
			t.Errorf("key-increment batch: %+v, want key %d counted %d", batch, k, want)
		}
	}
	var pc struct {
		Status string
		Path   []uint32
	}
	if getJSON(t, base+"/v1/instances/2/postcard?key=8", &pc); pc.Status != "found" || fmt.Sprint(pc.Path) != "[21 22 23]" {
		t.Errorf("postcard flow 8: %+v", pc)
	}
	var al struct {
		Entries []string
		Cursor  uint64
	}
	if getJSON(t, base+"/v1/instances/3/append?list=1", &al); len(al.Entries) != 8 || al.Entries[7] != hex.EncodeToString(binary.BigEndian.AppendUint32(nil, 1007)) || al.Cursor != 8 {
		t.Errorf("append list 1: %+v", al)
	}
	var e struct{ Error string }
	if code := getJSON(t, base+"/v1/instances/0/keyincrement?key=1", &e); code != http.StatusNotFound || e.Error == "" {
		t.Errorf("a Key-Increment query of a Key-Write instance: %d %+v", code, e)
	}
	if code := getJSON(t, base+"/v1/instances/0/keywrite?key=oops", &e); code != http.StatusBadRequest {
		t.Errorf("a bad key: %d %+v", code, e)
	}
}

// checkDaemonMetrics: /metrics counts the WRITE packets applied.
func checkDaemonMetrics(t *testing.T, base string) {
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	metrics, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	found := false
	for sc := bufio.NewScanner(bytes.NewReader(metrics)); sc.Scan(); {
		var v float64
		if n, _ := fmt.Sscanf(sc.Text(), "dtakit_collector_write_packets_total %g", &v); n == 1 && v >= 200 {
			found = true
		}
	}
	if !found {
		t.Errorf("metrics lack dtakit_collector_write_packets_total >= 200:\n%s", metrics)
	}
}

// TestBadConfig: bad flags and configurations exit 2 and say what is wrong.
func TestBadConfig(t *testing.T) {
	bin := build(t)
	dir := t.TempDir()
	for name, c := range map[string]struct{ file, want string }{
		"unknown field":     {`{"instances": [], "bogus": 1}`, `unknown-field.json:1:19: json: unknown field \"bogus\"`},
		"no instances":      {`{"instances": []}`, "no instances"},
		"unknown primitive": {`{"instances": [{"primitive": "keyread"}]}`, "unknown primitive"},
		"bad layout":        {`{"instances": [{"primitive": "keywrite", "slots": 1000, "data_size": 4}]}`, "bad configuration: instance 0: collector.AddKeyWrite: keywrite: invalid layout: slot count 1000 is not a power of two in 1..2^32"},
		"bad backend":       {`{"backend": "fpga", "instances": [{"primitive": "keyincrement", "slots": 64}]}`, "backend"},
		"bad interval":      {`{"export": {"dir": "/tmp", "interval": "soon"}, "instances": [{"primitive": "keyincrement", "slots": 64}]}`, "interval"},
		"export no dir":     {`{"export": {}, "instances": [{"primitive": "keyincrement", "slots": 64}]}`, "dir is required"},
		"bad keys_from":     {`{"instances": [{"primitive": "keyincrement", "slots": 64, "keys_from": 0}]}`, "keys_from 0 names no keywrite"},
	} {
		path := filepath.Join(dir, strings.ReplaceAll(name, " ", "-")+".json")
		os.WriteFile(path, []byte(c.file), 0o600)
		out, err := exec.Command(bin, "-config", path, "-http", "127.0.0.1:0", "-addr", "127.0.0.1:0").CombinedOutput()
		if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 2 || !strings.Contains(string(out), c.want) {
			t.Errorf("%s: exit %v, output %s; want status 2 mentioning %q", name, err, out, c.want)
		}
	}
	out, err := exec.Command(bin).CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 2 || !strings.Contains(string(out), "-config") {
		t.Errorf("no flags: %v %s", err, out)
	}
}

// TestThreads: dtacollector runs one thread of Go code per shard (one by
// default), unless the GOMAXPROCS environment variable says otherwise.
func TestThreads(t *testing.T) {
	bin := build(t)
	dir := t.TempDir()
	for _, c := range []struct {
		shards, env string
		want        int
	}{
		{"", "", 1},
		{`"shards": 3,`, "", 3},
		{`"shards": 3,`, "2", 2},
	} {
		cfg := filepath.Join(dir, "c.json")
		conf := fmt.Sprintf(`{"addr": "127.0.0.1:%d", "http": "127.0.0.1:%d", "cm_port": %d, %s "instances": [{"primitive": "keyincrement", "slots": 1024}]}`,
			proctest.FreePort(t, "udp"), proctest.FreePort(t, "tcp"), proctest.FreePort(t, "udp"), c.shards)
		if err := os.WriteFile(cfg, []byte(conf), 0o600); err != nil {
			t.Fatal(err)
		}
		if got := proctest.Gomaxprocs(t, c.env, bin, "-config", cfg); got != c.want {
			t.Errorf("%s GOMAXPROCS=%q: gomaxprocs %d, want %d", c.shards, c.env, got, c.want)
		}
	}
}
