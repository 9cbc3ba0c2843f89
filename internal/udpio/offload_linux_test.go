//go:build linux && (amd64 || arm64)

package udpio

import (
	"bytes"
	"fmt"
	"net"
	"net/netip"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// offloadBatch is a batch that exercises every way writeBatch groups
// datagrams: runs longer than maxGSOSegments, a shorter datagram ending a
// run, a longer one starting a new run, a zero-length datagram, and runs
// cut by a change of destination.
func offloadBatch(dsts []netip.AddrPort) []Datagram {
	var ms []Datagram
	add := func(size int, dst netip.AddrPort) {
		b := make([]byte, size)
		for i := range b {
			b[i] = byte(len(ms) + i)
		}
		if size >= 2 {
			b[0], b[1] = byte(len(ms)>>8), byte(len(ms))
		}
		ms = append(ms, Datagram{Buf: b, Addr: dst})
	}
	d0 := dsts[0]
	for range 150 {
		add(100, d0)
	}
	add(40, d0) // shorter: ends the run
	add(40, d0)
	add(300, d0) // longer: a new run
	add(0, d0)
	add(300, d0)
	for i := range 20 {
		add(64, dsts[i%len(dsts)])
	}
	for range 3 {
		add(1200, d0) // 55 of these fill maxGSOBytes; these go together
	}
	return ms
}

// roundTrip writes offloadBatch to rxs's addresses and checks that each
// receiver gets exactly its datagrams, in order, whatever way it reads.
func roundTrip(t *testing.T, tx *Conn, rxs []*Conn, plain []*net.UDPConn) {
	t.Helper()
	var dsts []netip.AddrPort
	for _, rx := range rxs {
		dsts = append(dsts, rx.UDPConn().LocalAddr().(*net.UDPAddr).AddrPort())
	}
	for _, p := range plain {
		dsts = append(dsts, p.LocalAddr().(*net.UDPAddr).AddrPort())
	}
	ms := offloadBatch(dsts)
	sent := 0
	for sent < len(ms) {
		n, err := tx.WriteBatch(ms[sent:])
		if err != nil {
			t.Fatalf("WriteBatch after %d: %v", sent, err)
		}
		sent += n
	}
	want := make(map[netip.AddrPort][][]byte)
	for _, m := range ms {
		want[m.Addr] = append(want[m.Addr], m.Buf)
	}
	for i, rx := range rxs {
		got := readAll(t, rx, len(want[dsts[i]]), 2048)
		for k, m := range got {
			if w := want[dsts[i]][k]; !bytes.Equal(m.Buf, w) {
				t.Fatalf("receiver %d datagram %d: %d bytes %x..., want %d bytes %x...", i, k, len(m.Buf), m.Buf[:min(len(m.Buf), 4)], len(w), w[:min(len(w), 4)])
			}
		}
	}
	for i, p := range plain {
		d := dsts[len(rxs)+i]
		p.SetReadDeadline(time.Now().Add(2 * time.Second))
		buf := make([]byte, 2048)
		for k, w := range want[d] {
			n, err := p.Read(buf)
			if err != nil {
				t.Fatalf("plain receiver %d datagram %d: %v", i, k, err)
			}
			if !bytes.Equal(buf[:n], w) {
				t.Fatalf("plain receiver %d datagram %d: %d bytes, want %d", i, k, n, len(w))
			}
		}
	}
}

// TestOffloadRoundTrip: with segmentation offload on, receivers with GRO
// (Conns) and without (plain sockets, which the kernel hands the datagrams
// one by one) see exactly the datagrams written, and so do they with
// offload off (an old kernel, a device without it).
func TestOffloadRoundTrip(t *testing.T) {
	for _, tc := range []struct {
		name     string
		gso, gro bool
	}{{"gso+gro", true, true}, {"gso only", true, false}, {"gro only", false, true}, {"none", false, false}} {
		t.Run(tc.name, func(t *testing.T) {
			tx := newConn(t, listen(t, "udp4", "127.0.0.1:0"), 64)
			rx1 := newConn(t, listen(t, "udp4", "127.0.0.1:0"), 64)
			rx2 := newConn(t, listen(t, "udp4", "127.0.0.1:0"), 7) // smaller batches than the runs
			if !tx.sys.gso || !rx1.sys.gro {
				t.Fatalf("offload off on Linux: gso %v gro %v", tx.sys.gso, rx1.sys.gro)
			}
			tx.sys.gso = tc.gso
			setGRO(t, rx1, tc.gro)
			setGRO(t, rx2, tc.gro)
			plain := listen(t, "udp4", "127.0.0.1:0")
			plain.SetReadBuffer(1 << 20)
			roundTrip(t, tx, []*Conn{rx1, rx2}, []*net.UDPConn{plain})
		})
	}
}

// setGRO turns UDP_GRO on or off on c's socket, as init leaves it on a
// kernel without it.
func setGRO(t *testing.T, c *Conn, on bool) {
	t.Helper()
	v := 0
	if on {
		v = 1
	}
	var serr error
	if err := c.sys.raw.Control(func(fd uintptr) {
		serr = unix.SetsockoptInt(int(fd), unix.IPPROTO_UDP, unix.UDP_GRO, v)
	}); err != nil || serr != nil {
		t.Fatal(err, serr)
	}
	c.sys.gro = on
}

// TestOffloadConnected: a connected socket (a reporter's) coalesces too.
func TestOffloadConnected(t *testing.T) {
	rx := newConn(t, listen(t, "udp4", "127.0.0.1:0"), 64)
	uc, err := net.DialUDP("udp4", nil, rx.UDPConn().LocalAddr().(*net.UDPAddr))
	if err != nil {
		t.Fatal(err)
	}
	defer uc.Close()
	tx := newConn(t, uc, 64)
	ms := make([]Datagram, 64)
	for i := range ms {
		ms[i].Buf = []byte(fmt.Sprintf("report %03d", i))
	}
	if n, err := tx.WriteBatch(ms); n != 64 || err != nil {
		t.Fatalf("WriteBatch = %d, %v", n, err)
	}
	got := readAll(t, rx, 64, 64)
	for i, m := range got {
		if string(m.Buf) != fmt.Sprintf("report %03d", i) {
			t.Fatalf("datagram %d = %q", i, m.Buf)
		}
	}
	// The 64 equal datagrams were one GSO message, which loopback delivers
	// whole to a GRO socket: one header held them all.
	if rx.sys.groN != 1 {
		t.Errorf("64 datagrams arrived in %d messages, want 1 (segmentation offload not working)", rx.sys.groN)
	}
}

// TestGROPartialReads reads a coalesced datagram one message at a time:
// nothing is lost or repeated between calls.
func TestGROPartialReads(t *testing.T) {
	rx := newConn(t, listen(t, "udp4", "127.0.0.1:0"), 16)
	tx := newConn(t, listen(t, "udp4", "127.0.0.1:0"), 64)
	dst := rx.UDPConn().LocalAddr().(*net.UDPAddr).AddrPort()
	ms := make([]Datagram, 10)
	for i := range ms {
		ms[i] = Datagram{Buf: []byte{byte(i), 1, 2, 3}, Addr: dst}
	}
	if n, err := tx.WriteBatch(ms); n != 10 || err != nil {
		t.Fatalf("WriteBatch = %d, %v", n, err)
	}
	got := readAll(t, rx, 1, 16) // the first call takes one
	for i := 1; i < 10; i++ {
		got = append(got, readAll(t, rx, 1, 16)...)
	}
	for i, m := range got {
		if len(m.Buf) != 4 || m.Buf[0] != byte(i) {
			t.Fatalf("message %d = %x", i, m.Buf)
		}
	}
}

// TestOffloadRefused: a kernel that refuses a run longer than 64
// segments (before 6.10) gets runs of 64; one that refuses segmentation
// (EIO, EINVAL, EOPNOTSUPP, ENOPROTOOPT on a GSO message) gets none; an
// error about a message that was no run, or another error, is the
// write's.
func TestOffloadRefused(t *testing.T) {
	for _, c := range []struct {
		name           string
		errno          unix.Errno
		longest, first int
		retry, gso     bool
		maxSegs        int
	}{
		{"old kernel", unix.EINVAL, 100, 100, true, true, oldGSOSegments},
		{"no segmentation", unix.EIO, 10, 10, true, false, maxGSOSegments},
		{"no segmentation EINVAL", unix.EINVAL, 10, 10, true, false, maxGSOSegments},
		{"not supported", unix.EOPNOTSUPP, 64, 2, true, false, maxGSOSegments},
		{"first no run", unix.EIO, 10, 1, false, true, maxGSOSegments},
		{"refused", unix.ECONNREFUSED, 10, 10, false, true, maxGSOSegments},
	} {
		s := sysConn{gso: true, maxSegs: maxGSOSegments}
		if got := s.offloadRefused(c.errno, c.longest, c.first); got != c.retry || s.gso != c.gso || s.maxSegs != c.maxSegs {
			t.Errorf("%s: retry %v, gso %v, runs of %d; want %v, %v, %d", c.name, got, s.gso, s.maxSegs, c.retry, c.gso, c.maxSegs)
		}
	}
}

// TestReadLoopCoalesced: ReadLoop hands out coalesced datagrams where the
// kernel put them, each whole, in order, bounded by its buffer (longer ones
// truncated and marked), with no room past its end; and gives the buffers
// back, so that a later plain read lands in them.
func TestReadLoopCoalesced(t *testing.T) {
	rx := newConn(t, listen(t, "udp4", "127.0.0.1:0"), 8)
	tx := newConn(t, listen(t, "udp4", "127.0.0.1:0"), 64)
	dst := rx.UDPConn().LocalAddr().(*net.UDPAddr).AddrPort()
	var sent []Datagram
	for i := range 40 {
		size := 100
		if i >= 30 {
			size = 300 // a second run, longer than the buffers
		}
		b := bytes.Repeat([]byte{byte(i)}, size)
		sent = append(sent, Datagram{Buf: b, Addr: dst})
	}
	if n, err := tx.WriteBatch(sent); n != len(sent) || err != nil {
		t.Fatalf("WriteBatch = %d, %v", n, err)
	}
	ms := Buffers(8, 200)
	own := make(map[*byte]bool)
	for _, m := range ms {
		own[&m.Buf[0]] = true
	}
	got, coalesced := 0, 0
	err := rx.ReadLoop(ms, 0, func(in []Datagram, _ time.Time) bool {
		for _, m := range in {
			want := sent[got].Buf[:min(len(sent[got].Buf), 200)]
			if !bytes.Equal(m.Buf, want) || m.Truncated != (len(sent[got].Buf) > 200) || cap(m.Buf) != len(m.Buf) {
				t.Fatalf("datagram %d: %d bytes (cap %d) starting %x, truncated %v; want %d bytes of %x, truncated %v",
					got, len(m.Buf), cap(m.Buf), m.Buf[:min(len(m.Buf), 4)], m.Truncated, len(want), want[0], len(sent[got].Buf) > 200)
			}
			if !own[&m.Buf[0]] {
				coalesced++
			}
			got++
		}
		return got < len(sent)
	})
	if err != nil {
		t.Fatal(err)
	}
	if coalesced == 0 {
		t.Error("no datagram was handed out in place: the runs did not come coalesced")
	}
	for i, m := range ms {
		if len(m.Buf) != 200 || !own[&m.Buf[0]] {
			t.Fatalf("after ReadLoop, ms[%d] holds %d bytes elsewhere, not its own buffer", i, len(m.Buf))
		}
	}
}

// TestGROSources: runs from two senders, coalesced by GRO and handed out
// a few at a time (so a run spans reads), each keep their sender's
// address, their segment size and their order.
func TestGROSources(t *testing.T) {
	rx := newConn(t, listen(t, "udp4", "127.0.0.1:0"), 64)
	if !rx.sys.gro {
		t.Fatal("GRO off on Linux")
	}
	dst := rx.UDPConn().LocalAddr().(*net.UDPAddr).AddrPort()
	txs := []*Conn{newConn(t, listen(t, "udp4", "127.0.0.1:0"), 64), newConn(t, listen(t, "udp4", "127.0.0.2:0"), 64)}
	type sent struct {
		from netip.AddrPort
		b    []byte
	}
	var want []sent
	for round := range 3 {
		for k, tx := range txs {
			size := 40 + 24*k + round // each run its own size
			ms := make([]Datagram, 20)
			for i := range ms {
				ms[i] = Datagram{Buf: bytes.Repeat([]byte{byte(round*64 + k*32 + i)}, size), Addr: dst}
				want = append(want, sent{tx.UDPConn().LocalAddr().(*net.UDPAddr).AddrPort(), ms[i].Buf})
			}
			if n, err := tx.WriteBatch(ms); err != nil || n != len(ms) {
				t.Fatalf("WriteBatch: %d, %v", n, err)
			}
		}
	}
	rx.UDPConn().SetReadDeadline(time.Now().Add(2 * time.Second))
	var got []Datagram
	for len(got) < len(want) {
		ms := make([]Datagram, 7)
		for i := range ms {
			ms[i].Buf = make([]byte, 256)
		}
		n, err := rx.ReadBatch(ms)
		if err != nil {
			t.Fatalf("ReadBatch after %d of %d: %v", len(got), len(want), err)
		}
		got = append(got, ms[:n]...)
	}
	if rx.sys.groN == 0 {
		t.Fatal("no read went through GRO")
	}
	for i, w := range want {
		if g := got[i]; g.Addr != w.from || !bytes.Equal(g.Buf, w.b) {
			t.Fatalf("datagram %d: %d bytes from %v, want %d bytes from %v", i, len(g.Buf), g.Addr, len(w.b), w.from)
		}
	}
}
