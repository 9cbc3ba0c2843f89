package dta

import (
	"encoding/binary"
	"net/netip"
	"slices"
)

// Lengths of the headers a [FrameBuilder] writes before the report.
const (
	EthernetLen = 14
	IPv4Len     = 20 // no options
	UDPLen      = 8
	// FrameOverhead is the bytes a frame carries before its report.
	FrameOverhead = EthernetLen + IPv4Len + UDPLen
)

// FrameBuilder builds Ethernet/IPv4/UDP frames carrying DTA reports, as a
// reporter sends them. Set the addresses once and call AppendFrame per
// report; for a UDP socket, [AppendPayload] gives the datagram alone.
//
// Frames carry IPv4 without options, type of service 0, identification 0,
// the don't-fragment flag, and computed IPv4 and UDP checksums (section 8.1
// of docs/DTA-WIRE.md).
type FrameBuilder struct {
	SrcMAC, DstMAC [6]byte
	SrcIP, DstIP   netip.Addr // both IPv4
	SrcPort        uint16     // sent as is
	DstPort        uint16     // 0 means ReportPort
	TTL            uint8      // 0 means 64
}

// AppendFrame appends the whole frame carrying r to b and returns the
// extended slice. It validates r ([Report.Validate]) and the addresses
// first, and returns b unchanged with an error when either is wrong. It
// does not allocate when b has room for [FrameOverhead] + r.Len() bytes.
func (f *FrameBuilder) AppendFrame(b []byte, r *Report) ([]byte, error) {
	if err := r.Validate(); err != nil {
		return b, err
	}
	dport := f.DstPort
	if dport == 0 {
		dport = ReportPort
	}
	b, ip, err := f.appendHeaders(b, dport, r.Len())
	if err != nil {
		return b, err
	}
	return finishUDP(r.AppendTo(b), ip), nil
}

// AppendAckFrame appends a whole frame carrying the acknowledgement a to b,
// as a translator sends it, and returns the extended slice. A zero DstPort
// means [AckPort] here. It does not allocate when b has room for
// [FrameOverhead] + a.Len() bytes.
func (f *FrameBuilder) AppendAckFrame(b []byte, a Ack) ([]byte, error) {
	if err := a.Validate(); err != nil {
		return b, err
	}
	dport := f.DstPort
	if dport == 0 {
		dport = AckPort
	}
	b, ip, err := f.appendHeaders(b, dport, a.Len())
	if err != nil {
		return b, err
	}
	return finishUDP(a.AppendTo(b), ip), nil
}

// appendHeaders appends the Ethernet, IPv4 and UDP headers of a datagram
// with n payload bytes, the UDP checksum left 0, and returns the offset of
// the IPv4 header. It grows b once for the whole frame and returns b
// unchanged on error.
func (f *FrameBuilder) appendHeaders(b []byte, dport uint16, n int) ([]byte, int, error) {
	if !f.SrcIP.Is4() || !f.DstIP.Is4() {
		return b, 0, errFrameNotIPv4
	}
	udpLen := UDPLen + n
	ipLen := IPv4Len + udpLen
	if ipLen > 0xffff {
		return b, 0, errFrameTooLarge
	}
	off := len(b)
	b = slices.Grow(b, FrameOverhead+n)[:off+FrameOverhead]
	h := b[off:]
	_ = h[FrameOverhead-1]
	copy(h[0:6], f.DstMAC[:])
	copy(h[6:12], f.SrcMAC[:])
	h[12], h[13] = 0x08, 0x00 // EtherType IPv4

	ip := h[EthernetLen:]
	ttl := f.TTL
	if ttl == 0 {
		ttl = 64
	}
	ip[0], ip[1] = 0x45, 0 // version 4, IHL 5; type of service
	binary.BigEndian.PutUint16(ip[2:], uint16(ipLen))
	ip[4], ip[5] = 0, 0    // identification
	ip[6], ip[7] = 0x40, 0 // don't fragment
	ip[8], ip[9] = ttl, 17 // TTL, protocol UDP
	ip[10], ip[11] = 0, 0  // checksum, below
	*(*[4]byte)(ip[12:16]) = f.SrcIP.As4()
	*(*[4]byte)(ip[16:20]) = f.DstIP.As4()
	binary.BigEndian.PutUint16(ip[10:], ^fold(sum16(ip[:IPv4Len], 0)))

	udp := ip[IPv4Len:]
	binary.BigEndian.PutUint16(udp[0:], f.SrcPort)
	binary.BigEndian.PutUint16(udp[2:], dport)
	binary.BigEndian.PutUint16(udp[4:], uint16(udpLen))
	udp[6], udp[7] = 0, 0 // checksum, finishUDP
	return b, off + EthernetLen, nil
}

// finishUDP fills in the UDP checksum of the datagram that starts after the
// IPv4 header at b[ip:] and runs to the end of b: the one's-complement sum
// over the pseudo-header (addresses, protocol, UDP length) and the
// datagram, with 0 sent as 0xffff (RFC 768).
func finishUDP(b []byte, ip int) []byte {
	udp := ip + IPv4Len
	s := sum16(b[ip+12:ip+20], 17+uint64(len(b)-udp))
	c := ^fold(sum16(b[udp:], s))
	if c == 0 {
		c = 0xffff
	}
	binary.BigEndian.PutUint16(b[udp+6:], c)
	return b
}

// AppendPayload appends r's encoding, the payload of a UDP datagram to
// [ReportPort], to b after validating r, and returns the extended slice. It
// does not allocate when b has room for r.Len() bytes.
func AppendPayload(b []byte, r *Report) ([]byte, error) {
	if err := r.Validate(); err != nil {
		return b, err
	}
	return r.AppendTo(b), nil
}

// sum16 adds b, as big-endian 16-bit words (an odd last byte padded with
// zero), to s without folding. 64 bits hold the carries of any datagram.
func sum16(b []byte, s uint64) uint64 {
	for len(b) >= 8 {
		s += uint64(binary.BigEndian.Uint32(b)) + uint64(binary.BigEndian.Uint32(b[4:]))
		b = b[8:]
	}
	for len(b) >= 2 {
		s += uint64(binary.BigEndian.Uint16(b))
		b = b[2:]
	}
	if len(b) == 1 {
		s += uint64(b[0]) << 8
	}
	return s
}

// fold folds a 64-bit sum of 16-bit words into a one's-complement 16-bit sum.
func fold(s uint64) uint16 {
	for s>>16 != 0 {
		s = s&0xffff + s>>16
	}
	return uint16(s)
}
