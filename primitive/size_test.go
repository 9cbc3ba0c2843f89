package primitive_test

import (
	"errors"
	"testing"

	"github.com/dtakit/dtakit/primitive"
)

// TestCannotSize: a primitive's sizing error, made a CannotSize, is both
// its own error and ErrSizing, with its own message.
func TestCannotSize(t *testing.T) {
	own := errors.New("keywrite: cannot size: no slots reach 0.999999")
	err := primitive.CannotSize(own)
	if !errors.Is(err, own) || !errors.Is(err, primitive.ErrSizing) || err.Error() != own.Error() {
		t.Errorf("%v: Is own %v, Is ErrSizing %v", err, errors.Is(err, own), errors.Is(err, primitive.ErrSizing))
	}
	if errors.Is(own, primitive.ErrSizing) {
		t.Error("a bare error is ErrSizing")
	}
}
