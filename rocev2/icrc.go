package rocev2

import (
	"encoding/binary"
	"math/bits"
	"net/netip"

	"github.com/klauspost/crc32"
)

// The ICRC (IBTA vol. 1 annex A17.4) is CRC-32/ISO-HDLC (the IEEE polynomial
// 0x04C11DB7, reflected, init and xor-out 0xFFFFFFFF) over
//
//	8 bytes of 0xFF (standing in for the LRH RoCEv2 does not carry)
//	the IP header, its variant fields set to all ones:
//	  IPv4: type of service, TTL, header checksum
//	  IPv6: traffic class, flow label, hop limit
//	the UDP header, its checksum set to 0xFFFF
//	the BTH, its byte 4 (FECN, BECN, Resv6) set to 0xFF
//	every byte after the BTH up to the ICRC (extension headers, payload, pad)
//
// and is sent least-significant byte first.

// ICRCLen is the length of the ICRC trailer.
const ICRCLen = 4

const (
	ipv4HeaderLen = 20
	ipv6HeaderLen = 40
	udpHeaderLen  = 8
	// maskedV4 and maskedV6 are the masked prefixes: IP, UDP and BTH headers.
	maskedV4 = ipv4HeaderLen + udpHeaderLen + BTHLen
	maskedV6 = ipv6HeaderLen + udpHeaderLen + BTHLen
)

// icrcSeed is the CRC state after the 8 bytes of 0xFF.
var icrcSeed = crc32.Update(0, crc32.IEEETable, []byte{0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF})

// ICRC returns the ICRC of a RoCEv2 IP packet. ipPacket runs from the first
// byte of the IPv4 or IPv6 header through the last pad byte, without the
// ICRC. The IPv4 header must have no options and the IPv6 header must be
// followed directly by UDP; ICRC checks that, the version nibble and the
// length, nothing else. It does not allocate.
func ICRC(ipPacket []byte) (uint32, error) {
	if len(ipPacket) < 1 {
		return 0, errICRCShort
	}
	switch ipPacket[0] >> 4 {
	case 4:
		if len(ipPacket) < maskedV4 {
			return 0, errICRCShort
		}
		if ipPacket[0]&15 != 5 {
			return 0, errIPv4Options
		}
		return icrcV4(ipPacket), nil
	case 6:
		if len(ipPacket) < maskedV6 {
			return 0, errICRCShort
		}
		if ipPacket[6] != ipProtoUDP {
			return 0, errIPv6NextHeader
		}
		return icrcV6(ipPacket), nil
	}
	return 0, errIPVersion
}

// VerifyICRC checks the ICRC in the last 4 bytes of ipPacket, which runs from
// the first byte of the IP header through the ICRC. A mismatch returns an
// [*ICRCError]. Other than that it does not allocate.
func VerifyICRC(ipPacket []byte) error {
	if len(ipPacket) < ICRCLen {
		return errICRCShort
	}
	n := len(ipPacket) - ICRCLen
	got, err := ICRC(ipPacket[:n])
	if err != nil {
		return err
	}
	if wire := binary.LittleEndian.Uint32(ipPacket[n:]); wire != got {
		return &ICRCError{Wire: wire, Computed: got}
	}
	return nil
}

// icrcV4 computes the ICRC of an IPv4 packet without options, at least
// maskedV4 bytes long.
func icrcV4(p []byte) uint32 {
	var m [ipv4HeaderLen + udpHeaderLen]byte
	copy(m[:], p)
	m[1] = 0xFF               // type of service
	m[8] = 0xFF               // TTL
	m[10], m[11] = 0xFF, 0xFF // header checksum
	m[26], m[27] = 0xFF, 0xFF // UDP checksum
	return PayloadICRC(UpdateCRC(icrcSeed, m[:]), p[len(m):])
}

// icrcV6 computes the ICRC of an IPv6 packet whose next header is UDP, at
// least maskedV6 bytes long.
func icrcV6(p []byte) uint32 {
	var m [ipv6HeaderLen + udpHeaderLen]byte
	copy(m[:], p)
	m[0] |= 0x0F                        // traffic class, high nibble
	m[1], m[2], m[3] = 0xFF, 0xFF, 0xFF // traffic class, low nibble; flow label
	m[7] = 0xFF                         // hop limit
	m[46], m[47] = 0xFF, 0xFF           // UDP checksum
	return PayloadICRC(UpdateCRC(icrcSeed, m[:]), p[len(m):])
}

// PseudoHeaderCRC returns the ICRC's CRC state after the LRH stand-in and
// the masked IP and UDP headers of a datagram from src to dst whose UDP
// payload (BTH through ICRC) is n bytes: the header a socket never shows,
// built as [DatagramICRC] builds it. The state depends only on the
// addresses and n, so a sender or receiver may cache it and finish each
// packet with [PayloadICRC]. src and dst must both be IPv4 (or
// IPv4-mapped) or both IPv6. It does not allocate.
func PseudoHeaderCRC(src, dst netip.AddrPort, n int) (uint32, error) {
	s, d := src.Addr().Unmap(), dst.Addr().Unmap()
	udpLen := udpHeaderLen + n
	var m [ipv6HeaderLen + udpHeaderLen]byte
	var h []byte
	switch {
	case s.Is4() && d.Is4():
		if ipv4HeaderLen+udpLen > 0xFFFF {
			return 0, errDatagramLength
		}
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
		h = m[:ipv4HeaderLen+udpHeaderLen]
	case s.Is6() && d.Is6():
		if udpLen > 0xFFFF {
			return 0, errDatagramLength
		}
		m[0], m[1], m[2], m[3] = 0x6F, 0xFF, 0xFF, 0xFF // version; traffic class and flow label masked
		binary.BigEndian.PutUint16(m[4:], uint16(udpLen))
		m[6] = ipProtoUDP
		m[7] = 0xFF // hop limit
		sa, da := s.As16(), d.As16()
		copy(m[8:24], sa[:])
		copy(m[24:40], da[:])
		h = m[:]
	default:
		return 0, errAddrFamily
	}
	u := h[len(h)-udpHeaderLen:]
	binary.BigEndian.PutUint16(u[0:], src.Port())
	binary.BigEndian.PutUint16(u[2:], dst.Port())
	binary.BigEndian.PutUint16(u[4:], uint16(udpLen))
	u[6], u[7] = 0xFF, 0xFF // UDP checksum
	return UpdateCRC(icrcSeed, h), nil
}

// PayloadICRC returns the ICRC of a UDP payload p (BTH through the last pad
// byte, without the ICRC, at least a BTH long) given crc, the state after
// its IP and UDP headers ([PseudoHeaderCRC]). It masks BTH byte 4 (FECN,
// BECN, Resv6). It does not allocate.
func PayloadICRC(crc uint32, p []byte) uint32 {
	var bth [BTHLen]byte
	copy(bth[:], p)
	bth[4] = 0xFF // FECN, BECN, Resv6
	return crcUpdate(UpdateCRC(crc, bth[:]), p[BTHLen:])
}

// LinearCRC returns the linear part of the ICRC's CRC over p: the register
// after p from 0, with no final XOR. For x and y of one length,
// LinearCRC(x XOR y) = ICRC(x) XOR ICRC(y), and leading zeros do not change
// it: what lets a sender keep the ICRC of a template and patch in the bytes
// that vary. It does not allocate.
func LinearCRC(p []byte) uint32 { return ^UpdateCRC(0xFFFFFFFF, p) }

var zeros [64]byte

// DeltaTable fills t with what each byte value adds to an ICRC when d bytes
// follow it: t[v] is [LinearCRC] of v followed by d zeros.
func DeltaTable(t *[256]uint32, d int) {
	var base [8]uint32
	for bit := range base {
		r := LinearCRC([]byte{1 << bit})
		for n := d; n > 0; n -= len(zeros) {
			r = ^UpdateCRC(^r, zeros[:min(n, len(zeros))])
		}
		base[bit] = r
	}
	t[0] = 0
	for v := 1; v < 256; v++ {
		t[v] = t[v&(v-1)] ^ base[bits.TrailingZeros(uint(v))]
	}
}

// crcUpdate is crc32.Update: slicing by 8 (UpdateCRC) for short inputs,
// where the library's call and setup cost more than they save, the
// library's folding for long ones, with the tail of fewer than 16 bytes by
// UpdateCRC (the library does it a byte at a time).
func crcUpdate(crc uint32, p []byte) uint32 {
	if len(p) < 64 {
		return UpdateCRC(crc, p)
	}
	n := len(p) &^ 15
	return UpdateCRC(crc32.Update(crc, crc32.IEEETable, p[:n]), p[n:])
}

// slicing8 holds the tables of a slicing-by-8 CRC-32/ISO-HDLC:
// slicing8[k][v] is what byte v adds to the CRC register when k zero bytes
// follow it.
var slicing8 = func() (t [8][256]uint32) {
	for i := range 256 {
		c := uint32(i)
		for range 8 {
			if c&1 != 0 {
				c = c>>1 ^ 0xEDB88320
			} else {
				c >>= 1
			}
		}
		t[0][i] = c
	}
	for i := range 256 {
		for k := 1; k < 8; k++ {
			t[k][i] = t[k-1][i]>>8 ^ t[0][t[k-1][i]&0xFF]
		}
	}
	return t
}()

// UpdateCRC returns the CRC-32/ISO-HDLC that the ICRC is made of, continued
// from crc over p: crc32.Update(crc, crc32.IEEETable, p), by slicing by 8.
// It is for short inputs, such as the masked headers, and for callers that
// keep their own ICRC state (the software target and translator cache the
// CRC after the headers and derive ICRCs from it); for those it is faster
// than the library, and since it makes no call through a function variable,
// a stack buffer passed to it stays on the stack. It does not allocate and
// does not let p escape.
func UpdateCRC(crc uint32, p []byte) uint32 {
	crc = ^crc
	for len(p) >= 8 {
		crc ^= binary.LittleEndian.Uint32(p)
		crc = slicing8[0][p[7]] ^ slicing8[1][p[6]] ^ slicing8[2][p[5]] ^ slicing8[3][p[4]] ^
			slicing8[4][crc>>24] ^ slicing8[5][crc>>16&0xFF] ^ slicing8[6][crc>>8&0xFF] ^ slicing8[7][crc&0xFF]
		p = p[8:]
	}
	if len(p) >= 4 { // RoCEv2 packets are padded to 4 bytes: the usual tail
		crc ^= binary.LittleEndian.Uint32(p)
		crc = slicing8[0][crc>>24] ^ slicing8[1][crc>>16&0xFF] ^ slicing8[2][crc>>8&0xFF] ^ slicing8[3][crc&0xFF]
		p = p[4:]
	}
	for _, c := range p {
		crc = slicing8[0][byte(crc)^c] ^ crc>>8
	}
	return ^crc
}
