package p4

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dtakit/dtakit/p4/internal/p4gen"
)

// programs are the P4 programs of this directory, each compiled by the tests.
var programs = []string{"translator/translator.p4", "translator/postcard.p4", "reporter/reporter.p4", "translator/translator_t2.p4"}

// t2Compiles says whether TestCompile builds translator_t2.p4 (p4/README.md
// tells how it came to compile).
const t2Compiles = true

// t2Builds says whether this run compiles translator_t2.p4: it takes 4-5
// CPU minutes, so only where DTAKIT_P4_VARIANTS=1 (.ci/run's p4 step), not
// again in .ci/run's go test ./... .
func t2Builds() bool { return t2Compiles && os.Getenv("DTAKIT_P4_VARIANTS") == "1" }

// targetOf is the chip a program is written for: translator_t2.p4 is the
// Tofino-2 (T2NA) build, the others Tofino-1 (TNA).
func targetOf(prog string) string {
	if strings.HasSuffix(prog, "_t2.p4") {
		return "tofino2"
	}
	return "tofino"
}

// p4cDirs are where the open-source Tofino compiler may be (see its README),
// from this directory: ../shared/tools/p4c relative to the repository root,
// or to the directory holding it (a git worktree under a common parent).
var p4cDirs = []string{"../../shared/tools/p4c/bin", "../../../shared/tools/p4c/bin"}

// compilerOrSkip returns the compiler's bin directory; where it is absent
// the test skips saying so, or fails under DTAKIT_REQUIRE_TOOLS=1.
func compilerOrSkip(t *testing.T) string {
	t.Helper()
	for _, d := range p4cDirs {
		if _, err := os.Stat(filepath.Join(d, "p4c-tofino")); err == nil {
			return d
		}
	}
	if os.Getenv("DTAKIT_REQUIRE_TOOLS") == "1" {
		t.Fatalf("the P4 compiler is required (DTAKIT_REQUIRE_TOOLS=1) but absent from %v", p4cDirs)
	}
	t.Skipf("skipping: the P4 compiler is absent (looked in %v)", p4cDirs)
	return ""
}

// build is one compilation: a program, its target and preprocessor flags.
type build struct {
	prog   string   // relative to this directory
	target string   // "tofino" or "tofino2"
	defs   []string // -D flags for the variants of the generated constants
}

// compiled is what a build left: the compiler's and assembler's messages,
// the assembly, the BF-RT schema and context.json, and the stages each
// gress uses.
type compiled struct {
	log    string
	bfa    string
	bfrt   []byte
	ctx    []byte
	stages map[string]int
}

var reStage = regexp.MustCompile(`(?m)^stage (\d+) (ingress|egress):`)

// compileBuild runs the back end and assembler on b in a temporary
// directory; a failure, including a program that does not fit, fails t.
func compileBuild(t *testing.T, bin string, b build) compiled {
	t.Helper()
	dir := t.TempDir()
	tool := "p4c-" + b.target
	args := append([]string{b.prog, dir, "--bf-rt-schema", filepath.Join(dir, "bfrt.json")}, b.defs...)
	out, err := exec.Command(filepath.Join(bin, tool), args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", tool, strings.Join(args, " "), err, out)
	}
	name := strings.TrimSuffix(filepath.Base(b.prog), ".p4")
	c := compiled{log: string(out), stages: map[string]int{}}
	if _, err := os.Stat(filepath.Join(dir, "pipe", b.target+".bin")); err != nil {
		t.Fatalf("no %s.bin: %v", b.target, err)
	}
	bfa, err := os.ReadFile(filepath.Join(dir, "pipe", name+".bfa"))
	if err != nil {
		t.Fatal(err)
	}
	c.bfa = string(bfa)
	if c.bfrt, err = os.ReadFile(filepath.Join(dir, "bfrt.json")); err != nil {
		t.Fatal(err)
	}
	if c.ctx, err = os.ReadFile(filepath.Join(dir, "pipe", "context.json")); err != nil {
		t.Fatal(err)
	}
	for _, m := range reStage.FindAllStringSubmatch(c.bfa, -1) {
		n, _ := strconv.Atoi(m[1])
		c.stages[m[2]] = max(c.stages[m[2]], n+1)
	}
	return c
}

// TestCompile runs the front end (p4test-tna, Tofino-1 programs) and the
// Tofino back end and assembler (p4c-tofino, p4c-tofino2 for the T2NA
// program where t2Builds) on every program and checks what they produced:
// every parser select kept its match, every warning is one p4/README.md
// explains, the translators' BF-RT schemas are the ones the control plane
// is validated against (TestPlanMatchesSchema), and each gress keeps a
// stage free (headroom).
func TestCompile(t *testing.T) {
	if raceEnabled {
		t.Skip("skipping: the compile check runs without -race (same result, half the CI time)")
	}
	p4cBin := compilerOrSkip(t)
	for _, prog := range programs {
		t.Run(strings.TrimSuffix(prog, ".p4"), func(t *testing.T) {
			t.Parallel()
			target := targetOf(prog)
			if target == "tofino2" && !t2Builds() {
				t.Skip("skipping: translator_t2.p4 (Tofino-2) compiles where DTAKIT_P4_VARIANTS=1 (.ci/run's p4 step)")
			}
			if target == "tofino" { // p4test-tna defines __TARGET_TOFINO__=1
				if out, err := exec.Command(filepath.Join(p4cBin, "p4test-tna"), prog).CombinedOutput(); err != nil {
					t.Fatalf("p4test-tna %s: %v\n%s", prog, err, out)
				}
			}
			c := compileBuild(t, p4cBin, build{prog: prog, target: target})
			checkCompiled(t, prog, prog, c, headroom(target))
			name := strings.TrimSuffix(filepath.Base(prog), ".p4")
			if name != "reporter" {
				s, err := reduceBfrt(c.bfrt)
				if err != nil {
					t.Fatal(err)
				}
				j, err := json.MarshalIndent(s, "", " ")
				if err != nil {
					t.Fatal(err)
				}
				golden(t, "testdata/bfrt_"+name+".json", append(j, '\n'))
			}
		})
	}
}

// headroom is the most stages a gress of a default build may use: one of
// Tofino-1's 12, or of Tofino-2's 20, stays free for what comes next.
func headroom(target string) int {
	if target == "tofino2" {
		return 19
	}
	return 11
}

// checkCompiled checks a build's output and logs its resource use; a gress
// using more than maxStages stages fails t.
func checkCompiled(t *testing.T, name, prog string, c compiled, maxStages int) {
	t.Helper()
	if strings.Contains(c.log, "Can't match parser state") {
		t.Errorf("%s: the assembler could not match a parser state:\n%s", name, c.log)
	}
	if err := checkSelects(readFile(t, prog), c.bfa); err != nil {
		t.Errorf("%s: %v", name, err)
	}
	warnings, err := checkWarnings(c.log)
	if err != nil {
		t.Errorf("%s: %v", name, err)
	}
	if c.stages["ingress"] > maxStages || c.stages["egress"] > maxStages {
		t.Fatalf("%s: stages %v exceed %d", name, c.stages, maxStages)
	}
	mem, err := memoryUnits(c.ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s: %d ingress and %d egress stages (at most %d); memory units %v; warnings %v",
		name, c.stages["ingress"], c.stages["egress"], maxStages, mem, warnings)
}

var (
	reParser    = regexp.MustCompile(`parser (\w+)\(`)
	reState     = regexp.MustCompile(`state (\w+) \{`)
	reBfaParser = regexp.MustCompile(`(?m)^parser (ingress|egress):\n((?:[ \t].*\n|\n)*)`)
	reBfaState  = regexp.MustCompile(`^    (\S+):$`)
)

// checkSelects requires, for every parser state of src whose transition is
// a select, a state of the assembled parser for it (the state itself, its
// entry point or one of its splits) that matches on something: a state
// the back end left with only a "*" transition takes one branch for every
// packet.
func checkSelects(src, bfa string) error {
	matches := map[string]map[string]bool{} // gress -> bfa state -> has match:
	for _, p := range reBfaParser.FindAllStringSubmatch(bfa, -1) {
		states := map[string]bool{}
		cur := ""
		for _, line := range strings.Split(p[2], "\n") {
			if g := reBfaState.FindStringSubmatch(line); g != nil {
				cur = g[1]
				states[cur] = states[cur] || false
			} else if strings.HasPrefix(line, "      match:") && cur != "" {
				states[cur] = true
			}
		}
		matches[p[1]] = states
	}
	var missing []string
	for _, loc := range reParser.FindAllStringSubmatchIndex(src, -1) {
		name := src[loc[2]:loc[3]]
		gress := "ingress"
		if strings.HasPrefix(name, "Eg") {
			gress = "egress"
		}
		body := braceBody(src[loc[1]:])
		for _, st := range reState.FindAllStringSubmatchIndex(body, -1) {
			state := body[st[2]:st[3]]
			if !strings.Contains(braceBody(body[st[1]-1:]), "transition select") {
				continue
			}
			ok := false
			for s, m := range matches[gress] {
				s = strings.TrimPrefix(s, "$entry_point.")
				if m && (s == state || strings.HasPrefix(s, state+".$split")) {
					ok = true
				}
			}
			if !ok {
				missing = append(missing, gress+" "+state)
			}
		}
	}
	if missing != nil {
		return fmt.Errorf("parser states with a select but no match: in the assembly: %v", missing)
	}
	return nil
}

// braceBody returns the text inside the first {...} of s.
func braceBody(s string) string {
	start := strings.IndexByte(s, '{')
	if start < 0 {
		return ""
	}
	depth := 0
	for i := start; i < len(s); i++ {
		switch s[i] {
		case '{':
			depth++
		case '}':
			if depth--; depth == 0 {
				return s[start+1 : i]
			}
		}
	}
	return s[start+1:]
}

// explained are the warnings the compiler and assembler give for these
// programs, each explained in p4/README.md ("Compiler warnings"); any other
// fails TestCompile.
var explained = []struct {
	class string
	re    *regexp.Regexp
}{
	{"unused constant of the include", regexp.MustCompile(`^\[--Wwarn=unused\] warning: '(DTA|ROCE)_\w+' is unused$`)},
	{"parser metadata", regexp.MustCompile(`^\[--Wwarn=uninitialized-out-param\] warning: out parameter 'm' may be uninitialized when '(Ig|Eg)Parser' terminates$`)},
	{"RETH/AtomicETH in set_qp", regexp.MustCompile(`^\[--Wwarn=invalid-header\] warning: accessing a field of a potentially invalid header h\.(reth|atomic)$`)},
	{"meter bus", regexp.MustCompile(`^warning: meter table should not have bus:, will be ignored$`)},
	{"hash group merge", regexp.MustCompile(`^warning: (duplicate hash group \d+, will merge with|previous definition here|Input xbar hash group \d+ mergeable conflict in stage \d+|conflicting hash group definition here)$`)},
	{"exclusive instruction slots", regexp.MustCompile(`^warning: ((Conflicting instruction slot usage for non-exlusive table|and table) \S+ action \S+|Action bus byte \d+ set in table \S+ and table \S+)$`)},
	{"deparser occupancy", regexp.MustCompile(`^warning: Deparser field dictionary occupancy is too sparse\.$`)},
	{"counter per-flow enable", regexp.MustCompile(`^warning: can't find per_flow_enable param counter_pfe in format for tbl_drop\w*$`)},
	{"minimum parse depth", regexp.MustCompile(`^warning: Parser state min_parse_depth_accept_loop will be unrolled up to \d+ times due to @pragma max_loop_depth\.$`)},
	{"hash table ways", regexp.MustCompile(`^warning: exact hashtable \d+ does not exist in table \w+$`)},
}

var reWarning = regexp.MustCompile(`(?m)(\[--Wwarn=[\w-]+\] )?warning: .*$`)

// checkWarnings counts the log's warnings by class and returns an error
// naming those no class explains.
func checkWarnings(log string) (map[string]int, error) {
	counts := map[string]int{}
	var unknown []string
	for _, w := range reWarning.FindAllString(log, -1) {
		w = strings.TrimSpace(w)
		found := false
		for _, e := range explained {
			if e.re.MatchString(w) {
				counts[e.class]++
				found = true
				break
			}
		}
		if !found {
			unknown = append(unknown, w)
		}
	}
	if unknown != nil {
		return counts, fmt.Errorf("%d warnings p4/README.md does not explain:\n%s", len(unknown), strings.Join(unknown, "\n"))
	}
	return counts, nil
}

// memoryUnits sums the memory units (SRAM, TCAM, map RAM, ...) the back end
// allocated to the program's tables, from its context.json.
func memoryUnits(ctx []byte) (map[string]int, error) {
	var doc struct {
		Tables any `json:"tables"`
	}
	if err := json.Unmarshal(ctx, &doc); err != nil {
		return nil, err
	}
	mem := map[string]int{}
	var walk func(v any)
	walk = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			if typ, ok := v["memory_type"].(string); ok {
				if units, ok := v["memory_units_and_vpns"].([]any); ok {
					for _, u := range units {
						if m, ok := u.(map[string]any); ok {
							if l, ok := m["memory_units"].([]any); ok {
								mem[typ] += len(l)
							}
						}
					}
				}
			}
			for _, c := range v {
				walk(c)
			}
		case []any:
			for _, c := range v {
				walk(c)
			}
		}
	}
	walk(doc.Tables)
	return mem, nil
}

// TestCheckSelects shows checkSelects failing on an assembled parser whose
// select state lost its match (as the compiler before p4c PR #5753 left
// every one) and passing on one that kept it.
func TestCheckSelects(t *testing.T) {
	src := `parser IgParser(packet_in pkt) {
    state start { pkt.extract(h.ethernet); transition select(h.ethernet.ether_type) { 0x0800: ipv4; default: accept; } }
    state ipv4 { pkt.extract(h.ipv4); transition accept; }
}
`
	kept := "parser ingress:\n  states:\n    $entry_point.start:\n      match: [ half ]\n      0x0800:\n        next: ipv4\n    ipv4:\n      *:\n        next: end\n"
	lost := "parser ingress:\n  states:\n    $entry_point.start:\n      *:\n        next: ipv4\n    ipv4:\n      *:\n        next: end\n"
	if err := checkSelects(src, kept); err != nil {
		t.Errorf("kept match: %v", err)
	}
	if err := checkSelects(src, lost); err == nil || !strings.Contains(err.Error(), "ingress start") {
		t.Errorf("lost match: error %v, want one naming ingress start", err)
	}
	// Tofino-2 (translator_t2.p4): the entry point stalls for the port
	// metadata, then matches in a split of it.
	split := "parser ingress:\n  states:\n    $entry_point.start:\n      *:\n        next: $entry_point.start.$oob_stall_0\n" +
		"    $entry_point.start.$oob_stall_0:\n      *:\n        next: $entry_point.start.$split_0\n" +
		"    $entry_point.start.$split_0:\n      match: [ byte0, byte1 ]\n      0x0800:\n        next: ipv4\n    ipv4:\n      *:\n        next: end\n"
	if err := checkSelects(src, split); err != nil {
		t.Errorf("match in a split of the entry point: %v", err)
	}
	if err := checkSelects(src, strings.Replace(split, "      match: [ byte0, byte1 ]\n      0x0800:", "      *:", 1)); err == nil {
		t.Error("no match in the entry point's split: no error")
	}
}

// TestCompileVariants compiles translator.p4 for every other Key-Write data
// size of p4gen.KeyWriteDataChoices (-DDTA_KW_DATA_BYTES=D) and Append
// batch of p4gen.AppendBatchChoices (-DDTA_AP_BATCH=B), checks each output
// as TestCompile does, and requires each BF-RT schema to equal the default
// build's, against which TestPlanMatchesSchema validates the control plane,
// but for the held-entry registers, which must be exactly ap_e0..ap_e(B-2).
// It runs where DTAKIT_P4_VARIANTS=1 (.ci/run's p4 step): each build takes
// about as long as the default one.
func TestCompileVariants(t *testing.T) {
	if raceEnabled {
		t.Skip("skipping: the compile check runs without -race")
	}
	if os.Getenv("DTAKIT_P4_VARIANTS") != "1" {
		t.Skip("skipping: set DTAKIT_P4_VARIANTS=1 to compile every variant (.ci/run's p4 step does)")
	}
	p4cBin := compilerOrSkip(t)
	raw, err := os.ReadFile("testdata/bfrt_translator.json")
	if err != nil {
		t.Fatal(err)
	}
	var want schema
	if err := json.Unmarshal(raw, &want); err != nil {
		t.Fatal(err)
	}
	type variant struct {
		name  string
		def   string
		batch int
	}
	var vs []variant
	for _, d := range p4gen.KeyWriteDataChoices {
		if d != p4gen.KeyWriteData { // the default: TestCompile
			vs = append(vs, variant{fmt.Sprintf("kw_data_%d", d), fmt.Sprintf("-DDTA_KW_DATA_BYTES=%d", d), p4gen.AppendBatch})
		}
	}
	for _, b := range p4gen.AppendBatchChoices {
		if b != p4gen.AppendBatch {
			vs = append(vs, variant{fmt.Sprintf("ap_batch_%d", b), fmt.Sprintf("-DDTA_AP_BATCH=%d", b), b})
		}
	}
	for _, v := range vs {
		t.Run(v.name, func(t *testing.T) {
			t.Parallel()
			prog := "translator/translator.p4"
			start := time.Now()
			c := compileBuild(t, p4cBin, build{prog: prog, target: "tofino", defs: []string{v.def}})
			t.Logf("%s %s: ingress %d stages, egress %d, compiled in %v", prog, v.def, c.stages["ingress"], c.stages["egress"], time.Since(start).Round(time.Second))
			checkCompiled(t, fmt.Sprintf("%s (%s)", prog, v.def), prog, c, 12)
			got, err := reduceBfrt(c.bfrt)
			if err != nil {
				t.Fatal(err)
			}
			if held := heldRegisters(got); !slices.Equal(held, heldNames(v.batch)) {
				t.Errorf("%s: held-entry registers %v, want %v", v.def, held, heldNames(v.batch))
			}
			heldRegisters(&want)
			j, err := json.MarshalIndent(got, "", " ")
			if err != nil {
				t.Fatal(err)
			}
			w, err := json.MarshalIndent(&want, "", " ")
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(j, w) {
				t.Errorf("%s: BF-RT schema differs from testdata/bfrt_translator.json (held-entry registers aside):\n%s", v.def, j)
			}
		})
	}
}

// heldRegisters removes the Append held-entry registers (Ingress.ap_e<p>)
// from s and returns their names.
func heldRegisters(s *schema) []string {
	var held []string
	s.Tables = slices.DeleteFunc(s.Tables, func(t schemaTable) bool {
		if strings.HasPrefix(t.Name, "Ingress.ap_e") {
			held = append(held, t.Name)
			return true
		}
		return false
	})
	slices.Sort(held)
	return held
}

// heldNames are the held-entry registers of a batch-b build.
func heldNames(b int) []string {
	var n []string
	for p := range b - 1 {
		n = append(n, fmt.Sprintf("Ingress.ap_e%d", p))
	}
	slices.Sort(n)
	return n
}
