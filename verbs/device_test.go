//go:build linux && cgo && rdma

package verbs

import (
	"bytes"
	"encoding/binary"
	"errors"
	"net/netip"
	"os"
	"testing"
	"time"
)

// The device tests need an RDMA device. They skip where
// ibv_get_device_list finds none, except inside .ci/rxe-vm (DTAKIT_RXE=1),
// where they must run. On a Linux host with Soft-RoCE:
//
//	rdma link add rxe0 type rxe netdev eth0
//	DTAKIT_VERBS_ADDR=<eth0's IPv4 address> go test -tags rdma -run Device ./verbs

func needDevice(t testing.TB) *Context {
	t.Helper()
	devs, err := Devices()
	if errors.Is(err, ErrNoDevice) && os.Getenv("DTAKIT_RXE") == "" {
		t.Skipf("no RDMA device (%v): run these tests on a host with an RNIC or Soft-RoCE, or with .ci/rxe-vm", err)
	}
	if err != nil {
		t.Fatalf("Devices: %v", err)
	}
	c, err := Open(os.Getenv("DTAKIT_VERBS_DEVICE"))
	if err != nil {
		t.Fatalf("Open: %v (devices %v)", err, devs)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// gidIndex returns the index of port 1's first IPv4-mapped GID (RoCEv2 over
// IPv4), and the GID.
func gidIndex(t testing.TB, c *Context) (uint8, GID) {
	t.Helper()
	pa, err := c.QueryPort(1)
	if err != nil {
		t.Fatalf("QueryPort: %v", err)
	}
	if pa.State != PortActive {
		t.Fatalf("port 1 is in state %d, not active", pa.State)
	}
	for i := 0; i < pa.GIDTblLen && i < 64; i++ {
		g, err := c.QueryGID(1, i)
		if err != nil {
			continue
		}
		if netip.AddrFrom16(g).Is4In6() {
			return uint8(i), g
		}
	}
	t.Fatalf("port 1 has no IPv4-mapped GID (is the netdev's IPv4 address set?)")
	return 0, GID{}
}

type qpSide struct {
	pd *PD
	cq *CQ
	qp *QP
	mr *MR
}

func newSide(t testing.TB, c *Context) *qpSide {
	t.Helper()
	s := &qpSide{}
	var err error
	if s.pd, err = c.AllocPD(); err != nil {
		t.Fatal(err)
	}
	if s.cq, err = c.CreateCQ(64, nil); err != nil {
		t.Fatal(err)
	}
	if s.qp, err = s.pd.CreateQP(QPInitAttr{SendCQ: s.cq, RecvCQ: s.cq, MaxSendWR: 32, MaxRecvWR: 32, MaxInlineData: 64}); err != nil {
		t.Fatal(err)
	}
	if s.mr, err = s.pd.RegMR(make([]byte, 4096), AccessRemote); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, err := range []error{s.qp.Close(), s.mr.Close(), s.cq.Close(), s.pd.Close(), s.qp.Close(), s.pd.Close()} {
			if err != nil {
				t.Errorf("close: %v", err)
			}
		}
	})
	return s
}

func connectPair(t testing.TB, a, b *qpSide, sgid uint8, gid GID) {
	t.Helper()
	for _, s := range []*qpSide{a, b} {
		if err := s.qp.ToInit(1, AccessRemote); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range [][2]*qpSide{{a, b}, {b, a}} {
		if err := p[0].qp.ToRTR(RTRAttr{DestQPN: p[1].qp.QPN(), RQPSN: 100, PathMTU: MTU1024, DGID: gid, SGIDIndex: sgid, MaxDestRdAtomic: 4, MinRNRTimer: 12}); err != nil {
			t.Fatal(err)
		}
		if err := p[0].qp.ToRTS(RTSAttr{SQPSN: 100, Timeout: 14, RetryCount: 7, RNRRetry: 7, MaxRdAtomic: 4}); err != nil {
			t.Fatal(err)
		}
	}
	if attr, err := a.qp.Query(); err != nil || attr.State != QPRTS || attr.DestQPN != b.qp.QPN() {
		t.Fatalf("Query: %+v, %v", attr, err)
	}
}

func post(t *testing.T, s *qpSide, wr SendWR) WC {
	t.Helper()
	wr.Flags |= SendSignaled
	if err := s.qp.PostSend(&wr); err != nil {
		t.Fatalf("post %v: %v", wr.Opcode, err)
	}
	wcs, err := s.cq.PollWait(1, 5*time.Second)
	if err != nil {
		t.Fatalf("%v: %v", wr.Opcode, err)
	}
	return wcs[0]
}

func mustOK(t *testing.T, wc WC, op WCOpcode) {
	t.Helper()
	if err := wc.Err(); err != nil {
		t.Fatal(err)
	}
	if wc.Opcode != op {
		t.Fatalf("completion opcode %d, want %d", wc.Opcode, op)
	}
}

// exercise runs every operation from a to b and checks b's memory.
func exercise(t *testing.T, a, b *qpSide) {
	t.Helper()
	// SEND into a posted RECV.
	copy(a.mr.Bytes(), "hello, verbs")
	if err := b.qp.PostRecv(1, SGE{MR: b.mr, Offset: 0, Length: 64}); err != nil {
		t.Fatal(err)
	}
	mustOK(t, post(t, a, SendWR{ID: 2, Opcode: OpSend, Local: SGE{MR: a.mr, Length: 12}}), WCSend)
	wcs, err := b.cq.PollWait(1, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	mustOK(t, wcs[0], WCRecv)
	if wcs[0].ID != 1 || wcs[0].ByteLen != 12 || string(b.mr.Bytes()[:12]) != "hello, verbs" {
		t.Fatalf("RECV %+v, data %q", wcs[0], b.mr.Bytes()[:12])
	}

	// RDMA WRITE.
	copy(a.mr.Bytes()[100:], "12345678")
	mustOK(t, post(t, a, SendWR{ID: 3, Opcode: OpWrite, Local: SGE{MR: a.mr, Offset: 100, Length: 8}, RemoteAddr: b.mr.Addr() + 200, RKey: b.mr.RKey()}), WCWrite)
	if got := string(b.mr.Bytes()[200:208]); got != "12345678" {
		t.Fatalf("WRITE left %q", got)
	}

	// Inline WRITE with immediate, consuming a RECV.
	if err := b.qp.PostRecv(4, SGE{}); err != nil {
		t.Fatal(err)
	}
	mustOK(t, post(t, a, SendWR{ID: 5, Opcode: OpWriteImm, Flags: SendInline, Inline: []byte("inline!!"), RemoteAddr: b.mr.Addr() + 300, RKey: b.mr.RKey(), Imm: 0xdeadbeef}), WCWrite)
	if wcs, err = b.cq.PollWait(1, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	mustOK(t, wcs[0], WCRecvImm)
	if !wcs[0].HasImm || wcs[0].Imm != 0xdeadbeef || string(b.mr.Bytes()[300:308]) != "inline!!" {
		t.Fatalf("WRITE with immediate: %+v, data %q", wcs[0], b.mr.Bytes()[300:308])
	}

	// RDMA READ.
	wc := post(t, a, SendWR{ID: 6, Opcode: OpRead, Local: SGE{MR: a.mr, Offset: 400, Length: 8}, RemoteAddr: b.mr.Addr() + 200, RKey: b.mr.RKey()})
	mustOK(t, wc, WCRead)
	if got := string(a.mr.Bytes()[400:408]); got != "12345678" {
		t.Fatalf("READ got %q", got)
	}

	// FETCH_ADD and CMP_SWAP on a host-order 64-bit counter.
	ctr := b.mr.Bytes()[512:520]
	binary.NativeEndian.PutUint64(ctr, 40)
	mustOK(t, post(t, a, SendWR{ID: 7, Opcode: OpFetchAdd, Local: SGE{MR: a.mr, Offset: 600, Length: 8}, RemoteAddr: b.mr.Addr() + 512, RKey: b.mr.RKey(), CompareAdd: 2}), WCFetchAdd)
	if old, now := binary.NativeEndian.Uint64(a.mr.Bytes()[600:]), binary.NativeEndian.Uint64(ctr); old != 40 || now != 42 {
		t.Fatalf("FETCH_ADD: original %d, now %d; want 40, 42", old, now)
	}
	mustOK(t, post(t, a, SendWR{ID: 8, Opcode: OpCompareSwap, Local: SGE{MR: a.mr, Offset: 608, Length: 8}, RemoteAddr: b.mr.Addr() + 512, RKey: b.mr.RKey(), CompareAdd: 42, Swap: 7}), WCCompareSwap)
	if old, now := binary.NativeEndian.Uint64(a.mr.Bytes()[608:]), binary.NativeEndian.Uint64(ctr); old != 42 || now != 7 {
		t.Fatalf("CMP_SWAP: original %d, now %d; want 42, 7", old, now)
	}
	mustOK(t, post(t, a, SendWR{ID: 9, Opcode: OpCompareSwap, Local: SGE{MR: a.mr, Offset: 608, Length: 8}, RemoteAddr: b.mr.Addr() + 512, RKey: b.mr.RKey(), CompareAdd: 42, Swap: 1}), WCCompareSwap)
	if now := binary.NativeEndian.Uint64(ctr); now != 7 {
		t.Fatalf("a failed compare swapped: %d", now)
	}
}

// loopbackPair connects two QPs on one device by hand.
func loopbackPair(t testing.TB) (a, b *qpSide) {
	c := needDevice(t)
	sgid, gid := gidIndex(t, c)
	a, b = newSide(t, c), newSide(t, c)
	connectPair(t, a, b, sgid, gid)
	return a, b
}

func TestDeviceLoopbackQPs(t *testing.T) {
	a, b := loopbackPair(t)
	exercise(t, a, b)

	// A WRITE with a wrong rkey completes with a remote access error and
	// leaves b's memory alone.
	before := bytes.Clone(b.mr.Bytes())
	wc := post(t, a, SendWR{ID: 10, Opcode: OpWrite, Local: SGE{MR: a.mr, Length: 8}, RemoteAddr: b.mr.Addr(), RKey: b.mr.RKey() ^ 0x80})
	if wc.Status != WCRemAccessErr {
		t.Fatalf("WRITE with a bad rkey completed with %v, want %v", wc.Status, WCRemAccessErr)
	}
	if !bytes.Equal(before, b.mr.Bytes()) {
		t.Fatal("a refused WRITE changed the target's memory")
	}
	if err := a.qp.PostSend(&SendWR{Opcode: OpWrite, Local: SGE{MR: a.mr, Length: 8}, RemoteAddr: b.mr.Addr(), RKey: b.mr.RKey()}); err == nil {
		if attr, _ := a.qp.Query(); attr.State != QPErr {
			t.Errorf("after a remote access error the QP is in %v, want ERR", attr.State)
		}
	}
}

func TestDeviceCompChannel(t *testing.T) {
	c := needDevice(t)
	ch, err := c.CreateCompChannel()
	if err != nil {
		t.Fatal(err)
	}
	defer ch.Close()
	cq, err := c.CreateCQ(8, ch)
	if err != nil {
		t.Fatal(err)
	}
	defer cq.Close()
	if err := cq.ReqNotify(false); err != nil {
		t.Fatal(err)
	}
	if _, err := ch.Wait(20 * time.Millisecond); !errors.Is(err, ErrTimeout) {
		t.Fatalf("Wait on an idle CQ: %v, want ErrTimeout", err)
	}
	pd, err := c.AllocPD()
	if err != nil {
		t.Fatal(err)
	}
	defer pd.Close()
	qp, err := pd.CreateQP(QPInitAttr{SendCQ: cq, RecvCQ: cq, MaxSendWR: 4, MaxRecvWR: 4})
	if err != nil {
		t.Fatal(err)
	}
	defer qp.Close()
	mr, err := pd.RegMR(make([]byte, 64), AccessLocalWrite)
	if err != nil {
		t.Fatal(err)
	}
	defer mr.Close()
	if err := qp.ToInit(1, 0); err != nil {
		t.Fatal(err)
	}
	if err := qp.PostRecv(77, SGE{MR: mr, Length: 64}); err != nil {
		t.Fatal(err)
	}
	// Moving to ERR flushes the RECV: a completion that signals the channel.
	if err := qp.ToErr(); err != nil {
		t.Fatal(err)
	}
	got, err := ch.Wait(5 * time.Second)
	if err != nil || got != cq {
		t.Fatalf("Wait: %p, %v; want the CQ", got, err)
	}
	wcs, err := cq.PollWait(1, time.Second)
	if err != nil || wcs[0].ID != 77 || wcs[0].Status != WCFlushErr {
		t.Fatalf("flushed RECV: %+v, %v", wcs, err)
	}
}

// cmAddrs returns the listener's address and the connecting side's source.
func cmAddrs(t *testing.T) (server, client netip.Addr) {
	s, c := os.Getenv("DTAKIT_VERBS_ADDR"), os.Getenv("DTAKIT_VERBS_CLIENT_ADDR")
	if s == "" && os.Getenv("DTAKIT_RXE") != "" {
		// .ci/rxe-vm's rxe1. Both ends on one device: the kernel routes
		// between two local addresses through lo, which rxe does not serve.
		s = "10.77.0.2"
	}
	if s == "" {
		t.Skip("set DTAKIT_VERBS_ADDR to an IPv4 address of a netdev with an RDMA device")
	}
	server = netip.MustParseAddr(s)
	if c != "" {
		client = netip.MustParseAddr(c)
	}
	return server, client
}

func TestDeviceCM(t *testing.T) {
	needDevice(t)
	srvAddr, cliAddr := cmAddrs(t)

	sec, err := NewEventChannel()
	if err != nil {
		t.Fatal(err)
	}
	cec, err := NewEventChannel()
	if err != nil {
		t.Fatal(err)
	}
	lid := cmListen(t, sec, srvAddr)
	cid := cmResolve(t, cec, cliAddr, netip.AddrPortFrom(srvAddr, lid.LocalAddr().Port()))
	cli := cmSide(t, cid)
	if err := cid.Connect(ConnParam{PrivateData: []byte("req"), ResponderResources: 4, InitiatorDepth: 4, RetryCount: 7, RNRRetryCount: 7}); err != nil {
		t.Fatal(err)
	}
	sid, srv := cmAccept(t, sec, cec, lid, cliAddr)

	exercise(t, cli, srv)

	if err := cid.Disconnect(); err != nil {
		t.Fatal(err)
	}
	// The passive side sees the DREQ and answers it with its own
	// rdma_disconnect (the DREP); then the active side is disconnected too.
	if _, err := sec.Expect(CMDisconnected, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	if err := sid.Disconnect(); err != nil {
		t.Fatal(err)
	}
	if _, err := cec.Expect(CMDisconnected, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	cmClose(t, []*qpSide{cli, srv}, []*CMID{cid, sid, lid}, []*EventChannel{cec, sec})
}

// cmListen makes a listening CM ID on addr, any port.
func cmListen(t *testing.T, ec *EventChannel, addr netip.Addr) *CMID {
	t.Helper()
	lid, err := ec.CreateID()
	if err != nil {
		t.Fatal(err)
	}
	if err := lid.BindAddr(netip.AddrPortFrom(addr, 0)); err != nil {
		t.Fatal(err)
	}
	if err := lid.Listen(4); err != nil {
		t.Fatal(err)
	}
	if lid.LocalAddr().Port() == 0 {
		t.Fatalf("listener bound to %v", lid.LocalAddr())
	}
	return lid
}

// cmResolve makes a CM ID from local to the listener at to, its address and
// route resolved.
func cmResolve(t *testing.T, ec *EventChannel, local netip.Addr, to netip.AddrPort) *CMID {
	t.Helper()
	cid, err := ec.CreateID()
	if err != nil {
		t.Fatal(err)
	}
	if err := cid.ResolveAddr(local, to, 2*time.Second); err != nil {
		t.Fatal(err)
	}
	if _, err := ec.Expect(CMAddrResolved, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	if err := cid.ResolveRoute(2 * time.Second); err != nil {
		t.Fatal(err)
	}
	if _, err := ec.Expect(CMRouteResolved, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	return cid
}

// cmAccept takes the connect request on the listener lid, accepts it, and
// waits until both sides are established; it returns the server's ID and
// side.
func cmAccept(t *testing.T, sec, cec *EventChannel, lid *CMID, cliAddr netip.Addr) (*CMID, *qpSide) {
	t.Helper()
	ev, err := sec.Expect(CMConnectRequest, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if ev.Listen != lid || !bytes.HasPrefix(ev.PrivateData, []byte("req")) {
		t.Fatalf("connect request: listen %p (want %p), private data %q", ev.Listen, lid, ev.PrivateData)
	}
	sid := ev.ID
	srv := cmSide(t, sid)
	if err := srv.qp.PostRecv(1, SGE{MR: srv.mr, Length: 64}); err != nil {
		t.Fatal(err)
	}
	if err := sid.Accept(ConnParam{PrivateData: []byte("rep"), ResponderResources: 4, InitiatorDepth: 4}); err != nil {
		t.Fatal(err)
	}
	// The client's side first: librdmacm sends the RTU while it reads the
	// REP's event, and the server is established only then.
	ev, err = cec.Expect(CMEstablished, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sec.Expect(CMEstablished, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(ev.PrivateData, []byte("rep")) {
		t.Errorf("established: private data %q, want the REP's", ev.PrivateData)
	}
	if got := sid.PeerAddr().Addr(); cliAddr.IsValid() && got != cliAddr {
		t.Errorf("server sees the peer at %v, want %v", got, cliAddr)
	}
	return sid, srv
}

// cmClose releases the sides, closes each ID twice (the second close does
// nothing) and the channels.
func cmClose(t *testing.T, sides []*qpSide, ids []*CMID, chans []*EventChannel) {
	t.Helper()
	for _, s := range sides {
		s.mr.Close()
	}
	for _, id := range ids {
		if err := id.Close(); err != nil {
			t.Errorf("close ID: %v", err)
		}
		if err := id.Close(); err != nil {
			t.Errorf("second close of an ID: %v", err)
		}
	}
	for _, s := range sides {
		s.cq.Close()
		s.pd.Close()
	}
	for _, ec := range chans {
		if err := ec.Close(); err != nil {
			t.Errorf("close channel: %v", err)
		}
	}
}

// cmSide makes a PD, CQ, QP and MR on a CM ID's device.
func cmSide(t *testing.T, id *CMID) *qpSide {
	t.Helper()
	c := id.Context()
	if c == nil {
		t.Fatal("CM ID has no device")
	}
	s := &qpSide{}
	var err error
	if s.pd, err = c.AllocPD(); err != nil {
		t.Fatal(err)
	}
	if s.cq, err = c.CreateCQ(64, nil); err != nil {
		t.Fatal(err)
	}
	if s.qp, err = id.CreateQP(s.pd, QPInitAttr{SendCQ: s.cq, RecvCQ: s.cq, MaxSendWR: 32, MaxRecvWR: 32, MaxInlineData: 64}); err != nil {
		t.Fatal(err)
	}
	if s.mr, err = s.pd.RegMR(make([]byte, 4096), AccessRemote); err != nil {
		t.Fatal(err)
	}
	return s
}

// postPoll posts one signalled WRITE from a to b and polls its completion.
func postPoll(tb testing.TB, a, b *qpSide, wr *SendWR, wcs []WC) {
	if err := a.qp.PostSend(wr); err != nil {
		tb.Fatal(err)
	}
	for {
		n, err := a.cq.Poll(wcs)
		if err != nil {
			tb.Fatal(err)
		}
		if n > 0 {
			if err := wcs[0].Err(); err != nil {
				tb.Fatal(err)
			}
			return
		}
	}
}

func TestDevicePostPollDoesNotAllocate(t *testing.T) {
	a, b := loopbackPair(t)
	wr := SendWR{Opcode: OpWrite, Flags: SendSignaled, Local: SGE{MR: a.mr, Length: 64}, RemoteAddr: b.mr.Addr(), RKey: b.mr.RKey()}
	wcs := make([]WC, 4)
	if n := testing.AllocsPerRun(100, func() { postPoll(t, a, b, &wr, wcs) }); n != 0 {
		t.Errorf("PostSend and Poll allocate %v times per WRITE", n)
	}
}

// BenchmarkDeviceWrite times one signalled 64-byte RDMA WRITE, posted and
// polled (on Soft-RoCE in a VM this measures the emulated kernel path).
func BenchmarkDeviceWrite(b *testing.B) {
	x, y := loopbackPair(b)
	wr := SendWR{Opcode: OpWrite, Flags: SendSignaled, Local: SGE{MR: x.mr, Length: 64}, RemoteAddr: y.mr.Addr(), RKey: y.mr.RKey()}
	wcs := make([]WC, 4)
	b.ReportAllocs()
	for b.Loop() {
		postPoll(b, x, y, &wr, wcs)
	}
}
