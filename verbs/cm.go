package verbs

import (
	"fmt"
	"net/netip"
	"sync"
	"time"
)

// EventChannel delivers RDMA CM events (struct rdma_event_channel).
type EventChannel struct {
	mu  sync.Mutex
	h   ecH
	fd  int
	ids map[idH]*CMID
}

// NewEventChannel creates an event channel.
func NewEventChannel() (*EventChannel, error) {
	h, fd, err := createEventChannel()
	if err != nil {
		return nil, err
	}
	return &EventChannel{h: h, fd: fd, ids: map[idH]*CMID{}}, nil
}

// Close destroys the channel; its IDs must be closed first.
func (ec *EventChannel) Close() error {
	ec.mu.Lock()
	defer ec.mu.Unlock()
	if ec.h == nil {
		return nil
	}
	if len(ec.ids) > 0 {
		return opErr("rdma_destroy_event_channel", fmt.Errorf("%w: %d CM IDs still open", ErrState, len(ec.ids)))
	}
	destroyEventChannel(ec.h)
	ec.h = nil
	return nil
}

// CMID is an RDMA CM identifier (struct rdma_cm_id) in the RC port space.
type CMID struct {
	ec  *EventChannel
	h   idH
	qp  *QP
	ctx *Context
}

// CreateID creates a CM ID on the channel.
func (ec *EventChannel) CreateID() (*CMID, error) {
	ec.mu.Lock()
	defer ec.mu.Unlock()
	if ec.h == nil {
		return nil, opErr("rdma_create_id", ErrClosed)
	}
	h, err := createID(ec.h)
	if err != nil {
		return nil, err
	}
	id := &CMID{ec: ec, h: h}
	ec.ids[h] = id
	return id, nil
}

// wrap returns the CMID for h, creating one for an ID librdmacm made (a
// connection request's).
func (ec *EventChannel) wrap(h idH) *CMID {
	if h == nil {
		return nil
	}
	ec.mu.Lock()
	defer ec.mu.Unlock()
	id := ec.ids[h]
	if id == nil {
		id = &CMID{ec: ec, h: h}
		ec.ids[h] = id
	}
	return id
}

// CMEvent is one event: what happened to which ID.
type CMEvent struct {
	Type CMEventType
	// ID is the ID the event is for; for CMConnectRequest a new ID for the
	// connection, which the caller accepts or rejects and later closes.
	ID *CMID
	// Listen is the listening ID of a CMConnectRequest.
	Listen *CMID
	// Status is the event's status: for CMRejected the reject reason, for
	// errors a negative errno.
	Status int
	// PrivateData is the connection's private data (REQ, REP or REJ).
	PrivateData []byte
}

// Get waits up to timeout (negative: forever) for the next event.
func (ec *EventChannel) Get(timeout time.Duration) (CMEvent, error) {
	ec.mu.Lock()
	h, fd := ec.h, ec.fd
	ec.mu.Unlock()
	if h == nil {
		return CMEvent{}, opErr("rdma_get_cm_event", ErrClosed)
	}
	if err := waitFD(fd, timeout, "rdma_get_cm_event"); err != nil {
		return CMEvent{}, err
	}
	r, err := getEvent(h)
	if err != nil {
		return CMEvent{}, err
	}
	return CMEvent{Type: CMEventType(r.typ), ID: ec.wrap(r.id), Listen: ec.wrap(r.listen), Status: r.status, PrivateData: r.pdata}, nil
}

// Expect waits for the next event and returns an error unless it is want.
func (ec *EventChannel) Expect(want CMEventType, timeout time.Duration) (CMEvent, error) {
	ev, err := ec.Get(timeout)
	if err != nil {
		return ev, err
	}
	if ev.Type != want {
		return ev, &CMEventError{Want: want, Got: ev}
	}
	return ev, nil
}

// CMEventError is an event other than the one a step of a connection needed.
type CMEventError struct {
	Want CMEventType
	Got  CMEvent
}

func (e *CMEventError) Error() string {
	return fmt.Sprintf("verbs: waiting for %v, got %v (status %d)", e.Want, e.Got.Type, e.Got.Status)
}

func (id *CMID) check(op string) error {
	if id == nil || id.h == nil {
		return opErr(op, ErrClosed)
	}
	return nil
}

// BindAddr binds the ID to a local address (port 0 for any).
func (id *CMID) BindAddr(a netip.AddrPort) error {
	if err := id.check("rdma_bind_addr"); err != nil {
		return err
	}
	return bindAddr(id.h, a)
}

// Listen listens for connection requests on the bound address.
func (id *CMID) Listen(backlog int) error {
	if err := id.check("rdma_listen"); err != nil {
		return err
	}
	return listen(id.h, backlog)
}

// ResolveAddr resolves dst (and src, when valid) to a device and port; its
// outcome is a CMAddrResolved or CMAddrError event.
func (id *CMID) ResolveAddr(src netip.Addr, dst netip.AddrPort, timeout time.Duration) error {
	if err := id.check("rdma_resolve_addr"); err != nil {
		return err
	}
	if src.IsValid() && src.Is4() != dst.Addr().Is4() {
		return opErr("rdma_resolve_addr", fmt.Errorf("%w: %v and %v are of different families", ErrInvalid, src, dst.Addr()))
	}
	return resolveAddr(id.h, src, dst, int(timeout.Milliseconds()))
}

// ResolveRoute resolves the route to the resolved address; its outcome is a
// CMRouteResolved or CMRouteError event.
func (id *CMID) ResolveRoute(timeout time.Duration) error {
	if err := id.check("rdma_resolve_route"); err != nil {
		return err
	}
	return resolveRoute(id.h, int(timeout.Milliseconds()))
}

// Context returns the device the ID is bound to, or nil before its address
// is bound or resolved to one. The CM owns it: its Close does nothing.
func (id *CMID) Context() *Context {
	if id == nil || id.h == nil {
		return nil
	}
	if id.ctx == nil {
		if h := idVerbs(id.h); h != nil {
			id.ctx = &Context{h: h}
		}
	}
	return id.ctx
}

// Port is the device port the ID is bound to.
func (id *CMID) Port() uint8 { return idPort(id.h) }

// LocalAddr and PeerAddr are the ID's addresses, when known.
func (id *CMID) LocalAddr() netip.AddrPort { return idAddr(id.h, false) }

// PeerAddr is the address of the connection's other end.
func (id *CMID) PeerAddr() netip.AddrPort { return idAddr(id.h, true) }

// CreateQP creates the ID's RC QP; the CM moves it through its states on
// Connect and Accept and destroys it with the ID.
func (id *CMID) CreateQP(pd *PD, attr QPInitAttr) (*QP, error) {
	const op = "rdma_create_qp"
	if err := id.check(op); err != nil {
		return nil, err
	}
	if pd == nil || pd.h == nil {
		return nil, opErr(op, ErrClosed)
	}
	if id.qp != nil {
		return nil, opErr(op, fmt.Errorf("%w: the ID has a QP", ErrState))
	}
	if err := attr.check(op); err != nil {
		return nil, err
	}
	h, qpn, err := cmCreateQP(id.h, pd.h, attr)
	if err != nil {
		return nil, err
	}
	id.qp = &QP{h: h, qpn: qpn, state: QPUnknown, inline: attr.MaxInlineData, cm: true}
	return id.qp, nil
}

// QP returns the QP CreateQP made, or nil.
func (id *CMID) QP() *QP { return id.qp }

// ConnParam is what a connect or accept offers.
type ConnParam struct {
	PrivateData        []byte // at most 56 bytes on connect, 196 on accept (IBA CM)
	ResponderResources uint8  // incoming READs and atomics in flight
	InitiatorDepth     uint8  // outgoing READs and atomics in flight
	RetryCount         uint8
	RNRRetryCount      uint8
}

func (p ConnParam) check(op string, max int) error {
	if len(p.PrivateData) > max {
		return opErr(op, fmt.Errorf("%w: %d bytes of private data, at most %d", ErrInvalid, len(p.PrivateData), max))
	}
	if p.RetryCount > 7 || p.RNRRetryCount > 7 {
		return opErr(op, fmt.Errorf("%w: retry counts are 0..7", ErrInvalid))
	}
	return nil
}

// Connect sends a connection request; CMEstablished, CMRejected or
// CMUnreachable follows.
func (id *CMID) Connect(p ConnParam) error {
	if err := id.check("rdma_connect"); err != nil {
		return err
	}
	if err := p.check("rdma_connect", 56); err != nil {
		return err
	}
	return connect(id.h, p)
}

// Accept accepts a connection request; CMEstablished follows.
func (id *CMID) Accept(p ConnParam) error {
	if err := id.check("rdma_accept"); err != nil {
		return err
	}
	if err := p.check("rdma_accept", 196); err != nil {
		return err
	}
	return accept(id.h, p)
}

// Reject rejects a connection request.
func (id *CMID) Reject(privateData []byte) error {
	if err := id.check("rdma_reject"); err != nil {
		return err
	}
	if len(privateData) > 148 {
		return opErr("rdma_reject", fmt.Errorf("%w: %d bytes of private data, at most 148", ErrInvalid, len(privateData)))
	}
	return reject(id.h, privateData)
}

// Disconnect disconnects; CMDisconnected follows on both sides.
func (id *CMID) Disconnect() error {
	if err := id.check("rdma_disconnect"); err != nil {
		return err
	}
	return disconnect(id.h)
}

// Close destroys the ID and its QP.
func (id *CMID) Close() error {
	if id == nil || id.h == nil {
		return nil
	}
	h := id.h
	id.h = nil
	if id.qp != nil {
		id.qp.h = nil
	}
	id.ec.mu.Lock()
	delete(id.ec.ids, h)
	id.ec.mu.Unlock()
	return destroyID(h)
}
