package translator_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"net/netip"
	"testing"
	"time"

	"github.com/dtakit/dtakit/appendlist"
	"github.com/dtakit/dtakit/keyincr"
	"github.com/dtakit/dtakit/keywrite"
	"github.com/dtakit/dtakit/postcard"
	"github.com/dtakit/dtakit/reporter"
	"github.com/dtakit/dtakit/rocev2/target"
	"github.com/dtakit/dtakit/translator"
)

// TestWithCollector runs reporter, translator and the software collector on
// loopback, one instance of each primitive, and compares the collector's
// regions byte for byte with reference stores fed the same reports.
func TestWithCollector(t *testing.T) {
	kwl := keywrite.Layout{Slots: 1 << 12, DataSize: 4}
	kil := keyincr.Layout{Slots: 1 << 12}
	pcc, _ := postcard.NewCodec(postcard.Layout{Chunks: 1 << 12, Copies: 2})
	c := translator.StartCollector(t, kwl, kil, pcc, appendlist.Layout{Lists: 4, Entries: 1024, EntrySize: 4, Batch: 8, Markers: true})
	kw, ki, pc, ar := c.KW, c.KI, c.PC, c.AR
	ctx := context.Background()

	tr, err := translator.New(translator.Config{
		ReportAddr: netip.MustParseAddrPort("127.0.0.1:0"),
		Collectors: []netip.AddrPort{c.Addr()},
		// The reporter is paced on what the translator received, not on
		// acknowledgements: a collector starved by a busy machine (go
		// test ./... runs packages side by side) filled the default ring,
		// and these unsequenced reports were dropped.
		RingSize: 8192,
	})
	if err != nil {
		t.Fatal(err)
	}
	sctx, scancel := context.WithTimeout(ctx, 5*time.Second)
	defer scancel()
	if err := tr.Start(sctx); err != nil {
		t.Fatal(err)
	}
	if n := len(tr.Instances()); n != 4 {
		t.Fatalf("%d instances discovered, want 4", n)
	}
	rep, err := reporter.New(reporter.Config{Translator: tr.ReportAddr(), Delivery: reporter.FireAndForget})
	if err != nil {
		t.Fatal(err)
	}
	defer rep.Close()

	refKW, _ := keywrite.NewStore(kwl, nil)
	refKI, _ := keyincr.NewStore(kil, nil)
	refPC, _ := postcard.NewStore(pcc.Layout(), make([]byte, pcc.Layout().RegionSize()))
	cache, _ := postcard.NewCache(pcc.Layout(), translator.DefaultPostcardCache)
	const n = 2000
	sent := 0
	for k := range uint32(n) {
		d := binary.BigEndian.AppendUint32(nil, k+1)
		_ = rep.KeyWrite(k, d, 2)
		_ = refKW.Put(k, d, 2)
		_ = rep.KeyIncrement(k%50, uint64(k), 2)
		_ = refKI.Add(k%50, uint64(k), 2)
		_ = rep.Postcard(k/2, postcard.Hop(k%2)+1, 2, postcard.Value(k+1))
		refPostcard(cache, refPC, k/2, postcard.Hop(k%2)+1, postcard.Value(k+1))
		_ = rep.Append(k%4, d, false)
		sent += 4
		if k%8 == 7 {
			// Pace the reporter so loopback UDP drops nothing.
			_ = rep.Flush()
			waitReceived(t, tr, uint64(sent))
		}
	}
	if err := tr.Close(2 * time.Second); err != nil {
		t.Fatal(err)
	}
	cc := c.Counters() // orders this goroutine after the target's writes
	tc := tr.Counters()
	// Retransmissions may happen on a loaded machine (a 10 ms ACK timeout);
	// the regions below must match all the same: a resent FETCH_ADD is not
	// applied twice.
	if tc.Dropped != 0 || tc.Lost != 0 || tc.EncodeErrors != 0 || cc.NAKAccess != 0 || cc.NAKInvalid != 0 || cc.BadICRC != 0 {
		t.Errorf("translator %+v\ntarget %+v", tc, cc)
	}
	t.Logf("%d packets, %d retransmitted", tc.Packets, tc.Retransmits)
	checkDatagrams(t, tc, cc)
	if !bytes.Equal(kw.Region(), refKW.Region()) {
		t.Error("key-write region differs from the reference store")
	}
	if !bytes.Equal(ki.Region(), refKI.Region()) {
		t.Error("key-increment region differs from the reference store")
	}
	if !bytes.Equal(pc.Region(), refPC.Region()) {
		t.Error("postcarding region differs from the reference store")
	}
	checkLists(t, ar, n/4)
}

func reports(c translator.Counters) uint64 {
	return c.Reports[1] + c.Reports[2] + c.Reports[3] + c.Reports[4]
}

// refPostcard applies a postcard of path length 2 to the reference cache
// and store as the translator does.
func refPostcard(cache *postcard.Cache, pcs *postcard.Store, key uint32, hop postcard.Hop, v postcard.Value) {
	chunks, _ := cache.Insert(nil, key, hop, 2, v)
	for i := range chunks {
		for _, w := range cache.Codec().AppendWrites(nil, &chunks[i]) {
			_ = pcs.Apply(w)
		}
	}
}

// waitReceived waits until tr has received n reports, 5 s at most.
func waitReceived(t *testing.T, tr *translator.Translator, n uint64) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for reports(tr.Counters()) < n {
		if time.Now().After(deadline) {
			t.Fatalf("translator received %d of %d reports", reports(tr.Counters()), n)
		}
		time.Sleep(100 * time.Microsecond)
	}
}

// checkDatagrams checks each socket's datagram counts: every report in
// (fire-and-forget: no ack out), every RDMA packet out and in at the
// target, and what the target sent (its ACKs and atomic ACKs at least)
// back in.
func checkDatagrams(t *testing.T, tc translator.Counters, cc target.Counters) {
	t.Helper()
	if tc.ReportDatagramsIn != reports(tc) || tc.ReportDatagramsOut != 0 ||
		tc.RDMADatagramsOut < tc.Packets+tc.Retransmits || cc.Frames > tc.RDMADatagramsOut || cc.Frames < tc.Packets ||
		cc.DatagramsSent < cc.ACKs+cc.AtomicACKs || tc.RDMADatagramsIn > cc.DatagramsSent || tc.RDMADatagramsIn < tc.AtomicACKs || tc.AtomicACKs == 0 {
		t.Errorf("datagrams: translator's report socket %d in, %d out (%d reports); its RoCEv2 socket %d out (%d packets, %d retransmitted), %d in (%d atomic ACKs); the target %d in, %d out (%d ACKs, %d atomic ACKs)",
			tc.ReportDatagramsIn, tc.ReportDatagramsOut, reports(tc), tc.RDMADatagramsOut, tc.Packets, tc.Retransmits, tc.RDMADatagramsIn, tc.AtomicACKs, cc.Frames, cc.DatagramsSent, cc.ACKs, cc.AtomicACKs)
	}
}

// checkLists checks that each of ar's four lists holds its per entries in
// order.
func checkLists(t *testing.T, ar *appendlist.Store, per int) {
	t.Helper()
	for l := range uint32(4) {
		rd, _ := ar.Reader(l)
		buf := make([]byte, 4*1024)
		m, err := rd.Read(buf)
		if err != nil || m != per { // the last 4 flushed at Close
			t.Fatalf("list %d: %d entries, %v", l, m, err)
		}
		for i := range m {
			if got, want := binary.BigEndian.Uint32(buf[4*i:]), uint32(4*i)+l+1; got != want {
				t.Fatalf("list %d entry %d = %d, want %d", l, i, got, want)
			}
		}
	}
}
