package translator

import (
	"encoding/binary"

	"github.com/dtakit/dtakit/rocev2"
)

// The fast path: one-packet WRITEs and FETCH_ADDs, the translator's hot
// operations, are written straight into the ring slot, and their ICRC is
// derived from per-QP cached values instead of recomputed over the whole
// pseudo-header.
//
// A CRC is affine: for messages x and y of the same length, crc(x) ^ crc(y)
// is rocev2.LinearCRC(x ^ y), and leading zero bytes do not change it. Two
// datagrams of one QP with the same length and the same first 8 BTH bytes
// (opcode, pad count, P_Key, destination QP; byte 4 is masked by the ICRC
// anyway) differ only from BTH byte 8 on, so
//
//	ICRC(p) = K ^ H(p[8:20]) ^ Linear(p[20:])
//
// where K is the ICRC of p[:8] followed by zeros (computed once with
// rocev2.DatagramICRC), H(x) = Linear(x followed by len(p)-20 zeros), a sum
// of one table lookup per byte (rocev2.DeltaTable, built once per length),
// and p[8:20] the AckReq bit, the PSN and the VA (RETH or AtomicETH), the
// bytes in which the N copies of one report differ. Linear(p[20:]) (rkey,
// length or add, payload) is the same for every copy, so it is computed once
// per report.
// TestFastPathMatchesRocev2 checks every fast packet against
// rocev2.Packet.AppendDatagram.

// icrcEntry caches ICRC(p0) for one BTH prefix and datagram length.
type icrcEntry struct {
	prefix uint64 // BTH bytes 0..7, byte 4 set to 0xFF
	n      int    // datagram length without the ICRC
	k      uint32
	h      [12][256]uint32 // h[j][v]: Linear of v at byte 8+j, zeros after
}

var zeroSlot [slotCap]byte

// icrc returns the ICRC of b, a datagram of q without its ICRC.
func (e *Engine) icrc(q *qp, b []byte) uint32 {
	prefix := binary.BigEndian.Uint64(b) | 0xFF<<24
	n := len(b)
	i := (n >> 2) & (len(q.icrc) - 1)
	en := q.icrc[i]
	if en == nil || en.prefix != prefix || en.n != n {
		if en == nil {
			en = new(icrcEntry)
			q.icrc[i] = en
		}
		e.fillICRC(q, en, b[:8], n)
	}
	if !e.tailOK || !e.shareTail {
		e.tail = rocev2.LinearCRC(b[20:])
		e.tailOK = true
	}
	h := &en.h
	return en.k ^ e.tail ^
		h[0][b[8]] ^ h[1][b[9]] ^ h[2][b[10]] ^ h[3][b[11]] ^
		h[4][b[12]] ^ h[5][b[13]] ^ h[6][b[14]] ^ h[7][b[15]] ^
		h[8][b[16]] ^ h[9][b[17]] ^ h[10][b[18]] ^ h[11][b[19]]
}

// fillICRC computes the cached values for datagrams of n bytes starting
// with prefix.
func (e *Engine) fillICRC(q *qp, en *icrcEntry, prefix []byte, n int) {
	var tmp [slotCap]byte
	copy(tmp[:8], prefix)
	k, err := rocev2.DatagramICRC(e.cfg.Local, q.remote, tmp[:n])
	if err != nil {
		e.c.EncodeErrors++
	}
	en.prefix, en.n, en.k = binary.BigEndian.Uint64(prefix)|0xFF<<24, n, k
	for j := range en.h {
		rocev2.DeltaTable(&en.h[j], n-9-j) // byte 8+j of n
	}
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

// startPacket writes q's BTH for a packet with opcode op, payloadLen bytes
// of payload, and AckReq ackReq, at q's next PSN, into the ring slot of that
// PSN, and returns the slot with the BTH in it.
func (q *qp) startPacket(op rocev2.Opcode, payloadLen int, ackReq bool) []byte {
	return rocev2.AppendBTH(q.slot(q.next), op, byte(-payloadLen&3)<<4, rocev2.DefaultPKey, q.remoteQPN, ackReq, q.next)
}

// postWriteOnly posts a one-packet RDMA WRITE (with immediate when imm)
// of data (at most MTU bytes) at va.
func (e *Engine) postWriteOnly(q *qp, va uint64, rkey uint32, data []byte, imm bool, immData uint32) {
	op := rocev2.RCWriteOnly
	if imm {
		op = rocev2.RCWriteOnlyImm
	}
	ackReq := q.ackReqPolicy(false)
	b := q.startPacket(op, len(data), ackReq)
	b = rocev2.RETH{VA: va, RKey: rkey, DMALength: uint32(len(data))}.AppendTo(b)
	if imm {
		b = rocev2.ImmDt{Data: immData}.AppendTo(b)
	}
	b = append(b, data...)
	b = append(b, zeroSlot[:-len(data)&3]...)
	e.queued(q, binary.LittleEndian.AppendUint32(b, e.icrc(q, b)), ackReq)
}

// postFetchAdd posts a FETCH_ADD of add to the counter at va.
func (e *Engine) postFetchAdd(q *qp, va uint64, rkey uint32, add uint64) {
	ackReq := q.ackReqPolicy(true)
	b := q.startPacket(rocev2.RCFetchAdd, 0, ackReq)
	b = rocev2.AtomicETH{VA: va, RKey: rkey, SwapAddData: add}.AppendTo(b)
	e.queued(q, binary.LittleEndian.AppendUint32(b, e.icrc(q, b)), ackReq)
}
