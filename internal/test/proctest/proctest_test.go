package proctest

import (
	"net"
	"strconv"
	"testing"
)

// TestFreePort: the ports are below the ephemeral range, where no
// outgoing connection takes one, and a program can bind them.
func TestFreePort(t *testing.T) {
	lo, hi := freeRange()
	if lo >= hi {
		t.Fatalf("range %d-%d", lo, hi)
	}
	for _, network := range []string{"tcp", "udp"} {
		for range 20 {
			port := FreePort(t, network)
			if port < lo || port >= hi {
				t.Fatalf("%s port %d, want %d-%d", network, port, lo, hi-1)
			}
			addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
			if network == "udp" {
				c, err := net.ListenPacket("udp4", addr)
				if err != nil {
					t.Fatal(err)
				}
				c.Close()
			} else {
				l, err := net.Listen("tcp4", addr)
				if err != nil {
					t.Fatal(err)
				}
				l.Close()
			}
		}
	}
}
