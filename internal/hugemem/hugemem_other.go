//go:build !linux

package hugemem

import "fmt"

func alloc(size int) (*Mem, error) {
	return &Mem{b: make([]byte, size), kind: Heap}, nil
}

func free(m *Mem) error { return nil }

func openFile(path string, size int) (*Mem, bool, error) {
	return nil, false, fmt.Errorf("hugemem.OpenFile: %w: file-backed regions need Linux", ErrFile)
}
