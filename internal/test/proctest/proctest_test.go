package proctest

import "testing"

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
			if got, ok := bindable(network, port); !ok || got != port {
				t.Fatalf("%s port %d does not bind (%d, %v)", network, port, got, ok)
			}
		}
	}
}
