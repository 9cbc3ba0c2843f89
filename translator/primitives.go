package translator

import (
	"fmt"

	"github.com/dtakit/dtakit/dta"
	"github.com/dtakit/dtakit/primitive"
	"github.com/dtakit/dtakit/rocev2"

	// The four primitives register themselves (package primitive).
	_ "github.com/dtakit/dtakit/appendlist"
	_ "github.com/dtakit/dtakit/keyincr"
	_ "github.com/dtakit/dtakit/keywrite"
	_ "github.com/dtakit/dtakit/postcard"
)

// instance is one primitive instance of a collector: its CM port, its QP,
// its region (from the advertisement) and the translation state of its
// primitive.
type instance struct {
	col     *collector
	port    uint16
	qp      *qp
	err     error // why the instance is not usable
	retryAt int64 // when a failed instance tries to connect again (0: never)

	prim dta.Opcode
	ad   dta.Advertisement // Geometry owned by the instance
	geom string            // the geometry as advertised, to notice a change

	rq *verbsQP // with the verbs backend, the QP the NIC runs, instead of qp

	// tr is the primitive's translation state (package primitive); held
	// holds the wide reports tr keeps back (a postcard cache entry's hops
	// not yet written, an Append list's pending entries), by tr's slot,
	// settled when their write is acknowledged (nil until one comes).
	tr   primitive.Translator
	held *heldTokens
}

// maxTrackedEntries bounds the slots·per of a Translator's held reports
// kept in one array; a larger one keeps them in a map (heldTokens).
const maxTrackedEntries = 1 << 18

// ready reports whether in can take reports.
func (in *instance) ready() bool {
	if in.rq != nil {
		return in.err == nil
	}
	return in.qp != nil && in.qp.state == qpReady
}

// hasRoom reports whether in's QP can take n more operations now.
func (e *Engine) hasRoom(in *instance, n int) bool {
	if in.rq != nil {
		return in.rq.room(n)
	}
	return e.room(in.qp, n)
}

// configure sets up in's translation state from its advertisement: the
// primitive registered under its opcode decodes the geometry (package
// primitive). A repeated advertisement (after a reconnection) with the same
// primitive and geometry keeps the state (cached postcards, pending
// appends); the region's address and rkey are taken from the new one. A
// new layout forgets in.held: the caller settles its reports.
func (in *instance) configure(ad dta.Advertisement, cfg Config) error {
	if ad.IsReference() {
		return fmt.Errorf("%w: a reference-only advertisement names no primitive", ErrUnsupported)
	}
	geom := string(ad.Geometry)
	ad.Geometry = []byte(geom)
	if in.prim == ad.Primitive && in.geom == geom {
		in.ad = ad
		return nil
	}
	k, ok := primitive.Lookup(ad.Primitive)
	if !ok {
		return fmt.Errorf("%w: %v", ErrUnsupported, ad.Primitive)
	}
	l, err := k.ParseLayout(ad.Geometry)
	if err != nil {
		return err
	}
	// The region bounds the translator's memory: checked first.
	if l.RegionSize() > uint64(ad.Length) {
		return fmt.Errorf("region of %d bytes, the layout needs %d", ad.Length, l.RegionSize())
	}
	tr, err := l.NewTranslator(primitive.Config{
		PostcardCache: cfg.PostcardCache, PostcardLinger: cfg.PostcardLinger, AppendLinger: cfg.AppendLinger, MTU: MTU,
	})
	if err != nil {
		return err
	}
	in.tr, in.held = tr, nil
	in.prim, in.ad, in.geom = ad.Primitive, ad, geom
	return nil
}

// maxPacket returns the longest datagram in's translation sends.
func (in *instance) maxPacket() int {
	const write = rocev2.BTHLen + rocev2.RETHLen + rocev2.ImmDtLen + 3 + rocev2.ICRCLen
	if in.tr == nil {
		return maxPacketLen
	}
	n := rocev2.BTHLen + rocev2.AtomicETHLen + rocev2.ICRCLen
	if w := in.tr.MaxWrite(); w > 0 {
		n = max(n, write+min(w, MTU))
	}
	return n
}

// scratch is the translation paths' reusable space.
type scratch struct {
	pkt   rocev2.Packet
	heads []uint64
}

// translate turns r into in's operations through its primitive. A
// Key-Write writes only copy cp when cp is not negative (Submit).
func (e *Engine) translate(in *instance, r *dta.Report, cp int) primitive.Outcome {
	o := in.tr.Translate(e.sinkFor(in), r, cp)
	if o == primitive.Rejected {
		e.c.Rejected++
	}
	return o
}

// track queues the report being translated, whose operations were just
// queued on in's QP, to be settled when they are acknowledged.
func (e *Engine) track(in *instance) {
	if e.cur.s != nil {
		e.pendOn(in, e.cur)
		e.tracked = true
	}
}

// pendOn records that t's report is applied once the last operation
// queued on in's QP is acknowledged (software) or completed (verbs).
func (e *Engine) pendOn(in *instance, t token) {
	if in.rq != nil {
		in.rq.pend(t)
		return
	}
	e.pend(in.qp, t)
}

// write posts one RDMA WRITE of data at offset off of in's region: WRITE
// Only, or First/Middle/Last when data exceeds the MTU; with imm, the last
// packet carries the immediate. A write that would reach past the region is
// refused (counted), never sent.
func (e *Engine) write(in *instance, off uint64, data []byte, imm bool, immData uint32) {
	if off > uint64(in.ad.Length) || uint64(len(data)) > uint64(in.ad.Length)-off {
		e.c.EncodeErrors++
		return
	}
	e.c.Writes++
	if in.rq != nil {
		if err := in.rq.write(in.ad.VA+off, in.ad.RKey, data, imm, immData); err != nil {
			e.c.VerbsErrors++
		}
		return
	}
	q, p := in.qp, &e.sc.pkt
	if len(data) <= MTU {
		if b := q.req.WriteOnly(in.ad.VA+off, in.ad.RKey, data, imm, immData, e.now); b != nil {
			e.send(q, b)
		}
		return
	}
	*p = rocev2.Packet{
		BTH:     rocev2.BTH{Opcode: rocev2.RCWriteFirst},
		RETH:    rocev2.RETH{VA: in.ad.VA + off, RKey: in.ad.RKey, DMALength: uint32(len(data))},
		Payload: data[:MTU],
	}
	e.post(q, p)
	for data = data[MTU:]; len(data) > MTU; data = data[MTU:] {
		*p = rocev2.Packet{BTH: rocev2.BTH{Opcode: rocev2.RCWriteMiddle}, Payload: data[:MTU]}
		e.post(q, p)
	}
	*p = rocev2.Packet{BTH: rocev2.BTH{Opcode: rocev2.RCWriteLast}, Payload: data}
	if imm {
		p.BTH.Opcode = rocev2.RCWriteLastImm
		p.ImmDt.Data = immData
	}
	e.post(q, p)
}

// fetchAdd posts one FETCH_ADD of add to the counter at offset off of in's
// region, with AckReq as every atomic.
func (e *Engine) fetchAdd(in *instance, off, add uint64) {
	if off > uint64(in.ad.Length) || uint64(in.ad.Length)-off < 8 || (in.ad.VA+off)%8 != 0 {
		e.c.EncodeErrors++
		return
	}
	e.c.FetchAdds++
	if in.rq != nil {
		if err := in.rq.fetchAdd(in.ad.VA+off, in.ad.RKey, add); err != nil {
			e.c.VerbsErrors++
		}
		return
	}
	e.send(in.qp, in.qp.req.FetchAdd(in.ad.VA+off, in.ad.RKey, add, e.now))
}

// shareTail tells in's requester whether the packets posted next are copies
// of one report (rc.Requester.ShareTail).
func (in *instance) shareTail(on bool) {
	if q := in.qp; q != nil && q.req != nil {
		q.req.ShareTail(on)
	}
}

// Flush writes what the translator holds back: every cached postcard flow's
// chunks and every partial append batch, on every ready instance, whatever
// the rate limit. What does not fit a retransmit ring, or belongs to an
// instance that is not ready, is counted in FlushLost.
func (e *Engine) Flush() {
	for _, col := range e.collectors {
		for _, in := range col.instances {
			if in.tr != nil {
				in.tr.Flush(e.sinkFor(in))
			}
		}
	}
}

// canFlush reports whether in's QP has room for n more operations,
// whatever the rate limit.
func (e *Engine) canFlush(in *instance, n int) bool {
	if in.rq != nil {
		return in.rq.room(n)
	}
	return in.qp.req.Room(n)
}
