package translator

import (
	"encoding/binary"
	"math/rand/v2"
	"net/netip"
	"testing"
	"time"

	"github.com/dtakit/dtakit/dta"
	"github.com/dtakit/dtakit/rocev2"
	"github.com/dtakit/dtakit/rocev2/cm"
)

// A minimal in-test RC responder and CM passive side, scripted by the tests:
// it serves a few instances over plain byte slices, answers REQs (REP, or
// REJ reason 8 past its last instance), SENDs each advertisement after the
// RTU, executes WRITEs and FETCH_ADDs in PSN order, coalesces ACKs per
// delivered batch, NAKs a PSN ahead once, re-ACKs duplicates.

var (
	testLocal  = netip.MustParseAddrPort("127.0.0.1:5000")
	testTarget = netip.MustParseAddrPort("127.0.0.2:4791")
)

type fakeInst struct {
	prim dta.Opcode
	geom []byte
	mem  []byte
	va   uint64
	rkey uint32
	imms []uint32 // immediates received, in order
}

type fakeQP struct {
	inst       int
	qpn        uint32
	peerQPN    uint32
	commID     uint32
	peerComm   uint32
	expected   rocev2.PSN
	nakSent    bool
	sendPSN    rocev2.PSN
	advertAck  bool
	advertMSN  uint32
	ackPending bool
	ackPSN     rocev2.PSN
	atomics    map[rocev2.PSN]uint64
	wva        uint64 // multi-packet WRITE in progress: next address
	wleft      int
}

type fakeTarget struct {
	t       testing.TB
	addr    netip.AddrPort
	peer    netip.AddrPort
	cmPort  uint16
	insts   []*fakeInst
	byComm  map[uint32]*fakeQP
	qps     map[uint32]*fakeQP
	nextQPN uint32

	silent       bool                                // answer nothing at all
	rejectReason uint16                              // reason for ports past the last instance (default 8)
	nakAccess    bool                                // answer data with a remote access error
	startPSN     func() uint32                       // the PSN it expects first (default random)
	advertBody   func(q *fakeQP, real []byte) []byte // replaces the advertisement sent (nil: the real one)
	followUp     func(q *fakeQP) [][]byte            // SENT after the advertisement, with the next PSNs
	noAck        bool                                // never acknowledge data

	reqs     []cm.ConnectRequest
	rtus     int
	dreqs    int
	executed int // data packets executed
	dups     int // duplicates received
	out      [][]byte
}

func newFakeTarget(t testing.TB, insts ...*fakeInst) *fakeTarget {
	ft := &fakeTarget{
		t: t, addr: testTarget, peer: testLocal, cmPort: DefaultCMPort, insts: insts,
		byComm: map[uint32]*fakeQP{}, qps: map[uint32]*fakeQP{}, nextQPN: 0x40,
	}
	for i, in := range insts {
		in.va = 0x7f0000000000 + uint64(i)<<32
		in.rkey = 0x1000 + uint32(i)
	}
	return ft
}

func (ft *fakeTarget) send(p *rocev2.Packet) {
	b, err := p.AppendDatagram(nil, ft.addr, ft.peer)
	if err != nil {
		ft.t.Fatalf("fake target: encode: %v", err)
	}
	ft.out = append(ft.out, b)
}

func (ft *fakeTarget) sendCM(h cm.MADHeader, m cm.Message) {
	mad, err := cm.AppendMAD(nil, h, m)
	if err != nil {
		ft.t.Fatalf("fake target: %v", err)
	}
	p := cm.Packet(mad, 0)
	ft.send(&p)
}

func (ft *fakeTarget) ack(q *fakeQP, psn rocev2.PSN, s rocev2.Syndrome) {
	ft.send(&rocev2.Packet{
		BTH:  rocev2.BTH{Opcode: rocev2.RCAcknowledge, PKey: 0xFFFF, DestQP: q.peerQPN, PSN: psn},
		AETH: rocev2.AETH{Syndrome: s},
	})
}

func (ft *fakeTarget) advert(q *fakeQP) {
	in := ft.insts[q.inst]
	ad := dta.Advertisement{VA: in.va, Length: uint32(len(in.mem)), RKey: in.rkey, Primitive: in.prim, Geometry: in.geom}
	b, err := ad.AppendTo(nil)
	if err != nil {
		ft.t.Fatalf("fake target: advertisement: %v", err)
	}
	if ft.advertBody != nil {
		b = ft.advertBody(q, b)
	}
	ft.send(&rocev2.Packet{
		BTH:     rocev2.BTH{Opcode: rocev2.RCSendOnly, PKey: 0xFFFF, DestQP: q.peerQPN, PSN: q.sendPSN, AckReq: true},
		Payload: b,
	})
	if ft.followUp != nil {
		for i, m := range ft.followUp(q) {
			ft.send(&rocev2.Packet{
				BTH:     rocev2.BTH{Opcode: rocev2.RCSendOnly, PKey: 0xFFFF, DestQP: q.peerQPN, PSN: q.sendPSN.Add(uint32(i + 1)), AckReq: true},
				Payload: m,
			})
		}
	}
}

// receive takes one datagram from the translator.
func (ft *fakeTarget) receive(b []byte) {
	if ft.silent {
		return
	}
	var p rocev2.Packet
	if err := p.DecodeDatagram(b, ft.peer, ft.addr); err != nil {
		ft.t.Errorf("fake target: translator sent a bad datagram: %v", err)
		return
	}
	if p.BTH.DestQP == cm.GSIQP {
		ft.receiveCM(&p)
		return
	}
	q := ft.qps[p.BTH.DestQP]
	if q == nil {
		ft.t.Errorf("fake target: packet for unknown QP %#x", p.BTH.DestQP)
		return
	}
	if p.BTH.Opcode == rocev2.RCAcknowledge {
		if p.BTH.PSN == q.sendPSN && p.AETH.Syndrome.IsACK() {
			q.advertAck = true
			q.advertMSN = p.AETH.MSN
		}
		return
	}
	ft.receiveData(q, &p)
}

func (ft *fakeTarget) receiveCM(p *rocev2.Packet) {
	h, msg, err := cm.DecodeMAD(p.Payload)
	if err != nil {
		ft.t.Errorf("fake target: bad MAD: %v", err)
		return
	}
	switch m := msg.(type) {
	case *cm.ConnectRequest:
		ft.reqs = append(ft.reqs, *m)
		port := uint16(m.ServiceID)
		idx := int(port) - int(ft.cmPort)
		if idx < 0 || idx >= len(ft.insts) {
			reason := ft.rejectReason
			if reason == 0 {
				reason = cm.RejectInvalidServiceID
			}
			ft.sendCM(cm.Header(h.TransactionID, cm.AttrREJ), &cm.Reject{RemoteCommID: m.LocalCommID, Reason: reason})
			return
		}
		q := ft.byComm[m.LocalCommID]
		if q == nil {
			ft.nextQPN++
			q = &fakeQP{
				inst: idx, qpn: ft.nextQPN, peerQPN: m.LocalQPN, commID: rand.Uint32(), peerComm: m.LocalCommID,
				expected: ft.firstPSN(), sendPSN: rocev2.PSN(m.StartingPSN),
				atomics: map[rocev2.PSN]uint64{},
			}
			ft.byComm[m.LocalCommID] = q
			ft.qps[q.qpn] = q
		}
		ft.sendCM(cm.Header(h.TransactionID, cm.AttrREP), &cm.ConnectReply{
			LocalCommID: q.commID, RemoteCommID: q.peerComm, LocalQPN: q.qpn, StartingPSN: uint32(q.expected),
		})
	case *cm.ReadyToUse:
		ft.rtus++
		for _, q := range ft.qps {
			if q.commID == m.RemoteCommID {
				ft.advert(q)
			}
		}
	case *cm.DisconnectRequest:
		ft.dreqs++
		for k, q := range ft.qps {
			if q.commID == m.RemoteCommID {
				delete(ft.qps, k)
				delete(ft.byComm, q.peerComm)
			}
		}
		ft.sendCM(cm.Header(h.TransactionID, cm.AttrDREP), &cm.DisconnectReply{RemoteCommID: m.LocalCommID})
	}
}

// outOfOrder answers p when it is not the packet q expects, as an RC
// responder does (a NAK once per gap, a duplicate re-acknowledged), and
// reports whether it was.
func (ft *fakeTarget) outOfOrder(q *fakeQP, p *rocev2.Packet) bool {
	switch d := p.BTH.PSN.Diff(q.expected); {
	case d > 0:
		if !q.nakSent {
			q.nakSent = true
			ft.ack(q, q.expected, rocev2.SyndromeNAKPSNSequenceError)
		}
		return true
	case d < 0:
		ft.dups++
		if p.BTH.Opcode == rocev2.RCFetchAdd {
			ft.send(&rocev2.Packet{
				BTH:          rocev2.BTH{Opcode: rocev2.RCAtomicAcknowledge, PKey: 0xFFFF, DestQP: q.peerQPN, PSN: p.BTH.PSN},
				AETH:         rocev2.AETH{Syndrome: rocev2.SyndromeACK},
				AtomicAckETH: rocev2.AtomicAckETH{OrigRemoteData: q.atomics[p.BTH.PSN]},
			})
			return true
		}
		if !ft.noAck {
			ft.ack(q, q.expected.Add(rocev2.PSNMask), rocev2.SyndromeACK)
		}
		return true
	}
	return false
}

func (ft *fakeTarget) receiveData(q *fakeQP, p *rocev2.Packet) {
	in := ft.insts[q.inst]
	if ft.outOfOrder(q, p) {
		return
	}
	if ft.nakAccess {
		ft.ack(q, p.BTH.PSN, rocev2.SyndromeNAKRemoteAccessError)
		return
	}
	q.nakSent = false
	q.expected = q.expected.Next()
	ft.executed++
	put := func(va uint64, data []byte) bool {
		if va < in.va || va-in.va+uint64(len(data)) > uint64(len(in.mem)) {
			ft.t.Errorf("fake target: write of %d bytes at %#x outside the region", len(data), va)
			return false
		}
		copy(in.mem[va-in.va:], data)
		return true
	}
	op := p.BTH.Opcode
	switch op {
	case rocev2.RCWriteOnly, rocev2.RCWriteOnlyImm, rocev2.RCWriteFirst:
		if p.RETH.RKey != in.rkey {
			ft.t.Errorf("fake target: rkey %#x, want %#x", p.RETH.RKey, in.rkey)
		}
		if op == rocev2.RCWriteFirst {
			q.wva, q.wleft = p.RETH.VA+uint64(len(p.Payload)), int(p.RETH.DMALength)-len(p.Payload)
		} else if int(p.RETH.DMALength) != len(p.Payload) {
			ft.t.Errorf("fake target: DMA length %d, payload %d", p.RETH.DMALength, len(p.Payload))
		}
		put(p.RETH.VA, p.Payload)
		if op == rocev2.RCWriteOnlyImm {
			in.imms = append(in.imms, p.ImmDt.Data)
		}
	case rocev2.RCWriteMiddle, rocev2.RCWriteLast, rocev2.RCWriteLastImm:
		put(q.wva, p.Payload)
		q.wva += uint64(len(p.Payload))
		q.wleft -= len(p.Payload)
		if op != rocev2.RCWriteMiddle && q.wleft != 0 {
			ft.t.Errorf("fake target: multi-packet write ends %d bytes short", q.wleft)
		}
		if op == rocev2.RCWriteLastImm {
			in.imms = append(in.imms, p.ImmDt.Data)
		}
	case rocev2.RCFetchAdd:
		a := p.AtomicETH
		if a.RKey != in.rkey || a.VA%8 != 0 {
			ft.t.Errorf("fake target: fetch-add rkey %#x va %#x", a.RKey, a.VA)
		}
		var orig uint64
		if a.VA >= in.va && a.VA-in.va+8 <= uint64(len(in.mem)) {
			o := a.VA - in.va
			orig = binary.LittleEndian.Uint64(in.mem[o:])
			binary.LittleEndian.PutUint64(in.mem[o:], orig+a.SwapAddData)
		} else {
			ft.t.Errorf("fake target: fetch-add at %#x outside the region", a.VA)
		}
		q.atomics[p.BTH.PSN] = orig
		if !p.BTH.AckReq {
			ft.t.Errorf("fake target: fetch-add without AckReq")
		}
		if !ft.noAck {
			ft.send(&rocev2.Packet{
				BTH:          rocev2.BTH{Opcode: rocev2.RCAtomicAcknowledge, PKey: 0xFFFF, DestQP: q.peerQPN, PSN: p.BTH.PSN},
				AETH:         rocev2.AETH{Syndrome: rocev2.SyndromeACK},
				AtomicAckETH: rocev2.AtomicAckETH{OrigRemoteData: orig},
			})
		}
		return
	default:
		ft.t.Errorf("fake target: unexpected opcode %v", op)
	}
	if p.BTH.AckReq {
		q.ackPending, q.ackPSN = true, p.BTH.PSN
	}
}

// flushAcks sends one coalesced ACK per QP for the batch just delivered.
func (ft *fakeTarget) flushAcks() {
	for _, q := range ft.qps {
		if q.ackPending && !ft.noAck {
			ft.ack(q, q.ackPSN, rocev2.SyndromeACK)
		}
		q.ackPending = false
	}
}

// harness connects an engine to fake targets in memory.
type harness struct {
	t     testing.TB
	e     *Engine
	fts   []*fakeTarget
	now   int64      // Unix nanoseconds
	nacks []Datagram // NACKs the engine sent, copied
	toT   func([]Datagram) []Datagram
	toE   func([][]byte) [][]byte
}

func newHarness(t testing.TB, cfg Config, fts ...*fakeTarget) *harness {
	t.Helper()
	if !cfg.Local.IsValid() {
		cfg.Local = testLocal
	}
	for i, ft := range fts {
		if i > 0 {
			ft.addr = netip.AddrPortFrom(netip.AddrFrom4([4]byte{127, 0, 0, byte(2 + i)}), 4791)
		}
		ft.peer = cfg.Local
		cfg.Collectors = append(cfg.Collectors, ft.addr)
	}
	e, err := NewEngine(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return &harness{t: t, e: e, fts: fts, now: time.Unix(1_000_000, 0).UnixNano()}
}

func (h *harness) target(a netip.AddrPort) *fakeTarget {
	for _, ft := range h.fts {
		if ft.addr == a {
			return ft
		}
	}
	h.t.Fatalf("datagram to unknown address %v", a)
	return nil
}

// pump moves datagrams both ways until both sides are quiet.
func (h *harness) pump() {
	h.t.Helper()
	for range 10000 {
		roce, acks := h.e.Output()
		var toT []Datagram
		for _, d := range roce {
			toT = append(toT, Datagram{Addr: d.Addr, Buf: append([]byte(nil), d.Buf...)})
		}
		for _, d := range acks {
			h.nacks = append(h.nacks, Datagram{Addr: d.Addr, Buf: append([]byte(nil), d.Buf...)})
		}
		h.e.ResetOutput()
		if h.toT != nil {
			toT = h.toT(toT)
		}
		for _, d := range toT {
			h.target(d.Addr).receive(d.Buf)
		}
		busy := len(toT) > 0
		for _, ft := range h.fts {
			ft.flushAcks()
			resp := ft.out
			ft.out = nil
			if h.toE != nil {
				resp = h.toE(resp)
			}
			busy = busy || len(resp) > 0
			for _, b := range resp {
				h.e.HandleRoCE(b, ft.addr, h.now)
			}
		}
		if roce, acks := h.e.Output(); !busy && len(roce)+len(acks) == 0 {
			return
		}
	}
	h.t.Fatal("pump: no quiet after 10000 rounds")
}

// advance moves time on by d in steps of step, ticking and pumping.
func (h *harness) advance(d, step time.Duration) {
	for end := h.now + int64(d); h.now < end; {
		h.now += int64(step)
		h.e.Tick(h.now)
		h.pump()
	}
}

// connect starts the engine and runs discovery to the end.
func (h *harness) connect() {
	h.t.Helper()
	h.e.Start(h.now)
	h.pump()
	done, err := h.e.Connected()
	if !done || err != nil {
		h.t.Fatalf("connected %v, %v", done, err)
	}
}

func (h *harness) report(r dta.Report) {
	h.t.Helper()
	b, err := dta.AppendPayload(nil, &r)
	if err != nil {
		h.t.Fatal(err)
	}
	h.e.HandleReport(b, testReporter, h.now)
}

// wideKI sends a Key-Increment of key 7 numbered seq (wide) and pumps.
func (h *harness) wideKI(seq uint32) {
	h.t.Helper()
	r := kiReport(7, 1, 1)
	r.Header.Sequenced, r.Header.Wide, r.Header.Seq = true, true, seq
	h.report(r)
	h.pump()
}

var testReporter = netip.MustParseAddrPort("127.0.0.9:41000")

func (ft *fakeTarget) firstPSN() rocev2.PSN {
	if ft.startPSN != nil {
		return rocev2.PSN(ft.startPSN() & rocev2.PSNMask)
	}
	return rocev2.PSN(rand.Uint32() & rocev2.PSNMask)
}
