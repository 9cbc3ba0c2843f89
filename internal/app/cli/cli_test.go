package cli

import (
	"errors"
	"flag"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	for _, c := range []struct {
		args []string
		code int
		ok   bool
	}{
		{nil, 0, true},
		{[]string{"-x", "1"}, 0, true},
		{[]string{"-h"}, 0, false},
		{[]string{"-help"}, 0, false},
		{[]string{"-y"}, 2, false},
		{[]string{"-x", "one"}, 2, false},
	} {
		fs := flag.NewFlagSet("t", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		fs.Int("x", 0, "")
		if code, ok := Parse(fs, c.args); code != c.code || ok != c.ok {
			t.Errorf("%q: %d %v, want %d %v", c.args, code, ok, c.code, c.ok)
		}
	}
}

// TestCommands runs every command and example as a binary: -h prints the
// usage with the exit statuses and exits 0, a bad flag exits 2 (1 for
// int-collector, whose usage says so), and the README's table of exit
// statuses has a row per command naming every status its -h names.
func TestCommands(t *testing.T) {
	root := filepath.Join("..", "..", "..")
	dir := t.TempDir()
	build := exec.Command("go", "build", "-o", dir+string(filepath.Separator), "./cmd/...", "./examples/...")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	bins, _ := filepath.Glob(filepath.Join(dir, "*"))
	if len(bins) < 10 {
		t.Fatalf("built %d commands, want every cmd and example", len(bins))
	}
	status := regexp.MustCompile(`(?m)^  (\d)  `)
	for _, bin := range bins {
		name := filepath.Base(bin)
		if name == "gen" { // p4/gen is go generate's, not a user's
			continue
		}
		out, err := exec.Command(bin, "-h").CombinedOutput()
		if err != nil {
			t.Errorf("%s -h: %v\n%s", name, err, out)
		}
		if !strings.Contains(string(out), "usage: ") || !strings.Contains(string(out), "Exit status:") || strings.Contains(string(out), "help requested") {
			t.Errorf("%s -h: want the usage and exit statuses:\n%s", name, out)
		}
		want := 2
		if name == "int-collector" {
			want = 1
		}
		var ee *exec.ExitError
		if out, err := exec.Command(bin, "-no-such-flag").CombinedOutput(); !errors.As(err, &ee) || ee.ExitCode() != want {
			t.Errorf("%s -no-such-flag: %v, want exit status %d\n%s", name, err, want, out)
		}
		row := regexp.MustCompile("(?m)^\\| `" + regexp.QuoteMeta(name) + "` \\|(.*)$").FindSubmatch(readme)
		if row == nil {
			t.Errorf("README: no exit status row for %s", name)
			continue
		}
		for _, m := range status.FindAllSubmatch(out, -1) {
			if !strings.Contains(string(row[1]), " "+string(m[1])+" ") {
				t.Errorf("README's row for %s does not give exit status %s:\n%s", name, m[1], row[0])
			}
		}
	}
}
