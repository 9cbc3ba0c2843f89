package p4

import (
	"fmt"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/dtakit/dtakit/dta/tofino"
)

// A tiny reader of the P4 sources: enough to find every Hash instance, its
// CRC and the field lists it hashes, and the widths of header fields, so the
// tests evaluate the programs' own text with the dta/tofino model.

type p4Hash struct {
	width  int
	algo   string // HashAlgorithm_t name
	macro  string // DTA_CRC_* for CUSTOM
	lists  [][]string
	source string
}

var (
	reCRCPoly = regexp.MustCompile(`(?m)^#define (DTA_CRC\w*) CRCPolynomial<bit<(\d+)>>\((\d+)w0x([0-9A-F]+), (true|false), (true|false), (true|false), \d+w0x([0-9A-F]+), \d+w0x([0-9A-F]+)\)$`)
	reHash    = regexp.MustCompile(`Hash<bit<(\d+)>>\(HashAlgorithm_t\.(\w+)(?:, (\w+))?\) (\w+);`)
	reGet     = regexp.MustCompile(`(\w+)\.get\(\{([^}]*)\}\)`)
	reHeader  = regexp.MustCompile(`header (\w+) \{([^}]*)\}`)
	reField   = regexp.MustCompile(`bit<(\d+|\(\w+\*\d+\))> (\w+);`)
	reMember  = regexp.MustCompile(`(\w+_h) (\w+);`)
	reLocal   = regexp.MustCompile(`bit<(\d+)> (\w+) =`)
	reMeta    = regexp.MustCompile(`struct \w+_meta_t \{([^}]*)\}`)
)

func readFile(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// includeCRCs parses the CRCPolynomial macros of the generated include.
func includeCRCs(t *testing.T) map[string]tofino.CRC {
	t.Helper()
	src := readFile(t, "include/dta_constants.p4")
	m := map[string]tofino.CRC{}
	for _, g := range reCRCPoly.FindAllStringSubmatch(src, -1) {
		w, _ := strconv.Atoi(g[2])
		if g[3] != g[2] {
			t.Fatalf("%s: coefficient width %s, polynomial width %s", g[1], g[3], g[2])
		}
		if g[6] != "false" {
			t.Fatalf("%s: msb must be false (the model keeps the low bits)", g[1])
		}
		poly, _ := strconv.ParseUint(g[4], 16, 64)
		init, _ := strconv.ParseUint(g[8], 16, 64)
		xor, _ := strconv.ParseUint(g[9], 16, 64)
		m[g[1]] = tofino.CRC{Width: w, Poly: poly, Reversed: g[5] == "true", Extend: g[7] == "true", Init: init, XorOut: xor}
	}
	return m
}

// includeActive returns the include's definitions that hold for the
// default build: the #if/#elif DTA_X == N choices evaluated with each
// choice's default (its #ifndef definition), multi-line bodies joined.
func includeActive(t *testing.T) map[string]string {
	t.Helper()
	lines := strings.Split(strings.ReplaceAll(readFile(t, "include/dta_constants.p4"), "\\\n", " "), "\n")
	defs := map[string]string{}
	var active []bool // per open #if: whether its branch taken now is
	var taken []bool  // per open #if: whether a branch was taken
	on := func() bool { return !slices.Contains(active, false) }
	cond := func(c string) bool {
		var name string
		var v int
		if _, err := fmt.Sscanf(c, "%s == %d", &name, &v); err != nil {
			t.Fatalf("include: cannot evaluate #if %q", c)
		}
		d, err := strconv.Atoi(defs[name])
		return err == nil && d == v
	}
	for _, l := range lines {
		switch f := strings.Fields(l); {
		case len(f) == 0:
		case f[0] == "#ifndef":
			active, taken = append(active, true), append(taken, true)
		case f[0] == "#if":
			c := cond(strings.Join(f[1:], " "))
			active, taken = append(active, c), append(taken, c)
		case f[0] == "#elif":
			c := !taken[len(taken)-1] && cond(strings.Join(f[1:], " "))
			active[len(active)-1], taken[len(taken)-1] = c, taken[len(taken)-1] || c
		case f[0] == "#else":
			active[len(active)-1] = !taken[len(taken)-1]
		case f[0] == "#endif":
			active, taken = active[:len(active)-1], taken[:len(taken)-1]
		case f[0] == "#define" && on():
			name := strings.TrimSuffix(f[1], "(lidx)")
			body := strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(l), "#define "+f[1]))
			if i := strings.Index(body, " //"); i >= 0 && !strings.Contains(body[:i], "{") {
				body = strings.TrimSpace(body[:i])
			} else if strings.HasPrefix(body, "//") {
				body = ""
			}
			if _, ok := defs[name]; !ok {
				defs[name] = body
			}
		}
	}
	return defs
}

func includeDefines(t *testing.T) map[string]int {
	t.Helper()
	m := map[string]int{}
	for name, body := range includeActive(t) {
		if v, err := strconv.Atoi(body); err == nil {
			m[name] = v
		}
	}
	return m
}

// expandAppend substitutes the generated DTA_AP_* statement and field
// macros of the default build into src, as the preprocessor does.
func expandAppend(t *testing.T, src string) string {
	t.Helper()
	for name, body := range includeActive(t) {
		if _, err := strconv.Atoi(body); err == nil || !strings.HasPrefix(name, "DTA_AP_") {
			continue
		}
		src = regexp.MustCompile(`\b`+name+`(\(lidx\))?`).ReplaceAllLiteralString(src, body)
	}
	return src
}

type program struct {
	hashes  map[string]*p4Hash
	widths  map[string]int      // "h.bth.psn" or a local such as "key" -> bits
	headers map[string][]string // header type -> field names in order
	members map[string]string   // "bth" -> "bth_h"
}

func parseProgram(t *testing.T, name string) *program {
	t.Helper()
	src := expandAppend(t, readFile(t, name))
	defs := includeDefines(t)
	p := &program{hashes: map[string]*p4Hash{}, widths: map[string]int{}, headers: map[string][]string{}, members: map[string]string{}}
	for _, g := range reHash.FindAllStringSubmatch(src, -1) {
		w, _ := strconv.Atoi(g[1])
		if _, dup := p.hashes[g[4]]; dup {
			t.Fatalf("%s: hash %s declared twice", name, g[4])
		}
		p.hashes[g[4]] = &p4Hash{width: w, algo: g[2], macro: g[3], source: name}
	}
	for _, g := range reGet.FindAllStringSubmatch(src, -1) {
		h, ok := p.hashes[g[1]]
		if !ok {
			t.Fatalf("%s: %s.get of no declared Hash", name, g[1])
		}
		var fields []string
		for _, f := range strings.Split(g[2], ",") {
			fields = append(fields, strings.Join(strings.Fields(f), ""))
		}
		h.lists = append(h.lists, fields)
	}
	width := func(s string) int {
		if n, err := strconv.Atoi(s); err == nil {
			return n
		}
		var d string
		var k int
		if _, err := fmt.Sscanf(strings.NewReplacer("(", "", ")", "", "*", " ").Replace(s), "%s %d", &d, &k); err == nil {
			if v, ok := defs[d]; ok {
				return v * k
			}
		}
		t.Fatalf("%s: cannot read width %q", name, s)
		return 0
	}
	for _, g := range reHeader.FindAllStringSubmatch(src, -1) {
		for _, f := range reField.FindAllStringSubmatch(g[2], -1) {
			p.headers[g[1]] = append(p.headers[g[1]], f[2])
			p.widths[g[1]+"."+f[2]] = width(f[1])
		}
	}
	for _, g := range reMember.FindAllStringSubmatch(src, -1) {
		p.members[g[2]] = g[1]
	}
	for _, g := range reMeta.FindAllStringSubmatch(src, -1) {
		for _, f := range reField.FindAllStringSubmatch(g[1], -1) {
			p.widths["m."+f[2]] = width(f[1])
		}
	}
	for _, g := range reLocal.FindAllStringSubmatch(src, -1) {
		p.widths[g[2]], _ = strconv.Atoi(g[1])
	}
	return p
}

// fieldWidth returns the width of "h.x.f", "local" or "local[hi:lo]".
func (p *program) fieldWidth(f string) (base string, hi, lo int, err error) {
	base = f
	if i := strings.IndexByte(f, '['); i >= 0 {
		base = f[:i]
		if _, err := fmt.Sscanf(f[i:], "[%d:%d]", &hi, &lo); err != nil {
			return "", 0, 0, fmt.Errorf("slice %q", f)
		}
	}
	w, ok := p.widths[base]
	if parts := strings.Split(base, "."); len(parts) == 3 && parts[0] == "h" {
		w, ok = p.widths[p.members[parts[1]]+"."+parts[2]]
	}
	if !ok {
		return "", 0, 0, fmt.Errorf("unknown field %q", f)
	}
	if !strings.Contains(f, "[") {
		hi, lo = w-1, 0
	}
	if hi >= w || lo > hi {
		return "", 0, 0, fmt.Errorf("slice %q of a %d-bit field", f, w)
	}
	return base, hi, lo, nil
}

// sum hashes list with the Hash's CRC, taking each field's value from env
// (keyed by the field's base name), exactly as the P4 text lists them.
func (p *program) sum(t *testing.T, h *p4Hash, crcs map[string]tofino.CRC, list []string, env map[string]uint64) uint64 {
	t.Helper()
	var c tofino.CRC
	if h.algo == "CUSTOM" {
		var ok bool
		if c, ok = crcs[h.macro]; !ok {
			t.Fatalf("hash uses %q, not a CRC of the generated include", h.macro)
		}
	} else {
		var err error
		if c, err = tofino.Predefined(h.algo); err != nil {
			t.Fatal(err)
		}
	}
	hash, err := tofino.NewHash(h.width, c)
	if err != nil {
		t.Fatal(err)
	}
	var fl tofino.FieldList
	for _, f := range list {
		base, hi, lo, err := p.fieldWidth(f)
		if err != nil {
			t.Fatal(err)
		}
		v, ok := env[base]
		if !ok {
			t.Fatalf("no value for %s", base)
		}
		w := hi - lo + 1
		fl.Add(v>>lo&(1<<w-1), w)
	}
	s, err := hash.Sum(&fl)
	if err != nil {
		t.Fatal(err)
	}
	return s
}
