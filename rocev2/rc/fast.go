package rc

import (
	"encoding/binary"

	"github.com/dtakit/dtakit/rocev2"
)

// The fast path: one-packet WRITEs and FETCH_ADDs, a translator's hot
// operations, are written straight into the ring slot, and their ICRC is
// derived from cached values instead of recomputed over the whole
// pseudo-header.
//
// Two datagrams of one queue pair with the same length and the same first
// 8 BTH bytes (opcode, pad count, P_Key, destination QP; byte 4 is masked
// by the ICRC anyway) differ only from BTH byte 8 on, so
//
//	ICRC(p) = K ^ Sum(p[8:20]) ^ Linear(p[20:])
//
// where K is the ICRC of p[:8] followed by zeros (computed once with
// rocev2.DatagramICRC), Sum the window's rocev2.DeltaTables (built once per
// length), and p[8:20] the AckReq bit, the PSN and the VA (RETH or
// AtomicETH), the bytes in which the N copies of one report differ.
// Linear(p[20:]) (rkey, length or add, payload) is the same for every copy
// of a report, so with ShareTail it is computed once per report.
// TestFastPathMatchesPost checks every fast packet against
// rocev2.Packet.AppendDatagram.

// icrcEntry caches ICRC(p0) for one BTH prefix and datagram length.
type icrcEntry struct {
	prefix uint64 // BTH bytes 0..7, byte 4 set to 0xFF
	n      int    // datagram length without the ICRC
	k      uint32
	h      rocev2.DeltaTables // of the window p[8:20]
}

// fastICRC is a requester's fast-path state.
type fastICRC struct {
	// by length: 16, so that the runs of a postcard chunk's slots
	// (4..64 bytes) and whole chunks do not evict each other's.
	cache         [16]*icrcEntry
	tail          uint32 // Linear(p[20:]) of the report under way
	tailOK, share bool
}

var zeroPad [3]byte

// ShareTail tells r whether the packets posted next are copies of one
// report, equal after their VA (one WriteOnly per copy, or one FetchAdd per
// copy): their common bytes then enter the ICRC once. Turn it on before
// the first copy of each report and off after the last.
func (r *Requester) ShareTail(on bool) { r.fast.share, r.fast.tailOK = on, false }

// icrc returns the ICRC of b, a datagram of r without its ICRC.
func (r *Requester) icrc(b []byte) uint32 {
	f := &r.fast
	prefix := binary.BigEndian.Uint64(b) | 0xFF<<24
	n := len(b)
	i := (n >> 2) & (len(f.cache) - 1)
	en := f.cache[i]
	if en == nil || en.prefix != prefix || en.n != n {
		if en == nil {
			en = new(icrcEntry)
			f.cache[i] = en
		}
		r.fillICRC(en, b[:8], n)
	}
	if !f.tailOK || !f.share {
		f.tail = rocev2.LinearCRC(b[20:])
		f.tailOK = true
	}
	h := &en.h // DeltaTables.Sum unrolled: its loop is measurably slower here
	return en.k ^ f.tail ^
		h[11][b[8]] ^ h[10][b[9]] ^ h[9][b[10]] ^ h[8][b[11]] ^
		h[7][b[12]] ^ h[6][b[13]] ^ h[5][b[14]] ^ h[4][b[15]] ^
		h[3][b[16]] ^ h[2][b[17]] ^ h[1][b[18]] ^ h[0][b[19]]
}

// fillICRC computes the cached values for datagrams of n bytes starting
// with prefix.
func (r *Requester) fillICRC(en *icrcEntry, prefix []byte, n int) {
	var tmp [MaxDatagram]byte
	copy(tmp[:8], prefix)
	k, err := rocev2.DatagramICRC(r.cfg.Local, r.cfg.Remote, tmp[:n])
	if err != nil {
		r.c.EncodeErrors++ // New refuses the address mixes that fail
	}
	en.prefix, en.n, en.k = binary.BigEndian.Uint64(prefix)|0xFF<<24, n, k
	en.h.Fill(n - 20)
}

// startPacket writes the BTH of a packet with opcode op, payloadLen bytes
// of payload and AckReq ackReq, at the next PSN, into the ring slot of that
// PSN, and returns the slot with the BTH in it.
func (r *Requester) startPacket(op rocev2.Opcode, payloadLen int, ackReq bool) []byte {
	return rocev2.AppendBTH(r.slot(r.next), op, byte(-payloadLen&3)<<4, rocev2.DefaultPKey, r.cfg.RemoteQPN, ackReq, r.next)
}

// WriteOnly posts a one-packet RDMA WRITE (with immediate immData when imm)
// of data at va with rkey and returns the datagram, to be sent. The caller
// checks Room first. A packet larger than the configuration's MaxPacket is
// not posted: WriteOnly returns nil and counts it in EncodeErrors. It does
// not allocate.
func (r *Requester) WriteOnly(va uint64, rkey uint32, data []byte, imm bool, immData uint32, now int64) []byte {
	op, size := rocev2.RCWriteOnly, rocev2.BTHLen+rocev2.RETHLen+len(data)+(-len(data)&3)+rocev2.ICRCLen
	if imm {
		op, size = rocev2.RCWriteOnlyImm, size+rocev2.ImmDtLen
	}
	if size > r.slotSize {
		r.c.EncodeErrors++
		return nil
	}
	ackReq := r.ackReqPolicy(false)
	b := r.startPacket(op, len(data), ackReq)
	b = rocev2.RETH{VA: va, RKey: rkey, DMALength: uint32(len(data))}.AppendTo(b)
	if imm {
		b = rocev2.ImmDt{Data: immData}.AppendTo(b)
	}
	b = append(b, data...)
	b = append(b, zeroPad[:-len(data)&3]...)
	b = binary.LittleEndian.AppendUint32(b, r.icrc(b))
	r.queued(b, ackReq, now)
	return b
}

// FetchAdd posts a FETCH_ADD of add to the 8-byte counter at va with rkey
// and returns the datagram, to be sent. Atomics always ask for
// acknowledgement. The caller checks Room first. It does not allocate.
func (r *Requester) FetchAdd(va uint64, rkey uint32, add uint64, now int64) []byte {
	r.sinceAckReq = 0
	b := r.startPacket(rocev2.RCFetchAdd, 0, true)
	b = rocev2.AtomicETH{VA: va, RKey: rkey, SwapAddData: add}.AppendTo(b)
	b = binary.LittleEndian.AppendUint32(b, r.icrc(b))
	r.queued(b, true, now)
	return b
}
