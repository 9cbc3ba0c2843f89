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
	hdrs      []mmsghdr
	iovs      []unix.Iovec
	names     []unix.RawSockaddrInet6

	// The arguments and results of the call under way; readFn and writeFn
	// are bound once so the calls allocate no closure.
	n       int
	errno   syscall.Errno
	readFn  func(fd uintptr) bool
	writeFn func(fd uintptr) bool
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
	s.hdrs = make([]mmsghdr, max)
	s.iovs = make([]unix.Iovec, max)
	s.names = make([]unix.RawSockaddrInet6, max)
	s.readFn = s.recvmmsg
	s.writeFn = s.sendmmsg
	return nil
}

func (s *sysConn) recvmmsg(fd uintptr) bool {
	r, _, e := unix.Syscall6(unix.SYS_RECVMMSG, fd, uintptr(unsafe.Pointer(&s.hdrs[0])), uintptr(s.n), unix.MSG_DONTWAIT, 0, 0)
	if e == unix.EAGAIN {
		return false // wait for the poller
	}
	s.n, s.errno = int(r), e
	return true
}

func (s *sysConn) sendmmsg(fd uintptr) bool {
	r, _, e := unix.Syscall6(unix.SYS_SENDMMSG, fd, uintptr(unsafe.Pointer(&s.hdrs[0])), uintptr(s.n), unix.MSG_DONTWAIT, 0, 0)
	if e == unix.EAGAIN {
		return false
	}
	s.n, s.errno = int(r), e
	return true
}

func (s *sysConn) prepare(ms []Message, withNames bool) {
	for i := range ms {
		h := &s.hdrs[i]
		*h = mmsghdr{}
		iov := &s.iovs[i]
		iov.Base = nil
		if len(ms[i].Buf) > 0 {
			iov.Base = &ms[i].Buf[0]
		}
		iov.SetLen(len(ms[i].Buf))
		h.hdr.Iov = iov
		h.hdr.SetIovlen(1)
		if withNames {
			h.hdr.Name = (*byte)(unsafe.Pointer(&s.names[i]))
			h.hdr.Namelen = uint32(unsafe.Sizeof(s.names[i]))
		}
	}
}

func (s *sysConn) readBatch(uc *net.UDPConn, ms []Message) (int, error) {
	s.prepare(ms, true)
	s.n = len(ms)
	if err := s.raw.Read(s.readFn); err != nil {
		return 0, &net.OpError{Op: "recvmmsg", Net: "udp", Source: uc.LocalAddr(), Err: err}
	}
	if s.errno != 0 {
		return 0, &net.OpError{Op: "recvmmsg", Net: "udp", Source: uc.LocalAddr(), Err: s.errno}
	}
	n := s.n
	for i := 0; i < n; i++ {
		ms[i].N = min(int(s.hdrs[i].len), len(ms[i].Buf))
		ms[i].Addr = addrFromRaw(&s.names[i])
	}
	return n, nil
}

func (s *sysConn) writeBatch(uc *net.UDPConn, ms []Message) (int, error) {
	s.prepare(ms, !s.connected)
	if !s.connected {
		for i := range ms {
			if !ms[i].Addr.IsValid() || (s.is4 && !ms[i].Addr.Addr().Unmap().Is4()) {
				return i, fmt.Errorf("udpio: sendmmsg: %w: message %d has destination %v, which this socket cannot reach", ErrBatch, i, ms[i].Addr)
			}
			s.hdrs[i].hdr.Namelen = rawFromAddr(&s.names[i], ms[i].Addr, s.is4)
		}
	}
	s.n = len(ms)
	if err := s.raw.Write(s.writeFn); err != nil {
		return 0, &net.OpError{Op: "sendmmsg", Net: "udp", Source: uc.LocalAddr(), Err: err}
	}
	if s.errno != 0 {
		return 0, &net.OpError{Op: "sendmmsg", Net: "udp", Source: uc.LocalAddr(), Err: s.errno}
	}
	return s.n, nil
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
