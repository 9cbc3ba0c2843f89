package translator

import (
	"bytes"
	"context"
	"encoding/binary"
	"net"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/dtakit/dtakit/appendlist"
	"github.com/dtakit/dtakit/dta"
	"github.com/dtakit/dtakit/internal/udpio"
	"github.com/dtakit/dtakit/keyincr"
	"github.com/dtakit/dtakit/keywrite"
	"github.com/dtakit/dtakit/postcard"
	"github.com/dtakit/dtakit/reporter"
)

// TestShardOrder runs a two-shard translator against the software
// collector with several reporters sending at once, and checks what
// docs/DTA-WIRE.md (Shards and order) promises: a key's reports from one
// reporter are applied in order (no key ends on an older value), Append
// entries are neither lost nor doubled and keep each reporter's order in
// their list, counters sum exactly, and a flow's postcards meet in one
// cache whichever shard read them. It also checks that both shards read
// reports and that reports were handed to their owner. In the wide run the
// reporters number their reports (32 bits) and take NACKs: the shard that
// reads a reporter's flow keeps its numbers whichever shard translates, so
// no number is taken for missing or doubled.
func TestShardOrder(t *testing.T) {
	t.Run("unsequenced", func(t *testing.T) { shardOrder(t, false) })
	t.Run("wide", func(t *testing.T) { shardOrder(t, true) })
}

// The workload of shardOrder: reporters send keys reports each of the
// four primitives, Append entries over lists lists.
const ordReporters, ordLists, ordKeys = 6, 4, 300

func shardOrder(t *testing.T, wide bool) {
	kwl := keywrite.Layout{Slots: 1 << 14, DataSize: 8}
	kil := keyincr.Layout{Slots: 1 << 12}
	pcc, _ := postcard.NewCodec(postcard.Layout{Chunks: 1 << 12, Copies: 2})
	c := startCollector(t, kwl, kil, pcc, appendlist.Layout{Lists: ordLists, Entries: 4096, EntrySize: 8, Batch: 4, Markers: true})

	ackPort := uint16(0)
	if wide {
		ackPort = freeUDPPort(t)
	}
	tr, err := New(Config{
		ReportAddr: netip.MustParseAddrPort("127.0.0.1:0"),
		Collectors: []netip.AddrPort{c.Addr()},
		Shards:     2,
		AckPort:    ackPort,
		// Deep enough that a slow run (the race detector's) refuses
		// nothing: the order checks assume no NACK and no resend.
		RingSize: 8192,
	})
	if err != nil {
		t.Fatal(err)
	}
	sctx, scancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer scancel()
	if err := tr.Start(sctx); err != nil {
		t.Fatal(err)
	}

	refKI, _ := keyincr.NewStore(kil, nil)
	total, reps := sendOrdered(t, tr, wide, ackPort, refKI)
	for _, rep := range reps {
		defer rep.Close()
	}
	settleOrdered(t, c, tr, total)
	checkOrderedKeys(t, c.KW)
	if !bytes.Equal(c.KI.Region(), refKI.Region()) {
		t.Error("key-increment region differs from the reference store")
	}
	checkOrderedPaths(t, c.PC, pcc)
	checkOrderedLists(t, c.AR)
}

// sendOrdered runs ordReporters reporters at once, each sending its
// reports in order, adds their Key-Increments to refKI, and returns the
// number of reports sent and the reporters, for the caller to close once
// it checked the translator.
func sendOrdered(t *testing.T, tr *Translator, wide bool, ackPort uint16, refKI *keyincr.Store) (uint64, []*reporter.Reporter) {
	var refMu sync.Mutex
	var wg sync.WaitGroup
	var sent [ordReporters]uint64
	var reps []*reporter.Reporter
	for r := range uint32(ordReporters) {
		cfg := reporter.Config{Translator: tr.ReportAddr(), Delivery: reporter.FireAndForget}
		if wide {
			// Confirmed, one address per reporter: each listens for its
			// acks on the one ack port.
			cfg.Local = netip.AddrPortFrom(netip.AddrFrom4([4]byte{127, 0, 0, byte(10 + r)}), 0)
			cfg.Delivery, cfg.AckPort = reporter.Confirmed, ackPort
		}
		rep, err := reporter.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		reps = append(reps, rep)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := range uint32(ordKeys) {
				key := r<<16 | k
				// Three versions of each key, in order: the last must stay.
				for v := uint32(1); v <= 3; v++ { // not 0: an all-zero value is refused
					_ = rep.KeyWrite(key, binary.BigEndian.AppendUint32(binary.BigEndian.AppendUint32(nil, key), v), 2)
				}
				_ = rep.KeyIncrement(k%64, uint64(r+1), 2)
				_ = rep.Append(k%ordLists, binary.BigEndian.AppendUint32(binary.BigEndian.AppendUint32(nil, r+1), k), false)
				// A flow's two postcards back to back: its chunk is complete
				// before another flow can evict it, whatever the cache.
				flow := r<<16 | k
				_ = rep.Postcard(flow, 1, 2, postcard.Value(k+1))
				_ = rep.Postcard(flow, 2, 2, postcard.Value(k+2))
				refMu.Lock()
				_ = refKI.Add(k%64, uint64(r+1), 2)
				refMu.Unlock()
				sent[r] += 7
				if k%4 == 3 {
					// Pace each reporter so loopback UDP drops nothing.
					_ = rep.Flush()
					time.Sleep(time.Millisecond)
				}
			}
			_ = rep.Flush()
		}()
	}
	wg.Wait()
	var total uint64
	for _, n := range sent {
		total += n
	}
	return total, reps
}

// settleOrdered waits for the translator to have read total reports,
// closes it, and checks that both shards worked and nothing was lost or
// misread.
func settleOrdered(t *testing.T, c *testCollector, tr *Translator, total uint64) {
	deadline := time.Now().Add(10 * time.Second)
	for reportsOf(tr.Counters()) < total && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	var perShard [2]uint64
	for i, sh := range tr.shards {
		sh.mu.Lock()
		perShard[i] = reportsOf(sh.e.Counters())
		sh.mu.Unlock()
	}
	if err := tr.Close(5 * time.Second); err != nil {
		t.Fatal(err)
	}
	cc := c.Counters()
	tc := tr.Counters()
	if got := reportsOf(tc); got != total || tc.Dropped != 0 || tc.Lost != 0 || tc.Malformed != 0 || cc.NAKAccess != 0 || cc.NAKInvalid != 0 {
		t.Fatalf("%d of %d reports translated\ntranslator %+v\ntarget %+v", got, total, tc, cc)
	}
	// Each shard read some reporters' flows (6 flows over 2 sockets), and
	// read Append and postcard reports it handed over: a shard's count
	// includes what it was handed.
	if perShard[0] == 0 || perShard[1] == 0 {
		t.Errorf("reports per shard %v: one shard read nothing", perShard)
	}
	t.Logf("reports per shard %v, %d packets, %d retransmitted", perShard, tc.Packets, tc.Retransmits)
	if tc.Duplicates != 0 || tc.Missing != 0 || tc.NACKs != 0 {
		t.Errorf("%d duplicates, %d missing, %d NACKs: numbers misread across shards", tc.Duplicates, tc.Missing, tc.NACKs)
	}
}

// checkOrderedKeys checks that every Key-Write key found holds its last
// version.
func checkOrderedKeys(t *testing.T, kw *keywrite.Store) {
	found := 0
	for r := range uint32(ordReporters) {
		for k := range uint32(ordKeys) {
			key := r<<16 | k
			res, err := kw.Query(key, 2, keywrite.Plurality)
			if err != nil {
				t.Fatal(err)
			}
			if res.Status != keywrite.Found || binary.BigEndian.Uint32(res.Data) != key {
				continue // lost to a collision: not an order question
			}
			found++
			if v := binary.BigEndian.Uint32(res.Data[4:]); v != 3 {
				t.Fatalf("key %#x holds version %d, want the last, 3", key, v)
			}
		}
	}
	if found < ordReporters*ordKeys*9/10 {
		t.Errorf("%d of %d keys found", found, ordReporters*ordKeys)
	}
}

// checkOrderedPaths checks every flow's path found.
func checkOrderedPaths(t *testing.T, pc *postcard.Store, pcc *postcard.Codec) {
	values := make([]uint32, ordKeys+1)
	for i := range values {
		values[i] = uint32(i) + 1 // 0 is the blank
	}
	tab, err := postcard.NewTable(pcc.Layout(), values)
	if err != nil {
		t.Fatal(err)
	}
	paths := 0
	for r := range uint32(ordReporters) {
		for k := range uint32(ordKeys) {
			p, o := pc.Query(tab, r<<16|k)
			if o != postcard.Found {
				continue // evicted half-full by a colliding flow, or overwritten
			}
			paths++
			if p.Len != 2 || p.Hops[0] != k+1 || p.Hops[1] != k+2 {
				t.Fatalf("flow %#x: path %v, want [%d %d]", r<<16|k, p.Hops[:p.Len], k+1, k+2)
			}
		}
	}
	if paths < ordReporters*ordKeys*8/10 {
		t.Errorf("%d of %d flows' paths found", paths, ordReporters*ordKeys)
	}
}

// checkOrderedLists checks that every Append entry was written once, in
// its reporter's order within its list.
func checkOrderedLists(t *testing.T, ar *appendlist.Store) {
	seen := map[[2]uint32]bool{}
	for l := range uint32(ordLists) {
		rd, _ := ar.Reader(l)
		buf := make([]byte, 8*4096)
		m, err := rd.Read(buf)
		if err != nil {
			t.Fatalf("list %d: %v", l, err)
		}
		var last [ordReporters]int64
		for i := range last {
			last[i] = -1
		}
		for i := range m {
			r, k := binary.BigEndian.Uint32(buf[8*i:])-1, binary.BigEndian.Uint32(buf[8*i+4:])
			if r >= ordReporters || k >= ordKeys || k%ordLists != l || seen[[2]uint32{r, k}] {
				t.Fatalf("list %d entry %d: reporter %d key %d: foreign or doubled", l, i, r, k)
			}
			seen[[2]uint32{r, k}] = true
			if int64(k) <= last[r] {
				t.Fatalf("list %d: reporter %d's entry %d after %d", l, r, k, last[r])
			}
			last[r] = int64(k)
		}
	}
	if len(seen) != ordReporters*ordKeys {
		for r := range uint32(ordReporters) {
			for k := range uint32(ordKeys) {
				if !seen[[2]uint32{r, k}] {
					t.Logf("missing: reporter %d entry %d (list %d)", r, k, k%ordLists)
				}
			}
		}
		t.Errorf("%d Append entries read, %d sent", len(seen), ordReporters*ordKeys)
	}
}

func reportsOf(c Counters) uint64 { return c.Reports[1] + c.Reports[2] + c.Reports[3] + c.Reports[4] }

// TestShardedDuplicateInOneBatch: a wide report and its copy (a resend, a
// closing reporter's probe) read in one batch are applied once, whether
// the reading shard or another one translates them. Both pairs go in one
// system call, so one read takes them.
func TestShardedDuplicateInOneBatch(t *testing.T) {
	c, tr := startTwoShards(t, 1, Config{AckPort: freeUDPPort(t)})
	uc, err := net.DialUDP("udp", nil, net.UDPAddrFromAddrPort(tr.ReportAddr()))
	if err != nil {
		t.Fatal(err)
	}
	defer uc.Close()
	conn, err := udpio.New(uc, 8)
	if err != nil {
		t.Fatal(err)
	}
	var ms []udpio.Datagram
	for list := range uint32(2) { // one list per shard: one of them is the reader's
		r := dta.Report{Header: dta.Header{Opcode: dta.OpAppend, Sequenced: true, Wide: true, Seq: list},
			Append: dta.Append{ListID: list, Data: []byte{0, 0, 0, byte(list + 1)}}}
		b, err := dta.AppendPayload(nil, &r)
		if err != nil {
			t.Fatal(err)
		}
		ms = append(ms, udpio.Datagram{Buf: b}, udpio.Datagram{Buf: b})
	}
	if _, err := conn.WriteBatch(ms); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for reportsOf(tr.Counters()) < 4 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if err := tr.Close(5 * time.Second); err != nil {
		t.Fatal(err)
	}
	if tc := tr.Counters(); tc.Duplicates != 2 || tc.Writes != 2 {
		t.Fatalf("translator %+v: want 2 duplicates, 2 writes", tc)
	}
	c.Counters()
	for list := range uint32(2) {
		rd, _ := c.AR.Reader(list)
		buf := make([]byte, 4*64)
		n, err := rd.Read(buf)
		if err != nil || n != 1 || buf[3] != byte(list+1) {
			t.Errorf("list %d: %d entries %x, %v; want the one entry once", list, n, buf[:4*max(n, 1)], err)
		}
	}
}

// TestShardedAppendAckAfterWrite: with two shards, a wide Append report is
// acknowledged to its sender only once its batch is written and the
// collector acknowledged the write, whichever shard owns its list: entries
// in partial batches hold the cumulative ack back (AppendLinger is an hour
// here), full batches release it.
func TestShardedAppendAckAfterWrite(t *testing.T) {
	ackPort := freeUDPPort(t)
	acks, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1), Port: int(ackPort)})
	if err != nil {
		t.Fatal(err)
	}
	defer acks.Close()
	_, tr := startTwoShards(t, 4, Config{AckPort: ackPort, AppendLinger: time.Hour})
	defer tr.Close(time.Second)
	uc, err := net.DialUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)}, net.UDPAddrFromAddrPort(tr.ReportAddr()))
	if err != nil {
		t.Fatal(err)
	}
	defer uc.Close()
	seq := uint32(0)
	send := func(r dta.Report) {
		r.Header.Sequenced, r.Header.Wide, r.Header.Seq = true, true, seq
		seq++
		b, err := dta.AppendPayload(nil, &r)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := uc.Write(b); err != nil {
			t.Fatal(err)
		}
	}
	// highest returns the highest cumulative ack within d.
	highest := func(d time.Duration, want uint32) (uint32, bool) {
		top, got := uint32(0), false
		buf := make([]byte, 64)
		for end := time.Now().Add(d); time.Now().Before(end); {
			acks.SetReadDeadline(end)
			n, err := acks.Read(buf)
			if err != nil {
				break
			}
			if a, err := dta.ParseAck(buf[:n]); err == nil && !a.NACK && (!got || a.Seq > top) {
				top, got = a.Seq, true
				if top == want {
					break
				}
			}
		}
		return top, got
	}
	send(kwReport(1, 2, 7)) // 0: written at once
	send(dta.Report{Header: dta.Header{Opcode: dta.OpAppend}, Append: dta.Append{ListID: 0, Data: []byte{0, 0, 0, 1}}})
	send(dta.Report{Header: dta.Header{Opcode: dta.OpAppend}, Append: dta.Append{ListID: 1, Data: []byte{0, 0, 0, 1}}})
	if top, got := highest(300*time.Millisecond, 0xffffffff); !got || top != 0 {
		t.Fatalf("highest ack %d (%v) with two entries in partial batches, want 0", top, got)
	}
	for i := range 6 { // three more per list: both batches full
		send(dta.Report{Header: dta.Header{Opcode: dta.OpAppend}, Append: dta.Append{ListID: uint32(i % 2), Data: []byte{0, 0, 1, byte(i)}}})
	}
	if top, _ := highest(2*time.Second, 8); top != 8 {
		t.Fatalf("highest ack %d once both batches were written, want 8", top)
	}
	if tc := tr.Counters(); tc.Writes != 4 || tc.Lingered != 0 {
		t.Fatalf("translator %+v: want 4 writes (the Key-Write's 2 copies, 2 batches), none lingered", tc)
	}
}

// startTwoShards starts a collector of small instances (Append batches of
// batch entries, 2 lists) and a translator with cfg and two shards.
func startTwoShards(t *testing.T, batch int, cfg Config) (*testCollector, *Translator) {
	t.Helper()
	kwl := keywrite.Layout{Slots: 1 << 10, DataSize: 4}
	kil := keyincr.Layout{Slots: 1 << 10}
	pcc, _ := postcard.NewCodec(postcard.Layout{Chunks: 1 << 10, Copies: 2})
	c := startCollector(t, kwl, kil, pcc, appendlist.Layout{Lists: 2, Entries: 64, EntrySize: 4, Batch: batch})
	cfg.ReportAddr, cfg.Collectors, cfg.Shards = netip.MustParseAddrPort("127.0.0.1:0"), []netip.AddrPort{c.Addr()}, 2
	tr, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := tr.Start(ctx); err != nil {
		t.Fatal(err)
	}
	return c, tr
}

// TestSettlementByMessage: two engines, no Translator. The home engine
// admits a wide report of its source, another translates it; when the
// other's collector acknowledges the operation, the settlement is a value
// the other hands out (TakeSettled), and the home's cumulative ack passes
// the report only once it takes it (Settle). No engine touches the other.
func TestSettlementByMessage(t *testing.T) {
	ft := newFakeTarget(t, kiInst(t))
	owner := newHarness(t, Config{}, ft)
	owner.connect()
	home, err := NewEngine(Config{Local: netip.MustParseAddrPort("127.0.0.1:4792"), Collectors: []netip.AddrPort{ft.addr}})
	if err != nil {
		t.Fatal(err)
	}
	now := owner.now
	r := kiReport(7, 1, 1)
	r.Header.Sequenced, r.Header.Wide, r.Header.Seq, r.Header.Session = true, true, 5, 0x5e55
	tk, ok := home.Admit(&r, testReporter, 3, now)
	if !ok {
		t.Fatal("admit refused")
	}
	home.HandedOver(tk, owner.e.TranslateFor(&r, testReporter, tk, now))
	homeAcks := func() (out []dta.Ack) {
		_, acks := home.Output()
		for _, d := range acks {
			if a, err := dta.ParseAck(d.Buf); err == nil {
				out = append(out, a)
			}
		}
		home.ResetOutput()
		return out
	}
	if acks := homeAcks(); len(acks) != 0 {
		t.Fatalf("home acks %+v before the owner's write was acknowledged", acks)
	}
	owner.pump() // the owner writes, its collector acknowledges
	st := owner.e.TakeSettled(nil)
	if len(st) != 1 || st[0].Home() != 3 {
		t.Fatalf("settlements %+v, want one for engine 3", st)
	}
	if again := owner.e.TakeSettled(nil); len(again) != 0 {
		t.Fatalf("settlements taken twice: %+v", again)
	}
	if c := owner.e.Counters(); c.Acks != 0 || c.ResendAcks != 0 {
		t.Fatalf("the owner acknowledged the home's source itself: %+v", c)
	}
	home.Settle(st)
	if acks := homeAcks(); len(acks) != 1 || acks[0].NACK || acks[0].Seq != 5 || acks[0].Session != 0x5e55 {
		t.Fatalf("home acks %+v after the settlement, want a cumulative ack of 5", acks)
	}
}
