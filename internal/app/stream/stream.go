// Package stream generates the synthetic report streams dtakit's tools send
// (cmd/dtareport) and its cross-process tests check against: report i of a
// stream is a function of the stream's parameters and i alone, so a checker
// can recompute what was sent last under every key.
package stream

import (
	"fmt"
	"strings"

	"github.com/dtakit/dtakit/dta"
	"github.com/dtakit/dtakit/postcard"
	"github.com/dtakit/dtakit/primitive"

	// The primitives Default mixes register themselves.
	_ "github.com/dtakit/dtakit/appendlist"
	_ "github.com/dtakit/dtakit/keyincr"
	_ "github.com/dtakit/dtakit/keywrite"
)

// Synthetic describes a stream. Its reports cycle through Mix: report i
// is the j-th report of primitive Mix[i mod len(Mix)], j = i / len(Mix),
// as the primitive's primitive.Generator makes it from the stream's
// parameters (keywrite, keyincr, postcard and appendlist say how).
type Synthetic struct {
	primitive.Synthetic // the parameters; each primitive takes those it needs
	Mix                 []dta.Opcode
}

// Default is a stream of all four primitives on 32 768 keys, 2 copies,
// 5 hops of values 1..4096, 8 lists of 4-byte entries.
var Default = Synthetic{Mix: []dta.Opcode{dta.OpKeyWrite, dta.OpKeyIncrement, dta.OpPostcard, dta.OpAppend},
	Synthetic: primitive.Synthetic{Seed: 1, Keys: 1 << 15, Redundancy: 2, Hops: 5, Lists: 8, EntrySize: 4, Universe: 4096}}

// ParseMix reads a comma-separated list of the names of primitives that
// generate reports (keywrite, keyincrement, postcard, append); a name
// repeated weighs it more.
func ParseMix(s string) ([]dta.Opcode, error) {
	var mix []dta.Opcode
	for _, name := range strings.Split(s, ",") {
		k, ok := primitive.ByName(strings.TrimSpace(name))
		if _, gen := k.(primitive.Generator); !ok || !gen {
			return nil, fmt.Errorf("stream: primitive %q: want one of %s", name, strings.Join(generators(), ", "))
		}
		mix = append(mix, k.Opcode())
	}
	return mix, nil
}

// generators returns the names of the registered primitives that generate
// reports.
func generators() []string {
	var names []string
	for _, n := range primitive.Names() {
		if k, _ := primitive.ByName(n); k != nil {
			if _, ok := k.(primitive.Generator); ok {
				names = append(names, n)
			}
		}
	}
	return names
}

// Validate reports what is wrong with s.
func (s *Synthetic) Validate() error {
	switch {
	case len(s.Mix) == 0:
		return fmt.Errorf("stream: no primitive in the mix")
	case !s.generates():
		return fmt.Errorf("stream: a primitive of the mix %v generates no reports: want one of %s", s.Mix, strings.Join(generators(), ", "))
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

// generates reports whether every primitive of the mix is registered and
// generates reports.
func (s *Synthetic) generates() bool {
	for _, op := range s.Mix {
		k, _ := primitive.Lookup(op)
		if _, ok := k.(primitive.Generator); !ok {
			return false
		}
	}
	return true
}

// Report fills r with report i of s (valid); buf (at least EntrySize
// bytes) holds its data, which r aliases.
func (s *Synthetic) Report(i int, r *dta.Report, buf []byte) {
	op := s.Mix[i%len(s.Mix)]
	*r = dta.Report{Header: dta.Header{Opcode: op}}
	g := builtIn[op]
	if g == nil {
		g = generator(op)
	}
	if g != nil {
		g.Generate(&s.Synthetic, i/len(s.Mix), r, buf)
	}
}

// builtIn holds, by opcode, the Generators registered before this package
// was initialised (the four it imports among them): Report, called once
// per datagram sent, looks its primitive up here, not in the registry.
// Read only after init, so that Report is safe for concurrent use.
var builtIn [256]primitive.Generator

func init() {
	for _, k := range primitive.Kinds() {
		builtIn[k.Opcode()] = generator(k.Opcode())
	}
}

// generator returns the Generator registered under op, or nil.
func generator(op dta.Opcode) primitive.Generator {
	k, _ := primitive.Lookup(op)
	g, _ := k.(primitive.Generator)
	return g
}

// PostcardValue is the value hop (0-based) of flow reports in its round
// (postcard.SyntheticValue).
func (s *Synthetic) PostcardValue(flow, hop, round int) uint32 {
	return postcard.SyntheticValue(&s.Synthetic, flow, hop, round)
}

// Value is the pseudo-random value of (a, b) under seed
// (primitive.SyntheticValue).
func Value(seed uint64, a, b int) uint32 { return primitive.SyntheticValue(seed, a, b) }
