package target

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/dtakit/dtakit/internal/udpio"
	"github.com/dtakit/dtakit/rocev2"
	"github.com/dtakit/dtakit/rocev2/cm"
)

// sockPeer is an in-test requester over a real UDP socket.
type sockPeer struct {
	tb     testing.TB
	uc     *net.UDPConn
	addr   netip.AddrPort
	target netip.AddrPort
}

func (s *sockPeer) sendPkt(p rocev2.Packet) {
	s.tb.Helper()
	b, err := p.AppendDatagram(nil, s.addr, s.target)
	if err != nil {
		s.tb.Fatal(err)
	}
	if _, err := s.uc.WriteToUDPAddrPort(b, s.target); err != nil {
		s.tb.Fatal(err)
	}
}

func (s *sockPeer) recv() rocev2.Packet {
	s.tb.Helper()
	buf := make([]byte, 5000)
	if err := s.uc.SetReadDeadline(time.Now().Add(5 * time.Second)); err != nil {
		s.tb.Fatal(err)
	}
	n, from, err := s.uc.ReadFromUDPAddrPort(buf)
	if err != nil {
		s.tb.Fatal(err)
	}
	var p rocev2.Packet
	if err := p.DecodeDatagram(buf[:n], from, s.addr); err != nil {
		s.tb.Fatalf("from %v: %v", from, err)
	}
	return p
}

func listenLoopback(tb testing.TB) (*net.UDPConn, netip.AddrPort) {
	uc, err := net.ListenUDP("udp4", net.UDPAddrFromAddrPort(netip.MustParseAddrPort("127.0.0.1:0")))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { uc.Close() })
	return uc, uc.LocalAddr().(*net.UDPAddr).AddrPort()
}

func TestServeLoopback(t *testing.T) {
	tg, err := New(Config{})
	if err != nil {
		t.Fatal(err)
	}
	tuc, taddr := listenLoopback(t)
	if err := tg.Listen(40050, ListenConfig{Greeting: []byte("hello")}); err != nil {
		t.Fatal(err)
	}
	mem := make([]uint64, 8)
	r, err := tg.Register(unsafeBytes(mem), RemoteWrite|RemoteAtomic)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- tg.Serve(ctx, tuc) }()

	uc, addr := listenLoopback(t)
	s := &sockPeer{tb: t, uc: uc, addr: addr, target: taddr}
	req := &cm.ConnectRequest{LocalCommID: 5, ServiceID: cm.ServiceID(40050), LocalQPN: 77, StartingPSN: 1000,
		PKey: 0xFFFF, PathMTU: cm.MTU1024, MaxCMRetries: 15, RetryCount: 3}
	if err := req.SetIPPrivateData(cm.IPHeader{SrcPort: addr.Port(), Src: addr.Addr(), Dst: taddr.Addr()}, nil); err != nil {
		t.Fatal(err)
	}
	mad, _ := cm.AppendMAD(nil, cm.Header(1, cm.AttrREQ), req)
	s.sendPkt(cm.Packet(mad, 0))
	_, m, err := cm.DecodeMAD(s.recv().Payload)
	if err != nil {
		t.Fatal(err)
	}
	rep := m.(*cm.ConnectReply)
	mad, _ = cm.AppendMAD(nil, cm.Header(1, cm.AttrRTU), &cm.ReadyToUse{LocalCommID: 5, RemoteCommID: rep.LocalCommID})
	s.sendPkt(cm.Packet(mad, 1))
	greet := s.recv()
	if string(greet.Payload) != "hello" || greet.BTH.DestQP != 77 {
		t.Fatalf("greeting %+v", greet)
	}
	s.sendPkt(rocev2.Packet{BTH: rocev2.BTH{Opcode: rocev2.RCAcknowledge, PKey: 0xFFFF, DestQP: rep.LocalQPN, PSN: greet.BTH.PSN},
		AETH: rocev2.AETH{Syndrome: rocev2.SyndromeACK, MSN: 1}})
	if greet.BTH.PSN != 1000 {
		t.Fatalf("greeting PSN %d, want the REQ's starting PSN", greet.BTH.PSN)
	}
	psn := rocev2.PSN(rep.StartingPSN) // the requester sends from the REP's
	s.sendPkt(rocev2.Packet{BTH: rocev2.BTH{Opcode: rocev2.RCWriteOnly, PKey: 0xFFFF, DestQP: rep.LocalQPN, PSN: psn},
		RETH: rocev2.RETH{VA: r.VA() + 8, RKey: r.RKey(), DMALength: 8}, Payload: []byte{1, 2, 3, 4, 5, 6, 7, 8}})
	s.sendPkt(rocev2.Packet{BTH: rocev2.BTH{Opcode: rocev2.RCFetchAdd, PKey: 0xFFFF, DestQP: rep.LocalQPN, PSN: psn.Next(), AckReq: true},
		AtomicETH: rocev2.AtomicETH{VA: r.VA(), RKey: r.RKey(), SwapAddData: 10}})
	ack := s.recv()
	if ack.BTH.Opcode != rocev2.RCAtomicAcknowledge || ack.BTH.PSN != psn.Next() || ack.AETH.MSN != 2 {
		t.Fatalf("atomic ack %+v", ack)
	}
	if c := tg.Counters(); c.WritePackets != 1 || c.Atomics != 1 || c.SendRetransmits != 0 {
		t.Errorf("counters %+v", c)
	}
	// Counters took the lock after the writes: reading is safe.
	if mem[0] != 10 || unsafeBytes(mem)[8] != 1 {
		t.Errorf("memory %x", mem[:2])
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Serve: %v", err)
	}
}

func TestServeRejectsWildcard(t *testing.T) {
	tg, _ := New(Config{})
	uc, err := net.ListenUDP("udp4", &net.UDPAddr{})
	if err != nil {
		t.Fatal(err)
	}
	defer uc.Close()
	if err := tg.Serve(context.Background(), uc); !errors.Is(err, ErrConfig) {
		t.Errorf("Serve on a wildcard socket: %v", err)
	}
}

func TestListenAndServe(t *testing.T) {
	// Find a free port, then let the target bind it.
	uc, addr := listenLoopback(t)
	uc.Close()
	tg, err := New(Config{Addr: addr})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- tg.ListenAndServe(ctx) }()
	// A REQ for a port nobody listens on: the REJ proves the target serves.
	puc, paddr := listenLoopback(t)
	s := &sockPeer{tb: t, uc: puc, addr: paddr, target: addr}
	req := &cm.ConnectRequest{LocalCommID: 1, ServiceID: cm.ServiceID(1), LocalQPN: 2, PathMTU: cm.MTU1024}
	_ = req.SetIPPrivateData(cm.IPHeader{SrcPort: paddr.Port(), Src: paddr.Addr(), Dst: addr.Addr()}, nil)
	mad, _ := cm.AppendMAD(nil, cm.Header(1, cm.AttrREQ), req)
	var m cm.Message
	for range 50 { // the socket may not be bound yet: resend until answered
		s.sendPkt(cm.Packet(mad, 0))
		buf := make([]byte, 2048)
		_ = puc.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
		n, from, err := puc.ReadFromUDPAddrPort(buf)
		if err != nil {
			continue
		}
		var p rocev2.Packet
		if err := p.DecodeDatagram(buf[:n], from, paddr); err != nil {
			t.Fatal(err)
		}
		if _, m, err = cm.DecodeMAD(p.Payload); err != nil {
			t.Fatal(err)
		}
		break
	}
	if rej, ok := m.(*cm.Reject); !ok || rej.Reason != cm.RejectInvalidServiceID {
		t.Fatalf("answer %v", m)
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("ListenAndServe: %v", err)
	}
}

// BenchmarkServeLoopback measures Serve over loopback sockets: a requester
// keeps 4 batches of 64 RDMA WRITEs (8 bytes) in flight with sendmmsg, each
// batch's last packet asking for the ACK that clocks the next. The number
// includes the requester's work on the same (shared) cores.
func BenchmarkServeLoopback(b *testing.B) {
	tg, err := New(Config{})
	if err != nil {
		b.Fatal(err)
	}
	tuc, taddr := listenLoopback(b)
	_ = tuc.SetReadBuffer(8 << 20)
	mem := make([]uint64, 1<<13)
	r, err := tg.Register(unsafeBytes(mem), RemoteWrite)
	if err != nil {
		b.Fatal(err)
	}
	uc, addr := listenLoopback(b)
	_ = uc.SetReadBuffer(8 << 20)
	qp, err := tg.NewQP(QPConfig{Peer: addr, RemoteQPN: 5, RecvPSN: 0})
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- tg.Serve(ctx, tuc) }()
	defer func() {
		cancel()
		<-done
	}()
	conn, err := udpio.New(uc, ServeBatch)
	if err != nil {
		b.Fatal(err)
	}
	const window = 4
	frames := make([][]byte, ServeBatch*window)
	msgs := make([]udpio.Datagram, ServeBatch)
	acks := []udpio.Datagram{{Buf: make([]byte, 256)}}
	var psn rocev2.PSN
	send := func() {
		for i := range msgs {
			p := rocev2.Packet{BTH: rocev2.BTH{Opcode: rocev2.RCWriteOnly, PKey: 0xFFFF, DestQP: qp.QPN(), PSN: psn, AckReq: i == len(msgs)-1},
				RETH: rocev2.RETH{VA: r.VA() + uint64(8*(int(psn)%(1<<13))), RKey: r.RKey(), DMALength: 8}, Payload: make([]byte, 8)}
			f := frames[int(psn)%len(frames)]
			f, _ = p.AppendDatagram(f[:0], addr, taddr)
			frames[int(psn)%len(frames)] = f
			msgs[i] = udpio.Datagram{Buf: f, Addr: taddr}
			psn = psn.Next()
		}
		if _, err := conn.WriteBatch(msgs); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	b.ResetTimer()
	batches := (b.N + ServeBatch - 1) / ServeBatch
	sent := 0
	for ; sent < min(window, batches); sent++ {
		send()
	}
	for acked := 0; acked < batches; {
		_ = uc.SetReadDeadline(time.Now().Add(2 * time.Second))
		if _, err := conn.ReadBatch(acks); err != nil {
			b.Fatalf("no ACK after %d of %d batches (packets lost?): %v; counters %+v", acked, batches, err, tg.Counters())
		}
		acked++
		if sent < batches {
			send()
			sent++
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(batches*ServeBatch)/b.Elapsed().Seconds()/1e6, "Mops/s")
}

func TestServeIPv6(t *testing.T) {
	tuc, err := net.ListenUDP("udp6", net.UDPAddrFromAddrPort(netip.MustParseAddrPort("[::1]:0")))
	if err != nil {
		t.Skipf("no IPv6 loopback: %v", err)
	}
	defer tuc.Close()
	taddr := tuc.LocalAddr().(*net.UDPAddr).AddrPort()
	tg, _ := New(Config{Addr: taddr})
	mem := make([]uint64, 4)
	r, _ := tg.Register(unsafeBytes(mem), RemoteWrite)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- tg.Serve(ctx, tuc) }()
	uc, err := net.ListenUDP("udp6", net.UDPAddrFromAddrPort(netip.MustParseAddrPort("[::1]:0")))
	if err != nil {
		t.Fatal(err)
	}
	defer uc.Close()
	addr := uc.LocalAddr().(*net.UDPAddr).AddrPort()
	qp, err := tg.NewQP(QPConfig{Peer: addr, RemoteQPN: 3, RecvPSN: 10})
	if err != nil {
		t.Fatal(err)
	}
	s := &sockPeer{tb: t, uc: uc, addr: addr, target: taddr}
	s.sendPkt(rocev2.Packet{BTH: rocev2.BTH{Opcode: rocev2.RCWriteOnly, PKey: 0xFFFF, DestQP: qp.QPN(), PSN: 10, AckReq: true},
		RETH: rocev2.RETH{VA: r.VA(), RKey: r.RKey(), DMALength: 8}, Payload: []byte{7, 0, 0, 0, 0, 0, 0, 0}})
	if a := s.recv(); a.BTH.Opcode != rocev2.RCAcknowledge || a.BTH.PSN != 10 || a.AETH.Syndrome != rocev2.SyndromeACK {
		t.Fatalf("answer %+v", a)
	}
	if tg.Counters().WritePackets != 1 || unsafeBytes(mem)[0] != 7 {
		t.Fatalf("write not applied: %+v", tg.Counters())
	}
	cancel()
	if err := <-done; err != nil {
		t.Error(err)
	}
}

// TestServeDropsTruncated: a datagram longer than Serve's read buffer is
// counted and dropped, not processed cut short.
func TestServeDropsTruncated(t *testing.T) {
	tg, err := New(Config{})
	if err != nil {
		t.Fatal(err)
	}
	tuc, taddr := listenLoopback(t)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- tg.Serve(ctx, tuc) }()
	defer func() {
		cancel()
		<-done
	}()
	uc, _ := listenLoopback(t)
	big := make([]byte, maxDatagram+100)
	if _, err := uc.WriteToUDPAddrPort(big, taddr); err != nil {
		t.Fatal(err)
	}
	if _, err := uc.WriteToUDPAddrPort(big[:40], taddr); err != nil { // short, whole: malformed
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		c := tg.Counters()
		if c.Truncated == 1 && c.Frames == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("counters %+v: want 1 truncated datagram dropped and 1 frame processed", c)
		}
		time.Sleep(time.Millisecond)
	}
}
