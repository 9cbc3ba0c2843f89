package main

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dtakit/dtakit/verbs"
)

// TestNoDeviceSaysWhy runs the program as a user would where there is no
// RDMA device: it exits 2 and says so. (With a device, CI runs it in
// .ci/rxe-vm.)
func TestNoDeviceSaysWhy(t *testing.T) {
	if devs, err := verbs.Devices(); err == nil {
		t.Skipf("this machine has RDMA devices (%v)", devs)
	}
	bin := filepath.Join(t.TempDir(), "rnic")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	out, err := exec.Command(bin, "-addr", "127.0.0.1").CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 2 {
		t.Fatalf("exit %v, want status 2; output:\n%s", err, out)
	}
	if !strings.Contains(string(out), "no RDMA device") {
		t.Fatalf("output does not say why:\n%s", out)
	}
}
