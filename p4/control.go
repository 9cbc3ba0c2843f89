package p4

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/dtakit/dtakit/dta"
	"github.com/dtakit/dtakit/internal/p4gen"
)

// Collector is one collector as the translator switch reaches it.
type Collector struct {
	// Port is the switch's dev_port toward the collector.
	Port uint16
	// Connections are its primitive instances, one RC connection each, in
	// CM port order: reports of a primitive go to the first instance of it,
	// as with the software translator (docs/DTA-WIRE.md section 8.6).
	Connections []Connection
}

// devPortBits is the width of a Tofino dev_port (PortId_t).
const devPortBits = 9

// Program names a compiled translator program: a switch runs one.
type Program uint8

const (
	// TranslatorProgram is translator/translator.p4 (Tofino-1): Key-Write,
	// Key-Increment and Append.
	TranslatorProgram Program = iota
	// PostcardProgram is translator/postcard.p4 (Tofino-1): Postcarding.
	PostcardProgram
	// Tofino2Program is translator/translator_t2.p4 (Tofino-2, T2NA): all
	// four primitives in one program.
	Tofino2Program
)

func (p Program) String() string {
	switch p {
	case PostcardProgram:
		return "postcard.p4"
	case Tofino2Program:
		return "translator_t2.p4"
	}
	return "translator.p4"
}

// Name is the program's name as the SDE loads it (bfrt.<name>.pipe): its
// file name without .p4.
func (p Program) Name() string { return strings.TrimSuffix(p.String(), ".p4") }

// Serves reports whether the program translates op.
func (p Program) Serves(op dta.Opcode) bool {
	switch p {
	case PostcardProgram:
		return op == dta.OpPostcard
	case Tofino2Program:
		return op == dta.OpPostcard || op == dta.OpKeyWrite || op == dta.OpKeyIncrement || op == dta.OpAppend
	}
	return op == dta.OpKeyWrite || op == dta.OpKeyIncrement || op == dta.OpAppend
}

// replicates reports whether the program has Ingress.copies: Key-Write,
// Key-Increment and Append reports replicated through a group per (QP, N).
func (p Program) replicates() bool { return p != PostcardProgram }

// postcardBase is the multicast group ID below the Postcarding instances'
// groups (postcardGroups) for n collectors.
func (p Program) postcardBase(base uint16, n int) uint32 {
	if p == Tofino2Program {
		return uint32(base) + uint32(n)*copiesStride
	}
	return uint32(base)
}

// copiesStride is the multicast group IDs one collector's Ingress.copies
// groups take: one per N in 1..DTA_MAX_COPIES, and one unused.
const copiesStride = p4gen.MaxCopies + 1

// Config is what the control plane needs besides the advertisements.
type Config struct {
	// Program is the program loaded on the switch.
	Program    Program
	Collectors []Collector
	// Choice maps CRC8(be32(key)) to a collector index; nil means entry i
	// names collector i mod len(Collectors), the software translator's default.
	Choice *[256]uint8
	// MulticastBase is the first multicast group ID. translator.p4:
	// collector c uses groups MulticastBase + c*(DTA_MAX_COPIES+1) + N for
	// redundancy N, which Ingress.copies names per (QP, N). postcard.p4: the
	// Postcarding instance on QP q uses MulticastBase + 2q + 1 for its
	// flows' chunks (replication IDs 0..N-1) and MulticastBase + 2q + 2 for
	// evicted flows' (replication IDs DTA_PC_EVICTED | 0..N-1).
	// translator_t2.p4: both, the Postcarding groups counted from
	// MulticastBase + len(Collectors)*(DTA_MAX_COPIES+1) instead.
	MulticastBase uint16
	// CPUPort is the dev_port of the switch CPU, which runs the CM
	// (Handshake): RoCEv2 packets other than ACKs and NAKs are sent to it,
	// and what it sends to a collector's address is forwarded to the
	// collector's port. 0 programs neither (dev_port 0 is never the CPU's).
	CPUPort uint16
	// RatePPS and BurstPackets configure each QP's meter; 0 leaves the
	// meters at the SDE's default (no limit is programmed).
	RatePPS, BurstPackets uint64
	// ReportPorts are the dev_ports reports may enter through, all of one
	// pipe: Tofino keeps the Append batches and heads, the postcard cache
	// and the meters (ingress registers) once per pipe, so reports of one
	// list or flow entering through two pipes would keep two heads or two
	// cache entries. A report from another port is NACKed when sequenced,
	// else dropped and counted; none admits no report.
	ReportPorts []uint16
}

// pipeOf is the pipe of a Tofino dev_port: its bits 8..7.
func pipeOf(port uint16) uint16 { return port >> 7 }

// Field is one named key field, action parameter or data field.
type Field struct {
	Name  string `json:"name"`
	Value uint64 `json:"value"`
}

// Entry is one match-action table entry.
type Entry struct {
	Table  string  `json:"table"`
	Key    []Field `json:"key"`
	Action string  `json:"action"`
	Data   []Field `json:"data"`
}

// Register is one register cell's initial value.
type Register struct {
	Register string `json:"register"`
	Index    uint32 `json:"index"`
	Value    uint64 `json:"value"`
}

// Node is a multicast node of the packet replication engine: one copy with
// its replication ID (the copy index the egress hashes with).
type Node struct {
	ID   uint32 `json:"node_id"`
	RID  uint16 `json:"rid"`
	Port uint16 `json:"dev_port"`
}

// Group is a multicast group.
type Group struct {
	ID    uint16   `json:"mgid"`
	Nodes []uint32 `json:"nodes"`
}

// Meter is one packet-rate meter cell.
type Meter struct {
	Meter string `json:"meter"`
	Index uint32 `json:"index"`
	CIR   uint64 `json:"cir_pps"`
	CBS   uint64 `json:"cbs_pkts"`
}

// Plan is everything the control plane programs into the translator.
type Plan struct {
	Entries   []Entry    `json:"entries"`
	Registers []Register `json:"registers"`
	Nodes     []Node     `json:"nodes"`
	Groups    []Group    `json:"groups"`
	Meters    []Meter    `json:"meters"`
}

// NewPlan computes the translator's table entries, register values,
// multicast groups and meters for cfg. Every connection is checked against
// the compiled program; the first problem is returned.
func NewPlan(cfg Config) (*Plan, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	b := planner{cfg: cfg, p: &Plan{}, seen: map[uint8]bool{}}
	for c := range cfg.Collectors {
		if err := b.collector(c); err != nil {
			return nil, err
		}
	}
	b.cpu()
	b.reportPorts()
	b.instances()
	return b.p, nil
}

// validate checks what of cfg does not depend on the advertisements.
func (cfg *Config) validate() error {
	n := len(cfg.Collectors)
	if n == 0 || n > 256 {
		return fmt.Errorf("p4: plan: %w: %d collectors, want 1..256", ErrConfig, n)
	}
	if cfg.Program > Tofino2Program {
		return fmt.Errorf("p4: plan: %w: unknown program %d", ErrConfig, cfg.Program)
	}
	top := cfg.Program.postcardBase(cfg.MulticastBase, n) + 2<<p4gen.QPBits
	if cfg.Program == TranslatorProgram {
		top = uint32(cfg.MulticastBase) + uint32(n)*copiesStride
	}
	if top > 0xFFFF {
		return fmt.Errorf("p4: plan: %w: multicast group IDs overflow", ErrConfig)
	}
	if cfg.CPUPort >= 1<<devPortBits {
		return fmt.Errorf("p4: plan: %w: CPU port %d wider than a %d-bit dev_port", ErrConfig, cfg.CPUPort, devPortBits)
	}
	for _, port := range cfg.ReportPorts {
		if port >= 1<<devPortBits {
			return fmt.Errorf("p4: plan: %w: report port %d wider than a %d-bit dev_port", ErrConfig, port, devPortBits)
		}
		if pipeOf(port) != pipeOf(cfg.ReportPorts[0]) {
			return fmt.Errorf("p4: plan: %w: report ports %d and %d are in pipes %d and %d: the Append, postcard and meter state is per pipe",
				ErrConfig, cfg.ReportPorts[0], port, pipeOf(cfg.ReportPorts[0]), pipeOf(port))
		}
	}
	for c, col := range cfg.Collectors {
		if col.Port >= 1<<devPortBits {
			return fmt.Errorf("p4: plan: %w: collector %d: port %d wider than a %d-bit dev_port", ErrConfig, c, col.Port, devPortBits)
		}
	}
	if cfg.Choice != nil {
		for i, c := range cfg.Choice {
			if int(c) >= n {
				return fmt.Errorf("p4: plan: %w: choice %d names collector %d of %d", ErrConfig, i, c, n)
			}
		}
	}
	return nil
}

// planner builds a Plan, collector by collector.
type planner struct {
	cfg    Config
	p      *Plan
	seen   map[uint8]bool // QP indices
	nodeID uint32
}

// group adds a multicast group with one node per replication ID, to port.
func (b *planner) group(id uint16, port uint16, rids ...uint16) {
	g := Group{ID: id}
	for _, rid := range rids {
		b.nodeID++
		b.p.Nodes = append(b.p.Nodes, Node{ID: b.nodeID, RID: rid, Port: port})
		g.Nodes = append(g.Nodes, b.nodeID)
	}
	b.p.Groups = append(b.p.Groups, g)
}

// copyRIDs returns the replication IDs 0..n-1, each ORed with flag.
func copyRIDs(n int, flag uint16) []uint16 {
	rids := make([]uint16, n)
	for i := range rids {
		rids[i] = uint16(i) | flag
	}
	return rids
}

// copiesGroup is the multicast group of N copies to collector c.
func (b *planner) copiesGroup(c, copies int) uint16 {
	return b.cfg.MulticastBase + uint16(uint32(c)*copiesStride) + uint16(copies)
}

// postcardGroups returns the multicast groups of the Postcarding instance
// on QP index q: its flows' chunks, and evicted flows' chunks.
func (b *planner) postcardGroups(q uint8) (own, evicted uint16) {
	base := uint16(b.cfg.Program.postcardBase(b.cfg.MulticastBase, len(b.cfg.Collectors)))
	return base + 2*uint16(q) + 1, base + 2*uint16(q) + 2
}

// collector adds collector c's groups and its connections' entries.
func (b *planner) collector(c int) error {
	col := b.cfg.Collectors[c]
	if b.cfg.Program.replicates() {
		for copies := 1; copies <= p4gen.MaxCopies; copies++ {
			b.group(b.copiesGroup(c, copies), col.Port, copyRIDs(copies, 0)...)
		}
	}
	for i := range col.Connections {
		if err := b.connection(c, &col.Connections[i]); err != nil {
			return err
		}
	}
	return nil
}

// connection adds a connection's qp, responder and copies entries, its
// Postcarding groups, PSN register and meter.
func (b *planner) connection(c int, conn *Connection) error {
	col := b.cfg.Collectors[c]
	if b.seen[conn.Index] {
		return fmt.Errorf("p4: plan: %w: QP index %d used twice", ErrConfig, conn.Index)
	}
	b.seen[conn.Index] = true
	s, err := conn.check()
	if err != nil {
		return err
	}
	if !b.cfg.Program.Serves(s.op) {
		return fmt.Errorf("p4: plan: connection %d: %w: %v is not compiled into %v", conn.Index, ErrAdvertisement, s.op, b.cfg.Program)
	}
	qp, err := b.qpEntry(conn, s)
	if err != nil {
		return err
	}
	if s.op == dta.OpPostcard {
		own, ev := b.postcardGroups(conn.Index)
		copies := s.pc.Layout().Copies
		b.group(own, col.Port, copyRIDs(copies, 0)...)
		b.group(ev, col.Port, copyRIDs(copies, p4gen.PostcardEvicted)...)
	}
	b.p.Entries = append(b.p.Entries, qp, Entry{
		Table: "Ingress.responder", Key: []Field{{"dst_qp", uint64(conn.TranslatorQPN)}}, Action: "Ingress.ack_to",
		Data: []Field{{"port", uint64(col.Port)}, {"qp", uint64(conn.Index)}},
	})
	if b.cfg.Program.replicates() && s.op != dta.OpPostcard {
		for copies := 1; copies <= p4gen.MaxCopies; copies++ {
			b.p.Entries = append(b.p.Entries, Entry{
				Table: "Ingress.copies", Key: []Field{{"qp", uint64(conn.Index)}, {"n", uint64(copies)}}, Action: "Ingress.replicate",
				Data: []Field{{"mgid", uint64(b.copiesGroup(c, copies))}},
			})
		}
	}
	b.p.Registers = append(b.p.Registers, Register{"Egress.psn", uint32(conn.Index), uint64(conn.StartPSN)})
	if b.cfg.RatePPS != 0 {
		b.p.Meters = append(b.p.Meters, Meter{"Ingress.rate", uint32(conn.Index), b.cfg.RatePPS, max(b.cfg.BurstPackets, 1)})
	}
	return nil
}

// qpEntry is the connection's Egress.qp entry: addresses, QPN, region, the
// slot mask and the ICRC constant.
func (b *planner) qpEntry(conn *Connection, s shape) (Entry, error) {
	k, err := conn.icrcConstant(s)
	if err != nil {
		return Entry{}, err
	}
	// Append batches go to the list's head, not to a hashed slot: no mask.
	qpKey, maskName, mask := "qp", "slot_mask", uint64(0)
	if s.slots > 0 {
		mask = s.slots - 1
	}
	switch b.cfg.Program {
	case PostcardProgram:
		// The egress places the chunk hash at the chunk's byte offset.
		qpKey, maskName, mask = "qpi", "chunk_mask", mask*uint64(s.pc.Layout().ChunkSize())
	case Tofino2Program:
		qpKey = "qpi" // the postcard's QP or the evicted flow's
	}
	return Entry{
		Table: "Egress.qp", Key: []Field{{qpKey, uint64(conn.Index)}}, Action: "Egress.set_qp",
		Data: []Field{
			{"src_mac", mac(conn.SrcMAC)}, {"dst_mac", mac(conn.DstMAC)},
			{"src_ip", uint64(ip4(conn.Src))}, {"dst_ip", uint64(ip4(conn.Dst))},
			{"src_port", uint64(conn.SrcPort)}, {"dst_qp", uint64(conn.CollectorQPN)},
			{"rkey", uint64(conn.Ad.RKey)}, {"va_hi", conn.Ad.VA >> 32}, {"va_lo", conn.Ad.VA & 0xFFFFFFFF},
			{maskName, mask}, {"icrc", uint64(k)},
		},
	}, nil
}

// cpu adds the entries that connect the switch CPU, if it has a port.
func (b *planner) cpu() {
	if b.cfg.CPUPort == 0 {
		return
	}
	b.p.Entries = append(b.p.Entries, Entry{Table: "Ingress.to_cpu", Action: "Ingress.punt", Data: []Field{{"port", uint64(b.cfg.CPUPort)}}})
	dsts := map[uint32]bool{}
	for _, col := range b.cfg.Collectors {
		for _, conn := range col.Connections {
			if ip := ip4(conn.Dst); !dsts[ip] {
				dsts[ip] = true
				b.p.Entries = append(b.p.Entries, Entry{
					Table: "Ingress.from_cpu", Key: []Field{{"ingress_port", uint64(b.cfg.CPUPort)}, {"dst", uint64(ip)}},
					Action: "Ingress.punt", Data: []Field{{"port", uint64(col.Port)}},
				})
			}
		}
	}
}

// reportPorts adds Ingress.report_ports, each port once.
func (b *planner) reportPorts() {
	seen := map[uint16]bool{}
	for _, port := range b.cfg.ReportPorts {
		if !seen[port] {
			seen[port] = true
			b.p.Entries = append(b.p.Entries, Entry{Table: "Ingress.report_ports", Key: []Field{{"ingress_port", uint64(port)}}, Action: "Ingress.report_port"})
		}
	}
}

// instances adds, for each of the 256 collector choices, the chosen
// collector's first instance of each primitive (Ingress.instance), and for
// Postcarding the evicted flows' entry (Ingress.evicted, after all others).
func (b *planner) instances() {
	var evicted []Entry
	for i := range 256 {
		c := i % len(b.cfg.Collectors)
		if b.cfg.Choice != nil {
			c = int(b.cfg.Choice[i])
		}
		used := map[dta.Opcode]bool{}
		for _, conn := range b.cfg.Collectors[c].Connections {
			op := conn.Ad.Primitive
			if used[op] {
				continue // a later instance of the same primitive gets nothing
			}
			used[op] = true
			if op != dta.OpPostcard {
				b.p.Entries = append(b.p.Entries, Entry{
					Table: "Ingress.instance", Key: []Field{{"crc8", uint64(i)}, {"opcode", uint64(op)}}, Action: "Ingress.to_instance",
					Data: []Field{{"qp", uint64(conn.Index)}},
				})
				continue
			}
			e, ev := b.postcardInstance(i, conn.Index)
			b.p.Entries = append(b.p.Entries, e)
			evicted = append(evicted, ev)
		}
	}
	b.p.Entries = append(b.p.Entries, evicted...)
}

// postcardInstance returns the Ingress.instance and Ingress.evicted entries
// of collector choice i for the Postcarding instance on QP index q.
func (b *planner) postcardInstance(i int, q uint8) (instance, evicted Entry) {
	own, ev := b.postcardGroups(q)
	instance = Entry{
		Table: "Ingress.instance", Key: []Field{{"crc8", uint64(i)}}, Action: "Ingress.to_instance",
		Data: []Field{{"qp", uint64(q)}, {"mgid", uint64(own)}},
	}
	if b.cfg.Program == Tofino2Program {
		instance.Key = append(instance.Key, Field{"opcode", uint64(dta.OpPostcard)})
		instance.Action = "Ingress.to_pc_instance"
	}
	evicted = Entry{
		Table: "Ingress.evicted", Key: []Field{{"crc8_ev", uint64(i)}}, Action: "Ingress.to_evicted",
		Data: []Field{{"qp", uint64(q)}, {"mgid", uint64(ev)}},
	}
	return instance, evicted
}

func mac(m [6]byte) uint64 {
	var v uint64
	for _, b := range m {
		v = v<<8 | uint64(b)
	}
	return v
}

func ip4(a interface{ As4() [4]byte }) uint32 {
	b := a.As4()
	return uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])
}

// JSON returns the plan as indented JSON.
func (p *Plan) JSON() ([]byte, error) {
	b, err := json.MarshalIndent(p, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("p4: plan json: %w", err)
	}
	return append(b, '\n'), nil
}

// BfrtPython returns the plan as a bfrt_python script for the program
// loaded as program (e.g. "translator"): run it with bfshell -b FILE.
// bfrt_python names key fields and action parameters by their last name.
func (p *Plan) BfrtPython(program string) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "# Generated by dtakit's p4.Plan.BfrtPython; run with bfshell -b FILE.\n")
	fmt.Fprintf(&b, "p = bfrt.%s.pipe\n", program)
	args := func(fs []Field) string {
		var s bytes.Buffer
		for i, f := range fs {
			if i > 0 {
				s.WriteString(", ")
			}
			fmt.Fprintf(&s, "%s=0x%X", f.Name, f.Value)
		}
		return s.String()
	}
	for _, n := range p.Nodes {
		fmt.Fprintf(&b, "bfrt.pre.node.add(MULTICAST_NODE_ID=%d, MULTICAST_RID=%d, MULTICAST_LAG_ID=[], DEV_PORT=[%d])\n", n.ID, n.RID, n.Port)
	}
	for _, g := range p.Groups {
		fmt.Fprintf(&b, "bfrt.pre.mgid.add(MGID=%d, MULTICAST_NODE_ID=%s, MULTICAST_NODE_L1_XID_VALID=[%s], MULTICAST_NODE_L1_XID=[%s])\n",
			g.ID, pyList(g.Nodes, func(v uint32) string { return fmt.Sprint(v) }),
			join(len(g.Nodes), "False"), join(len(g.Nodes), "0"))
	}
	for _, e := range p.Entries {
		action := e.Action[bytes.LastIndexByte([]byte(e.Action), '.')+1:]
		if len(e.Key) == 0 { // a keyless table: its default action
			fmt.Fprintf(&b, "p.%s.set_default_with_%s(%s)\n", e.Table, action, args(e.Data))
			continue
		}
		fmt.Fprintf(&b, "p.%s.add_with_%s(%s)\n", e.Table, action, args(append(slices.Clone(e.Key), e.Data...)))
	}
	for _, r := range p.Registers {
		fmt.Fprintf(&b, "p.%s.mod(REGISTER_INDEX=%d, f1=0x%X)\n", r.Register, r.Index, r.Value)
	}
	for _, m := range p.Meters {
		fmt.Fprintf(&b, "p.%s.mod(METER_INDEX=%d, METER_SPEC_CIR_PPS=%d, METER_SPEC_PIR_PPS=%d, METER_SPEC_CBS_PKTS=%d, METER_SPEC_PBS_PKTS=%d)\n",
			m.Meter, m.Index, m.CIR, m.CIR, m.CBS, m.CBS)
	}
	b.WriteString("bfrt.complete_operations()\n")
	return b.Bytes()
}

func pyList(v []uint32, f func(uint32) string) string {
	var b bytes.Buffer
	b.WriteByte('[')
	for i, x := range v {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(f(x))
	}
	b.WriteByte(']')
	return b.String()
}

func join(n int, s string) string {
	var b bytes.Buffer
	for i := range n {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(s)
	}
	return b.String()
}
