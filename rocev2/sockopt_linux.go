package rocev2

import (
	"errors"
	"fmt"
	"net"

	"golang.org/x/sys/unix"
)

// ConfigureSocket makes a UDP socket send what [DatagramICRC] assumes of the
// IPv4 header: DF set and identification 0. It turns path MTU discovery to
// "do" (IP_PMTUDISC_DO), under which Linux neither fragments an unconnected
// socket's datagrams nor numbers them; without it each datagram gets an
// identification the ICRC would have to cover, and a peer that checks ICRCs
// against the real header (an RDMA NIC, Soft-RoCE) drops the packet. The
// socket must stay unconnected: a connected one numbers its datagrams.
func ConfigureSocket(uc *net.UDPConn) error {
	rc, err := uc.SyscallConn()
	if err != nil {
		return fmt.Errorf("rocev2: configure socket: %w", err)
	}
	var e4, e6 error
	if err := rc.Control(func(fd uintptr) {
		e4 = unix.SetsockoptInt(int(fd), unix.IPPROTO_IP, unix.IP_MTU_DISCOVER, unix.IP_PMTUDISC_DO)
		e6 = unix.SetsockoptInt(int(fd), unix.IPPROTO_IPV6, unix.IPV6_MTU_DISCOVER, unix.IPV6_PMTUDISC_DO)
	}); err != nil {
		return fmt.Errorf("rocev2: configure socket: %w", err)
	}
	if e4 != nil && e6 != nil {
		return fmt.Errorf("rocev2: configure socket: %w", errors.Join(e4, e6))
	}
	return nil
}
