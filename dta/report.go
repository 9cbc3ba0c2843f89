package dta

// Report is one DTA report, the whole payload of a UDP datagram to
// [ReportPort]: a base header and the sub-header its opcode names. Only the
// sub-header field matching Header.Opcode is meaningful; the others are
// zero after decoding and ignored when encoding.
//
// A software translator decodes a datagram with [ParseReport] and switches
// on Header.Opcode.
type Report struct {
	Header       Header
	KeyWrite     KeyWrite     // when Header.Opcode is OpKeyWrite
	Append       Append       // when Header.Opcode is OpAppend
	KeyIncrement KeyIncrement // when Header.Opcode is OpKeyIncrement
	Postcard     Postcard     // when Header.Opcode is OpPostcard
}

// Len returns the encoded length of r, base header, sub-header and data.
func (r *Report) Len() int {
	n := r.Header.Len()
	switch r.Header.Opcode {
	case OpKeyWrite:
		n += r.KeyWrite.Len()
	case OpAppend:
		n += r.Append.Len()
	case OpKeyIncrement:
		n += KeyIncrementLen
	case OpPostcard:
		n += r.Postcard.Len()
	}
	return n
}

// AppendTo appends the encoded report to b and returns the extended slice:
// the base header, then the sub-header Header.Opcode names (nothing for an
// unknown opcode). It does not check the fields ([Report.Validate] does)
// and does not allocate when b has room for [Report.Len] more bytes.
func (r *Report) AppendTo(b []byte) []byte {
	b = r.Header.AppendTo(b)
	switch r.Header.Opcode {
	case OpKeyWrite:
		b = r.KeyWrite.AppendTo(b)
	case OpAppend:
		b = r.Append.AppendTo(b)
	case OpKeyIncrement:
		b = r.KeyIncrement.AppendTo(b)
	case OpPostcard:
		b = r.Postcard.AppendTo(b)
	}
	return b
}

// Validate reports what is wrong with r, or nil: the checks of
// [Header.Validate] and of the sub-header's Validate. A report that passes
// encodes to bytes [ParseReport] accepts.
func (r *Report) Validate() error {
	if err := r.Header.Validate(); err != nil {
		return err
	}
	switch r.Header.Opcode {
	case OpKeyWrite:
		return r.KeyWrite.Validate()
	case OpAppend:
		return r.Append.Validate()
	case OpKeyIncrement:
		return r.KeyIncrement.Validate()
	default: // OpPostcard; Header.Validate rejected the rest
		return r.Postcard.Validate()
	}
}

// ParseReport decodes a whole DTA report, the payload of a UDP datagram.
// Data fields alias b. On error the returned report is the zero value.
// It does not allocate.
func ParseReport(b []byte) (Report, error) {
	var r Report
	err := r.decode(b)
	return r, err
}

// decode fills r from b, leaving r zero on error.
func (r *Report) decode(b []byte) error {
	*r = Report{}
	h, err := ParseHeader(b)
	if err != nil {
		return err
	}
	rest := b[h.Len():]
	switch h.Opcode {
	case OpKeyWrite:
		r.KeyWrite, err = ParseKeyWrite(rest)
	case OpAppend:
		r.Append, err = ParseAppend(rest)
	case OpKeyIncrement:
		r.KeyIncrement, err = ParseKeyIncrement(rest)
	default: // OpPostcard; ParseHeader rejected the rest
		r.Postcard, err = ParsePostcard(rest)
	}
	if err != nil {
		*r = Report{}
		return err
	}
	r.Header = h
	return nil
}
