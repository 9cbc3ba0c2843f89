package udpio

import (
	"errors"
	"net"
	"net/netip"
	"runtime"
	"syscall"
	"testing"
	"time"
)

// TestWriteAllSkipsRefused sends to a port nobody listens on through a
// connected socket: the kernel refuses datagrams (ECONNREFUSED after the
// first ICMP error); WriteAll tries each refused one once more, skips it
// if refused again, reports how many it skipped, and the batch still ends.
func TestWriteAllSkipsRefused(t *testing.T) {
	uc, _ := dialClosed(t)
	c := newConn(t, uc, 8)
	ms := make([]Datagram, 5)
	for i := range ms {
		ms[i].Buf = []byte{byte(i)}
	}
	for range 50 {
		refused, err := c.WriteAll(ms)
		if refused > len(ms) || refused > 0 && !errors.Is(err, syscall.ECONNREFUSED) {
			t.Fatalf("refused %d of %d, first error %v, want ECONNREFUSED", refused, len(ms), err)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestReadLoop checks the batches, the idle call and both ways out.
func TestReadLoop(t *testing.T) {
	uc := listen(t, "udp4", "127.0.0.1:0")
	c := newConn(t, uc, 8)
	tx := listen(t, "udp4", "127.0.0.1:0")
	to := uc.LocalAddr().(*net.UDPAddr).AddrPort()
	for i := range 3 {
		if _, err := tx.WriteToUDPAddrPort([]byte{byte(i), 1, 2, 3, 4, 5}, to); err != nil {
			t.Fatal(err)
		}
	}
	got, idles := 0, 0
	err := c.ReadLoop(Buffers(8, 4), 5*time.Millisecond, func(ms []Datagram, now time.Time) bool {
		if len(ms) == 0 {
			idles++
			return got < 3
		}
		for _, m := range ms {
			if m.Truncated != (runtime.GOOS == "linux") || len(m.Buf) != 4 || m.Buf[0] != byte(got) || m.Addr.Port() != tx.LocalAddr().(*net.UDPAddr).AddrPort().Port() {
				t.Errorf("datagram %d: %+v, want its first 4 bytes (marked truncated on Linux) from %v", got, m, tx.LocalAddr())
			}
			got++
		}
		return true
	})
	if err != nil || got != 3 || idles == 0 {
		t.Fatalf("ReadLoop = %v after %d datagrams and %d idle calls", err, got, idles)
	}
	go func() {
		time.Sleep(10 * time.Millisecond)
		uc.Close()
	}()
	err = c.ReadLoop(Buffers(8, 4), 0, func([]Datagram, time.Time) bool { return true })
	if !errors.Is(err, net.ErrClosed) {
		t.Fatalf("ReadLoop on a closed socket = %v, want net.ErrClosed", err)
	}
}

// TestWriteAllRetriesEarlierRefusal: an ICMP port unreachable for an
// earlier datagram is reported by the next send, which then sends nothing;
// once the peer listens again, WriteAll tries that datagram once more, so
// none of the batch is lost to the old error.
func TestWriteAllRetriesEarlierRefusal(t *testing.T) {
	uc, addr := dialClosed(t)
	if _, err := uc.Write([]byte{0xff}); err != nil { // its ICMP error stays queued
		t.Fatal(err)
	}
	time.Sleep(20 * time.Millisecond)
	back, err := net.ListenUDP("udp4", net.UDPAddrFromAddrPort(addr))
	if err != nil {
		t.Skipf("cannot listen on %v again: %v", addr, err)
	}
	defer back.Close()
	c := newConn(t, uc, 8)
	ms := []Datagram{{Buf: []byte{1}}, {Buf: []byte{2}}, {Buf: []byte{3}}}
	if refused, err := c.WriteAll(ms); refused != 0 {
		t.Fatalf("refused %d (%v): the queued error was the earlier datagram's", refused, err)
	}
	buf := make([]byte, 8)
	for want := byte(1); want <= 3; want++ {
		back.SetReadDeadline(time.Now().Add(time.Second))
		n, err := back.Read(buf)
		if err != nil || n != 1 || buf[0] != want {
			t.Fatalf("datagram %d: %x, %v", want, buf[:n], err)
		}
	}
}

// dialClosed returns a socket connected to a loopback port nothing listens
// on any more, and that port.
func dialClosed(t *testing.T) (*net.UDPConn, netip.AddrPort) {
	t.Helper()
	gone := listen(t, "udp4", "127.0.0.1:0")
	addr := gone.LocalAddr().(*net.UDPAddr).AddrPort()
	gone.Close()
	uc, err := net.DialUDP("udp", nil, net.UDPAddrFromAddrPort(addr))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { uc.Close() })
	return uc, addr
}
