// Package postcard implements DTA's Postcarding primitive (spec section 5,
// paper section 4 and Appendix A): the translator's per-flow postcard cache
// that turns up to B per-hop postcards into one chunk write per copy (or a
// write per run of the slots it knows, for a flow written before it
// completes: Chunk.Skip), and the
// collector's decoder that recovers a flow's path from the N copies of its
// chunk.
//
// Hop i of flow x is stored in slot i-1 of each copy's chunk as
// trunc_b(checksum_i(x)) XOR g(v). The decoder undoes the XOR with the same
// checksum and looks the code up in a [Table] built from the value universe
// V; a chunk is valid for x when its first l slots decode to values of V and
// the rest to the blank (value 0).
//
// Copy 0 of a flow is addressed as spec section 4 says; by default each later
// copy is hashed with its own polynomial ([PerCopyAddressing]), so copies
// collide independently and N > 1 protects against overwriting. Section 4's
// own formula, [ReferenceAddressing], puts all copies of two colliding flows
// on the same chunks (see [Addressing] and [Layout.Bounds]). [Store.QueryBatch] is the fast way to query: it
// overlaps the memory accesses of many keys.
package postcard

import (
	"errors"
	"fmt"
	"math/bits"
)

// Errors returned by this package. Each error wraps exactly one of them.
var (
	// ErrLayout: a Layout field is out of range or the layout does not fit.
	ErrLayout = errors.New("postcard: invalid layout")
	// ErrHop: a postcard's hop number is 0 or above the layout's hops.
	ErrHop = errors.New("postcard: hop number out of range")
	// ErrPathLen: a postcard's path length is above the layout's hops or
	// below its hop number.
	ErrPathLen = errors.New("postcard: path length out of range")
	// ErrValue: the value is reserved (0 is the blank) or does not fit.
	ErrValue = errors.New("postcard: invalid value")
	// ErrRegion: a memory region is too small, or a write falls outside it
	// or has the wrong size.
	ErrRegion = errors.New("postcard: write outside region")
	// ErrGeometry: an encoded layout is malformed (length, version, value
	// code).
	ErrGeometry = errors.New("postcard: bad layout geometry")
	// ErrSizing: a Size target it cannot meet or understand.
	ErrSizing = errors.New("postcard: cannot size")
	// ErrSnapshot: a snapshot into a store of another layout.
	ErrSnapshot = errors.New("postcard: cannot snapshot")
)

// MaxHops is the largest path length a Layout supports.
const MaxHops = 16

// MaxCopies is the largest redundancy a Layout supports.
const MaxCopies = 16

// MaxChunkSize is the largest chunk, MaxHops slots of 32 bits.
const MaxChunkSize = MaxHops * 4

// Checksums selects the per-hop checksum functions.
type Checksums uint8

const (
	// DefaultChecksums are dtakit's odd polynomials over le32(key), one per
	// hop up to MaxHops (docs/DTA-WIRE.md section 8.5).
	DefaultChecksums Checksums = iota
	// PrototypeChecksums are the reference prototype's five polynomials
	// (two even) over be32(key). They exist to read memory the prototype
	// wrote and allow at most 5 hops.
	PrototypeChecksums
)

// Addressing selects how the chunk of each copy is found. Its values are
// also its geometry encoding (docs/DTA-WIRE.md section 8.5).
type Addressing uint8

const (
	// PerCopyAddressing is the default (zero value): copy 0 at
	// CRC32(le32(key) ‖ u8(0)) & (C-1), as spec section 4, and copy j ≥ 1
	// with the same field list, le32(key) ‖ u8(j), hashed with its own
	// polynomial, tofino.CopyPolynomial(j), as tofino.PerCopy does. Copies
	// collide independently and N copies give the paper's bounds; with one
	// copy it is ReferenceAddressing.
	PerCopyAddressing Addressing = iota
	// ReferenceAddressing is spec section 4 as written: copy j at
	// CRC32(le32(key) ‖ u8(j)) & (C-1). A CRC is affine, so the copies of
	// one key sit at a key-independent XOR of each other: two flows that
	// share one copy's chunk share every copy's chunk, and redundancy does
	// not protect against overwriting (see Layout.Bounds). Use it to read
	// memory written by a switch that follows section 4 as written.
	ReferenceAddressing
	// PrototypeAddressing is the reference prototype's: one copy, at
	// CRC32(be32(key)) & (C-1). With PrototypeChecksums it reads memory the
	// prototype wrote.
	PrototypeAddressing
)

// Layout is the geometry of one Postcarding region.
type Layout struct {
	// Hops is B, the slots per chunk (1..MaxHops; 0 means 5).
	Hops int
	// SlotBits is b, the width of a hop slot: 8, 16 or 32 (0 means 32).
	SlotBits int
	// Chunks is C, the number of chunks, a power of two.
	Chunks uint32
	// Copies is N, the chunks written per flow (1..MaxCopies; 0 means 1).
	Copies int
	// Checksums selects the hop checksum functions.
	Checksums Checksums
	// Addressing selects the chunk hash of each copy (0 means
	// PerCopyAddressing).
	Addressing Addressing
}

// withDefaults fills the zero fields.
func (l Layout) withDefaults() Layout {
	if l.Hops == 0 {
		l.Hops = 5
	}
	if l.SlotBits == 0 {
		l.SlotBits = 32
	}
	if l.Copies == 0 {
		l.Copies = 1
	}
	return l
}

// Validate reports what is wrong with l, or nil. Zero fields take their
// defaults.
func (l Layout) Validate() error {
	l = l.withDefaults()
	if l.Hops < 1 || l.Hops > MaxHops {
		return fmt.Errorf("%w: %d hops, want 1..%d", ErrLayout, l.Hops, MaxHops)
	}
	switch l.SlotBits {
	case 8, 16, 32:
	default:
		return fmt.Errorf("%w: slot width %d bits, want 8, 16 or 32", ErrLayout, l.SlotBits)
	}
	if l.Chunks == 0 || l.Chunks&(l.Chunks-1) != 0 {
		return fmt.Errorf("%w: %d chunks, want a power of two", ErrLayout, l.Chunks)
	}
	if l.Copies < 1 || l.Copies > MaxCopies {
		return fmt.Errorf("%w: %d copies, want 1..%d", ErrLayout, l.Copies, MaxCopies)
	}
	switch l.Checksums {
	case DefaultChecksums:
	case PrototypeChecksums:
		if l.Hops > len(prototypePolys) {
			return fmt.Errorf("%w: prototype checksums cover %d hops, not %d", ErrLayout, len(prototypePolys), l.Hops)
		}
	default:
		return fmt.Errorf("%w: unknown checksum set %d", ErrLayout, l.Checksums)
	}
	switch l.Addressing {
	case PerCopyAddressing, ReferenceAddressing:
	case PrototypeAddressing:
		if l.Copies != 1 {
			return fmt.Errorf("%w: prototype addressing has 1 copy, not %d", ErrLayout, l.Copies)
		}
	default:
		return fmt.Errorf("%w: unknown addressing %d", ErrLayout, l.Addressing)
	}
	return nil
}

// ChunkSize returns nextpow2(B·b/8), the bytes of one chunk.
func (l Layout) ChunkSize() int {
	l = l.withDefaults()
	n := l.Hops * l.SlotBits / 8
	return 1 << bits.Len(uint(n-1))
}

// RegionSize returns C·ChunkSize, the bytes of the region.
func (l Layout) RegionSize() uint64 {
	return uint64(l.Chunks) * uint64(l.ChunkSize())
}
