package main

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// procKB returns a field of /proc/<pid>/status in kB (VmRSS, VmHWM).
func procKB(t *testing.T, pid int, field string) int {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Skipf("no /proc/%d/status: %v", pid, err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, field+":"); ok {
			n, err := strconv.Atoi(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")))
			if err != nil {
				t.Fatalf("%s: %q", field, l)
			}
			return n
		}
	}
	t.Fatalf("no %s in /proc/%d/status", field, pid)
	return 0
}

// keysBody returns {"keys": [...]} with n keys of ten digits.
func keysBody(n int) []byte {
	var b bytes.Buffer
	b.WriteString(`{"keys": [`)
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, "%d", 4000000000+uint32(i)*7)
	}
	b.WriteString("]}")
	return b.Bytes()
}

// TestBatchMemoryBounded sends dtacollector 16 clients at once, each
// posting two batch queries of max_batch_keys keys (answers read as they
// stream) and one 8 MiB body of keys (refused, 413). The daemon's peak
// RSS (VmHWM) grows by less than 150 MiB. Before the key limit, the
// concurrent bodies decoded whole and the answers buffered whole took it
// to gigabytes (one 8 MB POST alone: 36 to 611 MB).
func TestBatchMemoryBounded(t *testing.T) {
	bin := build(t)
	roce := netip.MustParseAddrPort(fmt.Sprintf("127.0.0.1:%d", freePort(t, "udp")))
	web := fmt.Sprintf("127.0.0.1:%d", freePort(t, "tcp"))
	cfg := fmt.Sprintf(`{"addr": %q, "http": %q, "cm_port": %d,
		"instances": [{"primitive": "keywrite", "slots": 65536, "data_size": 4}]}`, roce, web, 47000+os.Getpid()%1000)
	d := startDaemon(t, bin, cfg, roce, web)
	pid := d.Cmd.Process.Pid
	url := d.base + "/v1/instances/0/keywrite"
	small := keysBody(10)
	if resp, err := http.Post(url, "application/json", bytes.NewReader(small)); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("a small batch: %v %v", resp, err)
	}
	rss0, hwm0 := procKB(t, pid, "VmRSS"), procKB(t, pid, "VmHWM")

	maximal := keysBody(65536) // the default max_batch_keys
	huge := keysBody(8 << 20 / 11)
	tooMany := keysBody(65537)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var errs []string
	fail := func(format string, a ...any) {
		mu.Lock()
		defer mu.Unlock()
		if len(errs) < 10 {
			errs = append(errs, fmt.Sprintf(format, a...))
		}
	}
	for c := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i, body := range [][]byte{maximal, huge, maximal} {
				resp, err := http.Post(url, "application/json", bytes.NewReader(body))
				if err != nil {
					fail("client %d request %d: %v", c, i, err)
					return
				}
				n, _ := io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				want := http.StatusOK
				if i == 1 {
					want = http.StatusRequestEntityTooLarge
				}
				if resp.StatusCode != want {
					fail("client %d request %d (%d bytes): %s, want %d", c, i, len(body), resp.Status, want)
				}
				if want == http.StatusOK && n < 65536*20 {
					fail("client %d request %d: answer of %d bytes for 65536 keys", c, i, n)
				}
			}
		}()
	}
	wg.Wait()
	for _, e := range errs {
		t.Error(e)
	}
	rss1, hwm1 := procKB(t, pid, "VmRSS"), procKB(t, pid, "VmHWM")
	t.Logf("VmRSS %d -> %d kB, VmHWM %d -> %d kB (+%d kB)", rss0, rss1, hwm0, hwm1, hwm1-hwm0)
	if grew := hwm1 - hwm0; grew > 150<<10 {
		t.Errorf("peak RSS grew by %d kB under 16 concurrent maximal clients, want under %d kB", grew, 150<<10)
	}

	// One key over the limit, to a query or an export: 413, and the
	// message names the limit.
	for _, u := range []string{url, d.base + "/v1/export"} {
		resp, err := http.Post(u, "application/json", bytes.NewReader(tooMany))
		if err != nil {
			t.Fatal(err)
		}
		msg, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusRequestEntityTooLarge || !strings.Contains(string(msg), "at most 65536 keys (max_batch_keys)") {
			t.Errorf("%s, 65537 keys: %s %.200s, want 413 naming the limit", u, resp.Status, msg)
		}
	}
}
