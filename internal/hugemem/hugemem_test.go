package hugemem

import (
	"bufio"
	"errors"
	"os"
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
