package p4

import (
	"regexp"
	"slices"
	"strings"
	"testing"
)

// block returns the text between the braces that follow the first match of
// re in src (the body of a parser, control, action or table).
func block(t *testing.T, src, re string) string {
	t.Helper()
	loc := regexp.MustCompile(re).FindStringIndex(src)
	if loc == nil {
		t.Fatalf("no %q in the source", re)
	}
	return braceBody(src[loc[1]-1:])
}

var (
	reExtract  = regexp.MustCompile(`pkt\.extract\(h\.(\w+)\)`)
	reSetValid = regexp.MustCompile(`h\.(\w+)\.setValid\(\)`)
	reInvalid  = regexp.MustCompile(`h\.(\w+)\.setInvalid\(\)`)
)

// TestNACKHeaders checks each translator's nack(): the ingress deparser
// emits every valid header, so every header the ingress parser may have
// extracted for a report must be invalid after it, leaving Ethernet, IPv4,
// UDP and the 2-byte acknowledgement (docs/DTA-WIRE.md section 2), and the
// lengths it writes must be those headers' lengths. RoCEv2 headers are
// parsed only on UDP 4791, whose packets never reach nack().
func TestNACKHeaders(t *testing.T) {
	for _, prog := range []string{"translator/translator.p4", "translator/postcard.p4", "translator/translator_t2.p4"} {
		src := readFile(t, prog)
		p := parseProgram(t, prog)
		body := block(t, src, `action nack\(\)`)
		valid := map[string]bool{}
		for _, g := range reExtract.FindAllStringSubmatch(block(t, src, `parser IgParser\(`), -1) {
			valid[g[1]] = true
		}
		delete(valid, "bth")
		delete(valid, "aeth")
		for _, g := range reSetValid.FindAllStringSubmatch(body, -1) {
			valid[g[1]] = true
		}
		for _, g := range reInvalid.FindAllStringSubmatch(body, -1) {
			delete(valid, g[1])
		}
		delete(valid, "bridge") // consumed by the egress parser
		var left []string
		for h := range valid {
			left = append(left, h)
		}
		slices.Sort(left)
		if want := []string{"ack", "ethernet", "ipv4", "udp"}; !slices.Equal(left, want) {
			t.Errorf("%s: nack() leaves headers %v valid, want %v", prog, left, want)
		}
		bits := 0
		for _, h := range left {
			if h == "ethernet" {
				continue
			}
			for _, f := range p.headers[p.members[h]] {
				bits += p.widths[p.members[h]+"."+f]
			}
		}
		if n := sumLiteral(t, src, "nack", "h.ipv4.total_len"); n*8 != bits {
			t.Errorf("%s: nack() writes IPv4 total length %d, its headers are %d bytes", prog, n, bits/8)
		}
		if n := sumLiteral(t, src, "nack", "h.udp.length"); n*8 != bits-160 {
			t.Errorf("%s: nack() writes UDP length %d, its headers are %d bytes", prog, n, bits/8-20)
		}
	}
}

// TestReporterNoHeaderless checks that a mirrored copy the reporter cannot
// address is dropped: the collectors table's default action (which the
// control plane cannot change) drops, and the report is built only on a hit.
func TestReporterNoHeaderless(t *testing.T) {
	src := readFile(t, "reporter/reporter.p4")
	tbl := block(t, src, `table collectors `)
	g := regexp.MustCompile(`const default_action = (\w+)\(\);`).FindStringSubmatch(tbl)
	if g == nil {
		t.Fatalf("collectors has no const default action:\n%s", tbl)
	}
	if act := block(t, src, `action `+g[1]+`\(\)`); !strings.Contains(act, "drop_ctl = 1") {
		t.Errorf("collectors' default action %s does not drop: %s", g[1], act)
	}
	if !strings.Contains(src, "if (collectors.apply().hit) {\n                report();") {
		t.Errorf("the report is built whether or not collectors hit")
	}
}

// TestReporterFlowKeyPorts checks that the flow key reads no field of
// h.ports, which is invalid for packets other than TCP and UDP: it hashes
// locals that hold the ports only when h.ports is valid, else 0.
func TestReporterFlowKeyPorts(t *testing.T) {
	p := parseProgram(t, "reporter/reporter.p4")
	h := p.hashes["flow_key"]
	if h == nil || len(h.lists) == 0 {
		t.Fatal("no flow_key hash")
	}
	for _, l := range h.lists {
		for _, f := range l {
			if strings.HasPrefix(f, "h.ports.") {
				t.Errorf("flow_key hashes %s, invalid for packets other than TCP and UDP", f)
			}
		}
	}
	src := readFile(t, "reporter/reporter.p4")
	for _, want := range []string{"bit<16> sport = 0;", "bit<16> dport = 0;", "if (h.ports.isValid()) { sport = h.ports.src; dport = h.ports.dst; }"} {
		if !strings.Contains(src, want) {
			t.Errorf("reporter.p4 lacks %q", want)
		}
	}
}
