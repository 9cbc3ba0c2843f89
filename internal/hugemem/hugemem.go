// Package hugemem allocates the memory behind a collector's regions: explicit
// 2 MiB hugepages when the system has them reserved, otherwise anonymous
// memory with transparent hugepages requested, otherwise (off Linux) the Go
// heap. Large DTA stores are read at random; hugepages spare each query a TLB
// miss on top of its cache miss.
package hugemem

import (
	"errors"
	"fmt"
)

// Kind says what backs a Mem.
type Kind int

const (
	// Hugetlb is memory from the reserved pool of explicit hugepages
	// (mmap with MAP_HUGETLB).
	Hugetlb Kind = iota + 1
	// Transparent is anonymous mmap'd memory advised to use transparent
	// hugepages (madvise MADV_HUGEPAGE); the kernel may or may not.
	Transparent
	// Heap is a Go byte slice, where mmap is not available.
	Heap
	// File is a shared mapping of a file (OpenFile): on hugetlbfs it is
	// made of hugepages, on tmpfs or a disk of ordinary pages. Its
	// contents outlive the process.
	File
)

func (k Kind) String() string {
	switch k {
	case Hugetlb:
		return "hugetlb"
	case Transparent:
		return "transparent-hugepages"
	case Heap:
		return "heap"
	case File:
		return "file"
	}
	return fmt.Sprintf("Kind(%d)", int(k))
}

// HugePageSize is the size of the explicit hugepages Alloc asks for.
const HugePageSize = 2 << 20

// ErrSize is wrapped by errors about the size asked of Alloc.
var ErrSize = errors.New("hugemem: invalid size")

// Mem is zeroed memory obtained by Alloc. Its bytes do not move, so their
// addresses can be handed to a NIC or written by a target.
type Mem struct {
	b    []byte
	full []byte // what was mapped, rounded up; nil for Heap
	kind Kind
}

// Bytes returns the memory; len is the size asked of Alloc.
func (m *Mem) Bytes() []byte { return m.b }

// Kind says what backs the memory.
func (m *Mem) Kind() Kind { return m.kind }

// Alloc returns size bytes of zeroed memory, from explicit hugepages when
// the system has enough free, else the best the platform offers.
func Alloc(size int) (*Mem, error) {
	if size <= 0 {
		return nil, fmt.Errorf("hugemem.Alloc: %w: %d bytes", ErrSize, size)
	}
	return alloc(size)
}

// ErrFile is wrapped by errors about a region file that cannot be used as
// asked (another size, not a regular file).
var ErrFile = errors.New("hugemem: unusable region file")

// OpenFile maps the file at path as size bytes of shared memory, creating
// it (zero-filled) when it does not exist, and reports whether it existed.
// An existing file must be exactly size bytes, rounded up to the file
// system's page size as OpenFile rounds it; its contents are kept, so a
// process that maps the same file after a restart, even after a kill -9,
// sees what was written. Close unmaps it and leaves the file.
func OpenFile(path string, size int) (m *Mem, existed bool, err error) {
	if size <= 0 {
		return nil, false, fmt.Errorf("hugemem.OpenFile: %w: %d bytes", ErrSize, size)
	}
	return openFile(path, size)
}

// Close releases the memory. The Mem and every slice of its bytes must not
// be used afterwards. Closing twice is an error.
func (m *Mem) Close() error {
	if m.kind == 0 {
		return errors.New("hugemem: Close of a closed Mem")
	}
	err := free(m)
	m.b, m.full, m.kind = nil, nil, 0
	return err
}
