package p4

import (
	"bytes"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/dtakit/dtakit/dta"
)

// headerBytes serialises the named header instances of p in order, each
// field from env ("h.<member>.<field>", 0 when absent), as the deparser
// emits them.
func headerBytes(t *testing.T, p *program, members []string, env map[string]uint64) []byte {
	t.Helper()
	var bits []byte
	for _, m := range members {
		typ := p.members[m]
		if typ == "" {
			t.Fatalf("no header instance %q", m)
		}
		for _, f := range p.headers[typ] {
			w, v := p.widths[typ+"."+f], env["h."+m+"."+f]
			for i := w - 1; i >= 0; i-- {
				bits = append(bits, byte(v>>i&1))
			}
		}
	}
	if len(bits)%8 != 0 {
		t.Fatalf("headers %v are %d bits", members, len(bits))
	}
	b := make([]byte, len(bits)/8)
	for i, bit := range bits {
		b[i/8] |= bit << (7 - i%8)
	}
	return b
}

// sumLiteral evaluates the "a + b + ..." the action assigns to field.
func sumLiteral(t *testing.T, src, action, field string) int {
	t.Helper()
	re := regexp.MustCompile(`action ` + action + `\(\) \{[^}]*` + regexp.QuoteMeta(field) + ` = ([0-9 +]+);`)
	g := re.FindStringSubmatch(src)
	if g == nil {
		t.Fatalf("action %s does not set %s", action, field)
	}
	n := 0
	for _, term := range strings.Split(g[1], "+") {
		v, err := strconv.Atoi(strings.TrimSpace(term))
		if err != nil {
			t.Fatal(err)
		}
		n += v
	}
	return n
}

// TestReporterReports builds the reports the reporter's egress emits from
// its own header definitions and decodes them with dta.ParseReport; the
// lengths its actions write must be the reports' lengths.
func TestReporterReports(t *testing.T) {
	const prog = "reporter/reporter.p4"
	p := parseProgram(t, prog)
	src := readFile(t, prog)
	for _, tc := range []struct {
		action  string
		members []string
		env     map[string]uint64
		want    dta.Report
	}{
		{"key_write", []string{"dta", "kw", "data"},
			map[string]uint64{"h.dta.opcode": uint64(dta.OpKeyWrite), "h.kw.redundancy": 3, "h.kw.key": 0xDEADBEEF, "h.data.data": 0x01020304},
			dta.Report{Header: dta.Header{Opcode: dta.OpKeyWrite}, KeyWrite: dta.KeyWrite{Redundancy: 3, Key: 0xDEADBEEF, Data: []byte{1, 2, 3, 4}}}},
		{"append", []string{"dta", "append", "data"},
			map[string]uint64{"h.dta.opcode": uint64(dta.OpAppend), "h.append.list": 17, "h.data.data": 0x0A0B0C0D},
			dta.Report{Header: dta.Header{Opcode: dta.OpAppend}, Append: dta.Append{ListID: 17, Data: []byte{10, 11, 12, 13}}}},
	} {
		b := headerBytes(t, p, tc.members, tc.env)
		got, err := dta.ParseReport(b)
		if err != nil {
			t.Fatalf("%s: %v (% x)", tc.action, err, b)
		}
		want := tc.want.AppendTo(nil)
		if !bytes.Equal(got.AppendTo(nil), want) || !bytes.Equal(b, want) {
			t.Fatalf("%s: reporter emits % x, dta encodes % x", tc.action, b, want)
		}
		if n := sumLiteral(t, src, tc.action, "h.udp.length"); n != 8+len(b) {
			t.Errorf("%s: UDP length %d, report %d bytes", tc.action, n, len(b))
		}
		if n := sumLiteral(t, src, tc.action, "h.ipv4.total_len"); n != 20+8+len(b) {
			t.Errorf("%s: IPv4 total length %d, report %d bytes", tc.action, n, len(b))
		}
	}
}
