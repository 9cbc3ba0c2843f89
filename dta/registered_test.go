package dta

import (
	"bytes"
	"errors"
	"testing"
)

// testRegistered is the opcode this package's tests register; no other
// test uses it.
const testRegistered Opcode = 0xF5

func init() {
	if err := RegisterOpcode(testRegistered); err != nil {
		panic(err)
	}
}

func TestRegisterOpcodeRefuses(t *testing.T) {
	for _, op := range []Opcode{0, OpKeyWrite, OpAppend, OpKeyIncrement, OpPostcard, testRegistered} {
		if err := RegisterOpcode(op); !errors.Is(err, ErrInvalidField) {
			t.Errorf("RegisterOpcode(%#02x) = %v, want ErrInvalidField", uint8(op), err)
		}
	}
	if !testRegistered.IsKnown() || Opcode(0xF6).IsKnown() || !OpPostcard.IsKnown() || Opcode(0).IsKnown() {
		t.Error("IsKnown: want true for the four and a registered opcode only")
	}
}

// A registered opcode's report decodes with its body aliased, plain,
// sequenced and wide, and encodes back to the same bytes; an unregistered
// one is still refused.
func TestRegisteredReport(t *testing.T) {
	for _, h := range []Header{
		{Opcode: testRegistered},
		{Opcode: testRegistered, Immediate: true, Sequenced: true, Seq: 7},
		{Opcode: testRegistered, Sequenced: true, Wide: true, Seq: 1 << 20, Session: 99},
	} {
		for _, body := range [][]byte{nil, {1}, {1, 2, 3, 4, 5, 6, 7, 8, 9}} {
			r := Report{Header: h, Body: body}
			if err := r.Validate(); err != nil {
				t.Fatalf("Validate(%+v) = %v", r, err)
			}
			b := r.AppendTo(nil)
			if len(b) != r.Len() || len(b) != h.Len()+len(body) {
				t.Fatalf("%+v: encoded %d bytes, Len %d", r, len(b), r.Len())
			}
			var got Report
			if err := got.Decode(b); err != nil {
				t.Fatalf("Decode(% x) = %v", b, err)
			}
			if got.Header != h || !bytes.Equal(got.Body, body) {
				t.Fatalf("Decode(% x) = %+v, want %+v", b, got, r)
			}
			if len(body) > 0 && &got.Body[0] != &b[h.Len()] {
				t.Error("Body does not alias the datagram")
			}
			if hh, err := ParseHeader(b); err != nil || hh != h {
				t.Errorf("ParseHeader = %+v, %v", hh, err)
			}
		}
	}
	var r Report
	if err := r.Decode([]byte{0xF6, 0, 1, 2}); !errors.Is(err, ErrUnknownOpcode) {
		t.Errorf("unregistered opcode: %v, want ErrUnknownOpcode", err)
	}
	b := []byte{byte(testRegistered), 0, 1, 2}
	if allocs := testing.AllocsPerRun(100, func() { _ = r.Decode(b) }); allocs != 0 {
		t.Errorf("Decode of a registered opcode: %v allocations", allocs)
	}
}
