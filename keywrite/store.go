package keywrite

import (
	"bytes"
	"encoding/binary"
	"fmt"
)

// Policy is how a query turns the copies whose checksum matches into an
// answer. The zero Policy is Plurality.
type Policy struct {
	kind      policyKind
	threshold int
}

type policyKind uint8

const (
	pluralityKind policyKind = iota
	firstMatchKind
	consensusKind
)

var (
	// Plurality answers with the value held by the most matching copies;
	// a tie between different values is Ambiguous. It is the default.
	Plurality = Policy{}
	// FirstMatch answers with the first copy, in copy order, whose checksum
	// matches: the paper's method. A single query stops reading at that copy.
	FirstMatch = Policy{kind: firstMatchKind}
)

// Consensus answers only when at least t matching copies (1..255) hold the
// same value; fewer gives NoConsensus.
func Consensus(t int) Policy { return Policy{kind: consensusKind, threshold: t} }

func (p Policy) String() string {
	switch p.kind {
	case pluralityKind:
		return "plurality"
	case firstMatchKind:
		return "first-match"
	default:
		return fmt.Sprintf("consensus(%d)", p.threshold)
	}
}

func (p Policy) validate() error {
	switch p.kind {
	case pluralityKind, firstMatchKind:
		return nil
	case consensusKind:
		if p.threshold >= 1 && p.threshold <= MaxRedundancy {
			return nil
		}
	}
	return fmt.Errorf("query: %w: %v, threshold must be 1..255", ErrPolicy, p)
}

// Status is the outcome of a query.
type Status uint8

const (
	// Empty: no copy's checksum matched the key.
	Empty Status = iota
	// Found: Data is the answer.
	Found
	// Ambiguous: different values tie for the most matching copies.
	Ambiguous
	// NoConsensus: copies matched, but fewer than the consensus threshold
	// agree on one value.
	NoConsensus
)

func (s Status) String() string {
	switch s {
	case Empty:
		return "empty"
	case Found:
		return "found"
	case Ambiguous:
		return "ambiguous"
	case NoConsensus:
		return "no-consensus"
	}
	return fmt.Sprintf("Status(%d)", uint8(s))
}

// Verdict returns s in the words every primitive's answers share (the
// collector's HTTP API, exported files, Postcarding's outcomes): "found",
// "not found" (Empty) or "conflict" (Ambiguous, NoConsensus).
func (s Status) Verdict() string {
	switch s {
	case Found:
		return "found"
	case Empty:
		return "not found"
	}
	return "conflict"
}

// Result is the answer to one query.
type Result struct {
	// Data is the value when Status is Found, otherwise nil. It aliases the
	// store's region: copy it to keep it past later writes.
	Data []byte
	// Status says whether Data is an answer.
	Status Status
	// Matches is the number of distinct slots whose checksum matched (with
	// FirstMatch, 1 when found: a query stops at the first match).
	Matches uint8
	// Votes is the number of matching slots that hold Data, or hold each of
	// the tied values when Ambiguous.
	Votes uint8
}

// Store is a Key-Write region: it applies the translator's writes and
// answers queries from the bytes. The region may be heap memory or memory
// the caller mapped (a hugepage mmap registered with an RDMA NIC).
//
// Queries may run concurrently with each other. Apply and Put must not run
// concurrently with queries in the same process (a NIC writing the region
// is outside the Go memory model: a torn slot then fails its checksum or
// reads as another value, as with any overwrite).
type Store struct {
	layout Layout
	region []byte // exactly layout.RegionSize() bytes
}

// NewStore returns a Store over region with layout l. A nil region
// allocates a zeroed one of l.RegionSize() bytes; a region shorter than
// that is an ErrRegion; bytes past it are not used.
func NewStore(l Layout, region []byte) (*Store, error) {
	if err := l.Validate(); err != nil {
		return nil, fmt.Errorf("new store: %w", err)
	}
	l.Hasher = l.hasher()
	size := l.RegionSize()
	if region == nil {
		region = make([]byte, size)
	}
	if uint64(len(region)) < size {
		return nil, fmt.Errorf("new store: %w: region of %d bytes, layout needs %d", ErrRegion, len(region), size)
	}
	return &Store{layout: l, region: region[:size:size]}, nil
}

// Layout returns the store's layout, with its default hasher filled in.
func (s *Store) Layout() Layout { return s.layout }

// Region returns the store's memory, RegionSize bytes.
func (s *Store) Region() []byte { return s.region }

// Apply performs one write. A write reaching past the region is refused
// with ErrOutOfRegion and changes nothing. It does not allocate.
func (s *Store) Apply(w Write) error {
	if w.Offset > uint64(len(s.region)) || uint64(len(w.Data)) > uint64(len(s.region))-w.Offset {
		return errOutOfRegion
	}
	copy(s.region[w.Offset:], w.Data)
	return nil
}

// ApplyWrites performs every write of ops, or none if any of them would
// reach past the region. It does not allocate.
func (s *Store) ApplyWrites(ops []Write) error {
	size := uint64(len(s.region))
	for _, w := range ops {
		if w.Offset > size || uint64(len(w.Data)) > size-w.Offset {
			return errOutOfRegion
		}
	}
	for _, w := range ops {
		copy(s.region[w.Offset:], w.Data)
	}
	return nil
}

// Put writes the report (key, data, n) as the translator would: the same
// bytes as applying AppendWrites's writes. It does not allocate.
func (s *Store) Put(key uint32, data []byte, n int) error {
	l := &s.layout
	if n < 1 || n > MaxRedundancy {
		return errRedundancy
	}
	if len(data) != l.DataSize {
		return errDataSize(len(data), l.DataSize)
	}
	sum := l.Hasher.Checksum(key)
	for i := range n {
		slot := s.region[l.Offset(key, uint8(i)):]
		binary.LittleEndian.PutUint32(slot, sum)
		copy(slot[checksumSize:], data)
	}
	return nil
}

// Query answers key from its first n copies with policy p. n may exceed
// the redundancy the key was written with: the extra copies are slots of
// other keys and rarely match. Copies that land in the same slot count
// once. It does not allocate.
func (s *Store) Query(key uint32, n int, p Policy) (Result, error) {
	if n < 1 || n > MaxRedundancy {
		return Result{}, errRedundancy
	}
	if err := p.validate(); err != nil {
		return Result{}, err
	}
	// Go zeroes a scratch array on every call; a MaxRedundancy one (2 KiB)
	// made a cache-resident Query ~40 % slower, so the usual small n get a
	// small one.
	if n <= smallQuery {
		var matched [smallQuery]uint64
		return s.query(key, n, p, matched[:]), nil
	}
	var matched [MaxRedundancy]uint64
	return s.query(key, n, p, matched[:]), nil
}

// Copy returns the data of copy n of key, aliasing the region, when that
// slot's checksum is key's: the latest value written there for key, with no
// vote. Readers of one-copy-per-report schemes (package pint, DART) read
// copies one by one. It does not allocate.
func (s *Store) Copy(key uint32, n uint8) (data []byte, ok bool) {
	off := s.layout.Offset(key, n)
	if binary.LittleEndian.Uint32(s.region[off:]) != s.layout.Hasher.Checksum(key) {
		return nil, false
	}
	return s.data(off), true
}

// smallQuery is the largest n whose Query scratch is a small array.
const smallQuery = 16

// query is Query after validation; matched has room for n offsets.
func (s *Store) query(key uint32, n int, p Policy, matched []uint64) Result {
	l := &s.layout
	sum := l.Hasher.Checksum(key)
	m := 0
	for i := range n {
		off := l.Offset(key, uint8(i))
		if binary.LittleEndian.Uint32(s.region[off:]) != sum || contains(matched[:m], off) {
			continue
		}
		if p.kind == firstMatchKind {
			return Result{Data: s.data(off), Status: Found, Matches: 1, Votes: 1}
		}
		matched[m] = off
		m++
	}
	return s.voteSlots(matched[:m], p)
}

// data returns the data of the slot at off, aliasing the region.
func (s *Store) data(off uint64) []byte {
	start := off + checksumSize
	end := start + uint64(s.layout.DataSize)
	return s.region[start:end:end]
}

// sameData reports whether the slots at a and b hold the same data.
func (s *Store) sameData(a, b uint64) bool {
	if s.layout.DataSize == 4 {
		return binary.LittleEndian.Uint32(s.region[a+checksumSize:]) == binary.LittleEndian.Uint32(s.region[b+checksumSize:])
	}
	return bytes.Equal(s.data(a), s.data(b))
}

// voteSlots turns the offsets of the distinct matching slots into a Result.
func (s *Store) voteSlots(matched []uint64, p Policy) Result {
	m := len(matched)
	switch {
	case m == 0:
		return Result{}
	case p.kind == firstMatchKind:
		return Result{Data: s.data(matched[0]), Status: Found, Matches: uint8(m), Votes: 1}
	}
	// Count the votes of each distinct value: O(m²) compares, and m is
	// almost always 1 or 2.
	best, bestVotes, tied := 0, 0, false
	for i := 0; i < m; i++ {
		dup := false
		for j := 0; j < i; j++ {
			if s.sameData(matched[i], matched[j]) {
				dup = true
				break
			}
		}
		if dup {
			continue // counted with its first occurrence
		}
		votes := 1
		for j := i + 1; j < m; j++ {
			if s.sameData(matched[i], matched[j]) {
				votes++
			}
		}
		switch {
		case votes > bestVotes:
			best, bestVotes, tied = i, votes, false
		case votes == bestVotes:
			tied = true
		}
	}
	r := Result{Status: p.verdict(bestVotes, tied), Matches: uint8(m), Votes: uint8(bestVotes)}
	if r.Status == Found {
		r.Data = s.data(matched[best])
	}
	return r
}

// verdict is the status of a vote (Plurality or Consensus) whose most
// held value has votes votes, tied when another value has as many.
func (p Policy) verdict(votes int, tied bool) Status {
	switch {
	case p.kind == consensusKind && votes < p.threshold:
		return NoConsensus
	case tied:
		return Ambiguous
	}
	return Found
}

func contains(offs []uint64, off uint64) bool {
	for _, o := range offs {
		if o == off {
			return true
		}
	}
	return false
}
