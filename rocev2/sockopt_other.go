//go:build !linux

package rocev2

import "net"

// ConfigureSocket does nothing off Linux: how the system numbers IPv4
// datagrams is not known there (see the Linux version).
func ConfigureSocket(uc *net.UDPConn) error { return nil }
