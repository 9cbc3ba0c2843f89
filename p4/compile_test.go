package p4

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// programs are the P4 programs of this directory, each compiled by the tests.
var programs = []string{"translator/translator.p4", "translator/postcard.p4", "reporter/reporter.p4"}

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

var reStage = regexp.MustCompile(`(?m)^stage (\d+) (ingress|egress):`)

// TestCompile runs the front end (p4test-tna) and the Tofino back end and
// assembler (p4c-tofino) on every program; either failing, including a
// program that does not fit Tofino-1's 12 stages, fails the test.
func TestCompile(t *testing.T) {
	if raceEnabled {
		t.Skip("skipping: the compile check runs without -race (same result, half the CI time)")
	}
	p4cBin := compilerOrSkip(t)
	for _, prog := range programs {
		t.Run(strings.TrimSuffix(prog, ".p4"), func(t *testing.T) {
			t.Parallel()
			if out, err := exec.Command(filepath.Join(p4cBin, "p4test-tna"), prog).CombinedOutput(); err != nil {
				t.Fatalf("p4test-tna %s: %v\n%s", prog, err, out)
			}
			dir := t.TempDir()
			if out, err := exec.Command(filepath.Join(p4cBin, "p4c-tofino"), prog, dir).CombinedOutput(); err != nil {
				t.Fatalf("p4c-tofino %s: %v\n%s", prog, err, out)
			}
			name := filepath.Base(prog[:len(prog)-len(".p4")])
			if _, err := os.Stat(filepath.Join(dir, "pipe", "tofino.bin")); err != nil {
				t.Fatalf("no tofino.bin: %v", err)
			}
			bfa, err := os.ReadFile(filepath.Join(dir, "pipe", name+".bfa"))
			if err != nil {
				t.Fatal(err)
			}
			stages := map[string]int{}
			for _, m := range reStage.FindAllStringSubmatch(string(bfa), -1) {
				n := 0
				for _, c := range m[1] {
					n = n*10 + int(c-'0')
				}
				stages[m[2]] = max(stages[m[2]], n+1)
			}
			if stages["ingress"] > 12 || stages["egress"] > 12 {
				t.Fatalf("stages %v exceed Tofino-1's 12", stages)
			}
			ctx, err := os.ReadFile(filepath.Join(dir, "pipe", "context.json"))
			if err != nil {
				t.Fatal(err)
			}
			mem, err := memoryUnits(ctx)
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%s: %d ingress and %d egress stages of 12; memory units %v", prog, stages["ingress"], stages["egress"], mem)
		})
	}
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
