package rocev2

import (
	"encoding/binary"
	"net/netip"
)

// Ethernet and IP constants of a RoCEv2 frame.
const (
	etherHeaderLen = 14
	etherTypeIPv4  = 0x0800
	etherTypeIPv6  = 0x86DD
	ipProtoUDP     = 17
	ipv4DF         = 0x4000
)

// Frame is a whole RoCEv2 Ethernet frame: Ethernet II (no VLAN tag), IPv4
// without options or IPv6 without extension headers, UDP to port 4791, and
// the [Packet] with its ICRC.
//
// Lengths, the IPv4 header checksum, the BTH pad count and the ICRC are
// computed by AppendTo; every other field is sent as given, so a decoded
// frame re-encodes to the same bytes (pad bytes are sent as zeros).
type Frame struct {
	DstMAC, SrcMAC [6]byte
	// Src and Dst are both IPv4 or both IPv6 addresses (an IPv4-mapped IPv6
	// address is IPv6); the family chooses the IP header.
	Src, Dst     netip.Addr
	TOS          uint8  // IPv4 type of service or IPv6 traffic class: DSCP<<2 | ECN
	TTL          uint8  // IPv4 time to live or IPv6 hop limit
	ID           uint16 // IPv4 identification; unused with IPv6
	DontFragment bool   // IPv4 DF flag; unused with IPv6
	FlowLabel    uint32 // 20 bits, IPv6 only
	SrcPort      uint16 // UDP source port (RoCEv2 uses it for ECMP entropy)
	// UDPChecksum is sent as is: RoCEv2 senders send 0, the ICRC covers the
	// packet, and Decode does not check it.
	UDPChecksum uint16
	Packet
}

// IsIPv6 reports whether f is sent over IPv6.
func (f *Frame) IsIPv6() bool { return !f.Src.Is4() }

func (f *Frame) ipHeaderLen() int {
	if f.IsIPv6() {
		return ipv6HeaderLen
	}
	return ipv4HeaderLen
}

// Len returns the length of the frame f encodes to.
func (f *Frame) Len() int {
	return etherHeaderLen + f.ipHeaderLen() + udpHeaderLen + f.Packet.Len()
}

// Validate reports what keeps f from being encoded: see [Packet.Validate],
// plus invalid or mixed address families, a flow label wider than 20 bits,
// or a frame too long for the IP length fields.
func (f *Frame) Validate() error {
	switch {
	case f.Src.Is4() && f.Dst.Is4():
	case f.Src.Is6() && f.Dst.Is6():
		if f.FlowLabel > 0xFFFFF {
			return errFlowLabel
		}
	default:
		return errAddrFamily
	}
	if f.Len()-etherHeaderLen > 0xFFFF {
		return errTooLong
	}
	return f.Packet.Validate()
}

// AppendTo appends the whole frame, ICRC included, to b and returns the
// extended slice. It does not pad the frame to the Ethernet minimum (NICs
// do). It does not allocate when b has room for [Frame.Len] more bytes.
func (f *Frame) AppendTo(b []byte) ([]byte, error) {
	if err := f.Validate(); err != nil {
		return b, err
	}
	n := f.Len()
	b = grow(b, n)
	w := b[len(b)-n:]
	copy(w[0:6], f.DstMAC[:])
	copy(w[6:12], f.SrcMAC[:])
	ip := w[etherHeaderLen:]
	udpLen := udpHeaderLen + f.Packet.Len()
	// The headers are written as the ICRC sees them, their variant fields
	// all ones; those get their values once the ICRC is computed.
	var hl int
	if f.IsIPv6() {
		binary.BigEndian.PutUint16(w[12:], etherTypeIPv6)
		hl = ipv6HeaderLen
		binary.BigEndian.PutUint32(ip[0:], 0x6FFFFFFF) // traffic class, flow label
		binary.BigEndian.PutUint16(ip[4:], uint16(udpLen))
		ip[6] = ipProtoUDP
		ip[7] = 0xFF // hop limit
		s, d := f.Src.As16(), f.Dst.As16()
		copy(ip[8:24], s[:])
		copy(ip[24:40], d[:])
	} else {
		binary.BigEndian.PutUint16(w[12:], etherTypeIPv4)
		hl = ipv4HeaderLen
		ip[0] = 0x45
		ip[1] = 0xFF // type of service
		binary.BigEndian.PutUint16(ip[2:], uint16(hl+udpLen))
		binary.BigEndian.PutUint16(ip[4:], f.ID)
		var flags uint16
		if f.DontFragment {
			flags = ipv4DF
		}
		binary.BigEndian.PutUint16(ip[6:], flags)
		ip[8] = 0xFF // TTL
		ip[9] = ipProtoUDP
		ip[10], ip[11] = 0xFF, 0xFF // header checksum
		s, d := f.Src.As4(), f.Dst.As4()
		copy(ip[12:16], s[:])
		copy(ip[16:20], d[:])
	}
	udp := ip[hl:]
	binary.BigEndian.PutUint16(udp[0:], f.SrcPort)
	binary.BigEndian.PutUint16(udp[2:], UDPPort)
	binary.BigEndian.PutUint16(udp[4:], uint16(udpLen))
	udp[6], udp[7] = 0xFF, 0xFF // checksum
	end := len(w) - ICRCLen
	f.Packet.put(w[etherHeaderLen+hl+udpHeaderLen : end])
	udp[udpHeaderLen+4] = 0xFF // BTH FECN, BECN, Resv6
	icrc := crcUpdate(icrcSeed, ip[:end-etherHeaderLen])
	if hl == ipv6HeaderLen {
		binary.BigEndian.PutUint32(ip[0:], 6<<28|uint32(f.TOS)<<20|f.FlowLabel)
		ip[7] = f.TTL
	} else {
		ip[1], ip[8] = f.TOS, f.TTL
		ip[10], ip[11] = 0, 0
		binary.BigEndian.PutUint16(ip[10:], ipv4Checksum((*[ipv4HeaderLen]byte)(ip)))
	}
	binary.BigEndian.PutUint16(udp[6:], f.UDPChecksum)
	udp[udpHeaderLen+4] = bit(f.BTH.FECN, 7) | bit(f.BTH.BECN, 6)
	binary.LittleEndian.PutUint32(w[end:], icrc)
	return b, nil
}

// ipv4Checksum returns the header checksum of h, whose checksum field is zero.
// It adds 32-bit words and folds: the ones' complement sum is the same.
func ipv4Checksum(h *[ipv4HeaderLen]byte) uint16 {
	sum := uint64(binary.BigEndian.Uint32(h[0:])) + uint64(binary.BigEndian.Uint32(h[4:])) +
		uint64(binary.BigEndian.Uint32(h[8:])) + uint64(binary.BigEndian.Uint32(h[12:])) +
		uint64(binary.BigEndian.Uint32(h[16:]))
	sum = sum>>32 + sum&0xFFFFFFFF
	sum = sum>>16 + sum&0xFFFF
	sum = sum>>16 + sum&0xFFFF
	sum += sum >> 16
	return ^uint16(sum)
}

// Decode decodes a whole Ethernet frame into f and verifies its ICRC. It
// rejects what [Packet.Decode] rejects, a VLAN tag or an EtherType other than
// IPv4 and IPv6, IPv4 options, fragments and bad header checksums, IPv6
// extension headers, UDP to another port than 4791, IP and UDP lengths that
// disagree with the frame, and a bad ICRC ([*ICRCError]). Bytes after the IP
// packet (Ethernet padding) are ignored. Payload aliases b. On a bad ICRC f
// holds the decoded frame, for the caller to log; on any other error f is
// zero. It does not allocate, except for the [*ICRCError].
func (f *Frame) Decode(b []byte) error {
	err := f.decode(b)
	if _, badICRC := err.(*ICRCError); err != nil && !badICRC {
		*f = Frame{}
	}
	return err
}

func (f *Frame) decode(b []byte) error {
	if len(b) < etherHeaderLen {
		return errShortEther
	}
	copy(f.DstMAC[:], b[0:6])
	copy(f.SrcMAC[:], b[6:12])
	var ip []byte // the IP packet without Ethernet padding
	var hl int
	switch binary.BigEndian.Uint16(b[12:]) {
	case etherTypeIPv4:
		h := b[etherHeaderLen:]
		if len(h) < ipv4HeaderLen {
			return errShortIP
		}
		_ = h[19]
		if h[0]>>4 != 4 {
			return errIPVersion
		}
		if h[0]&15 != 5 {
			return errIPv4Options
		}
		total := int(binary.BigEndian.Uint16(h[2:]))
		if total < ipv4HeaderLen || total > len(h) {
			return errIPLength
		}
		if binary.BigEndian.Uint16(h[6:])&^ipv4DF != 0 {
			return errFragment
		}
		if h[9] != ipProtoUDP {
			return errIPProto
		}
		var sum [ipv4HeaderLen]byte
		copy(sum[:], h)
		sum[10], sum[11] = 0, 0
		if ipv4Checksum(&sum) != binary.BigEndian.Uint16(h[10:]) {
			return errIPChecksum
		}
		hl = ipv4HeaderLen
		ip = h[:total]
		f.TOS = h[1]
		f.FlowLabel = 0
		f.ID = binary.BigEndian.Uint16(h[4:])
		f.DontFragment = h[6]&0x40 != 0
		f.TTL = h[8]
		f.Src = netip.AddrFrom4([4]byte(h[12:16]))
		f.Dst = netip.AddrFrom4([4]byte(h[16:20]))
	case etherTypeIPv6:
		h := b[etherHeaderLen:]
		if len(h) < ipv6HeaderLen {
			return errShortIP
		}
		_ = h[39]
		v := binary.BigEndian.Uint32(h)
		if v>>28 != 6 {
			return errIPVersion
		}
		total := ipv6HeaderLen + int(binary.BigEndian.Uint16(h[4:]))
		if total > len(h) {
			return errIPLength
		}
		if h[6] != ipProtoUDP {
			return errIPv6NextHeader
		}
		hl = ipv6HeaderLen
		ip = h[:total]
		f.TOS = uint8(v >> 20)
		f.FlowLabel = v & 0xFFFFF
		f.ID, f.DontFragment = 0, false
		f.TTL = h[7]
		f.Src = netip.AddrFrom16([16]byte(h[8:24]))
		f.Dst = netip.AddrFrom16([16]byte(h[24:40]))
	default:
		return errEtherType
	}
	udp := ip[hl:]
	if len(udp) < udpHeaderLen {
		return errShortUDP
	}
	_ = udp[7]
	if binary.BigEndian.Uint16(udp[2:]) != UDPPort {
		return errUDPPort
	}
	if int(binary.BigEndian.Uint16(udp[4:])) != len(udp) {
		return errUDPLength
	}
	f.SrcPort = binary.BigEndian.Uint16(udp[0:])
	f.UDPChecksum = binary.BigEndian.Uint16(udp[6:])
	if err := f.Packet.Decode(udp[udpHeaderLen:]); err != nil {
		return err
	}
	// Packet.Decode checked the BTH is there, so the masked prefix is.
	var icrc uint32
	if hl == ipv6HeaderLen {
		icrc = icrcV6(ip[:len(ip)-ICRCLen])
	} else {
		icrc = icrcV4(ip[:len(ip)-ICRCLen])
	}
	if icrc != f.ICRC {
		return &ICRCError{Wire: f.ICRC, Computed: icrc}
	}
	return nil
}
