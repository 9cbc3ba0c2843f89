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
	"github.com/dtakit/dtakit/internal/udpio"
	"github.com/dtakit/dtakit/keyincr"
	"github.com/dtakit/dtakit/keywrite"
	"github.com/dtakit/dtakit/postcard"
	"github.com/dtakit/dtakit/rocev2"
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
}

type instance struct {
	Instance
	mem    *hugemem.Mem
	region *target.Region    // software backend
	list   *appendlist.Store // Append instances: notified on WRITE with Immediate
}

// Collector serves primitive instances to translators.
type Collector struct {
	mu      sync.Mutex
	cfg     Config
	t       *target.Target // software backend
	vb      *verbsServer   // verbs backend
	insts   []*instance
	uc      *net.UDPConn
	serving bool
	more    []*net.UDPConn // the sockets after uc, with Shards > 1
	closed  bool
	stop    context.CancelFunc // ends a verbs Serve
	served  sync.WaitGroup     // a verbs Serve under way
}

// New returns a collector with cfg. It opens no socket until Start or Serve.
func New(cfg Config) (*Collector, error) {
	if !cfg.Addr.IsValid() {
		cfg.Addr = target.DefaultAddr
	}
	if cfg.CMPort == 0 {
		cfg.CMPort = DefaultCMPort
	}
	switch cfg.Backend {
	case BackendSoftware:
	case BackendVerbs:
		vb, err := newVerbsServer(cfg.Addr.Addr(), cfg.Translators)
		if err != nil {
			return nil, fmt.Errorf("collector.New: %w", err)
		}
		return &Collector{cfg: cfg, vb: vb}, nil
	default:
		return nil, fmt.Errorf("collector.New: %w: backend %v", ErrConfig, cfg.Backend)
	}
	t, err := target.New(target.Config{Addr: cfg.Addr, MaxQPs: cfg.MaxQPs, ReplyPort: cfg.ReplyPort, Peers: cfg.Translators, MaxHalfOpen: cfg.MaxHalfOpen})
	if err != nil {
		return nil, fmt.Errorf("collector.New: %w: %w", ErrConfig, err)
	}
	return &Collector{cfg: cfg, t: t}, nil
}

// AddKeyWrite adds a Key-Write instance with layout l and returns its store
// over the served memory.
func (c *Collector) AddKeyWrite(l keywrite.Layout) (*keywrite.Store, error) {
	geo, err := l.AppendBinary(nil)
	if err != nil {
		return nil, fmt.Errorf("collector.AddKeyWrite: %w", err)
	}
	var s *keywrite.Store
	_, err = c.add("AddKeyWrite", dta.OpKeyWrite, l.RegionSize(), target.RemoteWrite, geo,
		func(_ *instance, mem []byte) (err error) {
			s, err = keywrite.NewStore(l, mem)
			return err
		})
	return s, err
}

// AddKeyIncrement adds a Key-Increment instance with layout l and returns
// its store over the served memory. The region allows remote atomics only.
func (c *Collector) AddKeyIncrement(l keyincr.Layout) (*keyincr.Store, error) {
	geo, err := l.AppendBinary(nil)
	if err != nil {
		return nil, fmt.Errorf("collector.AddKeyIncrement: %w", err)
	}
	var s *keyincr.Store
	_, err = c.add("AddKeyIncrement", dta.OpKeyIncrement, l.RegionSize(), target.RemoteAtomic, geo,
		func(_ *instance, mem []byte) (err error) {
			s, err = keyincr.NewStore(l, mem)
			return err
		})
	return s, err
}

// AddPostcard adds a Postcarding instance with layout l and returns its
// store over the served memory (query it with a postcard.Table of the same
// layout). values, when given, are the hop values the instance holds (its
// Table's): the advertisement carries them (postcard.NewValueSet) and
// translators refuse postcards of any other value, NACKing them with
// reason Rejected, instead of writing paths no query would find.
func (c *Collector) AddPostcard(l postcard.Layout, values ...uint32) (*postcard.Store, error) {
	geo, err := l.AppendGeometry(nil, postcard.NewValueSet(values))
	if err != nil {
		return nil, fmt.Errorf("collector.AddPostcard: %w", err)
	}
	var s *postcard.Store
	_, err = c.add("AddPostcard", dta.OpPostcard, l.RegionSize(), target.RemoteWrite, geo,
		func(_ *instance, mem []byte) (err error) {
			s, err = postcard.NewStore(l, mem)
			return err
		})
	return s, err
}

// AddAppend adds an Append instance with layout l and returns its region;
// Store.Reader gives a reader per list. An RDMA WRITE with Immediate into
// the region notifies the list its immediate data names (Store.Notify), so
// Reader.Wait and ReadWait wake up.
func (c *Collector) AddAppend(l appendlist.Layout) (*appendlist.Store, error) {
	geo, err := l.AppendBinary(nil)
	if err != nil {
		return nil, fmt.Errorf("collector.AddAppend: %w", err)
	}
	var r *appendlist.Store
	_, err = c.add("AddAppend", dta.OpAppend, l.RegionSize(), target.RemoteWrite, geo,
		func(in *instance, mem []byte) (err error) {
			r, err = appendlist.NewStore(l, mem)
			in.list = r
			return err
		})
	return r, err
}

// add allocates, wraps, registers, advertises and listens for one instance.
func (c *Collector) add(op string, prim dta.Opcode, size uint64, access target.Access, geometry []byte, wrap func(*instance, []byte) error) (*instance, error) {
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
	if err := wrap(in, b); err != nil {
		mem.Close()
		return nil, fmt.Errorf("collector.%s: %w", op, err)
	}
	fail := func(err error) (*instance, error) {
		if in.region != nil {
			c.t.Deregister(in.region)
		}
		if c.vb != nil {
			c.vb.unregister(in)
		}
		mem.Close()
		return nil, fmt.Errorf("collector.%s: %w", op, err)
	}
	var va uint64
	var rkey uint32
	if c.vb != nil {
		va, rkey, err = c.vb.register(in, b, access)
	} else {
		in.region, err = c.t.Register(b, access)
		if err == nil {
			va, rkey = in.region.VA(), in.region.RKey()
		}
	}
	if err != nil {
		return fail(err)
	}
	in.Instance = Instance{Index: idx, Primitive: prim, CMPort: uint16(port), Restored: restored, VA: va, Length: uint32(size), RKey: rkey}
	adv := dta.Advertisement{VA: va, Length: uint32(size), RKey: rkey, Primitive: prim, Geometry: geometry}
	if c.cfg.ReferenceAdvertisement {
		adv.Primitive, adv.Geometry = 0, nil
	}
	// A connecting translator learns where each Append list goes on, so
	// that one restarted does not write over what readers have not read,
	// or behind where they are (the software target only).
	if in.list != nil && adv.Primitive == dta.OpAppend && c.vb == nil {
		l := in.list.Layout()
		adv.HeadsFollow = l.Markers && l.Lists <= dta.MaxHeadLists
	}
	if in.Advertisement, err = adv.AppendTo(nil); err != nil {
		return fail(err)
	}
	if c.vb != nil {
		err = c.vb.listen(in, uint16(port))
	} else {
		lc := target.ListenConfig{Greeting: in.Advertisement}
		if prim == dta.OpAppend {
			lc.OnRecv = in.onRecv
		}
		if adv.HeadsFollow {
			lc.FollowUp = in.heads
		}
		err = c.t.Listen(uint16(port), lc)
	}
	if err != nil {
		return fail(err)
	}
	c.insts = append(c.insts, in)
	return in, nil
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

// onRecv notifies an Append list of a WRITE with Immediate. It runs inside
// the target's Process (it must not block; Notify does not).
func (in *instance) onRecv(_ *target.QP, cp target.Completion) {
	if in.list != nil && cp.Write && cp.HasImm {
		_ = in.list.Notify(cp.Imm) // an ID out of range names no list: nothing to wake
	}
}

// heads returns the SENDs of an Append instance's list heads, as they are
// in memory now (a translator connects: dta.ListHeads).
func (in *instance) heads() [][]byte {
	hs, err := in.list.Heads(nil)
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
	if c.uc != nil || c.vb != nil {
		return nil
	}
	ucs, err := udpio.ListenShards(c.cfg.Addr, max(c.cfg.Shards, 1))
	if err != nil {
		return fmt.Errorf("collector.Start: %w", err)
	}
	for _, uc := range ucs {
		// Bursts of a translator's packets queue in the socket while the
		// target works: ask for large buffers (the system caps them at its
		// maximum).
		_ = uc.SetReadBuffer(SocketBuffer)
		_ = uc.SetWriteBuffer(SocketBuffer)
		if err := rocev2.ConfigureSocket(uc); err != nil {
			for _, uc := range ucs {
				uc.Close()
			}
			return fmt.Errorf("collector.Start: %w", err)
		}
	}
	c.uc, c.more = ucs[0], ucs[1:]
	return nil
}

// Addr returns the target's address: the configured one, with the bound
// port once Start has run.
func (c *Collector) Addr() netip.AddrPort {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.uc != nil {
		a := c.uc.LocalAddr().(*net.UDPAddr).AddrPort()
		return netip.AddrPortFrom(a.Addr().Unmap(), a.Port())
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
	ucs := append([]*net.UDPConn{c.uc}, c.more...)
	if c.vb != nil {
		var cancel context.CancelFunc
		ctx, cancel = context.WithCancel(ctx)
		c.stop = cancel
		c.served.Add(1)
		defer c.served.Done()
	}
	c.mu.Unlock()
	var err error
	if c.vb != nil {
		err = c.vb.serve(ctx)
	} else {
		errs := make([]error, len(ucs))
		var wg sync.WaitGroup
		for i, uc := range ucs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				errs[i] = c.t.Serve(ctx, uc)
			}()
		}
		wg.Wait()
		err = errors.Join(errs...)
	}
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
	if c.t == nil {
		return target.Counters{}
	}
	return c.t.Counters()
}

// VerbsCounters returns the verbs backend's counters (zero with the
// software backend).
func (c *Collector) VerbsCounters() VerbsCounters {
	if c.vb == nil {
		return VerbsCounters{}
	}
	return c.vb.counters()
}

// Target returns the software target serving the instances, for its
// counters and lower-level control; nil with the verbs backend.
func (c *Collector) Target() *target.Target { return c.t }

// Close stops serving, closes the socket and the target, and unmaps every
// region: the stores, regions and readers handed out must not be used
// afterwards. Serve returns nil.
func (c *Collector) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return fmt.Errorf("collector.Close: %w: closed already", ErrState)
	}
	c.closed = true
	var errs []error
	if c.uc != nil {
		errs = append(errs, c.uc.Close())
	}
	for _, uc := range c.more {
		errs = append(errs, uc.Close())
	}
	if c.vb != nil {
		// Serve's loops must be gone before their handles are freed; the
		// NIC stops writing a region when its MR is deregistered.
		if c.stop != nil {
			c.stop()
		}
		c.mu.Unlock()
		c.served.Wait()
		c.mu.Lock()
		errs = append(errs, c.vb.close())
	} else {
		// Once the target is closed no packet reaches the memory: Close
		// waits for a Process under way and every later one returns at once.
		errs = append(errs, c.t.Close())
	}
	for _, in := range c.insts {
		errs = append(errs, in.mem.Close())
	}
	return errors.Join(errs...)
}
