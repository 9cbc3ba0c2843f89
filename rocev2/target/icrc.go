package target

import (
	"encoding/binary"
	"net/netip"

	"github.com/dtakit/dtakit/rocev2"
	"github.com/klauspost/crc32"
)

// The target's ICRC fast paths. They compute exactly rocev2.DatagramICRC
// (tests cross-check them), but
//   - for a received packet, reuse the CRC state after the masked IP and UDP
//     headers, which depends only on the addresses and the length, and is
//     cached per source;
//   - for an ACK or ATOMIC ACK, start from the ICRC of the same response with
//     PSN, syndrome, MSN and original value zero (cached per QP and
//     destination) and add in each of those bytes from a table: a CRC is
//     linear, so for messages of one length the ICRC of M is the ICRC of M0
//     XOR the contribution of every byte where M differs from M0.
// The ICRC of a small packet costs about twice the rest of its handling
// otherwise.

// crcUpdate is crc32.Update with the IEEE table: slicing by 8 for the short
// inputs of this package, the library (SIMD) for long ones.
func crcUpdate(crc uint32, p []byte) uint32 {
	if len(p) >= 128 {
		return crc32.Update(crc, crc32.IEEETable, p)
	}
	return rocev2.UpdateCRC(crc, p)
}

// icrcSeed is the CRC after the 8 bytes of 0xFF that stand in for the LRH.
var icrcSeed = rocev2.UpdateCRC(0, []byte{0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF})

// contrib[d][b] is what byte b adds to the CRC register when d bytes follow
// it: the linear part of the CRC, register and input otherwise zero.
var contrib = func() (t [15][256]uint32) {
	var m [len(t)]byte
	for b := range 256 {
		m[0] = byte(b)
		for d := range len(t) {
			t[d][b] = ^rocev2.UpdateCRC(0xFFFFFFFF, m[:d+1]) // register 0 in, no final XOR
		}
	}
	return t
}()

// headerCRC returns the CRC after the seed and the masked IP and UDP headers
// of a datagram from src to dst whose UDP payload is n bytes (BTH through
// ICRC), as rocev2.DatagramICRC builds them; ok is false when the addresses
// are of different families or n does not fit an IP packet.
func headerCRC(src, dst netip.AddrPort, n int) (crc uint32, ok bool) {
	s, d := src.Addr().Unmap(), dst.Addr().Unmap()
	udpLen := 8 + n
	var m [48]byte
	var h []byte
	switch {
	case s.Is4() && d.Is4():
		if 20+udpLen > 0xFFFF {
			return 0, false
		}
		m[0], m[1] = 0x45, 0xFF
		binary.BigEndian.PutUint16(m[2:], uint16(20+udpLen))
		binary.BigEndian.PutUint16(m[6:], 0x4000) // identification 0, DF
		m[8], m[9], m[10], m[11] = 0xFF, 17, 0xFF, 0xFF
		sa, da := s.As4(), d.As4()
		copy(m[12:], sa[:])
		copy(m[16:], da[:])
		h = m[:28]
	case s.Is6() && d.Is6():
		if udpLen > 0xFFFF {
			return 0, false
		}
		m[0], m[1], m[2], m[3] = 0x6F, 0xFF, 0xFF, 0xFF
		binary.BigEndian.PutUint16(m[4:], uint16(udpLen))
		m[6], m[7] = 17, 0xFF
		sa, da := s.As16(), d.As16()
		copy(m[8:], sa[:])
		copy(m[24:], da[:])
		h = m[:48]
	default:
		return 0, false
	}
	u := h[len(h)-8:]
	binary.BigEndian.PutUint16(u[0:], src.Port())
	binary.BigEndian.PutUint16(u[2:], dst.Port())
	binary.BigEndian.PutUint16(u[4:], uint16(udpLen))
	u[6], u[7] = 0xFF, 0xFF
	return rocev2.UpdateCRC(icrcSeed, h), true
}

// packetICRC returns the ICRC of a UDP payload b (BTH through pad, no
// ICRC) given the CRC after its headers.
func packetICRC(hdr uint32, b []byte) uint32 {
	var bth [rocev2.BTHLen]byte
	copy(bth[:], b)
	bth[4] = 0xFF // FECN, BECN, Resv6
	return crcUpdate(rocev2.UpdateCRC(hdr, bth[:]), b[rocev2.BTHLen:])
}

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
		crc, ok := headerCRC(src, dst, n)
		if !ok {
			return false
		}
		e.src, e.n, e.crc, e.valid = src, n, crc, true
	}
	computed, wire := packetICRC(e.crc, b[:n-rocev2.ICRCLen]), binary.LittleEndian.Uint32(b[n-rocev2.ICRCLen:])
	return rocev2.DatagramICRCMatches(src, dst, n, wire, computed)
}

// Response lengths: BTH, AETH (and AtomicAckETH), ICRC.
const (
	ackLen       = rocev2.BTHLen + rocev2.AETHLen + rocev2.ICRCLen
	atomicAckLen = ackLen + rocev2.AtomicAckETHLen
)

// respBase is a QP's cache of its response ICRC bases for one destination.
type respBase struct {
	dst       netip.AddrPort
	ack       uint32 // ICRC of the ACK with PSN, syndrome and MSN zero
	atomicAck uint32 // ICRC of the ATOMIC ACK with those and the value zero
	valid     bool
}

// bases returns the response bases of qp towards dst, computing them on a
// change of destination.
func (qp *QP) bases(dst netip.AddrPort) (*respBase, bool) {
	rb := &qp.respBase
	if rb.valid && rb.dst == dst {
		return rb, true
	}
	src := qp.t.addr
	h1, ok1 := headerCRC(src, dst, ackLen)
	h2, ok2 := headerCRC(src, dst, atomicAckLen)
	if !ok1 || !ok2 {
		return nil, false
	}
	var b [atomicAckLen]byte
	bth := rocev2.BTH{Opcode: rocev2.RCAcknowledge, PKey: rocev2.DefaultPKey, DestQP: qp.remoteQPN}
	bth.AppendTo(b[:0])
	rb.ack = packetICRC(h1, b[:ackLen-rocev2.ICRCLen])
	b[0] = byte(rocev2.RCAtomicAcknowledge)
	rb.atomicAck = packetICRC(h2, b[:atomicAckLen-rocev2.ICRCLen])
	rb.dst, rb.valid = dst, true
	return rb, true
}

// appendAck appends an ACK or NAK datagram to b.
func (rb *respBase) appendAck(b []byte, remoteQPN uint32, s rocev2.Syndrome, psn rocev2.PSN, msn uint32) []byte {
	p, m := uint32(psn), msn
	icrc := rb.ack ^ contrib[6][byte(p>>16)] ^ contrib[5][byte(p>>8)] ^ contrib[4][byte(p)] ^
		contrib[3][byte(s)] ^ contrib[2][byte(m>>16)] ^ contrib[1][byte(m>>8)] ^ contrib[0][byte(m)]
	b = appendBTH(b, rocev2.RCAcknowledge, remoteQPN, p)
	b = binary.BigEndian.AppendUint32(b, uint32(s)<<24|m&rocev2.PSNMask)
	return binary.LittleEndian.AppendUint32(b, icrc)
}

// appendAtomicAck appends an ATOMIC ACK datagram to b.
func (rb *respBase) appendAtomicAck(b []byte, remoteQPN uint32, psn rocev2.PSN, msn uint32, orig uint64) []byte {
	p, m, o := uint32(psn), msn, orig
	s := rocev2.SyndromeACK
	icrc := rb.atomicAck ^ contrib[14][byte(p>>16)] ^ contrib[13][byte(p>>8)] ^ contrib[12][byte(p)] ^
		contrib[11][byte(s)] ^ contrib[10][byte(m>>16)] ^ contrib[9][byte(m>>8)] ^ contrib[8][byte(m)] ^
		contrib[7][byte(o>>56)] ^ contrib[6][byte(o>>48)] ^ contrib[5][byte(o>>40)] ^ contrib[4][byte(o>>32)] ^
		contrib[3][byte(o>>24)] ^ contrib[2][byte(o>>16)] ^ contrib[1][byte(o>>8)] ^ contrib[0][byte(o)]
	b = appendBTH(b, rocev2.RCAtomicAcknowledge, remoteQPN, p)
	b = binary.BigEndian.AppendUint32(b, uint32(s)<<24|m&rocev2.PSNMask)
	b = binary.BigEndian.AppendUint64(b, o)
	return binary.LittleEndian.AppendUint32(b, icrc)
}

// appendBTH appends the BTH of a response: P_Key 0xFFFF, no flags.
func appendBTH(b []byte, op rocev2.Opcode, qpn uint32, psn uint32) []byte {
	b = append(b, byte(op), 0, 0xFF, 0xFF)
	b = binary.BigEndian.AppendUint32(b, qpn&rocev2.PSNMask)
	return binary.BigEndian.AppendUint32(b, psn&rocev2.PSNMask)
}
