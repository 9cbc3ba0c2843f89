package p4

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/dtakit/dtakit/dta"
	"github.com/dtakit/dtakit/p4/internal/p4gen"
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
	_, err := lookupFor(op, p)
	return err == nil
}

// qpKey names the key of the program's Egress.qp table: translator_t2.p4's
// is the postcard's QP or the evicted flow's, as postcard.p4's.
func (p Program) qpKey() string {
	if p == TranslatorProgram {
		return "qp"
	}
	return "qpi"
}

// replicates reports whether the program has Ingress.copies: Key-Write,
// Key-Increment and Append reports replicated through a group per (QP, N).
func (p Program) replicates() bool { return p != PostcardProgram }

// postcardBase is the multicast group ID below the Postcarding instances'
// groups (postcardGroups) for n collectors: translator_t2.p4's come after
// the collectors' copies groups.
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
	if err := cfg.checkPlanConfig(); err != nil {
		return nil, err
	}
	pl := &planner{cfg: cfg, p: &Plan{}, stride: copiesStride, seen: map[uint8]bool{}}
	for c := range cfg.Collectors {
		if err := pl.collector(c); err != nil {
			return nil, err
		}
	}
	pl.cpu()
	pl.reportPorts()
	if err := pl.instances(); err != nil {
		return nil, err
	}
	return pl.p, nil
}

// checkPlanConfig checks what NewPlan needs of cfg beyond the connections.
func (cfg Config) checkPlanConfig() error {
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
	return nil
}

// planner builds a Plan, a collector and a connection at a time.
type planner struct {
	cfg    Config
	p      *Plan
	stride uint32         // multicast group IDs per collector
	seen   map[uint8]bool // QP indexes planned
	nodeID uint32         // the last multicast node's ID
	// evicted are postcard.p4's entries for evicted chunks, planned after
	// every other entry.
	evicted []Entry
}

// group adds multicast group id of one node per rid, on port.
func (pl *planner) group(id uint16, port uint16, rids ...uint16) {
	g := Group{ID: id}
	for _, rid := range rids {
		pl.nodeID++
		pl.p.Nodes = append(pl.p.Nodes, Node{ID: pl.nodeID, RID: rid, Port: port})
		g.Nodes = append(g.Nodes, pl.nodeID)
	}
	pl.p.Groups = append(pl.p.Groups, g)
}

// collector plans collector c's multicast groups and connections.
func (pl *planner) collector(c int) error {
	col := pl.cfg.Collectors[c]
	mgid := pl.cfg.MulticastBase + uint16(uint32(c)*pl.stride)
	if pl.cfg.Program.replicates() {
		for copies := 1; copies <= p4gen.MaxCopies; copies++ {
			pl.group(mgid+uint16(copies), col.Port, ridsUpTo(copies)...)
		}
	}
	for i := range col.Connections {
		if err := pl.connection(col.Port, mgid, &col.Connections[i]); err != nil {
			return err
		}
	}
	return nil
}

// ridsUpTo returns the replication IDs 0..n-1.
func ridsUpTo(n int) []uint16 {
	rids := make([]uint16, n)
	for rid := range rids {
		rids[rid] = uint16(rid)
	}
	return rids
}

// connection plans one connection of a collector on port whose copies'
// multicast groups start at mgid: its egress QP entry, its responder entry,
// its copies or postcard groups, its PSN register and its meter.
func (pl *planner) connection(port, mgid uint16, conn *Connection) error {
	cfg := pl.cfg
	if pl.seen[conn.Index] {
		return fmt.Errorf("p4: plan: %w: QP index %d used twice", ErrConfig, conn.Index)
	}
	pl.seen[conn.Index] = true
	if _, err := lookupFor(conn.Ad.Primitive, cfg.Program); err != nil {
		return fmt.Errorf("p4: plan: connection %d: %w: %w", conn.Index, ErrAdvertisement, err)
	}
	s, err := conn.check()
	if err != nil {
		return err
	}
	k, err := conn.icrcConstant(s)
	if err != nil {
		return err
	}
	qp := Entry{
		Table: "Egress.qp", Key: []Field{{cfg.Program.qpKey(), uint64(conn.Index)}}, Action: "Egress.set_qp",
		Data: []Field{
			{"src_mac", mac(conn.SrcMAC)}, {"dst_mac", mac(conn.DstMAC)},
			{"src_ip", uint64(ip4(conn.Src))}, {"dst_ip", uint64(ip4(conn.Dst))},
			{"src_port", uint64(conn.SrcPort)}, {"dst_qp", uint64(conn.CollectorQPN)},
			{"rkey", uint64(conn.Ad.RKey)}, {"va_hi", conn.Ad.VA >> 32}, {"va_lo", conn.Ad.VA & 0xFFFFFFFF},
			s.t.mask(cfg.Program, &s), {"icrc", uint64(k)},
		},
	}
	if cfg.Program.Serves(dta.OpKeyIncrement) { // its probes are zero-length WRITEs (section 8.7)
		pk, err := conn.probeICRCConstant()
		if err != nil {
			return err
		}
		qp.Data = append(qp.Data, Field{"probe_icrc", uint64(pk)})
	}
	pl.p.Entries = append(pl.p.Entries, qp, Entry{
		Table: "Ingress.responder", Key: []Field{{"dst_qp", uint64(conn.TranslatorQPN)}}, Action: "Ingress.ack_to",
		Data: []Field{{"port", uint64(port)}, {"qp", uint64(conn.Index)}},
	})
	s.t.connection(pl, port, mgid, conn, &s)
	// since_ack from 0: a QP connected again starts unstalled (section 8.7).
	pl.p.Registers = append(pl.p.Registers, Register{"Egress.psn", uint32(conn.Index), uint64(conn.StartPSN)},
		Register{"Egress.since_ack", uint32(conn.Index), 0})
	if cfg.RatePPS != 0 {
		pl.p.Meters = append(pl.p.Meters, Meter{"Ingress.rate", uint32(conn.Index), cfg.RatePPS, max(cfg.BurstPackets, 1)})
	}
	return nil
}

// cpu plans the CPU port's punt entries, when there is one.
func (pl *planner) cpu() {
	cfg := pl.cfg
	if cfg.CPUPort == 0 {
		return
	}
	pl.p.Entries = append(pl.p.Entries, Entry{Table: "Ingress.to_cpu", Action: "Ingress.punt", Data: []Field{{"port", uint64(cfg.CPUPort)}}})
	dsts := map[uint32]bool{}
	for _, col := range cfg.Collectors {
		for _, conn := range col.Connections {
			if ip := ip4(conn.Dst); !dsts[ip] {
				dsts[ip] = true
				pl.p.Entries = append(pl.p.Entries, Entry{
					Table: "Ingress.from_cpu", Key: []Field{{"ingress_port", uint64(cfg.CPUPort)}, {"dst", uint64(ip)}},
					Action: "Ingress.punt", Data: []Field{{"port", uint64(col.Port)}},
				})
			}
		}
	}
}

// reportPorts plans the ports reports are taken on.
func (pl *planner) reportPorts() {
	seenPort := map[uint16]bool{}
	for _, port := range pl.cfg.ReportPorts {
		if !seenPort[port] {
			seenPort[port] = true
			pl.p.Entries = append(pl.p.Entries, Entry{Table: "Ingress.report_ports", Key: []Field{{"ingress_port", uint64(port)}}, Action: "Ingress.report_port"})
		}
	}
}

// instances plans the choice of a report's instance: for each of the 256
// CRC8 values, the chosen collector's first instance of each primitive.
func (pl *planner) instances() error {
	cfg := pl.cfg
	n := len(cfg.Collectors)
	for i := range 256 {
		c := i % n
		if cfg.Choice != nil {
			c = int(cfg.Choice[i])
			if c >= n {
				return fmt.Errorf("p4: plan: %w: choice %d names collector %d of %d", ErrConfig, i, c, n)
			}
		}
		used := map[dta.Opcode]bool{}
		for _, conn := range cfg.Collectors[c].Connections {
			op := conn.Ad.Primitive
			if used[op] {
				continue // a later instance of the same primitive gets nothing
			}
			used[op] = true
			t, err := lookupFor(op, cfg.Program)
			if err != nil {
				return fmt.Errorf("p4: plan: %w: %w", ErrAdvertisement, err)
			}
			t.instance(pl, i, &conn)
		}
	}
	pl.p.Entries = append(pl.p.Entries, pl.evicted...)
	return nil
}

// postcardGroups returns the multicast groups of the Postcarding instance on
// QP index q: its flows' chunks, and evicted flows' chunks.
func (pl *planner) postcardGroups(q uint8) (own, evicted uint16) {
	base := uint16(pl.cfg.Program.postcardBase(pl.cfg.MulticastBase, len(pl.cfg.Collectors)))
	return base + 2*uint16(q) + 1, base + 2*uint16(q) + 2
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
