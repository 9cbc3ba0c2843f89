package target

import (
	"encoding/binary"
	"net/netip"

	"github.com/dtakit/dtakit/rocev2"
)

// The target's ICRC fast paths. They compute exactly rocev2.DatagramICRC
// (tests cross-check them), but
//   - for a received packet, reuse rocev2.PseudoHeaderCRC, which depends only
//     on the addresses and the length, cached per source;
//   - for an ACK or ATOMIC ACK, start from the ICRC of the same response with
//     PSN, syndrome, MSN and original value zero (cached per QP and
//     destination) and add in each of those bytes from a table: a CRC is
//     linear, so for messages of one length the ICRC of M is the ICRC of M0
//     XOR the contribution of every byte where M differs from M0.
// The ICRC of a small packet costs about twice the rest of its handling
// otherwise.

// contrib[d][b] is what byte b adds to the ICRC when d bytes follow it.
var contrib = func() (t [15][256]uint32) {
	for d := range t {
		rocev2.DeltaTable(&t[d], d)
	}
	return t
}()

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

// Response lengths: BTH, AETH (and AtomicAckETH), ICRC.
const (
	ackLen       = rocev2.BTHLen + rocev2.AETHLen + rocev2.ICRCLen
	atomicAckLen = ackLen + rocev2.AtomicAckETHLen
)

// respBase is a QP's cache of its response ICRC bases for one source (the
// target's address) and destination.
type respBase struct {
	src, dst  netip.AddrPort
	ack       uint32 // ICRC of the ACK with PSN, syndrome and MSN zero
	atomicAck uint32 // ICRC of the ATOMIC ACK with those and the value zero
	valid     bool
}

// bases returns the response bases of qp towards dst, computing them on a
// change of destination.
func (qp *QP) bases(dst netip.AddrPort) (*respBase, bool) {
	rb := &qp.respBase
	src := qp.t.local()
	if rb.valid && rb.dst == dst && rb.src == src {
		return rb, true
	}
	h1, err1 := rocev2.PseudoHeaderCRC(src, dst, ackLen)
	h2, err2 := rocev2.PseudoHeaderCRC(src, dst, atomicAckLen)
	if err1 != nil || err2 != nil {
		return nil, false
	}
	var b [atomicAckLen]byte
	respBTH(rocev2.RCAcknowledge, qp.remoteQPN, 0).AppendTo(b[:0])
	rb.ack = rocev2.PayloadICRC(h1, b[:ackLen-rocev2.ICRCLen])
	b[0] = byte(rocev2.RCAtomicAcknowledge)
	rb.atomicAck = rocev2.PayloadICRC(h2, b[:atomicAckLen-rocev2.ICRCLen])
	rb.src, rb.dst, rb.valid = src, dst, true
	return rb, true
}

// appendAck appends an ACK or NAK datagram to b.
func (rb *respBase) appendAck(b []byte, remoteQPN uint32, s rocev2.Syndrome, psn rocev2.PSN, msn uint32) []byte {
	p, m := uint32(psn), msn
	icrc := rb.ack ^ contrib[6][byte(p>>16)] ^ contrib[5][byte(p>>8)] ^ contrib[4][byte(p)] ^
		contrib[3][byte(s)] ^ contrib[2][byte(m>>16)] ^ contrib[1][byte(m>>8)] ^ contrib[0][byte(m)]
	b = respBTH(rocev2.RCAcknowledge, remoteQPN, psn).AppendTo(b)
	b = rocev2.AETH{Syndrome: s, MSN: m}.AppendTo(b)
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
	b = respBTH(rocev2.RCAtomicAcknowledge, remoteQPN, psn).AppendTo(b)
	b = rocev2.AETH{Syndrome: s, MSN: m}.AppendTo(b)
	b = rocev2.AtomicAckETH{OrigRemoteData: o}.AppendTo(b)
	return binary.LittleEndian.AppendUint32(b, icrc)
}

// respBTH is the BTH of a response: P_Key 0xFFFF, no flags.
func respBTH(op rocev2.Opcode, qpn uint32, psn rocev2.PSN) rocev2.BTH {
	return rocev2.BTH{Opcode: op, PKey: rocev2.DefaultPKey, DestQP: qpn, PSN: psn}
}
