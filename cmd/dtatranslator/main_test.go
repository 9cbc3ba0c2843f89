package main

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
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

	"github.com/dtakit/dtakit/collector/daemon"
	"github.com/dtakit/dtakit/dta"
	"github.com/dtakit/dtakit/internal/test/proctest"
	"github.com/dtakit/dtakit/reporter"
)

// TestDaemons starts dtatranslator before its collector, as an operator
// might: it keeps trying, connects when dtacollector comes up, translates
// a stream of Key-Write and Key-Increment reports from another process's
// reporter, and on SIGTERM drains and exits 0; the collector's HTTP API
// answers every key.
func TestDaemons(t *testing.T) {
	tbin := proctest.Build(t, ".", "dtatranslator")
	cbin := proctest.Build(t, "../dtacollector", "dtacollector")
	cmPort := 45000 + os.Getpid()%1000
	roce := "127.0.0.41:4791"
	report := fmt.Sprintf("127.0.0.1:%d", proctest.FreePort(t, "udp"))
	thttp := fmt.Sprintf("127.0.0.1:%d", proctest.FreePort(t, "tcp"))
	chttp := fmt.Sprintf("127.0.0.1:%d", proctest.FreePort(t, "tcp"))
	dir := t.TempDir()
	tcfg := filepath.Join(dir, "t.json")
	// A ring that holds the burst: backpressure is not this test's subject.
	os.WriteFile(tcfg, []byte(fmt.Sprintf(`{"collectors": [%q], "cm_port": %d, "ring_size": 8192}`, roce, cmPort)), 0o600)
	tr := proctest.Start(t, tbin, "-config", tcfg, "-report", report, "-http", thttp)
	var st Status
	proctest.WaitFor(t, "translator up", 10*time.Second, func() bool { return proctest.GetJSON("http://"+thttp+"/v1/translator", &st) == nil }, tr)
	for _, in := range st.Instances {
		if in.Ready {
			t.Fatalf("ready before the collector started: %+v", st.Instances)
		}
	}

	// Its first discovery gives up (nobody answers the CM), and it says
	// it keeps trying.
	proctest.WaitFor(t, "first discovery given up", 10*time.Second, func() bool { return strings.Contains(tr.Logs(), "retrying") }, tr)
	time.Sleep(200 * time.Millisecond)

	ccfg := filepath.Join(dir, "c.json")
	os.WriteFile(ccfg, []byte(fmt.Sprintf(`{"addr": %q, "http": %q, "cm_port": %d, "instances": [
		{"primitive": "keywrite", "slots": 65536, "data_size": 4},
		{"primitive": "keyincrement", "slots": 65536}]}`, roce, chttp, cmPort)), 0o600)
	col := proctest.Start(t, cbin, "-config", ccfg)
	ready := func() bool {
		if proctest.GetJSON("http://"+thttp+"/v1/translator", &st) != nil {
			return false
		}
		n := 0
		for _, in := range st.Instances {
			if in.Ready {
				n++
			}
		}
		return n == 2
	}
	proctest.WaitFor(t, "translator connected to the collector started after it", 20*time.Second, ready, tr, col)

	const keys = daemonsKeys
	sendDaemonsReports(t, report)
	proctest.WaitFor(t, "reports translated", 10*time.Second, func() bool {
		return proctest.GetJSON("http://"+thttp+"/v1/translator", &st) == nil && st.Counters.Reports[dta.OpKeyWrite]+st.Counters.Reports[dta.OpKeyIncrement] == 2*keys
	}, tr)
	checkTranslatorMetrics(t, thttp)

	tr.Cmd.Process.Signal(syscall.SIGTERM)
	if err := tr.Cmd.Wait(); err != nil {
		t.Fatalf("translator exit after SIGTERM: %v\n%s", err, tr.Logs())
	}
	if !strings.Contains(tr.Logs(), `"msg":"stopped"`) {
		t.Fatalf("no shutdown log:\n%s", tr.Logs())
	}

	checkDaemonsAnswers(t, chttp)
}

// TestDaemons' keys and each one's Key-Write value.
const daemonsKeys = 3000

func daemonsValue(k uint32) []byte { return binary.BigEndian.AppendUint32(nil, k*7+1) }

// sendDaemonsReports sends a Key-Write and a Key-Increment report of each
// key from a reporter to report.
func sendDaemonsReports(t *testing.T, report string) {
	rep, err := reporter.New(reporter.Config{Translator: netip.MustParseAddrPort(report), Delivery: reporter.FireAndForget})
	if err != nil {
		t.Fatal(err)
	}
	const keys = daemonsKeys
	for k := uint32(1); k <= keys; k++ {
		if err := rep.KeyWrite(k, daemonsValue(k), 2); err != nil {
			t.Fatal(err)
		}
		if err := rep.KeyIncrement(k, uint64(k%5+1), 2); err != nil {
			t.Fatal(err)
		}
		if k%512 == 0 {
			rep.Flush()
		}
	}
	rep.Close()
}

// checkTranslatorMetrics checks the translator's /metrics at thttp.
func checkTranslatorMetrics(t *testing.T, thttp string) {
	resp, err := http.Get("http://" + thttp + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	metrics, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, m := range []string{`dtakit_translator_report_datagrams_total{primitive="keywrite"} 3000`, `dtakit_translator_reports_total{primitive="keywrite"} 3000`, "dtakit_translator_ready_instances 2", "dtakit_translator_dropped_total 0"} {
		if !strings.Contains(string(metrics), m) {
			t.Fatalf("/metrics lacks %q:\n%s", m, metrics)
		}
	}
}

// checkDaemonsAnswers: the collector's HTTP API at chttp answers every
// key as sent.
func checkDaemonsAnswers(t *testing.T, chttp string) {
	const keys = daemonsKeys
	body := `{"keys": [`
	for k := 1; k <= keys; k++ {
		if k > 1 {
			body += ","
		}
		body += fmt.Sprint(k)
	}
	body += "]}"
	var kw, ki struct{ Results []daemon.KeyResult }
	for path, v := range map[string]any{"/v1/instances/0/keywrite": &kw, "/v1/instances/1/keyincrement": &ki} {
		resp, err := http.Post("http://"+chttp+path, "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		json.NewDecoder(resp.Body).Decode(v)
		resp.Body.Close()
	}
	if len(kw.Results) != keys || len(ki.Results) != keys {
		t.Fatalf("%d and %d results", len(kw.Results), len(ki.Results))
	}
	found := 0
	for i, r := range kw.Results {
		k := uint32(i + 1)
		if r.Status == "found" {
			if r.Data != hex.EncodeToString(daemonsValue(k)) {
				t.Fatalf("key %d: %+v", k, r)
			}
			found++
		}
		if c := ki.Results[i].Count; c < uint64(k%5+1) {
			t.Fatalf("key %d counted %d, sent %d", k, c, k%5+1)
		}
	}
	if found < keys*99/100 {
		t.Fatalf("%d of %d keys found", found, keys)
	}
}

// Bad configuration exits 2 and says what is wrong.
func TestBadConfig(t *testing.T) {
	bin := proctest.Build(t, ".", "dtatranslator")
	linger := filepath.Join(t.TempDir(), "linger.json")
	if err := os.WriteFile(linger, []byte(`{"collectors": ["127.0.0.1:4791"], "append_linger": "soon"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	pcLinger := filepath.Join(t.TempDir(), "pclinger.json")
	if err := os.WriteFile(pcLinger, []byte(`{"collectors": ["127.0.0.1:4791"], "postcard_linger": "0s"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	dead := filepath.Join(t.TempDir(), "dead.json")
	if err := os.WriteFile(dead, []byte(`{"collectors": ["127.0.0.1:4791"], "dead_after": "-1s"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	typo := filepath.Join(t.TempDir(), "typo.json")
	if err := os.WriteFile(typo, []byte("{\"collectors\": [\"127.0.0.1:4791\"],\n \"colectors\": []}"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{},
		{"-config", typo},
		{"-config", linger},
		{"-config", pcLinger},
		{"-config", dead},
		{"-collectors", "not-an-address"},
		{"-collectors", "127.0.0.1:4791", "-cm-port", "70000"},
		{"-config", "/nonexistent.json"},
	} {
		cmd := exec.Command(bin, args...)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		err := cmd.Run()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 2 || !strings.Contains(stderr.String(), "configuration") {
			t.Fatalf("%v: %v\n%s", args, err, stderr.String())
		}
		if len(args) == 2 && args[1] == typo && !strings.Contains(stderr.String(), typo+":2:2: json: unknown field") {
			t.Errorf("%v: the error does not name file, line and column:\n%s", args, stderr.String())
		}
	}
}

// TestThreads: dtatranslator runs one thread of Go code per shard (one
// by default), unless the GOMAXPROCS environment variable says otherwise.
func TestThreads(t *testing.T) {
	bin := proctest.Build(t, ".", "dtatranslator")
	dir := t.TempDir()
	for _, c := range []struct {
		config, env string
		want        int
	}{
		{`{}`, "", 1},
		{`{"shards": 3}`, "", 3},
		{`{"shards": 3}`, "2", 2},
	} {
		cfg := filepath.Join(dir, "t.json")
		if err := os.WriteFile(cfg, []byte(c.config), 0o600); err != nil {
			t.Fatal(err)
		}
		// Nobody answers at the collector's address: the translator logs
		// its threads before it connects.
		args := []string{"-config", cfg, "-collectors", "127.0.0.1:9", "-report", fmt.Sprintf("127.0.0.1:%d", proctest.FreePort(t, "udp"))}
		if got := proctest.Gomaxprocs(t, c.env, bin, args...); got != c.want {
			t.Errorf("%s, GOMAXPROCS=%q: gomaxprocs %d, want %d", c.config, c.env, got, c.want)
		}
	}
}
