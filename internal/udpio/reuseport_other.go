//go:build !unix

package udpio

import "net"

func listenConfig(reuse bool) net.ListenConfig { return net.ListenConfig{} }
