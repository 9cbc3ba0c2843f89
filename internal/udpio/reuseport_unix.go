//go:build unix

package udpio

import (
	"net"
	"syscall"

	"golang.org/x/sys/unix"
)

func listenConfig(reuse bool) net.ListenConfig {
	if !reuse {
		return net.ListenConfig{}
	}
	return net.ListenConfig{Control: func(_, _ string, rc syscall.RawConn) error {
		var serr error
		if err := rc.Control(func(fd uintptr) {
			serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_REUSEPORT, 1)
		}); err != nil {
			return err
		}
		return serr
	}}
}
