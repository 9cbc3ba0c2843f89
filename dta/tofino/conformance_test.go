package tofino

import (
	"bufio"
	"encoding/hex"
	"encoding/json"
	"os"
	"strconv"
	"strings"
	"testing"
)

// vector is one line of testdata/tofino_crc_vectors.jsonl: what the hash unit
// outputs for one field list (see the spec, section 7).
type vector struct {
	Algorithm  string `json:"algorithm"`
	Width      int    `json:"width"`
	Poly       string `json:"poly"`
	Reversed   bool   `json:"reversed"`
	Init       string `json:"init"`
	Xor        string `json:"xor"`
	Extend     bool   `json:"extend"`
	InputBits  int    `json:"input_bits"`
	Input      string `json:"input"`
	OutputBits int    `json:"output_bits"`
	Output     string `json:"output"`
}

func readVectors(t *testing.T) []vector {
	t.Helper()
	f, err := os.Open("testdata/tofino_crc_vectors.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var vs []vector
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for line := 1; sc.Scan(); line++ {
		var v vector
		dec := json.NewDecoder(strings.NewReader(sc.Text()))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&v); err != nil {
			t.Fatalf("line %d: %v", line, err)
		}
		vs = append(vs, v)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return vs
}

func parseHex(t *testing.T, s string) uint64 {
	t.Helper()
	v, err := strconv.ParseUint(strings.TrimPrefix(s, "0x"), 16, 64)
	if err != nil {
		t.Fatalf("bad hex %q: %v", s, err)
	}
	return v
}

// TestVectors checks every vector three ways: Sum over a field list built
// the way a caller builds it (a partial top field, then whole bytes),
// SumBytes when the list is byte-aligned, and the bitwise reference. For
// predefined algorithms it also checks that Predefined has the vector's
// parameters.
func TestVectors(t *testing.T) {
	vs := readVectors(t)
	if len(vs) != 4180 {
		t.Fatalf("read %d vectors, want 4180", len(vs))
	}
	algs := map[string]bool{}
	for i, v := range vs {
		c := CRC{
			Width:    v.Width,
			Poly:     parseHex(t, v.Poly),
			Reversed: v.Reversed,
			Init:     parseHex(t, v.Init),
			XorOut:   parseHex(t, v.Xor),
			Extend:   v.Extend,
		}
		if strings.HasPrefix(v.Algorithm, "custom_") {
			c.AllowEven = c.Poly&1 == 0
		} else {
			algs[v.Algorithm] = true
			p, err := Predefined(v.Algorithm)
			if err != nil {
				t.Fatalf("vector %d: %v", i+1, err)
			}
			if p.Extend != true {
				t.Errorf("Predefined(%q).Extend = false", v.Algorithm)
			}
			p.Extend = c.Extend
			if p != c {
				t.Fatalf("vector %d: Predefined(%q) = %+v, vector has %+v", i+1, v.Algorithm, p, c)
			}
		}
		h, err := NewHash(v.OutputBits, c)
		if err != nil {
			t.Fatalf("vector %d: %v", i+1, err)
		}
		in, err := hex.DecodeString(v.Input)
		if err != nil || len(in) != (v.InputBits+7)/8 {
			t.Fatalf("vector %d: input %q does not hold %d bits", i+1, v.Input, v.InputBits)
		}
		want := parseHex(t, v.Output)

		var f FieldList
		if top := v.InputBits % 8; top != 0 {
			f.Add(uint64(in[0]), top)
			f.AddBytes(in[1:])
		} else {
			f.AddBytes(in)
		}
		if f.Len() != v.InputBits {
			t.Fatalf("vector %d: field list has %d bits, want %d", i+1, f.Len(), v.InputBits)
		}
		got, err := h.Sum(&f)
		if err != nil || got != want {
			t.Errorf("vector %d (%s, %d bits in, W=%d, extend=%v): Sum = %#x, %v; want %#x",
				i+1, v.Algorithm, v.InputBits, v.OutputBits, v.Extend, got, err, want)
		}
		if v.InputBits%8 == 0 {
			if got := h.SumBytes(in); got != want {
				t.Errorf("vector %d (%s): SumBytes = %#x, want %#x", i+1, v.Algorithm, got, want)
			}
		}
		if got := outputReference(c, v.OutputBits, crcBitwise(c, in)); got != want {
			t.Errorf("vector %d (%s, %d bits in): reference = %#x, want %#x", i+1, v.Algorithm, v.InputBits, got, want)
		}
	}
	if len(algs) != 41 {
		t.Errorf("vectors cover %d predefined algorithms, want 41", len(algs))
	}
}
