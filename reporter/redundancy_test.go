package reporter

import (
	"errors"
	"net"
	"testing"
)

// TestRedundancyRange: n is an int like keywrite's and keyincr's; a value
// the 8-bit wire field cannot hold is refused, not truncated (256 would
// have become 0, 257 a silent 1), and nothing is sent.
func TestRedundancyRange(t *testing.T) {
	s := newSink(t)
	r, err := New(Config{Translator: s.addr(), Batch: 1, AckPort: freeAckPort(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	for _, n := range []int{-1, 0, MaxRedundancy + 1, MaxRedundancy + 2} {
		if err := r.KeyWrite(1, []byte{1, 2, 3, 4}, n); !errors.Is(err, ErrRedundancy) {
			t.Errorf("KeyWrite(n=%d): %v; want ErrRedundancy", n, err)
		}
		if err := r.KeyIncrement(1, 1, n); !errors.Is(err, ErrRedundancy) {
			t.Errorf("KeyIncrement(n=%d): %v; want ErrRedundancy", n, err)
		}
	}
	if c := r.Counters(); c.Datagrams != 0 {
		t.Errorf("counters %+v; want nothing sent", c)
	}
	if err := r.KeyWrite(1, []byte{1, 2, 3, 4}, MaxRedundancy); err != nil {
		t.Errorf("KeyWrite(n=%d): %v", MaxRedundancy, err)
	}
	if c := r.Counters(); c.Datagrams != 1 {
		t.Errorf("counters %+v; want one sent", c)
	}
}

// freeAckPort returns a free UDP port for a test's acks: the default
// (40044) may be taken by a test of another package running at once.
func freeAckPort(t *testing.T) uint16 {
	t.Helper()
	uc, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer uc.Close()
	return uint16(uc.LocalAddr().(*net.UDPAddr).Port)
}
