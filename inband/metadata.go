// Package inband decodes and encodes In-band Network Telemetry (INT 2.x,
// 1.0 and 0.5, the p4.org dataplane specification) and Telemetry Reports
// (2.0, 1.0 and 0.5, the p4.org report format), the telemetry that DTA's
// reporters carry: the INT shim header over TCP or UDP, the INT-MD header
// with its per-hop metadata stack, the INT-MX header, and the Telemetry
// Report headers with their reports. Every hop's and every report's
// metadata decodes into one type, Metadata. Every header is a gopacket
// layer; decoding allocates nothing. See docs/DTA-WIRE.md section 8.9 for
// the decisions made where the specifications leave room.
package inband

import (
	"encoding/binary"
	"fmt"
	"math/bits"
)

// Instruction bits of an INT instruction bitmap and of a Telemetry
// Report's RepMdBits, named by the metadata they request. Bit 0 is the
// most significant bit of the 16-bit field, as the specifications number
// them.
const (
	BitNodeID      = 0  // INT: node (switch) ID; RepMdBits: reserved
	BitL1Ports     = 1  // level 1 ingress (16 bits) + egress (16 bits) interface IDs
	BitHopLatency  = 2  // hop latency
	BitQueue       = 3  // queue ID (8 bits) + queue occupancy (24 bits)
	BitIngressTS   = 4  // ingress timestamp, 8 bytes
	BitEgressTS    = 5  // egress timestamp, 8 bytes
	BitL2Ports     = 6  // level 2 ingress + egress interface IDs, 4 bytes each
	BitTxUtil      = 7  // egress interface Tx utilization
	BitBuffer      = 8  // buffer ID (8 bits) + buffer occupancy (24 bits)
	BitChecksum    = 15 // INT-MD: checksum complement (4 bytes, last)
	BitDropReason  = 15 // RepMdBits: queue ID (8) + drop reason (8) + padding (16)
	maxInstruction = 15
)

// BitQueueCongestion is the Present bit of INT 0.5's queue congestion
// status (its instruction bit 6). INT 2.x reserves bit 9, so decoding INT
// 2.x never sets it.
const BitQueueCongestion = 9

// field is a kind of metadata field: what it means and how long it is.
type field uint8

const (
	fReserved     field = iota // one word, skipped
	fNodeID                    // node (switch) ID
	fL1Ports                   // ingress (16) + egress (16) port IDs
	fHopLatency                // hop latency
	fQueue                     // queue ID (8) + occupancy (24)
	fQueue16                   // queue ID (16) + occupancy (16): INT 0.5
	fIngressTS32               // ingress timestamp, 4 bytes
	fIngressTS64               // ingress timestamp, 8 bytes
	fEgressTS32                // egress timestamp, 4 bytes
	fEgressTS64                // egress timestamp, 8 bytes
	fL2Ports                   // level 2 ingress + egress port IDs, 4 bytes each
	fTxUtil                    // egress port Tx utilization
	fBuffer                    // buffer ID (8) + occupancy (24)
	fChecksum                  // INT-MD checksum complement
	fDrop                      // queue ID (8) + drop reason (8) + padding (16)
	fCongestion16              // queue ID (16) + congestion status (16): INT 0.5
)

// presentBit is the Present bit each field kind sets (-1: none).
var presentBit = [...]int8{fReserved: -1, fNodeID: BitNodeID, fL1Ports: BitL1Ports, fHopLatency: BitHopLatency,
	fQueue: BitQueue, fQueue16: BitQueue, fIngressTS32: BitIngressTS, fIngressTS64: BitIngressTS,
	fEgressTS32: BitEgressTS, fEgressTS64: BitEgressTS, fL2Ports: BitL2Ports, fTxUtil: BitTxUtil,
	fBuffer: BitBuffer, fChecksum: 15, fDrop: BitDropReason, fCongestion16: BitQueueCongestion}

// fieldWords is each kind's length in words.
var fieldWords = [...]uint8{fReserved: 1, fNodeID: 1, fL1Ports: 1, fHopLatency: 1, fQueue: 1, fQueue16: 1,
	fIngressTS32: 1, fIngressTS64: 2, fEgressTS32: 1, fEgressTS64: 2, fL2Ports: 2, fTxUtil: 1, fBuffer: 1,
	fChecksum: 1, fDrop: 1, fCongestion16: 1}

// layout is what each bit of a bitmap requests, bit 0 the most
// significant of 16 (Telemetry Report 1.0's 6-bit RepMdBits is shifted
// left by 10 to read it).
type layout struct {
	kinds [16]field
	// wide has the bits whose fields are two words: a bitmap's words are
	// then two popcounts, which every INT-MD header's check needs.
	wide uint16
}

func newLayout(kinds [16]field) layout {
	l := layout{kinds: kinds}
	for bit, k := range kinds {
		if fieldWords[k] == 2 {
			l.wide |= 0x8000 >> bit
		}
	}
	return l
}

var (
	// layoutINT2 is INT 2.x's instruction bitmap.
	layoutINT2 = newLayout([16]field{fNodeID, fL1Ports, fHopLatency, fQueue, fIngressTS64, fEgressTS64, fL2Ports, fTxUtil, fBuffer, 15: fChecksum})
	// layoutReport2 is Telemetry Report 2.0's RepMdBits: bit 0 reserved
	// (the node ID is the group header's), bit 15 the drop word.
	layoutReport2 = newLayout([16]field{fReserved, fL1Ports, fHopLatency, fQueue, fIngressTS64, fEgressTS64, fL2Ports, fTxUtil, fBuffer, 15: fDrop})
	// layoutINT1 is INT 1.0's: timestamps of 4 bytes.
	layoutINT1 = newLayout([16]field{fNodeID, fL1Ports, fHopLatency, fQueue, fIngressTS32, fEgressTS32, fL2Ports, fTxUtil, 15: fChecksum})
	// layoutINT05 is INT 0.5's: every field one word, bit 6 the queue
	// congestion status; queue ID and value split 16/16 as INTCollector
	// reads them (INT 0.5 leaves the split to the device).
	layoutINT05 = newLayout([16]field{fNodeID, fL1Ports, fHopLatency, fQueue16, fIngressTS32, fEgressTS32, fCongestion16, fTxUtil})
	// layoutReport1 is Telemetry Report 1.0's 6-bit RepMdBits.
	layoutReport1 = newLayout([16]field{fL1Ports, fHopLatency, fQueue, fEgressTS32, fDrop, fTxUtil})
)

// words returns the words of metadata bitmap requests under l.
func (l *layout) words(bitmap uint16) int {
	return bits.OnesCount16(bitmap) + bits.OnesCount16(bitmap&l.wide)
}

// BaselineWords returns the words of metadata an INT 2.x instruction
// bitmap (or a Telemetry Report 2.0 RepMdBits) requests per hop.
func BaselineWords(bitmap uint16) int { return layoutINT2.words(bitmap) }

// Metadata is one hop's metadata: the per-hop type every format decodes
// into, an INT-MD stack's hops (INT.Hop, any INT version) as well as a
// Telemetry Report's own (Individual.Metadata: INT-XD/MX per-hop reports,
// a sink's metadata, 0.5 drop and local reports, 1.0 reports). It holds
// the node (switch) ID, level 1 and 2 ingress and egress ports, hop
// latency, queue ID and occupancy (and INT 0.5's congestion status),
// ingress and egress timestamps (32-bit in 0.5 and 1.0, 64-bit in 2.x),
// egress Tx utilisation, buffer ID and occupancy, and a report's drop
// queue and reason; units are the device's, as the specifications leave
// them. Present has bit b set for each field that was in the bytes and not
// the specification's all-ones "not available" value, b numbered as the
// INT 2.x instruction bitmap (0 the most significant: BitNodeID ...
// BitBuffer, 15 the checksum of a hop or the drop word of a report) in
// every version, and BitQueueCongestion for 0.5's congestion status.
type Metadata struct {
	Present          uint16
	NodeID           uint32
	L1Ingress        uint16
	L1Egress         uint16
	HopLatency       uint32
	QueueID          uint8
	QueueOccupancy   uint32 // 24 bits
	IngressTimestamp uint64
	EgressTimestamp  uint64
	L2Ingress        uint32
	L2Egress         uint32
	TxUtilization    uint32
	BufferID         uint8
	BufferOccupancy  uint32 // 24 bits
	// Checksum is INT-MD's checksum complement (bit 15).
	Checksum uint32
	// DropQueueID and DropReason are a report's drop word (Telemetry
	// Report 2.0 RepMdBits bit 15, 1.0 bit 4, a 0.5 drop report).
	DropQueueID uint8
	DropReason  uint8
	// QueueCongestion is INT 0.5's queue congestion status
	// (BitQueueCongestion).
	QueueCongestion uint32
	// DomainSpecific is the hop's domain-specific metadata (the words
	// after the baseline ones). It aliases the decoded bytes.
	DomainSpecific []byte
}

// Has reports whether field bit b was present and available.
func (m *Metadata) Has(b int) bool { return m.Present&(0x8000>>b) != 0 }

// decodeMetadata fills m from b, laid out by bitmap under l. b must hold
// at least l.words(bitmap)·4 bytes; the rest is domain-specific.
func decodeMetadata(m *Metadata, l *layout, bitmap uint16, b []byte) {
	if bitmap == 0 {
		// What most INT-MD sinks send of themselves: no field to lay out.
		*m = Metadata{}
		if len(b) > 0 {
			m.DomainSpecific = b
		}
		return
	}
	var f Fields
	f.compile(l, bitmap)
	f.Decode(m, b)
}

// numFields is the number of field kinds.
const numFields = int(fCongestion16) + 1

// Fields is a metadata layout compiled for one bitmap: where each field
// lies in a hop's (or a report's) metadata, so that reading one field is a
// load and an all-ones check. Hop and Individual.Metadata decode every
// field into a Metadata; a caller that wants a few fields of many hops
// (an INT-MD stack's) compiles Fields once (Compile) and reads them.
type Fields struct {
	l      *layout
	bitmap uint16
	at     [numFields]uint8 // 1 + byte offset of each kind, 0 when the bitmap lacks it
	words  int              // baseline words
}

// Compile makes f the layout of i's hops: its instructions under its
// version. It does nothing when f already is.
func (f *Fields) Compile(i *INT) {
	if l := i.layout(); f.l != l || f.bitmap != i.Instructions {
		f.compile(l, i.Instructions)
	}
}

func (f *Fields) compile(l *layout, bitmap uint16) {
	f.l, f.bitmap, f.words, f.at = l, bitmap, 0, [numFields]uint8{}
	for bm := bitmap; bm != 0; {
		bit := bits.LeadingZeros16(bm)
		bm &^= 0x8000 >> bit
		k := l.kinds[bit]
		if k != fReserved {
			f.at[k] = uint8(1 + 4*f.words)
		}
		f.words += int(fieldWords[k])
	}
}

// Words returns the baseline words of metadata the layout holds.
func (f *Fields) Words() int { return f.words }

// word returns field k's first word in b and whether it is there and
// available (not all ones).
func (f *Fields) word(b []byte, k field) (uint32, bool) {
	at := int(f.at[k]) - 1
	if at < 0 {
		return 0, false
	}
	// b[at:at+4], not b[at:]: one bounds check, no length to carry.
	if w := binary.BigEndian.Uint32(b[at : at+4]); w != 0xFFFFFFFF {
		return w, true
	}
	return 0, false // the hop could not provide it
}

// double returns two-word field k.
func (f *Fields) double(b []byte, k field) (uint64, bool) {
	at := int(f.at[k]) - 1
	if at < 0 {
		return 0, false
	}
	if v := binary.BigEndian.Uint64(b[at : at+8]); v != ^uint64(0) {
		return v, true
	}
	return 0, false
}

// NodeID returns the node ID in metadata b, and whether b holds it
// available (in the bitmap, not all ones); so do the other accessors.
func (f *Fields) NodeID(b []byte) (uint32, bool) { return f.word(b, fNodeID) }

// L1Ports returns the level 1 ingress and egress interface IDs.
func (f *Fields) L1Ports(b []byte) (in, out uint16, ok bool) {
	w, ok := f.word(b, fL1Ports)
	return uint16(w >> 16), uint16(w), ok
}

// L2Ports returns the level 2 ingress and egress interface IDs.
func (f *Fields) L2Ports(b []byte) (in, out uint32, ok bool) {
	v, ok := f.double(b, fL2Ports)
	return uint32(v >> 32), uint32(v), ok
}

// HopLatency returns the hop latency.
func (f *Fields) HopLatency(b []byte) (uint32, bool) { return f.word(b, fHopLatency) }

// Queue returns the queue ID and occupancy (INT 0.5: 16 bits each, as
// INTCollector reads them; else 8 and 24).
func (f *Fields) Queue(b []byte) (id uint8, occupancy uint32, ok bool) {
	if w, ok := f.word(b, fQueue); ok {
		return uint8(w >> 24), w & 0xFFFFFF, true
	}
	w, ok := f.word(b, fQueue16)
	return uint8(w >> 16), w & 0xFFFF, ok
}

// Congestion returns INT 0.5's queue ID and congestion status, whose queue
// ID a Metadata holds as QueueID.
func (f *Fields) Congestion(b []byte) (id uint8, status uint32, ok bool) {
	w, ok := f.word(b, fCongestion16)
	return uint8(w >> 16), w & 0xFFFF, ok
}

// IngressTimestamp returns the ingress timestamp (32 or 64 bits).
func (f *Fields) IngressTimestamp(b []byte) (uint64, bool) {
	if v, ok := f.double(b, fIngressTS64); ok {
		return v, true
	}
	w, ok := f.word(b, fIngressTS32)
	return uint64(w), ok
}

// EgressTimestamp returns the egress timestamp (32 or 64 bits).
func (f *Fields) EgressTimestamp(b []byte) (uint64, bool) {
	if v, ok := f.double(b, fEgressTS64); ok {
		return v, true
	}
	w, ok := f.word(b, fEgressTS32)
	return uint64(w), ok
}

// TxUtilization returns the egress interface Tx utilisation.
func (f *Fields) TxUtilization(b []byte) (uint32, bool) { return f.word(b, fTxUtil) }

// Buffer returns the buffer ID and occupancy.
func (f *Fields) Buffer(b []byte) (id uint8, occupancy uint32, ok bool) {
	w, ok := f.word(b, fBuffer)
	return uint8(w >> 24), w & 0xFFFFFF, ok
}

// Offsets are where a compiled layout holds each field a per-hop reader
// wants: byte offsets into a hop's metadata, -1 where the layout lacks
// the field; with the widths and splits the accessors know. A caller
// reading many hops of one layout compiles its reads from them once.
type Offsets struct {
	NodeID, L1Ports, L2Ports, HopLatency, Queue, Congestion, IngressTS, EgressTS, TxUtil, Buffer int
	// Queue16 says the queue word is INT 0.5's: ID and occupancy 16 bits
	// each (else 8 and 24).
	Queue16 bool
	// IngressTS64 and EgressTS64 say the timestamps are 8 bytes (else 4).
	IngressTS64, EgressTS64 bool
}

// Offsets returns where f's fields lie.
func (f *Fields) Offsets() Offsets {
	at := func(k field) int { return int(f.at[k]) - 1 }
	o := Offsets{NodeID: at(fNodeID), L1Ports: at(fL1Ports), L2Ports: at(fL2Ports), HopLatency: at(fHopLatency),
		Queue: at(fQueue), Congestion: at(fCongestion16), IngressTS: at(fIngressTS64), EgressTS: at(fEgressTS64),
		TxUtil: at(fTxUtil), Buffer: at(fBuffer), IngressTS64: true, EgressTS64: true}
	if o.Queue < 0 {
		o.Queue, o.Queue16 = at(fQueue16), at(fQueue16) >= 0
	}
	if o.IngressTS < 0 {
		o.IngressTS, o.IngressTS64 = at(fIngressTS32), false
	}
	if o.EgressTS < 0 {
		o.EgressTS, o.EgressTS64 = at(fEgressTS32), false
	}
	return o
}

// Decode fills m from metadata b (at least Words()·4 bytes; the rest is
// domain-specific): every field the layout holds.
func (f *Fields) Decode(m *Metadata, b []byte) {
	*m = Metadata{}
	if f.words == 0 {
		// No field (every field has a word): a report without
		// metadata, as most INT-MD sinks send, reads nothing.
		if len(b) > 0 {
			m.DomainSpecific = b
		}
		return
	}
	var p uint16 // Present
	var ok bool
	if m.NodeID, ok = f.NodeID(b); ok {
		p |= 0x8000 >> BitNodeID
	}
	if m.L1Ingress, m.L1Egress, ok = f.L1Ports(b); ok {
		p |= 0x8000 >> BitL1Ports
	}
	if m.HopLatency, ok = f.HopLatency(b); ok {
		p |= 0x8000 >> BitHopLatency
	}
	if m.QueueID, m.QueueOccupancy, ok = f.Queue(b); ok {
		p |= 0x8000 >> BitQueue
	}
	if m.IngressTimestamp, ok = f.IngressTimestamp(b); ok {
		p |= 0x8000 >> BitIngressTS
	}
	if m.EgressTimestamp, ok = f.EgressTimestamp(b); ok {
		p |= 0x8000 >> BitEgressTS
	}
	if m.L2Ingress, m.L2Egress, ok = f.L2Ports(b); ok {
		p |= 0x8000 >> BitL2Ports
	}
	if m.TxUtilization, ok = f.TxUtilization(b); ok {
		p |= 0x8000 >> BitTxUtil
	}
	if m.BufferID, m.BufferOccupancy, ok = f.Buffer(b); ok {
		p |= 0x8000 >> BitBuffer
	}
	if m.Checksum, ok = f.word(b, fChecksum); ok {
		p |= 0x8000 >> BitChecksum
	}
	if w, ok := f.word(b, fDrop); ok {
		m.DropQueueID, m.DropReason = uint8(w>>24), uint8(w>>16)
		p |= 0x8000 >> BitDropReason
	}
	if id, status, ok := f.Congestion(b); ok {
		m.QueueID, m.QueueCongestion = id, status
		p |= 0x8000 >> BitQueueCongestion
	}
	m.Present = p
	if off := 4 * f.words; off < len(b) {
		m.DomainSpecific = b[off:]
	}
}

// appendMetadata appends m's fields requested by bitmap under l: fields
// not in m.Present are written as all ones (not available), reserved bits
// too.
func appendMetadata(dst []byte, m *Metadata, l *layout, bitmap uint16) []byte {
	for bit := 0; bit <= maxInstruction; bit++ {
		if bitmap&(0x8000>>bit) == 0 {
			continue
		}
		k := l.kinds[bit]
		if k == fReserved || !m.Has(int(presentBit[k])) {
			for range 4 * int(fieldWords[k]) {
				dst = append(dst, 0xFF)
			}
			continue
		}
		var w uint32
		switch k {
		case fNodeID:
			w = m.NodeID
		case fL1Ports:
			w = uint32(m.L1Ingress)<<16 | uint32(m.L1Egress)
		case fHopLatency:
			w = m.HopLatency
		case fQueue:
			w = uint32(m.QueueID)<<24 | m.QueueOccupancy&0xFFFFFF
		case fQueue16:
			w = uint32(m.QueueID)<<16 | m.QueueOccupancy&0xFFFF
		case fIngressTS32:
			w = uint32(m.IngressTimestamp)
		case fIngressTS64:
			dst = binary.BigEndian.AppendUint64(dst, m.IngressTimestamp)
			continue
		case fEgressTS32:
			w = uint32(m.EgressTimestamp)
		case fEgressTS64:
			dst = binary.BigEndian.AppendUint64(dst, m.EgressTimestamp)
			continue
		case fL2Ports:
			dst = binary.BigEndian.AppendUint32(dst, m.L2Ingress)
			w = m.L2Egress
		case fTxUtil:
			w = m.TxUtilization
		case fBuffer:
			w = uint32(m.BufferID)<<24 | m.BufferOccupancy&0xFFFFFF
		case fChecksum:
			w = m.Checksum
		case fDrop:
			w = uint32(m.DropQueueID)<<24 | uint32(m.DropReason)<<16
		case fCongestion16:
			w = uint32(m.QueueID)<<16 | m.QueueCongestion&0xFFFF
		}
		dst = binary.BigEndian.AppendUint32(dst, w)
	}
	return append(dst, m.DomainSpecific...)
}

// Error is a decoding error: which header, what is wrong.
type Error struct {
	Op     string // "int shim", "int-md", "int-mx", "report group", "individual report", "metadata"
	Err    error  // one of the sentinels
	Detail string
}

func (e *Error) Error() string {
	if e.Detail == "" {
		return fmt.Sprintf("inband: %s: %v", e.Op, e.Err)
	}
	return fmt.Sprintf("inband: %s: %v: %s", e.Op, e.Err, e.Detail)
}

func (e *Error) Unwrap() error { return e.Err }

func newError(op string, err error, detail string) *Error {
	return &Error{Op: op, Err: err, Detail: detail}
}
