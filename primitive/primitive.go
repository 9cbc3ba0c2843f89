// Package primitive is the seam between the DTA primitives and the code that
// runs them: the translator, the collector and its daemon, export, p4's plan
// and the tools. A primitive is a [Kind] registered under its DTA opcode,
// as a database/sql driver or an image format is registered under its name:
//
//	func init() { primitive.Register(kind{}) }
//
// A Kind parses the geometry a collector advertises into a [Layout]; a
// Layout makes the translator's per-instance [Translator] and the
// collector's [Store] over the region's memory. Code that runs primitives
// looks a Kind up by opcode ([Lookup]) or by its configuration name
// ([ByName]) and never switches on the opcode, so adding a primitive is one
// package and one registration.
//
// Key-Write, Key-Increment, Postcarding and Append register themselves in
// their packages (keywrite, keyincr, postcard, appendlist), which keep their
// typed APIs for Go callers. A primitive beyond those four has its reports'
// sub-header and data carried opaque in [dta.Report.Body]
// (docs/DTA-WIRE.md, "Registered opcodes"); its Kind decodes them.
//
// Primitives know offsets and bytes, never frames: a Translator asks its
// [Sink] for RDMA WRITEs and FETCH_ADDs at offsets of the instance's region,
// and the translator builds the packets.
package primitive

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dtakit/dtakit/dta"
)

// Kind is one primitive: what every instance of it shares.
type Kind interface {
	// Opcode returns the DTA opcode of the primitive's reports, its key
	// in the registry.
	Opcode() dta.Opcode
	// Name returns the primitive's name in configuration files and
	// metrics: lower-case letters and digits ("keywrite").
	Name() string
	// Key returns the key of r, a report of the primitive, by which the
	// translator chooses the collector (dta.CollectorChoice) and, when
	// the primitive holds state per key (Stateful), the shard.
	Key(r *dta.Report) uint32
	// Stateful reports whether a translator holds state per key between
	// reports (a postcard flow, an Append list's batch), so that every
	// report of a key must reach the same translator engine.
	Stateful() bool
	// ParseLayout decodes a geometry as a collector advertises it
	// (dta.Advertisement.Geometry, the Layout's AppendBinary) and checks
	// it as Layout.Validate does. The Layout does not alias geometry.
	ParseLayout(geometry []byte) (Layout, error)
}

// Layout is the geometry of one instance of a primitive: what the
// collector advertises and what the translator and the collector's store
// derive from it.
type Layout interface {
	// Kind returns the layout's primitive.
	Kind() Kind
	// RegionSize returns the bytes of collector memory the layout needs.
	RegionSize() uint64
	// Validate reports what is wrong with the layout, or nil.
	Validate() error
	// AppendBinary appends the geometry as advertised to b (the inverse
	// of Kind().ParseLayout).
	AppendBinary(b []byte) ([]byte, error)
	// Atomic reports whether the translator's operations on the region
	// are FETCH_ADDs (the region is registered for remote atomics)
	// rather than WRITEs.
	Atomic() bool
	// NewTranslator returns the translation state of one instance with
	// this layout.
	NewTranslator(cfg Config) (Translator, error)
	// NewStore returns the collector's view of a region of this layout
	// held in mem (at least RegionSize bytes, aliased, not copied).
	NewStore(mem []byte) (Store, error)
}

// Config is the translator's configuration a Translator may need. Its
// zero value selects each primitive's defaults.
type Config struct {
	// PostcardCache is the number of flows a Postcarding translator
	// caches.
	PostcardCache int
	// PostcardLinger and AppendLinger are how long a postcard flow or an
	// Append batch waits for more reports before Tick writes it.
	PostcardLinger, AppendLinger time.Duration
	// MTU is the payload bytes of one RoCEv2 packet: a longer WRITE is
	// several packets, each counted by Sink.Room.
	MTU int
}

// Outcome is what became of a report handed to Translator.Translate.
type Outcome uint8

const (
	// Applied: its operations are queued on the sink, or it is held.
	Applied Outcome = iota
	// Busy: the sink has no room for its operations now; nothing was
	// queued or held, the caller drops it (a sender may resend it).
	Busy
	// Rejected: the layout refuses it (data size, list, hop, a body that
	// does not decode); a resend would be refused again. Nothing was
	// queued or held.
	Rejected
)

// Translator is the translation state of one primitive instance: reports
// in, RDMA operations out through a Sink. A Translator is used by one
// goroutine at a time; its methods do not allocate on the report path.
type Translator interface {
	// Translate turns r into operations on s. With copy >= 0 only that
	// copy of a redundant report is written (a primitive without copies
	// returns Rejected).
	Translate(s Sink, r *dta.Report, copy int) Outcome
	// Tick writes what has waited long enough at time now (Unix
	// nanoseconds), counting each in Lingered.
	Tick(s Sink, now int64)
	// Flush writes everything held back, whatever the rate limit; what
	// the sink has no room for is counted in FlushLost.
	Flush(s Sink)
	// MaxWrite returns the longest WRITE's data in bytes, 0 when the
	// primitive only makes FETCH_ADDs.
	MaxWrite() int
	// Held returns how the translator holds reports back: up to per
	// reports in each of slots slots (0, 0: it holds none).
	Held() (slots, per int)
}

// OneCopy is implemented by a Kind whose Translator writes one chosen copy
// of a redundant report when Translate's copy is not negative (Key-Write;
// translator.Submit refuses a copy for any other Kind).
type OneCopy interface {
	Kind
	OneCopy()
}

// Resumer is implemented by a Translator that resumes from state its
// collector sends after the advertisement when the advertisement's
// HeadsFollow is set (dta.ListHeads): Append's list heads, where its lists
// stood.
type Resumer interface {
	Translator
	// Heads returns how many heads the collector sends.
	Heads() int
	// SetHead sets head i (< Heads).
	SetHead(i uint32, head uint64) error
}

// Counter names a count a Translator adds to through Sink.Count.
type Counter uint8

const (
	// OutsideValues: a postcard rejected because its value is outside
	// the collector's set (also returned as Rejected).
	OutsideValues Counter = iota
	// PartialChunks: postcard chunks written before their flow completed.
	PartialChunks
	// Lingered: held reports written by Tick after their linger.
	Lingered
	// FlushLost: held writes Flush could not send.
	FlushLost
)

// Sink is where a Translator's operations go: one instance's region on
// one queue pair, and the exactly-once bookkeeping of the report being
// translated (docs/DTA-WIRE.md, "Exactly once"). A report whose
// operations are queued is settled when the collector acknowledges them;
// a report a Translator holds back (in a cache or a batch) is held under
// a slot until the write that carries it is queued.
type Sink interface {
	// Now returns the current time, Unix nanoseconds.
	Now() int64
	// Room reports whether n more packets can be queued now (ring space
	// and rate limit), counting why not: a WRITE longer than Config.MTU
	// is several.
	Room(n int) bool
	// FlushRoom reports whether the instance is ready and n more
	// packets fit its ring, whatever the rate limit.
	FlushRoom(n int) bool
	// Write queues an RDMA WRITE of data at offset off of the region; with
	// imm, its last packet carries immData. A write reaching past the
	// region is refused and counted, never sent. data may be reused
	// after Write returns.
	Write(off uint64, data []byte, imm bool, immData uint32)
	// FetchAdd queues a FETCH_ADD of add to the 8-byte counter at off.
	FetchAdd(off, add uint64)
	// ShareTail says whether the operations queued next are copies of
	// one report, equal after their address (rc.Requester.ShareTail).
	ShareTail(on bool)

	// Settling reports whether the report being translated is one whose
	// application is tracked (wide and sequenced).
	Settling() bool
	// Settle says the report being translated is applied once the
	// operations just queued are acknowledged.
	Settle()
	// Hold holds the report being translated under slot (< slots of
	// Translator.Held, at most per of them) until Release or Lose; one
	// not Settling is not held (nothing waits for it). A report beyond
	// what Held said is NACKed unconfirmed at once (a Translator bug).
	Hold(slot int)
	// Held returns how many reports slot holds.
	Held(slot int) int
	// Release says slot's held reports are applied once the operations
	// just queued are acknowledged, and empties slot.
	Release(slot int)
	// Lose says slot's held reports will not be written: they are
	// settled as unconfirmed, and slot is emptied.
	Lose(slot int)
	// Count adds one to c.
	Count(c Counter)
}

// Store is a primitive's region in the collector's memory, as the
// collector, its daemon and export see it.
type Store interface {
	// Layout returns the store's layout.
	Layout() Layout
	// Region returns the memory the store reads.
	Region() []byte
	// Write applies an RDMA WRITE at offset off as the NIC would (the
	// software path); imm says it carried immediate data immData.
	Write(off uint64, data []byte, imm bool, immData uint32) error
	// FetchAdd applies a FETCH_ADD at offset off and returns the
	// counter's former value.
	FetchAdd(off, add uint64) (uint64, error)
	// Snapshot ends an epoch for export: it returns a Store over mem (at
	// least RegionSize bytes) holding the region as the typed store's
	// Snapshot leaves it (Key-Increment's counts move to the copy, the
	// region starts again from zero; the others are copied), safe while
	// operations go on. ErrUnsupported where a copy means nothing
	// (Append: its lists are exported by reading them, Rows).
	Snapshot(mem []byte) (Store, error)
	// Query answers q with one JSON-encodable answer per key of q.Keys
	// (Append: per entry of list q.Params["list"]), each with the key
	// and a "status" of found, not found or conflict (the collector
	// daemon's HTTP API).
	Query(q Query) ([]any, error)
	// Columns names the columns of the rows Rows passes.
	Columns() []Column
	// Rows calls fn with the rows answering q, values in Columns order,
	// until fn returns an error, which Rows returns (export). Keys nil
	// means every key the store holds, an error wrapping ErrUnsupported
	// where it cannot list them (Key-Increment's counters, Postcarding's
	// chunks). row is reused after fn returns.
	Rows(q Query, fn func(row []any) error) error
}

// Query is a query of a Store.
type Query struct {
	// Keys are the keys to answer.
	Keys []uint32
	// N is the number of copies to read, a redundancy (Key-Write,
	// Key-Increment, a Kind with copies); 0 where the primitive has none.
	N int
	// Params are the primitive's own parameters, by name (as the
	// daemon's HTTP query gives them: Append's "list" and "peek").
	Params map[string]string
}

// Column is one column of a Store's rows.
type Column struct {
	Name string
	Type ColumnType
}

// ColumnType is the Go type of a column's values.
type ColumnType uint8

const (
	Uint32 ColumnType = iota + 1 // uint32
	Uint64                       // uint64
	Bytes                        // []byte
	String                       // string
	Bool                         // bool
)

// Errors of the registry and of the primitives' seam.
var (
	// ErrUnknown: no Kind is registered under an opcode or a name.
	ErrUnknown = errors.New("primitive: unknown primitive")
	// ErrUnsupported: a Store cannot do what was asked (a FETCH_ADD on a
	// WRITE region, rows of keys it cannot list, a snapshot of lists).
	ErrUnsupported = errors.New("primitive: operation not supported")
)

// entry boxes a Kind for atomic.Pointer.
type entry struct{ k Kind }

var (
	mu     sync.Mutex // serialises Register
	byOp   [256]atomic.Pointer[entry]
	byName sync.Map // string → Kind
)

// Register makes k available under its opcode and its name. It panics, as
// sql.Register does, when k is nil, its opcode is 0, or the opcode or name
// is taken: registering is done once, from an init function. An opcode
// beyond the four built in is registered with dta too, so that its
// reports decode (dta.RegisterOpcode).
func Register(k Kind) {
	if k == nil {
		panic("primitive: Register of a nil Kind")
	}
	op, name := k.Opcode(), k.Name()
	mu.Lock()
	defer mu.Unlock()
	if op == 0 {
		panic(fmt.Sprintf("primitive: Register %q with opcode 0", name))
	}
	if byOp[op].Load() != nil {
		panic(fmt.Sprintf("primitive: Register called twice for opcode %v", op))
	}
	if _, dup := byName.Load(name); dup || name == "" {
		panic(fmt.Sprintf("primitive: Register of opcode %v: name %q is empty or taken", op, name))
	}
	if !op.IsValid() {
		if err := dta.RegisterOpcode(op); err != nil {
			panic(fmt.Sprintf("primitive: Register %q: %v", name, err))
		}
	}
	byOp[op].Store(&entry{k})
	byName.Store(name, k)
}

// Lookup returns the Kind registered under op. It does not allocate.
func Lookup(op dta.Opcode) (Kind, bool) {
	if e := byOp[op].Load(); e != nil {
		return e.k, true
	}
	return nil, false
}

// ByName returns the Kind registered under name.
func ByName(name string) (Kind, bool) {
	k, ok := byName.Load(name)
	if !ok {
		return nil, false
	}
	return k.(Kind), true
}

// Kinds returns every registered Kind, by opcode.
func Kinds() []Kind {
	var ks []Kind
	for i := range byOp {
		if e := byOp[i].Load(); e != nil {
			ks = append(ks, e.k)
		}
	}
	return ks
}

// Names returns the registered names, sorted (for a configuration error
// that lists the choices).
func Names() []string {
	var ns []string
	byName.Range(func(k, _ any) bool {
		ns = append(ns, k.(string))
		return true
	})
	slices.Sort(ns)
	return ns
}

// Parse decodes an advertised geometry of the primitive op names.
func Parse(op dta.Opcode, geometry []byte) (Layout, error) {
	k, ok := Lookup(op)
	if !ok {
		return nil, fmt.Errorf("%w: opcode %v", ErrUnknown, op)
	}
	return k.ParseLayout(geometry)
}
