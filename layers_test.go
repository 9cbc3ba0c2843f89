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

// leaves are the utilities under internal/ that import nothing of ours but
// each other. Plumbing the libraries share that imports libraries (wire
// formats, say) sits beside them in internal/ and is a library.
var leaves = map[string]bool{
	"internal/units": true, "internal/gf2": true, "internal/hugemem": true, "internal/udpio": true,
	"internal/netguard": true, "internal/promname": true, "internal/jsonconf": true, "internal/httpguard": true,
	"internal/clock": true,
}

// layer says where a package directory sits in the module's layering:
//
//	leaf     one of leaves: imports nothing of ours but other leaves
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
	case leaves[p]:
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

// wire are the packages of the wire formats.
var wire = map[string]bool{"dta": true, "dta/tofino": true, "rocev2": true, "rocev2/cm": true}

// treeAllows reports whether package dir may import dep by the rules that
// keep the dependency graph a tree: wire packages import nothing of ours
// but wire packages (dta/tofino, rocev2 for rocev2/cm) and leaves; verbs
// knows no DTA, only leaves.
func treeAllows(dir, dep string) bool {
	switch {
	case wire[dir]:
		return wire[dep] || layer(dep) == "leaf"
	case dir == "verbs":
		return layer(dep) == "leaf"
	}
	return true
}

// TestLayers: nothing imports upward. Leaves import only leaves, libraries
// (internal/ plumbing that is not a leaf included) no application, harness
// or program, programs no test harness; and what in internal/ only
// programs or tests use sits in internal/app or internal/test. Test files
// are free (they sit on top). Every .go file counts, whatever its build
// tags, so a cgo or platform file cannot hide an arrow.
func TestLayers(t *testing.T) {
	imports, err := moduleImports(".")
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
			if !treeAllows(dir, dep) {
				t.Errorf("%s imports %s: wire packages import only wire packages and leaves, verbs only leaves", dir, dep)
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
	for leaf := range leaves {
		if _, ok := imports[leaf]; !ok {
			t.Errorf("leaf %s is not a package of the tree: update leaves", leaf)
		}
	}
	// The tree says who uses what: a package in internal/ that is neither a
	// leaf nor imported by a library is for programs or tests only, and
	// belongs in internal/app or internal/test.
	for _, dir := range unusedByLibraries(imports) {
		t.Errorf("%s is imported by no library: move it to internal/app (programs) or internal/test (tests), or list it among the leaves", dir)
	}
}

// moduleImports returns, for each package directory under root, the
// module-relative paths its non-test files import, whatever their build
// tags.
func moduleImports(root string) (map[string]map[string]bool, error) {
	imports := map[string]map[string]bool{}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if n := d.Name(); path != root && (n == "testdata" || strings.HasPrefix(n, ".") || strings.HasPrefix(n, "_")) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		return addImports(imports, path)
	})
	return imports, err
}

// addImports adds the module's packages file path imports to its
// directory's entry.
func addImports(imports map[string]map[string]bool, path string) error {
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
}

// unusedByLibraries returns the packages in internal/ that are not leaves,
// programs' or tests' and that no library imports.
func unusedByLibraries(imports map[string]map[string]bool) []string {
	usedByLibrary := map[string]bool{}
	for dir, deps := range imports {
		if layer(dir) == "library" {
			for dep := range deps {
				usedByLibrary[dep] = true
			}
		}
	}
	var unused []string
	for dir := range imports {
		if strings.HasPrefix(dir, "internal/") && layer(dir) == "library" && !usedByLibrary[dir] {
			unused = append(unused, dir)
		}
	}
	return unused
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
		{"internal/udpio", "internal/exactly", false},
		{"internal/exactly", "dta", true}, // shared by libraries, not a leaf
		{"internal/exactly", "internal/udpio", true},
		{"internal/exactly", "internal/app/stream", false},
		{"reporter", "internal/exactly", true},
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
	for _, c := range []struct {
		from, to string
		ok       bool
	}{
		{"dta", "dta/tofino", true},
		{"rocev2/cm", "rocev2", true},
		{"dta", "keywrite", false},
		{"rocev2", "translator", false},
		{"rocev2/rc", "translator", true}, // not a wire package: the layers decide
		{"verbs", "internal/units", true},
		{"verbs", "dta", false},
		{"verbs", "rocev2", false},
	} {
		if got := treeAllows(c.from, c.to); got != c.ok {
			t.Errorf("tree: %s -> %s: allowed %v, want %v", c.from, c.to, got, c.ok)
		}
	}
}
