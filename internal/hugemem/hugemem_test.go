package hugemem

import (
	"bufio"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
)

// freeHugePages reads HugePages_Free from /proc/meminfo, or -1.
func freeHugePages(t *testing.T) int {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return -1
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if v, ok := strings.CutPrefix(s.Text(), "HugePages_Free:"); ok {
			n, err := strconv.Atoi(strings.TrimSpace(v))
			if err != nil {
				t.Fatalf("HugePages_Free: %v", err)
			}
			return n
		}
	}
	return -1
}

func TestAllocKindFollowsThePool(t *testing.T) {
	const size = 3<<20 + 5 // not a multiple of the hugepage size
	pages := freeHugePages(t)
	m, err := Alloc(size)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	want := Transparent
	switch {
	case runtime.GOOS != "linux":
		want = Heap
	case pages >= 2:
		want = Hugetlb
	}
	if m.Kind() != want {
		t.Errorf("Alloc(%d) with %d free hugepages gave %v, want %v", size, pages, m.Kind(), want)
	}
	t.Logf("%d free hugepages: %v", pages, m.Kind())
	b := m.Bytes()
	if len(b) != size || cap(b) != size {
		t.Fatalf("len %d cap %d, want %d", len(b), cap(b), size)
	}
	for i, x := range b {
		if x != 0 {
			t.Fatalf("byte %d = %d, want zeroed memory", i, x)
		}
	}
	b[0], b[size-1] = 1, 2 // writable end to end
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	if err := m.Close(); err == nil {
		t.Error("second Close succeeded")
	}
}

func TestAllocBadSize(t *testing.T) {
	for _, n := range []int{0, -1} {
		if _, err := Alloc(n); !errors.Is(err, ErrSize) {
			t.Errorf("Alloc(%d) error = %v, want ErrSize", n, err)
		}
	}
}

// TestOpenFileKeepsContents: what is written to a file-backed Mem is there
// when the file is mapped again, and a size mismatch is refused.
func TestOpenFileKeepsContents(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("file-backed regions need Linux")
	}
	path := filepath.Join(t.TempDir(), "region")
	m, existed, err := OpenFile(path, 10000)
	if err != nil || existed || m.Kind() != File || len(m.Bytes()) != 10000 {
		t.Fatalf("OpenFile: %v, existed %v, kind %v", err, existed, m.Kind())
	}
	copy(m.Bytes()[9990:], "persistent")
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	m, existed, err = OpenFile(path, 10000)
	if err != nil || !existed || string(m.Bytes()[9990:]) != "persistent" {
		t.Fatalf("reopened: %v, existed %v, tail %q", err, existed, m.Bytes()[9990:])
	}
	m.Close()
	if _, _, err := OpenFile(path, 100000); !errors.Is(err, ErrFile) {
		t.Fatalf("another size: %v, want ErrFile", err)
	}
}
