package dtakit

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestGoVersion: the README asks for the Go go.mod asks for.
func TestGoVersion(t *testing.T) {
	mod, err := os.ReadFile("go.mod")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^go (\d+\.\d+)`).FindSubmatch(mod)
	if m == nil {
		t.Fatal("go.mod has no go line")
	}
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	r := regexp.MustCompile(`Go \((\d+\.\d+) or newer`).FindSubmatch(readme)
	if r == nil {
		t.Fatal(`README does not say "Go (X.Y or newer"`)
	}
	if string(r[1]) != string(m[1]) {
		t.Errorf("README asks for Go %s, go.mod for %s", r[1], m[1])
	}
}

// TestExamplesIndexed: examples/README.md names every example.
func TestExamplesIndexed(t *testing.T) {
	index, err := os.ReadFile(filepath.Join("examples", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	dirs, err := os.ReadDir("examples")
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range dirs {
		if _, err := os.Stat(filepath.Join("examples", d.Name(), "main.go")); err != nil {
			continue
		}
		if !strings.Contains(string(index), "("+d.Name()+"/)") {
			t.Errorf("examples/README.md does not link examples/%s", d.Name())
		}
	}
}
