package target

import (
	"math/rand/v2"
	"net/netip"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/dtakit/dtakit/rocev2"
	"github.com/dtakit/dtakit/rocev2/rc"
)

// benchBatch is a prepared batch of frames on one QP, replayable by
// resetting the QP's Responder to start, a state that expects the batch's
// first PSN.
type benchBatch struct {
	p     *peer
	start rc.Responder
	in    []Datagram
	out   Output
}

func newBenchBatch(tb testing.TB, n int, mk func(p *peer, r *Region, i int) []byte) *benchBatch {
	p := newPeer(tb, 1024)
	g := newGuarded(1 << 20)
	r := register(tb, p.t, g, RemoteWrite|RemoteAtomic)
	return peerBatch(p, r, n, mk)
}

func peerBatch(p *peer, r *Region, n int, mk func(p *peer, r *Region, i int) []byte) *benchBatch {
	bb := &benchBatch{p: p}
	// start has executed an atomic, the PSN before the batch's, so that
	// replaying from it does not allocate the saved atomic results again.
	// Its route mixes address families: that atomic sent nor counted an
	// ATOMIC ACK.
	resp, err := rc.NewResponder(rc.ResponderConfig{Local: targetAddr, Remote: netip.MustParseAddrPort("[::1]:1"),
		RemoteQPN: p.qpn, StartPSN: p.psn.Add(rocev2.PSNMask)})
	if err != nil {
		panic(err)
	}
	resp.Receive(nil, &rocev2.BTH{Opcode: rocev2.RCFetchAdd, PSN: resp.Expected()})
	resp.AtomicDone(nil, 0)
	bb.start = *resp
	for i := range n {
		bb.in = append(bb.in, Datagram{Buf: mk(p, r, i), Addr: p.addr})
	}
	return bb
}

func (bb *benchBatch) run() {
	*bb.p.qp.resp = bb.start
	bb.out.Reset()
	bb.p.t.Process(t0.UnixNano(), bb.in, &bb.out)
}

func slotWrite(size int) func(p *peer, r *Region, i int) []byte {
	return func(p *peer, r *Region, i int) []byte {
		data := make([]byte, size)
		data[0] = byte(i) | 1
		return p.write(r.VA()+uint64(i*4099%(1<<20/size))*uint64(size), r.RKey(), data, i == ServeBatch-1)
	}
}

func fetchAdd(p *peer, r *Region, i int) []byte {
	return p.atomic(rocev2.RCFetchAdd, r.VA()+uint64(i*4099%(1<<17))*8, r.RKey(), 1, 0)
}

// BenchmarkProcess measures the target applying frames in memory, in
// batches of ServeBatch as Serve hands them over: ICRC check, decode, QP and
// region lookup, bounds checks, the write or atomic, and the responses (one
// coalesced ACK per batch of WRITEs; one ATOMIC ACK per FETCH_ADD). The goal
// is 5 M operations/s on one core, with no allocation.
func BenchmarkProcess(b *testing.B) {
	for _, c := range []struct {
		name string
		mk   func(p *peer, r *Region, i int) []byte
	}{
		{"write=8", slotWrite(8)},
		{"write=16", slotWrite(16)},
		{"fetchadd", fetchAdd},
	} {
		b.Run(c.name, func(b *testing.B) {
			bb := newBenchBatch(b, ServeBatch, c.mk)
			bb.run()
			b.SetBytes(int64(len(bb.in[0].Buf)))
			b.ReportAllocs()
			b.ResetTimer()
			for done := 0; done < b.N; done += len(bb.in) {
				bb.run()
			}
			b.StopTimer()
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds()/1e6, "Mops/s")
			c := bb.p.t.Counters()
			if c.NAKSequence+c.NAKInvalid+c.NAKAccess+c.BadICRC+c.Malformed != 0 {
				b.Fatalf("benchmark frames refused: %+v", c)
			}
		})
	}
}

// BenchmarkProcessScattered is BenchmarkProcess's 16-byte WRITEs, each to
// a random slot of a region far larger than a core's caches, as Key-Write's
// hashed copies land: most of the time is cache misses, and it measures how
// many of them a batch overlaps. It replays a stream of 64 Ki frames in
// batches of ServeBatch.
func BenchmarkProcessScattered(b *testing.B) {
	const size, frames, slot = 64 << 20, 1 << 16, 16
	p := newPeer(b, 1024)
	r := register(b, p.t, newGuarded(size), RemoteWrite)
	rng := rand.New(rand.NewPCG(1, 2))
	bb := peerBatch(p, r, frames, func(p *peer, r *Region, i int) []byte {
		data := make([]byte, slot)
		data[0] = byte(i) | 1
		return p.write(r.VA()+uint64(rng.IntN(size/slot))*slot, r.RKey(), data, i%ServeBatch == ServeBatch-1)
	})
	b.ReportAllocs()
	b.ResetTimer()
	for done := 0; done < b.N; {
		*bb.p.qp.resp = bb.start
		for off := 0; off < frames && done < b.N; off += ServeBatch {
			bb.out.Reset()
			bb.p.t.Process(t0.UnixNano(), bb.in[off:off+ServeBatch], &bb.out)
			done += ServeBatch
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds()/1e6, "Mops/s")
	if c := bb.p.t.Counters(); c.WritePackets == 0 || c.NAKSequence+c.NAKInvalid+c.NAKAccess+c.BadICRC+c.Malformed != 0 {
		b.Fatalf("benchmark frames refused: %+v", c)
	}
}

func TestProcessDoesNotAllocate(t *testing.T) {
	for name, mk := range map[string]func(p *peer, r *Region, i int) []byte{"write": slotWrite(8), "fetchadd": fetchAdd} {
		bb := newBenchBatch(t, ServeBatch, mk)
		bb.run()
		if n := testing.AllocsPerRun(20, bb.run); n != 0 {
			t.Errorf("%s: %v allocations per batch", name, n)
		}
		c := bb.p.t.Counters()
		if c.WritePackets+c.Atomics != 22*ServeBatch || c.ACKs+c.AtomicACKs == 0 {
			t.Errorf("%s: counters %+v", name, c)
		}
	}
}

// BenchmarkProcessParallel measures the target alone on every core:
// GOMAXPROCS goroutines call Process at once on one target, each replaying
// ServeBatch RDMA WRITEs of 8 bytes on its own queue pair into one shared
// region, as the Serve loops of a sharded collector do. It reports
// operations/s over all goroutines; run it with -cpu 1,2.
func BenchmarkProcessParallel(b *testing.B) {
	n := runtime.GOMAXPROCS(0)
	tg, err := New(Config{Addr: targetAddr, Peers: testPeers})
	if err != nil {
		b.Fatal(err)
	}
	r := register(b, tg, newGuarded(1<<20), RemoteWrite)
	batches := make([]*benchBatch, n)
	for s := range batches {
		p := addPeer(b, tg, s)
		// Slots apart from the other goroutines', as keys spread over a
		// region are: two cores writing one cache line measure the line.
		batches[s] = peerBatch(p, r, ServeBatch, func(p *peer, r *Region, i int) []byte {
			slot := (i + s*ServeBatch) * 4099 % (1 << 17)
			return p.write(r.VA()+uint64(slot)*8, r.RKey(), []byte{byte(i) | 1, 0, 0, 0, 0, 0, 0, 0}, i == ServeBatch-1)
		})
	}
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	var wg sync.WaitGroup
	for s, bb := range batches {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for done := s * ServeBatch; done < b.N; done += n * ServeBatch {
				bb.run()
			}
		}()
	}
	wg.Wait()
	b.StopTimer()
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds()/1e6, "Mops/s")
	if c := tg.Counters(); c.WritePackets == 0 || c.NAKSequence+c.NAKInvalid+c.NAKAccess+c.BadICRC+c.Malformed+c.Unknown != 0 {
		b.Fatalf("benchmark frames refused: %+v", c)
	}
}
