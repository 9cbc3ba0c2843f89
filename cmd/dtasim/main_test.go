package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestCommand runs the built binary: it writes the CSV, SVG and PNG of the
// figures asked for, and refuses an unknown one with status 2.
func TestCommand(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "dtasim")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	out := filepath.Join(dir, "figs")
	if b, err := exec.Command(bin, "-quick", "-out", out, "-only", "keyincr-error,append-loss").CombinedOutput(); err != nil {
		t.Fatalf("dtasim: %v\n%s", err, b)
	}
	for _, name := range []string{"keyincr-error", "append-loss"} {
		for _, ext := range []string{".csv", ".svg", ".png"} {
			if fi, err := os.Stat(filepath.Join(out, name+ext)); err != nil || fi.Size() == 0 {
				t.Errorf("%s%s: %v", name, ext, err)
			}
		}
	}
	if csv, _ := os.ReadFile(filepath.Join(out, "append-loss.csv")); !strings.HasPrefix(string(csv), "# append-loss: ") || !strings.Contains(string(csv), "E=512 measured,measured,") {
		t.Errorf("append-loss.csv:\n%.300s", csv)
	}
	b, err := exec.Command(bin, "-only", "fig-99").CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 2 || !strings.Contains(string(b), "no figure") {
		t.Errorf("unknown figure: %v %s", err, b)
	}
	if b, err := exec.Command(bin, "-list").Output(); err != nil || strings.Count(string(b), "\n") != 6 {
		t.Errorf("-list: %v\n%s", err, b)
	}
}
