package e2e

import (
	"bytes"
	"context"
	"net"
	"net/netip"
	"sync"
	"testing"
	"time"
	"unsafe"

	"github.com/dtakit/dtakit/dta"
	"github.com/dtakit/dtakit/keyincr"
	"github.com/dtakit/dtakit/keywrite"
	"github.com/dtakit/dtakit/reporter"
	"github.com/dtakit/dtakit/rocev2"
	"github.com/dtakit/dtakit/rocev2/target"
	"github.com/dtakit/dtakit/translator"
)

const guardLen = 4096 // guard bytes around each region

// guardedTarget is a bare software target serving a Key-Write instance (CM
// port 40050) and a Key-Increment instance (40051), as a collector does,
// over regions carved from one buffer with guard bytes before, between and
// after them: a write outside the regions changes a guard byte.
type guardedTarget struct {
	t      *target.Target
	addr   netip.AddrPort
	all    []byte
	guards [][2]int // [from, to) of each guard
	kwReg  *target.Region
	kiReg  *target.Region
	kw     *keywrite.Store
	ki     *keyincr.Store
	uc     *net.UDPConn
	cancel context.CancelFunc
	done   chan error
}

func newGuardedTarget(tb testing.TB, g geometry) *guardedTarget {
	tb.Helper()
	kwSize, kiSize := int(g.kw.RegionSize()), int(g.ki.RegionSize())
	n := 3*guardLen + kwSize + kiSize
	words := make([]uint64, (n+7)/8) // 8-byte aligned, for the atomics
	all := unsafeBytes(words)[:n]
	for i := range all {
		all[i] = 0xA5
	}
	gt := &guardedTarget{all: all, done: make(chan error, 1)}
	kwMem := all[guardLen : guardLen+kwSize : guardLen+kwSize]
	kiOff := 2*guardLen + kwSize
	kiMem := all[kiOff : kiOff+kiSize : kiOff+kiSize]
	clear(kwMem)
	clear(kiMem)
	gt.guards = [][2]int{{0, guardLen}, {guardLen + kwSize, kiOff}, {kiOff + kiSize, n}}
	var err error
	if gt.kw, err = keywrite.NewStore(g.kw, kwMem); err != nil {
		tb.Fatal(err)
	}
	if gt.ki, err = keyincr.NewStore(g.ki, kiMem); err != nil {
		tb.Fatal(err)
	}
	if gt.uc, err = net.ListenUDP("udp", net.UDPAddrFromAddrPort(anyLoopback)); err != nil {
		tb.Fatal(err)
	}
	gt.addr = gt.uc.LocalAddr().(*net.UDPAddr).AddrPort()
	if gt.t, err = target.New(target.Config{Addr: gt.addr}); err != nil {
		tb.Fatal(err)
	}
	for i, r := range []struct {
		mem    []byte
		access target.Access
		prim   dta.Opcode
		geo    func([]byte) ([]byte, error)
		reg    **target.Region
	}{
		{kwMem, target.RemoteWrite, dta.OpKeyWrite, g.kw.AppendBinary, &gt.kwReg},
		{kiMem, target.RemoteAtomic, dta.OpKeyIncrement, g.ki.AppendBinary, &gt.kiReg},
	} {
		if *r.reg, err = gt.t.Register(r.mem, r.access); err != nil {
			tb.Fatal(err)
		}
		geo, err := r.geo(nil)
		if err != nil {
			tb.Fatal(err)
		}
		ad := dta.Advertisement{VA: (*r.reg).VA(), Length: uint32(len(r.mem)), RKey: (*r.reg).RKey(), Primitive: r.prim, Geometry: geo}
		greeting, err := ad.AppendTo(nil)
		if err != nil {
			tb.Fatal(err)
		}
		if err := gt.t.Listen(uint16(translator.DefaultCMPort+i), target.ListenConfig{Greeting: greeting}); err != nil {
			tb.Fatal(err)
		}
	}
	var ctx context.Context
	ctx, gt.cancel = context.WithCancel(context.Background())
	go func() { gt.done <- gt.t.Serve(ctx, gt.uc) }()
	return gt
}

func (gt *guardedTarget) close(tb testing.TB) {
	tb.Helper()
	gt.cancel()
	if err := <-gt.done; err != nil {
		tb.Errorf("target serve: %v", err)
	}
	gt.uc.Close()
	gt.t.Close()
}

// checkGuards fails tb if a byte outside the regions changed.
func (gt *guardedTarget) checkGuards(tb testing.TB) {
	tb.Helper()
	gt.t.Counters() // orders this goroutine after the target's writes
	for _, g := range gt.guards {
		for i := g[0]; i < g[1]; i++ {
			if gt.all[i] != 0xA5 {
				tb.Fatalf("byte %d outside the regions changed to %#x", i, gt.all[i])
			}
		}
	}
}

// oneShot returns a tamper function that applies mutate to the first packet
// with opcode op, and records the last BTH and RETH/AtomicETH it saw.
type observer struct {
	mu     sync.Mutex
	op     rocev2.Opcode
	mutate func(*rocev2.Packet)
	fired  bool
	last   map[rocev2.Opcode]rocev2.Packet // headers only
}

func (o *observer) tamper(p *rocev2.Packet) ([]rocev2.Packet, bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	h := *p
	h.Payload = nil
	o.last[p.BTH.Opcode] = h
	if o.mutate == nil || o.fired || p.BTH.Opcode != o.op {
		return nil, false
	}
	o.fired = true
	q := *p
	o.mutate(&q)
	return []rocev2.Packet{q}, true
}

func (o *observer) arm(op rocev2.Opcode, mutate func(*rocev2.Packet)) {
	o.mu.Lock()
	o.op, o.mutate, o.fired = op, mutate, false
	o.mu.Unlock()
}

func (o *observer) lastSeen(op rocev2.Opcode) rocev2.Packet {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.last[op]
}

// TestHostileFrames injects bad frames into the live connections of a
// translator streaming Key-Write and Key-Increment reports into a guarded
// target: frames rewritten by the relay (wrong PSN ahead and behind, wrong
// rkey, another region's rkey, addresses outside the region, a DMA length
// that does not match, a misaligned atomic) and frames from a raw socket
// (bad ICRC; a good frame from another IP address). After each it checks
// the counters the fault must move on both sides, that no byte outside the
// regions changed, that the connection recovered (or was reconnected, for
// the faults after which a NIC puts the QP in the error state), that later
// reports land, and that the regions equal reference stores fed exactly
// the reports that were not lost.
func TestHostileFrames(t *testing.T) {
	g := newGeometry(t)
	gt := newGuardedTarget(t, g)
	defer gt.close(t)
	r, err := newRelay(gt.addr, 7)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	h := &hostile{gt: gt, obs: &observer{last: make(map[rocev2.Opcode]rocev2.Packet)}}
	r.setTamper(h.obs.tamper)
	h.tr = startTranslator(t, translator.Config{Collectors: []netip.AddrPort{r.Addr()}})
	defer h.tr.Close(time.Second)
	h.rep = newReporter(t, h.tr)
	defer h.rep.Close()
	h.m = newModel(t, g)
	h.stream(t, 20)
	h.check(t, "before")

	for _, c := range h.rewrites() {
		h.rewrite(t, c)
	}
	// Frames from raw sockets, made from what the relay saw of the live
	// Key-Write QP: its QPN, and the PSN the target expects next.
	last := h.obs.lastSeen(rocev2.RCWriteOnly)
	good := rocev2.Packet{
		BTH:     rocev2.BTH{Opcode: rocev2.RCWriteOnly, PKey: rocev2.DefaultPKey, DestQP: last.BTH.DestQP, PSN: last.BTH.PSN.Next(), AckReq: true},
		RETH:    rocev2.RETH{VA: gt.kwReg.VA(), RKey: gt.kwReg.RKey(), DMALength: 8},
		Payload: []byte{1, 2, 3, 4, 5, 6, 7, 8},
	}
	for _, c := range []rawFrame{
		{"bad icrc", anyLoopback, true, func(b, a target.Counters) bool { return a.BadICRC == b.BadICRC+1 }},
		{"another source address", netip.MustParseAddrPort("127.0.0.2:0"), false, func(b, a target.Counters) bool { return a.Foreign == b.Foreign+1 }},
	} {
		h.raw(t, c, good)
	}
	if err := h.tr.Close(2 * time.Second); err != nil {
		t.Error(err)
	}
	h.check(t, "after close")
}

// hostile is TestHostileFrames' pipeline: the guarded target behind the
// relay's observer, the translator and reporter, the reference stores, the
// reports sent and the next key.
type hostile struct {
	gt   *guardedTarget
	obs  *observer
	tr   *translator.Translator
	rep  *reporter.Reporter
	m    *model
	sent uint64
	k    uint32
}

// stream sends n steps of Key-Write and Key-Increment reports, all
// expected to land.
func (h *hostile) stream(t *testing.T, n int) {
	for range n {
		h.sent += uint64(step(t, h.rep, h.m, h.k, sendKW|sendKI))
		h.k++
		waitReports(t, h.rep, h.tr, h.sent)
		waitApplied(t, h.gt.t.Counters, h.tr)
	}
}

// check: no byte outside the regions changed, and the regions equal the
// reference stores.
func (h *hostile) check(t *testing.T, name string) {
	t.Helper()
	gt, m := h.gt, h.m
	gt.checkGuards(t)
	gt.t.Counters()
	if !bytes.Equal(gt.kw.Region(), m.kw.Region()) {
		t.Errorf("%s: key-write region differs from the reference in %d bytes", name, diff(gt.kw.Region(), m.kw.Region()))
	}
	if !bytes.Equal(gt.ki.Region(), m.ki.Region()) {
		t.Errorf("%s: key-increment region differs from the reference in %d bytes", name, diff(gt.ki.Region(), m.ki.Region()))
	}
}

// counts are both sides' counters at one time.
type counts struct {
	tc translator.Counters
	cc target.Counters
}

// rewriteCase is a frame the relay rewrites: the first packet of op after
// it is armed, changed by mutate.
type rewriteCase struct {
	name   string
	op     rocev2.Opcode
	mutate func(*rocev2.Packet)
	fatal  bool // the target puts the QP in the error state; the translator reconnects
	moved  func(b, a counts) bool
}

// rewrites returns the relay's faults: wrong PSN ahead and behind, wrong
// rkey, another region's rkey, addresses outside the region, a DMA length
// that does not match, a misaligned atomic.
func (h *hostile) rewrites() []rewriteCase {
	gt := h.gt
	kwVA, kwLen, kiVA, kiLen := gt.kwReg.VA(), uint64(gt.kwReg.Len()), gt.kiReg.VA(), uint64(gt.kiReg.Len())
	accessNAK := func(b, a counts) bool { return a.cc.NAKAccess > b.cc.NAKAccess && a.tc.AccessNAKs > b.tc.AccessNAKs }
	invalidNAK := func(b, a counts) bool {
		return a.cc.NAKInvalid > b.cc.NAKInvalid && a.tc.InvalidNAKs > b.tc.InvalidNAKs
	}
	return []rewriteCase{
		{"psn ahead", rocev2.RCWriteOnly, func(p *rocev2.Packet) { p.BTH.PSN = p.BTH.PSN.Add(100) }, false,
			func(b, a counts) bool {
				return a.cc.NAKSequence > b.cc.NAKSequence && a.tc.SeqNAKs > b.tc.SeqNAKs && a.tc.Retransmits > b.tc.Retransmits
			}},
		{"psn behind", rocev2.RCFetchAdd, func(p *rocev2.Packet) { p.BTH.PSN = p.BTH.PSN.Add(rocev2.PSNMask - 99) }, false,
			func(b, a counts) bool {
				return a.cc.Duplicates > b.cc.Duplicates && a.tc.Retransmits > b.tc.Retransmits
			}},
		{"wrong rkey", rocev2.RCWriteOnly, func(p *rocev2.Packet) { p.RETH.RKey ^= 0x5A5A }, true, accessNAK},
		{"rkey of the atomic region", rocev2.RCWriteOnly, func(p *rocev2.Packet) { p.RETH.RKey = gt.kiReg.RKey(); p.RETH.VA = kiVA }, true, accessNAK},
		{"write past the end", rocev2.RCWriteOnly, func(p *rocev2.Packet) { p.RETH.VA = kwVA + kwLen - 4 }, true, accessNAK},
		{"write before the start", rocev2.RCWriteOnly, func(p *rocev2.Packet) { p.RETH.VA = kwVA - 8 }, true, accessNAK},
		{"write at VA 2^64-4", rocev2.RCWriteOnly, func(p *rocev2.Packet) { p.RETH.VA = ^uint64(3) }, true, accessNAK},
		{"dma length 2^32-1", rocev2.RCWriteOnly, func(p *rocev2.Packet) { p.RETH.DMALength = ^uint32(0) }, true, invalidNAK},
		{"atomic past the end", rocev2.RCFetchAdd, func(p *rocev2.Packet) { p.AtomicETH.VA = kiVA + kiLen }, true, accessNAK},
		{"atomic on the write-only region", rocev2.RCFetchAdd, func(p *rocev2.Packet) { p.AtomicETH.RKey = gt.kwReg.RKey(); p.AtomicETH.VA = kwVA }, true, accessNAK},
		{"misaligned atomic", rocev2.RCFetchAdd, func(p *rocev2.Packet) { p.AtomicETH.VA += 4 }, true, invalidNAK},
	}
}

// rewrite sends a report whose packet the relay rewrites as c says, and
// checks the counters the fault must move on both sides, that the
// connection recovered (or was reconnected, for the faults after which a
// NIC puts the QP in the error state), and that later reports land.
func (h *hostile) rewrite(t *testing.T, c rewriteCase) {
	tr, gt := h.tr, h.gt
	b := counts{tr.Counters(), gt.t.Counters()}
	h.obs.arm(c.op, c.mutate)
	kinds := sendKW
	if c.op == rocev2.RCFetchAdd {
		kinds = sendKI
	}
	var mm *model
	if !c.fatal {
		mm = h.m // the report lands: the translator resends the packet the relay rewrote
	}
	h.sent += uint64(step(t, h.rep, mm, h.k, kinds))
	h.k++
	waitReports(t, h.rep, tr, h.sent)
	if c.fatal {
		waitReconnected(t, tr, c.name, b.tc.Reconnects)
	}
	waitApplied(t, gt.t.Counters, tr)
	a := counts{tr.Counters(), gt.t.Counters()}
	checkFault(t, c, b, a)
	h.stream(t, 10)
	h.check(t, c.name)
}

// waitReconnected waits until tr reconnected since it had reconnects and
// every instance is ready.
func waitReconnected(t *testing.T, tr *translator.Translator, name string, reconnects uint64) {
	waitFor(t, 5*time.Second, name+": reconnection", func() bool {
		if tr.Counters().Reconnects == reconnects {
			return false
		}
		for _, in := range tr.Instances() {
			if !in.Ready {
				return false
			}
		}
		return true
	})
}

// checkFault checks the counters before (b) and after (a) fault c.
func checkFault(t *testing.T, c rewriteCase, b, a counts) {
	if !c.moved(b, a) {
		t.Errorf("%s: counters did not move as expected:\ntranslator before %+v\nafter %+v\ntarget before %+v\nafter %+v", c.name, b.tc, a.tc, b.cc, a.cc)
	}
	if reconnects := a.tc.Reconnects - b.tc.Reconnects; c.fatal != (reconnects == 1) || reconnects > 1 {
		t.Errorf("%s: %d reconnections", c.name, reconnects)
	}
	// A fatal fault loses the report: its first packet was refused, the
	// second (a Key-Write's or Key-Increment's second copy) flushed.
	if lost := a.tc.Lost - b.tc.Lost; c.fatal && (lost != 2 || a.cc.Flushed-b.cc.Flushed != 1) || !c.fatal && lost != 0 {
		t.Errorf("%s: %d packets lost, %d flushed at the target", c.name, lost, a.cc.Flushed-b.cc.Flushed)
	}
	t.Logf("%s: target NAKs seq %d access %d invalid %d, duplicates %d, flushed %d; translator retransmits %d, reconnects %d, lost %d",
		c.name, a.cc.NAKSequence-b.cc.NAKSequence, a.cc.NAKAccess-b.cc.NAKAccess, a.cc.NAKInvalid-b.cc.NAKInvalid,
		a.cc.Duplicates-b.cc.Duplicates, a.cc.Flushed-b.cc.Flushed, a.tc.Retransmits-b.tc.Retransmits, a.tc.Reconnects-b.tc.Reconnects, a.tc.Lost-b.tc.Lost)
	if a.tc.Dropped != 0 || a.tc.NACKs != 0 {
		t.Errorf("%s: reports refused: %+v", c.name, a.tc)
	}
}

// rawFrame is a frame sent from a raw socket bound to from; bad spoils its
// ICRC.
type rawFrame struct {
	name  string
	from  netip.AddrPort
	bad   bool
	moved func(b, a target.Counters) bool
}

// raw sends packet good as c says and checks the target counted it,
// applied nothing and kept the connection.
func (h *hostile) raw(t *testing.T, c rawFrame, good rocev2.Packet) {
	gt, tr := h.gt, h.tr
	uc, err := net.ListenUDP("udp", net.UDPAddrFromAddrPort(c.from))
	if err != nil {
		t.Fatalf("%s: %v", c.name, err)
	}
	src := uc.LocalAddr().(*net.UDPAddr).AddrPort()
	d, err := good.AppendDatagram(nil, src, gt.addr)
	if err != nil {
		t.Fatal(err)
	}
	if c.bad {
		d[len(d)-1] ^= 0x80
	}
	b, btc := gt.t.Counters(), tr.Counters()
	if _, err := uc.WriteToUDPAddrPort(d, gt.addr); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 2*time.Second, c.name+" counted", func() bool { return gt.t.Counters().Frames > b.Frames })
	uc.Close()
	a := gt.t.Counters()
	if !c.moved(b, a) || a.WritePackets != b.WritePackets {
		t.Errorf("%s: target before %+v\nafter %+v", c.name, b, a)
	}
	h.stream(t, 10)
	if atc := tr.Counters(); atc.Reconnects != btc.Reconnects || atc.Lost != btc.Lost {
		t.Errorf("%s: the connection did not survive: %+v", c.name, atc)
	}
	h.check(t, c.name)
}

func unsafeBytes(w []uint64) []byte {
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(w))), 8*len(w))
}
