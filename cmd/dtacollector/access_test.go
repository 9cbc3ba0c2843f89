package main

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dtakit/dtakit/internal/test/proctest"
	"github.com/dtakit/dtakit/rocev2/cm"
	"github.com/dtakit/dtakit/translator"
)

// metric returns the value of the unlabelled metric name at base/metrics.
func metric(t *testing.T, base, name string) float64 {
	t.Helper()
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	for sc := bufio.NewScanner(strings.NewReader(string(b))); sc.Scan(); {
		var v float64
		if n, _ := fmt.Sscanf(sc.Text(), name+" %g", &v); n == 1 {
			return v
		}
	}
	t.Fatalf("no metric %s:\n%s", name, b)
	return 0
}

// reqFlood sends CM REQs that never get an RTU to the collector at dst,
// from 700 sockets on addr (each port holds one half-open connection: together more than the target's 1024 queue pairs), until
// stop is closed. It returns how many it sent.
func reqFlood(t *testing.T, addr netip.Addr, dst netip.AddrPort, port uint16, stop <-chan struct{}) func() int {
	t.Helper()
	var socks []*net.UDPConn
	for range 700 {
		uc, err := net.ListenUDP("udp", net.UDPAddrFromAddrPort(netip.AddrPortFrom(addr, 0)))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { uc.Close() })
		socks = append(socks, uc)
	}
	var sent atomic.Int64
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := uint32(1); ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			uc := socks[i%uint32(len(socks))]
			src := uc.LocalAddr().(*net.UDPAddr).AddrPort()
			m := &cm.ConnectRequest{LocalCommID: i, ServiceID: cm.ServiceID(port), LocalQPN: 0x100 + i&0xFFFF,
				StartingPSN: i & 0xFFFFFF, PKey: 0xFFFF, PathMTU: cm.MTU1024, MaxCMRetries: 15, RetryCount: 3}
			if err := m.SetIPPrivateData(cm.IPHeader{SrcPort: src.Port(), Src: src.Addr(), Dst: dst.Addr()}, nil); err != nil {
				panic(err)
			}
			mad, err := cm.AppendMAD(nil, cm.Header(uint64(i), cm.AttrREQ), m)
			if err != nil {
				panic(err)
			}
			pkt := cm.Packet(mad, 0)
			d, err := pkt.AppendDatagram(nil, src, dst)
			if err != nil {
				panic(err)
			}
			uc.WriteToUDPAddrPort(d, dst)
			sent.Add(1)
			if i%32 == 0 {
				time.Sleep(2 * time.Millisecond) // about 16 000 REQs a second
			}
		}
	}()
	return func() int { wg.Wait(); return int(sent.Load()) }
}

// TestTranslatorAllowlist runs dtacollector with translators 127.0.0.1
// and 127.0.0.3. A translator at 127.0.0.2 is refused and writes nothing;
// while REQ floods come from 127.0.0.4 (not allowed) and 127.0.0.3
// (allowed, never completing its connections), the translator at
// 127.0.0.1 connects and its reports are applied. Fails on the code before
// the allowlist: the field was unknown, the foreign translator connected,
// and the flood filled the target's 1024 queue pairs.
func TestTranslatorAllowlist(t *testing.T) {
	bin := build(t)
	roce := netip.MustParseAddrPort(fmt.Sprintf("127.0.0.1:%d", freePort(t, "udp")))
	web := fmt.Sprintf("127.0.0.1:%d", freePort(t, "tcp"))
	cmPort := 43000 + os.Getpid()%1000
	cfg := fmt.Sprintf(`{"addr": %q, "http": %q, "cm_port": %d, "translators": ["127.0.0.1", "127.0.0.3/32"],
		"instances": [{"primitive": "keywrite", "slots": 4096, "data_size": 4}]}`, roce, web, cmPort)
	d := startDaemon(t, bin, cfg, roce, web)

	// The foreign translator is refused.
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	foreign, err := translator.New(translator.Config{Local: netip.MustParseAddrPort("127.0.0.2:0"), ReportAddr: netip.MustParseAddrPort("127.0.0.2:0"),
		Collectors: []netip.AddrPort{roce}, CMPort: uint16(cmPort), CMTries: 2})
	if err != nil {
		t.Fatal(err)
	}
	if err := foreign.Start(ctx); !errors.Is(err, translator.ErrRejected) {
		t.Errorf("a translator at 127.0.0.2: Start returned %v, want %v", err, translator.ErrRejected)
	}
	for _, in := range foreign.Instances() {
		if in.Ready {
			t.Errorf("a translator at 127.0.0.2 has a ready instance: %+v", in)
		}
	}
	foreign.Close(0)
	if v := metric(t, d.base, "dtakit_collector_refused_peer_total"); v < 1 {
		t.Errorf("refused_peer %g after the foreign translator, want at least 1", v)
	}
	if v := metric(t, d.base, "dtakit_collector_connections_total"); v != 0 {
		t.Errorf("%g connections after the foreign translator, want 0", v)
	}

	// Floods from a foreign and an allowed address.
	stop := make(chan struct{})
	waitForeign := reqFlood(t, netip.MustParseAddr("127.0.0.4"), roce, uint16(cmPort), stop)
	waitAllowed := reqFlood(t, netip.MustParseAddr("127.0.0.3"), roce, uint16(cmPort), stop)
	time.Sleep(300 * time.Millisecond) // the flood is under way
	ctx2, cancel2 := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel2()
	tr, rep := startTranslator(t, ctx2, translator.Config{Collectors: []netip.AddrPort{roce}, CMPort: uint16(cmPort)})
	const keys = 500
	for k := uint32(1); k <= keys; k++ {
		rep.KeyWrite(k, binary.BigEndian.AppendUint32(nil, k*7), 2)
	}
	rep.Flush()
	closeReporter(t, rep) // every report confirmed applied, resends included
	proctest.WaitFor(t, "the reports translated", 5*time.Second, func() bool { return tr.Counters().Translated[1] == keys }, d.Proc)
	if err := tr.Close(5 * time.Second); err != nil {
		t.Errorf("translator close during the flood: %v", err)
	}
	close(stop)
	nForeign, nAllowed := waitForeign(), waitAllowed()
	if rc := rep.Counters(); rc.Lost != 0 {
		t.Errorf("reporter lost %d reports during the flood: %+v", rc.Lost, rc)
	}
	found := 0
	for k := uint32(1); k <= keys; k++ {
		var kw struct{ Status, Data string }
		getJSON(t, fmt.Sprintf("%s/v1/instances/0/keywrite?key=%d", d.base, k), &kw)
		if kw.Status == "found" && kw.Data == fmt.Sprintf("%08x", k*7) {
			found++
		}
	}
	if found != keys {
		t.Errorf("%d of %d keys found after the flood; translator %+v, instances %+v\n%s", found, keys, tr.Counters(), tr.Instances(), d.Logs())
	}
	refused, halfOpen := metric(t, d.base, "dtakit_collector_refused_peer_total"), metric(t, d.base, "dtakit_collector_half_open_total")
	t.Logf("flood: %d REQs from 127.0.0.4 (refused_peer %g), %d from 127.0.0.3 (half_open %g)", nForeign, refused, nAllowed, halfOpen)
	if refused < float64(nForeign)/2 || halfOpen < float64(nAllowed)/2 {
		t.Errorf("refused_peer %g of %d foreign REQs, half_open %g of %d allowed ones: want most of each counted", refused, nForeign, halfOpen, nAllowed)
	}
}

// TestHTTPToken: with a token configured, every request but /healthz
// without it gets 401. Fails on the code before, which had no token.
func TestHTTPToken(t *testing.T) {
	bin := build(t)
	roce := netip.MustParseAddrPort(fmt.Sprintf("127.0.0.1:%d", freePort(t, "udp")))
	web := fmt.Sprintf("127.0.0.1:%d", freePort(t, "tcp"))
	const token = "a-token-of-enough-length"
	tokenFile := filepath.Join(t.TempDir(), "token")
	os.WriteFile(tokenFile, []byte(token+"\n"), 0o600)
	cfg := fmt.Sprintf(`{"addr": %q, "http": %q, "cm_port": %d, "http_token_file": %q,
		"instances": [{"primitive": "keywrite", "slots": 64, "data_size": 4}]}`, roce, web, 44000+os.Getpid()%1000, tokenFile)
	d := startDaemon(t, bin, cfg, roce, web)
	for _, c := range []struct {
		method, path, token string
		want                int
	}{
		{"GET", "/v1/instances", "", http.StatusUnauthorized},
		{"GET", "/metrics", "", http.StatusUnauthorized},
		{"GET", "/v1/instances/0/keywrite?key=1", "wrong-token-of-enough-length", http.StatusUnauthorized},
		{"POST", "/v1/instances/0/keywrite", "", http.StatusUnauthorized},
		{"GET", "/healthz", "", http.StatusOK},
		{"GET", "/v1/instances", token, http.StatusOK},
		{"POST", "/v1/instances/0/keywrite", token, http.StatusOK},
	} {
		req, _ := http.NewRequest(c.method, d.base+c.path, strings.NewReader(`{"keys": [1, 2]}`))
		if c.token != "" {
			req.Header.Set("Authorization", "Bearer "+c.token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != c.want {
			t.Errorf("%s %s with token %q: %d, want %d", c.method, c.path, c.token, resp.StatusCode, c.want)
		}
		if c.want == http.StatusUnauthorized && !strings.HasPrefix(resp.Header.Get("WWW-Authenticate"), "Bearer") {
			t.Errorf("%s %s: 401 without a WWW-Authenticate: Bearer header", c.method, c.path)
		}
	}
}

// TestHTTPExposed: dtacollector asked to serve HTTP beyond loopback
// without a token and TLS exits 2 saying so; with -http-insecure it
// serves. Fails on the code before, which served 0.0.0.0 unprotected.
func TestHTTPExposed(t *testing.T) {
	bin := build(t)
	path := filepath.Join(t.TempDir(), "c.json")
	os.WriteFile(path, []byte(`{"instances": [{"primitive": "keywrite", "slots": 64, "data_size": 4}]}`), 0o600)
	roce := fmt.Sprintf("127.0.0.1:%d", freePort(t, "udp"))
	for _, addr := range []string{"0.0.0.0:0", ":0", "[::]:0"} {
		out, err := exec.Command(bin, "-config", path, "-addr", roce, "-http", addr).CombinedOutput()
		if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 2 || !strings.Contains(string(out), "beyond loopback needs a bearer token and TLS") {
			t.Errorf("-http %s: exit %v, output %s; want status 2 saying a token and TLS are needed", addr, err, out)
		}
	}
	p := proctest.Start(t, bin, "-config", path, "-addr", roce, "-http", "0.0.0.0:0", "-http-insecure")
	proctest.WaitFor(t, "serving with -http-insecure", 10*time.Second, func() bool { return strings.Contains(p.Logs(), `"msg":"serving"`) }, p)
	if !strings.Contains(p.Logs(), "without a bearer token or TLS (http_insecure)") {
		t.Errorf("-http-insecure on 0.0.0.0 logged no warning:\n%s", p.Logs())
	}
}
