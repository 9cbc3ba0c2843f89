//go:build !(linux && (amd64 || arm64))

package udpio

import (
	"net"
	"sync/atomic"
)

// sysConn moves one datagram per system call where recvmmsg and sendmmsg
// are not wired up.
type sysConn struct {
	connected        bool
	loopbackGSOOnly  bool // no GSO here: nothing to limit
	rdCalls, wrCalls atomic.Uint64
}

func (s *sysConn) calls() (read, write uint64) { return s.rdCalls.Load(), s.wrCalls.Load() }

func (s *sysConn) init(uc *net.UDPConn, max int) error {
	s.connected = uc.RemoteAddr() != nil
	return nil
}

func (s *sysConn) readBatch(uc *net.UDPConn, ms []Datagram, _ bool) (int, error) {
	s.rdCalls.Add(1)
	n, addr, err := uc.ReadFromUDPAddrPort(ms[0].Buf)
	if err != nil {
		return 0, err
	}
	ms[0].Buf, ms[0].Addr, ms[0].Truncated = ms[0].Buf[:n], addr, false
	return 1, nil
}

func (s *sysConn) writeBatch(uc *net.UDPConn, ms []Datagram) (int, error) {
	for i := range ms {
		var err error
		s.wrCalls.Add(1)
		if s.connected {
			_, err = uc.Write(ms[i].Buf)
		} else {
			_, err = uc.WriteToUDPAddrPort(ms[i].Buf, ms[i].Addr)
		}
		if err != nil {
			return i, err
		}
	}
	return len(ms), nil
}
