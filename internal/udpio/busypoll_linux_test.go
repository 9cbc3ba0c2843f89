//go:build linux && (amd64 || arm64)

package udpio

import (
	"errors"
	"net"
	"os"
	"testing"
	"time"
)

// TestBusyPoll checks when a read polls an empty socket: right after a read
// that found datagrams, until the next comes (here from a goroutine that
// sends it 5 ms later, which the polling yields to); not on a socket that
// went quiet, nor without BusyPoll. Stats.ReadCalls counts the polls.
func TestBusyPoll(t *testing.T) {
	for _, spin := range []time.Duration{0, time.Second} {
		rx := newConn(t, listen(t, "udp4", "127.0.0.1:0"), 4)
		rx.BusyPoll(spin)
		tx := listen(t, "udp4", "127.0.0.1:0")
		dst := rx.UDPConn().LocalAddr().(*net.UDPAddr)
		send := func() {
			if _, err := tx.WriteToUDP([]byte("dta"), dst); err != nil {
				t.Error(err)
			}
		}
		ms := []Datagram{{Buf: make([]byte, 8)}}
		calls := func() uint64 { return rx.Stats().ReadCalls }

		send()
		readAll(t, rx, 1, 8)
		before := calls()
		go func() {
			time.Sleep(5 * time.Millisecond)
			send()
		}()
		readAll(t, rx, 1, 8)
		polled := calls() - before
		if spin > 0 && polled <= 2 {
			t.Errorf("BusyPoll(%v): the read after a busy one made %d calls, want it to poll", spin, polled)
		}
		if spin == 0 && polled != 2 {
			t.Errorf("no BusyPoll: the read made %d calls, want 2 (before and after the wait)", polled)
		}

		// Quiet: the read after one that found nothing waits at once.
		rx.BusyPoll(min(spin, time.Millisecond))
		for range 2 {
			before = calls()
			rx.UDPConn().SetReadDeadline(time.Now().Add(20 * time.Millisecond))
			if _, err := rx.ReadBatch(ms); !errors.Is(err, os.ErrDeadlineExceeded) {
				t.Fatalf("ReadBatch on an empty socket: %v, want os.ErrDeadlineExceeded", err)
			}
		}
		if n := calls() - before; n != 1 {
			t.Errorf("BusyPoll(%v): a read on a quiet socket made %d calls, want 1", spin, n)
		}
	}
}
