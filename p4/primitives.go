package p4

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/dtakit/dtakit/appendlist"
	"github.com/dtakit/dtakit/dta"
	"github.com/dtakit/dtakit/keyincr"
	"github.com/dtakit/dtakit/keywrite"
	"github.com/dtakit/dtakit/p4/internal/p4gen"
	"github.com/dtakit/dtakit/postcard"
	"github.com/dtakit/dtakit/primitive"
	"github.com/dtakit/dtakit/rocev2"
)

// tofinoKind is what the control plane knows of one primitive the Tofino
// programs translate: the programs that do, how an advertised layout is
// checked against what it was compiled with, the frame its egress crafts,
// and its plan's entries. Only the primitives in tofinoKinds have one: a
// primitive registered beyond them (primitive.Register) advertises a
// layout the switch cannot serve (NotImplementedError).
type tofinoKind struct {
	programs []Program
	// check validates l, the advertised layout, and the connection
	// against the compiled constants, filling s.
	check func(c *Connection, l primitive.Layout, s *shape) error
	// frame sets f's operation for copy n of a report (craft's
	// arguments): its BTH opcode and AckReq, its RETH or AtomicETH and its
	// payload.
	frame func(c *Connection, s *shape, f *rocev2.Frame, key uint32, value []byte, n uint8, head uint32)
	// valueLen returns the bytes of the value craft takes.
	valueLen func(s *shape) int
	// mask returns the slot mask of the connection's entry in program p's
	// egress qp table.
	mask func(p Program, s *shape) Field
	// connection plans the connection's groups and entries beyond its qp
	// and responder entries; port is its collector's, mgid the first of
	// the collector's copies groups.
	connection func(pl *planner, port, mgid uint16, conn *Connection, s *shape)
	// instance plans the choice of conn for reports whose key's CRC8 is
	// crc8.
	instance func(pl *planner, crc8 int, conn *Connection)
}

// tofinoKinds holds the primitives the Tofino programs translate, by opcode.
var tofinoKinds = map[dta.Opcode]*tofinoKind{
	dta.OpKeyWrite: {
		programs: []Program{TranslatorProgram, Tofino2Program}, check: checkKeyWrite, frame: frameKeyWrite,
		valueLen: func(s *shape) int { return s.kw.DataSize }, mask: slotMask,
		connection: planCopies, instance: planInstance,
	},
	dta.OpKeyIncrement: {
		programs: []Program{TranslatorProgram, Tofino2Program}, check: checkKeyIncrement, frame: frameKeyIncrement,
		valueLen: func(*shape) int { return 8 }, mask: slotMask,
		connection: planCopies, instance: planInstance,
	},
	dta.OpAppend: {
		programs: []Program{TranslatorProgram, Tofino2Program}, check: checkAppend, frame: frameAppend,
		valueLen: func(s *shape) int { return s.ap.Batch * s.ap.EntrySize }, mask: slotMask,
		connection: planCopies, instance: planInstance,
	},
	dta.OpPostcard: {
		programs: []Program{PostcardProgram, Tofino2Program}, check: checkPostcard, frame: framePostcard,
		valueLen: func(s *shape) int { return s.pc.Layout().ChunkSize() }, mask: chunkMask,
		connection: planPostcardGroups, instance: planPostcardInstance,
	},
}

// allPrograms are the programs a switch may run.
var allPrograms = []Program{TranslatorProgram, PostcardProgram, Tofino2Program}

// lookup returns what p4 knows of op, or a NotImplementedError.
func lookup(op dta.Opcode) (*tofinoKind, error) {
	if t := tofinoKinds[op]; t != nil {
		return t, nil
	}
	return nil, &NotImplementedError{Primitive: op, Programs: allPrograms}
}

// lookupFor returns what p4 knows of op if program p translates it, or a
// NotImplementedError naming p.
func lookupFor(op dta.Opcode, p Program) (*tofinoKind, error) {
	if t := tofinoKinds[op]; t != nil && slices.Contains(t.programs, p) {
		return t, nil
	}
	return nil, &NotImplementedError{Primitive: op, Programs: []Program{p}}
}

// NotImplementedError is the error for an advertisement of a primitive
// the switch's programs do not translate: one registered beyond those they
// were written for, or one the loaded program leaves to the other. It
// matches ErrAdvertisement.
type NotImplementedError struct {
	Primitive dta.Opcode
	Programs  []Program // the programs that do not implement it
}

func (e *NotImplementedError) Error() string {
	name := e.Primitive.String()
	if k, ok := primitive.Lookup(e.Primitive); ok {
		name = k.Name()
	}
	progs := make([]string, len(e.Programs))
	for i, p := range e.Programs {
		progs[i] = p.String()
	}
	return fmt.Sprintf("primitive %s (%#02x) is not implemented by %s", name, uint8(e.Primitive), strings.Join(progs, " or "))
}

// Is reports whether target is ErrAdvertisement.
func (e *NotImplementedError) Is(target error) bool { return target == ErrAdvertisement }

func checkKeyWrite(c *Connection, l primitive.Layout, s *shape) error {
	s.kw, _ = keywrite.LayoutOf(l)
	if s.kw.DataSize != c.kwData() {
		return fmt.Errorf("data size %d, compiled for %d", s.kw.DataSize, c.kwData())
	}
	s.slots = s.kw.Slots
	return perCopy(s.kw.Hasher)
}

func checkKeyIncrement(c *Connection, l primitive.Layout, s *shape) error {
	s.ki, _ = keyincr.LayoutOf(l)
	s.slots = s.ki.Slots
	if err := perCopy(s.ki.Hasher); err != nil {
		return err
	}
	if c.Ad.VA%8 != 0 {
		return errors.New("counter region not 8-byte aligned")
	}
	return nil
}

func checkAppend(c *Connection, l primitive.Layout, s *shape) error {
	s.ap, _ = appendlist.LayoutOf(l)
	want := appendlist.Layout{Lists: 1 << p4gen.AppendListBits, Entries: 1 << p4gen.AppendEntryBits,
		EntrySize: p4gen.AppendEntry, Batch: c.apBatch()}
	if s.ap != want {
		return fmt.Errorf("append layout %+v, compiled for %+v", s.ap, want)
	}
	return nil
}

func checkPostcard(_ *Connection, pl primitive.Layout, s *shape) error {
	l, _ := postcard.LayoutOf(pl)
	want := postcard.Layout{Hops: p4gen.PostcardHops, SlotBits: 32, Chunks: l.Chunks, Copies: l.Copies}
	if l != want || l.Copies > p4gen.MaxCopies {
		return fmt.Errorf("postcard layout %+v, compiled for %d hops of 32 bits, default checksums, per-copy addressing, at most %d copies",
			l, p4gen.PostcardHops, p4gen.MaxCopies)
	}
	if l.Chunks > 1<<p4gen.PostcardChunkBits {
		return fmt.Errorf("%d chunks, compiled for at most 2^%d", l.Chunks, p4gen.PostcardChunkBits)
	}
	s.slots = uint64(l.Chunks)
	var err error
	s.pc, err = postcard.NewCodec(l)
	return err
}

// write makes f an RDMA WRITE of payload at va, asking for an ACK every
// 64 PSNs.
func write(c *Connection, f *rocev2.Frame, va uint64, payload []byte) {
	f.BTH.Opcode = rocev2.RCWriteOnly
	f.BTH.AckReq = f.BTH.PSN&63 == 0
	f.RETH = rocev2.RETH{VA: va, RKey: c.Ad.RKey, DMALength: uint32(len(payload))}
	f.Payload = payload
}

func frameKeyWrite(c *Connection, s *shape, f *rocev2.Frame, key uint32, value []byte, n uint8, _ uint32) {
	payload := binary.LittleEndian.AppendUint32(nil, s.kw.Checksum(key))
	write(c, f, c.Ad.VA+s.kw.Offset(key, n), append(payload, value...))
	f.RETH.DMALength = uint32(4 + s.kw.DataSize)
}

func frameKeyIncrement(c *Connection, s *shape, f *rocev2.Frame, key uint32, value []byte, n uint8, _ uint32) {
	f.BTH.Opcode = rocev2.RCFetchAdd
	f.BTH.AckReq = true
	f.AtomicETH = rocev2.AtomicETH{VA: c.Ad.VA + s.ki.Offset(key, n), RKey: c.Ad.RKey, SwapAddData: binary.BigEndian.Uint64(value)}
}

// frameAppend writes a batch to list key at its ring head, in entries.
func frameAppend(c *Connection, s *shape, f *rocev2.Frame, key uint32, value []byte, _ uint8, head uint32) {
	write(c, f, c.Ad.VA+s.ap.ListOffset(key)+uint64(head)*uint64(s.ap.SlotSize()), value)
}

// framePostcard writes a chunk of flow key.
func framePostcard(c *Connection, s *shape, f *rocev2.Frame, key uint32, value []byte, n uint8, _ uint32) {
	size := s.pc.Layout().ChunkSize()
	write(c, f, c.Ad.VA+uint64(s.pc.ChunkIndex(key, int(n)))*uint64(size), value)
	f.RETH.DMALength = uint32(size)
}

// slotMask is the mask of the hashed slot: the region's slots (an Append
// batch goes to its list's head: no mask).
func slotMask(_ Program, s *shape) Field {
	var mask uint64
	if s.slots > 0 {
		mask = s.slots - 1
	}
	return Field{"slot_mask", mask}
}

// chunkMask is the mask of a chunk's hash: postcard.p4 places it at the
// chunk's byte offset; translator_t2.p4 masks it as a slot's and shifts it.
func chunkMask(p Program, s *shape) Field {
	if p == Tofino2Program {
		return slotMask(p, s)
	}
	return Field{"chunk_mask", slotMask(p, s).Value * uint64(s.pc.Layout().ChunkSize())}
}

// planCopies plans translator.p4's choice of the multicast group of a
// report's copies on conn: the collector's group of N copies.
func planCopies(pl *planner, _, mgid uint16, conn *Connection, _ *shape) {
	for copies := 1; copies <= p4gen.MaxCopies; copies++ {
		pl.p.Entries = append(pl.p.Entries, Entry{
			Table: "Ingress.copies", Key: []Field{{"qp", uint64(conn.Index)}, {"n", uint64(copies)}}, Action: "Ingress.replicate",
			Data: []Field{{"mgid", uint64(mgid) + uint64(copies)}},
		})
	}
}

// planPostcardGroups plans postcard.p4's multicast groups of conn: its
// flows' chunks, one node per copy, and evicted flows'.
func planPostcardGroups(pl *planner, port, _ uint16, conn *Connection, s *shape) {
	own, ev := pl.postcardGroups(conn.Index)
	rids := ridsUpTo(s.pc.Layout().Copies)
	pl.group(own, port, rids...)
	for j := range rids {
		rids[j] |= p4gen.PostcardEvicted
	}
	pl.group(ev, port, rids...)
}

// planInstance plans translator.p4's instance of conn's primitive for
// reports whose key's CRC8 is crc8.
func planInstance(pl *planner, crc8 int, conn *Connection) {
	pl.p.Entries = append(pl.p.Entries, Entry{
		Table: "Ingress.instance", Key: []Field{{"crc8", uint64(crc8)}, {"opcode", uint64(conn.Ad.Primitive)}}, Action: "Ingress.to_instance",
		Data: []Field{{"qp", uint64(conn.Index)}},
	})
}

// planPostcardInstance plans postcard.p4's instance for flows whose key's
// CRC8 is crc8, and its instance for their evicted chunks (planned last).
// translator_t2.p4's instance table is keyed by the opcode too, its
// Postcarding action named apart.
func planPostcardInstance(pl *planner, crc8 int, conn *Connection) {
	own, ev := pl.postcardGroups(conn.Index)
	e := Entry{
		Table: "Ingress.instance", Key: []Field{{"crc8", uint64(crc8)}}, Action: "Ingress.to_instance",
		Data: []Field{{"qp", uint64(conn.Index)}, {"mgid", uint64(own)}},
	}
	if pl.cfg.Program == Tofino2Program {
		e.Key = append(e.Key, Field{"opcode", uint64(dta.OpPostcard)})
		e.Action = "Ingress.to_pc_instance"
	}
	pl.p.Entries = append(pl.p.Entries, e)
	pl.evicted = append(pl.evicted, Entry{
		Table: "Ingress.evicted", Key: []Field{{"crc8_ev", uint64(crc8)}}, Action: "Ingress.to_evicted",
		Data: []Field{{"qp", uint64(conn.Index)}, {"mgid", uint64(ev)}},
	})
}
