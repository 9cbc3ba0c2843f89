package stream

import (
	"encoding/binary"
	"strings"
	"testing"

	"github.com/dtakit/dtakit/dta"
	"github.com/dtakit/dtakit/internal/test/keymax"
)

func TestReports(t *testing.T) {
	s := Default
	s.Keys, s.EntrySize = 10, 8
	if err := s.Validate(); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, s.EntrySize)
	var r dta.Report
	for i := range 400 {
		s.Report(i, &r, buf)
		j := i / 4
		if r.Header.Opcode != s.Mix[i%4] {
			t.Fatalf("report %d: %v", i, r.Header.Opcode)
		}
		if _, err := dta.AppendPayload(nil, &r); err != nil {
			t.Fatalf("report %d does not encode: %v", i, err)
		}
		switch r.Header.Opcode {
		case dta.OpKeyWrite:
			if r.KeyWrite.Key != uint32(j%10) || binary.BigEndian.Uint32(r.KeyWrite.Data) != s.Value(j%10, j/10) {
				t.Fatalf("report %d: %+v", i, r.KeyWrite)
			}
		case dta.OpPostcard:
			if r.Postcard.Value == 0 || r.Postcard.Hop != uint8(j%5+1) || r.Postcard.PathLength != 5 {
				t.Fatalf("report %d: %+v", i, r.Postcard)
			}
		case dta.OpAppend:
			if len(r.Append.Data) != 8 || binary.BigEndian.Uint64(r.Append.Data) != uint64(j/8+1) || r.Append.ListID != uint32(j%8) {
				t.Fatalf("report %d: %+v", i, r.Append)
			}
		}
	}
}

func TestBadStreams(t *testing.T) {
	if _, err := ParseMix("keywrite,nope"); err == nil {
		t.Error("ParseMix took nope")
	}
	if m, err := ParseMix("append, keywrite,append"); err != nil || len(m) != 3 || m[1] != dta.OpKeyWrite {
		t.Errorf("ParseMix: %v, %v", m, err)
	}
	for _, s := range []Synthetic{{}, {Mix: Default.Mix}, func() Synthetic { s := Default; s.EntrySize = 2; return s }(),
		func() Synthetic { s := Default; s.Hops = 0; return s }(), func() Synthetic { s := Default; s.Redundancy = 0; return s }(),
		func() Synthetic { s := Default; s.Redundancy = 256; return s }()} {
		if err := s.Validate(); err == nil {
			t.Errorf("%+v validated", s)
		}
	}
}

// TestMixOfRegistry: a mix names only registered primitives that generate
// reports; Keymax (registered, no Generator) and an unregistered opcode
// are refused, by ParseMix and by Validate.
func TestMixOfRegistry(t *testing.T) {
	if _, err := ParseMix("keywrite,keymax"); err == nil || !strings.Contains(err.Error(), "append, keyincrement, keywrite, postcard") {
		t.Errorf("ParseMix took keymax, or does not list the choices: %v", err)
	}
	for _, op := range []dta.Opcode{keymax.Opcode, 0xee} {
		s := Default
		s.Mix = []dta.Opcode{dta.OpKeyWrite, op}
		if err := s.Validate(); err == nil {
			t.Errorf("mix %v validated", s.Mix)
		}
	}
}

// TestReportAllocs: a report of the stream allocates nothing.
func TestReportAllocs(t *testing.T) {
	s := Default
	buf := make([]byte, s.EntrySize)
	r := new(dta.Report)
	i := 0
	if n := testing.AllocsPerRun(1000, func() { s.Report(i, r, buf); i++ }); n != 0 {
		t.Errorf("%v allocations per report", n)
	}
}

// BenchmarkReport: one report of the default mix (dtareport's send loop
// makes one per datagram).
func BenchmarkReport(b *testing.B) {
	s := Default
	buf := make([]byte, s.EntrySize)
	r := new(dta.Report)
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		s.Report(i, r, buf)
	}
}
