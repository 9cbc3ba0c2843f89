//go:build linux && (amd64 || arm64)

package udpio

import (
	"encoding/binary"
	"fmt"
	"net"
	"net/netip"
	"sync/atomic"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// mmsghdr is struct mmsghdr of <sys/socket.h>; x/sys/unix does not wrap
// recvmmsg and sendmmsg, so the calls are made here.
type mmsghdr struct {
	hdr unix.Msghdr
	len uint32
	_   [4]byte
}

// Segmentation offload (docs: udp(7), UDP_SEGMENT and UDP_GRO). A write
// sends each run of consecutive datagrams to one destination whose sizes are
// equal (the last may be shorter) as one GSO message: the kernel carries
// the run through its stack as one buffer and cuts it into datagrams at the
// device, or, on loopback, hands it whole to a receiving socket that has
// UDP_GRO on. Every socket read here has UDP_GRO on, and a read cuts what
// arrives coalesced back into the datagrams that were sent. Per datagram,
// the stack's work is what bounds small-datagram throughput; offload pays it
// once per run.
const (
	maxGSOSegments = 128   // UDP_MAX_SEGMENTS since Linux 6.10
	oldGSOSegments = 64    // ... and before: a refused longer run falls back to it
	maxGSOBytes    = 65000 // a UDP datagram over IPv4 carries at most 65507 bytes
	groBufSize     = 65536 // room for the largest coalesced datagram
	maxGROHdrs     = 16    // coalesced datagrams read per call
)

// cmsgSpace is the control buffer of one header: a UDP_SEGMENT (u16) or a
// UDP_GRO (int) message.
var cmsgSpace = unix.CmsgSpace(4)

type sysConn struct {
	raw            syscall.RawConn
	is4            bool // the socket is AF_INET, not a dual-stack AF_INET6 one
	connected      bool
	remoteLoopback bool // connected to a loopback address
	// One reader and one writer may run at once, so each direction has
	// its own headers, buffers and call state.
	rd, wr direction

	gso             bool // writes coalesce runs (cleared if the kernel refuses GSO)
	maxSegs         int  // the longest run a write coalesces
	loopbackGSOOnly bool // ... only to loopback destinations
	gro             bool // UDP_GRO is on: reads go through groBuf
	// Reads with GRO: the headers of the last recvmmsg, groBuf holding
	// their datagrams, and the position of the next datagram to hand out.
	groBuf               []byte
	groHdr, groOff, groN int
	// The segment size and source of header groHdr, found when its first
	// datagram is handed out.
	groSeg  int
	groAddr netip.AddrPort
}

// direction holds one direction's message headers and the arguments and
// results of its call under way; fn is bound once so a call allocates no
// closure.
type direction struct {
	hdrs  []mmsghdr
	iovs  []unix.Iovec
	names []unix.RawSockaddrInet6
	ctrl  []byte // cmsgSpace bytes per header
	ends  []int  // writes: the index after the last message of header i
	n     int
	errno syscall.Errno
	fn    func(fd uintptr) bool
	calls atomic.Uint64 // system calls made, for Stats
}

func (d *direction) init(max int, call uintptr) {
	d.hdrs = make([]mmsghdr, max)
	d.iovs = make([]unix.Iovec, max)
	d.names = make([]unix.RawSockaddrInet6, max)
	d.ctrl = make([]byte, max*cmsgSpace)
	d.ends = make([]int, max)
	// The calls never block (MSG_DONTWAIT: the poller does the waiting),
	// so they are raw: the runtime is not told of them. Told, it hands
	// the P of a call that outlasts sysmon's 20 µs tick (a GSO run
	// crossing loopback does the receiver's work inline) to another
	// thread, and the caller, back from the kernel, waits to get a P
	// again: context switches, which cost the deployed translator more
	// than the datagrams it sends.
	d.fn = func(fd uintptr) bool {
		d.calls.Add(1)
		r, _, e := unix.RawSyscall6(call, fd, uintptr(unsafe.Pointer(&d.hdrs[0])), uintptr(d.n), unix.MSG_DONTWAIT, 0, 0)
		if e == unix.EAGAIN {
			return false // wait for the poller
		}
		d.n, d.errno = int(r), e
		return true
	}
}

func (s *sysConn) calls() (read, write uint64) { return s.rd.calls.Load(), s.wr.calls.Load() }

func (s *sysConn) init(uc *net.UDPConn, max int) error {
	raw, err := uc.SyscallConn()
	if err != nil {
		return err
	}
	s.raw = raw
	var sa unix.Sockaddr
	var serr error
	if err := raw.Control(func(fd uintptr) { sa, serr = unix.Getsockname(int(fd)) }); err != nil {
		return err
	}
	if serr != nil {
		return serr
	}
	_, s.is4 = sa.(*unix.SockaddrInet4)
	s.connected = uc.RemoteAddr() != nil
	if ra, ok := uc.RemoteAddr().(*net.UDPAddr); ok && ra != nil {
		s.remoteLoopback = ra.IP.IsLoopback()
	}
	s.rd.init(max, unix.SYS_RECVMMSG)
	s.wr.init(max, unix.SYS_SENDMMSG)
	s.gso, s.maxSegs = true, maxGSOSegments
	// UDP_GRO needs Linux 5.0; without it reads are one datagram per
	// header, as the kernel delivers them.
	var gerr error
	if err := raw.Control(func(fd uintptr) {
		gerr = unix.SetsockoptInt(int(fd), unix.IPPROTO_UDP, unix.UDP_GRO, 1)
	}); err == nil && gerr == nil {
		s.gro = true
	}
	return nil
}

func (d *direction) prepare(ms []Datagram, withNames bool) {
	for i := range ms {
		h := &d.hdrs[i]
		*h = mmsghdr{}
		iov := &d.iovs[i]
		iov.Base = nil
		if len(ms[i].Buf) > 0 {
			iov.Base = &ms[i].Buf[0]
		}
		iov.SetLen(len(ms[i].Buf))
		h.hdr.Iov = iov
		h.hdr.SetIovlen(1)
		if withNames {
			h.hdr.Name = (*byte)(unsafe.Pointer(&d.names[i]))
			h.hdr.Namelen = uint32(unsafe.Sizeof(d.names[i]))
		}
	}
}

func (s *sysConn) readBatch(uc *net.UDPConn, ms []Datagram, alias bool) (int, error) {
	if s.gro {
		return s.readGRO(uc, ms, alias)
	}
	d := &s.rd
	d.prepare(ms, true)
	d.n = len(ms)
	if err := s.raw.Read(d.fn); err != nil {
		return 0, &net.OpError{Op: "recvmmsg", Net: "udp", Source: uc.LocalAddr(), Err: err}
	}
	if d.errno != 0 {
		return 0, &net.OpError{Op: "recvmmsg", Net: "udp", Source: uc.LocalAddr(), Err: d.errno}
	}
	n := d.n
	for i := 0; i < n; i++ {
		ms[i].Buf = ms[i].Buf[:min(int(d.hdrs[i].len), len(ms[i].Buf))]
		ms[i].Truncated = d.hdrs[i].hdr.Flags&unix.MSG_TRUNC != 0
		ms[i].Addr = addrFromRaw(&d.names[i])
	}
	return n, nil
}

// readGRO reads with UDP_GRO on: datagrams still held from the last call
// first, without a system call; otherwise one recvmmsg into groBuf, whose
// coalesced datagrams are cut at the segment size the kernel reports. With
// alias, each is handed out in groBuf rather than copied (Conn.readBatch).
func (s *sysConn) readGRO(uc *net.UDPConn, ms []Datagram, alias bool) (int, error) {
	d := &s.rd
	if s.groHdr >= s.groN {
		nh := min(len(d.hdrs), maxGROHdrs)
		if s.groBuf == nil {
			s.groBuf = make([]byte, nh*groBufSize)
		}
		for i := range nh {
			h := &d.hdrs[i]
			*h = mmsghdr{}
			iov := &d.iovs[i]
			iov.Base = &s.groBuf[i*groBufSize]
			iov.SetLen(groBufSize)
			h.hdr.Iov = iov
			h.hdr.SetIovlen(1)
			h.hdr.Name = (*byte)(unsafe.Pointer(&d.names[i]))
			h.hdr.Namelen = uint32(unsafe.Sizeof(d.names[i]))
			h.hdr.Control = &d.ctrl[i*cmsgSpace]
			h.hdr.SetControllen(cmsgSpace)
		}
		d.n = nh
		if err := s.raw.Read(d.fn); err != nil {
			return 0, &net.OpError{Op: "recvmmsg", Net: "udp", Source: uc.LocalAddr(), Err: err}
		}
		if d.errno != 0 {
			return 0, &net.OpError{Op: "recvmmsg", Net: "udp", Source: uc.LocalAddr(), Err: d.errno}
		}
		s.groHdr, s.groOff, s.groN = 0, 0, d.n
	}
	out := 0
	for out < len(ms) && s.groHdr < s.groN {
		i := s.groHdr
		h := &d.hdrs[i]
		n := int(h.len)
		if s.groOff == 0 {
			s.groSeg = n
			if g := groSegment(h, d.ctrl[i*cmsgSpace:(i+1)*cmsgSpace]); g > 0 {
				s.groSeg = g
			}
			s.groAddr = addrFromRaw(&d.names[i])
		}
		data := s.groBuf[i*groBufSize : i*groBufSize+n]
		l := min(s.groSeg, n-s.groOff)
		m := &ms[out]
		if src := data[s.groOff : s.groOff+l]; alias {
			k := min(l, cap(m.Buf))
			m.Buf = src[:k:k]
		} else {
			m.Buf = m.Buf[:copy(m.Buf, src)]
		}
		// Cut short by the caller's buffer, or, for the last segment, by
		// groBuf (which holds the largest coalesced datagram).
		m.Truncated = len(m.Buf) < l || (s.groOff+l == n && h.hdr.Flags&unix.MSG_TRUNC != 0)
		m.Addr = s.groAddr
		out++
		s.groOff += l
		if s.groOff >= n {
			s.groHdr, s.groOff = i+1, 0
		}
	}
	return out, nil
}

// groSegment returns the segment size of a coalesced datagram from its
// UDP_GRO control message, or 0 when there is none.
func groSegment(h *mmsghdr, ctrl []byte) int {
	cl := min(int(h.hdr.Controllen), len(ctrl))
	for off := 0; off+unix.SizeofCmsghdr <= cl; {
		c := (*unix.Cmsghdr)(unsafe.Pointer(&ctrl[off]))
		if c.Len < unix.SizeofCmsghdr || off+int(c.Len) > cl {
			return 0
		}
		if c.Level == unix.IPPROTO_UDP && c.Type == unix.UDP_GRO && int(c.Len) >= unix.CmsgLen(4) {
			return int(binary.NativeEndian.Uint32(ctrl[off+unix.CmsgLen(0):]))
		}
		off += unix.CmsgSpace(int(c.Len) - unix.CmsgLen(0))
	}
	return 0
}

// loopback reports whether a datagram to dst (ignored on a connected
// socket) stays on this host's loopback.
func (s *sysConn) loopback(dst netip.AddrPort) bool {
	if s.connected {
		return s.remoteLoopback
	}
	return dst.Addr().Unmap().IsLoopback()
}

func (s *sysConn) writeBatch(uc *net.UDPConn, ms []Datagram) (int, error) {
	if i, err := s.checkDestinations(ms); err != nil {
		return i, err
	}
	d := &s.wr
	longest := s.prepareWrite(ms)
	if err := s.raw.Write(d.fn); err != nil {
		return 0, &net.OpError{Op: "sendmmsg", Net: "udp", Source: uc.LocalAddr(), Err: err}
	}
	if d.errno != 0 {
		if s.offloadRefused(d.errno, longest, d.ends[0]) {
			return s.writeBatch(uc, ms)
		}
		return 0, &net.OpError{Op: "sendmmsg", Net: "udp", Source: uc.LocalAddr(), Err: d.errno}
	}
	if d.n == 0 {
		return 0, nil
	}
	return d.ends[d.n-1], nil
}

// checkDestinations returns the index of the first datagram an unconnected
// socket cannot send, with the error saying why.
func (s *sysConn) checkDestinations(ms []Datagram) (int, error) {
	if s.connected {
		return 0, nil
	}
	for i := range ms {
		if !ms[i].Addr.IsValid() || (s.is4 && !ms[i].Addr.Addr().Unmap().Is4()) {
			return i, fmt.Errorf("udpio: sendmmsg: %w: message %d has destination %v, which this socket cannot reach", ErrBatch, i, ms[i].Addr)
		}
	}
	return 0, nil
}

// prepareWrite fills the write headers for ms, one per run of datagrams
// that GSO can send as one, sets s.wr.n to their number and returns the
// longest run.
func (s *sysConn) prepareWrite(ms []Datagram) (longest int) {
	d := &s.wr
	nh := 0
	for i := 0; i < len(ms); nh++ {
		j := s.runEnd(ms, i)
		h := &d.hdrs[nh]
		*h = mmsghdr{}
		for k := i; k < j; k++ {
			iov := &d.iovs[k]
			iov.Base = nil
			if len(ms[k].Buf) > 0 {
				iov.Base = &ms[k].Buf[0]
			}
			iov.SetLen(len(ms[k].Buf))
		}
		h.hdr.Iov = &d.iovs[i]
		h.hdr.SetIovlen(j - i)
		if !s.connected {
			h.hdr.Name = (*byte)(unsafe.Pointer(&d.names[nh]))
			h.hdr.Namelen = rawFromAddr(&d.names[nh], ms[i].Addr, s.is4)
		}
		if j-i > 1 {
			c := d.ctrl[nh*cmsgSpace : (nh+1)*cmsgSpace]
			clear(c)
			ch := (*unix.Cmsghdr)(unsafe.Pointer(&c[0]))
			ch.Level, ch.Type = unix.IPPROTO_UDP, unix.UDP_SEGMENT
			ch.SetLen(unix.CmsgLen(2))
			binary.NativeEndian.PutUint16(c[unix.CmsgLen(0):], uint16(len(ms[i].Buf)))
			h.hdr.Control = &c[0]
			h.hdr.SetControllen(unix.CmsgSpace(2))
		}
		d.ends[nh] = j
		longest = max(longest, j-i)
		i = j
	}
	d.n = nh
	return longest
}

// runEnd returns the index after the run of datagrams from ms[i] that one
// GSO message sends: the same destination, the same size (the last may be
// shorter), at most maxSegs of them and maxGSOBytes in all; i+1 without
// offload.
func (s *sysConn) runEnd(ms []Datagram, i int) int {
	size := len(ms[i].Buf)
	j := i + 1
	if !s.gso || size == 0 || (s.loopbackGSOOnly && !s.loopback(ms[i].Addr)) {
		return j
	}
	total := size
	for j < len(ms) && j-i < s.maxSegs && (s.connected || ms[j].Addr == ms[i].Addr) {
		l := len(ms[j].Buf)
		if l == 0 || l > size || total+l > maxGSOBytes {
			break
		}
		total += l
		j++
		if l < size {
			break // only the last segment may be shorter
		}
	}
	return j
}

// offloadRefused reports whether errno, from a write whose longest run was
// longest and whose first (the message the error is about) first, says the
// kernel cannot take the runs, after making the next write take what it
// can: runs of at most oldGSOSegments (a kernel before 6.10), or no
// offload at all (the kernel or the route's device cannot segment).
func (s *sysConn) offloadRefused(errno syscall.Errno, longest, first int) bool {
	if errno == unix.EINVAL && longest > oldGSOSegments {
		s.maxSegs = oldGSOSegments
		return true
	}
	if s.gso && first > 1 && (errno == unix.EIO || errno == unix.EINVAL || errno == unix.EOPNOTSUPP || errno == unix.ENOPROTOOPT) {
		s.gso = false
		return true
	}
	return false
}

// addrFromRaw reads a sockaddr_in or sockaddr_in6 the kernel filled in.
func addrFromRaw(sa *unix.RawSockaddrInet6) netip.AddrPort {
	switch sa.Family {
	case unix.AF_INET:
		sa4 := (*unix.RawSockaddrInet4)(unsafe.Pointer(sa))
		port := binary.BigEndian.Uint16((*[2]byte)(unsafe.Pointer(&sa4.Port))[:])
		return netip.AddrPortFrom(netip.AddrFrom4(sa4.Addr), port)
	case unix.AF_INET6:
		port := binary.BigEndian.Uint16((*[2]byte)(unsafe.Pointer(&sa.Port))[:])
		return netip.AddrPortFrom(netip.AddrFrom16(sa.Addr).Unmap(), port)
	}
	return netip.AddrPort{}
}

// rawFromAddr writes ap as the socket address a dual-stack (AF_INET6) or an
// AF_INET socket accepts, and returns its length. Go's UDP sockets bound to
// an IPv4 address are AF_INET; all others are AF_INET6 with mapped addresses.
func rawFromAddr(sa *unix.RawSockaddrInet6, ap netip.AddrPort, is4 bool) uint32 {
	*sa = unix.RawSockaddrInet6{}
	if is4 {
		sa4 := (*unix.RawSockaddrInet4)(unsafe.Pointer(sa))
		sa4.Family = unix.AF_INET
		binary.BigEndian.PutUint16((*[2]byte)(unsafe.Pointer(&sa4.Port))[:], ap.Port())
		sa4.Addr = ap.Addr().Unmap().As4()
		return unix.SizeofSockaddrInet4
	}
	sa.Family = unix.AF_INET6
	binary.BigEndian.PutUint16((*[2]byte)(unsafe.Pointer(&sa.Port))[:], ap.Port())
	sa.Addr = ap.Addr().As16()
	return unix.SizeofSockaddrInet6
}
