package daemon

import (
	"errors"
	"strings"
	"testing"

	_ "github.com/dtakit/dtakit/internal/test/keymax" // a fifth primitive, neither lister nor borrower of keys
)

// TestKeysFromByRole: keys_from is checked by the primitives' roles
// (primitive.KeyBorrower, primitive.KeyLister), not their names: with
// Key-Max registered, the errors still name exactly the built-in
// primitives that have each role, and a Key-Max instance has neither.
func TestKeysFromByRole(t *testing.T) {
	at := func(i int) *int { return &i }
	for name, tc := range map[string]struct {
		ins  []Instance
		want string
	}{
		"keys for keymax": {[]Instance{{Primitive: "keywrite"}, {Primitive: "keymax", KeysFrom: at(0)}},
			"instance 1 (keymax): keys_from is for keyincrement and postcard instances"},
		"keys from keymax": {[]Instance{{Primitive: "keymax"}, {Primitive: "postcard", KeysFrom: at(0)}},
			"instance 1: keys_from 0 names no keywrite instance"},
		"keys from itself": {[]Instance{{Primitive: "keyincrement", KeysFrom: at(0)}},
			"instance 0: keys_from 0 names no keywrite instance"},
		"out of range": {[]Instance{{Primitive: "postcard", KeysFrom: at(3)}},
			"keys_from 3 names no keywrite instance"},
		"good": {[]Instance{{Primitive: "KeyWrite"}, {Primitive: "keyincrement", KeysFrom: at(0)}, {Primitive: "postcard", KeysFrom: at(0)}}, ""},
	} {
		c := Config{Instances: tc.ins}
		err := c.withDefaults()
		if tc.want == "" {
			if err != nil {
				t.Errorf("%s: %v", name, err)
			}
			continue
		}
		if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want ErrConfig saying %q", name, err, tc.want)
		}
	}
}
