package keyincr

import (
	"errors"
	"sync"
	"testing"
)

// TestSnapshotCountsEveryAddOnce snapshots while another goroutine adds:
// every add is in one of the epochs, none in both.
func TestSnapshotCountsEveryAddOnce(t *testing.T) {
	l := Layout{Slots: 1 << 10}
	live, _ := NewStore(l, nil)
	epochs := make([]*Store, 5)
	var wg sync.WaitGroup
	const adds = 200000
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := range uint32(adds) {
			live.Add(i%300, 1, 2)
		}
	}()
	for i := range epochs {
		epochs[i], _ = NewStore(l, nil)
		if err := live.Snapshot(epochs[i]); err != nil {
			t.Fatal(err)
		}
	}
	wg.Wait()
	total := live.Total()
	for _, e := range epochs {
		total += e.Total()
	}
	if total != 2*adds {
		t.Fatalf("epochs hold %d adds, want %d", total, 2*adds)
	}
	other := Layout{Slots: 1 << 11}
	o, _ := NewStore(other, nil)
	if err := live.Snapshot(o); !errors.Is(err, ErrSnapshot) {
		t.Fatalf("snapshot into another layout: %v", err)
	}
	snap := epochs[0]
	if a := testing.AllocsPerRun(5, func() { live.Snapshot(snap) }); a != 0 {
		t.Fatalf("Snapshot allocates: %v", a)
	}
}
