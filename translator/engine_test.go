package translator

import (
	"bytes"
	"encoding/binary"
	"errors"
	"net/netip"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/dtakit/dtakit/appendlist"
	"github.com/dtakit/dtakit/dta"
	"github.com/dtakit/dtakit/dta/tofino"
	"github.com/dtakit/dtakit/internal/exactly"
	"github.com/dtakit/dtakit/keyincr"
	"github.com/dtakit/dtakit/keywrite"
	"github.com/dtakit/dtakit/postcard"
	"github.com/dtakit/dtakit/rocev2"
	"github.com/dtakit/dtakit/rocev2/cm"
	"github.com/dtakit/dtakit/rocev2/rc"
)

// Test geometries, small enough to compare whole regions.
var (
	testKW = keywrite.Layout{Slots: 1 << 10, DataSize: 4}
	testKI = keyincr.Layout{Slots: 1 << 10}
	testPC = postcard.Layout{Hops: 5, Chunks: 1 << 10, Copies: 2, Addressing: postcard.PerCopyAddressing}
	testAL = appendlist.Layout{Lists: 4, Entries: 64, EntrySize: 8, Batch: 4, Markers: true}
)

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// geometry encodes a layout for an advertisement.
func geometry(l interface{ AppendBinary([]byte) ([]byte, error) }) []byte {
	return must(l.AppendBinary(nil))
}

func kwInst(_ testing.TB) *fakeInst {
	return &fakeInst{prim: dta.OpKeyWrite, geom: geometry(testKW), mem: make([]byte, testKW.RegionSize())}
}

func kiInst(_ testing.TB) *fakeInst {
	return &fakeInst{prim: dta.OpKeyIncrement, geom: geometry(testKI), mem: make([]byte, testKI.RegionSize())}
}

func pcInst(_ testing.TB) *fakeInst {
	return &fakeInst{prim: dta.OpPostcard, geom: geometry(testPC), mem: make([]byte, testPC.RegionSize())}
}

func alInst(_ testing.TB, l appendlist.Layout) *fakeInst {
	return &fakeInst{prim: dta.OpAppend, geom: geometry(l), mem: make([]byte, l.RegionSize())}
}

func allInsts(t testing.TB) []*fakeInst {
	return []*fakeInst{kwInst(t), kiInst(t), pcInst(t), alInst(t, testAL)}
}

func kwReport(key uint32, n uint8, v uint32) dta.Report {
	d := binary.BigEndian.AppendUint32(nil, v)
	return dta.Report{Header: dta.Header{Opcode: dta.OpKeyWrite}, KeyWrite: dta.KeyWrite{Redundancy: n, Key: key, Data: d}}
}

func kiReport(key uint32, n uint8, add uint64) dta.Report {
	return dta.Report{Header: dta.Header{Opcode: dta.OpKeyIncrement}, KeyIncrement: dta.KeyIncrement{Redundancy: n, Key: key, Counter: add}}
}

func alReport(list uint32, v uint64, imm bool) dta.Report {
	return dta.Report{Header: dta.Header{Opcode: dta.OpAppend, Immediate: imm},
		Append: dta.Append{ListID: list, Data: binary.BigEndian.AppendUint64(nil, v)}}
}

func pcReport(key uint32, hop uint8, v uint32) dta.Report {
	return dta.Report{Header: dta.Header{Opcode: dta.OpPostcard}, Postcard: dta.Postcard{Key: key, Hop: hop, Value: v}}
}

func sequenced(r dta.Report, seq uint8) dta.Report {
	r.Header.Sequenced, r.Header.Seq = true, uint32(seq)
	return r
}

func TestDiscoveryAndAdvertisement(t *testing.T) {
	ft := newFakeTarget(t, allInsts(t)...)
	h := newHarness(t, Config{}, ft)
	h.connect()

	// REQs to 40050..40054: four instances, then the REJ reason 8.
	if len(ft.reqs) != 5 {
		t.Fatalf("%d REQs, want 5", len(ft.reqs))
	}
	for i := range ft.reqs {
		checkDiscoveryREQ(t, i, &ft.reqs[i])
	}
	if ft.rtus != 4 {
		t.Errorf("%d RTUs, want 4", ft.rtus)
	}
	for _, q := range ft.qps {
		if !q.advertAck || q.advertMSN != 1 {
			t.Errorf("advertisement of instance %d: acked %v, MSN %d", q.inst, q.advertAck, q.advertMSN)
		}
	}
	infos := h.e.Instances()
	if len(infos) != 4 {
		t.Fatalf("%d instances, want 4", len(infos))
	}
	for i, in := range infos {
		if in.Primitive != ft.insts[i].prim || !in.Ready || !in.Used || in.Port != uint16(DefaultCMPort+i) || in.Ad.RKey != ft.insts[i].rkey {
			t.Errorf("instance %d: %+v", i, in)
		}
	}
}

// checkDiscoveryREQ checks the translator's i-th REQ of discovery.
func checkDiscoveryREQ(t *testing.T, i int, r *cm.ConnectRequest) {
	t.Helper()
	if want := cm.ServiceID(uint16(DefaultCMPort + i)); r.ServiceID != want {
		t.Errorf("REQ %d: service ID %#x, want %#x", i, r.ServiceID, want)
	}
	if r.TransportType != 0 || r.PKey != 0xFFFF || r.PathMTU != cm.MTU1024 || r.MaxCMRetries != 15 || r.RetryCount != 3 {
		t.Errorf("REQ %d: %v", i, r)
	}
	if r.LocalQPN < 2 || r.StartingPSN > rocev2.PSNMask {
		t.Errorf("REQ %d: QPN %#x PSN %#x", i, r.LocalQPN, r.StartingPSN)
	}
	ip, err := cm.DecodeIPHeader(r.PrivateData[:])
	if err != nil || ip.SrcPort != testLocal.Port() || ip.Src != testLocal.Addr() || ip.Dst != testTarget.Addr() {
		t.Errorf("REQ %d: IP header %+v, %v", i, ip, err)
	}
}

func TestSeveralInstancesOfOnePrimitive(t *testing.T) {
	a, b := kwInst(t), kwInst(t)
	ft := newFakeTarget(t, a, b)
	h := newHarness(t, Config{}, ft)
	h.connect()
	infos := h.e.Instances()
	if len(infos) != 2 || !infos[0].Used || infos[1].Used || !infos[1].Ready {
		t.Fatalf("instances %+v: want the first used, the second ready and idle", infos)
	}
	h.report(kwReport(7, 2, 0x01020304))
	h.pump()
	if bytes.Equal(a.mem, make([]byte, len(a.mem))) || !bytes.Equal(b.mem, make([]byte, len(b.mem))) {
		t.Error("the report did not go to the first instance only")
	}
}

func TestNotListening(t *testing.T) {
	ft := newFakeTarget(t, kwInst(t))
	ft.silent = true
	h := newHarness(t, Config{}, ft)
	h.e.Start(h.now)
	reqs := 0
	h.toT = func(d []Datagram) []Datagram { reqs += len(d); return d }
	h.pump()
	if done, _ := h.e.Connected(); done {
		t.Fatal("connected without an answer")
	}
	h.advance(99*time.Millisecond, time.Millisecond)
	if reqs != 1 {
		t.Errorf("%d REQs before the first timeout, want 1", reqs)
	}
	h.advance(500*time.Millisecond, 5*time.Millisecond)
	done, err := h.e.Connected()
	if !done || !errors.Is(err, ErrNotListening) {
		t.Fatalf("Connected = %v, %v; want done with ErrNotListening", done, err)
	}
	if reqs != DefaultCMTries {
		t.Errorf("%d REQs, want %d", reqs, DefaultCMTries)
	}
	t.Log(err)
	// Reports now have nowhere to go.
	h.report(sequenced(kwReport(1, 1, 1), 9))
	h.pump()
	if c := h.e.Counters(); c.NoInstance != 1 || c.NACKs != 1 {
		t.Errorf("counters %+v", c)
	}
}

func TestRejectOtherReason(t *testing.T) {
	ft := newFakeTarget(t)
	ft.rejectReason = cm.RejectConsumer
	h := newHarness(t, Config{}, ft)
	h.e.Start(h.now)
	h.pump()
	done, err := h.e.Connected()
	if !done || !errors.Is(err, ErrRejected) {
		t.Fatalf("Connected = %v, %v; want ErrRejected", done, err)
	}
}

func TestNoInstancesIsNotAnError(t *testing.T) {
	ft := newFakeTarget(t)
	h := newHarness(t, Config{}, ft)
	h.connect()
	if n := len(h.e.Instances()); n != 0 {
		t.Errorf("%d instances", n)
	}
}

func TestLostREPIsRetried(t *testing.T) {
	ft := newFakeTarget(t, kwInst(t))
	h := newHarness(t, Config{}, ft)
	dropped := 0
	h.toE = func(b [][]byte) [][]byte {
		if dropped == 0 && len(b) > 0 {
			dropped++
			return b[1:] // the first REP
		}
		return b
	}
	h.e.Start(h.now)
	h.pump()
	h.advance(300*time.Millisecond, 10*time.Millisecond)
	if done, err := h.e.Connected(); !done || err != nil {
		t.Fatalf("Connected = %v, %v", done, err)
	}
	if len(ft.qps) != 1 {
		t.Errorf("the repeated REQ made %d QPs, want 1", len(ft.qps))
	}
}

// refKeyWrite applies reports to a reference store.
func TestAllPrimitivesWriteWhatTheStoresExpect(t *testing.T) {
	insts := allInsts(t)
	ft := newFakeTarget(t, insts...)
	h := newHarness(t, Config{}, ft)
	h.connect()

	kwl, _ := keywrite.ParseLayout(insts[0].geom)
	kws, _ := keywrite.NewStore(kwl, nil)
	kil, _ := keyincr.ParseLayout(insts[1].geom)
	kis, _ := keyincr.NewStore(kil, nil)
	pcc, _ := postcard.NewCodec(testPC)
	pcs, _ := postcard.NewStore(pcc.Layout(), make([]byte, testPC.RegionSize()))
	cache, _ := postcard.NewCache(pcc.Layout(), DefaultPostcardCache)

	for i := range uint32(200) {
		h.report(kwReport(i, 2, i*7+1))
		if err := kws.Put(i, binary.BigEndian.AppendUint32(nil, i*7+1), 2); err != nil {
			t.Fatal(err)
		}
		h.report(kiReport(i%17, 3, uint64(i)))
		if err := kis.Add(i%17, uint64(i), 3); err != nil {
			t.Fatal(err)
		}
		for hop := uint8(1); hop <= 5; hop++ {
			r := pcReport(i, hop, uint32(hop)*1000+i)
			h.report(r)
			refPostcard(t, cache, pcs, r.Postcard)
		}
		h.report(alReport(i%4, uint64(i)+1, false))
		if i%16 == 0 {
			h.pump()
		}
	}
	h.pump()
	if !bytes.Equal(insts[0].mem, kws.Region()) {
		t.Error("key-write region differs from the store's")
	}
	if !bytes.Equal(insts[1].mem, kis.Region()) {
		t.Error("key-increment region differs from the store's")
	}
	if !bytes.Equal(insts[2].mem, pcs.Region()) {
		t.Error("postcarding region differs from the store's")
	}
	checkAllAppended(t, insts[3].mem)
	checkAllCounts(t, h.e.Counters())
	if !h.e.Idle() {
		t.Error("not idle after the pump")
	}
}

// refPostcard applies p to the reference cache and store as a translator
// would.
func refPostcard(t *testing.T, cache *postcard.Cache, pcs *postcard.Store, p dta.Postcard) {
	t.Helper()
	chunks, err := cache.Insert(nil, p.Key, postcard.Hop(p.Hop), postcard.PathLength(p.PathLength), postcard.Value(p.Value))
	if err != nil {
		t.Fatal(err)
	}
	for j := range chunks {
		for _, w := range cache.Codec().AppendWrites(nil, &chunks[j]) {
			if err := pcs.Apply(w); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// checkAllAppended checks TestAllPrimitivesWriteWhatTheStoresExpect's
// Append region: 50 entries per list, 48 written in batches of 4.
func checkAllAppended(t *testing.T, mem []byte) {
	t.Helper()
	region, err := appendlist.NewStore(testAL, mem)
	if err != nil {
		t.Fatal(err)
	}
	for l := range uint32(4) {
		rd, _ := region.Reader(l)
		buf := make([]byte, 64*8)
		n, err := rd.Read(buf)
		if err != nil || n != 48 {
			t.Fatalf("list %d: read %d entries, %v; want 48", l, n, err)
		}
		for k := range n {
			if got, want := binary.BigEndian.Uint64(buf[k*8:]), uint64(l+uint32(k)*4)+1; got != want {
				t.Errorf("list %d entry %d = %d, want %d", l, k, got, want)
			}
		}
	}
}

// checkAllCounts checks TestAllPrimitivesWriteWhatTheStoresExpect's
// counters.
func checkAllCounts(t *testing.T, c Counters) {
	t.Helper()
	if c.Reports[dta.OpKeyWrite] != 200 || c.Reports[dta.OpKeyIncrement] != 200 || c.Reports[dta.OpPostcard] != 1000 || c.Reports[dta.OpAppend] != 200 {
		t.Errorf("reports %v", c.Reports)
	}
	if c.FetchAdds != 600 || c.Retransmits != 0 || c.Dropped != 0 || c.Rejected != 0 || c.EncodeErrors != 0 {
		t.Errorf("counters %+v", c)
	}
	// 400 key-write writes, 200 flows × 2 copies, 48 append batches.
	if c.Writes != 400+400+48 {
		t.Errorf("%d writes, want %d", c.Writes, 400+400+48)
	}
}

func TestAppendImmediateAndMultiPacketWrites(t *testing.T) {
	l := appendlist.Layout{Lists: 2, Entries: 512, EntrySize: 64, Batch: 64} // 4 KiB batches
	in := alInst(t, l)
	ft := newFakeTarget(t, in)
	h := newHarness(t, Config{}, ft)
	h.connect()
	var ops []rocev2.Opcode
	h.toT = func(d []Datagram) []Datagram {
		for _, x := range d {
			var p rocev2.Packet
			if p.DecodeDatagram(x.Buf, testLocal, testTarget) == nil && p.BTH.DestQP != 1 {
				ops = append(ops, p.BTH.Opcode)
			}
		}
		return d
	}
	entry := func(i int) []byte { return bytes.Repeat([]byte{byte(i + 1)}, 64) }
	for i := range 64 {
		r := dta.Report{Header: dta.Header{Opcode: dta.OpAppend, Immediate: i == 10}, Append: dta.Append{ListID: 1, Data: entry(i)}}
		h.report(r)
	}
	h.pump()
	want := []rocev2.Opcode{rocev2.RCWriteFirst, rocev2.RCWriteMiddle, rocev2.RCWriteMiddle, rocev2.RCWriteLastImm}
	if len(ops) != len(want) {
		t.Fatalf("opcodes %v, want %v", ops, want)
	}
	for i := range want {
		if ops[i] != want[i] {
			t.Fatalf("opcodes %v, want %v", ops, want)
		}
	}
	if len(in.imms) != 1 || in.imms[0] != 1 {
		t.Errorf("immediates %v, want [1]", in.imms)
	}
	base := l.ListOffset(1)
	for i := range 64 {
		if got := in.mem[base+uint64(i*64) : base+uint64(i*64+64)]; !bytes.Equal(got, entry(i)) {
			t.Fatalf("entry %d = %x", i, got[:4])
		}
	}
}

func TestFlushWritesCachedPostcardsAndPartialBatches(t *testing.T) {
	pc, al := pcInst(t), alInst(t, testAL)
	ft := newFakeTarget(t, pc, al)
	h := newHarness(t, Config{}, ft)
	h.connect()
	h.report(pcReport(42, 1, 7))
	h.report(pcReport(42, 2, 8))
	h.report(alReport(3, 99, true))
	h.pump()
	if h.e.Counters().Writes != 0 {
		t.Fatal("wrote before the flush")
	}
	h.e.Flush()
	h.pump()
	if w := h.e.Counters().Writes; w != 2+1 {
		t.Fatalf("%d writes after the flush, want 3", w)
	}
	pcc, _ := postcard.NewCodec(testPC)
	st, _ := postcard.NewStore(pcc.Layout(), pc.mem)
	tab, _ := postcard.NewTable(pcc.Layout(), []uint32{7, 8})
	path, out := st.Query(tab, 42)
	if out != postcard.Found || path.Len != 2 || path.Hops[0] != 7 || path.Hops[1] != 8 {
		t.Errorf("flushed flow: %v %v", path.Values(), out)
	}
	region, _ := appendlist.NewStore(testAL, al.mem)
	rd, _ := region.Reader(3)
	buf := make([]byte, 8*64)
	if n, err := rd.Read(buf); n != 1 || err != nil || binary.BigEndian.Uint64(buf) != 99 {
		t.Errorf("flushed list: %d entries, %v", n, err)
	}
	if len(al.imms) != 1 || al.imms[0] != 3 {
		t.Errorf("immediates %v", al.imms)
	}
}

func TestCollectorChoice(t *testing.T) {
	a, b := kwInst(t), kwInst(t)
	fa, fb := newFakeTarget(t, a), newFakeTarget(t, b)
	h := newHarness(t, Config{}, fa, fb)
	h.connect()
	crc8, err := tofino.NewPredefined(8, "CRC8")
	if err != nil {
		t.Fatal(err)
	}
	kwl, _ := keywrite.ParseLayout(a.geom)
	sa, _ := keywrite.NewStore(kwl, nil)
	sb, _ := keywrite.NewStore(kwl, nil)
	for k := range uint32(300) {
		h.report(kwReport(k, 1, k+1))
		be := binary.BigEndian.AppendUint32(nil, k)
		want := int(crc8.SumBytes(be)) % 2
		if got := h.e.ChooseCollector(k); got != want {
			t.Fatalf("key %d: collector %d, want %d", k, got, want)
		}
		s := sa
		if want == 1 {
			s = sb
		}
		_ = s.Put(k, binary.BigEndian.AppendUint32(nil, k+1), 1)
	}
	h.pump()
	if !bytes.Equal(a.mem, sa.Region()) || !bytes.Equal(b.mem, sb.Region()) {
		t.Error("collectors' regions differ from the split the CRC8 table gives")
	}

	var table dta.CollectorChoice
	for i := range table {
		table[i] = 1
	}
	h2 := newHarness(t, Config{Choice: &table}, newFakeTarget(t, kwInst(t)), newFakeTarget(t, kwInst(t)))
	for k := range uint32(50) {
		if h2.e.ChooseCollector(k) != 1 {
			t.Fatal("a table naming collector 1 everywhere chose another")
		}
	}
	bad := dta.CollectorChoice{5}
	if _, err := NewEngine(Config{Local: testLocal, Collectors: []netip.AddrPort{testTarget}, Choice: &bad}); !errors.Is(err, ErrConfig) {
		t.Errorf("table naming a missing collector: %v", err)
	}
}

func TestMalformedReports(t *testing.T) {
	ft := newFakeTarget(t, allInsts(t)...)
	h := newHarness(t, Config{}, ft)
	h.connect()
	for _, b := range [][]byte{
		nil, {1}, {9, 0}, {1, 0, 0, 0, 0, 0, 0, 1, 2, 3, 4}, {1, 0x40}, {3, 0, 1, 0, 0, 0, 1, 0},
		{2, 0, 0, 0, 0, 1, 1, 2, 3},
	} {
		h.e.HandleReport(b, testReporter, h.now)
	}
	if c := h.e.Counters(); c.Malformed != 7 {
		t.Errorf("%d malformed, want 7", c.Malformed)
	}
	// Well-formed reports the geometry refuses: data size, list, value 0.
	h.report(dta.Report{Header: dta.Header{Opcode: dta.OpKeyWrite}, KeyWrite: dta.KeyWrite{Redundancy: 1, Key: 1, Data: make([]byte, 8)}})
	h.report(alReport(4, 1, false))
	h.report(alReport(0, 0, false))
	h.report(pcReport(1, 1, 0))
	h.report(pcReport(1, 6, 1))
	h.pump()
	if c := h.e.Counters(); c.Rejected != 5 || c.Packets != 0 {
		t.Errorf("counters %+v", c)
	}
}

func TestReportsBeforeConnectionAreNACKed(t *testing.T) {
	ft := newFakeTarget(t, kwInst(t))
	h := newHarness(t, Config{}, ft)
	h.report(sequenced(kwReport(1, 1, 1), 200))
	h.report(kwReport(1, 1, 1))
	roce, acks := h.e.Output()
	if len(roce) != 0 || len(acks) != 1 {
		t.Fatalf("%d RoCEv2 datagrams and %d to reporters, want one NACK", len(roce), len(acks))
	}
	d := acks[0]
	a, err := dta.ParseAck(d.Buf)
	if err != nil || !a.NACK || a.Seq != 200 || d.Addr != netip.AddrPortFrom(testReporter.Addr(), dta.AckPort) {
		t.Errorf("NACK %+v to %v: %v", a, d.Addr, err)
	}
	if c := h.e.Counters(); c.NACKs != 1 || c.Dropped != 1 || c.NoInstance != 2 {
		t.Errorf("counters %+v", c)
	}
}

func TestAttach(t *testing.T) {
	e, err := NewEngine(Config{Local: testLocal, Collectors: []netip.AddrPort{testTarget}})
	if err != nil {
		t.Fatal(err)
	}
	in := kwInst(t)
	ad := dta.Advertisement{VA: 0x1000, Length: uint32(len(in.mem)), RKey: 1, Primitive: dta.OpKeyWrite, Geometry: in.geom}
	if _, err := e.attach(1, ad, 5, 0); !errors.Is(err, ErrConfig) {
		t.Errorf("collector 1 of 1: %v", err)
	}
	if _, err := e.attach(0, ad, 1<<24, 0); !errors.Is(err, ErrConfig) {
		t.Errorf("QPN of 25 bits: %v", err)
	}
	short := ad
	short.Length = 64
	if _, err := e.attach(0, short, 5, 0); !errors.Is(err, ErrAdvertisement) {
		t.Errorf("region shorter than the layout: %v", err)
	}
	bad := ad
	bad.Geometry = []byte{9}
	if _, err := e.attach(0, bad, 5, 0); !errors.Is(err, ErrAdvertisement) || !errors.Is(err, keywrite.ErrGeometry) {
		t.Errorf("bad geometry: %v", err)
	}
	if _, err := e.attach(0, ad, 5, 0); err != nil {
		t.Fatal(err)
	}
	infos := e.Instances()
	if len(infos) != 1 || !infos[0].Ready || !infos[0].Used || infos[0].Port != DefaultCMPort {
		t.Errorf("instances %+v", infos)
	}
}

// TestTranslatorBeforeCollector: a collector that starts after its
// translator is found: the failed discovery probes again with a backoff,
// and reports flow once the collector answers.
func TestTranslatorBeforeCollector(t *testing.T) {
	ft := newFakeTarget(t, kwInst(t))
	ft.silent = true
	h := newHarness(t, Config{}, ft)
	h.e.Start(h.now)
	h.pump()
	h.advance(600*time.Millisecond, 5*time.Millisecond)
	if done, err := h.e.Connected(); !done || !errors.Is(err, ErrNotListening) {
		t.Fatalf("Connected = %v, %v; want done with ErrNotListening", done, err)
	}
	h.report(kwReport(1, 1, 1))
	h.pump()
	if c := h.e.Counters(); c.NoInstance != 1 || c.Dropped != 1 {
		t.Fatalf("a report before the collector: %+v, want counted as dropped", c)
	}
	ft.silent = false // the collector starts
	h.advance(3*time.Second, 5*time.Millisecond)
	if done, err := h.e.Connected(); !done || err != nil {
		t.Fatalf("Connected = %v, %v after the collector started; want done, no error", done, err)
	}
	h.report(kwReport(2, 2, 1))
	h.pump()
	c := h.e.Counters()
	if c.DiscoveryRetries == 0 || c.Writes == 0 {
		t.Fatalf("counters %+v: want a discovery retry and the report written", c)
	}
}

// TestWideNACKCarriesReason: a report with a wide sequence number that the
// translator refuses gets a wide NACK with its number and why.
func TestWideNACKCarriesReason(t *testing.T) {
	h := newHarness(t, Config{}, newFakeTarget(t))
	r := kwReport(1, 1, 1)
	r.Header.Sequenced, r.Header.Wide, r.Header.Seq = true, true, 0xABCDEF01
	h.report(r) // no instance: nothing connected
	var got []dta.Ack
	_, acks := h.e.Output()
	for _, d := range acks {
		a, err := dta.ParseAck(d.Buf)
		if err != nil {
			t.Fatal(err)
		}
		if a.NACK { // then the cumulative ack, which covers it
			got = append(got, a)
		}
	}
	want := dta.Ack{Seq: 0xABCDEF01, NACK: true, Wide: true, Reason: dta.ReasonNoInstance}
	if len(got) != 1 || got[0] != want {
		t.Fatalf("NACKs %+v, want %+v", got, want)
	}
}

// TestAdvertisedRegionBoundsTheBatcher: an Append geometry too large for
// its advertised region is refused before the batcher's per-list state is
// allocated (16 M lists would take hundreds of MB).
func TestAdvertisedRegionBoundsTheBatcher(t *testing.T) {
	l := appendlist.Layout{Lists: 1 << 24, Entries: 1, EntrySize: 4, Batch: 1}
	if err := l.Validate(); err != nil {
		t.Fatal(err)
	}
	var in instance
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	err := in.configure(dta.Advertisement{VA: 0x1000, Length: 4096, RKey: 1, Primitive: dta.OpAppend, Geometry: geometry(l)}, Config{})
	runtime.ReadMemStats(&after)
	if err == nil {
		t.Fatal("a 64 MiB layout in a 4 KiB region accepted")
	}
	if n := after.TotalAlloc - before.TotalAlloc; n > 1<<20 {
		t.Errorf("refusing it allocated %d bytes", n)
	}
}

// TestExactlyOnce: wide sequenced reports from one source. A number that
// skips ahead NACKs the skipped ones (reason Missing); a number already
// applied is dropped as a duplicate; a report NACKed as busy is not
// applied, so its resend is. Each report's FETCH_ADD lands once.
func TestExactlyOnce(t *testing.T) {
	ft := newFakeTarget(t, kiInst(t))
	h := newHarness(t, Config{RingSize: 8, AckPace: -1}, ft) // an ack after every report
	h.connect()
	send := h.wideKI
	var acked uint32 // the last cumulative ack
	nacks := func() (got []dta.Ack) {
		for _, d := range h.nacks {
			a, err := dta.ParseAck(d.Buf)
			if err != nil || d.Addr != netip.AddrPortFrom(testReporter.Addr(), dta.AckPort) || !a.Wide {
				t.Fatalf("ack %x to %v: %v", d.Buf, d.Addr, err)
			}
			if !a.NACK {
				acked = a.Seq
				continue
			}
			got = append(got, a)
		}
		h.nacks = nil
		return got
	}
	send(100)
	send(101)
	send(104)
	want := []dta.Ack{{Seq: 102, NACK: true, Wide: true, Reason: dta.ReasonMissing}, {Seq: 103, NACK: true, Wide: true, Reason: dta.ReasonMissing}}
	if got := nacks(); !slices.Equal(got, want) || acked != 104 {
		t.Fatalf("NACKs %+v, want %+v; acknowledged up to %d, want 104", got, want, acked)
	}
	send(102)
	send(104) // duplicates
	send(101)
	send(103)
	if got := nacks(); len(got) != 0 {
		t.Fatalf("NACKs %+v after the resends", got)
	}
	// Busy: with the target silent, the ring of 8 fills; the next report
	// is NACKed busy and not recorded, so its resend is applied.
	ft.noAck = true
	for seq := uint32(105); seq < 113; seq++ {
		send(seq)
	}
	send(113)
	if got := nacks(); len(got) != 1 || got[0].Seq != 113 || got[0].Reason != dta.ReasonBusy {
		t.Fatalf("NACKs %+v, want 113 busy", got)
	}
	ft.noAck = false
	h.advance(200*time.Millisecond, 10*time.Millisecond) // retransmitted, acknowledged
	send(113)
	c := h.e.Counters()
	if nacks(); acked != 113 {
		t.Errorf("acknowledged up to %d, want 113", acked)
	}
	if c.Missing != 2 || c.Duplicates != 2 || c.NACKs != 1 || c.FetchAdds != 14 || c.Acks == 0 {
		t.Fatalf("counters %+v", c)
	}
	st, err := keyincr.NewStore(testKI, ft.insts[0].mem)
	if err != nil {
		t.Fatal(err)
	}
	if v, err := st.Query(7, 1); err != nil || v != 14 {
		t.Errorf("key 7 counts %d (%v), want 14: one per number", v, err)
	}
}

// TestAckMeansApplied: a wide Key-Increment is acknowledged to its source
// only once the collector acknowledged its FETCH_ADDs, with the span of
// numbers the engine saw; when the QP fails with them unacknowledged they
// are NACKed Unconfirmed, not acknowledged and not NACKed for a resend.
func TestAckMeansApplied(t *testing.T) {
	ft := newFakeTarget(t, kiInst(t))
	h := newHarness(t, Config{RingSize: 64, MaxRetries: 2}, ft)
	h.connect()
	send := h.wideKI
	settled := map[uint32]bool{}
	acks := func() (cum []dta.Ack, nacks []dta.Ack) {
		for _, d := range h.nacks {
			a, err := dta.ParseAck(d.Buf)
			if err != nil {
				t.Fatal(err)
			}
			if a.NACK {
				nacks = append(nacks, a)
				settled[a.Seq] = true
			} else {
				cum = append(cum, a)
				for n := a.Seq + 1 - uint32(a.Span); n != a.Seq+1; n++ {
					if (n == 504 || n == 505) && !settled[n] {
						t.Fatalf("ack %+v covers %d before the collector acknowledged it or it was NACKed", a, n)
					}
				}
			}
		}
		h.nacks = nil
		return cum, nacks
	}
	ft.noAck = true
	for seq := uint32(500); seq < 504; seq++ {
		send(seq)
	}
	if cum, nacks := acks(); len(cum) != 0 || len(nacks) != 0 {
		t.Fatalf("before the collector acknowledged anything: acks %+v, NACKs %+v; want none", cum, nacks)
	}
	ft.noAck = false
	h.advance(50*time.Millisecond, 5*time.Millisecond) // retransmitted, acknowledged
	cum, _ := acks()
	if want := (dta.Ack{Seq: 503, Wide: true, Span: 4}); len(cum) == 0 || cum[len(cum)-1] != want {
		t.Fatalf("acks %+v once the collector acknowledged; want the last %+v", cum, want)
	}
	// The collector goes silent: 504 and 505 stay pending, and the QP is
	// given up after MaxRetries timeouts.
	ft.silent = true
	send(504)
	send(505)
	h.advance(2*time.Second, 5*time.Millisecond)
	_, nacks := acks()
	want := []dta.Ack{{Seq: 504, NACK: true, Wide: true, Reason: dta.ReasonUnconfirmed}, {Seq: 505, NACK: true, Wide: true, Reason: dta.ReasonUnconfirmed}}
	if !slices.Equal(nacks, want) {
		t.Fatalf("NACKs %+v, want %+v", nacks, want)
	}
	if c := h.e.Counters(); c.Unconfirmed != 2 || c.Reconnects == 0 {
		t.Fatalf("counters %+v: want 2 unconfirmed after a reconnection", c)
	}
	// NACKed, they no longer hold the ack back.
	ft.silent = false
	h.advance(3*time.Second, 5*time.Millisecond)
	send(506)
	h.advance(50*time.Millisecond, 5*time.Millisecond)
	if cum, _ := acks(); len(cum) == 0 || cum[len(cum)-1].Seq != 506 {
		t.Fatalf("acks %+v after reconnecting, want up to 506", cum)
	}
}

// TestAdvertisedHeads: an Append advertisement with HeadsFollow is followed
// by the list heads; the instance is ready once every list's head came, and
// each list is written from its head. Heads that skip a list, or name more
// lists than the layout has, fail the instance as a bad advertisement.
func TestAdvertisedHeads(t *testing.T) {
	l := appendlist.Layout{Lists: 3, Entries: 64, EntrySize: 4, Batch: 1, Markers: true}
	adv := func(q *fakeQP, real []byte) []byte {
		a, err := dta.ParseAdvertisement(real)
		if err != nil {
			t.Fatal(err)
		}
		a.HeadsFollow = true
		b, err := a.AppendTo(nil)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	for name, tc := range map[string]struct {
		msgs [][]byte
		ok   bool
	}{
		"two SENDs":    {[][]byte{dta.AppendListHeads(nil, 0, []uint64{5, 64 + 7}), dta.AppendListHeads(nil, 2, []uint64{200})}, true},
		"skips one":    {[][]byte{dta.AppendListHeads(nil, 0, []uint64{5}), dta.AppendListHeads(nil, 2, []uint64{200})}, false},
		"one too many": {[][]byte{dta.AppendListHeads(nil, 0, []uint64{5, 7, 9, 11})}, false},
		"not heads":    {[][]byte{[]byte("DTAK and more bytes")}, false},
	} {
		t.Run(name, func(t *testing.T) {
			in := alInst(t, l)
			ft := newFakeTarget(t, in)
			ft.advertBody = adv
			ft.followUp = func(*fakeQP) [][]byte { return tc.msgs }
			h := newHarness(t, Config{}, ft)
			h.e.Start(h.now)
			h.pump()
			done, err := h.e.Connected()
			if !tc.ok {
				ins := h.e.Instances()
				if !done || !errors.Is(err, ErrAdvertisement) || len(ins) != 1 || ins[0].Ready || !errors.Is(ins[0].Err, ErrAdvertisement) {
					t.Fatalf("connected %v, %v, instances %+v; want the instance failed with an advertisement error", done, err, ins)
				}
				return
			}
			if !done || err != nil {
				t.Fatalf("connected %v, %v", done, err)
			}
			for list := range uint32(3) {
				h.report(dta.Report{Header: dta.Header{Opcode: dta.OpAppend}, Append: dta.Append{ListID: list, Data: []byte{0, 0, 0, byte(list + 1)}}})
			}
			h.pump()
			// List 0 at position 5, list 1 at 7 (lap 1: marker 2), list 2 at
			// 200 mod 64 = 8 (lap 3: marker 4).
			for list, want := range []struct{ slot, marker uint32 }{{5, 1}, {7, 2}, {8, 4}} {
				o := l.ListOffset(uint32(list)) + uint64(want.slot)*8
				got := in.mem[o : o+8]
				if got[3] != byte(list+1) || binary.LittleEndian.Uint32(got[4:]) != want.marker {
					t.Errorf("list %d: slot %d holds %x, want its entry with marker %d", list, want.slot, got, want.marker)
				}
			}
		})
	}
}

// TestAppendLinger: wide Append entries in a partial batch hold their
// source's cumulative ack back until AppendLinger passes; then the batch is
// written, and acknowledged, and so are they.
func TestAppendLinger(t *testing.T) {
	l := appendlist.Layout{Lists: 2, Entries: 64, EntrySize: 8, Batch: 8}
	in := alInst(t, l)
	ft := newFakeTarget(t, in)
	h := newHarness(t, Config{AppendLinger: 5 * time.Millisecond}, ft)
	h.connect()
	for seq := uint32(10); seq < 13; seq++ {
		r := alReport(seq%2, uint64(seq), false)
		r.Header.Sequenced, r.Header.Wide, r.Header.Seq = true, true, seq
		h.report(r)
		h.pump()
	}
	h.ackedAfterLinger(12)
	if c := h.e.Counters(); c.Lingered != 2 || c.Writes != 2 {
		t.Fatalf("counters %+v: want the two partial batches written", c)
	}
	for i, v := range []uint64{10, 12} {
		if got := binary.BigEndian.Uint64(in.mem[l.ListOffset(0)+uint64(i)*8:]); got != v {
			t.Errorf("list 0 entry %d = %d, want %d", i, got, v)
		}
	}
}

// TestAckKeepalive: while a source has reports pending, its cumulative ack
// is sent again every 50 ms, moved or not, so that a sender waiting for
// credit knows the translator is there.
func TestAckKeepalive(t *testing.T) {
	ft := newFakeTarget(t, kiInst(t))
	h := newHarness(t, Config{}, ft)
	h.connect()
	send := h.wideKI
	send(40)
	ft.silent = true // 41 stays pending
	send(41)
	h.nacks = nil
	h.advance(160*time.Millisecond, 5*time.Millisecond)
	n := 0
	for _, d := range h.nacks {
		if a, err := dta.ParseAck(d.Buf); err == nil && !a.NACK {
			if a.Seq != 40 {
				t.Fatalf("ack %+v while 41 is pending", a)
			}
			n++
		}
	}
	if n < 3 {
		t.Fatalf("%d acks in 160 ms with a report pending, want one each 50 ms", n)
	}
}

// TestHeldResendKeepalive: a resend taken whose operations the collector
// has not acknowledged yet (held pending, after the cumulative ack passed
// its number when it was NACKed) keeps its source's cumulative ack coming
// every 50 ms, however long after the NACK, so that its sender, waiting
// for its ack of its own, does not take the silence for a dead translator.
func TestHeldResendKeepalive(t *testing.T) {
	ft := newFakeTarget(t, kiInst(t))
	h := newHarness(t, Config{}, ft)
	h.connect()
	send := h.wideKI
	send(40)
	send(42)                                      // 41 missing: NACKed, passed by the cumulative ack
	h.advance(3*time.Second, 50*time.Millisecond) // past the 2 s a resend is owed
	ft.silent = true                              // the resend stays pending
	send(41)
	h.nacks = nil
	h.advance(160*time.Millisecond, 5*time.Millisecond)
	n := 0
	for _, d := range h.nacks {
		if a, err := dta.ParseAck(d.Buf); err == nil && !a.NACK && !a.Resend {
			n++
		}
	}
	if n < 3 {
		t.Fatalf("%d acks in 160 ms with a resend pending, want one each 50 ms", n)
	}
}

// TestResendAck: a report NACKed for a resend is acknowledged on its own
// once its resend is applied and the collector acknowledged it, and so is
// a copy of it that comes again. (A copy older than the window is refused:
// TestStaleCopyRefused.)
func TestResendAck(t *testing.T) {
	ft := newFakeTarget(t, kiInst(t))
	h := newHarness(t, Config{RingSize: 4}, ft)
	h.connect()
	send := h.wideKI
	collect := func() (resends []uint32, cum uint32) {
		for _, d := range h.nacks {
			if a, err := dta.ParseAck(d.Buf); err == nil && !a.NACK {
				if a.Resend {
					resends = append(resends, a.Seq)
				} else {
					cum = max(cum, a.Seq)
				}
			}
		}
		h.nacks = nil
		return resends, cum
	}
	ft.noAck = true
	for seq := uint32(0); seq < 5; seq++ { // a ring of 4: 4 is NACKed busy
		send(seq)
	}
	ft.noAck = false
	h.advance(100*time.Millisecond, 10*time.Millisecond)
	if rs, cum := collect(); len(rs) != 0 || cum != 4 {
		t.Fatalf("resend acks %v, cumulative ack %d; want none, 4 (4 NACKed)", rs, cum)
	}
	send(4) // the resend
	if rs, _ := collect(); !slices.Equal(rs, []uint32{4}) {
		t.Fatalf("resend acks %v, want [4]", rs)
	}
	send(4) // again: a duplicate, found applied
	if rs, _ := collect(); !slices.Equal(rs, []uint32{4}) {
		t.Fatalf("resend acks %v for the copy, want [4]", rs)
	}
	if c := h.e.Counters(); c.ResendAcks != 2 || c.Duplicates != 1 {
		t.Fatalf("counters %+v", c)
	}
}

// TestPendingQueueBounded: a QP whose pending queue is never empty (a
// report always outstanding while older ones settle) keeps the queue
// within a small multiple of the reports outstanding.
func TestPendingQueueBounded(t *testing.T) {
	e, err := NewEngine(Config{Local: testLocal, Collectors: []netip.AddrPort{testTarget}})
	if err != nil {
		t.Fatal(err)
	}
	src := &exactly.State{} // not tracked by e: settling it changes nothing else
	req, err := rc.New(rc.Config{Local: testLocal, Remote: testTarget, Ring: 4, MaxPacket: 64}, 0)
	if err != nil {
		t.Fatal(err)
	}
	q := &qp{req: req}
	for i := range 20000 {
		req.FetchAdd(8, 1, 1, 0) // packet i queued
		q.pend(token{s: src, seq: uint32(i)})
		if i > 0 { // packets before i acknowledged
			req.HandleAck(rocev2.PSN(i-1), rocev2.SyndromeACK, 0)
		}
		e.settle(q)
		if n := len(q.fin.q) - q.fin.head; n != 1 {
			t.Fatalf("after %d: %d pending, want 1", i, n)
		}
	}
	if cap(q.fin.q) > 16 {
		t.Fatalf("pending queue of capacity %d after 20000 reports, one at a time outstanding", cap(q.fin.q))
	}
}

// TestPostcardLinger: a wide postcard holds its source's cumulative ack
// back until its chunk is written and acknowledged: when its flow
// completes, when the flow has waited PostcardLinger (then the late hop
// rewrites the chunk whole), or when the flow has had a postcard per hop
// without completing (a hop came twice).
func TestPostcardLinger(t *testing.T) {
	pc := pcInst(t)
	ft := newFakeTarget(t, pc)
	h := newHarness(t, Config{PostcardLinger: 5 * time.Millisecond}, ft)
	h.connect()
	pcc, _ := postcard.NewCodec(testPC)
	ref, _ := postcard.NewCache(pcc.Layout(), DefaultPostcardCache) // without linger
	refMem := make([]byte, testPC.RegionSize())
	send := func(seq uint32, key uint32, hop uint8, v uint32, pathLen uint8) {
		r := pcReport(key, hop, v)
		r.Postcard.PathLength = pathLen
		r.Header.Sequenced, r.Header.Wide, r.Header.Seq = true, true, seq
		h.report(r)
		h.pump()
		chunks, err := ref.Insert(nil, r.Postcard.Key, postcard.Hop(r.Postcard.Hop), postcard.PathLength(r.Postcard.PathLength), postcard.Value(r.Postcard.Value))
		if err != nil {
			t.Fatal(err)
		}
		for i := range chunks {
			for _, w := range pcc.AppendWrites(nil, &chunks[i]) {
				copy(refMem[w.Offset:], w.Data)
			}
		}
	}
	send(10, 42, 1, 7, 3)
	send(11, 42, 2, 8, 3)
	h.ackedAfterLinger(11)
	// Two runs per copy: hops 1-2, and the blanks after hop 3, which has
	// not come (its slot is left as it is).
	if c := h.e.Counters(); c.Lingered != 1 || c.Writes != 4 || c.PartialChunks != 1 {
		t.Fatalf("counters %+v: want the flow's two copies written once, in two runs each", c)
	}
	send(12, 42, 3, 9, 3) // late: completes the flow, written whole
	h.advance(time.Millisecond, time.Millisecond)
	if a, _ := h.topAck(); a != 12 {
		t.Fatalf("ack %d after the late hop, want 12", a)
	}
	for n := range uint32(5) { // hop 1 five times: as many postcards as hops
		send(13+n, 50, 1, 20+n, 0)
	}
	h.advance(time.Millisecond, time.Millisecond)
	if a, _ := h.topAck(); a != 12 {
		t.Fatalf("ack %d with flow 50 cached, want 12", a)
	}
	send(18, 50, 1, 30, 0)
	h.advance(time.Millisecond, time.Millisecond)
	if a, _ := h.topAck(); a != 17 {
		t.Fatalf("ack %d after a sixth postcard of a 5-hop flow, want 17", a)
	}
	h.advance(6*time.Millisecond, time.Millisecond)
	if a, _ := h.topAck(); a != 18 {
		t.Fatalf("ack %d after PostcardLinger, want 18", a)
	}
	for _, ch := range ref.Flush(nil) {
		for _, w := range pcc.AppendWrites(nil, &ch) {
			copy(refMem[w.Offset:], w.Data)
		}
	}
	if !bytes.Equal(pc.mem, refMem) {
		t.Error("region differs from a translator's without linger")
	}
}

// topAck returns the highest cumulative ack sent so far, if any.
// ackedAfterLinger checks that no report is acknowledged within 3 ms, before
// a 5 ms linger wrote what it held, and that want is 5 ms later.
func (h *harness) ackedAfterLinger(want uint32) {
	h.t.Helper()
	h.advance(3*time.Millisecond, time.Millisecond)
	if top, got := h.topAck(); got {
		h.t.Fatalf("ack %d before the linger wrote what it held", top)
	}
	h.advance(5*time.Millisecond, time.Millisecond)
	if top, got := h.topAck(); !got || top != want {
		h.t.Fatalf("ack %d (%v) after the linger, want %d", top, got, want)
	}
}

func (h *harness) topAck() (uint32, bool) {
	top, got := uint32(0), false
	for _, d := range h.nacks {
		if a, err := dta.ParseAck(d.Buf); err == nil && !a.NACK && (!got || a.Seq > top) {
			top, got = a.Seq, true
		}
	}
	return top, got
}

// TestCopyBeforeFirstIsUnconfirmed: a wide report numbered before the
// first this engine saw from its source is a copy of one a translator
// before it (on the same address) may have applied: it is NACKed
// unconfirmed, not applied.
func TestCopyBeforeFirstIsUnconfirmed(t *testing.T) {
	ft := newFakeTarget(t, kiInst(t))
	h := newHarness(t, Config{}, ft)
	h.connect()
	h.wideKI(100)
	h.wideKI(101)
	h.nacks = nil
	h.wideKI(90)
	h.advance(50*time.Millisecond, 5*time.Millisecond)
	var nacks []dta.Ack
	for _, d := range h.nacks {
		if a, err := dta.ParseAck(d.Buf); err == nil && a.NACK {
			nacks = append(nacks, a)
		}
	}
	if want := []dta.Ack{{Seq: 90, NACK: true, Wide: true, Reason: dta.ReasonUnconfirmed}}; !slices.Equal(nacks, want) {
		t.Fatalf("NACKs %+v, want %+v", nacks, want)
	}
	st, err := keyincr.NewStore(testKI, ft.insts[0].mem)
	if err != nil {
		t.Fatal(err)
	}
	if v, err := st.Query(7, 1); err != nil || v != 2 {
		t.Errorf("key 7 counts %d (%v), want 2: the copy not applied", v, err)
	}
	if c := h.e.Counters(); c.Unconfirmed != 1 || c.Duplicates != 0 {
		t.Errorf("counters %+v: want 1 unconfirmed", c)
	}
}
