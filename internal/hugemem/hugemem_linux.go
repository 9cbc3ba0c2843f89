//go:build linux

package hugemem

import (
	"fmt"

	"golang.org/x/sys/unix"
)

func alloc(size int) (*Mem, error) {
	rounded := (size + HugePageSize - 1) &^ (HugePageSize - 1)
	if rounded < size {
		return nil, fmt.Errorf("hugemem.Alloc: %w: %d bytes", ErrSize, size)
	}
	// MAP_HUGETLB fails at once (ENOMEM) when the pool has too few pages.
	b, err := unix.Mmap(-1, 0, rounded, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS|unix.MAP_HUGETLB|unix.MAP_POPULATE)
	if err == nil {
		return &Mem{b: b[:size:size], full: b, kind: Hugetlb}, nil
	}
	b, err = unix.Mmap(-1, 0, rounded, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		return nil, fmt.Errorf("hugemem.Alloc: mmap of %d bytes: %w", rounded, err)
	}
	// Advice only: a kernel without transparent hugepages still gives memory.
	_ = unix.Madvise(b, unix.MADV_HUGEPAGE)
	return &Mem{b: b[:size:size], full: b, kind: Transparent}, nil
}

func free(m *Mem) error {
	if err := unix.Munmap(m.full); err != nil {
		return fmt.Errorf("hugemem: munmap: %w", err)
	}
	return nil
}
