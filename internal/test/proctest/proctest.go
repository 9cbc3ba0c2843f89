// Package proctest helps tests that run dtakit's programs as separate OS
// processes: it builds and starts them, keeps their logs, and finds free
// loopback ports.
package proctest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// Build compiles the main package pkg (a path as go build takes it) into
// the test's temporary directory and returns the binary.
//
// go test caches a passing result until the test's own inputs change; it
// does not know that the test runs pkg. Build stats every Go file of the
// module, which go test records, so that a change to any reruns the test.
func Build(t testing.TB, pkg, name string) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), name)
	if out, err := exec.Command("go", "build", "-o", bin, pkg).CombinedOutput(); err != nil {
		t.Fatalf("build %s: %v\n%s", pkg, err, out)
	}
	mod, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		t.Fatalf("go env GOMOD: %v", err)
	}
	if root := filepath.Dir(strings.TrimSpace(string(mod))); root != "." {
		err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
			switch {
			case err != nil:
			case d.IsDir() && path != root && strings.HasPrefix(d.Name(), "."):
				return filepath.SkipDir // .git
			case strings.HasSuffix(path, ".go"):
				_, err = os.Stat(path)
			}
			return err
		})
		if err != nil {
			t.Fatalf("stat the module's sources: %v", err)
		}
	}
	return bin
}

// FreePort returns a loopback port ("udp" or "tcp") free a moment ago,
// for a program to bind. It picks at random below the kernel's ephemeral
// range (ip_local_port_range), which every outgoing connection and every
// socket bound to port 0 draws from: a port freed there is soon taken
// again (a soak lost a collector to an HTTP client's connection that got
// its port first). Only another FreePort can race for one below it.
func FreePort(t testing.TB, network string) int {
	t.Helper()
	lo, hi := freeRange()
	for range 200 {
		if port, ok := bindable(network, lo+rand.IntN(hi-lo)); ok {
			return port
		}
	}
	port, ok := bindable(network, 0)
	if !ok {
		t.Fatalf("no free %s port on 127.0.0.1", network)
	}
	return port
}

// freeRange returns the ports FreePort draws from: from 10000 up to the
// start of the ephemeral range, or 10000-20000 when that starts lower or
// cannot be read.
func freeRange() (lo, hi int) {
	lo, hi = 10000, 20000
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return lo, hi
	}
	if f := strings.Fields(string(b)); len(f) == 2 {
		if start, err := strconv.Atoi(f[0]); err == nil && start > lo+1000 {
			hi = start
		}
	}
	return lo, hi
}

// bindable binds network's port on 127.0.0.1 (0: any) and frees it,
// returning the port it had.
func bindable(network string, port int) (int, bool) {
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	if network == "udp" {
		c, err := net.ListenPacket("udp4", addr)
		if err != nil {
			return 0, false
		}
		defer c.Close()
		return c.LocalAddr().(*net.UDPAddr).Port, true
	}
	l, err := net.Listen("tcp4", addr)
	if err != nil {
		return 0, false
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, true
}

// Proc is a program a test started; it is killed when the test ends.
type Proc struct {
	Cmd  *exec.Cmd
	logs logBuffer
}

// Start runs bin with args, its standard error kept for Logs.
func Start(t testing.TB, bin string, args ...string) *Proc {
	t.Helper()
	p := &Proc{Cmd: exec.Command(bin, args...)}
	p.Cmd.Stderr = &p.logs
	DieWithTest(p.Cmd)
	if err := p.Cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Cmd.Process.Kill(); p.Cmd.Wait() })
	return p
}

// Logs returns what the program wrote to standard error so far.
func (p *Proc) Logs() string { return p.logs.String() }

// WaitFor polls cond every 20 ms until it holds, and fails the test with
// the programs' logs when d passes first.
func WaitFor(t testing.TB, what string, d time.Duration, cond func() bool, procs ...*Proc) {
	t.Helper()
	for deadline := time.Now().Add(d); !cond(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			var s strings.Builder
			for _, p := range procs {
				s.WriteString(p.Logs())
			}
			t.Fatalf("%s: not after %v\n%s", what, d, s.String())
		}
	}
}

// logBuffer is a standard error read while the program writes it.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// GetJSON GETs url and decodes its JSON answer into v (v nil: the answer
// is only checked to be 200 OK).
func GetJSON(url string, v any) error {
	resp, err := http.Get(url)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s", url, resp.Status)
	}
	if v == nil {
		return nil
	}
	return json.NewDecoder(resp.Body).Decode(v)
}

// Gomaxprocs starts the daemon bin with args, its environment's
// GOMAXPROCS replaced by env's ("" for none), and returns the gomaxprocs
// its JSON log says once it says it; the daemon is then killed.
func Gomaxprocs(t testing.TB, env, bin string, args ...string) int {
	t.Helper()
	p := &Proc{Cmd: exec.Command(bin, args...)}
	p.Cmd.Stderr = &p.logs
	p.Cmd.Env = slices.DeleteFunc(os.Environ(), func(v string) bool { return strings.HasPrefix(v, "GOMAXPROCS=") })
	if env != "" {
		p.Cmd.Env = append(p.Cmd.Env, "GOMAXPROCS="+env)
	}
	DieWithTest(p.Cmd)
	if err := p.Cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { p.Cmd.Process.Kill(); p.Cmd.Wait() }()
	var n int
	WaitFor(t, "a log line with gomaxprocs", 10*time.Second, func() bool {
		for _, line := range strings.Split(p.Logs(), "\n") {
			var l struct{ Gomaxprocs int }
			if json.Unmarshal([]byte(line), &l) == nil && l.Gomaxprocs > 0 {
				n = l.Gomaxprocs
				return true
			}
		}
		return false
	}, p)
	return n
}
