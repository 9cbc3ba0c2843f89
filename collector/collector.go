// Package collector is the API a DTA collector program holds: it allocates a
// memory region for each primitive instance, serves the regions to a
// translator through the software RoCEv2 target (package
// [github.com/dtakit/dtakit/rocev2/target]) over UDP, advertises each region
// once a translator connects, and hands out the primitive's store or reader
// over the same memory for queries.
//
// A typical program:
//
//	c, _ := collector.New(collector.Config{})
//	kw, _ := c.AddKeyWrite(layout) // instance 0, CM port 40050
//	ki, _ := c.AddKeyIncrement(l2) // instance 1, CM port 40051
//	go c.Serve(ctx)
//	... kw.Query(key, n, keywrite.Plurality) ...
//	c.Close()
//
// Add adds an instance of any registered primitive (package primitive)
// from its Layout and returns it with its primitive.Store; the typed Add
// methods are for the four built in. The regions are served by a backend
// chosen once in New (Config.Backend): the software target or an RDMA NIC.
//
// Instance i listens on CM port CMPort+i; a translator connects to CMPort,
// CMPort+1, ... until a Reject tells it there are no more (docs/DTA-WIRE.md
// section 8.6).
//
// Concurrency: the methods of a Collector are safe for concurrent use. The
// target writes into the regions from the goroutines running Serve while
// queries read them, as a NIC would: a query may see a slot half-written,
// which the primitives' checksums and markers are there to catch. The Go race
// detector reports such reads; a program (or test) that needs a
// happens-before edge calls [Collector.Counters] after the writes it waits
// for. Stores, regions and readers must not be used after Close, which
// unmaps their memory.
package collector

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"sync"

	"github.com/dtakit/dtakit/appendlist"
	"github.com/dtakit/dtakit/dta"
	"github.com/dtakit/dtakit/internal/hugemem"
	"github.com/dtakit/dtakit/keyincr"
	"github.com/dtakit/dtakit/keywrite"
	"github.com/dtakit/dtakit/postcard"
	"github.com/dtakit/dtakit/primitive"
	"github.com/dtakit/dtakit/rocev2/target"
)

// DefaultCMPort is the CM port of a collector's first instance.
const DefaultCMPort = 40050

// SocketBuffer is the receive and send buffer size Start asks for.
const SocketBuffer = 8 << 20

// Errors returned by this package.
var (
	// ErrConfig: a Config field is invalid.
	ErrConfig = errors.New("collector: invalid configuration")
	// ErrRegion: an instance's region cannot be served (too large for the
	// advertisement's 32-bit length, no CM port left).
	ErrRegion = errors.New("collector: invalid region")
	// ErrState: the call does not fit the collector's state (Serve twice,
	// anything after Close).
	ErrState = errors.New("collector: wrong state")
)

// Config configures a Collector.
type Config struct {
	// Addr is the specific address the target binds (the ICRC covers it, so
	// not a wildcard). Zero means 127.0.0.1:4791; port 0 picks a free port
	// at Start (see Addr).
	Addr netip.AddrPort
	// CMPort is the CM port of instance 0; instance i listens on CMPort+i.
	// Zero means DefaultCMPort.
	CMPort uint16
	// MaxQPs bounds the connections the target accepts (0: the target's
	// default).
	MaxQPs int
	// Translators are the addresses (or prefixes) connections are accepted
	// from: the translators' RoCEv2 addresses. A connection request from
	// elsewhere is rejected and counted (RefusedPeer with the software
	// backend, Refused with verbs). Nil means loopback only
	// (target.LoopbackPeers).
	Translators []netip.Prefix
	// MaxHalfOpen bounds the connections of one translator address that
	// wait for their RTU (software backend; 0: target.DefaultMaxHalfOpen).
	MaxHalfOpen int
	// RegionDir, when set, backs each instance's region with a file there
	// (instance-<i>.region, and instance-<i>.region.layout recording the
	// primitive and geometry): on hugetlbfs the regions are hugepages, on
	// tmpfs or disk ordinary pages. A collector restarted with the same
	// RegionDir and the same instances in the same order maps the same
	// files, so what was written before the restart (even a kill -9) is
	// still there; Instance.Restored says so. A file holding another layout
	// is refused (ErrRegion), never reinterpreted.
	RegionDir string
	// ReplyPort, with the software backend, is the UDP port the target's
	// responses go to: 0 for the port the translator sent from (dtakit's
	// translator), 4791 for a translator on an RDMA NIC or kernel stack
	// (target.Config.ReplyPort).
	ReplyPort uint16
	// Backend chooses what serves the regions: the software target (the
	// default) or an RDMA NIC. With BackendVerbs, Addr's address must belong
	// to a netdev with an RDMA device (its port is ignored: RoCEv2 is port
	// 4791), the RDMA CM listens on CMPort+i, and New fails with ErrNoRDMA
	// where there is no such device.
	Backend Backend
	// ReferenceAdvertisement makes every instance send the reference
	// prototype's 16-byte advertisement (VA, length, rkey) instead of
	// dtakit's, for a translator that reads only that one (the prototype's
	// Tofino translator). dtakit's translator refuses such an instance, since
	// it names no primitive.
	ReferenceAdvertisement bool
	// Shards, with the software backend, is the number of sockets the
	// target serves on Addr (SO_REUSEPORT), each read, processed and
	// written by its own goroutine: with a sharded translator, whose shards
	// send from different ports, several connections are then served on
	// several cores (default 1).
	Shards int
}

// Instance describes one primitive instance and its region.
type Instance struct {
	Index     int        // the order it was added in, from 0
	Primitive dta.Opcode // the primitive it serves
	CMPort    uint16     // CMPort + Index
	Restored  bool       // the region's file existed: its contents are from before (Config.RegionDir)
	VA        uint64     // the region's virtual address, as advertised
	Length    uint32     // the region's length in bytes
	RKey      uint32     // the region's rkey
	// Advertisement is the SEND payload a connecting translator receives.
	Advertisement []byte
	// Store is the primitive's store over the region (Add's; the typed
	// Add methods return its typed form).
	Store primitive.Store
}

type instance struct {
	Instance
	mem    *hugemem.Mem
	region *target.Region      // software backend
	notify primitive.Notifier  // a Store woken by WRITEs with Immediate (Append)
	heads  primitive.HeadStore // a Store whose heads follow the advertisement
}

// Collector serves primitive instances to translators.
type Collector struct {
	mu      sync.Mutex
	cfg     Config
	b       backend
	insts   []*instance
	serving bool
	closed  bool
	stop    context.CancelFunc // ends Serve
	served  sync.WaitGroup     // a Serve under way
}

// New returns a collector with cfg. It opens no socket until Start or Serve.
func New(cfg Config) (*Collector, error) {
	if !cfg.Addr.IsValid() {
		cfg.Addr = target.DefaultAddr
	}
	if cfg.CMPort == 0 {
		cfg.CMPort = DefaultCMPort
	}
	var b backend
	switch cfg.Backend {
	case BackendSoftware:
		t, err := target.New(target.Config{Addr: cfg.Addr, MaxQPs: cfg.MaxQPs, ReplyPort: cfg.ReplyPort, Peers: cfg.Translators, MaxHalfOpen: cfg.MaxHalfOpen})
		if err != nil {
			return nil, fmt.Errorf("collector.New: %w: %w", ErrConfig, err)
		}
		b = &software{t: t, addr: cfg.Addr, shards: max(cfg.Shards, 1)}
	case BackendVerbs:
		vb, err := newVerbsServer(cfg.Addr.Addr(), cfg.Translators)
		if err != nil {
			return nil, fmt.Errorf("collector.New: %w", err)
		}
		b = vb
	default:
		return nil, fmt.Errorf("collector.New: %w: backend %v", ErrConfig, cfg.Backend)
	}
	return &Collector{cfg: cfg, b: b}, nil
}

// Add adds an instance of layout l, of any registered primitive, and
// returns it with its Store over the served memory. The region allows
// remote atomics only when l.Atomic, WRITEs otherwise. Instance i is
// served on CM port CMPort+i.
func (c *Collector) Add(l primitive.Layout) (Instance, error) {
	if l == nil {
		return Instance{}, fmt.Errorf("collector.Add: %w: nil layout", ErrConfig)
	}
	op := "Add"
	if t, ok := l.Kind().(primitive.Titled); ok {
		// An error says the same whichever way the instance was added
		// (the collector daemon's configuration errors).
		op += t.Title()
	}
	in, err := c.add(op, l)
	if err != nil {
		return Instance{}, err
	}
	return in.Instance, nil
}

// addTyped adds the instance of a built-in primitive whose geometry is geo.
func (c *Collector) addTyped(op string, prim dta.Opcode, geo []byte, err error) (primitive.Store, error) {
	if err != nil {
		return nil, fmt.Errorf("collector.%s: %w", op, err)
	}
	l, err := primitive.Parse(prim, geo)
	if err != nil {
		return nil, fmt.Errorf("collector.%s: %w", op, err)
	}
	in, err := c.add(op, l)
	if err != nil {
		return nil, err
	}
	return in.Store, nil
}

// AddKeyWrite adds a Key-Write instance with layout l and returns its store
// over the served memory.
func (c *Collector) AddKeyWrite(l keywrite.Layout) (*keywrite.Store, error) {
	geo, err := l.AppendBinary(nil)
	s, err := c.addTyped("AddKeyWrite", dta.OpKeyWrite, geo, err)
	if err != nil {
		return nil, err
	}
	ks, _ := keywrite.StoreOf(s)
	return ks, nil
}

// AddKeyIncrement adds a Key-Increment instance with layout l and returns
// its store over the served memory. The region allows remote atomics only.
func (c *Collector) AddKeyIncrement(l keyincr.Layout) (*keyincr.Store, error) {
	geo, err := l.AppendBinary(nil)
	s, err := c.addTyped("AddKeyIncrement", dta.OpKeyIncrement, geo, err)
	if err != nil {
		return nil, err
	}
	ks, _ := keyincr.StoreOf(s)
	return ks, nil
}

// AddPostcard adds a Postcarding instance with layout l and returns its
// store over the served memory (query it with a postcard.Table of the same
// layout). values, when given, are the hop values the instance holds (its
// Table's): the advertisement carries them (postcard.NewValueSet) and
// translators refuse postcards of any other value, NACKing them with
// reason Rejected, instead of writing paths no query would find.
func (c *Collector) AddPostcard(l postcard.Layout, values ...uint32) (*postcard.Store, error) {
	geo, err := l.AppendGeometry(nil, postcard.NewValueSet(values))
	s, err := c.addTyped("AddPostcard", dta.OpPostcard, geo, err)
	if err != nil {
		return nil, err
	}
	ps, _ := postcard.StoreOf(s)
	return ps, nil
}

// AddAppend adds an Append instance with layout l and returns its region;
// Store.Reader gives a reader per list. An RDMA WRITE with Immediate into
// the region notifies the list its immediate data names (Store.Notify), so
// Reader.Wait and ReadWait wake up.
func (c *Collector) AddAppend(l appendlist.Layout) (*appendlist.Store, error) {
	geo, err := l.AppendBinary(nil)
	s, err := c.addTyped("AddAppend", dta.OpAppend, geo, err)
	if err != nil {
		return nil, err
	}
	as, _ := appendlist.StoreOf(s)
	return as, nil
}

// add allocates, wraps, registers, advertises and listens for one instance.
func (c *Collector) add(op string, l primitive.Layout) (*instance, error) {
	if err := l.Validate(); err != nil {
		return nil, fmt.Errorf("collector.%s: %w", op, err)
	}
	geometry, err := l.AppendBinary(nil)
	if err != nil {
		return nil, fmt.Errorf("collector.%s: %w", op, err)
	}
	prim, size := l.Kind().Opcode(), l.RegionSize()
	if size == 0 || size > math.MaxUint32 {
		return nil, fmt.Errorf("collector.%s: %w: region of %d bytes (the advertisement holds 1..2^32-1)", op, ErrRegion, size)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil, fmt.Errorf("collector.%s: %w: closed", op, ErrState)
	}
	idx := len(c.insts)
	port := int(c.cfg.CMPort) + idx
	if port > math.MaxUint16 {
		return nil, fmt.Errorf("collector.%s: %w: no CM port left above %d", op, ErrRegion, c.cfg.CMPort)
	}
	// Whole 8-byte words, so that a region of counters is word-aligned to
	// its end; hugemem memory starts page-aligned.
	mem, restored, err := c.regionMem(idx, int((size+7)&^7), prim, geometry)
	if err != nil {
		return nil, fmt.Errorf("collector.%s: %w", op, err)
	}
	b := mem.Bytes()[:size:size]
	in := &instance{mem: mem}
	st, err := l.NewStore(b)
	if err != nil {
		mem.Close()
		return nil, fmt.Errorf("collector.%s: %w", op, err)
	}
	in.notify, _ = st.(primitive.Notifier)
	in.heads, _ = st.(primitive.HeadStore)
	access := target.RemoteWrite
	if l.Atomic() {
		access = target.RemoteAtomic
	}
	va, rkey, err := c.b.register(in, b, access)
	if err != nil {
		c.b.unregister(in)
		mem.Close()
		return nil, fmt.Errorf("collector.%s: %w", op, err)
	}
	in.Instance = Instance{Index: idx, Primitive: prim, CMPort: uint16(port), Restored: restored, VA: va, Length: uint32(size), RKey: rkey, Store: st}
	if err := c.advertise(in, geometry); err != nil {
		c.b.unregister(in)
		mem.Close()
		return nil, fmt.Errorf("collector.%s: %w", op, err)
	}
	c.insts = append(c.insts, in)
	return in, nil
}

// advertise builds the instance's advertisement and listens on its CM
// port.
func (c *Collector) advertise(in *instance, geometry []byte) error {
	adv := dta.Advertisement{VA: in.VA, Length: in.Length, RKey: in.RKey, Primitive: in.Primitive, Geometry: geometry}
	if c.cfg.ReferenceAdvertisement {
		adv.Primitive, adv.Geometry = 0, nil
	}
	// A connecting translator learns where a resuming primitive's state
	// stands (Append: where each list goes on, so that one restarted does
	// not write over what readers have not read, or behind where they
	// are), when the backend sends it.
	if in.heads != nil && adv.Primitive != 0 && c.b.sendsHeads() {
		hs, err := in.heads.Heads(nil)
		adv.HeadsFollow = err == nil && len(hs) <= dta.MaxHeadLists
	}
	if !adv.HeadsFollow {
		in.heads = nil
	}
	var err error
	if in.Advertisement, err = adv.AppendTo(nil); err != nil {
		return err
	}
	return c.b.listen(in, in.CMPort)
}

// regionMem allocates instance idx's memory, or maps its file in
// Config.RegionDir, checking that a file from before holds the same layout.
func (c *Collector) regionMem(idx, size int, prim dta.Opcode, geometry []byte) (*hugemem.Mem, bool, error) {
	if c.cfg.RegionDir == "" {
		m, err := hugemem.Alloc(size)
		return m, false, err
	}
	path := filepath.Join(c.cfg.RegionDir, fmt.Sprintf("instance-%d.region", idx))
	layout := append([]byte{byte(prim)}, geometry...)
	m, existed, err := hugemem.OpenFile(path, size)
	if err != nil {
		return nil, false, err
	}
	if existed {
		old, err := os.ReadFile(path + ".layout")
		if err != nil || !bytes.Equal(old, layout) {
			m.Close()
			return nil, false, fmt.Errorf("%w: %s holds another layout than instance %d's (%v); remove it to start afresh", ErrRegion, path, idx, prim)
		}
		return m, true, nil
	}
	if err := os.WriteFile(path+".layout", layout, 0o600); err != nil {
		m.Close()
		return nil, false, err
	}
	return m, false, nil
}

// onRecv notifies the instance's Store of a WRITE with Immediate. It runs
// inside the target's Process (it must not block; Notify does not).
func (in *instance) onRecv(_ *target.QP, cp target.Completion) {
	if cp.Write && cp.HasImm {
		_ = in.notify.Notify(cp.Imm) // an ID out of range names no list: nothing to wake
	}
}

// followUp returns the SENDs of the instance's heads, as they are in
// memory now (a translator connects: dta.ListHeads).
func (in *instance) followUp() [][]byte {
	hs, err := in.heads.Heads(nil)
	if err != nil {
		return nil
	}
	var out [][]byte
	for i := 0; i < len(hs); i += dta.MaxHeadsPerSend {
		out = append(out, dta.AppendListHeads(nil, uint32(i), hs[i:min(i+dta.MaxHeadsPerSend, len(hs))]))
	}
	return out
}

// Instances returns the instances in the order they were added.
func (c *Collector) Instances() []Instance {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]Instance, len(c.insts))
	for i, in := range c.insts {
		out[i] = in.Instance
		out[i].Advertisement = append([]byte(nil), in.Advertisement...)
	}
	return out
}

// Start binds the target's UDP socket, so that Addr is known before Serve.
// Serve calls it when it was not called.
func (c *Collector) Start() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.start()
}

func (c *Collector) start() error {
	if c.closed {
		return fmt.Errorf("collector.Start: %w: closed", ErrState)
	}
	if err := c.b.start(); err != nil {
		return fmt.Errorf("collector.Start: %w", err)
	}
	return nil
}

// Addr returns the target's address: the configured one, with the bound
// port once Start has run.
func (c *Collector) Addr() netip.AddrPort {
	c.mu.Lock()
	defer c.mu.Unlock()
	if a, ok := c.b.localAddr(); ok {
		return a
	}
	return c.cfg.Addr
}

// Serve serves the instances until ctx is done or Close is called, and
// returns nil then; otherwise the socket's error.
func (c *Collector) Serve(ctx context.Context) error {
	c.mu.Lock()
	if err := c.start(); err != nil {
		c.mu.Unlock()
		return err
	}
	if c.serving {
		c.mu.Unlock()
		return fmt.Errorf("collector.Serve: %w: already serving", ErrState)
	}
	c.serving = true
	ctx, c.stop = context.WithCancel(ctx)
	c.served.Add(1)
	defer c.served.Done()
	c.mu.Unlock()
	err := c.b.serve(ctx)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.serving = false
	if c.closed && errors.Is(err, net.ErrClosed) {
		return nil
	}
	return err
}

// Counters returns the software target's counters (zero with the verbs
// backend, where the NIC does the target's work). It also orders the caller
// after every write the counters include (see the package doc).
func (c *Collector) Counters() target.Counters {
	if t := c.Target(); t != nil {
		return t.Counters()
	}
	return target.Counters{}
}

// VerbsCounters returns the verbs backend's counters (zero with the
// software backend).
func (c *Collector) VerbsCounters() VerbsCounters {
	if vb, ok := c.b.(*verbsServer); ok {
		return vb.counters()
	}
	return VerbsCounters{}
}

// Target returns the software target serving the instances, for its
// counters and lower-level control; nil with the verbs backend.
func (c *Collector) Target() *target.Target {
	if s, ok := c.b.(*software); ok {
		return s.t
	}
	return nil
}

// Close stops serving, closes the socket and the target, and unmaps every
// region: the stores, regions and readers handed out must not be used
// afterwards. Serve returns nil.
func (c *Collector) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return fmt.Errorf("collector.Close: %w: closed already", ErrState)
	}
	c.closed = true
	if c.stop != nil {
		c.stop()
	}
	errs := []error{c.b.halt()}
	insts := c.insts
	c.mu.Unlock()
	// Serve's loops must be gone before the backend frees what they use
	// and the regions are unmapped.
	c.served.Wait()
	errs = append(errs, c.b.close())
	for _, in := range insts {
		errs = append(errs, in.mem.Close())
	}
	return errors.Join(errs...)
}
