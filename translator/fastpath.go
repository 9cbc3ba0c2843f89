package translator

import (
	"encoding/binary"

	"github.com/klauspost/crc32"

	"github.com/dtakit/dtakit/rocev2"
)

// The fast path: one-packet WRITEs and FETCH_ADDs, the translator's hot
// operations, are written straight into the ring slot, and their ICRC is
// derived from a per-QP cached value instead of recomputed over the whole
// pseudo-header.
//
// A CRC is affine: for messages x and y of the same length, crc(x) ^ crc(y)
// is the CRC with zero initial value and no final XOR (crc0) of x ^ y, and
// leading zero bytes do not change crc0. Two datagrams of one QP with the same
// length and the same first 8 BTH bytes (opcode, pad count, P_Key, destination
// QP; byte 4 is masked by the ICRC anyway) differ only from BTH byte 8 on, so
//
//	ICRC(p) = ICRC(p0) ^ crc0(p[8:])
//
// where p0 is p with bytes 8 and after zeroed. ICRC(p0) is computed once per
// (QP, prefix, length) with rocev2.DatagramICRC and cached; a packet then
// costs one CRC over its BTH tail, extension header and payload.
// TestFastPathMatchesRocev2 checks every fast packet against
// rocev2.Packet.AppendDatagram.

// icrcEntry caches ICRC(p0) for one BTH prefix and datagram length.
type icrcEntry struct {
	prefix uint64 // BTH bytes 0..7, byte 4 set to 0xFF
	n      int    // datagram length without the ICRC
	k      uint32
}

var zeroSlot [slotCap]byte

// icrc returns the ICRC of b, a datagram of q without its ICRC.
func (e *Engine) icrc(q *qp, b []byte) uint32 {
	prefix := binary.BigEndian.Uint64(b) | 0xFF<<24
	n := len(b)
	en := &q.icrc[(n>>2)&(len(q.icrc)-1)]
	if en.prefix != prefix || en.n != n {
		var tmp [slotCap]byte
		copy(tmp[:8], b[:8])
		k, err := rocev2.DatagramICRC(e.cfg.Local, q.remote, tmp[:n])
		if err != nil {
			e.c.EncodeErrors++
		}
		*en = icrcEntry{prefix: prefix, n: n, k: k}
	}
	return en.k ^ ^crc32.Update(0xFFFFFFFF, crc32.IEEETable, b[8:])
}

// ackReqPolicy decides the AckReq bit of q's next packet: always for
// atomics, and every AckReqInterval packets (the last packet of a round gets
// it in endRound).
func (q *qp) ackReqPolicy(atomic bool) bool {
	q.sinceAckReq++
	if atomic || q.sinceAckReq >= AckReqInterval {
		q.sinceAckReq = 0
		return true
	}
	return false
}

// appendBTH appends q's BTH for a packet with opcode op, payloadLen bytes of
// payload, and AckReq ackReq, at q's next PSN.
func appendBTH(b []byte, q *qp, op rocev2.Opcode, payloadLen int, ackReq bool) []byte {
	pad := byte(-payloadLen & 3)
	var a byte
	if ackReq {
		a = 0x80
	}
	psn, qpn := uint32(q.next), q.remoteQPN
	return append(b, byte(op), pad<<4, 0xFF, 0xFF, 0, byte(qpn>>16), byte(qpn>>8), byte(qpn),
		a, byte(psn>>16), byte(psn>>8), byte(psn))
}

// postWriteOnly posts a one-packet RDMA WRITE (with immediate when imm)
// of data (at most MTU bytes) at va.
func (e *Engine) postWriteOnly(q *qp, va uint64, rkey uint32, data []byte, imm bool, immData uint32) {
	op := rocev2.RCWriteOnly
	if imm {
		op = rocev2.RCWriteOnlyImm
	}
	ackReq := q.ackReqPolicy(false)
	b := appendBTH(q.slot(q.next), q, op, len(data), ackReq)
	b = binary.BigEndian.AppendUint64(b, va)
	b = binary.BigEndian.AppendUint32(b, rkey)
	b = binary.BigEndian.AppendUint32(b, uint32(len(data)))
	if imm {
		b = binary.BigEndian.AppendUint32(b, immData)
	}
	b = append(b, data...)
	b = append(b, zeroSlot[:-len(data)&3]...)
	e.queued(q, binary.LittleEndian.AppendUint32(b, e.icrc(q, b)), ackReq)
}

// postFetchAdd posts a FETCH_ADD of add to the counter at va.
func (e *Engine) postFetchAdd(q *qp, va uint64, rkey uint32, add uint64) {
	ackReq := q.ackReqPolicy(true)
	b := appendBTH(q.slot(q.next), q, rocev2.RCFetchAdd, 0, ackReq)
	b = binary.BigEndian.AppendUint64(b, va)
	b = binary.BigEndian.AppendUint32(b, rkey)
	b = binary.BigEndian.AppendUint64(b, add)
	b = binary.BigEndian.AppendUint64(b, 0) // compare data, unused
	e.queued(q, binary.LittleEndian.AppendUint32(b, e.icrc(q, b)), ackReq)
}
