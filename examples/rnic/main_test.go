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

// TestSoftware runs the program with both ends in software, as on a machine
// without a NIC, and checks what it found.
func TestSoftware(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "rnic")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	out, err := exec.Command(bin, "-addr", "127.0.0.1", "-software", "-keys", "500").CombinedOutput()
	if err != nil {
		t.Fatalf("%v:\n%s", err, out)
	}
	for _, want := range []string{"500 of 500 keys found", "500 of 500 paths", "500 of 500 entries read", "0 dropped"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}
