package rocev2

import (
	"encoding/binary"
	"fmt"
	"net/netip"
)

// RoCEv2 over UDP sockets.
//
// A software translator and a software target exchange RoCEv2 packets as UDP
// payloads through ordinary sockets, which never show them the IP header the
// ICRC covers. Both sides therefore compute the ICRC over the header the
// packet would have had, built from the socket addresses alone (spec section
// 8.3): IPv4 with identification 0 and DF set, or IPv6, the addresses and
// ports of the datagram, and every field the ICRC masks set to ones as usual.
// A corrupted BTH, extension header or payload, or a packet meant for another
// address or port, fails verification as it would at a NIC.

var (
	errDatagramShort  = fmt.Errorf("datagram icrc: %w: shorter than a BTH and the ICRC", ErrTruncated)
	errDatagramLength = fmt.Errorf("datagram icrc: %w: longer than an IP packet can carry", ErrLength)
)

// DatagramICRC returns the ICRC of a RoCEv2 UDP payload p (BTH through the
// last pad byte, without the ICRC) sent from src to dst over a socket:
// [PayloadICRC] after [PseudoHeaderCRC]. src and dst must both be IPv4 (or
// IPv4-mapped) or both IPv6. It does not allocate.
func DatagramICRC(src, dst netip.AddrPort, p []byte) (uint32, error) {
	if len(p) < BTHLen {
		return 0, errDatagramShort
	}
	crc, err := PseudoHeaderCRC(src, dst, len(p)+ICRCLen)
	if err != nil {
		return 0, err
	}
	return PayloadICRC(crc, p), nil
}

// ICRCCache verifies the ICRCs of received datagrams as [DatagramICRC] and
// [DatagramICRCMatches] do, with the CRC of the IP and UDP headers
// ([PseudoHeaderCRC]) kept for the last sources, destinations and lengths
// it met: a receiver's datagrams come from few peers in few lengths, and
// the headers are about half the ICRC of a small packet. The zero value is
// empty and ready; an ICRCCache is not safe for concurrent use.
type ICRCCache struct {
	e [16]struct {
		src, dst netip.AddrPort
		n        int
		crc      uint32
		valid    bool
	}
}

// Verify reports whether b, a whole UDP payload from src to dst (its BTH
// through its ICRC), carries the right ICRC. It does not allocate once it
// has met the length.
func (c *ICRCCache) Verify(src, dst netip.AddrPort, b []byte) bool {
	n := len(b)
	if n < BTHLen+ICRCLen {
		return false
	}
	e := &c.e[(uint(src.Port())^uint(n)*7)&15]
	if !e.valid || e.n != n || e.src != src || e.dst != dst {
		crc, err := PseudoHeaderCRC(src, dst, n)
		if err != nil {
			return false
		}
		e.src, e.dst, e.n, e.crc, e.valid = src, dst, n, crc, true
	}
	computed, wire := PayloadICRC(e.crc, b[:n-ICRCLen]), binary.LittleEndian.Uint32(b[n-ICRCLen:])
	return DatagramICRCMatches(src, dst, n, wire, computed)
}

// AppendDatagram appends p, pad and ICRC included, to b as the UDP payload
// of a datagram from src to dst, and returns the extended slice. The ICRC is
// [DatagramICRC]'s. It does not allocate when b has room for p.Len() more
// bytes.
func (p *Packet) AppendDatagram(b []byte, src, dst netip.AddrPort) ([]byte, error) {
	start := len(b)
	b, err := p.AppendTo(b)
	if err != nil {
		return b[:start], err
	}
	icrc, err := DatagramICRC(src, dst, b[start:])
	if err != nil {
		return b[:start], err
	}
	return binary.LittleEndian.AppendUint32(b, icrc), nil
}

// DecodeDatagram decodes the UDP payload of a datagram received from src at
// dst into p and verifies its ICRC ([DatagramICRC], with the sender's IPv4
// identification recovered as [DatagramICRCMatches] does). Payload aliases b. A
// mismatch returns an [*ICRCError] and leaves the decoded fields in p, for
// logging; other errors leave p zero. It does not allocate, except for the
// [*ICRCError].
func (p *Packet) DecodeDatagram(b []byte, src, dst netip.AddrPort) error {
	if err := p.Decode(b); err != nil {
		return err
	}
	icrc, err := DatagramICRC(src, dst, b[:len(b)-ICRCLen])
	if err != nil {
		*p = Packet{}
		return err
	}
	if !DatagramICRCMatches(src, dst, len(b), p.ICRC, icrc) {
		return &ICRCError{Wire: p.ICRC, Computed: icrc}
	}
	return nil
}
