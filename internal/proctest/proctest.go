// Package proctest helps tests that run dtakit's programs as separate OS
// processes: it builds them and finds free loopback ports.
package proctest

import (
	"net"
	"os/exec"
	"path/filepath"
	"testing"
)

// Build compiles the main package pkg (a path as go build takes it) into
// the test's temporary directory and returns the binary.
func Build(t testing.TB, pkg, name string) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), name)
	if out, err := exec.Command("go", "build", "-o", bin, pkg).CombinedOutput(); err != nil {
		t.Fatalf("build %s: %v\n%s", pkg, err, out)
	}
	return bin
}

// FreePort returns a loopback port ("udp" or "tcp") free a moment ago.
func FreePort(t testing.TB, network string) int {
	t.Helper()
	if network == "udp" {
		c, err := net.ListenPacket("udp4", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		return c.LocalAddr().(*net.UDPAddr).Port
	}
	l, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}
