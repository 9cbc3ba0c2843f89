package daemon

import (
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// TestLoadConfigPosition: an error in a configuration's JSON names the
// file, line and column of what is wrong.
func TestLoadConfigPosition(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct{ name, json, want string }{
		{"comma", "{\"instances\": [\n  {\"primitive\": \"keywrite\", \"slots\": 1024,}\n]}\n", ":2:43: invalid character '}'"},
		{"type", "{\"instances\": [\n  {\"primitive\": \"keywrite\",\n   \"slots\": \"1024\"}\n]}\n", ":3:4: json: cannot unmarshal string"},
		{"unknown", "{\"instances\": [\n  {\"primitive\": \"keywrite\", \"slotz\": 1024}\n]}\n", `:2:29: json: unknown field "slotz"`},
		{"short", "{\"instances\": [\n  {\"primitive\": \"keywrite\"\n", ":3:1: unexpected EOF"},
		{"trailing", "{\"instances\": []}\n{}", ":2:1: more after"},
	} {
		path := filepath.Join(dir, c.name+".json")
		if err := os.WriteFile(path, []byte(c.json), 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := LoadConfig(path)
		if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), path+c.want) {
			t.Errorf("%s: %v, want %q", c.name, err, path+c.want)
		}
	}
}

// TestShards: "shards" is taken (default 1, whatever the cores) and
// checked.
func TestShards(t *testing.T) {
	base := Config{Instances: []Instance{{Primitive: "keywrite", Slots: 1024, DataSize: 4, Redundancy: 2}}}
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(4))
	c := base
	if err := c.withDefaults(); err != nil || c.Shards != 1 {
		t.Errorf("no shards, GOMAXPROCS 4: %d, %v; want 1", c.Shards, err)
	}
	for _, n := range []int{-1, 257} {
		c := base
		c.Shards = n
		if err := c.withDefaults(); !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), "shards") {
			t.Errorf("shards %d: %v, want ErrConfig naming shards", n, err)
		}
	}
}
