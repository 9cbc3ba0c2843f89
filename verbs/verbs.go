package verbs

import (
	"errors"
	"fmt"
	"runtime"
	"time"
	"unsafe"
)

// Device is an RDMA device ibv_get_device_list found.
type Device struct {
	Name string // e.g. "mlx5_0", "rxe0"
	GUID uint64 // node GUID
}

// Devices lists the RDMA devices. With none it returns an error wrapping
// [ErrNoDevice].
func Devices() ([]Device, error) {
	devs, err := devices()
	if err != nil {
		return nil, err
	}
	if len(devs) == 0 {
		return nil, &Error{Op: "ibv_get_device_list", Err: ErrNoDevice}
	}
	return devs, nil
}

// GID is a port's global identifier; for RoCEv2 an IPv6 or IPv4-mapped
// address.
type GID [16]byte

// Context is an open device (struct ibv_context).
type Context struct {
	h     ctxH
	name  string
	owned bool // false for a CM ID's context, which librdmacm owns
}

// Open opens the device called name, or the first device when name is
// empty. With no such device it returns an error wrapping [ErrNoDevice].
func Open(name string) (*Context, error) {
	if _, err := Devices(); err != nil {
		return nil, err
	}
	h, err := openDevice(name)
	if err != nil {
		if errors.Is(err, ErrNoDevice) && name != "" {
			return nil, &Error{Op: "ibv_open_device", Err: fmt.Errorf("%w named %q", ErrNoDevice, name)}
		}
		return nil, err
	}
	return &Context{h: h, name: name, owned: true}, nil
}

// Close closes the device. Closing twice, or closing a CM ID's context, does
// nothing.
func (c *Context) Close() error {
	if c == nil || c.h == nil || !c.owned {
		return nil
	}
	h := c.h
	c.h = nil
	return closeDevice(h)
}

func (c *Context) check(op string) error {
	if c == nil || c.h == nil {
		return opErr(op, ErrClosed)
	}
	return nil
}

// QueryPort reports port (from 1) of the device.
func (c *Context) QueryPort(port uint8) (PortAttr, error) {
	if err := c.check("ibv_query_port"); err != nil {
		return PortAttr{}, err
	}
	return queryPort(c.h, port)
}

// QueryGID returns entry index of port's GID table.
func (c *Context) QueryGID(port uint8, index int) (GID, error) {
	if err := c.check("ibv_query_gid"); err != nil {
		return GID{}, err
	}
	return queryGID(c.h, port, index)
}

// AllocPD allocates a protection domain.
func (c *Context) AllocPD() (*PD, error) {
	if err := c.check("ibv_alloc_pd"); err != nil {
		return nil, err
	}
	h, err := allocPD(c.h)
	if err != nil {
		return nil, err
	}
	return &PD{h: h, ctx: c}, nil
}

// PD is a protection domain (struct ibv_pd).
type PD struct {
	h   pdH
	ctx *Context
}

// Close deallocates the PD; its MRs and QPs must be closed first.
func (pd *PD) Close() error {
	if pd == nil || pd.h == nil {
		return nil
	}
	h := pd.h
	pd.h = nil
	return deallocPD(h)
}

// RegMR registers buf with the access rights given. buf must stay valid
// until the MR is closed; Go heap memory is pinned meanwhile (package doc).
func (pd *PD) RegMR(buf []byte, access Access) (*MR, error) {
	if pd == nil || pd.h == nil {
		return nil, opErr("ibv_reg_mr", ErrClosed)
	}
	if len(buf) == 0 {
		return nil, opErr("ibv_reg_mr", fmt.Errorf("%w: empty buffer", ErrInvalid))
	}
	if err := access.validate(); err != nil {
		return nil, opErr("ibv_reg_mr", err)
	}
	mr := &MR{buf: buf}
	mr.pin.Pin(&buf[0])
	h, lkey, rkey, err := regMR(pd.h, uintptr(unsafe.Pointer(&buf[0])), len(buf), access)
	if err != nil {
		mr.pin.Unpin()
		return nil, err
	}
	mr.h, mr.lkey, mr.rkey = h, lkey, rkey
	return mr, nil
}

// MR is a registered memory region (struct ibv_mr).
type MR struct {
	h          mrH
	buf        []byte
	pin        runtime.Pinner
	lkey, rkey uint32
}

// LKey is the key local work requests name the region with.
func (mr *MR) LKey() uint32 { return mr.lkey }

// RKey is the key a remote peer names the region with: what a collector
// advertises.
func (mr *MR) RKey() uint32 { return mr.rkey }

// Addr is the region's virtual address, the base of remote addresses.
func (mr *MR) Addr() uint64 { return uint64(uintptr(unsafe.Pointer(&mr.buf[0]))) }

// Len is the region's length in bytes.
func (mr *MR) Len() int { return len(mr.buf) }

// Bytes returns the registered memory.
func (mr *MR) Bytes() []byte { return mr.buf }

// Close deregisters the region and unpins its memory.
func (mr *MR) Close() error {
	if mr == nil || mr.h == nil {
		return nil
	}
	h := mr.h
	mr.h = nil
	err := deregMR(h)
	mr.pin.Unpin()
	return err
}

// sge checks that [off, off+n) lies in mr and returns its address.
func (mr *MR) sge(op string, off, n int) (uint64, error) {
	if mr == nil || mr.h == nil {
		return 0, opErr(op, fmt.Errorf("%w: local MR closed or missing", ErrInvalid))
	}
	if off < 0 || n < 0 || off > len(mr.buf) || n > len(mr.buf)-off {
		return 0, opErr(op, fmt.Errorf("%w: [%d, %d+%d) outside the %d-byte MR", ErrInvalid, off, off, n, len(mr.buf)))
	}
	return mr.Addr() + uint64(off), nil
}

// CompChannel is a completion event channel (struct ibv_comp_channel).
type CompChannel struct {
	h   chH
	fd  int
	cqs map[cqH]*CQ
}

// CreateCompChannel creates a completion channel.
func (c *Context) CreateCompChannel() (*CompChannel, error) {
	if err := c.check("ibv_create_comp_channel"); err != nil {
		return nil, err
	}
	h, fd, err := createCompChannel(c.h)
	if err != nil {
		return nil, err
	}
	return &CompChannel{h: h, fd: fd, cqs: map[cqH]*CQ{}}, nil
}

// Wait waits up to timeout for a completion event and returns the CQ it is
// for; the CQ must be re-armed with ReqNotify to signal again.
func (ch *CompChannel) Wait(timeout time.Duration) (*CQ, error) {
	if ch == nil || ch.h == nil {
		return nil, opErr("ibv_get_cq_event", ErrClosed)
	}
	if err := waitFD(ch.fd, timeout, "ibv_get_cq_event"); err != nil {
		return nil, err
	}
	h, err := getCQEvent(ch.h)
	if err != nil {
		return nil, err
	}
	return ch.cqs[h], nil
}

// Close destroys the channel; its CQs must be closed first.
func (ch *CompChannel) Close() error {
	if ch == nil || ch.h == nil {
		return nil
	}
	h := ch.h
	ch.h = nil
	return destroyCompChannel(h)
}

// CQ is a completion queue (struct ibv_cq).
type CQ struct {
	h   cqH
	ch  *CompChannel
	buf cqBuf
}

// CreateCQ creates a CQ of at least cqe entries, signalling ch (may be nil).
func (c *Context) CreateCQ(cqe int, ch *CompChannel) (*CQ, error) {
	if err := c.check("ibv_create_cq"); err != nil {
		return nil, err
	}
	if cqe < 1 {
		return nil, opErr("ibv_create_cq", fmt.Errorf("%w: %d entries", ErrInvalid, cqe))
	}
	var chh chH
	if ch != nil {
		if ch.h == nil {
			return nil, opErr("ibv_create_cq", ErrClosed)
		}
		chh = ch.h
	}
	h, buf, err := createCQ(c.h, cqe, chh)
	if err != nil {
		return nil, err
	}
	cq := &CQ{h: h, ch: ch, buf: buf}
	if ch != nil {
		ch.cqs[h] = cq
	}
	return cq, nil
}

// ReqNotify arms the CQ: the next completion (or solicited one) signals its
// channel.
func (cq *CQ) ReqNotify(solicitedOnly bool) error {
	if cq == nil || cq.h == nil {
		return opErr("ibv_req_notify_cq", ErrClosed)
	}
	return reqNotify(cq.h, solicitedOnly)
}

// Poll fills wcs with up to len(wcs) completions (at most 32 a call) and
// returns how many. It does not block or allocate.
func (cq *CQ) Poll(wcs []WC) (int, error) {
	if cq == nil || cq.h == nil {
		return 0, opErr("ibv_poll_cq", ErrClosed)
	}
	return pollCQ(cq.h, cq.buf, wcs)
}

// PollWait polls until n completions arrived or timeout passed, and returns
// them. It is for control paths and tests: it spins.
func (cq *CQ) PollWait(n int, timeout time.Duration) ([]WC, error) {
	out := make([]WC, 0, n)
	buf := make([]WC, n)
	deadline := time.Now().Add(timeout)
	for len(out) < n {
		k, err := cq.Poll(buf[:n-len(out)])
		if err != nil {
			return out, err
		}
		out = append(out, buf[:k]...)
		if k == 0 {
			if time.Now().After(deadline) {
				return out, opErr("ibv_poll_cq", fmt.Errorf("%w: %d of %d completions", ErrTimeout, len(out), n))
			}
			time.Sleep(50 * time.Microsecond)
		}
	}
	return out, nil
}

// Close destroys the CQ; its QPs must be closed first.
func (cq *CQ) Close() error {
	if cq == nil || cq.h == nil {
		return nil
	}
	h := cq.h
	cq.h = nil
	if cq.ch != nil {
		delete(cq.ch.cqs, h)
	}
	return destroyCQ(h, cq.buf)
}

// QPInitAttr sizes a reliable connected QP.
type QPInitAttr struct {
	SendCQ, RecvCQ *CQ
	MaxSendWR      int
	MaxRecvWR      int
	MaxSendSGE     int // default 1
	MaxRecvSGE     int // default 1
	MaxInlineData  int
	SigAll         bool // every send WR completes, whatever its flags
}

func (a *QPInitAttr) check(op string) error {
	if a.SendCQ == nil || a.RecvCQ == nil || a.SendCQ.h == nil || a.RecvCQ.h == nil {
		return opErr(op, fmt.Errorf("%w: a QP needs open send and receive CQs", ErrInvalid))
	}
	if a.MaxSendWR < 1 || a.MaxRecvWR < 0 {
		return opErr(op, fmt.Errorf("%w: %d send and %d receive WRs", ErrInvalid, a.MaxSendWR, a.MaxRecvWR))
	}
	if a.MaxSendSGE == 0 {
		a.MaxSendSGE = 1
	}
	if a.MaxRecvSGE == 0 {
		a.MaxRecvSGE = 1
	}
	return nil
}

// QP is a reliable connected queue pair (struct ibv_qp).
type QP struct {
	h      qpH
	qpn    uint32
	state  QPState
	inline int
	cm     bool // created by a CMID, which moves its state and destroys it
}

// CreateQP creates an RC QP in the RESET state.
func (pd *PD) CreateQP(attr QPInitAttr) (*QP, error) {
	if pd == nil || pd.h == nil {
		return nil, opErr("ibv_create_qp", ErrClosed)
	}
	if err := attr.check("ibv_create_qp"); err != nil {
		return nil, err
	}
	h, qpn, err := createQP(pd.h, attr)
	if err != nil {
		return nil, err
	}
	return &QP{h: h, qpn: qpn, state: QPReset, inline: attr.MaxInlineData}, nil
}

// QPN is the QP's number.
func (qp *QP) QPN() uint32 { return qp.qpn }

// State is the state the QP was last moved to through this package (a QP
// the RDMA CM connected reports QPUnknown until [QP.Query]).
func (qp *QP) State() QPState { return qp.state }

func (qp *QP) move(next QPState, op func() error) error {
	if qp == nil || qp.h == nil {
		return opErr("ibv_modify_qp", ErrClosed)
	}
	if !qp.cm && !qp.state.canMove(next) {
		return opErr("ibv_modify_qp", fmt.Errorf("%w: %v to %v", ErrState, qp.state, next))
	}
	if err := op(); err != nil {
		return err
	}
	qp.state = next
	return nil
}

// ToInit moves the QP to INIT on port (from 1) with the remote access
// rights it grants.
func (qp *QP) ToInit(port uint8, access Access) error {
	if err := access.validate(); err != nil {
		return opErr("ibv_modify_qp", err)
	}
	return qp.move(QPInit, func() error { return modifyInit(qp.h, port, access) })
}

// RTRAttr is what the receive side needs of the peer.
type RTRAttr struct {
	DestQPN         uint32
	RQPSN           uint32 // the first PSN expected from the peer
	PathMTU         MTU
	DGID            GID // the peer's GID (RoCE: its address)
	SGIDIndex       uint8
	HopLimit        uint8 // default 64
	Port            uint8 // default 1
	MaxDestRdAtomic uint8 // READs and atomics the peer may have in flight
	MinRNRTimer     uint8
}

// ToRTR moves the QP to RTR.
func (qp *QP) ToRTR(a RTRAttr) error {
	if a.PathMTU.Bytes() == 0 {
		return opErr("ibv_modify_qp", fmt.Errorf("%w: path MTU %d", ErrInvalid, a.PathMTU))
	}
	if a.DestQPN >= 1<<24 || a.RQPSN >= 1<<24 {
		return opErr("ibv_modify_qp", fmt.Errorf("%w: QPN and PSN are 24 bits", ErrInvalid))
	}
	if a.HopLimit == 0 {
		a.HopLimit = 64
	}
	if a.Port == 0 {
		a.Port = 1
	}
	return qp.move(QPRTR, func() error { return modifyRTR(qp.h, a) })
}

// RTSAttr is what the send side needs.
type RTSAttr struct {
	SQPSN       uint32 // the first PSN sent
	Timeout     uint8  // local ACK timeout, 4.096 µs * 2^Timeout
	RetryCount  uint8  // 0..7
	RNRRetry    uint8  // 0..7, 7 = forever
	MaxRdAtomic uint8  // READs and atomics this side may have in flight
}

// ToRTS moves the QP to RTS.
func (qp *QP) ToRTS(a RTSAttr) error {
	if a.SQPSN >= 1<<24 || a.RetryCount > 7 || a.RNRRetry > 7 {
		return opErr("ibv_modify_qp", fmt.Errorf("%w: SQ PSN is 24 bits, retry counts 0..7", ErrInvalid))
	}
	return qp.move(QPRTS, func() error { return modifyRTS(qp.h, a) })
}

// ToErr moves the QP to ERR: outstanding work requests complete flushed.
func (qp *QP) ToErr() error {
	return qp.move(QPErr, func() error { return modifyState(qp.h, QPErr) })
}

// ToReset moves the QP back to RESET.
func (qp *QP) ToReset() error {
	return qp.move(QPReset, func() error { return modifyState(qp.h, QPReset) })
}

// QPAttr is what ibv_query_qp reports of a QP, in part.
type QPAttr struct {
	State   QPState
	RQPSN   uint32 // next PSN expected
	SQPSN   uint32
	DestQPN uint32
	PathMTU MTU
}

// Query asks the device for the QP's state and PSNs.
func (qp *QP) Query() (QPAttr, error) {
	if qp == nil || qp.h == nil {
		return QPAttr{}, opErr("ibv_query_qp", ErrClosed)
	}
	a, err := queryQP(qp.h)
	if err == nil {
		qp.state = a.State
	}
	return a, err
}

// SGE is a span of a registered region.
type SGE struct {
	MR     *MR
	Offset int
	Length int
}

// SendWR is one send work request. The package posts one SGE per request.
type SendWR struct {
	ID     uint64
	Opcode Opcode
	Flags  SendFlags
	// Local is the data sent or written, or where a READ or atomic puts its
	// result (8 bytes for atomics). With SendInline its MR may be nil and
	// Inline holds the data.
	Local  SGE
	Inline []byte
	// RemoteAddr and RKey name the peer's memory (WRITE, READ, atomics).
	RemoteAddr uint64
	RKey       uint32
	Imm        uint32 // WRITE and SEND with immediate
	CompareAdd uint64 // FETCH_ADD: the addend; CMP_SWAP: the compare value
	Swap       uint64 // CMP_SWAP: the new value
}

// PostSend posts wr on the send queue. Arguments are checked before the
// call: a span outside its MR, an atomic that is not 8 bytes at an 8-byte
// aligned address, an unknown opcode or a QP not in RTS are refused.
func (qp *QP) PostSend(wr *SendWR) error {
	const op = "ibv_post_send"
	if qp == nil || qp.h == nil {
		return opErr(op, ErrClosed)
	}
	if wr.Opcode > opcodeMaxKnown {
		return opErr(op, fmt.Errorf("%w: opcode %v", ErrInvalid, wr.Opcode))
	}
	if !qp.cm && qp.state != QPRTS {
		return opErr(op, fmt.Errorf("%w: post in %v", ErrState, qp.state))
	}
	if wr.Opcode.atomic() && (wr.Local.Length != 8 || wr.RemoteAddr%8 != 0) {
		return opErr(op, fmt.Errorf("%w: atomics take 8 bytes at an 8-byte aligned address", ErrInvalid))
	}
	var laddr uint64
	var lkey uint32
	if wr.Flags&SendInline != 0 {
		if wr.Opcode != OpSend && wr.Opcode != OpSendImm && wr.Opcode != OpWrite && wr.Opcode != OpWriteImm {
			return opErr(op, fmt.Errorf("%w: inline %v", ErrInvalid, wr.Opcode))
		}
		if len(wr.Inline) > qp.inline {
			return opErr(op, fmt.Errorf("%w: %d inline bytes, the QP takes %d", ErrInvalid, len(wr.Inline), qp.inline))
		}
		w := *wr
		w.Local = SGE{Length: len(wr.Inline)}
		if len(wr.Inline) > 0 {
			laddr = uint64(uintptr(unsafe.Pointer(&wr.Inline[0])))
		}
		err := postSend(qp.h, &w, laddr, 0)
		runtime.KeepAlive(wr.Inline)
		return err
	}
	if wr.Local.Length > 0 || wr.Local.MR != nil {
		a, err := wr.Local.MR.sge(op, wr.Local.Offset, wr.Local.Length)
		if err != nil {
			return err
		}
		laddr, lkey = a, wr.Local.MR.lkey
	}
	return postSend(qp.h, wr, laddr, lkey)
}

// PostRecv posts a receive buffer.
func (qp *QP) PostRecv(id uint64, local SGE) error {
	const op = "ibv_post_recv"
	if qp == nil || qp.h == nil {
		return opErr(op, ErrClosed)
	}
	if !qp.cm && qp.state == QPReset {
		return opErr(op, fmt.Errorf("%w: post in %v", ErrState, qp.state))
	}
	var laddr uint64
	var lkey uint32
	if local.Length > 0 || local.MR != nil {
		a, err := local.MR.sge(op, local.Offset, local.Length)
		if err != nil {
			return err
		}
		laddr, lkey = a, local.MR.lkey
	}
	return postRecv(qp.h, id, laddr, local.Length, lkey)
}

// Close destroys the QP (a CM ID's QP is destroyed with the ID).
func (qp *QP) Close() error {
	if qp == nil || qp.h == nil || qp.cm {
		return nil
	}
	h := qp.h
	qp.h = nil
	return destroyQP(h)
}
