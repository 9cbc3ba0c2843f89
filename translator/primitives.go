package translator

import (
	"fmt"

	"github.com/dtakit/dtakit/dta"
	"github.com/dtakit/dtakit/primitive"
	"github.com/dtakit/dtakit/rocev2"

	// The four primitives register themselves (package primitive).
	_ "github.com/dtakit/dtakit/appendlist"
	_ "github.com/dtakit/dtakit/keyincr"
	_ "github.com/dtakit/dtakit/keywrite"
	_ "github.com/dtakit/dtakit/postcard"
)

// instance is one primitive instance of a collector: its CM port, its QP,
// its region (from the advertisement) and the translation state of its
// primitive.
type instance struct {
	col     *collector
	port    uint16
	conn    conn  // the software or the verbs QP, nil while there is none
	err     error // why the instance is not usable
	retryAt int64 // when a failed instance tries to connect again (0: never)

	prim dta.Opcode
	ad   dta.Advertisement // Geometry owned by the instance
	geom string            // the geometry as advertised, to notice a change

	// tr is the primitive's translation state (package primitive); held
	// holds the wide reports tr keeps back (a postcard cache entry's hops
	// not yet written, an Append list's pending entries), by tr's slot,
	// settled when their write is acknowledged (nil until one comes).
	tr   primitive.Translator
	held *heldTokens
}

// maxTrackedEntries bounds the slots·per of a Translator's held reports
// kept in one array; a larger one keeps them in a map (heldTokens).
const maxTrackedEntries = 1 << 18

// ready reports whether in can take reports.
func (in *instance) ready() bool { return in.conn != nil && in.conn.ready() }

// configure sets up in's translation state from its advertisement: the
// primitive registered under its opcode decodes the geometry (package
// primitive). A repeated advertisement (after a reconnection) with the same
// primitive and geometry keeps the state (cached postcards, pending
// appends); the region's address and rkey are taken from the new one. A
// new layout forgets in.held: the caller settles its reports.
func (in *instance) configure(ad dta.Advertisement, cfg Config) error {
	if ad.IsReference() {
		return fmt.Errorf("%w: a reference-only advertisement names no primitive", ErrUnsupported)
	}
	geom := string(ad.Geometry)
	ad.Geometry = []byte(geom)
	if in.prim == ad.Primitive && in.geom == geom {
		in.ad = ad
		return nil
	}
	k, ok := primitive.Lookup(ad.Primitive)
	if !ok {
		return fmt.Errorf("%w: %v", ErrUnsupported, ad.Primitive)
	}
	l, err := k.ParseLayout(ad.Geometry)
	if err != nil {
		return err
	}
	// The region bounds the translator's memory: checked first.
	if l.RegionSize() > uint64(ad.Length) {
		return fmt.Errorf("region of %d bytes, the layout needs %d", ad.Length, l.RegionSize())
	}
	tr, err := l.NewTranslator(primitive.Config{
		PostcardCache: cfg.PostcardCache, PostcardLinger: cfg.PostcardLinger, AppendLinger: cfg.AppendLinger, MTU: MTU,
	})
	if err != nil {
		return err
	}
	in.tr, in.held = tr, nil
	in.prim, in.ad, in.geom = ad.Primitive, ad, geom
	return nil
}

// maxPacket returns the longest datagram in's translation sends.
func (in *instance) maxPacket() int {
	const write = rocev2.BTHLen + rocev2.RETHLen + rocev2.ImmDtLen + 3 + rocev2.ICRCLen
	if in.tr == nil {
		return maxPacketLen
	}
	n := rocev2.BTHLen + rocev2.AtomicETHLen + rocev2.ICRCLen
	if w := in.tr.MaxWrite(); w > 0 {
		n = max(n, write+min(w, MTU))
	}
	return n
}

// scratch is the translation paths' reusable space.
type scratch struct {
	pkt   rocev2.Packet
	heads []uint64
}

// Flush writes what the translator holds back: every cached postcard flow's
// chunks and every partial append batch, on every ready instance, whatever
// the rate limit. What does not fit a retransmit ring, or belongs to an
// instance that is not ready, is counted in FlushLost. The next output
// acknowledges every source owed an ack, however recently acknowledged.
func (e *Engine) Flush() {
	e.ackAll = true
	for _, col := range e.collectors {
		for _, in := range col.instances {
			if in.tr != nil {
				in.tr.Flush(e.sinkFor(in))
			}
		}
	}
}
