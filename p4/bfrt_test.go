package p4

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/dtakit/dtakit/p4/internal/p4gen"
	"github.com/dtakit/dtakit/postcard"
)

// schema is what the control plane must match of the compiler's BF-RT
// schema (bfrt.json): each table's kind and size, its key fields, its
// actions' parameters and its data fields (registers, meters), with widths.
// testdata/bfrt_<program>.json holds it for each translator; TestCompile
// checks it equals the compiler's.
type schema struct {
	Tables []schemaTable `json:"tables"`
}

type schemaField struct {
	Name  string `json:"name"`
	Match string `json:"match,omitempty"`
	Width int    `json:"width"` // bits; 0 for an unsized integer (uint32, uint64)
}

type schemaAction struct {
	Name   string        `json:"name"`
	Params []schemaField `json:"params"`
}

type schemaTable struct {
	Name    string         `json:"name"`
	Type    string         `json:"type"`
	Size    int            `json:"size"`
	Key     []schemaField  `json:"key"`
	Actions []schemaAction `json:"actions,omitempty"`
	Data    []schemaField  `json:"data,omitempty"`
}

// reduceBfrt keeps of a bfrt.json the program's tables, registers, meters
// and counters ("pipe.*") and what the control plane depends on.
func reduceBfrt(raw []byte) (*schema, error) {
	type typ struct {
		Type  string `json:"type"`
		Width int    `json:"width"`
	}
	type field struct {
		Name      string `json:"name"`
		MatchType string `json:"match_type"`
		Type      *typ   `json:"type"`
	}
	var doc struct {
		Tables []struct {
			Name    string  `json:"name"`
			Type    string  `json:"table_type"`
			Size    int     `json:"size"`
			Key     []field `json:"key"`
			Actions []struct {
				Name string  `json:"name"`
				Data []field `json:"data"`
			} `json:"action_specs"`
			Data []struct {
				Singleton *field `json:"singleton"`
			} `json:"data"`
		} `json:"tables"`
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		return nil, fmt.Errorf("bfrt.json: %w", err)
	}
	width := func(f field) int {
		if f.Type == nil {
			return 0
		}
		return f.Type.Width
	}
	s := &schema{}
	for _, t := range doc.Tables {
		switch {
		case !strings.HasPrefix(t.Name, "pipe."):
			continue // the fixed tables (ports, PRE, ...)
		case t.Type != "MatchAction_Direct" && t.Type != "Register" && t.Type != "Meter" && t.Type != "Counter":
			continue // hash configuration, ...: the control plane leaves them
		}
		st := schemaTable{Name: strings.TrimPrefix(t.Name, "pipe."), Type: t.Type, Size: t.Size}
		for _, k := range t.Key {
			st.Key = append(st.Key, schemaField{Name: k.Name, Match: k.MatchType, Width: width(k)})
		}
		for _, a := range t.Actions {
			sa := schemaAction{Name: a.Name, Params: []schemaField{}}
			for _, p := range a.Data {
				sa.Params = append(sa.Params, schemaField{Name: p.Name, Width: width(p)})
			}
			st.Actions = append(st.Actions, sa)
		}
		for _, d := range t.Data {
			if d.Singleton != nil {
				st.Data = append(st.Data, schemaField{Name: d.Singleton.Name, Width: width(*d.Singleton)})
			}
		}
		s.Tables = append(s.Tables, st)
	}
	slices.SortFunc(s.Tables, func(a, b schemaTable) int { return strings.Compare(a.Name, b.Name) })
	return s, nil
}

func (s *schema) table(name string) *schemaTable {
	for i := range s.Tables {
		if s.Tables[i].Name == name {
			return &s.Tables[i]
		}
	}
	return nil
}

// short is bfrt_python's name of a key field or parameter: its last part.
func short(name string) string { return name[strings.LastIndexByte(name, '.')+1:] }

func fits(v uint64, width int) bool { return width == 0 || width >= 64 || v < 1<<width }

// matchFields checks that got names every field of want (by short name)
// exactly once, with a value that fits; fields named "$..." other than
// those in extra are not the control plane's to give.
func matchFields(what string, want []schemaField, got []Field) error {
	seen := map[string]bool{}
	for _, f := range got {
		i := slices.IndexFunc(want, func(w schemaField) bool { return short(w.Name) == f.Name })
		if i < 0 {
			return fmt.Errorf("%s: no field %q in the schema (%v)", what, f.Name, want)
		}
		if seen[f.Name] {
			return fmt.Errorf("%s: field %q given twice", what, f.Name)
		}
		seen[f.Name] = true
		if !fits(f.Value, want[i].Width) {
			return fmt.Errorf("%s: %s = %#x does not fit %d bits", what, f.Name, f.Value, want[i].Width)
		}
	}
	for _, w := range want {
		if !strings.HasPrefix(w.Name, "$") && !seen[short(w.Name)] {
			return fmt.Errorf("%s: field %s not given", what, w.Name)
		}
	}
	return nil
}

// checkPlan validates every entry, register and meter of p against s.
func checkPlan(s *schema, p *Plan) error {
	var errs []error
	for _, e := range p.Entries {
		errs = append(errs, checkEntry(s, e)...)
	}
	counts := map[string]int{}
	for _, e := range p.Entries {
		counts[e.Table]++
	}
	for name, n := range counts {
		if t := s.table(name); t != nil && n > t.Size {
			errs = append(errs, fmt.Errorf("%s: %d entries, size %d", name, n, t.Size))
		}
	}
	for _, r := range p.Registers {
		if err := checkRegister(s, r); err != nil {
			errs = append(errs, err)
		}
	}
	for _, m := range p.Meters {
		errs = append(errs, checkMeter(s, m)...)
	}
	for _, g := range p.Groups {
		if g.ID == 0 {
			errs = append(errs, errors.New("multicast group 0 (no replication)"))
		}
	}
	for _, n := range p.Nodes {
		if n.Port >= 1<<9 {
			errs = append(errs, fmt.Errorf("node %d: dev_port %d wider than 9 bits", n.ID, n.Port))
		}
	}
	return errors.Join(errs...)
}

// checkEntry validates a table entry's table, key fields, action and
// parameters against s.
func checkEntry(s *schema, e Entry) []error {
	var errs []error
	t := s.table(e.Table)
	if t == nil || t.Type != "MatchAction_Direct" {
		return []error{fmt.Errorf("entry for %s: no such match-action table", e.Table)}
	}
	for _, k := range t.Key {
		if k.Match != "Exact" && !strings.HasPrefix(k.Name, "$") {
			errs = append(errs, fmt.Errorf("%s: key %s is %s, the plan gives exact values", e.Table, k.Name, k.Match))
		}
	}
	if err := matchFields(e.Table+" key", t.Key, e.Key); err != nil {
		errs = append(errs, err)
	}
	i := slices.IndexFunc(t.Actions, func(a schemaAction) bool { return a.Name == e.Action })
	if i < 0 {
		return append(errs, fmt.Errorf("%s: no action %s", e.Table, e.Action))
	}
	if err := matchFields(e.Table+" "+e.Action, t.Actions[i].Params, e.Data); err != nil {
		errs = append(errs, err)
	}
	return errs
}

// checkRegister validates a register cell's register, index and value.
func checkRegister(s *schema, r Register) error {
	t := s.table(r.Register)
	switch {
	case t == nil || t.Type != "Register" || len(t.Data) != 1:
		return fmt.Errorf("register %s: not in the schema", r.Register)
	case int(r.Index) >= t.Size:
		return fmt.Errorf("register %s[%d]: size %d", r.Register, r.Index, t.Size)
	case t.Data[0].Name != r.Register+".f1":
		return fmt.Errorf("register %s: data field %s, the script writes f1", r.Register, t.Data[0].Name)
	case !fits(r.Value, t.Data[0].Width):
		return fmt.Errorf("register %s[%d] = %#x does not fit %d bits", r.Register, r.Index, r.Value, t.Data[0].Width)
	}
	return nil
}

// checkMeter validates a meter cell's meter, index and data fields.
func checkMeter(s *schema, m Meter) []error {
	t := s.table(m.Meter)
	if t == nil || t.Type != "Meter" {
		return []error{fmt.Errorf("meter %s: not in the schema", m.Meter)}
	}
	var errs []error
	if int(m.Index) >= t.Size {
		errs = append(errs, fmt.Errorf("meter %s[%d]: size %d", m.Meter, m.Index, t.Size))
	}
	for _, f := range []string{"$METER_SPEC_CIR_PPS", "$METER_SPEC_PIR_PPS", "$METER_SPEC_CBS_PKTS", "$METER_SPEC_PBS_PKTS"} {
		if !slices.ContainsFunc(t.Data, func(d schemaField) bool { return d.Name == f }) {
			errs = append(errs, fmt.Errorf("meter %s: no %s", m.Meter, f))
		}
	}
	return errs
}

var (
	reScriptCall = regexp.MustCompile(`^p\.(\w+\.\w+)\.(add_with_|set_default_with_|mod)(\w*)\((.*)\)$`)
	reScriptArg  = regexp.MustCompile(`^(\w+)=(0x[0-9A-F]+|\d+)$`)
)

// checkScript validates the bfrt_python script on its own: every table
// call's table, action, key fields and parameters against s.
func checkScript(s *schema, program string, script []byte) error {
	var errs []error
	lines := strings.Split(strings.TrimSuffix(string(script), "\n"), "\n")
	if len(lines) < 2 || lines[1] != "p = bfrt."+program+".pipe" {
		return fmt.Errorf("script does not start with p = bfrt.%s.pipe", program)
	}
	for n, line := range lines[2:] {
		if strings.HasPrefix(line, "bfrt.pre.") || line == "bfrt.complete_operations()" {
			continue
		}
		g := reScriptCall.FindStringSubmatch(line)
		if g == nil {
			errs = append(errs, fmt.Errorf("line %d: not a table call: %s", n+3, line))
			continue
		}
		var args []Field
		for _, a := range strings.Split(g[4], ", ") {
			m := reScriptArg.FindStringSubmatch(a)
			if m == nil {
				errs = append(errs, fmt.Errorf("line %d: argument %q", n+3, a))
				continue
			}
			v, err := strconv.ParseUint(m[2], 0, 64)
			if err != nil {
				errs = append(errs, fmt.Errorf("line %d: %w", n+3, err))
			}
			args = append(args, Field{m[1], v})
		}
		t := s.table(g[1])
		if t == nil {
			errs = append(errs, fmt.Errorf("line %d: no table %s", n+3, g[1]))
			continue
		}
		if g[2] == "mod" { // register or meter cell
			var want []schemaField
			for _, d := range t.Data {
				want = append(want, schemaField{Name: strings.TrimPrefix(short(d.Name), "$"), Width: d.Width})
			}
			want = append(want, schemaField{Name: strings.TrimPrefix(t.Key[0].Name, "$")})
			if err := matchFields(fmt.Sprintf("line %d", n+3), want, args); err != nil {
				errs = append(errs, err)
			}
			continue
		}
		i := slices.IndexFunc(t.Actions, func(a schemaAction) bool { return short(a.Name) == g[3] })
		if i < 0 {
			errs = append(errs, fmt.Errorf("line %d: %s has no action %s", n+3, g[1], g[3]))
			continue
		}
		want := slices.Clone(t.Actions[i].Params)
		if g[2] == "add_with_" {
			want = append(want, t.Key...)
		}
		if err := matchFields(fmt.Sprintf("line %d", n+3), want, args); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// acceptedConfigs returns, per program, configurations NewPlan accepts:
// the golden ones and ones at the edges of every field's range.
func acceptedConfigs(t *testing.T) map[Program][]Config {
	t.Helper()
	edge := testConfig(t)
	edge.MulticastBase = 0xFFFF - uint16(len(edge.Collectors)*(p4gen.MaxCopies+1))
	edge.CPUPort = 511
	edge.Collectors[1].Port = 511
	for i := range edge.Collectors[0].Connections {
		c := &edge.Collectors[0].Connections[i]
		c.Index = uint8(255 - i)
		c.TranslatorQPN, c.CollectorQPN, c.StartPSN = 0xFFFFFF-uint32(i), 0xFFFFFF, 0xFFFFFF
		c.SrcMAC, c.DstMAC = [6]byte{0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF}, [6]byte{0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFE}
		c.Src, c.Dst = netip.MustParseAddr("255.255.255.254"), netip.MustParseAddr("255.255.255.253")
		c.SrcPort = 0xFFFF
	}
	edge.RatePPS, edge.BurstPackets = 1<<40, 1<<40
	edge.ReportPorts = []uint16{384, 511}

	a := pcConnection(t)
	b := a
	b.Index, b.TranslatorQPN, b.CollectorQPN, b.Dst = 255, 0xFFFFFF, 0xFFFFFF, b.Dst.Next()
	l := postcard.Layout{Hops: p4gen.PostcardHops, Chunks: 1 << p4gen.PostcardChunkBits, Copies: p4gen.MaxCopies}
	b.Ad.Geometry, _ = l.AppendBinary(nil)
	b.Ad.VA, b.Ad.Length = 0x7F0000000000, uint32(l.RegionSize())
	pc := Config{
		Program:       PostcardProgram,
		Collectors:    []Collector{{Port: 8, Connections: []Connection{a}}, {Port: 511, Connections: []Connection{b}}},
		MulticastBase: 0xFFFF - 2<<p4gen.QPBits, CPUPort: 511, RatePPS: 1_000_000, BurstPackets: 10_000,
		ReportPorts: []uint16{511},
	}
	// translator_t2.p4: the golden configuration, and the edge one with a
	// Postcarding instance of the most chunks and the highest groups.
	t2edge := edge
	t2edge.Program = Tofino2Program
	t2edge.MulticastBase = 0xFFFF - uint16(len(edge.Collectors)*copiesStride) - 2<<p4gen.QPBits
	t2edge.Collectors = slices.Clone(edge.Collectors)
	b.Index = 200
	t2edge.Collectors[1].Connections = append(slices.Clone(edge.Collectors[1].Connections), b)
	return map[Program][]Config{TranslatorProgram: {testConfig(t), edge}, PostcardProgram: {pc}, Tofino2Program: {t2Config(t), t2edge}}
}

// TestPlanMatchesSchema validates NewPlan's entries, registers and meters
// and its bfrt_python script against each translator's BF-RT schema, for
// the golden configurations and ones at the edges of every field.
func TestPlanMatchesSchema(t *testing.T) {
	for prog, cfgs := range acceptedConfigs(t) {
		name := prog.Name()
		s, err := loadSchema("testdata/bfrt_" + name + ".json")
		if err != nil {
			t.Fatal(err)
		}
		for i, cfg := range cfgs {
			p, err := NewPlan(cfg)
			if err != nil {
				t.Fatalf("%s config %d: %v", prog, i, err)
			}
			if err := checkPlan(s, p); err != nil {
				t.Errorf("%s config %d: plan:\n%v", prog, i, err)
			}
			if err := checkScript(s, name, p.BfrtPython(name)); err != nil {
				t.Errorf("%s config %d: script:\n%v", prog, i, err)
			}
		}
	}
}

func loadSchema(path string) (*schema, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var s schema
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &s, nil
}

// TestCheckPlanRejects shows the schema checks failing on plans and
// scripts that do not match the program.
func TestCheckPlanRejects(t *testing.T) {
	s, err := loadSchema("testdata/bfrt_translator.json")
	if err != nil {
		t.Fatal(err)
	}
	for name, f := range map[string]func(p *Plan){
		"table":       func(p *Plan) { p.Entries[0].Table = "Egress.qps" },
		"action":      func(p *Plan) { p.Entries[0].Action = "Egress.set_qps" },
		"key field":   func(p *Plan) { p.Entries[0].Key[0].Name = "qpi" },
		"key width":   func(p *Plan) { p.Entries[0].Key[0].Value = 256 },
		"param width": func(p *Plan) { p.Entries[0].Data[0].Value = 1 << 48 },
		"param gone":  func(p *Plan) { p.Entries[0].Data = p.Entries[0].Data[1:] },
		"register":    func(p *Plan) { p.Registers[0].Index = 256 },
		"meter":       func(p *Plan) { p.Meters[0].Meter = "Egress.rate" },
		"entries":     func(p *Plan) { p.Entries = append(p.Entries, slices.Repeat(p.Entries[:1], 300)...) },
	} {
		p, err := NewPlan(testConfig(t))
		if err != nil {
			t.Fatal(err)
		}
		f(p)
		if checkPlan(s, p) == nil {
			t.Errorf("%s: plan accepted", name)
		}
		if name != "register" && name != "meter" && name != "entries" && checkScript(s, "translator", p.BfrtPython("translator")) == nil {
			t.Errorf("%s: script accepted", name)
		}
	}
}
