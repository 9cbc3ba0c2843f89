package rocev2

import (
	"encoding/binary"

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
	var m [maskedV4]byte
	copy(m[:], p)
	m[1] = 0xFF                            // type of service
	m[8] = 0xFF                            // TTL
	m[10], m[11] = 0xFF, 0xFF              // header checksum
	m[26], m[27] = 0xFF, 0xFF              // UDP checksum
	m[ipv4HeaderLen+udpHeaderLen+4] = 0xFF // BTH FECN, BECN, Resv6
	return crcUpdate(UpdateCRC(icrcSeed, m[:]), p[maskedV4:])
}

// icrcV6 computes the ICRC of an IPv6 packet whose next header is UDP, at
// least maskedV6 bytes long.
func icrcV6(p []byte) uint32 {
	var m [maskedV6]byte
	copy(m[:], p)
	m[0] |= 0x0F                           // traffic class, high nibble
	m[1], m[2], m[3] = 0xFF, 0xFF, 0xFF    // traffic class, low nibble; flow label
	m[7] = 0xFF                            // hop limit
	m[46], m[47] = 0xFF, 0xFF              // UDP checksum
	m[ipv6HeaderLen+udpHeaderLen+4] = 0xFF // BTH FECN, BECN, Resv6
	return crcUpdate(UpdateCRC(icrcSeed, m[:]), p[maskedV6:])
}

// crcUpdate is crc32.Update with the tail of fewer than 16 bytes done by
// UpdateCRC: klauspost/crc32 hands such a tail to a byte-at-a-time loop,
// which costs more than the folding of a 100-byte packet.
func crcUpdate(crc uint32, p []byte) uint32 {
	n := len(p) &^ 15
	if n > 0 {
		crc = crc32.Update(crc, crc32.IEEETable, p[:n])
	}
	return UpdateCRC(crc, p[n:])
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
