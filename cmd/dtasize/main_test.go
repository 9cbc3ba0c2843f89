package main

import (
	"encoding/json"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dtakit/dtakit/appendlist"
	"github.com/dtakit/dtakit/keyincr"
	"github.com/dtakit/dtakit/keywrite"
	"github.com/dtakit/dtakit/postcard"
)

// TestCommand runs the built binary as a user does: the answers are the
// sizing APIs', printed and as JSON, and bad arguments exit 2 saying why.
func TestCommand(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "dtasize")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	runJSON := func(args ...string) Answer {
		t.Helper()
		out, err := exec.Command(bin, append(args, "-json")...).Output()
		if err != nil {
			t.Fatalf("dtasize %v: %v", args, err)
		}
		var a Answer
		if err := json.Unmarshal(out, &a); err != nil {
			t.Fatalf("dtasize %v: %v\n%s", args, err, out)
		}
		return a
	}
	kw, _ := keywrite.Size(keywrite.Workload{Keys: 10_000_000 - 1, DataSize: 20, Success: 0.99})
	if a := runJSON("keywrite", "-keys", "10M", "-success", "0.99", "-value", "20B"); a.Bytes != kw.Bytes || a.N != kw.N || a.Success != kw.Success || a.Why != kw.Why {
		t.Errorf("keywrite: %+v, API %+v", a, kw)
	}
	ki, _ := keyincr.Size(keyincr.Workload{Epsilon: 1e-5, Success: 0.99})
	if a := runJSON("keyincrement", "-reports", "100M", "-error", "1K"); a.Bytes != ki.Bytes || a.N != ki.N {
		t.Errorf("keyincrement: %+v, API %+v", a, ki)
	}
	pc, _ := postcard.Size(postcard.Workload{Flows: 999_999, Hops: 5, Values: 4096, Success: 0.99})
	if a := runJSON("postcard", "-flows", "1M", "-values", "4096"); a.Bytes != pc.Bytes || a.N != pc.N || a.Geometry["slot_bits"] != float64(pc.Layout.SlotBits) {
		t.Errorf("postcard: %+v, API %+v", a, pc)
	}
	al, _ := appendlist.Size(appendlist.Workload{Rate: 1e6, Lag: 10e6, Lists: 64, EntrySize: 16, Batch: 4, Success: 0.999})
	if a := runJSON("append", "-rate", "1M", "-lag", "10ms", "-lists", "64", "-entry", "16B", "-batch", "4", "-success", "0.999"); a.Bytes != al.Bytes || a.Geometry["entries"] != float64(al.Layout.Entries) {
		t.Errorf("append: %+v, API %+v", a, al)
	}
	out, err := exec.Command(bin, "keywrite", "-keys", "10M", "-value", "20B").Output()
	if err != nil || !strings.HasPrefix(string(out), "keywrite: 4 GiB, success") || !strings.Contains(string(out), "N=3") {
		t.Errorf("human-readable: %v\n%s", err, out)
	}
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{nil, 2, "usage"},
		{[]string{"keyread"}, 2, "unknown primitive"},
		{[]string{"keywrite", "-keys", "ten"}, 2, "invalid"},
		{[]string{"keywrite", "-keys", "10M"}, 2, "-value is required"},
		{[]string{"keywrite", "-keys", "10M", "-value", "6B"}, 2, "data size"},
		{[]string{"keyincrement", "-epsilon", "1e-12", "-success", "0.9999999"}, 1, "cannot size"},
		{[]string{"postcard", "-flows", "1M", "-values", "10", "-success", "1.5"}, 2, "success"},
	} {
		out, err := exec.Command(bin, c.args...).CombinedOutput()
		ee, ok := err.(*exec.ExitError)
		if !ok || ee.ExitCode() != c.code || !strings.Contains(string(out), c.want) {
			t.Errorf("dtasize %v: %v, %s; want exit %d mentioning %q", c.args, err, out, c.code, c.want)
		}
	}
}
