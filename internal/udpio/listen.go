package udpio

import (
	"context"
	"fmt"
	"net"
	"net/netip"
)

// ListenShards binds n UDP sockets to addr with SO_REUSEPORT, so that the
// kernel spreads the datagrams sent to addr over them, each flow (source
// and destination address and port) always to the same socket: n
// goroutines can then read one port. Port 0 lets the system choose one
// port for all. With n = 1 it is net.ListenUDP. On error no socket stays
// open.
func ListenShards(addr netip.AddrPort, n int) ([]*net.UDPConn, error) {
	if n < 1 {
		return nil, fmt.Errorf("udpio: %w: %d sockets", ErrBatch, n)
	}
	lc := listenConfig(n > 1)
	if n > 1 && lc.Control == nil {
		return nil, fmt.Errorf("udpio: %d sockets on %v: SO_REUSEPORT is not supported on this system", n, addr)
	}
	var ucs []*net.UDPConn
	for i := range n {
		uc, err := listenUDP(lc, addr.String())
		if err != nil {
			for _, u := range ucs {
				u.Close()
			}
			return nil, fmt.Errorf("udpio: socket %d of %d on %v: %w", i+1, n, addr, err)
		}
		if i == 0 {
			addr = uc.LocalAddr().(*net.UDPAddr).AddrPort()
		}
		ucs = append(ucs, uc)
	}
	return ucs, nil
}

func listenUDP(lc net.ListenConfig, addr string) (*net.UDPConn, error) {
	pc, err := lc.ListenPacket(context.Background(), "udp", addr)
	if err != nil {
		return nil, err
	}
	return pc.(*net.UDPConn), nil
}
