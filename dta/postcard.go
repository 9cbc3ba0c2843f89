package dta

import "encoding/binary"

// Postcarding sub-header (spec section 3), 9 bytes, or 10 with the path
// length:
//
//	+-------------------------------------------------------------+
//	|                    key / flow ID (4)                        |
//	+---------------+---------------------------------------------+
//	|   hop (1..)   |                  value (4)                  |
//	+---------------+---------------+-----------------------------+
//	| path length   |  (optional; absent or 0 = unknown)
//	+---------------+

// Postcard is a Postcarding sub-header: hop Hop of flow Key saw Value.
type Postcard struct {
	Key   uint32 // flow ID, big-endian on the wire
	Hop   uint8  // 1-based hop number
	Value uint32 // the hop's value
	// PathLength is the number of hops on the flow's path, 0 = unknown.
	PathLength uint8
	// HasPathLength reports whether the path-length byte is on the wire.
	// Decoding sets it when the sub-header is 10 bytes long; encoding
	// writes the byte when it is set or PathLength is not 0.
	HasPathLength bool
}

// Encoded lengths of a Postcarding sub-header.
const (
	PostcardLen     = 9  // without the path length
	PostcardLongLen = 10 // with it
)

// Len returns the encoded length: [PostcardLongLen] when the path length is
// sent, [PostcardLen] otherwise.
func (p Postcard) Len() int { return p.len() }

// len, appendTo and validate are Len, AppendTo and Validate without copying
// p, for [Report]'s methods: a copy loaded just after a reporter set p's
// fields stalls store forwarding.
func (p *Postcard) len() int {
	if p.HasPathLength || p.PathLength != 0 {
		return PostcardLongLen
	}
	return PostcardLen
}

// AppendTo appends the encoded sub-header to b and returns the extended
// slice. It does not check the fields and does not allocate when b has room.
func (p Postcard) AppendTo(b []byte) []byte { return p.appendTo(b) }

func (p *Postcard) appendTo(b []byte) []byte {
	b = binary.BigEndian.AppendUint32(b, p.Key)
	b = append(b, p.Hop)
	b = binary.BigEndian.AppendUint32(b, p.Value)
	if p.HasPathLength || p.PathLength != 0 {
		b = append(b, p.PathLength)
	}
	return b
}

// Validate reports what is wrong with p (hop number 0), or nil.
func (p Postcard) Validate() error { return p.validate() }

func (p *Postcard) validate() error {
	if p.Hop == 0 {
		return errPostcardHopZero
	}
	return nil
}

// ParsePostcard decodes a Postcarding sub-header: b is everything after the
// base header and must be 9 or 10 bytes. It does not allocate.
func ParsePostcard(b []byte) (Postcard, error) {
	var p Postcard
	err := p.decode(b)
	return p, err
}

// decode is ParsePostcard into p, which it leaves zero on error, for
// [Report.Decode]: a Postcard returned by value is copied with wider loads
// straight after its narrow stores, which stall store forwarding.
func (p *Postcard) decode(b []byte) error {
	if len(b) < PostcardLen {
		return errPostcardShort
	}
	if len(b) > PostcardLongLen {
		return errPostcardTrailing
	}
	if b[4] == 0 {
		return errPostcardHopZero
	}
	p.Key = binary.BigEndian.Uint32(b[0:4])
	p.Hop = b[4]
	p.Value = binary.BigEndian.Uint32(b[5:9])
	if len(b) == PostcardLongLen {
		p.HasPathLength = true
		p.PathLength = b[9]
	}
	return nil
}
