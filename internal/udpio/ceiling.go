package udpio

import (
	"errors"
	"fmt"
	"net"
	"os"
	"time"
)

// Ceiling is what a bare batched sender and receiver achieved on loopback:
// the most datagrams per second any chain of UDP hops on this host can
// move, the yardstick for the pipeline's rate.
type Ceiling struct {
	Sent, Received int
	Elapsed        time.Duration // from the first send to the last datagram received
}

// Rate returns the datagrams received per second.
func (c Ceiling) Rate() float64 {
	if c.Elapsed <= 0 {
		return 0
	}
	return float64(c.Received) / c.Elapsed.Seconds()
}

// MeasureCeiling sends n datagrams of size bytes from one socket to another
// on 127.0.0.1, batch at a time through a Conn (sendmmsg with GSO, recvmmsg
// with GRO on Linux), as fast as the sender can, while a second goroutine
// reads them. Datagrams the receiver's socket buffer drops are not
// received; the receiver stops 200 ms after the last one arrives.
func MeasureCeiling(n, size, batch int) (Ceiling, error) {
	if n < 1 || size < 1 || size > 65507 || batch < 1 {
		return Ceiling{}, fmt.Errorf("udpio.MeasureCeiling: %w: %d datagrams of %d bytes in batches of %d", ErrBatch, n, size, batch)
	}
	rx, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		return Ceiling{}, fmt.Errorf("udpio.MeasureCeiling: %w", err)
	}
	defer rx.Close()
	_ = rx.SetReadBuffer(16 << 20)
	tx, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		return Ceiling{}, fmt.Errorf("udpio.MeasureCeiling: %w", err)
	}
	defer tx.Close()
	rc, err := New(rx, batch)
	if err != nil {
		return Ceiling{}, fmt.Errorf("udpio.MeasureCeiling: %w", err)
	}
	wc, err := New(tx, batch)
	if err != nil {
		return Ceiling{}, fmt.Errorf("udpio.MeasureCeiling: %w", err)
	}
	dst := rx.LocalAddr().(*net.UDPAddr).AddrPort()

	type result struct {
		got  int
		last time.Time
		err  error
	}
	done := make(chan result, 1)
	go func() {
		var r result
		ms := Buffers(batch, size)
		for r.got < n {
			_ = rx.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
			k, err := rc.ReadBatch(ms)
			if errors.Is(err, os.ErrDeadlineExceeded) {
				break
			}
			if err != nil {
				r.err = err
				break
			}
			r.got += k
			r.last = time.Now()
		}
		done <- r
	}()

	ms := make([]Datagram, batch)
	buf := make([]byte, size)
	for i := range ms {
		ms[i] = Datagram{Buf: buf, Addr: dst}
	}
	start := time.Now()
	for sent := 0; sent < n; {
		k := min(batch, n-sent)
		if _, err := wc.WriteAll(ms[:k]); err != nil && errors.Is(err, net.ErrClosed) {
			return Ceiling{}, fmt.Errorf("udpio.MeasureCeiling: %w", err)
		}
		sent += k
	}
	r := <-done
	if r.err != nil {
		return Ceiling{}, fmt.Errorf("udpio.MeasureCeiling: %w", r.err)
	}
	c := Ceiling{Sent: n, Received: r.got}
	if r.got > 0 {
		c.Elapsed = r.last.Sub(start)
	}
	return c, nil
}
