package dta

import (
	"bytes"
	"errors"
	"testing"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
)

// The fuzz targets check that no decoder panics, that every error is an
// *Error wrapping a sentinel, and that every input that decodes re-encodes
// to exactly its bytes. The round trip holds on all inputs, not only on
// canonical ones, because decoded values keep the reserved bits and whether
// the optional postcard path length was present.

func addSeeds(f *testing.F, after int) {
	for _, r := range testReports {
		b := r.AppendTo(nil)
		f.Add(b[min(after, len(b)):])
	}
	for _, s := range []string{"", "01", "0140", "0100", "ff80", "0300010000000100000000000000", "04000000000100000000020500",
		"0000000980040000a1a2a3a4a5a6a7a8", "0160000000070102030405060708040000000100000001"} {
		f.Add(unhex(f, s))
	}
}

func checkDecodeErr(t *testing.T, err error) {
	t.Helper()
	var e *Error
	if !errors.As(err, &e) {
		t.Fatalf("error %v (%T) is not an *Error", err, err)
	}
	for _, s := range []error{ErrTruncated, ErrUnknownOpcode, ErrRedundancy, ErrDataLength, ErrHopZero, ErrTrailingBytes} {
		if errors.Is(err, s) {
			return
		}
	}
	t.Fatalf("error %v wraps no decoding sentinel", err)
}

func FuzzParseHeader(f *testing.F) {
	addSeeds(f, 0)
	f.Fuzz(func(t *testing.T, b []byte) {
		h, err := ParseHeader(b)
		if err != nil {
			checkDecodeErr(t, err)
			return
		}
		if err := h.Validate(); err != nil {
			t.Fatalf("decoded header %+v fails Validate: %v", h, err)
		}
		if got := h.AppendTo(nil); !bytes.Equal(got, b[:h.Len()]) {
			t.Fatalf("re-encoded % x, input % x", got, b)
		}
	})
}

// fuzzSub checks one sub-header parser: b is what follows a 2-byte header.
func fuzzSub[T interface {
	AppendTo([]byte) []byte
	Validate() error
}](f *testing.F, parse func([]byte) (T, error)) {
	addSeeds(f, 2)
	f.Fuzz(func(t *testing.T, b []byte) {
		v, err := parse(b)
		if err != nil {
			checkDecodeErr(t, err)
			return
		}
		if err := v.Validate(); err != nil {
			t.Fatalf("decoded %+v fails Validate: %v", v, err)
		}
		if got := v.AppendTo(nil); !bytes.Equal(got, b) {
			t.Fatalf("re-encoded % x, input % x", got, b)
		}
	})
}

func FuzzParseKeyWrite(f *testing.F)     { fuzzSub(f, ParseKeyWrite) }
func FuzzParseKeyIncrement(f *testing.F) { fuzzSub(f, ParseKeyIncrement) }
func FuzzParseAppend(f *testing.F)       { fuzzSub(f, ParseAppend) }
func FuzzParsePostcard(f *testing.F)     { fuzzSub(f, ParsePostcard) }
func FuzzParseAck(f *testing.F)          { fuzzSub(f, ParseAck) }

// FuzzParseReport decodes b as a whole report with ParseReport, as the
// DTA layer alone, and inside an Ethernet/IPv4/UDP frame through a
// DecodingLayerParser; all three must agree, and a decoded report must
// re-encode to b with AppendTo and with SerializeTo.
func FuzzParseReport(f *testing.F) {
	addSeeds(f, 0)
	var (
		eth    layers.Ethernet
		ip4    layers.IPv4
		udp    layers.UDP
		rep    ReportLayer
		ack    AckLayer
		seen   []gopacket.LayerType
		parser = gopacket.NewDecodingLayerParser(layers.LayerTypeEthernet, &eth, &ip4, &udp, &rep, &ack)
		sbuf   = gopacket.NewSerializeBuffer()
	)
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := ParseReport(b)
		var l ReportLayer
		var df feedback
		lerr := l.DecodeFromBytes(b, &df)
		if lerr != err || !equalReport(l.Report, r) {
			t.Fatalf("ReportLayer = %+v, %v; ParseReport = %+v, %v", l.Report, lerr, r, err)
		}
		if cr, cerr := composeParse(b); cerr != err || !equalReport(cr, r) {
			t.Fatalf("ParseHeader+sub-header parser = %+v, %v; ParseReport = %+v, %v", cr, cerr, r, err)
		}
		if len(b) <= 65000 {
			frame := append(unhex(t, "b8cef6d212c70c42a10000010800"+"4500000000004000401100000a0000c80a000033"+"9c699c6800000000"), b...)
			frame[16], frame[17] = byte((28+len(b))>>8), byte(28+len(b))
			frame[38], frame[39] = byte((8+len(b))>>8), byte(8+len(b))
			perr := parser.DecodeLayers(frame, &seen)
			if len(b) == 0 {
				// gopacket stops at an empty payload: no DTA layer, no error.
				if perr != nil || len(seen) != 3 {
					t.Fatalf("empty datagram: parser decoded %v, %v", seen, perr)
				}
			} else if perr != err {
				t.Fatalf("DecodingLayerParser error %v, ParseReport error %v", perr, err)
			}
			if err == nil && (len(seen) != 4 || !equalReport(rep.Report, r)) {
				t.Fatalf("DecodingLayerParser decoded %v, %+v; want %+v", seen, rep.Report, r)
			}
		}
		if err != nil {
			checkDecodeErr(t, err)
			if !equalReport(r, Report{}) {
				t.Fatalf("report on error: %+v", r)
			}
			return
		}
		if err := r.Validate(); err != nil {
			t.Fatalf("decoded %+v fails Validate: %v", r, err)
		}
		if got := composeAppend(&r, nil); !bytes.Equal(got, b) {
			t.Fatalf("headers' AppendTo = % x, input % x", got, b)
		}
		if got := r.AppendTo(nil); !bytes.Equal(got, b) || r.Len() != len(b) {
			t.Fatalf("re-encoded % x (Len %d), input % x", got, r.Len(), b)
		}
		if err := gopacket.SerializeLayers(sbuf, gopacket.SerializeOptions{FixLengths: true}, &l); err != nil || !bytes.Equal(sbuf.Bytes(), b) {
			t.Fatalf("SerializeTo = % x, %v; input % x", sbuf.Bytes(), err, b)
		}
	})
}

// composeParse decodes a report with ParseHeader and the sub-header
// parsers, the slow way Report.Decode must agree with.
func composeParse(b []byte) (Report, error) {
	h, err := ParseHeader(b)
	if err != nil {
		return Report{}, err
	}
	var r Report
	rest := b[h.Len():]
	switch h.Opcode {
	case OpKeyWrite:
		r.KeyWrite, err = ParseKeyWrite(rest)
	case OpAppend:
		r.Append, err = ParseAppend(rest)
	case OpKeyIncrement:
		r.KeyIncrement, err = ParseKeyIncrement(rest)
	case OpPostcard:
		r.Postcard, err = ParsePostcard(rest)
	default: // registered (ParseHeader refused the rest): the body as is
		r.Body = rest
	}
	if err != nil {
		return Report{}, err
	}
	r.Header = h
	return r, nil
}

// composeAppend encodes r with the headers' own AppendTo methods, the slow
// way Report.AppendTo must agree with.
func composeAppend(r *Report, b []byte) []byte {
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
	default:
		b = append(b, r.Body...)
	}
	return b
}

// FuzzAckLayer checks the acknowledgement's gopacket layer and frame
// builder against ParseAck: an ack that decodes serializes back to its
// bytes through SerializeTo, and AppendAckFrame carries exactly them.
func FuzzAckLayer(f *testing.F) {
	addSeeds(f, 2)
	sbuf := gopacket.NewSerializeBuffer()
	fb := FrameBuilder{SrcIP: testBuilder.DstIP, DstIP: testBuilder.SrcIP, SrcPort: ReportPort}
	f.Fuzz(func(t *testing.T, b []byte) {
		a, err := ParseAck(b)
		var l AckLayer
		var df feedback
		if lerr := l.DecodeFromBytes(b, &df); lerr != err || l.Ack != a {
			t.Fatalf("AckLayer = %+v, %v; ParseAck = %+v, %v", l.Ack, lerr, a, err)
		}
		if err != nil {
			checkDecodeErr(t, err)
			return
		}
		if err := gopacket.SerializeLayers(sbuf, gopacket.SerializeOptions{}, &l); err != nil || !bytes.Equal(sbuf.Bytes(), b) {
			t.Fatalf("SerializeTo = % x, %v; input % x", sbuf.Bytes(), err, b)
		}
		frame, err := fb.AppendAckFrame(nil, a)
		if err != nil || len(frame) != FrameOverhead+len(b) || !bytes.Equal(frame[FrameOverhead:], b) {
			t.Fatalf("AppendAckFrame = % x, %v; input % x", frame, err, b)
		}
	})
}
