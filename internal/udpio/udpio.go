// Package udpio moves batches of UDP datagrams with one system call each way
// (recvmmsg and sendmmsg on Linux), which is what lets a software translator,
// target or reporter keep up with millions of small datagrams per second.
// On Linux it also uses UDP segmentation offload: a write sends each run of
// datagrams of equal size to one destination as one GSO message
// (UDP_SEGMENT), and every socket it reads has UDP_GRO on, a read cutting
// coalesced datagrams back into the ones sent, so that the kernel's
// per-datagram work is paid once per run (on loopback the run crosses the
// stack whole). Datagram boundaries, order and addresses are as without it.
// Elsewhere it falls back to one datagram per call with the same API.
package udpio

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sync/atomic"
)

// Datagram is one UDP datagram: what a batch reads or writes, and the one
// type a datagram has from the socket it arrives on to the socket it leaves
// by (the target and the translator name it Datagram too).
type Datagram struct {
	// Buf holds the datagram. ReadBatch reads into Buf[:cap(Buf)] (the
	// most it reads) and leaves Buf holding the bytes received; WriteBatch
	// sends Buf.
	Buf []byte
	// Addr is the source after ReadBatch and the destination for WriteBatch.
	// It is ignored by WriteBatch on a connected Conn.
	Addr netip.AddrPort
	// Truncated reports that the datagram was longer than cap(Buf): Buf
	// holds its first bytes only, and the reader must not take it for
	// whole (Linux; elsewhere a truncated datagram is not detected).
	Truncated bool
}

// ErrBatch is wrapped by errors about the arguments of a batch call.
var ErrBatch = errors.New("udpio: invalid batch")

// Conn reads and writes batches of datagrams on a UDP socket. A Conn is not
// safe for concurrent use by several goroutines in the same direction; one
// reader and one writer may run at once.
type Conn struct {
	uc  *net.UDPConn
	max int
	sys sysConn
	// Datagrams moved, read by Stats while the socket runs.
	read, written atomic.Uint64
}

// Stats counts what a Conn moved since New: datagrams each way and the
// system calls that moved them (recvmmsg and sendmmsg on Linux; a GSO run
// or a GRO read is many datagrams in one message, a batch many messages in
// one call).
type Stats struct {
	Read, Written         uint64 // datagrams
	ReadCalls, WriteCalls uint64 // system calls, those that found nothing to read included
}

// Stats returns c's counts; it is safe to call while c is used.
func (c *Conn) Stats() Stats {
	rc, wc := c.sys.calls()
	return Stats{Read: c.read.Load(), Written: c.written.Load(), ReadCalls: rc, WriteCalls: wc}
}

// New wraps uc for batches of at most maxBatch datagrams. The Conn uses uc's
// file descriptor; closing uc ends it.
func New(uc *net.UDPConn, maxBatch int) (*Conn, error) {
	if maxBatch < 1 || maxBatch > 1024 {
		return nil, fmt.Errorf("udpio.New: %w: batch size %d, want 1..1024", ErrBatch, maxBatch)
	}
	c := &Conn{uc: uc, max: maxBatch}
	if err := c.sys.init(uc, maxBatch); err != nil {
		return nil, fmt.Errorf("udpio.New: %w", err)
	}
	return c, nil
}

// LoopbackGSOOnly limits segmentation offload to loopback destinations.
// The kernel numbers the IPv4 identification of a GSO run's segments 0, 1,
// 2, ..., and a RoCEv2 peer that checks the ICRC against the real header (an
// RDMA NIC, Soft-RoCE) refuses every segment whose identification the
// sender did not foresee; on loopback a run crosses the stack whole and its
// datagrams carry no header to a socket.
func (c *Conn) LoopbackGSOOnly() { c.sys.loopbackGSOOnly = true }

// UDPConn returns the socket under c.
func (c *Conn) UDPConn() *net.UDPConn { return c.uc }

// ReadBatch blocks until at least one datagram arrives (or the socket's read
// deadline passes), then fills ms[0:n] with up to len(ms) datagrams that are
// already queued, and returns n. A datagram longer than cap(Buf) is
// truncated to it and marked Truncated. It does not allocate.
func (c *Conn) ReadBatch(ms []Datagram) (int, error) { return c.readBatch(ms, false) }

// readBatch is ReadBatch; with alias, a datagram that came coalesced (GRO)
// is not copied into its Buf: Buf is set to its bytes in the Conn's read
// buffer, at most cap(Buf) of them (the capacity no more than the length),
// which stay there until the Conn reads from the socket again, after the
// next call at the earliest.
func (c *Conn) readBatch(ms []Datagram, alias bool) (int, error) {
	if len(ms) == 0 {
		return 0, nil
	}
	if len(ms) > c.max {
		ms = ms[:c.max]
	}
	for i := range ms {
		ms[i].Buf = ms[i].Buf[:cap(ms[i].Buf)]
	}
	n, err := c.sys.readBatch(c.uc, ms, alias)
	if n > 0 {
		c.read.Add(uint64(n))
	}
	return n, err
}

// WriteBatch sends ms in order and returns how many were sent; an error
// stops the batch at the datagram that failed. It does not allocate.
func (c *Conn) WriteBatch(ms []Datagram) (int, error) {
	sent := 0
	for sent < len(ms) {
		chunk := ms[sent:]
		if len(chunk) > c.max {
			chunk = chunk[:c.max]
		}
		n, err := c.sys.writeBatch(c.uc, chunk)
		sent += n
		if err != nil {
			c.written.Add(uint64(sent))
			return sent, err
		}
	}
	c.written.Add(uint64(sent))
	return sent, nil
}
