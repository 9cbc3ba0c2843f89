package rocev2

import (
	"net/netip"
	"sync/atomic"
)

// A socket does not show the IPv4 identification and flags of a datagram,
// yet the ICRC covers them. dtakit's senders make them identification 0 and
// DF (see ConfigureSocket), which DatagramICRC assumes; other RoCEv2 stacks
// (Soft-RoCE, NICs) pick their own identification, with DF set. A receiver
// recovers it from the ICRC: by linearity the ICRC of the real header
// differs from DatagramICRC's by a fixed function of the 16 identification
// bits, so a mismatch that such a function explains is a match. The ICRC
// then checks the rest of a foreign packet with 32 - 16 = 16 bits, beside
// the UDP checksum; a dtakit sender's packets are checked with all 32.

// ipv4IDBits is the number of identification bits a socket cannot see.
const ipv4IDBits = 16

// idBases caches, per IPv4 total length in words (RoCEv2 packets are padded
// to 4 bytes), what each of those bits adds to the ICRC. Untouched entries
// cost no memory.
var idBases [1 << 14]atomic.Pointer[[ipv4IDBits]uint32]

func ipv4IDBasis(ipLen int) *[ipv4IDBits]uint32 {
	cached := ipLen%4 == 0 && ipLen>>2 < len(idBases)
	if cached {
		if b := idBases[ipLen>>2].Load(); b != nil {
			return b
		}
	}
	// The CRC input: 8 bytes standing in for the LRH, then the IP packet
	// without its ICRC. Identification is at input bytes 12-13. A CRC is
	// affine: flipping a bit changes the result by the CRC of that bit
	// alone, less the CRC of zeros.
	msg := make([]byte, 8+ipLen-ICRCLen)
	zero := UpdateCRC(0, msg)
	var b [ipv4IDBits]uint32
	for i := range ipv4IDBits {
		pos, bit := 12+i/8, byte(0x80)>>(i%8)
		msg[pos] ^= bit
		b[i] = UpdateCRC(0, msg) ^ zero
		msg[pos] ^= bit
	}
	if cached {
		idBases[ipLen>>2].Store(&b)
	}
	return &b
}

// explainedByIPv4ID reports whether diff, the XOR of a received ICRC and the
// one computed for identification 0 and DF, is what some other
// identification makes for a packet of ipLen bytes.
func explainedByIPv4ID(diff uint32, ipLen int) bool {
	basis := ipv4IDBasis(ipLen)
	// Gaussian elimination over GF(2): reduce the basis to distinct leading
	// bits, then reduce diff by it; diff is in the span iff it reaches 0.
	var red [32]uint32 // red[k]: a reduced vector whose highest bit is k, or 0
	for _, v := range basis {
		for k := 31; k >= 0 && v != 0; k-- {
			if v>>k&1 == 0 {
				continue
			}
			if red[k] == 0 {
				red[k] = v
				v = 0
				break
			}
			v ^= red[k]
		}
	}
	for k := 31; k >= 0 && diff != 0; k-- {
		if diff>>k&1 != 0 && red[k] != 0 {
			diff ^= red[k]
		}
	}
	return diff == 0
}

// DatagramICRCMatches reports whether wire, the ICRC a datagram of n bytes
// from src to dst carried, is right, given computed, the ICRC
// [DatagramICRC] returned for it: equal, or over IPv4 different only by the
// sender's identification. It does not allocate once it has met
// the length.
func DatagramICRCMatches(src, dst netip.AddrPort, n int, wire, computed uint32) bool {
	if wire == computed {
		return true
	}
	if !src.Addr().Unmap().Is4() || !dst.Addr().Unmap().Is4() {
		return false
	}
	return explainedByIPv4ID(wire^computed, ipv4HeaderLen+udpHeaderLen+n)
}
