package main

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dtakit/dtakit/dta"
	"github.com/dtakit/dtakit/internal/test/proctest"
	"github.com/dtakit/dtakit/reporter"
)

// TestReporterAllowlist runs dtatranslator taking reports from 127.0.0.1
// only: a Key-Write report from 127.0.0.2 is counted
// (refused_source) and not applied, one from 127.0.0.1 is. Fails on the
// code before the allowlist, which applied both.
func TestReporterAllowlist(t *testing.T) {
	tbin := proctest.Build(t, ".", "dtatranslator")
	cbin := proctest.Build(t, "../dtacollector", "dtacollector")
	cmPort := 46000 + os.Getpid()%1000
	roce := fmt.Sprintf("127.0.0.1:%d", proctest.FreePort(t, "udp"))
	report := netip.MustParseAddrPort(fmt.Sprintf("127.0.0.1:%d", proctest.FreePort(t, "udp")))
	thttp := fmt.Sprintf("127.0.0.1:%d", proctest.FreePort(t, "tcp"))
	chttp := fmt.Sprintf("127.0.0.1:%d", proctest.FreePort(t, "tcp"))
	ccfg := filepath.Join(t.TempDir(), "c.json")
	os.WriteFile(ccfg, []byte(fmt.Sprintf(`{"addr": %q, "http": %q, "cm_port": %d, "instances": [
		{"primitive": "keywrite", "slots": 1024, "data_size": 4}]}`, roce, chttp, cmPort)), 0o600)
	col := proctest.Start(t, cbin, "-config", ccfg)
	tr := proctest.Start(t, tbin, "-collectors", roce, "-cm-port", fmt.Sprint(cmPort), "-report", report.String(),
		"-reporters", "127.0.0.1", "-http", thttp)
	var st Status
	proctest.WaitFor(t, "translator connected", 20*time.Second, func() bool {
		return proctest.GetJSON("http://"+thttp+"/v1/translator", &st) == nil && len(st.Instances) == 1 && st.Instances[0].Ready
	}, tr, col)

	send := func(from string, key uint32, data string) {
		uc, err := net.ListenUDP("udp", net.UDPAddrFromAddrPort(netip.MustParseAddrPort(from+":0")))
		if err != nil {
			t.Fatal(err)
		}
		defer uc.Close()
		r := dta.Report{Header: dta.Header{Opcode: dta.OpKeyWrite}, KeyWrite: dta.KeyWrite{Redundancy: 2, Key: key, Data: []byte(data)}}
		if _, err := uc.WriteToUDPAddrPort(r.AppendTo(nil), report); err != nil {
			t.Fatal(err)
		}
	}
	send("127.0.0.2", 7, "EVIL")
	send("127.0.0.1", 8, "GOOD")
	proctest.WaitFor(t, "both reports seen", 5*time.Second, func() bool {
		return proctest.GetJSON("http://"+thttp+"/v1/translator", &st) == nil && st.Counters.RefusedSource+st.Counters.Reports[dta.OpKeyWrite] >= 2
	}, tr)
	if c := st.Counters; c.RefusedSource != 1 || c.Reports[dta.OpKeyWrite] != 1 {
		t.Errorf("refused_source %d, key-write reports %d; want 1 and 1", c.RefusedSource, c.Reports[dta.OpKeyWrite])
	}
	var good, evil struct{ Status, Data string }
	proctest.WaitFor(t, "key 8 written", 5*time.Second, func() bool {
		return proctest.GetJSON(fmt.Sprintf("http://%s/v1/instances/0/keywrite?key=8", chttp), &good) == nil && good.Status == "found"
	}, col)
	if err := proctest.GetJSON(fmt.Sprintf("http://%s/v1/instances/0/keywrite?key=7", chttp), &evil); err != nil || evil.Status == "found" {
		t.Errorf("key 7 from a refused reporter: %+v (%v), want not found", evil, err)
	}
	if m := metricLine(t, "http://"+thttp, "dtakit_translator_refused_source_total"); m != "1" {
		t.Errorf("dtakit_translator_refused_source_total %q, want 1", m)
	}
}

// metricLine returns the value of the unlabelled metric name at
// base/metrics, as written.
func metricLine(t *testing.T, base, name string) string {
	t.Helper()
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, name+" "); ok {
			return v
		}
	}
	t.Fatalf("no metric %s:\n%s", name, b)
	return ""
}

// TestHTTPGuard: dtatranslator refuses an HTTP address beyond loopback
// without a token and TLS (exit 2, saying so), and with a token answers
// 401 to a request without it. Fails on the code before (it served
// 0.0.0.0 unprotected and had no token).
func TestHTTPGuard(t *testing.T) {
	tbin := proctest.Build(t, ".", "dtatranslator")
	report := fmt.Sprintf("127.0.0.1:%d", proctest.FreePort(t, "udp"))
	out, err := exec.Command(tbin, "-collectors", "127.0.0.1:4791", "-report", report, "-http", "0.0.0.0:0").CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 2 || !strings.Contains(string(out), "beyond loopback needs a bearer token and TLS") {
		t.Errorf("-http 0.0.0.0:0: exit %v, output %s; want status 2 saying a token and TLS are needed", err, out)
	}
	const token = "a-token-of-enough-length"
	tokenFile := filepath.Join(t.TempDir(), "token")
	os.WriteFile(tokenFile, []byte(token), 0o600)
	thttp := fmt.Sprintf("127.0.0.1:%d", proctest.FreePort(t, "tcp"))
	tr := proctest.Start(t, tbin, "-collectors", "127.0.0.1:4791", "-report", report, "-http", thttp, "-http-token-file", tokenFile)
	proctest.WaitFor(t, "translator up", 10*time.Second, func() bool { return proctest.GetJSON("http://"+thttp+"/healthz", nil) == nil }, tr)
	for _, c := range []struct {
		path, token string
		want        int
	}{
		{"/metrics", "", http.StatusUnauthorized},
		{"/v1/translator", "", http.StatusUnauthorized},
		{"/v1/translator", "not-the-token-at-all-no", http.StatusUnauthorized},
		{"/v1/translator", token, http.StatusOK},
		{"/metrics", token, http.StatusOK},
	} {
		req, _ := http.NewRequest(http.MethodGet, "http://"+thttp+c.path, nil)
		if c.token != "" {
			req.Header.Set("Authorization", "Bearer "+c.token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != c.want {
			t.Errorf("GET %s with token %q: %d, want %d", c.path, c.token, resp.StatusCode, c.want)
		}
	}
}

// TestAckPort runs dtatranslator with -ack-port: a confirmed reporter
// taking acks on that port has all its reports acknowledged. Fails on the
// code before the flag, whose acks went to 40044 only (every report
// unconfirmed).
func TestAckPort(t *testing.T) {
	tbin := proctest.Build(t, ".", "dtatranslator")
	cbin := proctest.Build(t, "../dtacollector", "dtacollector")
	cmPort := 47000 + os.Getpid()%1000
	roce := fmt.Sprintf("127.0.0.1:%d", proctest.FreePort(t, "udp"))
	report := netip.MustParseAddrPort(fmt.Sprintf("127.0.0.1:%d", proctest.FreePort(t, "udp")))
	ackPort := uint16(proctest.FreePort(t, "udp"))
	thttp := fmt.Sprintf("127.0.0.1:%d", proctest.FreePort(t, "tcp"))
	ccfg := filepath.Join(t.TempDir(), "c.json")
	os.WriteFile(ccfg, []byte(fmt.Sprintf(`{"addr": %q, "cm_port": %d, "instances": [
		{"primitive": "keywrite", "slots": 1024, "data_size": 4}]}`, roce, cmPort)), 0o600)
	col := proctest.Start(t, cbin, "-config", ccfg)
	tr := proctest.Start(t, tbin, "-collectors", roce, "-cm-port", fmt.Sprint(cmPort), "-report", report.String(),
		"-ack-port", fmt.Sprint(ackPort), "-http", thttp)
	var st Status
	proctest.WaitFor(t, "translator connected", 20*time.Second, func() bool {
		return proctest.GetJSON("http://"+thttp+"/v1/translator", &st) == nil && len(st.Instances) == 1 && st.Instances[0].Ready
	}, tr, col)

	rep, err := reporter.New(reporter.Config{Translator: report, AckPort: ackPort})
	if err != nil {
		t.Fatal(err)
	}
	const n = 100
	for k := uint32(1); k <= n; k++ {
		if err := rep.KeyWrite(k, []byte("ABCD"), 2); err != nil {
			t.Fatal(err)
		}
	}
	if err := rep.Close(); err != nil {
		t.Fatal(err)
	}
	if c := rep.Counters(); c.Acks == 0 || c.Lost+c.Unconfirmed != 0 {
		t.Errorf("reporter on ack port %d: %d acks, %d lost, %d unconfirmed of %d; want acks and none lost or unconfirmed",
			ackPort, c.Acks, c.Lost, c.Unconfirmed, n)
	}
}
