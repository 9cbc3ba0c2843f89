package target

import (
	"net/netip"
	"time"

	"github.com/dtakit/dtakit/internal/prefetch"
	"github.com/dtakit/dtakit/internal/udpio"
	"github.com/dtakit/dtakit/rocev2"
	"github.com/dtakit/dtakit/rocev2/cm"
)

// Datagram is one UDP datagram, Buf, and the peer's address, Addr: the
// source of a datagram the target received, the destination of one it
// sends. It is the type the target's socket reads and writes.
type Datagram = udpio.Datagram

// Output collects the datagrams the target sends. Reuse one across calls
// (Reset between them): it then does not allocate.
type Output struct {
	buf    []byte
	ends   []int
	dgs    []Datagram // Addr set as each is committed, Buf by Datagrams
	acking []*QP      // QPs with an ACK pending at the end of the batch under way
}

// Reset empties o, keeping its memory.
func (o *Output) Reset() {
	o.buf, o.ends, o.dgs = o.buf[:0], o.ends[:0], o.dgs[:0]
}

// Len returns the number of datagrams in o.
func (o *Output) Len() int { return len(o.ends) }

// Datagrams returns o's datagrams, in the order they are to be sent. They
// alias o and are valid until o is next appended to or reset.
func (o *Output) Datagrams() []Datagram {
	start := 0
	for i, end := range o.ends {
		o.dgs[i].Buf = o.buf[start:end:end]
		start = end
	}
	return o.dgs
}

// commit ends the datagram appended to o.buf since the last one, to dst.
func (o *Output) commit(dst netip.AddrPort) {
	o.ends = append(o.ends, len(o.buf))
	o.addDst(dst)
}

// addDst appends a datagram to dst, its bytes still to be set. It is
// appended zero, then set: a Datagram built and copied in would be loaded
// just after its stores, and stall (store forwarding).
func (o *Output) addDst(dst netip.AddrPort) {
	o.dgs = append(o.dgs, Datagram{})
	o.dgs[len(o.dgs)-1].Addr = dst
}

// add appends p as a datagram from src to dst. The packets the target
// builds are valid, so encoding cannot fail except on mixed address
// families (a peer that is neither IPv4 nor IPv6 like the target), which
// drops the datagram.
func (o *Output) add(p *rocev2.Packet, src, dst netip.AddrPort) {
	start := len(o.buf)
	b, err := p.AppendDatagram(o.buf, src, dst)
	o.buf = b
	if err != nil {
		o.buf = o.buf[:start]
		return
	}
	o.commit(dst)
}

// emit1 appends the datagram b, made by a QP's Responder or Requester, to
// dst.
func (o *Output) emit1(b []byte, dst netip.AddrPort) {
	o.buf = append(o.buf, b...)
	o.commit(dst)
}

// commitAll ends the datagrams dgs, the last ones appended to o.buf (by a
// QP's Responder), to dst.
func (o *Output) commitAll(dgs [][]byte, dst netip.AddrPort) {
	end := len(o.buf)
	for _, d := range dgs {
		end -= len(d)
	}
	for _, d := range dgs {
		end += len(d)
		o.ends = append(o.ends, end)
		o.addDst(dst)
	}
}

// Process handles datagrams received at the target's address, in order,
// and appends what the target sends in response to out: ACKs (one per
// queue pair for the batch, covering every packet of it; see section 8.6),
// NAKs, atomic ACKs, CM replies, and the SENDs that connections made ready.
// Every RDMA WRITE and atomic is applied to its region before Process
// returns. now, the time in Unix nanoseconds (rc's convention), drives the
// timers the responses start. It does not allocate in the steady state of
// the data path (out reused).
//
// Process may run on several goroutines at once (each with its own out):
// packets of one queue pair are handled one at a time, in the order the
// calls take its lock, and packets of different queue pairs in parallel.
// Completion callbacks run inside Process with their queue pair locked:
// they must not call the Target's or a QP's methods, and should return
// quickly.
func (t *Target) Process(now int64, in []Datagram, out *Output) {
	if t.closed.Load() {
		return
	}
	w := t.workers.Get().(*worker)
	w.dst = t.local()
	for i := range in {
		w.prefetch(t, in[i].Buf)
	}
	for i := range in {
		if in[i].Truncated {
			t.countTruncated() // longer than the reader's buffer: not whole
			continue
		}
		w.handle(t, now, in[i].Buf, in[i].Addr, out)
	}
	for _, qp := range out.acking {
		qp.mu.Lock()
		if qp.state != qpDestroyed {
			qp.flushAck(out)
		}
		qp.acking = false
		qp.mu.Unlock()
	}
	clear(out.acking)
	out.acking = out.acking[:0]
	if w.c != (Counters{}) {
		t.mu.Lock()
		t.c.add(&w.c)
		t.mu.Unlock()
		w.c = Counters{}
	}
	t.workers.Put(w)
}

// handle processes one datagram from src. A datagram that reaches a queue
// pair is counted there, under its lock; w.c counts the others, so that a
// batch of good packets writes nothing another core's batch writes.
func (w *worker) handle(t *Target, now int64, b []byte, src netip.AddrPort, out *Output) {
	p := &w.pkt
	if err := p.Decode(b); err != nil {
		w.refuse(b).Malformed++
		return
	}
	if !w.icrc.Verify(src, w.dst, b) {
		w.refuse(b).BadICRC++
		return
	}
	if p.BTH.DestQP == cm.GSIQP {
		t.mu.Lock()
		t.c.Frames++
		t.c.Bytes += uint64(len(b))
		if !t.closed.Load() {
			t.handleCM(now, p, src, out)
		}
		t.unlock()
		return
	}
	if p.BTH.Opcode.Transport() != rocev2.RC || p.BTH.PKey&0x7FFF != 0x7FFF {
		w.refuse(b).Unknown++
		return
	}
	qp := w.lastQP
	for {
		if qp == nil || qp.qpn != p.BTH.DestQP {
			qp = (*t.qpTab.Load())[p.BTH.DestQP]
			if qp == nil {
				w.refuse(b).Unknown++
				return
			}
			w.lastQP = qp
		}
		if src.Addr().Unmap() != qp.peer.Addr().Unmap() {
			w.refuse(b).Foreign++
			return
		}
		qp.mu.Lock()
		if qp.state != qpDestroyed {
			break
		}
		// Destroyed since this worker or the table named it: the table
		// may hold its successor.
		qp.mu.Unlock()
		if w.lastQP != qp {
			w.refuse(b).Unknown++
			return
		}
		w.lastQP, qp = nil, nil
	}
	qp.c.Frames++
	qp.c.Bytes += uint64(len(b))
	qp.lastRx = now
	qp.receive(now, p, src, out)
	qp.mu.Unlock()
}

// prefetch starts loading the memory the request in b writes, when it names
// a live region and lies inside it: a batch's writes to scattered slots then
// wait for their cache misses together, before the first QP lock's release
// makes the CPU wait for each write in turn.
func (w *worker) prefetch(t *Target, b []byte) {
	va, rkey, n, ok := rocev2.PeekMemory(b)
	if !ok || n == 0 {
		return
	}
	r := w.region
	if r == nil || r.rkey != rkey || r.dead.Load() {
		// A region deregistered is not kept: its memory is its owner's.
		r = (*t.regTab.Load())[rkey]
		w.region = r
		if r == nil {
			return
		}
	}
	if off, ok := r.span(va, uint64(n)); ok {
		prefetch.Ends(r.mem[off : off+uint64(n)])
	}
}

// refuse counts b as a datagram refused before any queue pair, and returns
// the counters to add why.
func (w *worker) refuse(b []byte) *Counters {
	w.c.Frames++
	w.c.Bytes += uint64(len(b))
	return &w.c
}

// Tick runs the timers due at now (Unix nanoseconds) and appends what they
// send to out: REPs and DREQs resent (or their connections dropped after
// MaxTries), and the target's own SENDs sent or resent. Serve calls it every 10 ms.
func (t *Target) Tick(now int64, out *Output) {
	t.mu.Lock()
	defer t.unlock()
	if t.closed.Load() {
		return
	}
	for _, qp := range t.qps {
		qp.mu.Lock()
		t.tick(now, qp, out)
		qp.mu.Unlock()
	}
}

// tick runs qp's timers; t.mu and qp.mu are held.
func (t *Target) tick(now int64, qp *QP, out *Output) {
	if qp.lastRx == 0 {
		qp.lastRx = now // a QP made by NewQP: its clock starts now
	}
	switch qp.state {
	case qpWaitRTU, qpClosing: // a REP or DREQ awaiting its answer
		var buf [cm.MADLen]byte
		ev, mad := qp.acc.Tick(buf[:0], now)
		if ev == cm.GaveUp {
			t.c.CMTimeouts++
			t.destroy(qp)
			return
		}
		if len(mad) > 0 {
			dst := qp.peer
			if qp.state == qpWaitRTU {
				dst = qp.req.from
			}
			t.sendRawMAD(mad, dst, out)
		}
	case qpReady:
		qp.transmit(now, out)
		if t.idleTimeout > 0 && now-qp.lastRx > int64(t.idleTimeout) {
			// A DREQ, so that a peer still alive reconnects; the QP
			// goes when the DREP comes or the DREQ times out.
			t.c.Reaped++
			if qp.localCommID == 0 {
				t.destroy(qp)
			} else {
				qp.state = qpClosing
				qp.acc.Close()
			}
		}
	case qpError:
		// Its peer saw the fatal NAK or stopped answering: it will
		// reconnect, if it lives. The QP only holds a place.
		if now-qp.lastRx > int64(ErrorLinger) {
			t.c.Reaped++
			t.destroy(qp)
		}
	}
}

// ErrorLinger is how long a QP in the error state stays (answering its
// peer's stray packets with nothing) before the target reaps it.
const ErrorLinger = time.Second

// evictIdle makes room for a new connection when the target is full: it
// destroys the QP that has been silent longest, if silent for at least
// ErrorLinger, and reports whether it did. t.mu is held.
func (t *Target) evictIdle(now int64) bool {
	var oldest *QP
	var last int64
	for _, qp := range t.qps {
		qp.mu.Lock()
		busy, rx := qp.state == qpWaitRTU || qp.state == qpClosing, qp.lastRx
		qp.mu.Unlock()
		if !busy && (oldest == nil || rx < last) {
			oldest, last = qp, rx
		}
	}
	if oldest == nil || now-last < int64(ErrorLinger) {
		return false
	}
	t.c.Reaped++
	oldest.mu.Lock()
	t.destroy(oldest)
	oldest.mu.Unlock()
	return true
}

// evictHalfOpen makes room for a REQ from src when the target is full and
// no QP is idle: the address holding the most connections waiting for
// their RTU, if it holds more than src's, loses its oldest (among equals,
// the one waiting longest), so that REQs from many addresses cannot keep
// a peer with few out. It reports whether
// it evicted one. t.mu is held.
func (t *Target) evictHalfOpen(src netip.AddrPort) bool {
	type holder struct {
		n        int
		oldest   *QP
		oldestRx int64
	}
	by := map[netip.Addr]*holder{}
	for _, qp := range t.qps {
		qp.mu.Lock()
		waiting, rx := qp.state == qpWaitRTU, qp.lastRx
		qp.mu.Unlock()
		if !waiting {
			continue
		}
		a := qp.peer.Addr().Unmap()
		h := by[a]
		if h == nil {
			h = &holder{}
			by[a] = h
		}
		h.n++
		if h.oldest == nil || rx < h.oldestRx {
			h.oldest, h.oldestRx = qp, rx
		}
	}
	var most *holder
	for _, h := range by {
		if most == nil || h.n > most.n || h.n == most.n && h.oldestRx < most.oldestRx {
			most = h
		}
	}
	mine := 0
	if h := by[src.Addr().Unmap()]; h != nil {
		mine = h.n
	}
	if most == nil || most.n <= mine {
		return false
	}
	t.c.Reaped++
	most.oldest.mu.Lock()
	t.destroy(most.oldest)
	most.oldest.mu.Unlock()
	return true
}
