// Package stream generates the synthetic report streams dtakit's tools send
// (cmd/dtareport) and its cross-process tests check against: report i of a
// stream is a function of the stream's parameters and i alone, so a checker
// can recompute what was sent last under every key.
package stream

import (
	"encoding/binary"
	"fmt"
	"strings"

	"github.com/dtakit/dtakit/dta"
)

// Synthetic describes a stream. Its reports cycle through Mix: report i
// is the j-th report of primitive Mix[i mod len(Mix)], j = i / len(Mix).
//   - Key-Write: key j mod Keys, data value(key, j / Keys) as 4 big-endian
//     bytes, Redundancy copies.
//   - Key-Increment: key j mod Keys, adding 1, Redundancy counters.
//   - Postcarding: flow (j / Hops) mod Keys, hop j mod Hops + 1 of Hops,
//     value value(flow, hop) mod Universe + 1 (never 0).
//   - Append: list j mod Lists, data j / Lists + 1 as EntrySize big-endian
//     bytes (the low 4 bytes; the rest 0).
type Synthetic struct {
	Seed       uint64
	Mix        []dta.Opcode
	Keys       int // distinct keys (flows) per primitive
	Redundancy int // Key-Write copies and Key-Increment counters, 1..255
	Hops       int // postcard path length, 1..255
	Lists      int // Append lists
	EntrySize  int // Append entry size, at least 4
	Universe   int // postcard values are 1..Universe
}

// Default is a stream of all four primitives on 32 768 keys, 2 copies,
// 5 hops of values 1..4096, 8 lists of 4-byte entries.
var Default = Synthetic{Seed: 1, Mix: []dta.Opcode{dta.OpKeyWrite, dta.OpKeyIncrement, dta.OpPostcard, dta.OpAppend},
	Keys: 1 << 15, Redundancy: 2, Hops: 5, Lists: 8, EntrySize: 4, Universe: 4096}

// ParseMix reads a comma-separated list of primitives: keywrite,
// keyincrement, postcard, append (a name repeated weighs it more).
func ParseMix(s string) ([]dta.Opcode, error) {
	var mix []dta.Opcode
	for _, name := range strings.Split(s, ",") {
		switch strings.TrimSpace(name) {
		case "keywrite":
			mix = append(mix, dta.OpKeyWrite)
		case "keyincrement":
			mix = append(mix, dta.OpKeyIncrement)
		case "postcard":
			mix = append(mix, dta.OpPostcard)
		case "append":
			mix = append(mix, dta.OpAppend)
		default:
			return nil, fmt.Errorf("stream: primitive %q: want keywrite, keyincrement, postcard or append", name)
		}
	}
	return mix, nil
}

// Validate reports what is wrong with s.
func (s *Synthetic) Validate() error {
	switch {
	case len(s.Mix) == 0:
		return fmt.Errorf("stream: no primitive in the mix")
	case s.Keys < 1:
		return fmt.Errorf("stream: %d keys", s.Keys)
	case s.Redundancy < 1 || s.Redundancy > 255:
		return fmt.Errorf("stream: redundancy %d, want 1..255", s.Redundancy)
	case s.Hops < 1 || s.Hops > 255:
		return fmt.Errorf("stream: %d hops, want 1..255", s.Hops)
	case s.Lists < 1:
		return fmt.Errorf("stream: %d lists", s.Lists)
	case s.EntrySize < 4 || s.EntrySize > 1024:
		return fmt.Errorf("stream: entry size %d, want 4..1024", s.EntrySize)
	case s.Universe < 1 || s.Universe > 1<<24:
		return fmt.Errorf("stream: postcard universe %d, want 1..2^24", s.Universe)
	}
	return nil
}

// Report fills r with report i; buf (at least EntrySize bytes) holds its
// data, which r aliases.
func (s *Synthetic) Report(i int, r *dta.Report, buf []byte) {
	op := s.Mix[i%len(s.Mix)]
	j := i / len(s.Mix)
	*r = dta.Report{Header: dta.Header{Opcode: op}}
	switch op {
	case dta.OpKeyWrite:
		key := j % s.Keys
		binary.BigEndian.PutUint32(buf, s.Value(key, j/s.Keys))
		r.KeyWrite = dta.KeyWrite{Redundancy: uint8(s.Redundancy), Key: uint32(key), Data: buf[:4]}
	case dta.OpKeyIncrement:
		r.KeyIncrement = dta.KeyIncrement{Redundancy: uint8(s.Redundancy), Key: uint32(j % s.Keys), Counter: 1}
	case dta.OpPostcard:
		flow, hop, round := (j/s.Hops)%s.Keys, j%s.Hops, j/(s.Hops*s.Keys)
		r.Postcard = dta.Postcard{Key: uint32(flow), Hop: uint8(hop + 1), Value: s.PostcardValue(flow, hop, round), PathLength: uint8(s.Hops)}
	case dta.OpAppend:
		d := buf[:s.EntrySize]
		clear(d)
		binary.BigEndian.PutUint32(d[s.EntrySize-4:], uint32(j/s.Lists+1))
		r.Append = dta.Append{ListID: uint32(j % s.Lists), Data: d}
	}
}

// PostcardValue is the value hop (0-based) of flow reports in its round
// (the flow's round-th path): each round takes a new path, so that a
// round lost shows.
func (s *Synthetic) PostcardValue(flow, hop, round int) uint32 {
	return s.Value(flow, round*s.Hops+hop)%uint32(s.Universe) + 1
}

// Value is the pseudo-random value of (a, b) in s (see Value).
func (s *Synthetic) Value(a, b int) uint32 { return Value(s.Seed, a, b) }

// Value is the pseudo-random value of (a, b) under seed: splitmix64 of the
// seed and both.
func Value(seed uint64, a, b int) uint32 {
	x := seed ^ uint64(a)<<32 ^ uint64(b)
	x += 0x9e3779b97f4a7c15
	x = (x ^ x>>30) * 0xbf58476d1ce4e5b9
	x = (x ^ x>>27) * 0x94d049bb133111eb
	return uint32(x ^ x>>31)
}
