package udpio

import (
	"errors"
	"net"
	"os"
	"syscall"
	"time"
)

// Buffers returns n Datagrams whose Bufs are consecutive size-byte pieces of
// one allocation: a reader's batch, each Buf the most one datagram may be.
func Buffers(n, size int) []Datagram {
	ms := make([]Datagram, n)
	buf := make([]byte, n*size)
	for i := range ms {
		ms[i].Buf = buf[i*size : (i+1)*size : (i+1)*size]
	}
	return ms
}

// WriteAll sends ms in order, skipping each datagram the kernel refuses (an
// unreachable peer's ICMP error, a full socket buffer), and returns how many
// it skipped and the first error. A sender whose peer retransmits or
// resends does not stop a batch for one refused datagram. An ICMP port
// unreachable is reported on the next send, for an earlier datagram: the
// refused one is tried once more before it counts. It does not allocate.
func (c *Conn) WriteAll(ms []Datagram) (refused int, first error) {
	retried := false
	for len(ms) > 0 {
		n, err := c.WriteBatch(ms)
		if n > 0 {
			retried = false
		}
		if err != nil {
			if !retried && errors.Is(err, syscall.ECONNREFUSED) {
				retried = true
				ms = ms[min(n, len(ms)):]
				continue
			}
			retried = false
			refused++
			if first == nil {
				first = err
			}
			n++
		}
		ms = ms[min(n, len(ms)):]
	}
	return refused, first
}

// ReadLoop reads batches into ms (see [Buffers]) and hands each, with its
// arrival time, to handle, until handle returns false or the socket is
// closed. A datagram's Buf is valid until handle returns: one that came
// coalesced (Linux, UDP_GRO) is where the kernel put it, not copied into
// ms's buffer, which still bounds its length; ReadLoop gives ms its buffers
// back before each read and when it returns. With idle > 0 a read waits at
// most idle, and handle gets an empty batch when nothing came, so that the
// caller can run its timers. Transient errors (an ICMP error queued on the
// socket) are skipped. ReadLoop returns nil when handle stops it and the
// socket's error (wrapping net.ErrClosed when closed) otherwise. Truncated
// datagrams reach handle marked: counting them is the caller's.
func (c *Conn) ReadLoop(ms []Datagram, idle time.Duration, handle func(ms []Datagram, now time.Time) bool) error {
	bufs := make([][]byte, len(ms))
	for i := range ms {
		bufs[i] = ms[i].Buf
	}
	giveBack := func() {
		for i, b := range bufs {
			ms[i].Buf = b
		}
	}
	defer giveBack()
	for {
		giveBack()
		if idle > 0 {
			if err := c.uc.SetReadDeadline(time.Now().Add(idle)); err != nil {
				return err
			}
		}
		n, err := c.readBatch(ms, true)
		switch {
		case err == nil:
		case idle > 0 && errors.Is(err, os.ErrDeadlineExceeded):
			n = 0
		case errors.Is(err, net.ErrClosed):
			return err
		default:
			continue
		}
		if !handle(ms[:n], time.Now()) {
			return nil
		}
	}
}
