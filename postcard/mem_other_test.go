//go:build !linux

package postcard

import "testing"

func bigRegion(tb testing.TB, n int) []byte { return make([]byte, n) }
