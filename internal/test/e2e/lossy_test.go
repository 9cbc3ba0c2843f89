package e2e

import (
	"net/netip"
	"testing"
	"time"

	"github.com/dtakit/dtakit/rocev2/target"
	"github.com/dtakit/dtakit/translator"
)

// TestLossyRelay streams reports of all four primitives through a relay
// that drops, duplicates and delays (reorders) datagrams both ways, CM
// exchange included, and checks that the translator recovered every loss by
// retransmission (no reconnection, nothing lost or refused), that the
// target executed every packet exactly once (duplicates acknowledged, not
// re-applied: Key-Increment totals exact), and that every write the
// translator had acknowledged when Close returned nil is in the collector's
// memory: each region equals a reference store fed the same reports, byte
// for byte.
func TestLossyRelay(t *testing.T) {
	n := uint32(1600)
	if testing.Short() {
		n = 400
	}
	for _, tc := range []struct {
		name string
		f    faults
	}{
		{"drop", faults{Drop: 0.05}},
		{"duplicate", faults{Duplicate: 0.1}},
		{"reorder", faults{Delay: 0.05, MaxDelay: 3 * time.Millisecond}},
		{"corrupt", faults{Corrupt: 0.05}},
		{"all", faults{Drop: 0.03, Duplicate: 0.03, Delay: 0.03, MaxDelay: 3 * time.Millisecond, Corrupt: 0.02}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lossy(t, tc.f, n, 1)
		})
	}
}

func lossy(t *testing.T, f faults, n uint32, seed uint64) {
	g := newGeometry(t)
	s := serve(t, g, anyLoopback)
	defer s.close(t)
	r, err := newRelay(s.c.Addr(), seed)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	r.setFaults(toTarget, f)
	r.setFaults(toTranslator, f)
	tr := startTranslator(t, translator.Config{Collectors: []netip.AddrPort{r.Addr()}, RingSize: 4096})
	rep := newReporter(t, tr)
	defer rep.Close()
	m := newModel(t, g)
	sent := uint64(0)
	for k := range n {
		sent += uint64(step(t, rep, m, k, sendAll))
		if k%8 == 7 {
			waitReports(t, rep, tr, sent)
			waitApplied(t, s.c.Counters, tr)
		}
	}
	waitReports(t, rep, tr, sent)
	if err := tr.Close(10 * time.Second); err != nil {
		t.Fatalf("translator close (every packet acknowledged): %v", err)
	}
	m.flush()
	tc, cc, rc := tr.Counters(), s.c.Counters(), r.Counts()
	t.Logf("relay %+v", rc)
	t.Logf("translator: %d packets, %d retransmitted, %d timeouts, %d sequence NAKs (%d repeats), %d stale ACKs",
		tc.Packets, tc.Retransmits, tc.Timeouts, tc.SeqNAKs, tc.DupNAKs, tc.StaleACKs)
	t.Logf("target: %d frames, %d duplicates, %d out of order, %d sequence NAKs, %d ACKs", cc.Frames, cc.Duplicates, cc.OutOfOrder, cc.NAKSequence, cc.ACKs+cc.AtomicACKs)
	checkLossyCounts(t, tc, cc)
	checkFaultsRecovered(t, f, tc, cc, rc)
	m.equal(t, s)
	checkKeyIncrementTotals(t, s, n)
}

// checkLossyCounts: nothing lost or refused on either side, and every
// packet the translator sent executed once.
func checkLossyCounts(t *testing.T, tc translator.Counters, cc target.Counters) {
	if tc.Reconnects != 0 || tc.Lost != 0 || tc.Dropped != 0 || tc.NACKs != 0 || tc.RingFull != 0 ||
		tc.EncodeErrors != 0 || tc.FlushLost != 0 {
		t.Errorf("translator lost or refused something: %+v", tc)
	}
	// (The target's Unknown and the translator's BadRoCE are not checked: a
	// copy the relay delayed or duplicated may arrive after its QP is gone,
	// destroyed by Close's DREQ, or, for a REJ ending discovery, forgotten.)
	if cc.NAKAccess != 0 || cc.NAKInvalid != 0 || cc.Malformed != 0 {
		t.Errorf("target dropped or refused something: %+v", cc)
	}
	// Exactly once: every packet the translator sent (first time) was
	// executed once, whatever the relay did to it.
	if cc.Atomics != tc.FetchAdds {
		t.Errorf("target executed %d FETCH_ADDs, translator sent %d", cc.Atomics, tc.FetchAdds)
	}
	if cc.WritePackets != tc.Packets-tc.FetchAdds {
		t.Errorf("target applied %d WRITE packets, translator sent %d", cc.WritePackets, tc.Packets-tc.FetchAdds)
	}
}

// checkFaultsRecovered: the faults happened, and were recovered from.
func checkFaultsRecovered(t *testing.T, f faults, tc translator.Counters, cc target.Counters, rc relayCounts) {
	// As section 8.6 says.
	for d, name := range []string{"to target", "to translator"} {
		if f.Drop > 0 && rc.Dropped[d] == 0 || f.Duplicate > 0 && rc.Duplicated[d] == 0 || f.Delay > 0 && rc.Delayed[d] == 0 ||
			f.Corrupt > 0 && rc.Corrupted[d] == 0 {
			t.Errorf("relay %s: no fault injected: %+v", name, rc)
		}
	}
	if (f.Drop > 0 || f.Corrupt > 0) && tc.Retransmits == 0 {
		t.Error("datagrams dropped, none retransmitted")
	}
	if f.Duplicate > 0 && (cc.Duplicates == 0 || tc.StaleACKs == 0) {
		t.Errorf("datagrams duplicated, but %d duplicates at the target, %d stale ACKs at the translator", cc.Duplicates, tc.StaleACKs)
	}
	// A corrupted datagram fails its ICRC check and is dropped, counted,
	// never applied; the relay's own ICRC fixing is exact (no bad ICRC
	// without corruption).
	if (f.Corrupt > 0) != (cc.BadICRC > 0 && tc.BadICRC > 0) || (f.Corrupt == 0) != (cc.BadICRC == 0 && tc.BadICRC == 0) {
		t.Errorf("%d datagrams corrupted to the target, %d bad ICRCs there; %d to the translator, %d bad ICRCs there",
			rc.Corrupted[toTarget], cc.BadICRC, rc.Corrupted[toTranslator], tc.BadICRC)
	}
	if f.Delay > 0 && cc.NAKSequence == 0 {
		t.Error("datagrams reordered, no sequence NAK")
	}
}

// checkKeyIncrementTotals checks the Key-Increment totals of s after n
// steps.
func checkKeyIncrementTotals(t *testing.T, s *served, n uint32) {
	// Explicitly: keys 0..49 got every k+1 with
	// k%50 == key, n copies each (count-min can only overestimate with
	// collisions; with 50 keys in 4096 counters, exact).
	for key := range uint32(50) {
		want := uint64(0)
		for k := key; k < n; k += 50 {
			want += uint64(k) + 1
		}
		if got, _ := s.ki.Query(key, 2); got != want {
			t.Errorf("key-increment key %d total %d, want %d", key, got, want)
		}
	}
}
