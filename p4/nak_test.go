package p4

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dtakit/dtakit/appendlist"
	"github.com/dtakit/dtakit/dta"
	"github.com/dtakit/dtakit/keyincr"
	"github.com/dtakit/dtakit/keywrite"
	"github.com/dtakit/dtakit/p4/internal/p4gen"
	"github.com/dtakit/dtakit/rocev2"
	"github.com/dtakit/dtakit/rocev2/target"
)

// qpState is the egress per-QP state of translator.p4 and postcard.p4
// (docs/DTA-WIRE.md section 8.7), written as the P4 runs it: since_op
// (since_ack's count_report and ack_seen), psn_op (psn's next_psn,
// read_psn, resync_psn and resync_ack, the probes counter) and the BTH
// assignments after them. p4NAKActions holds the P4 text this mirrors.
type qpState struct {
	psn      uint32 // Egress.psn
	sinceAck uint16 // Egress.since_ack
	probes   uint64 // Egress.probes
	// noProbe runs psn_op without its stalled entries, as the programs
	// were before the probe: to show that the tests catch a QP that stalls.
	noProbe bool
}

// stalled is psn_op's key since[DTA_STALL_BITS:DTA_STALL_BITS]: since_ack
// saturates at DTA_STALL_PACKETS = 2^DTA_STALL_BITS, so the bit is set
// exactly when the old value reached it.
func stalled(since uint16) bool { return since>>p4gen.StallBits&1 == 1 }

// report runs a report packet of the QP through egress: the PSN its BTH
// carries, and whether it is a probe (AckReq set, PSN behind).
func (q *qpState) report() (psn uint32, probe bool) {
	// since_op: count()
	since := q.sinceAck // count_report: old = v
	if q.sinceAck < p4gen.StallPackets {
		q.sinceAck = q.sinceAck + 1
	}
	if stalled(since) && !q.noProbe {
		// psn_op: probe_psn(): read_psn (old = v - DTA_PROBE_BEHIND), probes.count
		p := q.psn - p4gen.ProbeBehind
		q.probes++
		return p & rocev2.PSNMask, true // bth_psn(): h.bth.psn = m.psn[23:0]; AckReq set
	}
	// psn_op: take_psn(): next_psn
	p := q.psn
	if q.psn == 0x00FFFFFF {
		q.psn = 0
	} else {
		q.psn = q.psn + 1
	}
	return p & rocev2.PSNMask, false
}

// response runs an ACK, NAK or atomic ACK of the QP (KIND_ACK) through
// egress, which then drops it, and reports whether it set the PSN.
func (q *qpState) response(syndrome rocev2.Syndrome, bthPSN uint32) bool {
	// since_op: acked()
	since := q.sinceAck // ack_seen: old = v; v = 0
	q.sinceAck = 0
	switch {
	case syndrome == rocev2.SyndromeNAKPSNSequenceError:
		q.psn = bthPSN // resync(): resync_psn, m.ack_psn = h.bth.psn
		return true
	case stalled(since) && syndrome&0xE0 == 0 && !q.noProbe:
		q.psn = bthPSN + 1 // resync_ack_psn(): resync_ack (2^24 after 2^24 - 1)
		return true
	}
	return false
}

// p4NAKActions is the P4 of the per-QP state qpState models, each piece
// required in every translator program (whitespace aside); p4NAKKinds
// adds its entries per kind of report.
var p4NAKActions = []string{
	`Register<bit<16>, qp_t>(1 << DTA_QP_BITS, 0) since_ack;`,
	`RegisterAction<bit<16>, qp_t, bit<16>>(since_ack) count_report = {
        void apply(inout bit<16> v, out bit<16> old) {
            old = v;
            if (v < DTA_STALL_PACKETS) { v = v + 1; }
        }
    };`,
	`RegisterAction<bit<16>, qp_t, bit<16>>(since_ack) ack_seen = {
        void apply(inout bit<16> v, out bit<16> old) { old = v; v = 0; }
    };`,
	`RegisterAction<bit<32>, qp_t, bit<32>>(psn) next_psn = {
        void apply(inout bit<32> v, out bit<32> old) {
            old = v;
            if (v == 0x00FFFFFF) { v = 0; } else { v = v + 1; } // 24-bit wrap
        }
    };`,
	`RegisterAction<bit<32>, qp_t, bit<32>>(psn) read_psn = {
        void apply(inout bit<32> v, out bit<32> old) { old = v - DTA_PROBE_BEHIND; }
    };`,
	`RegisterAction<bit<32>, qp_t, bit<32>>(psn) resync_psn = {
        void apply(inout bit<32> v) { v = (bit<32>)m.ack_psn; }
    };`,
	`RegisterAction<bit<32>, qp_t, bit<32>>(psn) resync_ack = {
        void apply(inout bit<32> v) { v = (bit<32>)m.ack_psn + 1; }
    };`,
	`since[DTA_STALL_BITS:DTA_STALL_BITS]: exact @name("stalled");`,
	`m.ack_psn = h.bth.psn; transition accept;`,
	`if (probe == 1 ||`,
	`h.bth.psn = m.psn[23:0];`,
	`(KIND_ACK, 0, ROCE_SYNDROME_NAK_PSN): resync();`,
	`(KIND_ACK, 1, ROCE_SYNDROME_NAK_PSN): resync();`,
	`(KIND_ACK, 1, 0x00 &&& 0xE0): resync_ack_psn();`,
	`probe = 1; probes.count(`,
}

// p4KIProbe is the P4 of a Key-Increment QP's probe, the zero-length WRITE
// Connection.zeroWrite crafts (its lengths, opcode, DMA length and ICRC
// constant), required in the programs that send Key-Increment; TestICRCSplit
// checks its ICRC hash.
var p4KIProbe = []string{
	`action probe_write() {
        probe_psn();
        h.ipv4.total_len = 20 + 8 + ROCE_BTH_LEN + ROCE_RETH_LEN + ROCE_ICRC_LEN;
        h.udp.length = 8 + ROCE_BTH_LEN + ROCE_RETH_LEN + ROCE_ICRC_LEN;
        h.bth.opcode = ROCE_RC_WRITE_ONLY;
        h.reth.setValid(); h.reth.length = 0;
        h.atomic.setInvalid();
    }`,
	`m.checksum = probe_icrc;`,
	`icrc_probe.get({h.bth.ack_req, h.bth.resv7, h.bth.psn,
            h.reth.va_hi, h.reth.va_lo, h.reth.rkey, h.reth.length});`,
	`icrc_const = m.checksum;`,
}

// p4NAKKinds is since_op's and psn_op's entries for reports of kinds.
func p4NAKKinds(kinds []string) []string {
	var s []string
	for _, k := range kinds {
		probe := "probe_psn"
		if k == "KIND_KI" {
			probe = "probe_write" // p4KIProbe
		}
		s = append(s, k+": count();", "("+k+", 0, _): take_psn();", "("+k+", 1, _): "+probe+"();")
	}
	return append(s, "KIND_ACK: acked();")
}

// TestNAKStateMatchesP4 requires the P4 that qpState models in the three
// translators, for each kind of report each sends, the stall threshold and the probe's distance taken from the
// generated include (no literal), and the include's values p4gen's.
func TestNAKStateMatchesP4(t *testing.T) {
	space := strings.NewReplacer("\n", " ", "\t", " ")
	norm := func(s string) string { return strings.Join(strings.Fields(space.Replace(s)), " ") }
	for name, kinds := range map[string][]string{
		"translator/translator.p4":    {"KIND_KW", "KIND_KI", "KIND_AP"},
		"translator/postcard.p4":      {"KIND_CHUNK"},
		"translator/translator_t2.p4": {"KIND_KW", "KIND_KI", "KIND_AP", "KIND_CHUNK"},
	} {
		src, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		text := norm(string(src))
		wants := append(p4NAKKinds(kinds), p4NAKActions...)
		if slices.Contains(kinds, "KIND_KI") {
			wants = append(wants, p4KIProbe...)
		}
		for _, want := range wants {
			if !strings.Contains(text, norm(want)) {
				t.Errorf("%s lacks the per-QP P4 qpState models:\n%s", name, want)
			}
		}
		for _, lit := range []string{fmt.Sprint(p4gen.StallPackets), fmt.Sprint(p4gen.ProbeBehind),
			fmt.Sprintf("0x%X", p4gen.ProbeBehind), fmt.Sprintf("0x%X", 1<<24-p4gen.ProbeBehind)} {
			if strings.Contains(text, lit) {
				t.Errorf("%s spells %s: the stall threshold and probe distance come from the include", name, lit)
			}
		}
	}
	inc, err := os.ReadFile("include/dta_constants.p4")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		fmt.Sprintf("#define DTA_STALL_BITS %d ", p4gen.StallBits),
		fmt.Sprintf("#define DTA_STALL_PACKETS %d ", p4gen.StallPackets),
		fmt.Sprintf("#define DTA_PROBE_BEHIND %d ", p4gen.ProbeBehind),
	} {
		if !strings.Contains(string(inc), want) {
			t.Errorf("include lacks %q", want)
		}
	}
	if p4gen.StallPackets != 1<<p4gen.StallBits || p4gen.StallPackets <= 64 || p4gen.StallBits > 15 || p4gen.ProbeBehind >= 1<<23 {
		t.Errorf("StallPackets %d (bits %d), ProbeBehind %#x: need 2^bits above one AckReq interval, below the 16-bit register's top bit, and a probe inside the duplicate region",
			p4gen.StallPackets, p4gen.StallBits, p4gen.ProbeBehind)
	}
}

// TestQPStateWrap: a stalled QP's PSN set by an ACK of PSN 2^24 - 1 goes
// on at 0, its probes 2^22 behind modulo 2^24, as the 32-bit register's
// low 24 bits give them.
func TestQPStateWrap(t *testing.T) {
	q := qpState{psn: 5, sinceAck: p4gen.StallPackets}
	if psn, probe := q.report(); !probe || psn != (5-p4gen.ProbeBehind)&rocev2.PSNMask {
		t.Fatalf("stalled report: PSN %#x, probe %t; want probe %#x", psn, probe, (5-p4gen.ProbeBehind)&rocev2.PSNMask)
	}
	if !q.response(rocev2.SyndromeACK, rocev2.PSNMask) {
		t.Fatal("an ACK of a stalled QP did not set its PSN")
	}
	for want := range uint32(3) {
		if psn, probe := q.report(); probe || psn != want {
			t.Fatalf("report after the resync: PSN %#x, probe %t; want %d, no probe", psn, probe, want)
		}
	}
	if q.response(rocev2.SyndromeACK, 7) || q.response(rocev2.SyndromeRNRNAK, 7) {
		t.Fatal("an ACK or RNR NAK of a QP that is not stalled set its PSN")
	}
	if !q.response(rocev2.SyndromeNAKPSNSequenceError, 9) {
		t.Fatal("a sequence error NAK did not set the PSN")
	}
	if psn, _ := q.report(); psn != 9 {
		t.Fatalf("PSN %d after a NAK of 9", psn)
	}
}

// lossy is a link between the switch model and rocev2/target: reports go
// one per Process call, the target's responses come back rtt reports later
// (a round trip of rtt packets in flight), and the link drops what its
// filters say.
type lossy struct {
	rtt      int
	lose     int  // index of the report the link drops (-1: none)
	dropNAKs bool // drop every sequence error NAK
	// blackout drops every response generated while the report index is
	// in [from, to): a path that loses ACKs, not data.
	blackoutFrom, blackoutTo int
	// rxe makes the responder drop, unanswered, a duplicate atomic it
	// has no saved result for, as Linux rxe does ("Class D error",
	// duplicate_request in drivers/infiniband/sw/rxe/rxe_resp.c), where
	// rocev2/target answers it with an ACK.
	rxe bool
	// atomicProbe sends a Key-Increment QP's probe as the programs did
	// before the zero-length WRITE: its FETCH_ADD at the probe's PSN.
	atomicProbe bool
}

// lossyRun is what a run through a lossy link did.
type lossyRun struct {
	reports    []report
	probe      []bool // report i went as a probe
	executed   []bool // the target executed report i (a WRITE or an atomic)
	resyncs    []int  // report indices before which a response set the PSN
	droppedNAK int
	rxeDropped int    // duplicate atomics the rxe responder left unanswered
	maxSince   uint16 // highest since_ack a report found
	q          qpState
}

// runLossy sends n reports of conns[ci] (Key-Write, Key-Increment, Append)
// through q and the link to the target, which writes into mem.
func runLossy(t *testing.T, tgt *target.Target, c *Connection, n int, link lossy, q qpState) lossyRun {
	t.Helper()
	s, err := c.check()
	if err != nil {
		t.Fatal(err)
	}
	type due struct {
		at  int
		syn rocev2.Syndrome
		psn uint32
	}
	var (
		pending []due
		run     = lossyRun{q: q}
		out     target.Output
		pkt     rocev2.Packet
		rng     = rand.New(rand.NewPCG(uint64(c.Index), 32))
		heads   = map[uint32]uint32{}
	)
	src := netip.AddrPortFrom(c.Src, c.SrcPort)
	for i := range n {
		for len(pending) > 0 && pending[0].at <= i {
			if run.q.response(pending[0].syn, pending[0].psn) {
				run.resyncs = append(run.resyncs, i)
			}
			pending = pending[1:]
		}
		run.maxSince = max(run.maxSince, run.q.sinceAck)
		r := report{key: rng.Uint32(), value: binary.BigEndian.AppendUint64(nil, rng.Uint64()>>rng.IntN(64))}
		switch s.op {
		case dta.OpKeyWrite:
			r.conn, r.value = 0, r.value[:p4gen.KeyWriteData]
		case dta.OpKeyIncrement:
			r.conn = 1
		case dta.OpAppend:
			r.conn, r.key, r.value = 2, uint32(rng.IntN(8)), r.value[:0]
			for range p4gen.AppendBatch {
				r.value = binary.BigEndian.AppendUint32(r.value, 1+rng.Uint32N(1<<31))
			}
			r.head = heads[r.key] // ingress advances the head whatever egress does
			heads[r.key] = (r.head + p4gen.AppendBatch) % (1 << p4gen.AppendEntryBits)
		}
		run.reports = append(run.reports, r)
		psn, probe := run.q.report()
		run.probe = append(run.probe, probe)
		f := c.craft(s, r.key, r.value, 0, r.head, psn)
		switch {
		case probe && link.atomicProbe:
			f.BTH.AckReq = true
		case probe:
			f = c.probe(f)
		}
		b, err := f.AppendTo(nil)
		if err != nil {
			t.Fatal(err)
		}
		if probe {
			checkProbe(t, b, s.op, psn, link.atomicProbe)
		}
		run.executed = append(run.executed, false)
		if i == link.lose {
			continue
		}
		out.Reset()
		before := tgt.Counters()
		tgt.Process(time.Now().UnixNano(), []target.Datagram{{Buf: b[dta.EthernetLen+20+8:], Addr: src}}, &out)
		after := tgt.Counters()
		run.executed[i] = after.WritePackets+after.Atomics > before.WritePackets+before.Atomics
		if link.rxe && after.StaleAtomics > before.StaleAtomics {
			run.rxeDropped++
			continue
		}
		for _, d := range out.Datagrams() {
			if err := pkt.Decode(d.Buf); err != nil {
				t.Fatalf("report %d: the target's response: %v", i, err)
			}
			if i >= link.blackoutFrom && i < link.blackoutTo {
				continue
			}
			if pkt.AETH.Syndrome == rocev2.SyndromeNAKPSNSequenceError && link.dropNAKs {
				run.droppedNAK++
				continue
			}
			pending = append(pending, due{i + link.rtt, pkt.AETH.Syndrome, uint32(pkt.BTH.PSN)})
		}
	}
	return run
}

// checkProbe checks a probe's bytes b (an Ethernet frame) as a responder
// reads them: a packet rocev2 decodes, its ICRC valid, PSN psn and AckReq;
// the report's own operation, but for Key-Increment (unless atomic) an
// RDMA WRITE Only of DMA length 0 with no payload.
func checkProbe(t *testing.T, b []byte, op dta.Opcode, psn uint32, atomic bool) {
	t.Helper()
	ip := b[dta.EthernetLen:]
	if err := rocev2.VerifyICRC(ip); err != nil {
		t.Fatalf("probe PSN %#x: %v", psn, err)
	}
	var p rocev2.Packet
	if err := p.Decode(ip[20+8:]); err != nil {
		t.Fatalf("probe PSN %#x: %v", psn, err)
	}
	if uint32(p.BTH.PSN) != psn || !p.BTH.AckReq {
		t.Fatalf("probe PSN %#x AckReq %t, want PSN %#x with AckReq", p.BTH.PSN, p.BTH.AckReq, psn)
	}
	if op != dta.OpKeyIncrement || atomic {
		return
	}
	if p.BTH.Opcode != rocev2.RCWriteOnly || p.RETH.DMALength != 0 || len(p.Payload) != 0 ||
		len(ip) != 20+8+rocev2.BTHLen+rocev2.RETHLen+rocev2.ICRCLen {
		t.Fatalf("Key-Increment probe: opcode %v, DMA length %d, %d payload bytes, IP length %d; want a zero-length WRITE Only",
			p.BTH.Opcode, p.RETH.DMALength, len(p.Payload), len(ip))
	}
}

// nakTarget returns a target with the three test connections attached and
// their regions.
func nakTarget(t *testing.T) (*target.Target, []Connection, [3][]byte, keywrite.Layout, keyincr.Layout, appendlist.Layout) {
	t.Helper()
	tgt, err := target.New(target.Config{Addr: netip.MustParseAddrPort("10.0.0.2:4791"), Peers: []netip.Prefix{netip.MustParsePrefix("10.0.0.1/32")}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tgt.Close() })
	conns := testConnections(t)
	kwl, _ := keywrite.ParseLayout(conns[0].Ad.Geometry)
	kil, _ := keyincr.ParseLayout(conns[1].Ad.Geometry)
	apl, _ := appendlist.ParseLayout(conns[2].Ad.Geometry)
	mem := [3][]byte{make([]byte, kwl.RegionSize()), make([]byte, kil.RegionSize()), make([]byte, apl.RegionSize())}
	for i := range conns {
		access := target.RemoteWrite
		if i == 1 {
			access = target.RemoteAtomic
		}
		attach(t, tgt, &conns[i], mem[i], access)
		if _, err := conns[i].check(); err != nil {
			t.Skipf("skipping: the target's region placement does not fit the switch: %v", err)
		}
	}
	return tgt, conns, mem, kwl, kil, apl
}

// regionOf returns the region connection ci holds after the reports
// whose landed[i] is set, applied by the collector's own packages.
func regionOf(t *testing.T, ci int, kwl keywrite.Layout, kil keyincr.Layout, apl appendlist.Layout, reports []report, landed func(int) bool) []byte {
	t.Helper()
	var sel []report
	for i, r := range reports {
		if landed(i) {
			sel = append(sel, r)
		}
	}
	kws, kis, ap := applyReports(t, kwl, kil, apl, crafted{reports: sel, n: 1})
	return [3][]byte{kws.Region(), kis.Region(), ap}[ci]
}

var nakKinds = []string{"Key-Write", "Key-Increment", "Append"}

// TestLostNAKResync loses one report of a QP and the sequence error NAK
// the responder answers it with, against rocev2/target and against it
// made to drop duplicate atomics as Linux rxe does. As the programs were
// before the probe, the QP then writes nothing more (checked first, so
// the test shows the failure it guards against); with a Key-Increment
// QP's probe sent as its FETCH_ADD, the rxe responder answers none and the
// QP never recovers; with the probe, the QP's since_ack reaches
// DTA_STALL_PACKETS, its reports go as probes (duplicates the responder
// answers with an ACK of its expected PSN - 1; a Key-Increment QP's a
// zero-length WRITE), the first such ACK resets the PSN, and every report
// from then on is in memory: the region equals the collector's packages
// applying exactly the reports before the loss and after the resync. The
// reports lost are at most DTA_STALL_PACKETS + two round trips of
// packets, the probes one round trip's.
func TestLostNAKResync(t *testing.T) {
	const rtt, lose = 100, 1000
	n := lose + p4gen.StallPackets + 2*rtt + 1500
	for ci, kind := range nakKinds {
		for _, rxe := range []bool{false, true} {
			name := kind + "/target"
			if rxe {
				name = kind + "/rxe"
			}
			t.Run(name, func(t *testing.T) {
				modes := []string{"no probe", "probe"}
				if rxe && ci == 1 {
					modes = []string{"no probe", "atomic probe", "probe"}
				}
				for _, mode := range modes {
					tgt, conns, mem, kwl, kil, apl := nakTarget(t)
					c := &conns[ci]
					run := runLossy(t, tgt, c, n, lossy{rtt: rtt, lose: lose, dropNAKs: true, blackoutFrom: -1, rxe: rxe, atomicProbe: mode == "atomic probe"},
						qpState{psn: c.StartPSN, noProbe: mode == "no probe"})
					if run.droppedNAK != 1 {
						t.Fatalf("%s: the link dropped %d NAKs, want the one of the lost report", mode, run.droppedNAK)
					}
					before := regionOf(t, ci, kwl, kil, apl, run.reports, func(i int) bool { return i < lose })
					switch mode {
					case "no probe":
						// The failure the probe fixes: nothing after the loss lands.
						if len(run.resyncs) != 0 || run.q.probes != 0 || !bytes.Equal(mem[ci], before) {
							t.Fatalf("without the probe the QP resynced (%v) or wrote after the lost NAK: the test does not lose it", run.resyncs)
						}
						continue
					case "atomic probe":
						// The failure the zero-length WRITE fixes: rxe answers
						// no stale FETCH_ADD, so the QP probes for good.
						if len(run.resyncs) != 0 || run.rxeDropped == 0 || uint64(run.rxeDropped) != run.q.probes ||
							run.q.probes < uint64(n-lose-rtt-p4gen.StallPackets-1) || !bytes.Equal(mem[ci], before) {
							t.Fatalf("FETCH_ADD probes to rxe: resyncs %v, %d of %d probes unanswered: want no resync and every probe unanswered",
								run.resyncs, run.rxeDropped, run.q.probes)
						}
						continue
					}
					checkRecovered(t, tgt, run, lose, n, rtt, mem[ci], regionOf(t, ci, kwl, kil, apl, run.reports, func(i int) bool { return i < lose || i >= run.resyncs[0] }))
					if cs := tgt.Counters(); run.rxeDropped != 0 || cs.StaleAtomics != 0 || cs.BadICRC != 0 || cs.Malformed != 0 || cs.NAKAccess != 0 {
						t.Fatalf("probes: %d unanswered by rxe, target counters %+v: want every probe a valid packet answered, no stale atomic", run.rxeDropped, cs)
					}
				}
			})
		}
	}
}

// checkRecovered checks a QP that lost a NAK at report lose of n and
// recovered: one resync, within the bound, through at most a round trip
// of probes, every report before the loss and from the resync on executed
// and no other, mem equal to want.
func checkRecovered(t *testing.T, tgt *target.Target, run lossyRun, lose, n, rtt int, mem, want []byte) {
	t.Helper()
	if len(run.resyncs) != 1 {
		t.Fatalf("resyncs before reports %v, want exactly one", run.resyncs)
	}
	back := run.resyncs[0]
	lost := back - lose
	if bound := p4gen.StallPackets + 2*rtt; lost > bound {
		t.Errorf("%d reports lost after the lost NAK, bound DTA_STALL_PACKETS + 2 round trips = %d", lost, bound)
	}
	if run.q.probes == 0 || run.q.probes > uint64(rtt+1) {
		t.Errorf("%d probes, want 1 to a round trip's (%d)", run.q.probes, rtt+1)
	}
	for i := back; i < n; i++ {
		if run.probe[i] {
			t.Fatalf("report %d after the resync (report %d) went as a probe", i, back)
		}
	}
	for i, ok := range run.executed {
		if ok != (i < lose || i >= back) {
			t.Fatalf("report %d executed %t; want every report before the loss (%d) and from the resync (%d) on, no other", i, ok, lose, back)
		}
	}
	if !bytes.Equal(mem, want) {
		t.Fatalf("region differs from the reports before the loss (%d) and from the resync (%d) on, applied by the collector's packages", lose, back)
	}
	cs := tgt.Counters()
	if got, want := cs.WritePackets+cs.Atomics, uint64(lose+n-back); got != want {
		t.Fatalf("target executed %d requests, want %d", got, want)
	}
	t.Logf("lost %d reports (NAK lost at report %d, resync before %d), %d probes, target counters %+v",
		lost, lose, back, run.q.probes, cs)
}

// TestHealthyQPNeverProbes: with every ACK arriving a round trip late, a
// QP's since_ack stays below one AckReq interval plus a round trip, no
// report goes as a probe, no ACK moves the PSN, and every report is in
// memory.
func TestHealthyQPNeverProbes(t *testing.T) {
	const rtt = 500
	n := 3 * p4gen.StallPackets
	for ci, kind := range nakKinds {
		t.Run(kind, func(t *testing.T) {
			tgt, conns, mem, kwl, kil, apl := nakTarget(t)
			c := &conns[ci]
			run := runLossy(t, tgt, c, n, lossy{rtt: rtt, lose: -1, blackoutFrom: -1}, qpState{psn: c.StartPSN})
			if run.q.probes != 0 || len(run.resyncs) != 0 {
				t.Fatalf("a healthy QP probed %d times and resynced before %v", run.q.probes, run.resyncs)
			}
			if run.maxSince > 64+rtt {
				t.Errorf("since_ack reached %d, want at most an AckReq interval and a round trip (%d)", run.maxSince, 64+rtt)
			}
			if !bytes.Equal(mem[ci], regionOf(t, ci, kwl, kil, apl, run.reports, func(int) bool { return true })) {
				t.Fatal("region differs from every report applied by the collector's packages")
			}
		})
	}
}

// TestFalseStall: a path that loses every ACK for longer than
// DTA_STALL_PACKETS reports, but no data, makes a healthy QP probe. The
// first ACK after the blackout resets the PSN a round trip back, so the
// next round trip of reports are duplicates the target does not execute;
// then the QP writes again. What the false trigger costs: its probes and
// a round trip of reports, each short of two round trips.
func TestFalseStall(t *testing.T) {
	const rtt = 100
	from, to := 1000, 1000+p4gen.StallPackets+3*rtt
	n := to + 2000
	for ci, kind := range nakKinds {
		t.Run(kind, func(t *testing.T) {
			tgt, conns, _, _, _, _ := nakTarget(t)
			c := &conns[ci]
			run := runLossy(t, tgt, c, n, lossy{rtt: rtt, lose: -1, blackoutFrom: from, blackoutTo: to}, qpState{psn: c.StartPSN})
			if run.q.probes == 0 {
				t.Fatal("a QP with no ACK for more than DTA_STALL_PACKETS reports did not probe")
			}
			if len(run.resyncs) != 1 || run.resyncs[0] > to+2*rtt {
				t.Fatalf("resyncs before %v, want one within two round trips of the blackout's end (%d)", run.resyncs, to)
			}
			missed, last := 0, 0
			for i, ok := range run.executed {
				if !ok {
					missed, last = missed+1, i
				}
			}
			if uint64(missed) > run.q.probes+rtt+1 {
				t.Errorf("%d reports not executed, want at most the %d probes and a round trip (%d)", missed, run.q.probes, rtt+1)
			}
			if last >= run.resyncs[0]+2*rtt {
				t.Errorf("report %d not executed, two round trips after the resync (before report %d)", last, run.resyncs[0])
			}
			t.Logf("%s: %d probes, %d reports not executed, the last %d; resync before %d", kind, run.q.probes, missed, last, run.resyncs[0])
		})
	}
}
