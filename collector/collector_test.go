package collector

import (
	"bytes"
	"context"
	"errors"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/dtakit/dtakit/appendlist"
	"github.com/dtakit/dtakit/dta"
	"github.com/dtakit/dtakit/keyincr"
	"github.com/dtakit/dtakit/keywrite"
	"github.com/dtakit/dtakit/postcard"
	"github.com/dtakit/dtakit/rocev2"
	"github.com/dtakit/dtakit/rocev2/cm"
)

// requester is a minimal active side built from rocev2 and cm: one RC
// connection to one collector instance over a real UDP socket.
type requester struct {
	tb        testing.TB
	uc        *net.UDPConn
	addr      netip.AddrPort
	target    netip.AddrPort
	qpn       uint32
	remoteQPN uint32
	psn       rocev2.PSN
	advert    dta.Advertisement
}

func newRequester(tb testing.TB, target netip.AddrPort) *requester {
	uc, err := net.ListenUDP("udp4", net.UDPAddrFromAddrPort(netip.MustParseAddrPort("127.0.0.1:0")))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { uc.Close() })
	return &requester{tb: tb, uc: uc, addr: uc.LocalAddr().(*net.UDPAddr).AddrPort(), target: target, qpn: 0x42, psn: 0xFFFFFE}
}

func (r *requester) send(p rocev2.Packet) {
	r.tb.Helper()
	p.BTH.PKey = rocev2.DefaultPKey
	b, err := p.AppendDatagram(nil, r.addr, r.target)
	if err != nil {
		r.tb.Fatal(err)
	}
	if _, err := r.uc.WriteToUDPAddrPort(b, r.target); err != nil {
		r.tb.Fatal(err)
	}
}

func (r *requester) recv() rocev2.Packet {
	r.tb.Helper()
	buf := make([]byte, 5000)
	if err := r.uc.SetReadDeadline(time.Now().Add(5 * time.Second)); err != nil {
		r.tb.Fatal(err)
	}
	n, from, err := r.uc.ReadFromUDPAddrPort(buf)
	if err != nil {
		r.tb.Fatal(err)
	}
	var p rocev2.Packet
	if err := p.DecodeDatagram(buf[:n], from, r.addr); err != nil {
		r.tb.Fatal(err)
	}
	return p
}

func (r *requester) sendMAD(h cm.MADHeader, m cm.Message) {
	r.tb.Helper()
	mad, err := cm.AppendMAD(nil, h, m)
	if err != nil {
		r.tb.Fatal(err)
	}
	r.send(cm.Packet(mad, 0))
}

func (r *requester) recvMAD() cm.Message {
	r.tb.Helper()
	p := r.recv()
	if p.BTH.DestQP != cm.GSIQP {
		r.tb.Fatalf("want a CM MAD, got %v", p.BTH.Opcode)
	}
	_, m, err := cm.DecodeMAD(p.Payload)
	if err != nil {
		r.tb.Fatal(err)
	}
	return m
}

// connect runs the CM handshake on port and receives the advertisement;
// it returns the Reject when the port refuses.
func (r *requester) connect(port uint16) *cm.Reject {
	r.tb.Helper()
	req := &cm.ConnectRequest{LocalCommID: uint32(port) * 3, ServiceID: cm.ServiceID(port), LocalQPN: r.qpn,
		StartingPSN: uint32(r.psn), PKey: 0xFFFF, PathMTU: cm.MTU1024, MaxCMRetries: 15, RetryCount: 3}
	if err := req.SetIPPrivateData(cm.IPHeader{SrcPort: r.addr.Port(), Src: r.addr.Addr(), Dst: r.target.Addr()}, nil); err != nil {
		r.tb.Fatal(err)
	}
	r.sendMAD(cm.Header(uint64(port), cm.AttrREQ), req)
	var rep *cm.ConnectReply
	switch m := r.recvMAD().(type) {
	case *cm.Reject:
		return m
	case *cm.ConnectReply:
		rep = m
	default:
		r.tb.Fatalf("REQ answered with %v", m)
	}
	r.remoteQPN = rep.LocalQPN
	reqPSN := r.psn
	r.psn = rocev2.PSN(rep.StartingPSN) // each side sends from the PSN the other gave
	rtu := &cm.ReadyToUse{LocalCommID: req.LocalCommID, RemoteCommID: rep.LocalCommID}
	r.sendMAD(cm.Header(uint64(port), cm.AttrRTU), rtu)
	s := r.recv()
	// A REP sent again (the collector's CM timer ran out before the RTU
	// came, as under load) is answered with the RTU again, as a real
	// requester does.
	for i := 0; s.BTH.DestQP == cm.GSIQP && i < 3; i++ {
		r.sendMAD(cm.Header(uint64(port), cm.AttrRTU), rtu)
		s = r.recv()
	}
	if s.BTH.Opcode != rocev2.RCSendOnly || s.BTH.PSN != reqPSN || s.BTH.DestQP != r.qpn {
		r.tb.Fatalf("advertisement SEND %+v", s)
	}
	r.send(rocev2.Packet{BTH: rocev2.BTH{Opcode: rocev2.RCAcknowledge, DestQP: r.remoteQPN, PSN: s.BTH.PSN},
		AETH: rocev2.AETH{Syndrome: rocev2.SyndromeACK, MSN: 1}})
	a, err := dta.ParseAdvertisement(s.Payload)
	if err != nil {
		r.tb.Fatal(err)
	}
	r.advert = a
	return nil
}

func (r *requester) next() rocev2.PSN {
	p := r.psn
	r.psn = r.psn.Next()
	return p
}

// write writes data at offset in the advertised region and waits for the ACK.
func (r *requester) write(off uint64, data []byte, imm *uint32) {
	r.tb.Helper()
	p := rocev2.Packet{BTH: rocev2.BTH{Opcode: rocev2.RCWriteOnly, DestQP: r.remoteQPN, PSN: r.next(), AckReq: true},
		RETH: rocev2.RETH{VA: r.advert.VA + off, RKey: r.advert.RKey, DMALength: uint32(len(data))}, Payload: data}
	if imm != nil {
		p.BTH.Opcode, p.ImmDt.Data = rocev2.RCWriteOnlyImm, *imm
	}
	r.send(p)
	if a := r.recv(); a.BTH.Opcode != rocev2.RCAcknowledge || a.AETH.Syndrome != rocev2.SyndromeACK || a.BTH.PSN != p.BTH.PSN {
		r.tb.Fatalf("write answered %v syndrome %#x PSN %#x", a.BTH.Opcode, a.AETH.Syndrome, a.BTH.PSN)
	}
}

func (r *requester) fetchAdd(off, add uint64) uint64 {
	r.tb.Helper()
	psn := r.next()
	r.send(rocev2.Packet{BTH: rocev2.BTH{Opcode: rocev2.RCFetchAdd, DestQP: r.remoteQPN, PSN: psn, AckReq: true},
		AtomicETH: rocev2.AtomicETH{VA: r.advert.VA + off, RKey: r.advert.RKey, SwapAddData: add}})
	a := r.recv()
	if a.BTH.Opcode != rocev2.RCAtomicAcknowledge || a.BTH.PSN != psn {
		r.tb.Fatalf("fetch-add answered %v PSN %#x", a.BTH.Opcode, a.BTH.PSN)
	}
	return a.AtomicAckETH.OrigRemoteData
}

func TestCollectorLoopback(t *testing.T) {
	l := newLoopback(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	served := make(chan error, 1)
	go func() { served <- l.c.Serve(ctx) }()

	conns := l.discover()
	rd := l.writeEach(conns)
	l.query(ctx, rd)

	if err := l.c.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-served; err != nil {
		t.Errorf("Serve after Close: %v", err)
	}
	if _, err := l.c.AddKeyWrite(l.kwl); !errors.Is(err, ErrState) {
		t.Errorf("Add after Close: %v", err)
	}
}

// loopback is TestCollectorLoopback's collector: one instance of each
// primitive, started.
type loopback struct {
	t     *testing.T
	c     *Collector
	kwl   keywrite.Layout
	kil   keyincr.Layout
	codec *postcard.Codec
	apl   appendlist.Layout
	kw    *keywrite.Store
	ki    *keyincr.Store
	pc    *postcard.Store
	ap    *appendlist.Store
}

func newLoopback(t *testing.T) *loopback {
	l := &loopback{t: t, kwl: keywrite.Layout{Slots: 1024, DataSize: 12}, kil: keyincr.Layout{Slots: 512},
		apl: appendlist.Layout{Lists: 4, Entries: 16, EntrySize: 8, Batch: 2}}
	c, err := New(Config{Addr: netip.MustParseAddrPort("127.0.0.1:0")})
	if err != nil {
		t.Fatal(err)
	}
	l.c = c
	must(t, l.kwl.Validate())
	must(t, l.kil.Validate())
	if l.codec, err = postcard.NewCodec(postcard.Layout{Chunks: 256, Copies: 2}); err != nil {
		t.Fatal(err)
	}
	if l.kw, err = c.AddKeyWrite(l.kwl); err != nil {
		t.Fatal(err)
	}
	if l.ki, err = c.AddKeyIncrement(l.kil); err != nil {
		t.Fatal(err)
	}
	if l.pc, err = c.AddPostcard(l.codec.Layout()); err != nil {
		t.Fatal(err)
	}
	if l.ap, err = c.AddAppend(l.apl); err != nil {
		t.Fatal(err)
	}
	must(t, c.Start())
	return l
}

// discover connects to every instance as a translator does, checks each
// advertisement, and the Reject that ends discovery.
func (l *loopback) discover() []*requester {
	t := l.t
	insts := l.c.Instances()
	wantPrims := []dta.Opcode{dta.OpKeyWrite, dta.OpKeyIncrement, dta.OpPostcard, dta.OpAppend}
	conns := make([]*requester, len(insts))
	for i, in := range insts {
		if in.Primitive != wantPrims[i] || in.CMPort != DefaultCMPort+uint16(i) || in.Index != i {
			t.Fatalf("instance %d: %+v", i, in)
		}
		r := newRequester(t, l.c.Addr())
		if rej := r.connect(in.CMPort); rej != nil {
			t.Fatalf("instance %d rejected: reason %d", i, rej.Reason)
		}
		a := r.advert
		if a.Primitive != in.Primitive || a.VA != in.VA || a.RKey != in.RKey || a.Length != in.Length {
			t.Fatalf("instance %d advertised %+v, want %+v", i, a, in)
		}
		conns[i] = r
	}
	// Each advertisement's geometry decodes to the instance's layout.
	if g, err := keywrite.ParseLayout(conns[0].advert.Geometry); err != nil || g.Slots != l.kwl.Slots || g.DataSize != l.kwl.DataSize {
		t.Errorf("key-write geometry: %+v, %v", g, err)
	}
	if g, err := keyincr.ParseLayout(conns[1].advert.Geometry); err != nil || g.Slots != l.kil.Slots {
		t.Errorf("key-increment geometry: %+v, %v", g, err)
	}
	if g, err := postcard.ParseLayout(conns[2].advert.Geometry); err != nil || g != l.codec.Layout() {
		t.Errorf("postcard geometry: %+v, %v", g, err)
	}
	if g, err := appendlist.ParseLayout(conns[3].advert.Geometry); err != nil || g != l.apl {
		t.Errorf("append geometry: %+v, %v", g, err)
	}
	// Discovery ends with a Reject, reason 8, on the port after the last.
	if rej := newRequester(t, l.c.Addr()).connect(DefaultCMPort + uint16(len(insts))); rej == nil || rej.Reason != cm.RejectInvalidServiceID {
		t.Fatalf("port after the last instance: %+v", rej)
	}
	return conns
}

// writeEach sends each instance what a translator would for one report,
// and returns a reader of the Append list written.
func (l *loopback) writeEach(conns []*requester) *appendlist.Reader {
	t := l.t
	// Key-Write: the translator's writes of a report, then a query.
	writes, _, err := l.kwl.AppendWrites(nil, nil, 0xABCD, []byte("twelve bytes"), 3)
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range writes {
		conns[0].write(w.Offset, w.Data, nil)
	}
	// Key-Increment: FETCH_ADDs, answered with the previous values.
	ops, _ := l.kil.AppendWrites(nil, 77, 5, 2)
	for range 2 {
		for _, op := range ops {
			conns[1].fetchAdd(op.Offset, op.Add)
		}
	}
	// Postcarding: one flow's chunk writes.
	cache, _ := postcard.NewCache(l.codec.Layout(), 16)
	chunks, err := cache.Insert(nil, 9, 1, 2, 100)
	if err != nil {
		t.Fatal(err)
	}
	chunks, err = cache.Insert(chunks, 9, 2, 2, 200)
	if err != nil || len(chunks) != 1 {
		t.Fatalf("cache: %d chunks, %v", len(chunks), err)
	}
	for _, w := range l.codec.AppendWrites(nil, &chunks[0]) {
		conns[2].write(w.Offset, w.Data, nil)
	}
	// Append: a batch of two entries to list 3, with the immediate naming it.
	b, _ := appendlist.NewBatcher(l.apl)
	aw, _ := b.AppendWrites(nil, 3, []byte("entry-01"), false)
	aw, _ = b.AppendWrites(aw, 3, []byte("entry-02"), true)
	if len(aw) != 1 || !aw[0].Imm {
		t.Fatalf("batcher writes %+v", aw)
	}
	rd, err := l.ap.Reader(3)
	if err != nil {
		t.Fatal(err)
	}
	conns[3].write(aw[0].Offset, aw[0].Data, &aw[0].ImmData)
	return rd
}

// query checks the counters and what each instance's store answers.
func (l *loopback) query(ctx context.Context, rd *appendlist.Reader) {
	t := l.t
	// Counters orders the queries after the writes (package doc).
	if cnt := l.c.Counters(); cnt.WritePackets != 3+2+1 || cnt.Atomics != 4 || cnt.Completions != 1 {
		t.Fatalf("counters %+v", cnt)
	}
	res, err := l.kw.Query(0xABCD, 3, keywrite.Plurality)
	if err != nil || res.Status != keywrite.Found || !bytes.Equal(res.Data, []byte("twelve bytes")) {
		t.Errorf("key-write query: %+v, %v", res, err)
	}
	if v, err := l.ki.Query(77, 2); err != nil || v != 10 {
		t.Errorf("key-increment query: %d, %v", v, err)
	}
	table, _ := postcard.NewTable(l.codec.Layout(), []uint32{100, 200, 300})
	if path, out := l.pc.Query(table, 9); out != postcard.Found || path.Len != 2 || path.Hops[0] != 100 || path.Hops[1] != 200 {
		t.Errorf("postcard query: %v %+v", out, path)
	}
	wctx, wcancel := context.WithTimeout(ctx, 5*time.Second)
	defer wcancel()
	if err := rd.Wait(wctx); err != nil {
		t.Fatalf("append notification: %v", err)
	}
	buf := make([]byte, 4*8)
	if n, err := rd.Read(buf); err != nil || n != 2 || string(buf[:16]) != "entry-01entry-02" {
		t.Errorf("append read: %d %q, %v", n, buf[:16], err)
	}
}

func TestCollectorConfig(t *testing.T) {
	if _, err := New(Config{Addr: netip.MustParseAddrPort("0.0.0.0:4791")}); !errors.Is(err, ErrConfig) {
		t.Errorf("wildcard address: %v", err)
	}
	c, err := New(Config{CMPort: 65535, Addr: netip.MustParseAddrPort("127.0.0.1:0")})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	l := keyincr.Layout{Slots: 8}
	if _, err := c.AddKeyIncrement(l); err != nil {
		t.Fatal(err)
	}
	if _, err := c.AddKeyIncrement(l); !errors.Is(err, ErrRegion) {
		t.Errorf("second instance past port 65535: %v", err)
	}
}
