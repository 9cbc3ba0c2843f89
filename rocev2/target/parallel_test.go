package target

import (
	"bytes"
	"encoding/binary"
	"net/netip"
	"reflect"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/dtakit/dtakit/rocev2"
)

// addPeer connects peer s (address 10.0.1.s, QPN 0x100+s) to tg without the
// CM.
func addPeer(tb testing.TB, tg *Target, s int) *peer {
	tb.Helper()
	p := &peer{tb: tb, t: tg, addr: netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, 0, 1, byte(s)}), 50000), qpn: 0x100 + uint32(s), psn: 0xFFFF00}
	var err error
	p.qp, err = tg.NewQP(QPConfig{Peer: p.addr, RemoteQPN: p.qpn, RecvPSN: p.psn})
	if err != nil {
		tb.Fatal(err)
	}
	return p
}

// decodeAll decodes the datagrams of out, sent by the target at targetAddr.
func decodeAll(out *Output) ([]rocev2.Packet, error) {
	var res []rocev2.Packet
	for _, d := range out.Datagrams() {
		var pkt rocev2.Packet
		if err := pkt.DecodeDatagram(append([]byte(nil), d.Buf...), targetAddr, d.Addr); err != nil {
			return nil, err
		}
		res = append(res, pkt)
	}
	return res, nil
}

// TestProcessParallel runs Process on four goroutines at once, each the
// requester of its own queue pair, writing its own slots and adding to one
// shared counter, while another goroutine ticks, reads the counters and
// registers and deregisters a region. Every write lands, every response
// goes to the queue pair it answers, the FETCH_ADDs are atomic across cores
// (their original values are 0..n-1, each once) and the counters add up.
func TestProcessParallel(t *testing.T) {
	const (
		workers = 4
		batches = 100
		writes  = ServeBatch - 4 // and 4 FETCH_ADDs per batch
	)
	tg, err := New(Config{Addr: targetAddr, Peers: testPeers})
	if err != nil {
		t.Fatal(err)
	}
	g := newGuarded(8 * (1 + workers*writes))
	r := register(t, tg, g, RemoteWrite|RemoteAtomic)
	type job struct {
		p    *peer
		in   [][]Datagram
		last []rocev2.PSN // the PSN of each batch's last write
	}
	jobs := make([]*job, workers)
	for s := range jobs {
		j := &job{p: addPeer(t, tg, s)}
		for b := range batches {
			var in []Datagram
			for i := range ServeBatch {
				var f []byte
				if i%16 == 15 {
					f = j.p.atomic(rocev2.RCFetchAdd, r.VA(), r.RKey(), 1, 0)
				} else {
					slot := 1 + s*writes + i - i/16
					var v [8]byte
					binary.LittleEndian.PutUint64(v[:], uint64(s)<<32|uint64(b))
					if i == ServeBatch-2 {
						j.last = append(j.last, j.p.psn)
					}
					f = j.p.write(r.VA()+uint64(8*slot), r.RKey(), v[:], i == ServeBatch-2)
				}
				in = append(in, Datagram{Buf: f, Addr: j.p.addr})
			}
			j.in = append(j.in, in)
		}
		jobs[s] = j
	}

	var stop atomic.Bool
	var side sync.WaitGroup
	side.Add(1)
	go func() {
		defer side.Done()
		var out Output
		spare := newGuarded(64)
		for !stop.Load() {
			out.Reset()
			tg.Tick(t0.UnixNano(), &out)
			_ = tg.Counters()
			if sr, err := tg.Register(spare.mem, RemoteWrite); err == nil {
				_ = tg.Deregister(sr)
			}
		}
	}()
	origs := make([][]uint64, workers)
	errs := make(chan string, workers)
	var wg sync.WaitGroup
	for s, j := range jobs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var out Output
			for b, in := range j.in {
				out.Reset()
				tg.Process(t0.UnixNano(), in, &out)
				resp, err := decodeAll(&out)
				if err != nil {
					errs <- err.Error()
					return
				}
				if e := batchAnswers(resp, j.p.qpn, j.last[b], &origs[s]); e != "" {
					errs <- e
					return
				}
			}
		}()
	}
	wg.Wait()
	stop.Store(true)
	side.Wait()
	close(errs)
	for e := range errs {
		t.Fatal(e)
	}

	c := tg.Counters()
	const adds = workers * batches * 4
	if got := binary.LittleEndian.Uint64(g.mem); got != adds {
		t.Errorf("shared counter %d, want %d", got, adds)
	}
	checkOriginals(t, origs, adds)
	for s := range workers {
		var want [8]byte
		binary.LittleEndian.PutUint64(want[:], uint64(s)<<32|uint64(batches-1))
		for i := range writes {
			slot := 1 + s*writes + i
			if got := g.mem[8*slot : 8*slot+8]; !bytes.Equal(got, want[:]) {
				t.Fatalf("worker %d slot %d holds %x, want %x", s, slot, got, want)
			}
		}
	}
	g.check(t)
	total := uint64(workers * batches * ServeBatch)
	if c.Frames != total || c.WritePackets != workers*batches*writes || c.Atomics != adds ||
		c.AtomicACKs != adds || c.ACKs != workers*batches || c.NAKSequence+c.NAKInvalid+c.NAKAccess+c.Unknown+c.Duplicates != 0 {
		t.Errorf("counters %+v", c)
	}
}

// batchAnswers checks the responses to one batch of a queue pair qpn,
// whose last write has PSN last, and adds the ATOMIC ACKs' original values
// to origs; it returns what is wrong, or "".
func batchAnswers(resp []rocev2.Packet, qpn uint32, last rocev2.PSN, origs *[]uint64) string {
	acks := 0
	for _, p := range resp {
		switch {
		case p.BTH.DestQP != qpn:
			return "a response to another queue pair"
		case p.BTH.Opcode == rocev2.RCAtomicAcknowledge:
			*origs = append(*origs, p.AtomicAckETH.OrigRemoteData)
		case p.BTH.Opcode == rocev2.RCAcknowledge && p.AETH.Syndrome == rocev2.SyndromeACK && p.BTH.PSN == last:
			acks++
		default:
			return "an unexpected response"
		}
	}
	if acks != 1 {
		return "no ACK of the batch's last write"
	}
	return ""
}

// checkOriginals checks that the FETCH_ADDs' original values are 0..adds-1,
// each once: the adds were atomic.
func checkOriginals(t *testing.T, origs [][]uint64, adds uint64) {
	t.Helper()
	seen := make([]bool, adds)
	for _, o := range origs {
		for _, v := range o {
			if v >= adds || seen[v] {
				t.Fatalf("FETCH_ADD returned %d twice or out of range: not atomic", v)
			}
			seen[v] = true
		}
	}
}

// TestDeregisterStopsParallelWrites deregisters a region while two
// goroutines write into it through Process: once Deregister returns, its
// memory never changes again, and the writers' queue pairs get NAK remote
// access error.
func TestDeregisterStopsParallelWrites(t *testing.T) {
	tg, err := New(Config{Addr: targetAddr, Peers: testPeers})
	if err != nil {
		t.Fatal(err)
	}
	g := newGuarded(4096)
	r := register(t, tg, g, RemoteWrite)
	var after atomic.Bool // set once Deregister returned
	var started, wg sync.WaitGroup
	var rounds [2]atomic.Int64
	for s := range 2 {
		p := addPeer(t, tg, s)
		started.Add(1)
		wg.Add(1)
		go func() {
			defer wg.Done()
			var out Output
			late := 0 // writes begun after Deregister returned
			for n := 1; ; n++ {
				var v [8]byte
				binary.LittleEndian.PutUint64(v[:], uint64(n))
				in := []Datagram{{Buf: p.write(r.VA()+uint64(8*(s+2*(n%200))), r.RKey(), v[:], true), Addr: p.addr}}
				out.Reset()
				begun := after.Load()
				tg.Process(t0.UnixNano(), in, &out)
				if n == 10 {
					started.Done()
				}
				rounds[s].Add(1)
				if begun {
					late++
				}
				// Each queue pair writes after Deregister, so each gets
				// its NAK; a write that began before may count after.
				if late > 10 && rounds[s].Load() > 1000 {
					return
				}
			}
		}()
	}
	started.Wait()
	if err := tg.Deregister(r); err != nil {
		t.Fatal(err)
	}
	snapshot := append([]byte(nil), g.mem...)
	base := [2]int64{rounds[0].Load(), rounds[1].Load()}
	after.Store(true)
	wg.Wait()
	if !bytes.Equal(g.mem, snapshot) {
		t.Fatal("region memory changed after Deregister returned")
	}
	if rounds[0].Load() == base[0] || rounds[1].Load() == base[1] {
		t.Fatal("the writers stopped before Deregister was tested")
	}
	if c := tg.Counters(); c.NAKAccess != 2 || c.WritePackets < 20 {
		t.Errorf("counters %+v, want one NAK remote access error per queue pair", c)
	}
	g.check(t)
}

// TestCountersAdd: Counters.add adds every field.
func TestCountersAdd(t *testing.T) {
	var c Counters
	v := reflect.ValueOf(&c).Elem()
	for i := range v.NumField() {
		v.Field(i).SetUint(uint64(i + 1))
	}
	d := c
	d.add(&c)
	w := reflect.ValueOf(d)
	for i := range w.NumField() {
		if got := w.Field(i).Uint(); got != 2*uint64(i+1) {
			t.Errorf("field %s: %d, want %d", w.Type().Field(i).Name, got, 2*(i+1))
		}
	}
}
