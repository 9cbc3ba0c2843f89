package translator

import (
	"encoding/binary"
	"net/netip"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/dtakit/dtakit/appendlist"
	"github.com/dtakit/dtakit/dta"
	"github.com/dtakit/dtakit/postcard"
	"github.com/dtakit/dtakit/rocev2"
)

// memSetup attaches one instance to an engine without a CM exchange: the
// benchmarks and allocation tests drive the engine alone, acknowledging its
// packets with ACKs built here.
func memSetup(tb testing.TB, in *fakeInst, cfg Config) (*Engine, *qp) {
	cfg.Local, cfg.Collectors = testLocal, []netip.AddrPort{testTarget}
	e, err := NewEngine(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	ad := dta.Advertisement{VA: 0x7f0000000000, Length: uint32(len(in.mem)), RKey: 0x1000, Primitive: in.prim, Geometry: in.geom}
	qpn, err := e.attach(0, ad, 0x40, rocev2.PSNMask-100) // wraps during the runs
	if err != nil {
		tb.Fatal(err)
	}
	return e, e.qps[qpn]
}

// acker builds ACK datagrams for a QP without allocating.
type acker struct {
	q   *qp
	buf []byte
}

func (a *acker) ackAll(e *Engine) {
	p := rocev2.Packet{
		BTH:  rocev2.BTH{Opcode: rocev2.RCAcknowledge, PKey: 0xFFFF, DestQP: a.q.qpn, PSN: a.q.req.Next().Add(minusOne)},
		AETH: rocev2.AETH{Syndrome: rocev2.SyndromeACK},
	}
	a.buf, _ = p.AppendDatagram(a.buf[:0], testTarget, testLocal)
	e.HandleRoCE(a.buf, testTarget, benchNow)
}

var benchNow = time.Unix(1_000_000, 0).UnixNano()

// benchReports returns n encoded reports of a primitive with distinct keys.
func benchReports(tb testing.TB, op dta.Opcode, n int) [][]byte {
	out := make([][]byte, n)
	for i := range out {
		k := uint32(i)*2654435761 + 1
		var r dta.Report
		switch op {
		case dta.OpKeyWrite:
			r = kwReport(k, 2, k)
		case dta.OpKeyIncrement:
			r = kiReport(k, 2, 1)
		case dta.OpPostcard:
			r = pcReport(k>>3, uint8(i%5)+1, k|1)
		case dta.OpAppend:
			r = alReport(k%4, uint64(k)|1, false)
		}
		b, err := dta.AppendPayload(nil, &r)
		if err != nil {
			tb.Fatal(err)
		}
		out[i] = b
	}
	return out
}

// decodedReports returns benchReports(op, 1024) decoded.
func decodedReports(tb testing.TB, op dta.Opcode) []dta.Report {
	raw := benchReports(tb, op, 1024)
	reps := make([]dta.Report, len(raw))
	for i := range raw {
		if err := reps[i].Decode(raw[i]); err != nil {
			tb.Fatal(err)
		}
	}
	return reps
}

func benchInst(tb testing.TB, op dta.Opcode) *fakeInst {
	switch op {
	case dta.OpKeyWrite:
		return kwInst(tb)
	case dta.OpKeyIncrement:
		return kiInst(tb)
	case dta.OpPostcard:
		return &fakeInst{prim: dta.OpPostcard, geom: geometry(benchPC), mem: make([]byte, benchPC.RegionSize())}
	default:
		return alInst(tb, benchAL)
	}
}

var (
	benchPC = postcard.Layout{Hops: 5, Chunks: 1 << 16, Copies: 2}
	benchAL = appendlist.Layout{Lists: 4, Entries: 1 << 12, EntrySize: 8, Batch: 16}
)

var benchOps = []struct {
	name string
	op   dta.Opcode
}{
	{"keywrite-N2", dta.OpKeyWrite},
	{"keyincr-N2", dta.OpKeyIncrement},
	{"postcard-N2", dta.OpPostcard},
	{"append-B16", dta.OpAppend},
}

// BenchmarkTranslate measures the in-memory translation of decoded reports
// into RoCEv2 datagrams (ICRC included), one ACK per 32 reports, as a
// responder acknowledging every batch would.
func BenchmarkTranslate(b *testing.B) {
	for _, bo := range benchOps {
		b.Run(bo.name, func(b *testing.B) {
			e, q := memSetup(b, benchInst(b, bo.op), Config{RingSize: 1 << 12})
			reps := decodedReports(b, bo.op)
			a := &acker{q: q, buf: make([]byte, 0, 64)}
			e.ResetOutput()
			now := time.Now().UnixNano()
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; b.Loop(); i++ {
				e.Translate(&reps[i&1023], testReporter, now)
				if i&31 == 31 {
					e.Output()
					e.ResetOutput()
					a.ackAll(e)
				}
			}
			b.StopTimer()
			c := e.Counters()
			if c.Dropped != 0 || c.Rejected != 0 {
				b.Fatalf("counters %+v", c)
			}
			b.ReportMetric(float64(c.Packets)/float64(b.N), "packets/report")
		})
	}
}

// BenchmarkTranslateWide is BenchmarkTranslate's Key-Increment with wide
// sequence numbers of one session: each report is admitted, held pending
// and settled by the ACK, and the cumulative ack goes out with Output.
func BenchmarkTranslateWide(b *testing.B) {
	e, q := memSetup(b, benchInst(b, dta.OpKeyIncrement), Config{RingSize: 1 << 12})
	reps := decodedReports(b, dta.OpKeyIncrement)
	for i := range reps {
		reps[i].Header.Sequenced, reps[i].Header.Wide, reps[i].Header.Session = true, true, 0x5e55
	}
	a := &acker{q: q, buf: make([]byte, 0, 64)}
	e.ResetOutput()
	now := time.Now().UnixNano()
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		r := &reps[i&1023]
		r.Header.Seq = uint32(i)
		e.Translate(r, testReporter, now)
		if i&31 == 31 {
			e.Output()
			e.ResetOutput()
			a.ackAll(e)
		}
	}
	b.StopTimer()
	if c := e.Counters(); c.Dropped+c.Rejected+c.NACKs+c.Duplicates+c.Missing != 0 {
		b.Fatalf("counters %+v", c)
	}
}

// BenchmarkHandleReport adds the decoding of the report datagram.
func BenchmarkHandleReport(b *testing.B) {
	for _, bo := range benchOps {
		b.Run(bo.name, func(b *testing.B) {
			e, q := memSetup(b, benchInst(b, bo.op), Config{RingSize: 1 << 12})
			raw := benchReports(b, bo.op, 1024)
			a := &acker{q: q, buf: make([]byte, 0, 64)}
			e.ResetOutput()
			now := time.Now().UnixNano()
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; b.Loop(); i++ {
				e.HandleReport(raw[i&1023], testReporter, now)
				if i&31 == 31 {
					e.Output()
					e.ResetOutput()
					a.ackAll(e)
				}
			}
		})
	}
}

func TestTranslateDoesNotAllocate(t *testing.T) {
	for _, bo := range benchOps {
		e, q := memSetup(t, benchInst(t, bo.op), Config{RingSize: 1 << 12})
		raw := benchReports(t, bo.op, 1024)
		a := &acker{q: q, buf: make([]byte, 0, 64)}
		e.ResetOutput()
		now := time.Now().UnixNano()
		i := 0
		allocs := testing.AllocsPerRun(2000, func() {
			e.HandleReport(raw[i&1023], testReporter, now)
			i++
			if i&31 == 0 {
				e.Output()
				e.ResetOutput()
				a.ackAll(e)
			}
		})
		if allocs != 0 {
			t.Errorf("%s: %v allocations per report", bo.name, allocs)
		}
		if c := e.Counters(); c.Packets == 0 || c.Dropped != 0 || c.Rejected != 0 {
			t.Errorf("%s: counters %+v", bo.name, c)
		}
	}
	// A NACK does not allocate either: a ring of 2 refuses 4 copies.
	e, _ := memSetup(t, kwInst(t), Config{RingSize: 2})
	now := time.Now().UnixNano()
	b, _ := dta.AppendPayload(nil, &dta.Report{Header: dta.Header{Opcode: dta.OpKeyWrite, Sequenced: true, Seq: 1},
		KeyWrite: dta.KeyWrite{Redundancy: 4, Key: 1, Data: binary.BigEndian.AppendUint32(nil, 1)}})
	allocs := testing.AllocsPerRun(1000, func() {
		e.HandleReport(b, testReporter, now)
		e.ResetOutput()
	})
	if allocs != 0 || e.Counters().NACKs < 1000 {
		t.Errorf("NACK path: %v allocations, %d NACKs", allocs, e.Counters().NACKs)
	}
}

// BenchmarkShards measures the sharded translator's engines alone:
// GOMAXPROCS shards, each an engine with its own queue pair, translate
// decoded Key-Write reports from a pre-built batch on their own goroutine,
// their datagrams handed to a sink (dropped) and acknowledged every 32
// reports. It reports reports/s over all shards; run it with -cpu 1,2 to
// see what a second core adds when no lock or queue pair is shared.
func BenchmarkShards(b *testing.B) {
	n := runtime.GOMAXPROCS(0)
	type shardBench struct {
		e    *Engine
		a    *acker
		reps []dta.Report
	}
	shards := make([]shardBench, n)
	for s := range shards {
		e, q := memSetup(b, benchInst(b, dta.OpKeyWrite), Config{RingSize: 1 << 12})
		reps := decodedReports(b, dta.OpKeyWrite)
		e.ResetOutput()
		shards[s] = shardBench{e: e, a: &acker{q: q, buf: make([]byte, 0, 64)}, reps: reps}
	}
	now := time.Now().UnixNano()
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	var wg sync.WaitGroup
	for s := range shards {
		sh := &shards[s]
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := s; i < b.N; i += n {
				sh.e.Translate(&sh.reps[i&1023], testReporter, now)
				if i&31 == s&31 {
					sh.e.ResetOutput()
					sh.a.ackAll(sh.e)
				}
			}
		}()
	}
	wg.Wait()
	b.StopTimer()
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "reports/s")
	for s := range shards {
		if c := shards[s].e.Counters(); c.Dropped != 0 || c.Rejected != 0 {
			b.Fatalf("shard %d: %+v", s, c)
		}
	}
}
