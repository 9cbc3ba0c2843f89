package target

import (
	"sync/atomic"
	"unsafe"

	"github.com/dtakit/dtakit/rocev2"
)

// The requests a QP's Responder lets through (rc.Execute), performed into
// registered regions and posted receive buffers. Every check comes before
// any byte is written, and no byte is written outside the span of a region
// the request's rkey names.

// execute performs an in-order request and records the outcome in the
// Responder: done, or refused with the NAK that says why.
func (qp *QP) execute(p *rocev2.Packet, out *Output) {
	var nak rocev2.Syndrome
	var last bool // the request ends its message
	switch p.BTH.Opcode {
	case rocev2.RCWriteFirst, rocev2.RCWriteOnly, rocev2.RCWriteOnlyImm:
		nak, last = qp.writeFirst(p)
	case rocev2.RCWriteMiddle, rocev2.RCWriteLast, rocev2.RCWriteLastImm:
		nak, last = qp.writeNext(p)
	case rocev2.RCSendFirst, rocev2.RCSendOnly, rocev2.RCSendOnlyImm:
		nak, last = qp.sendFirst(p)
	case rocev2.RCSendMiddle, rocev2.RCSendLast, rocev2.RCSendLastImm:
		nak, last = qp.sendNext(p)
	case rocev2.RCFetchAdd, rocev2.RCCompareSwap:
		var orig uint64
		if orig, nak = qp.atomic(p); nak == executed {
			var dgs [][]byte
			out.buf, dgs = qp.resp.AtomicDone(out.buf, orig)
			out.commitAll(dgs, qp.resp.Remote())
			return
		}
	default:
		// RDMA READ, SEND with Invalidate and responses the peer has no
		// reason to send: this responder does not implement them.
		nak = rocev2.SyndromeNAKInvalidRequest
	}
	if nak == executed {
		qp.resp.Done(p.BTH.AckReq, last)
		return
	}
	var dgs [][]byte
	out.buf, dgs = qp.resp.Refuse(out.buf, nak)
	out.commitAll(dgs, qp.resp.Remote())
	if !nak.IsRNRNAK() { // receiver not ready: the requester retries the same PSN
		// Invalid requests and access errors are fatal, as on a NIC.
		qp.state = qpError
		qp.msg = msgNone
	}
}

// executed is what the request handlers below return when they performed
// the request, and otherwise the NAK that refuses it.
const executed rocev2.Syndrome = rocev2.SyndromeACK

// writeFirst performs a WRITE First or Only.
func (qp *QP) writeFirst(p *rocev2.Packet) (rocev2.Syndrome, bool) {
	op, n, mtu := p.BTH.Opcode, uint64(len(p.Payload)), uint64(qp.mtu)
	dma := uint64(p.RETH.DMALength)
	only := op != rocev2.RCWriteFirst
	if qp.msg != msgNone || n > mtu || (only && n != dma) || (!only && (n != mtu || dma <= mtu)) {
		return rocev2.SyndromeNAKInvalidRequest, false
	}
	var r *Region
	var off uint64
	if dma > 0 { // a zero-length WRITE names no memory, and is not checked
		r = qp.t.lookup(qp, p.RETH.RKey)
		ok := r != nil && r.access&RemoteWrite != 0
		if ok {
			off, ok = r.span(p.RETH.VA, dma)
		}
		if !ok {
			return rocev2.SyndromeNAKRemoteAccessError, false
		}
		r.write(off, p.Payload)
		qp.c.WritePackets++
		qp.c.WriteBytes += n
	}
	if !only {
		qp.msg, qp.wRegion, qp.wOff, qp.wLeft = msgWrite, r, off+n, dma-n
		return executed, false
	}
	qp.completeWrite(op == rocev2.RCWriteOnlyImm, p.ImmDt.Data)
	return executed, true
}

// writeNext performs a WRITE Middle or Last.
func (qp *QP) writeNext(p *rocev2.Packet) (rocev2.Syndrome, bool) {
	op, n, mtu := p.BTH.Opcode, uint64(len(p.Payload)), uint64(qp.mtu)
	last := op != rocev2.RCWriteMiddle
	if qp.msg != msgWrite || n > mtu || (last && n != qp.wLeft) || (!last && (n != mtu || n >= qp.wLeft)) {
		return rocev2.SyndromeNAKInvalidRequest, false
	}
	r := qp.wRegion
	if r.dead.Load() { // deregistered in the middle of the message
		return rocev2.SyndromeNAKRemoteAccessError, false
	}
	// wOff+wLeft stays within the span checked at the First packet.
	r.write(qp.wOff, p.Payload)
	qp.c.WritePackets++
	qp.c.WriteBytes += n
	qp.wOff += n
	qp.wLeft -= n
	if last {
		qp.msg, qp.wRegion = msgNone, nil
		qp.completeWrite(op == rocev2.RCWriteLastImm, p.ImmDt.Data)
	}
	return executed, last
}

// sendFirst performs a SEND First or Only into the oldest posted receive.
func (qp *QP) sendFirst(p *rocev2.Packet) (rocev2.Syndrome, bool) {
	op, n, mtu := p.BTH.Opcode, uint64(len(p.Payload)), uint64(qp.mtu)
	only := op != rocev2.RCSendFirst
	switch {
	case qp.msg != msgNone || n > mtu || (!only && n != mtu):
		return rocev2.SyndromeNAKInvalidRequest, false
	case len(qp.recvs) == 0:
		return rocev2.SyndromeRNRNAK | rnrTimer, false
	case n > uint64(len(qp.recvs[0])):
		return rocev2.SyndromeNAKInvalidRequest, false
	}
	copy(qp.recvs[0], p.Payload)
	qp.sLen = int(n)
	if !only {
		qp.msg = msgSend
		return executed, false
	}
	qp.completeSend(op == rocev2.RCSendOnlyImm, p.ImmDt.Data)
	return executed, true
}

// sendNext performs a SEND Middle or Last.
func (qp *QP) sendNext(p *rocev2.Packet) (rocev2.Syndrome, bool) {
	op, n, mtu := p.BTH.Opcode, uint64(len(p.Payload)), uint64(qp.mtu)
	last := op != rocev2.RCSendMiddle
	buf := qp.recvs
	if qp.msg != msgSend || n > mtu || (!last && n != mtu) || len(buf) == 0 || n > uint64(len(buf[0])-qp.sLen) {
		return rocev2.SyndromeNAKInvalidRequest, false
	}
	copy(buf[0][qp.sLen:], p.Payload)
	qp.sLen += int(n)
	if last {
		qp.msg = msgNone
		qp.completeSend(op == rocev2.RCSendLastImm, p.ImmDt.Data)
	}
	return executed, last
}

// atomic performs a FETCH_ADD or CMP_SWAP and returns the value it found,
// or the NAK that refuses it.
func (qp *QP) atomic(p *rocev2.Packet) (uint64, rocev2.Syndrome) {
	a := &p.AtomicETH
	if qp.msg != msgNone || a.VA&7 != 0 {
		return 0, rocev2.SyndromeNAKInvalidRequest
	}
	r := qp.t.lookup(qp, a.RKey)
	ok := r != nil && r.access&RemoteAtomic != 0
	var off uint64
	if ok {
		off, ok = r.span(a.VA, 8)
	}
	if !ok {
		return 0, rocev2.SyndromeNAKRemoteAccessError
	}
	// The region's base address is 8-byte aligned (Register checks it)
	// and VAs are page-aligned, so off keeps the VA's alignment.
	word := (*uint64)(unsafe.Pointer(&r.mem[off]))
	var orig uint64
	if p.BTH.Opcode == rocev2.RCFetchAdd {
		orig = atomic.AddUint64(word, a.SwapAddData) - a.SwapAddData
	} else {
		for {
			orig = atomic.LoadUint64(word)
			if orig != a.CompareData || atomic.CompareAndSwapUint64(word, orig, a.SwapAddData) {
				break
			}
		}
	}
	qp.c.Atomics++
	return orig, executed
}

// rnrTimer is the RNR NAK timer code: 14, 1.28 ms.
const rnrTimer rocev2.Syndrome = 14

func (qp *QP) completeWrite(imm bool, data uint32) {
	if imm {
		qp.deliver(Completion{Write: true, HasImm: true, Imm: data})
	}
}

func (qp *QP) completeSend(imm bool, data uint32) {
	buf := qp.recvs[0]
	qp.recvs[0] = nil
	qp.recvs = qp.recvs[1:]
	qp.c.Sends++
	qp.deliver(Completion{Data: buf[:qp.sLen:qp.sLen], HasImm: imm, Imm: data})
	qp.sLen = 0
}

// deliver counts a receive completion and hands it to the callback.
func (qp *QP) deliver(c Completion) {
	qp.c.Completions++
	if qp.onRecv != nil {
		qp.onRecv(qp, c)
	}
}
