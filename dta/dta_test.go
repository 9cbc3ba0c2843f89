package dta

import (
	"bytes"
	"encoding/hex"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
)

func unhex(t testing.TB, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(strings.ReplaceAll(s, " ", ""))
	if err != nil {
		t.Fatalf("bad hex %q: %v", s, err)
	}
	return b
}

// TestEncodingVectors pins each header's layout to bytes written out by hand
// from the spec, in both directions.
func TestEncodingVectors(t *testing.T) {
	tests := []struct {
		name string
		r    Report
		hex  string
	}{
		{"keywrite", Report{Header: Header{Opcode: OpKeyWrite}, KeyWrite: KeyWrite{Redundancy: 4, Key: 0x01020304, Data: []byte{0xa, 0xb, 0xc, 0xd}}},
			"01 00 04 01020304 0a0b0c0d"},
		{"key-write immediate sequenced", Report{Header: Header{Opcode: OpKeyWrite, Immediate: true, Sequenced: true, Seq: 0x7e}, KeyWrite: KeyWrite{Redundancy: 255, Key: 0xfffffffe, Data: make([]byte, 8)}},
			"01 c0 7e ff fffffffe 0000000000000000"},
		{"append", Report{Header: Header{Opcode: OpAppend}, Append: Append{ListID: 7, Data: []byte{0, 0, 0, 9}}},
			"02 00 00000007 00000009"},
		{"append sequenced", Report{Header: Header{Opcode: OpAppend, Sequenced: true, Seq: 1}, Append: Append{ListID: 0x10000, Data: []byte{1, 2, 3, 4, 5, 6, 7, 8}}},
			"02 40 01 00010000 0102030405060708"},
		{"keyincrement", Report{Header: Header{Opcode: OpKeyIncrement, Immediate: true}, KeyIncrement: KeyIncrement{Redundancy: 2, Key: 0xdeadbeef, Counter: 0x0102030405060708}},
			"03 80 02 deadbeef 0102030405060708"},
		{"postcard", Report{Header: Header{Opcode: OpPostcard}, Postcard: Postcard{Key: 0x0a000001, Hop: 3, Value: 0x11223344}},
			"04 00 0a000001 03 11223344"},
		{"postcard with path length", Report{Header: Header{Opcode: OpPostcard, Sequenced: true, Seq: 200}, Postcard: Postcard{Key: 1, Hop: 5, Value: 2, PathLength: 5, HasPathLength: true}},
			"04 40 c8 00000001 05 00000002 05"},
		{"postcard with path length 0", Report{Header: Header{Opcode: OpPostcard}, Postcard: Postcard{Key: 1, Hop: 1, Value: 2, HasPathLength: true}},
			"04 00 00000001 01 00000002 00"},
		{"wide key-write with a session", Report{Header: Header{Opcode: OpKeyWrite, Sequenced: true, Wide: true, Seq: 0x01020304, Session: 0xa1a2a3a4a5a6a7a8}, KeyWrite: KeyWrite{Redundancy: 2, Key: 7, Data: []byte{9, 9, 9, 9}}},
			"01 60 01020304 a1a2a3a4a5a6a7a8 02 00000007 09090909"},
		{"reserved bits kept", Report{Header: Header{Opcode: OpKeyIncrement, Reserved: 0x15}, KeyIncrement: KeyIncrement{Redundancy: 1}},
			"03 15 01 00000000 0000000000000000"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			want := unhex(t, tt.hex)
			if err := tt.r.Validate(); err != nil {
				t.Fatalf("Validate: %v", err)
			}
			if got := tt.r.AppendTo(nil); !bytes.Equal(got, want) {
				t.Errorf("AppendTo = % x, want % x", got, want)
			}
			if n := tt.r.Len(); n != len(want) {
				t.Errorf("Len = %d, want %d", n, len(want))
			}
			got, err := ParseReport(want)
			if err != nil {
				t.Fatalf("ParseReport: %v", err)
			}
			if !reflect.DeepEqual(got, tt.r) {
				t.Errorf("ParseReport = %+v, want %+v", got, tt.r)
			}
		})
	}
	ackTests := []struct {
		a   Ack
		hex string
	}{
		{Ack{Seq: 0}, "00 00"},
		{Ack{Seq: 0x42, NACK: true}, "42 80"},
		{Ack{Seq: 0xff, Reserved: 0x7f}, "ff 7f"},
		{Ack{Seq: 0x01020304, Wide: true, Span: 0x0506, Session: 0x1122334455667788}, "01 02 03 04 00 00 05 06 1122334455667788"},
		{Ack{Seq: 9, Wide: true, Resend: true}, "00 00 00 09 40 00 00 00 0000000000000000"},
		{Ack{Seq: 9, Wide: true, NACK: true, Reason: ReasonUnconfirmed, Reserved: 0x3f, Session: 1}, "00 00 00 09 bf 04 00 00 0000000000000001"},
	}
	for _, tt := range ackTests {
		want := unhex(t, tt.hex)
		if got := tt.a.AppendTo(nil); !bytes.Equal(got, want) {
			t.Errorf("%+v AppendTo = % x, want % x", tt.a, got, want)
		}
		if got, err := ParseAck(want); err != nil || got != tt.a {
			t.Errorf("ParseAck(% x) = %+v, %v; want %+v", want, got, err, tt.a)
		}
	}
}

// TestRoundTripAllFlags encodes and decodes every primitive under every
// combination of the base header's flags and each sub-header's variants.
func TestRoundTripAllFlags(t *testing.T) {
	data := func(n int) []byte {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(i*7 + 1)
		}
		return b
	}
	var subs []Report
	for _, n := range []int{4, 8, 12, 28, 1024} {
		for _, red := range []uint8{1, 2, 255} {
			subs = append(subs, Report{Header: Header{Opcode: OpKeyWrite}, KeyWrite: KeyWrite{Redundancy: red, Key: 0x80000001, Data: data(n)}})
		}
		subs = append(subs, Report{Header: Header{Opcode: OpAppend}, Append: Append{ListID: 0xffffffff, Data: data(n)}})
	}
	for _, red := range []uint8{1, 3, 255} {
		for _, c := range []uint64{0, 1, 1 << 63, ^uint64(0)} {
			subs = append(subs, Report{Header: Header{Opcode: OpKeyIncrement}, KeyIncrement: KeyIncrement{Redundancy: red, Key: 42, Counter: c}})
		}
	}
	for _, hop := range []uint8{1, 5, 255} {
		for _, pl := range []struct {
			n   uint8
			has bool
		}{{0, false}, {0, true}, {5, true}, {255, true}} {
			subs = append(subs, Report{Header: Header{Opcode: OpPostcard}, Postcard: Postcard{Key: 9, Hop: hop, Value: 0xcafe, PathLength: pl.n, HasPathLength: pl.has}})
		}
	}
	count := 0
	for _, sub := range subs {
		for _, imm := range []bool{false, true} {
			for _, sq := range []struct {
				seq  int64
				wide bool
			}{{-1, false}, {0, false}, {1, false}, {255, false}, {0, true}, {255, true}, {0x12345678, true}, {0xffffffff, true}} {
				for _, res := range []uint8{0, 1, 0x1f} {
					r := sub
					r.Header.Immediate = imm
					r.Header.Reserved = res
					if sq.seq >= 0 {
						r.Header.Sequenced, r.Header.Wide, r.Header.Seq = true, sq.wide, uint32(sq.seq)
						if sq.wide {
							r.Header.Session = 0x0102030405060708 * uint64(sq.seq&7)
						}
					}
					if err := r.Validate(); err != nil {
						t.Fatalf("%+v: Validate: %v", r, err)
					}
					b := r.AppendTo([]byte{0xee})[1:]
					if slow := composeAppend(&r, nil); !bytes.Equal(b, slow) {
						t.Fatalf("Report.AppendTo = % x, headers' AppendTo = % x", b, slow)
					}
					if len(b) != r.Len() {
						t.Fatalf("%+v: encoded %d bytes, Len %d", r, len(b), r.Len())
					}
					got, err := ParseReport(b)
					if err != nil {
						t.Fatalf("%+v: ParseReport(% x): %v", r, b, err)
					}
					if !reflect.DeepEqual(got, r) {
						t.Fatalf("round trip\n got %+v\nwant %+v", got, r)
					}
					if again := got.AppendTo(nil); !bytes.Equal(again, b) {
						t.Fatalf("re-encode % x, want % x", again, b)
					}
					count++
				}
			}
		}
	}
	for seq := range 256 {
		for _, nack := range []bool{false, true} {
			for _, res := range []uint8{0, 0x55, 0x7f} {
				a := Ack{Seq: uint32(seq), NACK: nack, Reserved: res}
				got, err := ParseAck(a.AppendTo(nil))
				if err != nil || got != a {
					t.Fatalf("ack %+v round trip = %+v, %v", a, got, err)
				}
			}
		}
	}
	t.Logf("%d report round trips", count)
}

// TestMalformed checks that each malformed input is rejected with the
// sentinel and header it names.
func TestMalformed(t *testing.T) {
	tests := []struct {
		name string
		hex  string
		want error
		op   string
	}{
		{"empty", "", ErrTruncated, "base header"},
		{"one byte", "01", ErrTruncated, "base header"},
		{"S set, no seq", "01 40", ErrTruncated, "base header"},
		{"opcode 0", "00 00 01 00000000 00000000", ErrUnknownOpcode, "base header"},
		{"opcode 5", "05 00 01 00000000 00000000", ErrUnknownOpcode, "base header"},
		{"opcode 0xff", "ff 80", ErrUnknownOpcode, "base header"},

		{"key-write no sub-header", "01 00", ErrTruncated, "keywrite"},
		{"key-write short key", "01 00 01 000000", ErrTruncated, "keywrite"},
		{"key-write short key sequenced", "01 40 09 01 000000", ErrTruncated, "keywrite"},
		{"key-write redundancy 0", "01 00 00 00000001 00000002", ErrRedundancy, "keywrite"},
		{"key-write no data", "01 00 01 00000001", ErrDataLength, "keywrite"},
		{"key-write 3 data bytes", "01 00 01 00000001 000002", ErrDataLength, "keywrite"},
		{"key-write 5 data bytes", "01 00 01 00000001 0000000203", ErrDataLength, "keywrite"},

		{"key-increment short", "03 00 01 00000001 00000000000000", ErrTruncated, "keyincrement"},
		{"key-increment trailing", "03 00 01 00000001 0000000000000001 00", ErrTrailingBytes, "keyincrement"},
		{"key-increment redundancy 0", "03 00 00 00000001 0000000000000001", ErrRedundancy, "keyincrement"},

		{"append short list", "02 00 000001", ErrTruncated, "append"},
		{"append no data", "02 00 00000001", ErrDataLength, "append"},
		{"append 6 data bytes", "02 00 00000001 000000000001", ErrDataLength, "append"},

		{"postcard short", "04 00 00000001 01 000000", ErrTruncated, "postcard"},
		{"postcard trailing", "04 00 00000001 01 00000002 05 00", ErrTrailingBytes, "postcard"},
		{"postcard hop 0", "04 00 00000001 00 00000002", ErrHopZero, "postcard"},
		{"postcard hop 0 with path length", "04 00 00000001 00 00000002 05", ErrHopZero, "postcard"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := unhex(t, tt.hex)
			r, err := ParseReport(b)
			checkErr(t, err, tt.want, tt.op)
			if !reflect.DeepEqual(r, Report{}) {
				t.Errorf("report on error = %+v, want zero", r)
			}
			var l ReportLayer
			var df feedback
			err = l.DecodeFromBytes(b, &df)
			checkErr(t, err, tt.want, tt.op)
			if df.truncated != (tt.want == ErrTruncated) {
				t.Errorf("SetTruncated called: %v, want %v", df.truncated, tt.want == ErrTruncated)
			}
		})
	}
	ackTests := []struct {
		hex  string
		want error
	}{
		{"", ErrTruncated},
		{"01", ErrTruncated},
		{"01 00 00", ErrTrailingBytes},
	}
	for _, tt := range ackTests {
		b := unhex(t, tt.hex)
		a, err := ParseAck(b)
		checkErr(t, err, tt.want, "ack")
		if a != (Ack{}) {
			t.Errorf("ack on error = %+v", a)
		}
		var l AckLayer
		var df feedback
		checkErr(t, l.DecodeFromBytes(b, &df), tt.want, "ack")
		if df.truncated != (tt.want == ErrTruncated) {
			t.Errorf("ack % x: SetTruncated called: %v", b, df.truncated)
		}
	}
}

func checkErr(t *testing.T, err, want error, op string) {
	t.Helper()
	if !errors.Is(err, want) {
		t.Fatalf("error = %v, want %v", err, want)
	}
	var e *Error
	if !errors.As(err, &e) || e.Op != op {
		t.Fatalf("error %v: Op = %q, want %q", err, opOf(err), op)
	}
	if msg := err.Error(); !strings.HasPrefix(msg, "dta: "+op+": ") {
		t.Errorf("message %q does not name the header", msg)
	}
}

func opOf(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Op
	}
	return fmt.Sprintf("not *Error: %T", err)
}

type feedback struct{ truncated bool }

func (f *feedback) SetTruncated() { f.truncated = true }

// TestSubHeaderParsers checks the sub-header parsers alone, on the bytes
// after the base header, including the data aliasing contract.
func TestSubHeaderParsers(t *testing.T) {
	b := unhex(t, "05 00000001 01020304 05060708")
	k, err := ParseKeyWrite(b)
	if err != nil || k.Redundancy != 5 || k.Key != 1 || !bytes.Equal(k.Data, b[5:]) {
		t.Fatalf("ParseKeyWrite = %+v, %v", k, err)
	}
	if &k.Data[0] != &b[5] {
		t.Error("KeyWrite.Data does not alias the input")
	}
	a, err := ParseAppend(b[1:])
	if err != nil || a.ListID != 1 || &a.Data[0] != &b[5] {
		t.Fatalf("ParseAppend = %+v, %v", a, err)
	}
	h, err := ParseHeader(unhex(t, "04 df 09 garbage"[:9]))
	if err != nil || h != (Header{Opcode: OpPostcard, Immediate: true, Sequenced: true, Seq: 9, Reserved: 0x1f}) || h.Len() != 3 {
		t.Fatalf("ParseHeader = %+v, %v", h, err)
	}
	// W (byte 1 bit 5): a 4-byte sequence number and an 8-byte session.
	h, err = ParseHeader(unhex(t, "04 e0 12345678 a1a2a3a4a5a6a7a8"))
	if err != nil || h != (Header{Opcode: OpPostcard, Immediate: true, Sequenced: true, Wide: true, Seq: 0x12345678, Session: 0xa1a2a3a4a5a6a7a8}) || h.Len() != 14 {
		t.Fatalf("ParseHeader (wide) = %+v, %v", h, err)
	}
	for _, short := range []string{"04 e0 123456", "04 e0 12345678", "04 e0 12345678 a1a2a3a4a5a6a7"} {
		if _, err := ParseHeader(unhex(t, short)); !errors.Is(err, ErrTruncated) {
			t.Errorf("a wide header cut short (%s): %v, want ErrTruncated", short, err)
		}
	}
	// W without S means nothing, and is kept, like a reserved bit.
	h, err = ParseHeader(unhex(t, "04 a0"))
	if err != nil || !h.Wide || h.Sequenced || !bytes.Equal(h.AppendTo(nil), unhex(t, "04 a0")) || h.Validate() != nil {
		t.Errorf("W without S: %+v, %v", h, err)
	}
}

func TestValidate(t *testing.T) {
	tests := []struct {
		name string
		r    Report
		want error
		op   string
	}{
		{"zero report", Report{}, ErrUnknownOpcode, "base header"},
		{"reserved too wide", Report{Header: Header{Opcode: OpKeyIncrement, Reserved: 0x40}, KeyIncrement: KeyIncrement{Redundancy: 1}}, ErrInvalidField, "base header"},
		{"seq without S", Report{Header: Header{Opcode: OpKeyIncrement, Seq: 3}, KeyIncrement: KeyIncrement{Redundancy: 1}}, ErrInvalidField, "base header"},
		{"session without W", Report{Header: Header{Opcode: OpKeyIncrement, Sequenced: true, Session: 3}, KeyIncrement: KeyIncrement{Redundancy: 1}}, ErrInvalidField, "base header"},
		{"session without S", Report{Header: Header{Opcode: OpKeyIncrement, Wide: true, Session: 3}, KeyIncrement: KeyIncrement{Redundancy: 1}}, ErrInvalidField, "base header"},
		{"key-write redundancy 0", Report{Header: Header{Opcode: OpKeyWrite}, KeyWrite: KeyWrite{Data: make([]byte, 4)}}, ErrRedundancy, "keywrite"},
		{"key-write no data", Report{Header: Header{Opcode: OpKeyWrite}, KeyWrite: KeyWrite{Redundancy: 1}}, ErrDataLength, "keywrite"},
		{"key-write 2 bytes", Report{Header: Header{Opcode: OpKeyWrite}, KeyWrite: KeyWrite{Redundancy: 1, Data: make([]byte, 2)}}, ErrDataLength, "keywrite"},
		{"append 7 bytes", Report{Header: Header{Opcode: OpAppend}, Append: Append{Data: make([]byte, 7)}}, ErrDataLength, "append"},
		{"key-increment redundancy 0", Report{Header: Header{Opcode: OpKeyIncrement}}, ErrRedundancy, "keyincrement"},
		{"postcard hop 0", Report{Header: Header{Opcode: OpPostcard}}, ErrHopZero, "postcard"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			checkErr(t, tt.r.Validate(), tt.want, tt.op)
			b, err := AppendPayload([]byte("x"), &tt.r)
			checkErr(t, err, tt.want, tt.op)
			if string(b) != "x" {
				t.Errorf("AppendPayload changed b on error: %q", b)
			}
		})
	}
	checkErr(t, Ack{Reserved: 0x80}.Validate(), ErrInvalidField, "ack")
	checkErr(t, Ack{Resend: true}.Validate(), ErrInvalidField, "ack")
	checkErr(t, Ack{Wide: true, Reserved: 0x40}.Validate(), ErrInvalidField, "ack")
	checkErr(t, Ack{Session: 1}.Validate(), ErrInvalidField, "ack")
}

func TestOpcodeString(t *testing.T) {
	for op, want := range map[Opcode]string{OpKeyWrite: "keywrite", OpAppend: "append", OpKeyIncrement: "keyincrement", OpPostcard: "postcard", 0: "opcode(0x00)", 0x9a: "opcode(0x9a)"} {
		if got := op.String(); got != want {
			t.Errorf("Opcode(%d).String() = %q, want %q", op, got, want)
		}
	}
	if got := errUnknownOpcode[0x9a].Error(); got != "dta: base header: unknown opcode (0x9a)" {
		t.Errorf("unknown opcode message = %q", got)
	}
}
