package cpuprofile

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"testing"
)

// TestFlag: with -cpuprofile the file holds a profile (gzipped protocol
// buffers) once stop returns; without it stop does nothing; a file that
// cannot be created is an error.
func TestFlag(t *testing.T) {
	file := filepath.Join(t.TempDir(), "cpu.pprof")
	fs := flag.NewFlagSet("x", flag.ContinueOnError)
	start := Flag(fs)
	if err := fs.Parse([]string{"-cpuprofile", file}); err != nil {
		t.Fatal(err)
	}
	stop, err := start()
	if err != nil {
		t.Fatal(err)
	}
	stop(func(err error) { t.Fatal(err) })
	b, err := os.ReadFile(file)
	if err != nil || !bytes.HasPrefix(b, []byte{0x1f, 0x8b}) {
		t.Fatalf("profile file: %d bytes %x, %v; want a gzip stream", len(b), b[:min(len(b), 4)], err)
	}

	fs = flag.NewFlagSet("y", flag.ContinueOnError)
	start = Flag(fs)
	if err := fs.Parse(nil); err != nil {
		t.Fatal(err)
	}
	if stop, err = start(); err != nil {
		t.Fatalf("without the flag: %v", err)
	}
	stop(func(err error) { t.Errorf("without the flag: %v", err) })

	fs = flag.NewFlagSet("z", flag.ContinueOnError)
	start = Flag(fs)
	if err := fs.Parse([]string{"-cpuprofile", filepath.Join(t.TempDir(), "no", "such", "cpu.pprof")}); err != nil {
		t.Fatal(err)
	}
	if _, err := start(); err == nil {
		t.Error("a profile in a directory that does not exist: no error")
	}
}
