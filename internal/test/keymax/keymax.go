// Package keymax is Key-Max, a fifth DTA primitive defined outside the
// four to prove the primitive seam (package primitive): it registers
// itself, and the translator, the software target and the collector run it
// with no edit of theirs. Import it for its side effect:
//
//	import _ "github.com/dtakit/dtakit/internal/test/keymax"
//
// Key-Max keeps, per key, a register holding the largest value reported.
// RDMA has no atomic maximum (FETCH_ADD adds, and the translator's Sink
// offers no compare-and-swap), so the maximum is kept where reports meet:
// the translator. Its Translator remembers each slot's key and largest
// value and, on every report, WRITEs the slot whole: le32(key) ‖ le32(1)
// ‖ le64(max). A report of a key whose slot holds another key takes the
// slot (as a Key-Write overwrites): the register holds the largest value
// of the key's reports since it took the slot through that translator
// (Stateful: a key's reports meet in one translator engine). A translator
// that restarts starts again from the next report.
//
// Wire (docs/DTA-WIRE.md, "Registered opcodes"): opcode 0x4D, a body of
// key (4, big-endian) ‖ value (8, big-endian); any other body is rejected.
// Geometry: version 1 (1 byte) ‖ log2 of the slots (1 byte, 0..20).
// Region: 16 bytes per slot, as above; an all-zero slot is empty.
package keymax

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"

	"github.com/dtakit/dtakit/dta"
	"github.com/dtakit/dtakit/primitive"
)

// Opcode is Key-Max's DTA opcode, one DTA-WIRE leaves unassigned.
const Opcode dta.Opcode = 0x4D

// Sizes of the wire and memory forms.
const (
	BodyLen     = 12 // key, value
	GeometryLen = 2  // version, log2 slots
	SlotSize    = 16 // le32(key), le32(1), le64(max)
	MaxLogSlots = 20
)

var (
	// ErrLayout: a geometry or layout Key-Max cannot use.
	ErrLayout = errors.New("keymax: invalid layout")
	// ErrOutOfRegion: a write that is not one whole slot of the region.
	ErrOutOfRegion = errors.New("keymax: write outside the region's slots")
)

func init() { primitive.Register(Kind{}) }

// Kind is Key-Max as a primitive.Kind.
type Kind struct{}

func (Kind) Opcode() dta.Opcode { return Opcode }
func (Kind) Name() string       { return "keymax" }
func (Kind) Stateful() bool     { return true }

// Key returns the key of a report's body, 0 when the body is not one
// (Translate rejects it).
func (Kind) Key(r *dta.Report) uint32 {
	if len(r.Body) != BodyLen {
		return 0
	}
	return binary.BigEndian.Uint32(r.Body)
}

func (Kind) ParseLayout(b []byte) (primitive.Layout, error) {
	if len(b) != GeometryLen || b[0] != 1 {
		return nil, fmt.Errorf("%w: geometry % x: want version 1 and log2 slots", ErrLayout, b)
	}
	l := Layout{LogSlots: int(b[1])}
	return l, l.Validate()
}

// Report returns a Key-Max report of value for key.
func Report(key uint32, value uint64) dta.Report {
	body := binary.BigEndian.AppendUint32(make([]byte, 0, BodyLen), key)
	return dta.Report{Header: dta.Header{Opcode: Opcode}, Body: binary.BigEndian.AppendUint64(body, value)}
}

// Layout is a Key-Max region of 2^LogSlots slots.
type Layout struct{ LogSlots int }

func (Layout) Kind() primitive.Kind { return Kind{} }
func (Layout) Atomic() bool         { return false }
func (l Layout) slots() int         { return 1 << l.LogSlots }
func (l Layout) RegionSize() uint64 { return uint64(l.slots()) * SlotSize }

// Slot returns key's slot: CRC32(le32(key)) & (slots-1), bytewise so
// that nothing escapes (crc32.ChecksumIEEE's slice does).
func (l Layout) Slot(key uint32) int {
	c := ^uint32(0)
	for range 4 {
		c = crc32.IEEETable[byte(c)^byte(key)] ^ c>>8
		key >>= 8
	}
	return int(^c) & (l.slots() - 1)
}

func (l Layout) Validate() error {
	if l.LogSlots < 0 || l.LogSlots > MaxLogSlots {
		return fmt.Errorf("%w: log2 slots %d (0..%d)", ErrLayout, l.LogSlots, MaxLogSlots)
	}
	return nil
}

func (l Layout) AppendBinary(b []byte) ([]byte, error) {
	if err := l.Validate(); err != nil {
		return b, err
	}
	return append(b, 1, byte(l.LogSlots)), nil
}

func (l Layout) NewTranslator(primitive.Config) (primitive.Translator, error) {
	if err := l.Validate(); err != nil {
		return nil, err
	}
	return &translator{l: l, regs: make([]register, l.slots())}, nil
}

func (l Layout) NewStore(mem []byte) (primitive.Store, error) {
	if err := l.Validate(); err != nil {
		return nil, err
	}
	if uint64(len(mem)) < l.RegionSize() {
		return nil, fmt.Errorf("%w: %d bytes of memory, the layout needs %d", ErrLayout, len(mem), l.RegionSize())
	}
	return &Store{l: l, mem: mem[:l.RegionSize()]}, nil
}

// register is what the translator knows of a slot.
type register struct {
	key  uint32
	used bool
	max  uint64
}

type translator struct {
	l    Layout
	regs []register
	buf  [SlotSize]byte
}

func (t *translator) Translate(s primitive.Sink, r *dta.Report, copy int) primitive.Outcome {
	if len(r.Body) != BodyLen || copy >= 0 {
		return primitive.Rejected
	}
	if !s.Room(1) {
		return primitive.Busy
	}
	key, v := binary.BigEndian.Uint32(r.Body), binary.BigEndian.Uint64(r.Body[4:])
	slot := t.l.Slot(key)
	g := &t.regs[slot]
	if !g.used || g.key != key {
		*g = register{key: key, used: true, max: v}
	}
	g.max = max(g.max, v)
	binary.LittleEndian.PutUint32(t.buf[0:], key)
	binary.LittleEndian.PutUint32(t.buf[4:], 1)
	binary.LittleEndian.PutUint64(t.buf[8:], g.max)
	s.Write(uint64(slot)*SlotSize, t.buf[:], false, 0)
	s.Settle()
	return primitive.Applied
}

func (*translator) Tick(primitive.Sink, int64) {}
func (*translator) Flush(primitive.Sink)       {}
func (*translator) MaxWrite() int              { return SlotSize }
func (*translator) Held() (int, int)           { return 0, 0 }

// Store is a Key-Max region in the collector's memory.
type Store struct {
	l   Layout
	mem []byte
}

func (s *Store) Layout() primitive.Layout { return s.l }
func (s *Store) Region() []byte           { return s.mem }

// Write applies a WRITE of whole slots, as the NIC would.
func (s *Store) Write(off uint64, data []byte, _ bool, _ uint32) error {
	if off%SlotSize != 0 || len(data)%SlotSize != 0 || off > uint64(len(s.mem)) || uint64(len(data)) > uint64(len(s.mem))-off {
		return ErrOutOfRegion
	}
	copy(s.mem[off:], data)
	return nil
}

func (*Store) FetchAdd(uint64, uint64) (uint64, error) { return 0, primitive.ErrUnsupported }

// Snapshot copies the region into mem. A register written while the copy
// runs is in it or not; a torn one may pair a key with another's maximum
// (Key-Max has no checksum: it is a test primitive).
func (s *Store) Snapshot(mem []byte) (primitive.Store, error) {
	st, err := s.l.NewStore(mem)
	if err != nil {
		return nil, err
	}
	copy(st.(*Store).mem, s.mem)
	return st, nil
}

// Max returns the largest value reported for key, and whether key's slot
// holds key.
func (s *Store) Max(key uint32) (uint64, bool) {
	b := s.mem[s.l.Slot(key)*SlotSize:][:SlotSize]
	if binary.LittleEndian.Uint32(b[4:]) != 1 || binary.LittleEndian.Uint32(b) != key {
		return 0, false
	}
	return binary.LittleEndian.Uint64(b[8:]), true
}

// Answer is a key's answer to a query.
type Answer struct {
	Key    uint32 `json:"key"`
	Status string `json:"status"` // found or not found
	Max    uint64 `json:"max"`
}

func (s *Store) Query(q primitive.Query) ([]any, error) {
	out := make([]any, 0, len(q.Keys))
	for _, k := range q.Keys {
		a := Answer{Key: k, Status: "not found"}
		if v, ok := s.Max(k); ok {
			a.Status, a.Max = "found", v
		}
		out = append(out, a)
	}
	return out, nil
}

var columns = []primitive.Column{{Name: "key", Type: primitive.Uint32}, {Name: "max", Type: primitive.Uint64}}

func (*Store) Columns() []primitive.Column { return columns }

// Rows passes the keys of q.Keys that are found, or with no keys every
// slot that holds one.
func (s *Store) Rows(q primitive.Query, fn func(row []any) error) error {
	row := make([]any, 2)
	if q.Keys != nil {
		for _, k := range q.Keys {
			if v, ok := s.Max(k); ok {
				row[0], row[1] = k, v
				if err := fn(row); err != nil {
					return err
				}
			}
		}
		return nil
	}
	for off := 0; off < len(s.mem); off += SlotSize {
		b := s.mem[off : off+SlotSize]
		if binary.LittleEndian.Uint32(b[4:]) != 1 {
			continue
		}
		row[0], row[1] = binary.LittleEndian.Uint32(b), binary.LittleEndian.Uint64(b[8:])
		if err := fn(row); err != nil {
			return err
		}
	}
	return nil
}
