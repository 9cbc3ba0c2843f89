package translator

import (
	"fmt"

	"github.com/dtakit/dtakit/appendlist"
	"github.com/dtakit/dtakit/dta"
	"github.com/dtakit/dtakit/keyincr"
	"github.com/dtakit/dtakit/keywrite"
	"github.com/dtakit/dtakit/postcard"
	"github.com/dtakit/dtakit/rocev2"
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

	kw       keywrite.Layout
	ki       keyincr.Layout
	pc       *postcard.Codec
	cache    *postcard.Cache
	pcVals   postcard.ValueSet // the values the collector holds: others are rejected
	al       appendlist.Layout
	batcher  *appendlist.Batcher
	alMaxPkt int // packets one append can produce
	// alToks holds the wide reports of each list's pending entries, B per
	// list (nil until one comes): settled when their batch's write is
	// acknowledged.
	alToks *heldTokens
	// alWait lists, oldest first, when lists got their first pending
	// entry: Tick flushes a batch waiting longer than AppendLinger.
	alWait []lingering
	// pcToks holds the wide postcards of each cache entry's hops not yet
	// written, Hops per entry and pcN[slot] of them (nil until one comes):
	// settled when their chunk's writes are acknowledged.
	pcToks *heldTokens
	pcN    []uint8
	// pcAt holds, per cache entry, when its flow's first hop not yet
	// written came (0: none waiting); every PostcardLinger/2, Tick writes
	// the flows waiting longer than PostcardLinger. pcScan is when it last
	// looked.
	pcAt   []int64
	pcScan int64
}

// maxTrackedEntries bounds the slots (L·B of an Append layout, entries·B
// of a postcard cache) whose held reports are kept in one array; a larger
// one keeps them in a map (heldTokens).
const maxTrackedEntries = 1 << 18

type lingering struct {
	list uint32
	at   int64
}

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
// geometry is decoded by the primitive's package (ParseLayout).
// A repeated advertisement (after a reconnection) with the same primitive
// and geometry keeps the state (cached postcards, pending appends); the
// region's address and rkey are taken from the new one.
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
	switch ad.Primitive {
	case dta.OpKeyWrite:
		l, err := keywrite.ParseLayout(ad.Geometry)
		if err != nil {
			return err
		}
		if l.RegionSize() > uint64(ad.Length) {
			return fmt.Errorf("region of %d bytes, the layout needs %d", ad.Length, l.RegionSize())
		}
		in.kw = l
	case dta.OpKeyIncrement:
		l, err := keyincr.ParseLayout(ad.Geometry)
		if err != nil {
			return err
		}
		if l.RegionSize() > uint64(ad.Length) {
			return fmt.Errorf("region of %d bytes, the layout needs %d", ad.Length, l.RegionSize())
		}
		in.ki = l
	case dta.OpPostcard:
		l, vals, err := postcard.ParseGeometry(ad.Geometry)
		if err != nil {
			return err
		}
		cache, err := postcard.NewCache(l, cfg.PostcardCache)
		if err != nil {
			return err
		}
		if n := cache.Codec().Layout().RegionSize(); n > uint64(ad.Length) {
			return fmt.Errorf("region of %d bytes, the layout needs %d", ad.Length, n)
		}
		in.pc, in.cache, in.pcToks, in.pcN, in.pcVals = cache.Codec(), cache, nil, nil, vals
		in.pcAt = make([]int64, cfg.PostcardCache)
	case dta.OpAppend:
		l, err := appendlist.ParseLayout(ad.Geometry)
		if err != nil {
			return err
		}
		// The region bounds the batcher's memory: checked first.
		if l.RegionSize() > uint64(ad.Length) {
			return fmt.Errorf("region of %d bytes, the layout needs %d", ad.Length, l.RegionSize())
		}
		b, err := appendlist.NewBatcher(l)
		if err != nil {
			return err
		}
		l.Batch = max(l.Batch, 1) // 0 means 1
		in.al, in.batcher, in.alToks, in.alWait = l, b, nil, nil
		batch := l.Batch * l.SlotSize()
		// A batch crossing the ring's end is two writes.
		in.alMaxPkt = (batch+MTU-1)/MTU + 1
	default:
		return fmt.Errorf("%w: %v", ErrUnsupported, ad.Primitive)
	}
	in.prim, in.ad, in.geom = ad.Primitive, ad, geom
	return nil
}

// maxPacket returns the longest datagram in's translation sends.
func (in *instance) maxPacket() int {
	const write = rocev2.BTHLen + rocev2.RETHLen + rocev2.ImmDtLen + 3 + rocev2.ICRCLen
	switch in.prim {
	case dta.OpKeyWrite:
		return write + in.kw.PayloadSize()
	case dta.OpKeyIncrement:
		return rocev2.BTHLen + rocev2.AtomicETHLen + rocev2.ICRCLen
	case dta.OpPostcard:
		return write + in.pc.Layout().ChunkSize()
	case dta.OpAppend:
		return write + min(in.al.Batch*in.al.SlotSize(), MTU)
	}
	return maxPacketLen
}

// scratch is the translation paths' reusable space.
type scratch struct {
	pkt    rocev2.Packet
	kwOps  []keywrite.Write
	kwBuf  []byte
	kiOps  []keyincr.Write
	chunks []postcard.Chunk
	pcw    []postcard.Write
	alw    []appendlist.Write
	heads  []uint64
}

func (s *scratch) init() {
	s.kwOps = make([]keywrite.Write, 0, keywrite.MaxRedundancy)
	s.kwBuf = make([]byte, 0, maxReport)
	s.kiOps = make([]keyincr.Write, 0, keyincr.MaxRedundancy)
	s.chunks = make([]postcard.Chunk, 0, 2)
	s.pcw = make([]postcard.Write, 0, postcard.MaxCopies*(postcard.MaxHops+1)/2)
	s.alw = make([]appendlist.Write, 0, 2)
}

// outcome is what became of a report handed to translate.
type outcome uint8

const (
	applied  outcome = iota // its operations are queued
	busy                    // its QP cannot take them now: the caller drops it
	rejected                // the geometry refuses it (counted as Rejected)
)

// translate turns r into in's operations. A Key-Write writes only copy
// cp when cp is not negative (Submit).
func (e *Engine) translate(in *instance, r *dta.Report, cp int) outcome {
	switch in.prim {
	case dta.OpKeyWrite:
		kw := &r.KeyWrite
		var ops []keywrite.Write
		var err error
		if cp < 0 {
			if !e.hasRoom(in, int(kw.Redundancy)) {
				return busy
			}
			ops, _, err = in.kw.AppendWrites(e.sc.kwOps[:0], e.sc.kwBuf[:0], kw.Key, kw.Data, int(kw.Redundancy))
		} else {
			if !e.hasRoom(in, 1) {
				return busy
			}
			ops, _, err = in.kw.AppendCopy(e.sc.kwOps[:0], e.sc.kwBuf[:0], kw.Key, kw.Data, int(kw.Redundancy), cp)
		}
		if err != nil {
			e.c.Rejected++
			return rejected
		}
		in.shareTail(true)
		for _, w := range ops {
			e.write(in, w.Offset, w.Data, false, 0)
		}
		in.shareTail(false)
		e.track(in)
	case dta.OpKeyIncrement:
		ki := &r.KeyIncrement
		if !e.hasRoom(in, int(ki.Redundancy)) {
			return busy
		}
		ops, err := in.ki.AppendWrites(e.sc.kiOps[:0], ki.Key, ki.Counter, int(ki.Redundancy))
		if err != nil {
			e.c.Rejected++
			return rejected
		}
		in.shareTail(true)
		for _, op := range ops {
			e.fetchAdd(in, op.Offset, op.Add)
		}
		in.shareTail(false)
		e.track(in)
	case dta.OpPostcard:
		// The entry's chunk, perhaps in runs of slots, and p's flow's.
		if !e.hasRoom(in, in.cache.PendingWrites(in.cache.Slot(r.Postcard.Key))+in.pc.Layout().Copies) {
			return busy
		}
		return e.translatePostcard(in, r.Postcard)
	case dta.OpAppend:
		if !e.hasRoom(in, in.alMaxPkt) {
			return busy
		}
		list := r.Append.ListID
		k := in.batcher.Pending(list)

		ws, err := in.batcher.AppendWrites(e.sc.alw[:0], list, r.Append.Data, r.Header.Immediate)
		if err != nil {
			e.c.Rejected++
			return rejected
		}
		if e.cur.s != nil {
			if in.alToks == nil {
				in.alToks = newHeldTokens(in.al.Lists, in.al.Batch)
			}
			in.alToks.set(int(list), k, e.cur)
			e.tracked = true
		}
		if len(ws) == 0 {
			if k == 0 {
				in.alWait = append(in.alWait, lingering{list: list, at: e.now})
			}
			break
		}
		for _, w := range ws {
			e.write(in, w.Offset, w.Data, w.Imm, w.ImmData)
		}
		e.pendBatch(in, list, k+1)
	}
	return applied
}

// translatePostcard adds p to in's cache and writes the chunks that makes
// ready; the wide report being translated is settled once a chunk with
// its hop is written and acknowledged (docs/DTA-WIRE.md, "Exactly once").
// A chunk written before its flow completes skips the slots of hops not
// cached (postcard.Chunk.Skip), so the write that settles a hop never
// blanks one settled before. in's QP has room for the entry's pending
// writes and N more (translate).
func (e *Engine) translatePostcard(in *instance, p dta.Postcard) outcome {
	hops := in.pc.Layout().Hops
	track := e.cur.s != nil
	if track && in.pcToks == nil {
		in.pcToks = newHeldTokens(len(in.pcAt), hops)
		in.pcN = make([]uint8, len(in.pcAt))
	}
	if !in.pcVals.Contains(p.Value) {
		// The collector's queries would never find the path.
		e.c.Rejected++
		e.c.OutsideValues++
		return rejected
	}
	slot := in.cache.Slot(p.Key)
	chunks := e.sc.chunks[:0]
	if track && int(in.pcN[slot]) == hops {
		// Its flow had more postcards than hops (a hop came twice): the
		// chunk is written now, to settle them.
		e.writeChunks(in, slot, in.cache.Emit(chunks, slot))
	}
	chunks, err := in.cache.Insert(chunks, p.Key, postcard.Hop(p.Hop), postcard.PathLength(p.PathLength), postcard.Value(p.Value))
	if err != nil {
		e.c.Rejected++
		return rejected
	}
	// An evicted flow's chunk comes first and settles the entry's
	// postcards until now; p's own flow's chunk, if complete, comes last.
	own := false
	for i := range chunks {
		if chunks[i].Key == p.Key {
			own = true
			if track {
				e.keepPostcard(in, slot)
			}
		}
		e.writeChunks(in, slot, chunks[i:i+1])
	}
	if !own {
		if track {
			e.keepPostcard(in, slot)
		}
		if in.pcAt[slot] == 0 { // the flow starts waiting
			in.pcAt[slot] = max(e.now, 1)
		}
	}
	return applied
}

// keepPostcard adds the report being translated to the postcards of in's
// cache entry slot, to be settled when its chunk is written.
func (e *Engine) keepPostcard(in *instance, slot int) {
	in.pcToks.set(slot, int(in.pcN[slot]), e.cur)
	in.pcN[slot]++
	e.tracked = true
}

// writeChunks writes chunks, which come from in's cache entry slot, and
// queues the entry's wide postcards to be settled when the last write is
// acknowledged.
func (e *Engine) writeChunks(in *instance, slot int, chunks []postcard.Chunk) {
	for i := range chunks {
		// The copies of a whole chunk are equal after their VA; the runs
		// of a chunk that skips slots are not.
		in.shareTail(chunks[i].Skip == 0)
		if chunks[i].Skip != 0 {
			e.c.PartialChunks++
		}
		for _, w := range in.pc.AppendWrites(e.sc.pcw[:0], &chunks[i]) {
			e.write(in, w.Offset, w.Data, false, 0)
		}
		in.shareTail(false)
		in.pcAt[slot] = 0
		if in.pcToks != nil {
			e.pendPostcards(in, slot, false)
		}
	}
}

// pendPostcards queues the wide postcards of in's cache entry slot to be
// settled when in's QP's last write is acknowledged, or settles them as
// unconfirmed when lost says their chunk was not written.
func (e *Engine) pendPostcards(in *instance, slot int, lost bool) {
	toks := in.pcToks.take(slot, int(in.pcN[slot]))
	for i := range toks {
		if lost {
			e.done(toks[i], true)
		} else {
			e.pendOn(in, toks[i])
		}
		toks[i] = token{}
	}
	in.pcN[slot] = 0
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

// pendBatch queues the wide reports of the n entries of list just written
// (the batch's write was the last queued on in's QP) to be settled.
func (e *Engine) pendBatch(in *instance, list uint32, n int) {
	if in.alToks == nil {
		return
	}
	toks := in.alToks.take(int(list), n)
	for i := range toks {
		if toks[i].s != nil {
			e.pendOn(in, toks[i])
			toks[i] = token{}
		}
	}
}

// flushList writes list's pending entries, whatever the rate limit; false
// when the QP has no room or the instance is not ready.
func (e *Engine) flushList(in *instance, list uint32) bool {
	n := in.batcher.Pending(list)
	if n == 0 {
		return true
	}
	if !in.ready() || !e.canFlush(in, in.alMaxPkt) {
		return false
	}
	ws, err := in.batcher.Flush(e.sc.alw[:0], list)
	if err != nil {
		return false
	}
	for _, w := range ws {
		e.write(in, w.Offset, w.Data, w.Imm, w.ImmData)
	}
	e.pendBatch(in, list, n)
	return true
}

// emitLingering writes the postcard flows that have waited PostcardLinger
// since their first hop not yet written, so that their postcards are
// settled soon; a flow that gets a hop later is written again whole. It
// looks every PostcardLinger/2, over every entry.
func (e *Engine) emitLingering(in *instance) {
	linger := int64(e.cfg.PostcardLinger)
	if e.now-in.pcScan < linger/2 {
		return
	}
	in.pcScan = e.now
	for slot, at := range in.pcAt {
		if at == 0 || e.now-at < linger {
			continue
		}
		if !in.ready() || !e.canFlush(in, in.cache.PendingWrites(slot)) {
			return // no room now: the next look
		}
		e.writeChunks(in, slot, in.cache.Emit(e.sc.chunks[:0], slot))
		in.pcAt[slot] = 0
		e.c.Lingered++
	}
}

// flushLingering writes the Append batches that have waited AppendLinger
// since their first entry, so that their entries are settled soon.
func (e *Engine) flushLingering(in *instance) {
	i := 0
	for ; i < len(in.alWait) && e.now-in.alWait[i].at >= int64(e.cfg.AppendLinger); i++ {
		if !e.flushList(in, in.alWait[i].list) {
			break // no room now: the next tick
		}
		e.c.Lingered++
	}
	if i > 0 {
		n := copy(in.alWait, in.alWait[i:])
		clear(in.alWait[n:])
		in.alWait = in.alWait[:n]
	}
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
			ready := in.ready()
			if in.cache != nil {
				chunks := in.cache.Flush(nil)
				for i := range chunks {
					if !ready || !e.canFlush(in, in.pc.Writes(&chunks[i])) {
						e.c.FlushLost++
						if in.pcToks != nil {
							e.pendPostcards(in, in.cache.Slot(chunks[i].Key), true)
						}
						continue
					}
					e.writeChunks(in, in.cache.Slot(chunks[i].Key), chunks[i:i+1])
				}
				clear(in.pcAt)
			}
			if in.batcher != nil {
				for l := range in.al.Lists {
					if !e.flushList(in, uint32(l)) {
						e.c.FlushLost++
					}
				}
				clear(in.alWait)
				in.alWait = in.alWait[:0]
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
