package dtakit

import (
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

const module = "github.com/dtakit/dtakit"

// layer says where a package directory sits in the module's layering:
//
//	leaf     internal/<name>: plumbing that imports nothing of ours but other leaves
//	library  every package a program or another library may import
//	app      internal/app/...: what only programs (cmd/, examples/) use
//	test     internal/test/...: test harnesses, for test files only
//	program  cmd/... and examples/...
func layer(dir string) string {
	switch p := filepath.ToSlash(dir); {
	case p == "cmd" || strings.HasPrefix(p, "cmd/") || p == "examples" || strings.HasPrefix(p, "examples/"):
		return "program"
	case p == "internal/app" || strings.HasPrefix(p, "internal/app/"):
		return "app"
	case p == "internal/test" || strings.HasPrefix(p, "internal/test/"):
		return "test"
	case strings.HasPrefix(p, "internal/") && !strings.Contains(strings.TrimPrefix(p, "internal/"), "/"):
		return "leaf"
	}
	return "library"
}

// may reports whether a non-test file of a package in layer from may import
// a package in layer to.
func may(from, to string) bool {
	switch from {
	case "leaf":
		return to == "leaf"
	case "library":
		return to == "leaf" || to == "library"
	case "app":
		return to != "program" && to != "test"
	case "test":
		return to != "program"
	}
	return to != "test" // program
}

// TestLayers: nothing imports upward. Leaves import only leaves, libraries
// no application, harness or program, programs no test harness. Test files
// are free (they sit on top). Every .go file counts, whatever its build
// tags, so a cgo or platform file cannot hide an arrow.
func TestLayers(t *testing.T) {
	imports := map[string]map[string]bool{} // directory -> module-relative imports
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if n := d.Name(); path != "." && (n == "testdata" || strings.HasPrefix(n, ".") || strings.HasPrefix(n, "_")) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		dir := filepath.ToSlash(filepath.Dir(path))
		if imports[dir] == nil {
			imports[dir] = map[string]bool{}
		}
		for _, spec := range f.Imports {
			p, err := strconv.Unquote(spec.Path.Value)
			if err != nil {
				return err
			}
			if rel, ok := strings.CutPrefix(p, module+"/"); ok {
				imports[dir][rel] = true
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	var seen int
	for dir, deps := range imports {
		for dep := range deps {
			seen++
			if from, to := layer(dir), layer(dep); !may(from, to) {
				t.Errorf("%s (%s) imports %s (%s): nothing imports upward", dir, from, dep, to)
			}
		}
	}
	// The walk must have found the arrows it checks: a library on a leaf, a
	// program on an application package.
	for _, arrow := range [][2]string{{"keywrite", "internal/units"}, {"cmd/dtasim", "internal/app/sim"}} {
		if !imports[arrow[0]][arrow[1]] {
			t.Errorf("walk missed %s -> %s (%d arrows seen)", arrow[0], arrow[1], seen)
		}
	}
}

// TestLayersClassify pins the classification and the rule on cases the tree
// may not have today.
func TestLayersClassify(t *testing.T) {
	for _, c := range []struct {
		from, to string
		ok       bool
	}{
		{"internal/units", "internal/gf2", true},
		{"internal/units", "dta", false},
		{"internal/units", "internal/app/cli", false},
		{"keywrite", "internal/units", true},
		{"translator", "rocev2/target", true},
		{"translator", "internal/app/stream", false},
		{"p4", "p4/internal/p4gen", true},
		{"p4/internal/p4gen", "dta", true},
		{"collector", "internal/test/proctest", false},
		{"collector", "cmd/dtacollector", false},
		{"internal/app/stream", "dta", true},
		{"internal/app/sim", "internal/test/proctest", false},
		{"internal/test/systest", "internal/app/stream", true},
		{"cmd/dtareport", "internal/app/stream", true},
		{"cmd/dtareport", "internal/test/proctest", false},
		{"examples/quickstart", "reporter", true},
	} {
		if got := may(layer(c.from), layer(c.to)); got != c.ok {
			t.Errorf("%s (%s) -> %s (%s): allowed %v, want %v", c.from, layer(c.from), c.to, layer(c.to), got, c.ok)
		}
	}
}
