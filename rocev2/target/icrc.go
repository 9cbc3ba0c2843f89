package target

import (
	"encoding/binary"
	"net/netip"

	"github.com/dtakit/dtakit/rocev2"
)

// The ICRC check of a received packet reuses rocev2.PseudoHeaderCRC, which
// depends only on the addresses and the length, cached per source: it
// computes exactly rocev2.DatagramICRC (a test cross-checks it), and the
// ICRC of a small packet costs about twice the rest of its handling
// otherwise. The responses' ICRCs are rc.Responder's.

// headerCache remembers the header CRC of recent sources and lengths.
type headerCache [16]struct {
	src   netip.AddrPort
	n     int
	crc   uint32
	valid bool
}

// verify reports whether b, a whole UDP payload from src to dst (at least a
// BTH and an ICRC long), carries the right ICRC.
func (hc *headerCache) verify(src, dst netip.AddrPort, b []byte) bool {
	n := len(b)
	e := &hc[(uint(src.Port())^uint(n)*7)&15]
	if !e.valid || e.n != n || e.src != src {
		crc, err := rocev2.PseudoHeaderCRC(src, dst, n)
		if err != nil {
			return false
		}
		e.src, e.n, e.crc, e.valid = src, n, crc, true
	}
	computed, wire := rocev2.PayloadICRC(e.crc, b[:n-rocev2.ICRCLen]), binary.LittleEndian.Uint32(b[n-rocev2.ICRCLen:])
	return rocev2.DatagramICRCMatches(src, dst, n, wire, computed)
}
