//go:build linux && (amd64 || arm64)

package udpio

import (
	"encoding/binary"
	"fmt"
	"net"
	"net/netip"
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

type sysConn struct {
	raw       syscall.RawConn
	is4       bool // the socket is AF_INET, not a dual-stack AF_INET6 one
	connected bool
	// One reader and one writer may run at once, so each direction has
	// its own headers, buffers and call state.
	rd, wr direction
}

// direction holds one direction's message headers and the arguments and
// results of its call under way; fn is bound once so a call allocates no
// closure.
type direction struct {
	hdrs  []mmsghdr
	iovs  []unix.Iovec
	names []unix.RawSockaddrInet6
	n     int
	errno syscall.Errno
	fn    func(fd uintptr) bool
}

func (d *direction) init(max int, call uintptr) {
	d.hdrs = make([]mmsghdr, max)
	d.iovs = make([]unix.Iovec, max)
	d.names = make([]unix.RawSockaddrInet6, max)
	d.fn = func(fd uintptr) bool {
		r, _, e := unix.Syscall6(call, fd, uintptr(unsafe.Pointer(&d.hdrs[0])), uintptr(d.n), unix.MSG_DONTWAIT, 0, 0)
		if e == unix.EAGAIN {
			return false // wait for the poller
		}
		d.n, d.errno = int(r), e
		return true
	}
}

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
	s.rd.init(max, unix.SYS_RECVMMSG)
	s.wr.init(max, unix.SYS_SENDMMSG)
	return nil
}

func (d *direction) prepare(ms []Message, withNames bool) {
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

func (s *sysConn) readBatch(uc *net.UDPConn, ms []Message) (int, error) {
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
		ms[i].N = min(int(d.hdrs[i].len), len(ms[i].Buf))
		ms[i].Addr = addrFromRaw(&d.names[i])
	}
	return n, nil
}

func (s *sysConn) writeBatch(uc *net.UDPConn, ms []Message) (int, error) {
	d := &s.wr
	d.prepare(ms, !s.connected)
	if !s.connected {
		for i := range ms {
			if !ms[i].Addr.IsValid() || (s.is4 && !ms[i].Addr.Addr().Unmap().Is4()) {
				return i, fmt.Errorf("udpio: sendmmsg: %w: message %d has destination %v, which this socket cannot reach", ErrBatch, i, ms[i].Addr)
			}
			d.hdrs[i].hdr.Namelen = rawFromAddr(&d.names[i], ms[i].Addr, s.is4)
		}
	}
	d.n = len(ms)
	if err := s.raw.Write(d.fn); err != nil {
		return 0, &net.OpError{Op: "sendmmsg", Net: "udp", Source: uc.LocalAddr(), Err: err}
	}
	if d.errno != 0 {
		return 0, &net.OpError{Op: "sendmmsg", Net: "udp", Source: uc.LocalAddr(), Err: d.errno}
	}
	return d.n, nil
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
