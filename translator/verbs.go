package translator

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"sync"
	"time"

	"github.com/dtakit/dtakit/dta"
	"github.com/dtakit/dtakit/verbs"
)

// The verbs backend (Config.Verbs): the same engine translates reports with
// the same primitive code and counters, but its RDMA operations are posted
// as work requests to a local RDMA NIC, which runs the RC connections
// (PSNs, retransmission, ICRC) in hardware. Discovery uses the RDMA CM:
// CM ports CMPort, CMPort+1, ... of each collector until a REJ, each
// connection's first RECV holding the advertisement.

const (
	// verbsDepth bounds a QP's work requests in flight, as RingSize bounds
	// the software QP's packets.
	verbsDepth = 256
	// advertTimeout is how long a connection waits for its advertisement.
	advertTimeout = 2 * time.Second
	cmTimeout     = 2 * time.Second
)

// verbsQP is one RC connection to a collector instance, run by the NIC.
type verbsQP struct {
	inst   *instance
	id     *verbs.CMID
	pd     *verbs.PD
	cq     *verbs.CQ
	recv   *verbs.MR
	stage  *verbs.MR // one slot per work request in flight: payloads and atomic results
	slot   int
	posted uint64 // work requests posted, their IDs 0, 1, ...
	done   uint64 // work requests completed (every one is signalled)
	err    error  // the first error completion: the QP is in error, the instance unusable
	errID  uint64 // with err, the first work request not known to have succeeded
	wcs    [32]verbs.WC
	// fin holds the wide reports waiting for their last work request's
	// completion (its ID).
	fin waitQueue[uint64]
}

// fail puts q in error: the work requests from id on may not have been
// applied.
func (q *verbsQP) fail(err error, id uint64) {
	if q.err == nil {
		q.err, q.errID = err, id
	}
}

// pend records that t's report is applied once q's last work request
// posted completes.
func (q *verbsQP) pend(t token) { q.fin.push(t, q.posted-1) }

// popSettled removes and returns q's oldest pending report if it is
// settled: applied when its work requests all completed before any error,
// not applied (unconfirmed) when q failed first. RC completes in order.
func (q *verbsQP) popSettled() (t token, applied, ok bool) {
	f := q.fin.front()
	if f == nil {
		return token{}, false, false
	}
	applied = f.pos < q.done && (q.err == nil || f.pos < q.errID)
	if !applied && q.err == nil {
		return token{}, false, false // not completed yet
	}
	return q.fin.pop(), applied, true
}

// tick reaps q's completions and settles the reports they finish.
func (q *verbsQP) tick(e *Engine) {
	q.reap()
	for t, applied, ok := q.popSettled(); ok; t, applied, ok = q.popSettled() {
		e.done(t, !applied)
	}
}

// reap polls the completions.
func (q *verbsQP) reap() {
	for {
		n, err := q.cq.Poll(q.wcs[:])
		if err != nil {
			q.fail(err, q.done)
			return
		}
		for _, wc := range q.wcs[:n] {
			if err := wc.Err(); err != nil {
				q.fail(err, q.done)
			}
			q.done++
		}
		if n < len(q.wcs) {
			return
		}
	}
}

// ready: the instance's advertisement configured it (a QP in error is
// ready but has no room).
func (q *verbsQP) ready() bool { return q.inst.err == nil }

// room is flushRoom, counting a full send queue (the verbs backend's
// retransmit ring: RingFull) when it refuses.
func (q *verbsQP) room(e *Engine, n int) bool {
	if !q.flushRoom(n) {
		e.c.RingFull++
		return false
	}
	return true
}

// flushRoom reports whether n more work requests fit.
func (q *verbsQP) flushRoom(n int) bool {
	if q.posted-q.done+uint64(n) > verbsDepth {
		q.reap()
	}
	return q.err == nil && q.posted-q.done+uint64(n) <= verbsDepth
}

func (q *verbsQP) idle() bool {
	if q.err != nil {
		return true
	}
	q.reap()
	return q.posted == q.done
}

func (q *verbsQP) post(wr *verbs.SendWR) error {
	wr.ID = q.posted
	wr.Flags |= verbs.SendSignaled
	if err := q.id.QP().PostSend(wr); err != nil {
		// Whether the report's earlier work requests were posted is not
		// tracked: what has not completed is unconfirmed.
		q.fail(err, q.done)
		return err
	}
	q.posted++
	return nil
}

// stageSlot returns the staging bytes of the next work request.
func (q *verbsQP) stageSlot() int { return int(q.posted%verbsDepth) * q.slot }

func (*verbsQP) shareTail(bool) {}

func (q *verbsQP) write(e *Engine, va uint64, rkey uint32, data []byte, imm bool, immData uint32) {
	if err := q.postWrite(va, rkey, data, imm, immData); err != nil {
		e.c.VerbsErrors++
	}
}

func (q *verbsQP) fetchAdd(e *Engine, va uint64, rkey uint32, add uint64) {
	if err := q.postFetchAdd(va, rkey, add); err != nil {
		e.c.VerbsErrors++
	}
}

func (q *verbsQP) postWrite(va uint64, rkey uint32, data []byte, imm bool, immData uint32) error {
	if len(data) > q.slot {
		return fmt.Errorf("translator: write of %d bytes, staging slots hold %d", len(data), q.slot)
	}
	off := q.stageSlot()
	copy(q.stage.Bytes()[off:], data)
	wr := verbs.SendWR{Opcode: verbs.OpWrite, Local: verbs.SGE{MR: q.stage, Offset: off, Length: len(data)}, RemoteAddr: va, RKey: rkey}
	if imm {
		wr.Opcode, wr.Imm = verbs.OpWriteImm, immData
	}
	return q.post(&wr)
}

func (q *verbsQP) postFetchAdd(va uint64, rkey uint32, add uint64) error {
	wr := verbs.SendWR{Opcode: verbs.OpFetchAdd, Local: verbs.SGE{MR: q.stage, Offset: q.stageSlot(), Length: 8},
		RemoteAddr: va, RKey: rkey, CompareAdd: add}
	return q.post(&wr)
}

// close disconnects and frees the connection; the caller waited for idle.
func (q *verbsQP) close() error {
	errs := []error{q.id.Disconnect(), q.id.Close(), q.stage.Close(), q.recv.Close(), q.cq.Close(), q.pd.Close()}
	return errors.Join(errs...)
}

// maxWrite is the longest RDMA WRITE in's primitive makes (a Key-Write
// payload, a postcard chunk, an append batch), and at least the 8 bytes of
// an atomic's result.
func (in *instance) maxWrite() int { return max(in.tr.MaxWrite(), 8) }

// verbsBackend connects the engine's collectors through the RDMA CM.
type verbsBackend struct {
	local netip.Addr
	ec    *verbs.EventChannel
}

func newVerbsBackend(local netip.Addr) (*verbsBackend, error) {
	if _, err := verbs.Devices(); err != nil {
		return nil, fmt.Errorf("translator: verbs backend: %w", err)
	}
	ec, err := verbs.NewEventChannel()
	if err != nil {
		return nil, fmt.Errorf("translator: verbs backend: %w", err)
	}
	return &verbsBackend{local: local, ec: ec}, nil
}

// discover connects every instance of collector c, in CM port order, until
// the collector rejects a port or MaxInstances is reached. attach hands each
// connection and its advertisement to the engine.
func (v *verbsBackend) discover(e *Engine, c int, attach func(port uint16, ad dta.Advertisement, q *verbsQP) error) error {
	col := e.collectors[c]
	for i := range e.cfg.MaxInstances {
		port := e.cfg.CMPort + uint16(i)
		ad, q, err := v.connect(netip.AddrPortFrom(col.addr.Addr(), port))
		if errors.Is(err, errNoMoreInstances) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("%w: %v, CM port %d: %w", ErrNotListening, col.addr.Addr(), port, err)
		}
		if err := attach(port, ad, q); err != nil {
			return err
		}
	}
	return nil
}

var errNoMoreInstances = errors.New("rejected: no instance on this port")

// connect makes one RC connection to dst and reads its advertisement.
func (v *verbsBackend) connect(dst netip.AddrPort) (ad dta.Advertisement, _ *verbsQP, err error) {
	q := &verbsQP{}
	if q.id, err = v.ec.CreateID(); err != nil {
		return ad, nil, err
	}
	defer func() {
		if err != nil {
			_ = q.id.Close()
			_ = q.stage.Close()
			_ = q.recv.Close()
			_ = q.cq.Close()
			_ = q.pd.Close()
		}
	}()
	if err = q.id.ResolveAddr(v.local, dst, cmTimeout); err != nil {
		return ad, nil, err
	}
	if _, err = v.ec.Expect(verbs.CMAddrResolved, cmTimeout); err != nil {
		return ad, nil, err
	}
	if err = q.id.ResolveRoute(cmTimeout); err != nil {
		return ad, nil, err
	}
	if _, err = v.ec.Expect(verbs.CMRouteResolved, cmTimeout); err != nil {
		return ad, nil, err
	}
	dev := q.id.Context()
	if q.pd, err = dev.AllocPD(); err != nil {
		return ad, nil, err
	}
	if q.cq, err = dev.CreateCQ(verbsDepth+8, nil); err != nil {
		return ad, nil, err
	}
	if _, err = q.id.CreateQP(q.pd, verbs.QPInitAttr{SendCQ: q.cq, RecvCQ: q.cq, MaxSendWR: verbsDepth, MaxRecvWR: 4}); err != nil {
		return ad, nil, err
	}
	if q.recv, err = q.pd.RegMR(make([]byte, 256), verbs.AccessLocalWrite); err != nil {
		return ad, nil, err
	}
	if err = q.id.QP().PostRecv(0, verbs.SGE{MR: q.recv, Length: 256}); err != nil {
		return ad, nil, err
	}
	if err = q.id.Connect(verbs.ConnParam{ResponderResources: 16, InitiatorDepth: 16, RetryCount: 7, RNRRetryCount: 7}); err != nil {
		return ad, nil, err
	}
	ev, err := v.ec.Get(cmTimeout)
	if err != nil {
		return ad, nil, err
	}
	switch ev.Type {
	case verbs.CMEstablished:
	case verbs.CMRejected:
		return ad, nil, errNoMoreInstances
	default:
		return ad, nil, &verbs.CMEventError{Want: verbs.CMEstablished, Got: ev}
	}
	wcs, err := q.cq.PollWait(1, advertTimeout)
	if err != nil {
		return ad, nil, fmt.Errorf("no advertisement: %w", err)
	}
	if err = wcs[0].Err(); err != nil {
		return ad, nil, err
	}
	ad, err = dta.ParseAdvertisement(q.recv.Bytes()[:wcs[0].ByteLen])
	if err != nil {
		return ad, nil, fmt.Errorf("%w: %w", ErrAdvertisement, err)
	}
	return ad, q, nil
}

// stageFor registers q's staging memory, sized for in's writes.
func (q *verbsQP) stageFor(in *instance) error {
	q.slot = (max(in.maxWrite(), 8) + 7) &^ 7
	var err error
	q.stage, err = q.pd.RegMR(make([]byte, q.slot*verbsDepth), verbs.AccessLocalWrite)
	return err
}

// attachVerbs adds an instance connected through the verbs backend to
// collector c.
func (e *Engine) attachVerbs(c int, port uint16, ad dta.Advertisement, q *verbsQP) error {
	col := e.collectors[c]
	in := &instance{col: col, port: port, conn: q}
	q.inst = in
	col.instances = append(col.instances, in)
	if err := in.configure(ad, e.cfg); err != nil {
		in.err = fmt.Errorf("%w: %v, CM port %d: %w", ErrAdvertisement, col.addr.Addr(), port, err)
		return nil
	}
	if err := q.stageFor(in); err != nil {
		in.err = err
		return nil
	}
	e.assign(col)
	return nil
}

// close settles and frees the QPs the NIC runs, and the event channel.
func (v *verbsBackend) close(t *Translator) error {
	sh := t.shards[0]
	sh.mu.Lock()
	defer sh.mu.Unlock()
	e := sh.e
	var errs []error
	for _, col := range e.collectors {
		for _, in := range col.instances {
			if q, ok := in.conn.(*verbsQP); ok {
				// What completed is applied; what did not, after Close's
				// wait, is unconfirmed.
				q.tick(e)
				q.fail(ErrClosed, q.done)
				q.tick(e)
				errs = append(errs, q.close())
				in.conn = nil
				in.err = ErrClosed
			}
		}
	}
	// The disconnections' events are not waited for: the IDs are gone.
	errs = append(errs, v.ec.Close())
	return errors.Join(errs...)
}

// discoverAll connects every collector's instances of e through the RDMA
// CM, one collector after the other, and returns their errors joined. mu
// guards e; it is not held while the CM waits.
func (v *verbsBackend) discoverAll(ctx context.Context, e *Engine, mu *sync.Mutex) error {
	var errs []error
	for c := range e.collectors {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("translator: connecting: %w", err)
		}
		err := v.discover(e, c, func(port uint16, ad dta.Advertisement, q *verbsQP) error {
			mu.Lock()
			defer mu.Unlock()
			return e.attachVerbs(c, port, ad, q)
		})
		mu.Lock()
		col := e.collectors[c]
		col.done, col.err = true, err
		for _, in := range col.instances {
			if in.err != nil {
				err = errors.Join(err, in.err)
			}
		}
		mu.Unlock()
		if err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// start connects every collector's instances through the RDMA CM, one
// collector after the other, and returns their errors joined.
func (v *verbsBackend) start(ctx context.Context, t *Translator) error {
	sh := t.shards[0] // Verbs runs one shard
	return v.discoverAll(ctx, sh.e, &sh.mu)
}
