// Package target is a software RoCEv2 target: the responder side of RC queue
// pairs, over memory regions registered from ordinary Go byte slices, with the
// passive side of the RDMA connection manager. It is what a DTA collector
// runs when no RDMA NIC is present: a translator connects to it and writes
// into its regions exactly as it would into a NIC's.
//
// The target is driven in memory ([Target.Process] takes received datagrams
// and appends the datagrams to send; [Target.Tick] runs the timers) or over a
// UDP socket ([Target.Serve], batched with recvmmsg and sendmmsg). RoCEv2
// packets travel as UDP payloads; their ICRC covers the socket addresses
// (package rocev2, [rocev2.DatagramICRC]), so the target must know its own
// specific address.
//
// Each queue pair is an [rc.Responder] for its peer's requests, an
// [rc.Requester] for the target's own SENDs and, when the CM made it, a
// [cm.Acceptor]: socket-free cores that follow package rc's conventions
// (time as Unix nanoseconds, datagrams written into the caller's buffer, the
// Output's, and returned as slices of it). The target
// executes the requests and holds the sockets; [Target.Process] and
// [Target.Tick] take a time.Time and convert it once.
//
// No frame, however hostile, makes the target write outside a registered
// region: every RDMA operation is checked against the region its rkey names,
// with overflow-safe arithmetic, before a byte moves. Bad input is answered
// as a NIC answers it (a NAK) or dropped, and always counted ([Counters]).
// Connections are accepted only from [Config.Peers] (loopback by default),
// a few at a time per address, and a queue pair takes requests only from
// its peer's address. docs/DTA-WIRE.md section 8.6 documents every
// decision.
package target

import (
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/dtakit/dtakit/rocev2"
)

// Errors returned by this package's API. Bad packets are never errors: they
// are answered with NAKs or dropped, and counted.
var (
	// ErrConfig: a Config field is invalid (a wildcard or invalid address, an
	// unsupported MTU).
	ErrConfig = errors.New("target: invalid configuration")
	// ErrRegion: a region cannot be registered (empty, misaligned for
	// atomics) or is not registered.
	ErrRegion = errors.New("target: invalid region")
	// ErrListen: a CM port is already listened on, or is not.
	ErrListen = errors.New("target: invalid listener")
	// ErrQP: a queue pair cannot be created, or cannot take the request (its
	// send queue is full, it is not connected, it was destroyed).
	ErrQP = errors.New("target: queue pair unavailable")
	// ErrClosed: the target was closed.
	ErrClosed = errors.New("target: closed")
)

// Access is a set of remote access rights of a region.
type Access uint8

// Access rights. A region always allows local access by its owner.
const (
	// RemoteWrite allows RDMA WRITE into the region.
	RemoteWrite Access = 1 << iota
	// RemoteAtomic allows FETCH_ADD and COMPARE_SWAP on the region.
	RemoteAtomic
)

// DefaultAddr is the target's default address: loopback, port 4791.
var DefaultAddr = netip.AddrPortFrom(netip.AddrFrom4([4]byte{127, 0, 0, 1}), rocev2.UDPPort)

// Timing of the CM and of the target's own SENDs (the contract of issue 7).
const (
	// RetryInterval is the wait before the target resends a REP or a DREQ,
	// and the floor of its SENDs' retransmission timeout (RFC 6298, the
	// timeout before a round trip was measured).
	RetryInterval = 100 * time.Millisecond
	// MaxTries is the number of times such a message is sent before the
	// target gives up on it (for SENDs, on those unacknowledged).
	MaxTries = 5
	// MaxPendingSends bounds the SENDs a queue pair holds unacknowledged.
	MaxPendingSends = 16
	// MaxPostedRecvs bounds the receive buffers posted to a queue pair.
	MaxPostedRecvs = 64
)

// Config configures a Target.
type Config struct {
	// Addr is the target's specific address: the destination of every
	// datagram it receives, as the ICRC covers it. Zero means DefaultAddr.
	// Serve replaces it with its socket's address.
	Addr netip.AddrPort
	// MaxQPs bounds the queue pairs (0 means 1024); a REQ beyond it is
	// rejected with reason 3 (no resources).
	MaxQPs int
	// IdleTimeout reaps a connected QP that has received nothing for that
	// long (0: DefaultIdleTimeout; negative: never), so that connections
	// whose peer vanished do not hold the target's QPs forever.
	IdleTimeout time.Duration
	// ReplyPort is the UDP port responses and CM messages go to. Zero
	// sends them to the port the peer sent from, as dtakit's translator,
	// which binds any port, expects; rocev2.UDPPort (4791) is what the RoCEv2
	// annex says and what RDMA NICs and kernel stacks listen on.
	ReplyPort uint16
	// Peers are the addresses CM connections are accepted from: a
	// translator's RoCEv2 address, or a prefix of them. A REQ from
	// elsewhere is refused with a REJ (reason 28, consumer) before any
	// state is kept, and counted (RefusedPeer). Nil means loopback only
	// (LoopbackPeers); a QP made by NewQP names its peer itself.
	Peers []netip.Prefix
	// MaxHalfOpen bounds the connections from one peer address that wait
	// for their RTU (0 means DefaultMaxHalfOpen): a REQ beyond it is
	// rejected (reason 3, no resources) and counted (RefusedHalfOpen), so
	// a flood of REQs from one address holds that many queue pairs at
	// most, each for MaxTries REPs.
	MaxHalfOpen int
}

// LoopbackPeers are Config.Peers' default: 127.0.0.0/8 and ::1.
var LoopbackPeers = []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("::1/128")}

// DefaultMaxHalfOpen is Config.MaxHalfOpen's default: more than the queue
// pairs a translator opens to one collector at once (one per instance and
// shard, a few instances) need only while they connect.
const DefaultMaxHalfOpen = 8

// Target is a software RoCEv2 target. Its methods are safe for concurrent
// use. Process runs on the calling goroutine and several may run at once:
// each queue pair has its own lock, and the tables that name queue pairs
// and regions are read without one, so packets of different queue pairs
// are handled in parallel. The connection manager, Tick and the methods
// that change the tables serialise on the target's lock.
type Target struct {
	mu          sync.Mutex // guards the fields below up to c, and the CM; taken before any QP's
	maxQPs      int
	reply       uint16 // Config.ReplyPort
	idleTimeout time.Duration
	regions     map[uint32]*Region // by rkey
	nextVA      uint64
	qps         map[uint32]*QP // by QPN
	qpsChanged  bool           // qps differs from qpTab: unlock publishes it
	byComm      map[uint32]*QP // by the target's local comm ID
	byReq       map[reqKey]*QP // by the peer's comm ID and address
	listen      map[uint16]*listener
	peers       []netip.Prefix // Config.Peers
	maxHalfOpen int
	udPSN       rocev2.PSN // PSN of the target's QP 1 sends
	c           Counters   // the CM's, the timers', each batch's and destroyed QPs' counts

	// What the data path reads without the lock: copies of the tables,
	// replaced (never changed) under it.
	addr   atomic.Pointer[netip.AddrPort]
	closed atomic.Bool
	qpTab  atomic.Pointer[map[uint32]*QP]
	regTab atomic.Pointer[map[uint32]*Region]
	sent   atomic.Uint64 // Counters.DatagramsSent

	workers sync.Pool // *worker: a Process call's scratch
}

// worker is the scratch state of one Process call: per-goroutine, so that
// parallel calls share nothing they write on the data path.
type worker struct {
	c      Counters       // this batch's counts of datagrams refused before a QP
	pkt    rocev2.Packet  // the datagram being decoded
	dst    netip.AddrPort // the target's address
	icrc   rocev2.ICRCCache
	region *Region // the region of the last prefetch
	lastQP *QP
}

type reqKey struct {
	commID uint32
	from   netip.AddrPort
}

// New returns a target with cfg. It opens no socket (see Serve).
func New(cfg Config) (*Target, error) {
	if !cfg.Addr.IsValid() {
		cfg.Addr = DefaultAddr
	}
	if err := checkAddr(cfg.Addr.Addr()); err != nil {
		return nil, fmt.Errorf("target.New: %w", err)
	}
	if cfg.MaxQPs <= 0 {
		cfg.MaxQPs = 1024
	}
	if cfg.Peers == nil {
		cfg.Peers = LoopbackPeers
	}
	for _, p := range cfg.Peers {
		if !p.IsValid() {
			return nil, fmt.Errorf("target.New: %w: peer prefix %v", ErrConfig, p)
		}
	}
	if cfg.MaxHalfOpen <= 0 {
		cfg.MaxHalfOpen = DefaultMaxHalfOpen
	}
	switch {
	case cfg.IdleTimeout == 0:
		cfg.IdleTimeout = DefaultIdleTimeout
	case cfg.IdleTimeout < 0:
		cfg.IdleTimeout = 0
	}
	var b [8]byte
	rand.Read(b[:])
	// A synthetic VA space: a random page-aligned base in [2^40, 2^46).
	base := (1<<40 | binary.LittleEndian.Uint64(b[:])&(1<<46-1)) &^ (pageSize - 1)
	t := &Target{
		maxQPs:      cfg.MaxQPs,
		reply:       cfg.ReplyPort,
		idleTimeout: cfg.IdleTimeout,
		regions:     make(map[uint32]*Region),
		nextVA:      base,
		qps:         make(map[uint32]*QP),
		byComm:      make(map[uint32]*QP),
		byReq:       make(map[reqKey]*QP),
		listen:      make(map[uint16]*listener),
		peers:       append([]netip.Prefix(nil), cfg.Peers...),
		maxHalfOpen: cfg.MaxHalfOpen,
		udPSN:       rocev2.PSN(random32() & rocev2.PSNMask),
	}
	t.addr.Store(&cfg.Addr)
	t.qpTab.Store(&map[uint32]*QP{})
	t.regTab.Store(&map[uint32]*Region{})
	t.workers.New = func() any { return new(worker) }
	return t, nil
}

// unlock releases t.mu, first publishing the queue pair table to the data
// path if it changed.
func (t *Target) unlock() {
	if t.qpsChanged {
		t.qpsChanged = false
		tab := maps.Clone(t.qps)
		t.qpTab.Store(&tab)
	}
	t.mu.Unlock()
}

// local returns the target's address.
func (t *Target) local() netip.AddrPort { return *t.addr.Load() }

// DefaultIdleTimeout is Config.IdleTimeout's default: long enough for any
// pause of a live translator, which in any case reconnects when the target
// disconnects an idle QP.
const DefaultIdleTimeout = 10 * time.Minute

func (t *Target) countTruncated() {
	t.mu.Lock()
	t.c.Truncated++
	t.unlock()
}

// replyTo returns where a response to a datagram from src goes
// (Config.ReplyPort).
func (t *Target) replyTo(src netip.AddrPort) netip.AddrPort {
	if t.reply != 0 {
		return netip.AddrPortFrom(src.Addr(), t.reply)
	}
	return src
}

func checkAddr(a netip.Addr) error {
	if !a.IsValid() || a.IsUnspecified() {
		return fmt.Errorf("%w: address %v is not a specific address (the ICRC covers it)", ErrConfig, a)
	}
	return nil
}

// Addr returns the target's address.
func (t *Target) Addr() netip.AddrPort { return t.local() }

// Close destroys every queue pair and region registration and stops
// listeners. Memory of the regions is the caller's again once Close
// returns: the target never touches it afterwards. Close does not send
// DREQs (see Disconnect).
func (t *Target) Close() error {
	t.mu.Lock()
	defer t.unlock()
	if t.closed.Load() {
		return ErrClosed
	}
	t.closed.Store(true)
	for _, r := range t.regions {
		r.dead.Store(true)
	}
	// A packet being applied holds its QP's lock: once each is taken, none
	// is, and none will be.
	for _, qp := range t.qps {
		qp.mu.Lock()
		qp.state = qpDestroyed
		qp.mu.Unlock()
	}
	clear(t.regions)
	t.regTab.Store(&map[uint32]*Region{})
	clear(t.qps)
	t.qpsChanged = true
	clear(t.byComm)
	clear(t.byReq)
	clear(t.listen)
	return nil
}

// random32 returns 32 unpredictable bits.
func random32() uint32 {
	var b [4]byte
	rand.Read(b[:]) // never fails (crypto/rand, Go 1.24 and later)
	return binary.LittleEndian.Uint32(b[:])
}

// Counters is a snapshot of what the target has seen and done. Packets are
// datagrams; a message is one SEND or RDMA WRITE of one or more packets.
type Counters struct {
	Frames uint64 // datagrams received
	Bytes  uint64 // their bytes
	// DatagramsSent counts the datagrams Serve sent: ACKs, NAKs, CM messages and
	// the target's own SEND packets (what Process and Tick output).
	DatagramsSent uint64

	BadICRC   uint64 // dropped: ICRC mismatch
	Malformed uint64 // dropped: not a packet this target decodes (truncated, reserved opcode, bad length) or a CM MAD it refuses
	Unknown   uint64 // dropped: no such QP, a P_Key other than 0xFFFF, or a non-RC opcode
	Foreign   uint64 // dropped: a packet to a QP from an address other than its peer's (a NIC's responder checks the remote address too)
	Flushed   uint64 // dropped: a packet to a QP in the error state or disconnecting

	WritePackets uint64 // RDMA WRITE packets applied
	WriteBytes   uint64 // their payload bytes
	Sends        uint64 // SEND messages received into posted buffers
	Atomics      uint64 // FETCH_ADD and COMPARE_SWAP executed
	Completions  uint64 // receive completions delivered (SEND, WRITE with Immediate)
	Duplicates   uint64 // duplicate requests, re-acknowledged and not executed
	StaleAtomics uint64 // among them, atomics too old for a saved result, answered with a plain ACK
	OutOfOrder   uint64 // requests ahead of the expected PSN (the first after a gap gets a NAK, the rest are dropped)

	ACKs        uint64 // ACK packets sent
	AtomicACKs  uint64 // ATOMIC ACK packets sent (duplicates answered included)
	NAKSequence uint64 // NAK PSN sequence error sent
	NAKInvalid  uint64 // NAK invalid request sent
	NAKAccess   uint64 // NAK remote access error sent
	RNRNAKs     uint64 // RNR NAKs sent (a SEND with no posted receive buffer)

	SendPackets     uint64 // packets of the target's own SENDs sent, retransmissions included
	SendRetransmits uint64 // retransmissions among them
	SendFailures    uint64 // SENDs given up after MaxTries, or NAKed fatally
	PeerNAKs        uint64 // NAKs received for the target's SENDs

	CMReceived  uint64 // CM MADs received
	Connections uint64 // connections established (RTU or first packet)
	Rejects     uint64 // REJs sent
	CMTimeouts  uint64 // connections dropped: no RTU after MaxTries REPs, or no DREP after MaxTries DREQs
	Disconnects uint64 // connections ended by a DREQ from either side
	Replaced    uint64 // connections dropped for a new one from the same peer address and port to the same listener
	Reaped      uint64 // QPs destroyed idle past IdleTimeout, in error past ErrorLinger, or evicted for a new connection
	ForeignCM   uint64 // RTU, DREQ, DREP or REJ for a connection from an address other than its peer's, ignored
	RefusedPeer uint64 // REQs from an address outside Config.Peers, rejected
	HalfOpen    uint64 // REQs beyond Config.MaxHalfOpen connections of one address waiting for their RTU, rejected
	Truncated   uint64 // datagrams longer than the read buffer (marked Truncated), dropped unread
}

// Counters returns a snapshot of the counters. It takes the target's lock
// and each queue pair's, so memory written by the packets it counts can be
// read safely (with the Go memory model's happens-before) after it returns.
func (t *Target) Counters() Counters {
	t.mu.Lock()
	defer t.unlock()
	c := t.c
	c.DatagramsSent = t.sent.Load()
	for _, qp := range t.qps {
		qp.mu.Lock()
		c.add(qp.counters())
		qp.mu.Unlock()
	}
	return c
}

// add adds o's counts to c's (TestCountersAdd checks that it adds every
// field).
func (c *Counters) add(o *Counters) {
	c.Frames += o.Frames
	c.DatagramsSent += o.DatagramsSent
	c.Bytes += o.Bytes
	c.BadICRC += o.BadICRC
	c.Malformed += o.Malformed
	c.Unknown += o.Unknown
	c.Foreign += o.Foreign
	c.Flushed += o.Flushed
	c.WritePackets += o.WritePackets
	c.WriteBytes += o.WriteBytes
	c.Sends += o.Sends
	c.Atomics += o.Atomics
	c.Completions += o.Completions
	c.Duplicates += o.Duplicates
	c.StaleAtomics += o.StaleAtomics
	c.OutOfOrder += o.OutOfOrder
	c.ACKs += o.ACKs
	c.AtomicACKs += o.AtomicACKs
	c.NAKSequence += o.NAKSequence
	c.NAKInvalid += o.NAKInvalid
	c.NAKAccess += o.NAKAccess
	c.RNRNAKs += o.RNRNAKs
	c.SendPackets += o.SendPackets
	c.SendRetransmits += o.SendRetransmits
	c.SendFailures += o.SendFailures
	c.PeerNAKs += o.PeerNAKs
	c.CMReceived += o.CMReceived
	c.Connections += o.Connections
	c.Rejects += o.Rejects
	c.CMTimeouts += o.CMTimeouts
	c.Disconnects += o.Disconnects
	c.Replaced += o.Replaced
	c.Reaped += o.Reaped
	c.ForeignCM += o.ForeignCM
	c.RefusedPeer += o.RefusedPeer
	c.HalfOpen += o.HalfOpen
	c.Truncated += o.Truncated
}

const pageSize = 4096

// Region is a registered memory region: caller-provided memory that peers
// address with a virtual address and the region's rkey.
type Region struct {
	t      *Target
	mem    []byte
	va     uint64
	rkey   uint32
	access Access
	dead   atomic.Bool
	race   raceLock // serialises writes under the race detector (see write)
}

// VA returns the virtual address of the region's first byte.
func (r *Region) VA() uint64 { return r.va }

// Len returns the region's length in bytes.
func (r *Region) Len() int { return len(r.mem) }

// RKey returns the remote key peers present to access the region.
func (r *Region) RKey() uint32 { return r.rkey }

// Access returns the region's remote access rights.
func (r *Region) Access() Access { return r.access }

// Bytes returns the region's memory (the slice given to Register).
func (r *Region) Bytes() []byte { return r.mem }

// Register registers mem as a region with the given remote access rights.
// The region gets a virtual address in the target's synthetic VA space
// (page-aligned, never reused, unrelated to mem's real address) and a
// random, unique, non-zero rkey. A region allowing RemoteAtomic needs mem to
// start at an 8-byte aligned address, so atomics can use sync/atomic on it.
// mem must not be resized or freed until Deregister (or Close) returns; the
// target writes into it from the goroutines running Process or Serve.
func (t *Target) Register(mem []byte, access Access) (*Region, error) {
	if len(mem) == 0 {
		return nil, fmt.Errorf("target.Register: %w: empty memory", ErrRegion)
	}
	if uint64(len(mem)) > 1<<40 {
		return nil, fmt.Errorf("target.Register: %w: %d bytes, more than 2^40", ErrRegion, len(mem))
	}
	if access&RemoteAtomic != 0 && uintptr(unsafe.Pointer(&mem[0]))&7 != 0 {
		return nil, fmt.Errorf("target.Register: %w: memory not 8-byte aligned, needed for remote atomics", ErrRegion)
	}
	t.mu.Lock()
	defer t.unlock()
	if t.closed.Load() {
		return nil, fmt.Errorf("target.Register: %w", ErrClosed)
	}
	r := &Region{t: t, mem: mem, va: t.nextVA, access: access}
	// One unmapped guard page between regions, so an address past one
	// region's end belongs to no region.
	t.nextVA += (uint64(len(mem)) + 2*pageSize - 1) &^ (pageSize - 1)
	for {
		r.rkey = random32()
		if _, used := t.regions[r.rkey]; !used && r.rkey != 0 {
			break
		}
	}
	t.regions[r.rkey] = r
	tab := maps.Clone(t.regions)
	t.regTab.Store(&tab)
	return r, nil
}

// Deregister removes r: once it returns, no packet reaches r's memory, and
// requests naming its rkey get NAK remote access error.
func (t *Target) Deregister(r *Region) error {
	t.mu.Lock()
	defer t.unlock()
	if r == nil || r.t != t || r.dead.Load() {
		return fmt.Errorf("target.Deregister: %w: not registered", ErrRegion)
	}
	r.dead.Store(true)
	delete(t.regions, r.rkey)
	tab := maps.Clone(t.regions)
	t.regTab.Store(&tab)
	// A write into r checked it alive under its QP's lock: once each lock
	// is taken, no such write is under way.
	for _, qp := range t.qps {
		qp.mu.Lock()
		//lint:ignore SA2001 an empty critical section is the barrier
		qp.mu.Unlock()
	}
	return nil
}

// lookup returns the live region with rkey, or nil. qp's lock is held; qp
// caches the last region it used.
func (t *Target) lookup(qp *QP, rkey uint32) *Region {
	if r := qp.lastRegion; r != nil && r.rkey == rkey && !r.dead.Load() {
		return r
	}
	r := (*t.regTab.Load())[rkey]
	if r != nil {
		qp.lastRegion = r
	}
	return r
}

// write copies b into r's memory at off (checked in bounds). Two queue pairs
// may write the same bytes at once, as two engines of a NIC may: the
// primitives' checksums catch a torn slot. Only the race detector, which
// cannot tell that designed overlap from a bug, gets the writes serialised.
func (r *Region) write(off uint64, b []byte) {
	r.race.lock()
	copy(r.mem[off:off+uint64(len(b))], b)
	r.race.unlock()
}

// span returns the offset in r of n bytes at va, and whether they lie
// inside r. The arithmetic cannot overflow: va-r.va is computed only when
// va >= r.va, and compared with the room left after n.
func (r *Region) span(va uint64, n uint64) (uint64, bool) {
	if va < r.va {
		return 0, false
	}
	off := va - r.va
	size := uint64(len(r.mem))
	if n > size || off > size-n {
		return 0, false
	}
	return off, true
}
