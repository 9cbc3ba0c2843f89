//go:build linux

package hugemem

import (
	"errors"
	"fmt"
	"os"

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

// hugetlbfsMagic is statfs's f_type of a hugetlbfs mount.
const hugetlbfsMagic = 0x958458f6

func openFile(path string, size int) (*Mem, bool, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, false, fmt.Errorf("hugemem.OpenFile: %w", err)
	}
	defer f.Close() // the mapping keeps the file's memory
	fi, err := f.Stat()
	if err != nil {
		return nil, false, fmt.Errorf("hugemem.OpenFile: %w", err)
	}
	if !fi.Mode().IsRegular() {
		return nil, false, fmt.Errorf("hugemem.OpenFile: %w: %s is not a regular file", ErrFile, path)
	}
	page := unix.Getpagesize()
	var st unix.Statfs_t
	if unix.Fstatfs(int(f.Fd()), &st) == nil && st.Type == hugetlbfsMagic {
		page = int(st.Bsize) // the mount's hugepage size
	}
	rounded := (size + page - 1) &^ (page - 1)
	existed := fi.Size() != 0
	switch {
	case existed && fi.Size() != int64(rounded):
		return nil, false, fmt.Errorf("hugemem.OpenFile: %w: %s holds %d bytes, the region needs %d", ErrFile, path, fi.Size(), rounded)
	case !existed:
		if err := f.Truncate(int64(rounded)); err != nil {
			return nil, false, fmt.Errorf("hugemem.OpenFile: %w", err)
		}
	}
	b, err := unix.Mmap(int(f.Fd()), 0, rounded, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_POPULATE)
	if err != nil {
		if errors.Is(err, unix.ENOMEM) {
			err = fmt.Errorf("%w (hugetlbfs needs free hugepages)", err)
		}
		return nil, false, fmt.Errorf("hugemem.OpenFile: mmap of %s: %w", path, err)
	}
	return &Mem{b: b[:size:size], full: b, kind: File}, existed, nil
}
