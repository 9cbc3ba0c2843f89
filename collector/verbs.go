package collector

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dtakit/dtakit/internal/netguard"
	"github.com/dtakit/dtakit/rocev2/target"
	"github.com/dtakit/dtakit/verbs"
)

// Backend chooses what serves a collector's regions.
type Backend uint8

const (
	// BackendSoftware serves the regions with the software RoCEv2 target
	// (package rocev2/target) over a UDP socket: no RDMA hardware needed,
	// one core does the NIC's work.
	BackendSoftware Backend = iota
	// BackendVerbs registers the regions with an RDMA NIC (package verbs):
	// the NIC writes them, the CPU only accepts connections, sends the
	// advertisements and wakes Append readers.
	BackendVerbs
)

func (b Backend) String() string {
	switch b {
	case BackendSoftware:
		return "software"
	case BackendVerbs:
		return "verbs"
	}
	return fmt.Sprintf("Backend(%d)", uint8(b))
}

// ErrNoRDMA is wrapped by New's error when the verbs backend finds no RDMA
// device at the configured address; it also wraps the verbs error that says
// why (verbs.ErrNoDevice, verbs.ErrNotSupported, an errno).
var ErrNoRDMA = errors.New("collector: verbs backend: no RDMA device")

// VerbsCounters counts what the verbs backend's CPU side did.
type VerbsCounters struct {
	Connections    uint64 // connections accepted
	Refused        uint64 // connection requests refused (not from Config.Translators, no such instance, QP creation failed)
	Disconnects    uint64 // connections ended by the peer or an error
	Advertisements uint64 // advertisements acknowledged by the translator
	Immediates     uint64 // WRITEs with Immediate delivered to Append readers
	Receives       uint64 // SENDs received (not interpreted)
	Errors         uint64 // work completions with an error status
}

// verbsAccess maps a region's remote rights to the verbs access flags
// ibv_reg_mr takes: remote write and atomics need local write; remote read
// is always granted, as the prototype's collector does, so a translator can
// read a region back (Append heads after a restart).
func verbsAccess(a target.Access) verbs.Access {
	v := verbs.AccessLocalWrite | verbs.AccessRemoteRead
	if a&target.RemoteWrite != 0 {
		v |= verbs.AccessRemoteWrite
	}
	if a&target.RemoteAtomic != 0 {
		v |= verbs.AccessRemoteAtomic
	}
	return v
}

const (
	greetingSize = 256 // a SEND Only of the smallest path MTU
	maxGreetings = 64  // instances a verbs collector serves
	recvDepth    = 64  // RECVs kept posted on each connection
	recvSize     = 256
)

// verbsServer is the verbs backend: one device (the one the RDMA CM binds
// the collector's address to), one PD, one CQ for every connection.
type verbsServer struct {
	addr     netip.Addr
	peers    []netip.Prefix // Config.Translators
	ec       *verbs.EventChannel
	anchor   *verbs.CMID // bound to the address, so the device is known before any listener
	pd       *verbs.PD
	ch       *verbs.CompChannel
	cq       *verbs.CQ
	greet    *verbs.MR
	recv     *verbs.MR
	greetBuf []byte
	recvBuf  []byte

	mu        sync.Mutex
	listeners map[*verbs.CMID]*instance
	conns     map[*verbs.CMID]*vconn
	byQPN     map[uint32]*vconn
	mrs       map[*instance]*verbs.MR

	c struct {
		connections, refused, disconnects, advertisements, immediates, receives, errors atomic.Uint64
	}
}

type vconn struct {
	id *verbs.CMID
	qp *verbs.QP
	in *instance
}

func newVerbsServer(addr netip.Addr, peers []netip.Prefix) (v *verbsServer, err error) {
	if _, err := verbs.Devices(); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrNoRDMA, err)
	}
	if !addr.IsValid() || addr.IsUnspecified() {
		return nil, fmt.Errorf("%w: the verbs backend needs the specific address of a netdev with an RDMA device, not %v", ErrConfig, addr)
	}
	if peers == nil {
		peers = target.LoopbackPeers
	}
	v = &verbsServer{addr: addr, peers: peers, listeners: map[*verbs.CMID]*instance{}, conns: map[*verbs.CMID]*vconn{},
		byQPN: map[uint32]*vconn{}, mrs: map[*instance]*verbs.MR{},
		greetBuf: make([]byte, greetingSize*maxGreetings), recvBuf: make([]byte, recvSize)}
	defer func() {
		if err != nil {
			v.close()
		}
	}()
	if v.ec, err = verbs.NewEventChannel(); err != nil {
		return nil, err
	}
	if v.anchor, err = v.ec.CreateID(); err != nil {
		return nil, err
	}
	if err = v.anchor.BindAddr(netip.AddrPortFrom(addr, 0)); err != nil {
		return nil, fmt.Errorf("%w: binding %v: %w", ErrNoRDMA, addr, err)
	}
	dev := v.anchor.Context()
	if dev == nil {
		return nil, fmt.Errorf("%w: %v is not the address of an RDMA device's netdev", ErrNoRDMA, addr)
	}
	if v.pd, err = dev.AllocPD(); err != nil {
		return nil, err
	}
	if v.ch, err = dev.CreateCompChannel(); err != nil {
		return nil, err
	}
	if v.cq, err = dev.CreateCQ(4096, v.ch); err != nil {
		return nil, err
	}
	if v.greet, err = v.pd.RegMR(v.greetBuf, verbs.AccessLocalWrite); err != nil {
		return nil, err
	}
	if v.recv, err = v.pd.RegMR(v.recvBuf, verbs.AccessLocalWrite); err != nil {
		return nil, err
	}
	return v, nil
}

// register registers an instance's memory with the NIC.
func (v *verbsServer) register(in *instance, mem []byte, a target.Access) (va uint64, rkey uint32, err error) {
	mr, err := v.pd.RegMR(mem, verbsAccess(a))
	if err != nil {
		return 0, 0, err
	}
	v.mu.Lock()
	v.mrs[in] = mr
	v.mu.Unlock()
	return mr.Addr(), mr.RKey(), nil
}

// unregister deregisters what register registered for in, if anything.
func (v *verbsServer) unregister(in *instance) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if mr := v.mrs[in]; mr != nil {
		_ = mr.Close()
		delete(v.mrs, in)
	}
}

// listen listens for the instance's connections on its CM port.
func (v *verbsServer) listen(in *instance, port uint16) error {
	if in.Index >= maxGreetings {
		return fmt.Errorf("%w: the verbs backend serves at most %d instances", ErrRegion, maxGreetings)
	}
	if len(in.Advertisement) > greetingSize {
		return fmt.Errorf("%w: advertisement of %d bytes", ErrRegion, len(in.Advertisement))
	}
	copy(v.greetBuf[in.Index*greetingSize:], in.Advertisement)
	id, err := v.ec.CreateID()
	if err != nil {
		return err
	}
	if err := id.BindAddr(netip.AddrPortFrom(v.addr, port)); err != nil {
		id.Close()
		return err
	}
	if err := id.Listen(64); err != nil {
		id.Close()
		return err
	}
	v.mu.Lock()
	v.listeners[id] = in
	v.mu.Unlock()
	return nil
}

// serve runs the CM and completion loops until ctx is done.
func (v *verbsServer) serve(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errc := make(chan error, 2)
	go func() { errc <- v.cmLoop(ctx) }()
	go func() { errc <- v.cqLoop(ctx) }()
	err := <-errc
	cancel()
	return errors.Join(err, <-errc)
}

const pollEvery = 50 * time.Millisecond

func (v *verbsServer) cmLoop(ctx context.Context) error {
	for ctx.Err() == nil {
		ev, err := v.ec.Get(pollEvery)
		if errors.Is(err, verbs.ErrTimeout) {
			continue
		}
		if err != nil {
			return fmt.Errorf("collector.Serve: %w", err)
		}
		v.handle(ev)
	}
	return nil
}

func (v *verbsServer) handle(ev verbs.CMEvent) {
	v.mu.Lock()
	defer v.mu.Unlock()
	switch ev.Type {
	case verbs.CMConnectRequest:
		in := v.listeners[ev.Listen]
		if in == nil || !netguard.Contains(v.peers, ev.ID.PeerAddr().Addr()) || v.accept(ev.ID, in) != nil {
			v.c.refused.Add(1)
			_ = ev.ID.Reject(nil)
			_ = ev.ID.Close()
		}
	case verbs.CMEstablished:
		if cn := v.conns[ev.ID]; cn != nil {
			wr := verbs.SendWR{ID: uint64(cn.qp.QPN()), Opcode: verbs.OpSend, Flags: verbs.SendSignaled,
				Local: verbs.SGE{MR: v.greet, Offset: cn.in.Index * greetingSize, Length: len(cn.in.Advertisement)}}
			if cn.qp.PostSend(&wr) != nil {
				v.drop(cn)
			}
		}
	case verbs.CMDisconnected, verbs.CMConnectError, verbs.CMUnreachable, verbs.CMRejected:
		if cn := v.conns[ev.ID]; cn != nil {
			_ = cn.id.Disconnect() // answers a DREQ; harmless otherwise
			v.drop(cn)
		}
	}
}

// accept creates the connection's QP, posts its receive buffers and accepts.
func (v *verbsServer) accept(id *verbs.CMID, in *instance) error {
	qp, err := id.CreateQP(v.pd, verbs.QPInitAttr{SendCQ: v.cq, RecvCQ: v.cq, MaxSendWR: 16, MaxRecvWR: recvDepth})
	if err != nil {
		return err
	}
	for i := range recvDepth {
		// Every receive shares one buffer: WRITEs with Immediate carry no
		// data, and SENDs are counted, not read.
		if err := qp.PostRecv(uint64(i), verbs.SGE{MR: v.recv, Length: recvSize}); err != nil {
			return err
		}
	}
	if err := id.Accept(verbs.ConnParam{ResponderResources: 16, InitiatorDepth: 16, RNRRetryCount: 7}); err != nil {
		return err
	}
	cn := &vconn{id: id, qp: qp, in: in}
	v.conns[id] = cn
	v.byQPN[qp.QPN()] = cn
	v.c.connections.Add(1)
	return nil
}

// drop forgets a connection and destroys its ID and QP. v.mu is held.
func (v *verbsServer) drop(cn *vconn) {
	delete(v.conns, cn.id)
	delete(v.byQPN, cn.qp.QPN())
	v.c.disconnects.Add(1)
	_ = cn.id.Close()
}

func (v *verbsServer) cqLoop(ctx context.Context) error {
	wcs := make([]verbs.WC, 32)
	for ctx.Err() == nil {
		if err := v.cq.ReqNotify(false); err != nil {
			return fmt.Errorf("collector.Serve: %w", err)
		}
		for {
			n, err := v.cq.Poll(wcs)
			if err != nil {
				return fmt.Errorf("collector.Serve: %w", err)
			}
			if n == 0 {
				break
			}
			v.complete(wcs[:n])
		}
		if _, err := v.ch.Wait(pollEvery); err != nil && !errors.Is(err, verbs.ErrTimeout) {
			return fmt.Errorf("collector.Serve: %w", err)
		}
	}
	return nil
}

func (v *verbsServer) complete(wcs []verbs.WC) {
	v.mu.Lock()
	defer v.mu.Unlock()
	for _, wc := range wcs {
		cn := v.byQPN[wc.QPN]
		if wc.Status != verbs.WCSuccess {
			if wc.Status != verbs.WCFlushErr {
				v.c.errors.Add(1)
			}
			continue
		}
		switch wc.Opcode {
		case verbs.WCSend:
			v.c.advertisements.Add(1)
			continue
		case verbs.WCRecvImm:
			v.c.immediates.Add(1)
			if cn != nil && cn.in.notify != nil {
				_ = cn.in.notify.Notify(wc.Imm) // an ID out of range names no list
			}
		case verbs.WCRecv:
			v.c.receives.Add(1)
		}
		if cn != nil {
			if cn.qp.PostRecv(wc.ID, verbs.SGE{MR: v.recv, Length: recvSize}) != nil {
				v.c.errors.Add(1)
			}
		}
	}
}

func (v *verbsServer) counters() VerbsCounters {
	return VerbsCounters{
		Connections: v.c.connections.Load(), Refused: v.c.refused.Load(), Disconnects: v.c.disconnects.Load(),
		Advertisements: v.c.advertisements.Load(), Immediates: v.c.immediates.Load(),
		Receives: v.c.receives.Load(), Errors: v.c.errors.Load(),
	}
}

// close releases everything in reverse order; serve must have returned.
func (v *verbsServer) close() error {
	v.mu.Lock()
	defer v.mu.Unlock()
	var errs []error
	for _, cn := range v.conns {
		_ = cn.id.Disconnect()
		errs = append(errs, cn.id.Close())
	}
	for id := range v.listeners {
		errs = append(errs, id.Close())
	}
	for _, mr := range v.mrs {
		errs = append(errs, mr.Close())
	}
	errs = append(errs, v.recv.Close(), v.greet.Close(), v.cq.Close(), v.ch.Close(), v.pd.Close())
	if v.anchor != nil {
		errs = append(errs, v.anchor.Close())
	}
	if v.ec != nil {
		errs = append(errs, v.ec.Close())
	}
	return errors.Join(errs...)
}

func (*verbsServer) sendsHeads() bool                  { return false }
func (*verbsServer) start() error                      { return nil }
func (*verbsServer) localAddr() (netip.AddrPort, bool) { return netip.AddrPort{}, false }
func (*verbsServer) halt() error                       { return nil } // serve's context is cancelled
