// Package inband decodes and encodes In-band Network Telemetry (INT v2.x,
// the p4.org dataplane specification) and Telemetry Reports (v2.0, the
// p4.org report format), the telemetry that DTA's reporters carry: the
// INT shim header over TCP or UDP, the INT-MD header with its per-hop
// metadata stack, the INT-MX header, and the Telemetry Report group header
// with its individual reports. Every type is a gopacket layer; decoding
// allocates nothing. See docs/DTA-WIRE.md section 8.9 for the decisions
// made where the specifications leave room.
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

// wordsOf returns the 4-byte words instruction bit b requests: 2 for the
// timestamps and level 2 ports, 1 for every other bit (reserved bits
// included, as the INT specification has transit hops fill them).
func wordsOf(b int) int {
	if b >= BitIngressTS && b <= BitL2Ports {
		return 2
	}
	return 1
}

// BaselineWords returns the words of metadata an instruction bitmap
// requests per hop.
func BaselineWords(bitmap uint16) int {
	n := 0
	for b := 0; b <= maxInstruction; b++ {
		if bitmap&(0x8000>>b) != 0 {
			n += wordsOf(b)
		}
	}
	return n
}

// Metadata is one hop's (or one report's) metadata, decoded by an
// instruction bitmap. Present has bit b (numbered as the bitmap, 0 the
// most significant) set for each field that was in the bytes and not the
// specification's all-ones "not available" value.
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
	// DropQueueID and DropReason are a report's RepMdBits bit 15.
	DropQueueID uint8
	DropReason  uint8
	// DomainSpecific is the hop's domain-specific metadata (the words
	// after the baseline ones). It aliases the decoded bytes.
	DomainSpecific []byte
}

// Has reports whether field bit b was present and available.
func (m *Metadata) Has(b int) bool { return m.Present&(0x8000>>b) != 0 }

// decodeMetadata fills m from b, laid out by bitmap (report selects the
// Telemetry Report meanings of bits 0 and 15). b must hold at least
// BaselineWords(bitmap)·4 bytes; the rest is domain-specific.
func decodeMetadata(m *Metadata, bitmap uint16, b []byte, report bool) {
	*m = Metadata{}
	off := 0
	for bm := bitmap; bm != 0; {
		bit := bits.LeadingZeros16(bm)
		mask := uint16(0x8000) >> bit
		bm &^= mask
		n := 4 * wordsOf(bit)
		f := b[off : off+n]
		off += n
		if allOnes(f) {
			continue // the hop could not provide it
		}
		w := binary.BigEndian.Uint32(f)
		known := true
		switch bit {
		case BitNodeID:
			if known = !report; known {
				m.NodeID = w
			}
		case BitL1Ports:
			m.L1Ingress, m.L1Egress = uint16(w>>16), uint16(w)
		case BitHopLatency:
			m.HopLatency = w
		case BitQueue:
			m.QueueID, m.QueueOccupancy = uint8(w>>24), w&0xFFFFFF
		case BitIngressTS:
			m.IngressTimestamp = binary.BigEndian.Uint64(f)
		case BitEgressTS:
			m.EgressTimestamp = binary.BigEndian.Uint64(f)
		case BitL2Ports:
			m.L2Ingress, m.L2Egress = w, binary.BigEndian.Uint32(f[4:])
		case BitTxUtil:
			m.TxUtilization = w
		case BitBuffer:
			m.BufferID, m.BufferOccupancy = uint8(w>>24), w&0xFFFFFF
		case 15:
			if report {
				m.DropQueueID, m.DropReason = uint8(w>>24), uint8(w>>16)
			} else {
				m.Checksum = w
			}
		default:
			known = false // reserved: skipped
		}
		if known {
			m.Present |= mask
		}
	}
	if off < len(b) {
		m.DomainSpecific = b[off:]
	}
}

// appendMetadata appends m's fields requested by bitmap: fields not in
// m.Present are written as all ones (not available), reserved bits too.
func appendMetadata(dst []byte, m *Metadata, bitmap uint16, report bool) []byte {
	for bit := 0; bit <= maxInstruction; bit++ {
		mask := uint16(0x8000) >> bit
		if bitmap&mask == 0 {
			continue
		}
		if m.Present&mask == 0 {
			for range 4 * wordsOf(bit) {
				dst = append(dst, 0xFF)
			}
			continue
		}
		switch bit {
		case BitNodeID:
			dst = binary.BigEndian.AppendUint32(dst, m.NodeID)
		case BitL1Ports:
			dst = binary.BigEndian.AppendUint32(dst, uint32(m.L1Ingress)<<16|uint32(m.L1Egress))
		case BitHopLatency:
			dst = binary.BigEndian.AppendUint32(dst, m.HopLatency)
		case BitQueue:
			dst = binary.BigEndian.AppendUint32(dst, uint32(m.QueueID)<<24|m.QueueOccupancy&0xFFFFFF)
		case BitIngressTS:
			dst = binary.BigEndian.AppendUint64(dst, m.IngressTimestamp)
		case BitEgressTS:
			dst = binary.BigEndian.AppendUint64(dst, m.EgressTimestamp)
		case BitL2Ports:
			dst = binary.BigEndian.AppendUint32(dst, m.L2Ingress)
			dst = binary.BigEndian.AppendUint32(dst, m.L2Egress)
		case BitTxUtil:
			dst = binary.BigEndian.AppendUint32(dst, m.TxUtilization)
		case BitBuffer:
			dst = binary.BigEndian.AppendUint32(dst, uint32(m.BufferID)<<24|m.BufferOccupancy&0xFFFFFF)
		case 15:
			if report {
				dst = binary.BigEndian.AppendUint32(dst, uint32(m.DropQueueID)<<24|uint32(m.DropReason)<<16)
			} else {
				dst = binary.BigEndian.AppendUint32(dst, m.Checksum)
			}
		default:
			dst = append(dst, 0xFF, 0xFF, 0xFF, 0xFF)
		}
	}
	return append(dst, m.DomainSpecific...)
}

func allOnes(b []byte) bool {
	for _, c := range b {
		if c != 0xFF {
			return false
		}
	}
	return true
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
