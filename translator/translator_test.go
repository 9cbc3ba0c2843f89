package translator

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"net"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/dtakit/dtakit/appendlist"
	"github.com/dtakit/dtakit/dta"
	"github.com/dtakit/dtakit/keywrite"
	"github.com/dtakit/dtakit/postcard"
	"github.com/dtakit/dtakit/reporter"
	"github.com/dtakit/dtakit/verbs"
)

// udpTarget serves a fakeTarget on a loopback UDP socket.
type udpTarget struct {
	ft *fakeTarget
	uc *net.UDPConn
	wg sync.WaitGroup
	mu sync.Mutex // held while the fake target runs
}

func newUDPTarget(t *testing.T, insts ...*fakeInst) *udpTarget {
	uc, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	ft := newFakeTarget(t, insts...)
	ft.addr = uc.LocalAddr().(*net.UDPAddr).AddrPort()
	return &udpTarget{ft: ft, uc: uc}
}

// serve answers datagrams from peer until stop.
func (u *udpTarget) serve(peer netip.AddrPort) {
	u.ft.peer = peer
	u.wg.Add(1)
	go func() {
		defer u.wg.Done()
		buf := make([]byte, 4096)
		for {
			n, from, err := u.uc.ReadFromUDPAddrPort(buf)
			if err != nil {
				return
			}
			if from != peer {
				continue
			}
			u.mu.Lock()
			u.ft.receive(buf[:n])
			u.ft.flushAcks()
			out := u.ft.out
			u.ft.out = nil
			u.mu.Unlock()
			for _, b := range out {
				u.uc.WriteToUDPAddrPort(b, peer)
			}
		}
	}()
}

func (u *udpTarget) stop() {
	u.uc.Close()
	u.wg.Wait()
}

func TestTranslatorOverLoopback(t *testing.T) {
	kw, pc, al := kwInst(t), pcInst(t), alInst(t, testAL)
	u := newUDPTarget(t, kw, pc, al)
	ackPort := freeUDPPort(t)
	tr, err := New(Config{
		ReportAddr: netip.MustParseAddrPort("127.0.0.1:0"),
		Collectors: []netip.AddrPort{u.ft.addr},
		AckPort:    ackPort,
	})
	if err != nil {
		t.Fatal(err)
	}
	u.serve(tr.LocalAddr())
	defer u.stop()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := tr.Start(ctx); err != nil {
		t.Fatal(err)
	}

	rep, err := reporter.New(reporter.Config{Translator: tr.ReportAddr(), AckPort: ackPort, MaxResends: 3})
	if err != nil {
		t.Fatal(err)
	}
	l, _ := keywrite.ParseLayout(kw.geom)
	st, _ := keywrite.NewStore(l, nil)
	const n = 2000
	for k := range uint32(n) {
		d := binary.BigEndian.AppendUint32(nil, k+1)
		if err := rep.KeyWrite(k, d, 2); err != nil {
			t.Fatal(err)
		}
		_ = st.Put(k, d, 2)
		if k%32 == 31 {
			// Pace the reporter so that loopback UDP does not drop reports:
			// wait for the translator to have them all.
			_ = rep.Flush()
			waitFor(t, func() bool { return tr.Counters().Reports[1] == uint64(k+1) })
		}
	}
	// A postcard flow and an append entry the translator holds back until
	// Close flushes them, and a Key-Increment no collector serves: NACKed.
	_ = rep.Postcard(5, 1, 0, 11)
	_ = rep.Append(2, []byte{0, 0, 0, 0, 0, 0, 0, 9}, false)
	_ = rep.KeyIncrement(1, 1, 1)
	if err := rep.Flush(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool {
		c := tr.Counters()
		return c.Reports[1]+c.Reports[2]+c.Reports[3]+c.Reports[4] == n+3+3 // the Key-Increment 4 times
	})
	waitFor(t, func() bool { return rep.Counters().GaveUp == 1 })
	if err := tr.Close(time.Second); err != nil {
		t.Fatal(err)
	}
	rep.Close()
	waitFor(t, func() bool { u.mu.Lock(); defer u.mu.Unlock(); return u.ft.dreqs == 3 })
	u.stop()

	c := tr.Counters()
	if c.Reports[1] != n || c.Writes != 2*n+2+1 || c.Malformed != 0 || c.EncodeErrors != 0 {
		t.Errorf("translator counters %+v", c)
	}
	if c.NACKs != 4 || c.NoInstance != 4 {
		t.Errorf("%d NACKs, %d without instance; want 4 (one report, three resends)", c.NACKs, c.NoInstance)
	}
	if rc := rep.Counters(); rc.NACKs != 4 || rc.Resent != 3 || rc.GaveUp != 1 {
		t.Errorf("reporter counters %+v", rc)
	}
	if !bytes.Equal(kw.mem, st.Region()) {
		t.Error("key-write region differs from the store's")
	}
	pcc, _ := postcard.NewCodec(testPC)
	ps, _ := postcard.NewStore(pcc.Layout(), pc.mem)
	tab, _ := postcard.NewTable(pcc.Layout(), []uint32{11})
	if path, out := ps.Query(tab, 5); out != postcard.Found || path.Len != 1 || path.Hops[0] != 11 {
		t.Errorf("flushed postcard: %v %v", path.Values(), out)
	}
	region, _ := appendlist.NewStore(testAL, al.mem)
	rd, _ := region.Reader(2)
	buf := make([]byte, 8*64)
	if k, err := rd.Read(buf); k != 1 || err != nil || buf[7] != 9 {
		t.Errorf("flushed append: %d entries, %v", k, err)
	}
}

func TestTranslatorCollectorNotListening(t *testing.T) {
	uc, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer uc.Close() // bound, never answers
	tr, err := New(Config{
		ReportAddr: netip.MustParseAddrPort("127.0.0.1:0"),
		Collectors: []netip.AddrPort{uc.LocalAddr().(*net.UDPAddr).AddrPort()},
		CMTimeout:  10 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close(0)
	start := time.Now()
	err = tr.Start(context.Background())
	if !errors.Is(err, ErrNotListening) {
		t.Fatalf("Start = %v, want ErrNotListening", err)
	}
	if d := time.Since(start); d < 50*time.Millisecond {
		t.Errorf("gave up after %v, before 5 requests 10 ms apart", d)
	}
	// The five REQs reached the socket.
	uc.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
	reqs := 0
	for {
		if _, _, err := uc.ReadFromUDPAddrPort(make([]byte, 512)); err != nil {
			break
		}
		reqs++
	}
	if reqs != DefaultCMTries {
		t.Errorf("%d REQs, want %d", reqs, DefaultCMTries)
	}
}

func freeUDPPort(t *testing.T) uint16 {
	uc, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer uc.Close()
	return uint16(uc.LocalAddr().(*net.UDPAddr).Port)
}

// waitFor polls cond for up to 5 seconds.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); !cond(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("timed out waiting")
		}
	}
}

// TestVerbsBackendNeedsDevice: where there is no RDMA NIC, a translator
// asked to use one does not start, and says why.
func TestVerbsBackendNeedsDevice(t *testing.T) {
	if devs, err := verbs.Devices(); err == nil {
		t.Skipf("this machine has RDMA devices (%v): collector's device tests cover the verbs backend", devs)
	}
	_, err := New(Config{Verbs: true, ReportAddr: netip.MustParseAddrPort("127.0.0.1:0"), Collectors: []netip.AddrPort{netip.MustParseAddrPort("127.0.0.1:4791")}})
	if !errors.Is(err, verbs.ErrNoDevice) && !errors.Is(err, verbs.ErrNotSupported) {
		t.Fatalf("New with Verbs and no device: %v, want an error wrapping verbs.ErrNoDevice", err)
	}
}

// Submit refuses, with the cause, what it cannot translate, and binds no
// report socket with NoReports.
func TestSubmitRefusals(t *testing.T) {
	tr, err := New(Config{NoReports: true, Collectors: []netip.AddrPort{netip.MustParseAddrPort("127.0.0.1:9")}})
	if err != nil {
		t.Fatal(err)
	}
	if tr.ReportAddr().IsValid() {
		t.Fatalf("NoReports bound %v", tr.ReportAddr())
	}
	kw := dta.Report{Header: dta.Header{Opcode: dta.OpKeyWrite}, KeyWrite: dta.KeyWrite{Redundancy: 2, Key: 1, Data: []byte{1, 2, 3, 4}}}
	if err := tr.Submit(&kw, 0); !errors.Is(err, ErrNoInstance) {
		t.Fatalf("before Start: %v", err)
	}
	ki := dta.Report{Header: dta.Header{Opcode: dta.OpKeyIncrement}, KeyIncrement: dta.KeyIncrement{Redundancy: 1, Key: 1, Counter: 1}}
	if err := tr.Submit(&ki, 0); !errors.Is(err, ErrReport) && !errors.Is(err, ErrNoInstance) {
		t.Fatalf("a copy of a Key-Increment: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	tr.Start(ctx) // nobody listens at port 9
	if err := tr.Submit(&kw, 0); !errors.Is(err, ErrNoInstance) {
		t.Fatalf("no collector connected: %v", err)
	}
	if err := tr.Submit(&ki, 0); !errors.Is(err, ErrReport) {
		t.Fatalf("a copy of a Key-Increment: %v", err)
	}
	if c := tr.Counters(); c.NoInstance != 1 || c.Dropped != 0 {
		t.Fatalf("counters: %+v", c)
	}
	tr.Close(time.Second)
	if err := tr.Submit(&kw, -1); !errors.Is(err, ErrClosed) {
		t.Fatalf("after Close: %v", err)
	}
}
