package threads

import (
	"runtime"
	"testing"
)

func TestSet(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(0))
	t.Setenv("GOMAXPROCS", "")
	if got := Set(3); got != 3 || runtime.GOMAXPROCS(0) != 3 {
		t.Errorf("Set(3) = %d, GOMAXPROCS %d: want 3", got, runtime.GOMAXPROCS(0))
	}
	if got := Set(0); got != 3 {
		t.Errorf("Set(0) = %d: want GOMAXPROCS left at 3", got)
	}
	t.Setenv("GOMAXPROCS", "2")
	runtime.GOMAXPROCS(2)
	if got := Set(1); got != 2 {
		t.Errorf("Set(1) with GOMAXPROCS=2 in the environment = %d: want 2, the environment's", got)
	}
}
