package keywrite

import (
	"errors"
	"testing"
)

// TestDataSizeError: a data-size mismatch names both sizes, from every
// function that checks it.
func TestDataSizeError(t *testing.T) {
	l := Layout{Slots: 256, DataSize: 8}
	s, err := NewStore(l, nil)
	if err != nil {
		t.Fatal(err)
	}
	const want = "keywrite: data size does not match layout: 3 bytes of data, the layout's data size is 8"
	data := []byte{1, 2, 3}
	_, _, e1 := l.AppendWrites(nil, nil, 7, data, 2)
	_, e2 := l.AppendPayload(nil, 7, data)
	e3 := s.Put(7, data, 2)
	for i, err := range []error{e1, e2, e3} {
		if !errors.Is(err, ErrDataSize) || err.Error() != want {
			t.Errorf("%d: %v, want %s", i, err, want)
		}
	}
	if err := s.Put(7, make([]byte, 12), 2); err == nil || err.Error() != "keywrite: data size does not match layout: 12 bytes of data, the layout's data size is 8" {
		t.Errorf("12 bytes: %v", err)
	}
}
