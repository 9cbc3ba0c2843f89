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
// last pad byte, without the ICRC) sent from src to dst over a socket. src
// and dst must both be IPv4 (or IPv4-mapped) or both IPv6. It does not
// allocate.
func DatagramICRC(src, dst netip.AddrPort, p []byte) (uint32, error) {
	if len(p) < BTHLen {
		return 0, errDatagramShort
	}
	s, d := src.Addr().Unmap(), dst.Addr().Unmap()
	udpLen := udpHeaderLen + len(p) + ICRCLen
	switch {
	case s.Is4() && d.Is4():
		if ipv4HeaderLen+udpLen > 0xFFFF {
			return 0, errDatagramLength
		}
		var m [maskedV4]byte
		m[0] = 0x45
		m[1] = 0xFF // type of service
		binary.BigEndian.PutUint16(m[2:], uint16(ipv4HeaderLen+udpLen))
		binary.BigEndian.PutUint16(m[6:], ipv4DF) // identification 0, DF
		m[8] = 0xFF                               // TTL
		m[9] = ipProtoUDP
		m[10], m[11] = 0xFF, 0xFF // header checksum
		sa, da := s.As4(), d.As4()
		copy(m[12:16], sa[:])
		copy(m[16:20], da[:])
		putUDPMasked(m[ipv4HeaderLen:], src.Port(), dst.Port(), udpLen)
		copy(m[ipv4HeaderLen+udpHeaderLen:], p[:BTHLen])
		m[ipv4HeaderLen+udpHeaderLen+4] = 0xFF // BTH FECN, BECN, Resv6
		return crcUpdate(UpdateCRC(icrcSeed, m[:]), p[BTHLen:]), nil
	case s.Is6() && d.Is6():
		if udpLen > 0xFFFF {
			return 0, errDatagramLength
		}
		var m [maskedV6]byte
		m[0], m[1], m[2], m[3] = 0x6F, 0xFF, 0xFF, 0xFF // version; traffic class and flow label masked
		binary.BigEndian.PutUint16(m[4:], uint16(udpLen))
		m[6] = ipProtoUDP
		m[7] = 0xFF // hop limit
		sa, da := s.As16(), d.As16()
		copy(m[8:24], sa[:])
		copy(m[24:40], da[:])
		putUDPMasked(m[ipv6HeaderLen:], src.Port(), dst.Port(), udpLen)
		copy(m[ipv6HeaderLen+udpHeaderLen:], p[:BTHLen])
		m[ipv6HeaderLen+udpHeaderLen+4] = 0xFF
		return crcUpdate(UpdateCRC(icrcSeed, m[:]), p[BTHLen:]), nil
	}
	return 0, errAddrFamily
}

func putUDPMasked(b []byte, srcPort, dstPort uint16, udpLen int) {
	binary.BigEndian.PutUint16(b[0:], srcPort)
	binary.BigEndian.PutUint16(b[2:], dstPort)
	binary.BigEndian.PutUint16(b[4:], uint16(udpLen))
	b[6], b[7] = 0xFF, 0xFF // UDP checksum
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
