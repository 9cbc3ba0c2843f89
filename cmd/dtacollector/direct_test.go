package main

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"testing"
	"time"

	"github.com/dtakit/dtakit/collector/cluster"
	"github.com/dtakit/dtakit/collector/daemon"
	"github.com/dtakit/dtakit/dart"
	"github.com/dtakit/dtakit/translator"
)

// TestDirect writes the same keys into two pairs of dtacollector processes:
// through a translator (every report writes its N copies), and in DART's
// mode (dart.Reporter: the reporting process writes one random copy per
// report itself). The two deployments answer every query the same.
func TestDirect(t *testing.T) {
	bin := build(t)
	cmPort := 44000 + os.Getpid()%1000
	const (
		keys  = directKeys
		n     = directCopies
		times = directTimes
	)
	viaTranslator, clT := startDirectPair(t, bin, cmPort, 21)
	direct, clD := startDirectPair(t, bin, cmPort, 23)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	tr, rep := startTranslator(t, ctx, translator.Config{Collectors: viaTranslator, CMPort: uint16(cmPort), RingSize: 8192})
	// Nothing is lost on loopback, so a retransmission is a timeout that
	// came before the collector process was scheduled to answer: with
	// both cores busy that takes longer than the 10 ms default floor, and
	// each such timeout resends the whole window. A floor of TCP's
	// minimum RTO (200 ms) keeps the retransmission bound below about
	// what DART sends, not about the scheduler.
	d, err := dart.New(translator.Config{Collectors: direct, CMPort: uint16(cmPort), AckTimeout: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if err := d.KeyWriteCopy(1, kwValue(1), n, n); !errors.Is(err, translator.ErrReport) {
		t.Fatalf("copy %d of %d: %v", n, n, err)
	}
	if err := d.KeyWrite(1, []byte{1, 2, 3}, n); !errors.Is(err, translator.ErrReport) {
		t.Fatalf("3 bytes into 8-byte slots: %v", err)
	}

	ks := make([]uint32, keys)
	busy := 0
	for i := range ks {
		k := uint32(i)*2654435761 + 99
		ks[i] = k
		if err := rep.KeyWrite(k, kwValue(k), n); err != nil {
			t.Fatal(err)
		}
		for range times {
			busy += dartKeyWrite(t, d, k)
		}
	}
	closeReporter(t, rep)
	if err := tr.Close(10 * time.Second); err != nil {
		t.Fatal(err)
	}
	if err := d.Close(10 * time.Second); err != nil {
		t.Fatal(err)
	}
	checkDirectCounters(t, tr.Counters(), d.Counters(), busy)

	// Unreported keys too: both deployments answer empty.
	all := append(ks, 5, 6, 7)
	resT, err := clT.KeyWrite(ctx, all)
	if err != nil {
		t.Fatal(err)
	}
	resD, err := clD.KeyWrite(ctx, all)
	if err != nil {
		t.Fatal(err)
	}
	compareDeployments(t, all, resT, resD)
}

// TestDirect's keys, copies per key and DART-mode reports per key (its
// copies fill at random).
const (
	directKeys   = 2000
	directCopies = 3
	directTimes  = 4
)

// startDirectPair starts two collectors on 127.0.0.first and the next
// address and returns their RoCEv2 addresses and a cluster client of both.
func startDirectPair(t *testing.T, bin string, cmPort, first int) ([]netip.AddrPort, *cluster.Client) {
	var roces []netip.AddrPort
	var urls []string
	for i := range 2 {
		roce := netip.MustParseAddrPort(fmt.Sprintf("127.0.0.%d:4791", first+i))
		web := fmt.Sprintf("127.0.0.1:%d", freePort(t, "tcp"))
		cfg := fmt.Sprintf(`{"addr": %q, "http": %q, "cm_port": %d,
				"instances": [{"primitive": "keywrite", "slots": %d, "data_size": 8, "redundancy": %d}]}`,
			roce, web, cmPort, 1<<16, directCopies)
		p := startDaemon(t, bin, cfg, roce, web)
		roces, urls = append(roces, roce), append(urls, p.base)
	}
	cl, err := cluster.New(context.Background(), cluster.Config{Collectors: urls, RoCEv2: roces})
	if err != nil {
		t.Fatal(err)
	}
	return roces, cl
}

// dartKeyWrite writes one DART-mode report of k, waiting while the ring is
// full, and returns how many times it waited.
func dartKeyWrite(t *testing.T, d *dart.Reporter, k uint32) (busy int) {
	for {
		err := d.KeyWrite(k, kwValue(k), directCopies)
		if err == nil {
			return busy
		}
		if !errors.Is(err, translator.ErrBusy) {
			t.Fatal(err)
		}
		// The ring is full: the collectors' ACKs free it.
		busy++
		d.Flush()
		time.Sleep(100 * time.Microsecond)
	}
}

// checkDirectCounters checks the translator's and the DART reporter's
// counters.
func checkDirectCounters(t *testing.T, ct, cd translator.Counters, busy int) {
	const keys, n, times = directKeys, directCopies, directTimes
	if ct.Dropped != 0 {
		t.Errorf("translator: %d reports dropped, want 0", ct.Dropped)
	}
	if ct.Writes != keys*n {
		t.Errorf("translator: %d WRITEs, want %d (%d keys, %d copies each)", ct.Writes, keys*n, keys, n)
	}
	// One WRITE per DART report (the short value is counted as Rejected, not sent).
	if cd.Writes != keys*times {
		t.Errorf("direct: %d WRITEs, want one per DART report, %d", cd.Writes, keys*times)
	}
	if cd.Rejected != 1 {
		t.Errorf("direct: %d reports rejected, want 1 (the 3-byte value)", cd.Rejected)
	}
	if cd.Retransmits > cd.Packets/10 {
		t.Errorf("direct: %d packets retransmitted of %d sent, want at most a tenth (%d timeouts, %d sequence NAKs, %d stale ACKs)",
			cd.Retransmits, cd.Packets, cd.Timeouts, cd.SeqNAKs, cd.StaleACKs)
	}
	if t.Failed() {
		t.Fatalf("translator %+v\ndirect %+v", ct, cd)
	}
	t.Logf("direct: %d writes, %d busy waits, %d retransmits, %d timeouts", cd.Writes, busy, cd.Retransmits, cd.Timeouts)
}

// compareDeployments: votes differ (a DART key holds only the copies its
// reports drew), and the answers differ only where later keys overwrote
// copies: the slots are the same in both deployments and a translated
// report writes every copy, so such a key shows fewer than n votes via the
// translator.
func compareDeployments(t *testing.T, all []uint32, resT, resD []daemon.KeyResult) {
	const keys, n = directKeys, directCopies
	found, differ := 0, 0
	for i := range all {
		a, b := resT[i], resD[i]
		if a.Key != b.Key || a.Status != b.Status || a.Data != b.Data {
			differ++
			if a.Key != all[i] || b.Key != all[i] || a.Votes >= n {
				t.Fatalf("key %#x: via the translator %+v, direct %+v", all[i], a, b)
			}
		}
		if a.Status == "found" {
			found++
		}
	}
	if found < keys*99/100 || found > keys || differ > keys/200 {
		t.Fatalf("%d of %d keys found, %d answered differently", found, keys, differ)
	}
	t.Logf("%d of %d keys found, %d answered differently after overwrites", found, keys, differ)
}
