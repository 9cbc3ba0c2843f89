package translator

import (
	"bytes"
	"encoding/binary"
	"net/netip"
	"testing"
	"time"

	"github.com/dtakit/dtakit/dta"
	"github.com/dtakit/dtakit/keyincr"
	"github.com/dtakit/dtakit/keywrite"
	"github.com/dtakit/dtakit/rocev2"
	"github.com/dtakit/dtakit/rocev2/cm"
)

// dataPSN decodes a datagram to the target and returns its PSN and whether
// it is a data packet (not CM, not an ACK of the advertisement).
func dataPSN(b []byte) (rocev2.Packet, bool) {
	var p rocev2.Packet
	if p.DecodeDatagram(b, testLocal, testTarget) != nil || p.BTH.DestQP == 1 || p.BTH.Opcode == rocev2.RCAcknowledge {
		return p, false
	}
	return p, true
}

// kwSetup connects an engine to one Key-Write instance and returns a
// reference store to compare with.
func kwSetup(t *testing.T, cfg Config) (*harness, *fakeInst, *keywrite.Store) {
	in := kwInst(t)
	ft := newFakeTarget(t, in)
	h := newHarness(t, cfg, ft)
	h.connect()
	l, _ := keywrite.ParseLayout(in.geom)
	st, _ := keywrite.NewStore(l, nil)
	return h, in, st
}

func (h *harness) kwReports(st *keywrite.Store, from, n uint32) {
	for k := from; k < from+n; k++ {
		h.report(kwReport(k, 1, k*3+1))
		if st != nil {
			_ = st.Put(k, binary.BigEndian.AppendUint32(nil, k*3+1), 1)
		}
	}
}

func TestLossGoesBackN(t *testing.T) {
	h, in, st := kwSetup(t, Config{})
	n := 0
	h.toT = func(d []Datagram) []Datagram {
		var keep []Datagram
		for _, x := range d {
			if _, ok := dataPSN(x.Buf); ok {
				n++
				if n == 3 {
					continue // lose the third data packet
				}
			}
			keep = append(keep, x)
		}
		return keep
	}
	h.kwReports(st, 0, 10)
	h.pump()
	if !bytes.Equal(in.mem, st.Region()) {
		t.Error("region differs after recovery")
	}
	c := h.e.Counters()
	if c.SeqNAKs != 1 || c.Retransmits != 8 || c.Timeouts != 0 || !h.e.Idle() {
		t.Errorf("counters %+v, idle %v", c, h.e.Idle())
	}
}

func TestReorderingDoesNotReapplyAtomics(t *testing.T) {
	in := kiInst(t)
	ft := newFakeTarget(t, in)
	h := newHarness(t, Config{}, ft)
	h.connect()
	l, _ := keyincr.ParseLayout(in.geom)
	st, _ := keyincr.NewStore(l, nil)
	swapped := false
	h.toT = func(d []Datagram) []Datagram {
		if !swapped && len(d) > 4 {
			swapped = true
			d[1], d[3] = d[3], d[1]
		}
		return d
	}
	for k := range uint32(12) {
		h.report(kiReport(k%5, 2, uint64(k)+1))
		_ = st.Add(k%5, uint64(k)+1, 2)
	}
	h.pump()
	if !bytes.Equal(in.mem, st.Region()) {
		t.Error("counters differ: a duplicate was re-applied or an operation lost")
	}
	c := h.e.Counters()
	if c.SeqNAKs == 0 || c.Retransmits == 0 || !h.e.Idle() || ft.dups == 0 {
		t.Errorf("counters %+v, target duplicates %d", c, ft.dups)
	}
	if c.AtomicACKs < 24 {
		t.Errorf("%d atomic ACKs, want at least 24", c.AtomicACKs)
	}
}

func TestDuplicateNAKsResendOnce(t *testing.T) {
	h, in, st := kwSetup(t, Config{})
	n := 0
	h.toT = func(d []Datagram) []Datagram {
		var keep []Datagram
		for _, x := range d {
			if _, ok := dataPSN(x.Buf); ok {
				if n++; n == 5 {
					continue
				}
			}
			keep = append(keep, x)
		}
		return keep
	}
	h.toE = func(b [][]byte) [][]byte {
		var out [][]byte
		for _, x := range b {
			out = append(out, x)
			var p rocev2.Packet
			if p.DecodeDatagram(x, testTarget, testLocal) == nil && p.BTH.Opcode == rocev2.RCAcknowledge && p.AETH.Syndrome.IsNAK() {
				out = append(out, x, x) // the NAK three times
			}
		}
		return out
	}
	h.kwReports(st, 0, 10)
	h.pump()
	c := h.e.Counters()
	if c.SeqNAKs != 3 || c.DupNAKs != 2 || c.Retransmits != 6 {
		t.Errorf("counters %+v: want 3 NAKs, 2 ignored, 6 packets resent once", c)
	}
	if !bytes.Equal(in.mem, st.Region()) || !h.e.Idle() {
		t.Error("not recovered")
	}
}

func TestTimeoutResends(t *testing.T) {
	h, in, st := kwSetup(t, Config{})
	lost := false
	h.toT = func(d []Datagram) []Datagram {
		var keep []Datagram
		for _, x := range d {
			if p, ok := dataPSN(x.Buf); ok && p.BTH.AckReq && !lost {
				lost = true // the batch's last packet: no ACK will come
				continue
			}
			keep = append(keep, x)
		}
		return keep
	}
	h.kwReports(st, 0, 10)
	h.pump()
	if h.e.Idle() {
		t.Fatal("idle although the last packet was lost")
	}
	h.advance(9*time.Millisecond, time.Millisecond)
	if c := h.e.Counters(); c.Timeouts != 0 {
		t.Fatalf("timed out before 10 ms: %+v", c)
	}
	h.advance(2*time.Millisecond, time.Millisecond)
	c := h.e.Counters()
	if c.Timeouts != 1 || c.Retransmits != 10 || !h.e.Idle() {
		t.Errorf("counters %+v, idle %v", c, h.e.Idle())
	}
	if !bytes.Equal(in.mem, st.Region()) {
		t.Error("region differs")
	}
}

func TestPSNWraps(t *testing.T) {
	in := kwInst(t)
	ft := newFakeTarget(t, in)
	h := newHarness(t, Config{}, ft)
	ft.startPSN = func() uint32 { return rocev2.PSNMask - 5 } // the translator sends from the REP's PSN
	h.connect()
	l, _ := keywrite.ParseLayout(in.geom)
	st, _ := keywrite.NewStore(l, nil)
	lost := false
	h.toT = func(d []Datagram) []Datagram {
		var keep []Datagram
		for _, x := range d {
			if p, ok := dataPSN(x.Buf); ok && p.BTH.PSN == 1 && !lost {
				lost = true // just past the wrap
				continue
			}
			keep = append(keep, x)
		}
		return keep
	}
	for round := range uint32(4) {
		h.kwReports(st, round*5, 5)
		h.pump()
	}
	if !lost {
		t.Fatal("PSN 1 never sent")
	}
	c := h.e.Counters()
	if c.SeqNAKs != 1 || !h.e.Idle() || c.BadACKs != 0 {
		t.Errorf("counters %+v", c)
	}
	if !bytes.Equal(in.mem, st.Region()) {
		t.Error("region differs")
	}
	q := h.e.collectors[0].instances[0].conn.(*qp)
	if q.req.Next() != 14 {
		t.Errorf("next PSN %d, want 14 (20 packets from 2^24-6)", q.req.Next())
	}
}

func TestAckReqPolicy(t *testing.T) {
	h, _, _ := kwSetup(t, Config{})
	var ackReq []int
	i := 0
	h.toT = func(d []Datagram) []Datagram {
		for _, x := range d {
			if p, ok := dataPSN(x.Buf); ok {
				i++
				if p.BTH.AckReq {
					ackReq = append(ackReq, i)
				}
			}
		}
		return d
	}
	h.kwReports(nil, 0, 150)
	h.pump()
	want := []int{64, 128, 150}
	if len(ackReq) != len(want) || ackReq[0] != 64 || ackReq[1] != 128 || ackReq[2] != 150 {
		t.Errorf("AckReq on packets %v, want %v", ackReq, want)
	}
}

func TestRingFullNACKs(t *testing.T) {
	h, in, st := kwSetup(t, Config{RingSize: 8, AckPort: 50044})
	h.fts[0].noAck = true
	for k := range uint32(10) {
		r := sequenced(kwReport(k, 1, k*3+1), uint8(k))
		h.report(r)
		if k < 8 {
			_ = st.Put(k, binary.BigEndian.AppendUint32(nil, k*3+1), 1)
		}
	}
	h.report(kwReport(99, 1, 1)) // unsequenced: counted
	h.pump()
	if len(h.nacks) != 2 {
		t.Fatalf("%d NACKs, want 2", len(h.nacks))
	}
	for i, d := range h.nacks {
		a, err := dta.ParseAck(d.Buf)
		if err != nil || !a.NACK || a.Seq != uint32(uint8(8+i)) || d.Addr != netip.AddrPortFrom(testReporter.Addr(), 50044) {
			t.Errorf("NACK %d: %+v to %v, %v", i, a, d.Addr, err)
		}
	}
	c := h.e.Counters()
	if c.RingFull != 3 || c.NACKs != 2 || c.Dropped != 1 {
		t.Errorf("counters %+v", c)
	}
	h.fts[0].noAck = false
	h.advance(20*time.Millisecond, time.Millisecond)
	if !h.e.Idle() || !bytes.Equal(in.mem, st.Region()) {
		t.Error("not recovered after ACKs resumed")
	}
}

func TestRateLimit(t *testing.T) {
	h, _, _ := kwSetup(t, Config{RateLimit: 1000, RateBurst: 10})
	h.kwReports(nil, 0, 15)
	h.pump()
	if c := h.e.Counters(); c.Packets != 10 || c.RateLimited != 5 || c.Dropped != 5 {
		t.Fatalf("counters %+v", c)
	}
	h.now += int64(5 * time.Millisecond) // 5 tokens
	h.e.Tick(h.now)
	h.kwReports(nil, 100, 15)
	h.pump()
	if c := h.e.Counters(); c.Packets != 15 || c.RateLimited != 15 {
		t.Fatalf("after 5 ms: counters %+v", c)
	}
	h.now += int64(time.Second) // a full bucket, no more
	h.e.Tick(h.now)
	h.kwReports(nil, 200, 15)
	if c := h.e.Counters(); c.Packets != 25 {
		t.Fatalf("after 1 s: %d packets, want 25 (burst 10)", c.Packets)
	}
}

func TestRemoteAccessNAKReconnects(t *testing.T) {
	h, in, st := kwSetup(t, Config{})
	ft := h.fts[0]
	ft.nakAccess = true
	h.kwReports(nil, 0, 3)
	h.pump()
	c := h.e.Counters()
	if c.AccessNAKs == 0 || c.Reconnects == 0 || ft.dreqs == 0 {
		t.Fatalf("counters %+v, DREQs %d", c, ft.dreqs)
	}
	if done, err := h.e.Connected(); !done || err != nil {
		t.Fatalf("after the reconnection: %v, %v", done, err)
	}
	ft.nakAccess = false
	h.kwReports(st, 10, 5)
	h.pump()
	if !bytes.Equal(in.mem, st.Region()) || !h.e.Idle() {
		t.Error("the reconnected QP does not carry reports")
	}
}

func TestNoProgressReconnects(t *testing.T) {
	h, _, _ := kwSetup(t, Config{MaxRetries: 3, DeadAfter: time.Millisecond})
	ft := h.fts[0]
	ft.noAck = true
	h.kwReports(nil, 0, 4)
	h.pump()
	// The timeout doubles, up to 4 times: 10, 20, 40, 40 ms.
	h.advance(45*time.Millisecond, time.Millisecond)
	if c := h.e.Counters(); c.Timeouts != 2 || c.Retransmits != 8 {
		t.Errorf("after 45 ms: counters %+v, want 2 timeouts (at 10 and 30 ms)", c)
	}
	h.advance(75*time.Millisecond, time.Millisecond)
	c := h.e.Counters()
	if c.Timeouts != 4 || c.Reconnects != 1 || c.Lost != 4 || c.Retransmits != 12 {
		t.Errorf("counters %+v", c)
	}
	if len(ft.reqs) != 3 { // discovery: instance, REJ probe; then the new QP
		t.Errorf("%d REQs, want 3", len(ft.reqs))
	}
}

func TestCollectorDisconnectReconnects(t *testing.T) {
	h, in, st := kwSetup(t, Config{})
	ft := h.fts[0]
	var q *fakeQP
	for _, x := range ft.qps {
		q = x
	}
	delete(ft.qps, q.qpn)
	delete(ft.byComm, q.peerComm)
	ft.sendCM(cm.Header(77, cm.AttrDREQ), &cm.DisconnectRequest{LocalCommID: q.commID, RemoteCommID: q.peerComm, RemoteQPN: q.peerQPN})
	drep := false
	h.toT = func(d []Datagram) []Datagram {
		for _, x := range d {
			var p rocev2.Packet
			if p.DecodeDatagram(x.Buf, testLocal, testTarget) == nil && p.BTH.DestQP == 1 {
				if _, m, err := cm.DecodeMAD(p.Payload); err == nil {
					if r, ok := m.(*cm.DisconnectReply); ok && r.RemoteCommID == q.commID {
						drep = true
					}
				}
			}
		}
		return d
	}
	h.pump()
	if !drep {
		t.Error("no DREP for the collector's DREQ")
	}
	if c := h.e.Counters(); c.Reconnects != 1 {
		t.Errorf("counters %+v", c)
	}
	if done, err := h.e.Connected(); !done || err != nil {
		t.Fatalf("after the collector's DREQ: %v, %v", done, err)
	}
	h.kwReports(st, 0, 5)
	h.pump()
	if !bytes.Equal(in.mem, st.Region()) || !h.e.Idle() {
		t.Error("the new QP does not carry reports")
	}
}

func TestFlushCountsWhatDoesNotFit(t *testing.T) {
	pc := pcInst(t)
	ft := newFakeTarget(t, pc)
	h := newHarness(t, Config{RingSize: 4}, ft)
	h.connect()
	ft.noAck = true
	for k := range uint32(3) {
		h.report(pcReport(k, 1, 5)) // three cached flows of two copies each
	}
	h.pump()
	h.e.Flush()
	h.pump()
	if c := h.e.Counters(); c.Writes != 4 || c.FlushLost != 1 {
		t.Errorf("counters %+v: want 2 flows written, 1 lost", c)
	}
}

// TestRoundTripLearnt: the target answers 30 ms late, three times the
// default timeout. The first packets are resent (the timeout doubles), then
// the round trip is measured on a packet sent once and the timeout follows
// it: 20 rounds of 5 reports cost a few retransmissions, not a go-back-N
// every round.
func TestRoundTripLearnt(t *testing.T) {
	h, in, st := kwSetup(t, Config{})
	type held struct {
		b  []byte
		at int64
	}
	var late []held
	h.toE = func(bs [][]byte) [][]byte {
		for _, b := range bs {
			late = append(late, held{b, h.now + int64(30*time.Millisecond)})
		}
		var due [][]byte
		keep := late[:0]
		for _, x := range late {
			if x.at <= h.now {
				due = append(due, x.b)
			} else {
				keep = append(keep, x)
			}
		}
		late = keep
		return due
	}
	for r := range 20 {
		h.kwReports(st, uint32(5*r), 5)
		h.pump()
		h.advance(100*time.Millisecond, time.Millisecond)
	}
	c := h.e.Counters()
	if !h.e.Idle() || !bytes.Equal(in.mem, st.Region()) {
		t.Fatalf("not all written: %+v", c)
	}
	if c.Retransmits > 20 || c.Timeouts > 4 {
		t.Errorf("%d retransmissions, %d timeouts for %d packets: the round trip was not learnt", c.Retransmits, c.Timeouts, c.Packets)
	}
}
