package target

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"time"

	"github.com/dtakit/dtakit/internal/clock"
	"github.com/dtakit/dtakit/internal/udpio"
)

// Serving parameters.
const (
	// TickInterval is how often Serve runs Tick.
	TickInterval = 10 * time.Millisecond
	// ServeBatch is the most datagrams Serve reads (and writes) per system
	// call.
	ServeBatch = 64
	// maxDatagram is the largest datagram Serve reads: a 4096-byte MTU
	// packet with every header, rounded up.
	maxDatagram = 4096 + 128
)

// Serve runs the target on uc, a UDP socket bound to a specific address,
// until ctx is done or uc is closed: it reads batches of datagrams, hands them
// to Process, runs Tick every TickInterval and sends what they produce, each
// response to the source address and port of the datagram it answers. The
// target's address becomes uc's. Serve returns nil when ctx ends it, and the
// socket's error otherwise; it does not close uc. Several Serve calls may
// run at once on sockets bound to the one address with SO_REUSEPORT: each
// reads, processes and writes on its own goroutine (see Process), and the
// kernel sends all of a peer's datagrams to one socket while the set of
// sockets stays the same.
func (t *Target) Serve(ctx context.Context, uc *net.UDPConn) error {
	local, ok := uc.LocalAddr().(*net.UDPAddr)
	if !ok {
		return fmt.Errorf("target.Serve: %w: not a UDP socket", ErrConfig)
	}
	addr := local.AddrPort()
	addr = netip.AddrPortFrom(addr.Addr().Unmap(), addr.Port())
	if err := checkAddr(addr.Addr()); err != nil {
		return fmt.Errorf("target.Serve: %w", err)
	}
	conn, err := udpio.New(uc, ServeBatch)
	if err != nil {
		return fmt.Errorf("target.Serve: %w", err)
	}
	conn.LoopbackGSOOnly() // the ICRCs assume identification 0
	t.mu.Lock()
	if t.local() != addr {
		t.addr.Store(&addr) // Process and the response caches follow
	}
	t.mu.Unlock()

	var out Output
	var sendErr error
	lastTick := time.Now()
	// Datagrams longer than any RoCEv2 packet a 4096-byte MTU allows come
	// marked Truncated; Process counts and drops them.
	err = conn.ReadLoop(udpio.Buffers(ServeBatch, maxDatagram), TickInterval, func(in []Datagram, now time.Time) bool {
		out.Reset()
		if len(in) > 0 {
			t.Process(clock.Of(now), in, &out)
		}
		if now.Sub(lastTick) >= TickInterval {
			t.Tick(clock.Of(now), &out)
			lastTick = now
		}
		// A datagram refused (an unreachable peer) is skipped.
		ds := out.Datagrams()
		refused, err := conn.WriteAll(ds)
		if len(ds) > refused {
			t.sent.Add(uint64(len(ds) - refused))
		}
		if errors.Is(err, net.ErrClosed) {
			sendErr = err
			return false
		}
		return ctx.Err() == nil
	})
	if err == nil {
		err = sendErr
	}
	if err != nil && ctx.Err() == nil {
		return fmt.Errorf("target.Serve: %w", err)
	}
	return nil
}

// ListenAndServe binds a UDP socket to the target's address (Config.Addr,
// 127.0.0.1:4791 by default) and runs Serve on it until ctx is done; it
// closes the socket on return.
func (t *Target) ListenAndServe(ctx context.Context) error {
	uc, err := net.ListenUDP("udp", net.UDPAddrFromAddrPort(t.Addr()))
	if err != nil {
		return fmt.Errorf("target.ListenAndServe: %w", err)
	}
	defer uc.Close()
	return t.Serve(ctx, uc)
}
