package udpio

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"
)

func listen(t testing.TB, network, addr string) *net.UDPConn {
	t.Helper()
	uc, err := net.ListenUDP(network, net.UDPAddrFromAddrPort(netip.MustParseAddrPort(addr)))
	if err != nil {
		t.Skipf("no %s loopback here: %v", network, err)
	}
	t.Cleanup(func() { uc.Close() })
	return uc
}

func newConn(t testing.TB, uc *net.UDPConn, max int) *Conn {
	t.Helper()
	c, err := New(uc, max)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// readAll reads until want datagrams have arrived or a second passes.
func readAll(t *testing.T, c *Conn, want int, size int) []Datagram {
	t.Helper()
	var got []Datagram
	c.UDPConn().SetReadDeadline(time.Now().Add(2 * time.Second))
	for len(got) < want {
		ms := make([]Datagram, want-len(got))
		for i := range ms {
			ms[i].Buf = make([]byte, size)
		}
		n, err := c.ReadBatch(ms)
		if err != nil {
			t.Fatalf("ReadBatch after %d of %d datagrams: %v", len(got), want, err)
		}
		if n < 1 {
			t.Fatalf("ReadBatch returned %d with no error", n)
		}
		got = append(got, ms[:n]...)
	}
	return got
}

func TestBatchRoundTrip(t *testing.T) {
	for _, tc := range []struct{ network, addr string }{
		{"udp4", "127.0.0.1:0"},
		{"udp6", "[::1]:0"},
		{"udp", "127.0.0.1:0"},
	} {
		t.Run(tc.network, func(t *testing.T) {
			rx := newConn(t, listen(t, tc.network, tc.addr), 16)
			txc := listen(t, tc.network, tc.addr)
			tx := newConn(t, txc, 16)
			dst := rx.UDPConn().LocalAddr().(*net.UDPAddr).AddrPort()
			const count = 40 // more than one batch each way
			out := make([]Datagram, count)
			for i := range out {
				out[i] = Datagram{Buf: []byte(fmt.Sprintf("datagram %02d", i)), Addr: dst}
			}
			n, err := tx.WriteBatch(out)
			if err != nil || n != count {
				t.Fatalf("WriteBatch = %d, %v; want %d, nil", n, err, count)
			}
			got := readAll(t, rx, count, 64)
			src := txc.LocalAddr().(*net.UDPAddr).AddrPort()
			for i, m := range got {
				if want := fmt.Sprintf("datagram %02d", i); string(m.Buf) != want {
					t.Errorf("datagram %d = %q, want %q", i, m.Buf, want)
				}
				if m.Addr.Port() != src.Port() || m.Addr.Addr() != src.Addr().Unmap() {
					t.Errorf("datagram %d from %v, want %v", i, m.Addr, src)
				}
			}
		})
	}
}

func TestTruncatedDatagram(t *testing.T) {
	rx := newConn(t, listen(t, "udp4", "127.0.0.1:0"), 4)
	tx := listen(t, "udp4", "127.0.0.1:0")
	if _, err := tx.WriteToUDPAddrPort(bytes.Repeat([]byte{7}, 100), rx.UDPConn().LocalAddr().(*net.UDPAddr).AddrPort()); err != nil {
		t.Fatal(err)
	}
	got := readAll(t, rx, 1, 10)
	if len(got[0].Buf) != 10 {
		t.Errorf("%d bytes for a 100-byte datagram into 10 bytes, want 10", len(got[0].Buf))
	}
}

func TestConnectedWrite(t *testing.T) {
	rxc := listen(t, "udp4", "127.0.0.1:0")
	rx := newConn(t, rxc, 8)
	txc, err := net.DialUDP("udp4", nil, rxc.LocalAddr().(*net.UDPAddr))
	if err != nil {
		t.Fatal(err)
	}
	defer txc.Close()
	tx := newConn(t, txc, 8)
	// Addr is ignored on a connected socket.
	if n, err := tx.WriteBatch([]Datagram{{Buf: []byte("a")}, {Buf: []byte("bc")}}); n != 2 || err != nil {
		t.Fatalf("WriteBatch = %d, %v", n, err)
	}
	got := readAll(t, rx, 2, 8)
	if string(got[0].Buf) != "a" || string(got[1].Buf) != "bc" {
		t.Errorf("got %q, %q", got[0].Buf, got[1].Buf)
	}
}

func TestBadArguments(t *testing.T) {
	uc := listen(t, "udp4", "127.0.0.1:0")
	for _, max := range []int{0, -1, 1025} {
		if _, err := New(uc, max); !errors.Is(err, ErrBatch) {
			t.Errorf("New(max=%d) error = %v, want ErrBatch", max, err)
		}
	}
	c := newConn(t, uc, 4)
	// An IPv4 socket cannot send to an IPv6 address; nor to no address.
	for _, dst := range []netip.AddrPort{{}, netip.MustParseAddrPort("[2001:db8::1]:9")} {
		n, err := c.WriteBatch([]Datagram{{Buf: []byte("x"), Addr: dst}})
		if err == nil || n != 0 {
			t.Errorf("WriteBatch to %v = %d, %v; want 0 and an error", dst, n, err)
		}
	}
}

func TestReadDeadline(t *testing.T) {
	c := newConn(t, listen(t, "udp4", "127.0.0.1:0"), 4)
	c.UDPConn().SetReadDeadline(time.Now().Add(20 * time.Millisecond))
	_, err := c.ReadBatch([]Datagram{{Buf: make([]byte, 8)}})
	if !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Errorf("ReadBatch past deadline: %v, want os.ErrDeadlineExceeded", err)
	}
}

func TestNoAllocs(t *testing.T) {
	rx := newConn(t, listen(t, "udp4", "127.0.0.1:0"), 8)
	tx := newConn(t, listen(t, "udp4", "127.0.0.1:0"), 8)
	dst := rx.UDPConn().LocalAddr().(*net.UDPAddr).AddrPort()
	out := make([]Datagram, 8)
	in := make([]Datagram, 8)
	for i := range out {
		out[i] = Datagram{Buf: make([]byte, 32), Addr: dst}
		in[i].Buf = make([]byte, 64)
	}
	allocs := testing.AllocsPerRun(50, func() {
		if _, err := tx.WriteBatch(out); err != nil {
			t.Fatal(err)
		}
		for got := 0; got < len(out); {
			n, err := rx.ReadBatch(in)
			if err != nil {
				t.Fatal(err)
			}
			got += n
		}
	})
	if allocs != 0 {
		t.Errorf("a write and read of a batch allocates %v times, want 0", allocs)
	}
}

func BenchmarkLoopback(b *testing.B) {
	for _, batch := range []int{1, 32} {
		b.Run(fmt.Sprintf("batch=%d", batch), func(b *testing.B) {
			rx := newConn(b, listen(b, "udp4", "127.0.0.1:0"), batch)
			tx := newConn(b, listen(b, "udp4", "127.0.0.1:0"), batch)
			rx.UDPConn().SetReadBuffer(4 << 20)
			dst := rx.UDPConn().LocalAddr().(*net.UDPAddr).AddrPort()
			out := make([]Datagram, batch)
			in := make([]Datagram, batch)
			for i := range out {
				out[i] = Datagram{Buf: make([]byte, 24), Addr: dst}
				in[i].Buf = make([]byte, 64)
			}
			b.ReportAllocs()
			b.ResetTimer()
			for sent := 0; sent < b.N; sent += batch {
				if _, err := tx.WriteBatch(out); err != nil {
					b.Fatal(err)
				}
				for got := 0; got < batch; {
					n, err := rx.ReadBatch(in)
					if err != nil {
						b.Fatal(err)
					}
					got += n
				}
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "datagrams/s")
		})
	}
}

// TestConcurrentReadWrite runs a reader and a writer on each of two Conns
// at once, as the package allows, and checks that every datagram arrives
// whole: the two directions must not share buffers or headers.
func TestConcurrentReadWrite(t *testing.T) {
	a := newConn(t, listen(t, "udp4", "127.0.0.1:0"), 16)
	b := newConn(t, listen(t, "udp4", "127.0.0.1:0"), 16)
	for _, c := range []*Conn{a, b} {
		c.UDPConn().SetReadBuffer(4 << 20)
		c.UDPConn().SetReadDeadline(time.Now().Add(5 * time.Second))
	}
	const count = 2000 // per direction, in batches of 16
	payload := func(from string, i int) string { return fmt.Sprintf("%s-%06d-%s", from, i, strings.Repeat(from, 20)) }
	send := func(c *Conn, to netip.AddrPort, from string) error {
		ms := make([]Datagram, 16)
		for i := 0; i < count; i += len(ms) {
			for k := range ms {
				ms[k] = Datagram{Buf: []byte(payload(from, i+k)), Addr: to}
			}
			if _, err := c.WriteBatch(ms); err != nil {
				return err
			}
			time.Sleep(50 * time.Microsecond) // stay within the socket buffer
		}
		return nil
	}
	recv := func(c *Conn, from string) error {
		ms := make([]Datagram, 16)
		for k := range ms {
			ms[k].Buf = make([]byte, 128)
		}
		for got := 0; got < count; {
			n, err := c.ReadBatch(ms)
			if err != nil {
				return fmt.Errorf("after %d datagrams: %w", got, err)
			}
			for _, m := range ms[:n] {
				if want := payload(from, got); string(m.Buf) != want {
					return fmt.Errorf("datagram %d = %q, want %q", got, m.Buf, want)
				}
				got++
			}
		}
		return nil
	}
	addrA := a.UDPConn().LocalAddr().(*net.UDPAddr).AddrPort()
	addrB := b.UDPConn().LocalAddr().(*net.UDPAddr).AddrPort()
	errs := make(chan error, 4)
	go func() { errs <- send(a, addrB, "a") }()
	go func() { errs <- send(b, addrA, "b") }()
	go func() { errs <- recv(a, "b") }()
	go func() { errs <- recv(b, "a") }()
	for range 4 {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
}

// TestReadMarksTruncated: a datagram longer than its buffer is read cut
// short and marked, the next one whole and unmarked.
func TestReadMarksTruncated(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("truncation is detected on Linux only")
	}
	rx, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer rx.Close()
	tx, err := net.DialUDP("udp4", nil, rx.LocalAddr().(*net.UDPAddr))
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Close()
	c, err := New(rx, 4)
	if err != nil {
		t.Fatal(err)
	}
	tx.Write(make([]byte, 300))
	tx.Write(make([]byte, 50))
	ms := make([]Datagram, 4)
	for i := range ms {
		ms[i].Buf = make([]byte, 100)
	}
	got := 0
	rx.SetReadDeadline(time.Now().Add(5 * time.Second))
	for got < 2 {
		n, err := c.ReadBatch(ms[got:])
		if err != nil {
			t.Fatal(err)
		}
		got += n
	}
	if !ms[0].Truncated || len(ms[0].Buf) != 100 || ms[1].Truncated || len(ms[1].Buf) != 50 {
		t.Fatalf("got %+v, %+v (buffers elided): want the first truncated to 100 bytes, the second whole", ms[0].Truncated, ms[1].Truncated)
	}
}

// TestStats: a Conn counts the datagrams it moved each way and the system
// calls that moved them (at least one per batch written, none more than
// the datagrams where the batch is one call).
func TestStats(t *testing.T) {
	rx := newConn(t, listen(t, "udp4", "127.0.0.1:0"), 64)
	tx := newConn(t, listen(t, "udp4", "127.0.0.1:0"), 16)
	if s := tx.Stats(); s != (Stats{}) {
		t.Fatalf("a new Conn's stats %+v, want zero", s)
	}
	dst := rx.UDPConn().LocalAddr().(*net.UDPAddr).AddrPort()
	ms := make([]Datagram, 40) // three batches of at most 16
	for i := range ms {
		ms[i] = Datagram{Buf: []byte{byte(i), 1, 2}, Addr: dst}
	}
	if n, err := tx.WriteBatch(ms); n != 40 || err != nil {
		t.Fatalf("WriteBatch = %d, %v", n, err)
	}
	readAll(t, rx, 40, 16)
	ts, rs := tx.Stats(), rx.Stats()
	if ts.Written != 40 || ts.Read != 0 || rs.Read != 40 || rs.Written != 0 {
		t.Errorf("sender %+v, receiver %+v: want 40 datagrams written and 40 read", ts, rs)
	}
	if ts.WriteCalls < 3 || ts.WriteCalls > 40 || rs.ReadCalls < 1 || rs.ReadCalls > 40+1 || ts.ReadCalls != 0 {
		t.Errorf("sender %+v, receiver %+v: system calls out of range", ts, rs)
	}
}
