package keymax_test

import (
	"context"
	"errors"
	"hash/crc32"
	"math/rand/v2"
	"net"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/dtakit/dtakit/dta"
	"github.com/dtakit/dtakit/internal/test/keymax"
	"github.com/dtakit/dtakit/primitive"
	"github.com/dtakit/dtakit/reporter"
	"github.com/dtakit/dtakit/rocev2"
	"github.com/dtakit/dtakit/rocev2/target"
	"github.com/dtakit/dtakit/translator"
)

// TestThroughTranslatorAndTarget is the proof of the primitive seam:
// Key-Max, defined in this package alone, is advertised by a software
// target, discovered and translated by the software translator (two
// shards, reports over UDP and through Submit) and written into the
// target's memory by RDMA WRITEs, with no code of the translator's or the
// target's knowing it. The register of every key ends holding the largest
// value reported; malformed bodies are rejected and counted.
func TestThroughTranslatorAndTarget(t *testing.T) {
	l := keymax.Layout{LogSlots: 12}
	geo, err := l.AppendBinary(nil)
	if err != nil {
		t.Fatal(err)
	}
	addr, mem, stop := startTarget(t, l, geo)
	defer stop()

	tr, err := translator.New(translator.Config{
		ReportAddr: netip.MustParseAddrPort("127.0.0.1:0"),
		Collectors: []netip.AddrPort{addr},
		Shards:     2,
	})
	if err != nil {
		t.Fatal(err)
	}
	sctx, scancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer scancel()
	if err := tr.Start(sctx); err != nil {
		t.Fatal(err)
	}
	ins := tr.Instances()
	if len(ins) != 1 || ins[0].Primitive != keymax.Opcode || !ins[0].Ready || !ins[0].Used || ins[0].Err != nil {
		t.Fatalf("instances %+v: want one Key-Max instance, ready and used", ins)
	}

	const keys, perKey = 200, 8
	want := send(t, tr, keys, perKey)
	total := uint64(keys*perKey + 2)
	waitFor(t, func() bool { return reports(tr) >= total })
	if err := tr.Close(5 * time.Second); err != nil {
		t.Fatalf("Close: %v (everything should be acknowledged)", err)
	}
	c := tr.Counters()
	if c.Reports[0] != total || c.Translated[0] != keys*perKey || c.Rejected != 2 || c.Malformed != 0 || c.Writes != keys*perKey || c.EncodeErrors != 0 {
		t.Errorf("counters: reports %d translated %d rejected %d malformed %d writes %d encode errors %d; want %d %d 2 0 %d 0",
			c.Reports[0], c.Translated[0], c.Rejected, c.Malformed, c.Writes, c.EncodeErrors, total, keys*perKey, keys*perKey)
	}
	if c.RegisteredReports[keymax.Opcode] != total || c.RegisteredTranslated[keymax.Opcode] != keys*perKey {
		t.Errorf("Key-Max's own counters: reports %d translated %d; want %d %d", c.RegisteredReports[keymax.Opcode], c.RegisteredTranslated[keymax.Opcode], total, keys*perKey)
	}
	stop()
	checkStore(t, l, geo, mem, want)
}

// TestConfirmedThroughReporter sends Key-Max reports with the reporter's
// default, Confirmed delivery (wide sequence numbers, acks when applied):
// every report is acknowledged once its WRITE is, through the generic
// exactly-once bookkeeping, none lost or unconfirmed, and each key's
// register holds its maximum.
func TestConfirmedThroughReporter(t *testing.T) {
	l := keymax.Layout{LogSlots: 12}
	geo, _ := l.AppendBinary(nil)
	addr, mem, stop := startTarget(t, l, geo)
	defer stop()
	ackPort := freeAckPort(t)
	tr, err := translator.New(translator.Config{ReportAddr: netip.MustParseAddrPort("127.0.0.1:0"), Collectors: []netip.AddrPort{addr}, AckPort: ackPort})
	if err != nil {
		t.Fatal(err)
	}
	sctx, scancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer scancel()
	if err := tr.Start(sctx); err != nil {
		t.Fatal(err)
	}
	rep, err := reporter.New(reporter.Config{Translator: tr.ReportAddr(), AckPort: ackPort})
	if err != nil {
		t.Fatal(err)
	}
	want := map[uint32]uint64{}
	const n = 1000
	for i := range uint64(n) {
		k := uint32(i%100) + 1
		v := (i * 7919) % 1000
		want[k] = max(want[k], v)
		r := keymax.Report(k, v)
		if err := rep.Send(&r); err != nil {
			t.Fatalf("Send: %v", err)
		}
	}
	if err := rep.Close(); err != nil {
		t.Fatalf("reporter Close: %v", err)
	}
	if c := rep.Counters(); c.Lost != 0 || c.Unconfirmed != 0 || c.Rejected != 0 || c.Acks == 0 {
		t.Errorf("reporter counters %+v: want every report acknowledged", c)
	}
	if err := tr.Close(5 * time.Second); err != nil {
		t.Fatalf("translator Close: %v", err)
	}
	if c := tr.Counters(); c.Translated[0] != n || c.Unconfirmed != 0 || c.Rejected != 0 {
		t.Errorf("translated %d, unconfirmed %d, rejected %d; want %d, 0, 0", c.Translated[0], c.Unconfirmed, c.Rejected, n)
	}
	stop()
	checkStore(t, l, geo, mem, want)
}

// startTarget starts a software target with one region of layout l,
// advertised as Key-Max, and returns its address, the region's memory and
// a function that stops it (after which the memory may be read).
func startTarget(t *testing.T, l keymax.Layout, geo []byte) (netip.AddrPort, []byte, func()) {
	t.Helper()
	uc, err := net.ListenUDP("udp", net.UDPAddrFromAddrPort(netip.MustParseAddrPort("127.0.0.1:0")))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { uc.Close() })
	if err := rocev2.ConfigureSocket(uc); err != nil {
		t.Fatal(err)
	}
	addr := uc.LocalAddr().(*net.UDPAddr).AddrPort()
	tgt, err := target.New(target.Config{Addr: addr})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tgt.Close() })
	mem := make([]byte, l.RegionSize())
	region, err := tgt.Register(mem, target.RemoteWrite)
	if err != nil {
		t.Fatal(err)
	}
	ad := dta.Advertisement{VA: region.VA(), Length: uint32(len(mem)), RKey: region.RKey(), Primitive: keymax.Opcode, Geometry: geo}
	greeting, err := ad.AppendTo(nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := tgt.Listen(translator.DefaultCMPort, target.ListenConfig{Greeting: greeting}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- tgt.Serve(ctx, uc) }()
	var once sync.Once
	return addr, mem, func() {
		once.Do(func() {
			cancel()
			if err := <-served; err != nil {
				t.Errorf("target: %v", err)
			}
		})
	}
}

// send sends perKey reports of random values for each of keys 1..keys,
// half over UDP (the wire path, dta's registered-opcode decoding), half
// through Submit, then two bodies Key-Max refuses, and a Submit with a
// copy (refused before translation). It returns each key's maximum.
func send(t *testing.T, tr *translator.Translator, keys, perKey int) map[uint32]uint64 {
	t.Helper()
	rep, err := net.DialUDP("udp", nil, net.UDPAddrFromAddrPort(tr.ReportAddr()))
	if err != nil {
		t.Fatal(err)
	}
	defer rep.Close()
	want := map[uint32]uint64{}
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range keys * perKey {
		k := uint32(i%keys) + 1
		v := rng.Uint64N(1 << 40)
		want[k] = max(want[k], v)
		r := keymax.Report(k, v)
		if i%2 == 0 {
			if err := tr.Submit(&r, -1); err != nil {
				t.Fatalf("Submit(%d, %d): %v", k, v, err)
			}
			continue
		}
		if _, err := rep.Write(r.AppendTo(nil)); err != nil {
			t.Fatal(err)
		}
		if i%32 == 31 {
			// Pace the datagrams so that loopback UDP drops none.
			waitFor(t, func() bool { return reports(tr) >= uint64(i+1) })
		}
	}
	bad := dta.Report{Header: dta.Header{Opcode: keymax.Opcode}, Body: []byte{0, 0, 0, 1}}
	if err := tr.Submit(&bad, -1); !errors.Is(err, translator.ErrReport) {
		t.Errorf("Submit of a 4-byte body: %v, want ErrReport", err)
	}
	if _, err := rep.Write(bad.AppendTo(nil)); err != nil {
		t.Fatal(err)
	}
	// A copy is Key-Write's alone.
	one := keymax.Report(1, 1)
	if err := tr.Submit(&one, 0); !errors.Is(err, translator.ErrReport) {
		t.Errorf("Submit with a copy: %v, want ErrReport", err)
	}
	return want
}

// checkStore reads the region through the seam, as a collector would:
// the Kind found by opcode, its Layout from the advertised geometry, its
// Store's Query and Rows. Every key holds its maximum, but for keys whose
// slot another key took last.
func checkStore(t *testing.T, l keymax.Layout, geo, mem []byte, want map[uint32]uint64) {
	t.Helper()
	lay, err := primitive.Parse(keymax.Opcode, geo)
	if err != nil {
		t.Fatal(err)
	}
	st, err := lay.NewStore(mem)
	if err != nil {
		t.Fatal(err)
	}
	q := primitive.Query{}
	for k := range want {
		q.Keys = append(q.Keys, k)
	}
	answers, err := st.Query(q)
	if err != nil {
		t.Fatal(err)
	}
	collided := 0
	for _, a := range answers {
		a := a.(keymax.Answer)
		switch {
		case a.Status == "found" && a.Max == want[a.Key]:
		case a.Status == "not found" && sharesSlot(l, a.Key, want):
			collided++
		default:
			t.Errorf("key %d: %+v, want max %d", a.Key, a, want[a.Key])
		}
	}
	if collided > len(want)/10 {
		t.Errorf("%d of %d keys lost their slot, more than collisions in %d slots explain", collided, len(want), 1<<l.LogSlots)
	}
	rows := 0
	if err := st.Rows(primitive.Query{}, func(row []any) error {
		if k := row[0].(uint32); row[1].(uint64) != want[k] {
			t.Errorf("row %v: want max %d", row, want[k])
		}
		rows++
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if rows != len(want)-collided {
		t.Errorf("%d rows, want %d", rows, len(want)-collided)
	}
}

// sharesSlot reports whether key's slot is another reported key's too.
func sharesSlot(l keymax.Layout, key uint32, keys map[uint32]uint64) bool {
	for k := range keys {
		if k != key && l.Slot(k) == l.Slot(key) {
			return true
		}
	}
	return false
}

func reports(tr *translator.Translator) uint64 { return tr.Counters().Reports[0] }

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("timed out")
		}
	}
}

// sink records a Translator's writes; room says whether it has room.
type sink struct {
	room    bool
	writes  int
	last    []byte
	off     uint64
	settled int
	primitive.Sink
}

func (s *sink) Room(int) bool { return s.room }
func (s *sink) Write(off uint64, data []byte, _ bool, _ uint32) {
	s.writes, s.off, s.last = s.writes+1, off, append(s.last[:0], data...)
}
func (s *sink) Settle() { s.settled++ }

// TestTranslate: each report writes its key's slot with the largest value
// so far, settled by that write; a smaller value rewrites the maximum; a
// body of the wrong size is rejected, a full sink is busy; nothing
// allocates.
func TestTranslate(t *testing.T) {
	l := keymax.Layout{LogSlots: 4}
	tr, err := l.NewTranslator(primitive.Config{})
	if err != nil {
		t.Fatal(err)
	}
	st, _ := l.NewStore(make([]byte, l.RegionSize()))
	s := &sink{room: true}
	for i, v := range []uint64{5, 9, 3, 9, 12, 1} {
		r := keymax.Report(7, v)
		if o := tr.Translate(s, &r, -1); o != primitive.Applied || s.writes != i+1 || s.settled != i+1 {
			t.Fatalf("report %d: %v, %d writes, %d settled", v, o, s.writes, s.settled)
		}
		if err := st.Write(s.off, s.last, false, 0); err != nil {
			t.Fatal(err)
		}
	}
	if got, ok := st.(*keymax.Store).Max(7); !ok || got != 12 {
		t.Errorf("Max(7) = %d, %v; want 12", got, ok)
	}
	if _, ok := st.(*keymax.Store).Max(8); ok {
		t.Error("key 8, never reported, found")
	}
	bad := dta.Report{Header: dta.Header{Opcode: keymax.Opcode}, Body: make([]byte, 13)}
	if o := tr.Translate(s, &bad, -1); o != primitive.Rejected {
		t.Errorf("13-byte body: %v, want Rejected", o)
	}
	s.room = false
	r := keymax.Report(7, 100)
	if o := tr.Translate(s, &r, -1); o != primitive.Busy || s.writes != 6 {
		t.Errorf("no room: %v, %d writes; want Busy, nothing written", o, s.writes)
	}
	s.room = true
	if n := testing.AllocsPerRun(100, func() { tr.Translate(s, &r, -1) }); n != 0 {
		t.Errorf("Translate: %v allocations", n)
	}
	if err := st.Write(8, make([]byte, 16), false, 0); !errors.Is(err, keymax.ErrOutOfRegion) {
		t.Errorf("a write across slots: %v, want ErrOutOfRegion", err)
	}
	if _, err := (keymax.Kind{}).ParseLayout([]byte{1, 21}); !errors.Is(err, keymax.ErrLayout) {
		t.Errorf("2^21 slots: %v, want ErrLayout", err)
	}
}

func TestSlotIsCRC32(t *testing.T) {
	l := keymax.Layout{LogSlots: 20}
	for _, k := range []uint32{0, 1, 0xdeadbeef, 1 << 31} {
		b := []byte{byte(k), byte(k >> 8), byte(k >> 16), byte(k >> 24)}
		if got, want := l.Slot(k), int(crc32.ChecksumIEEE(b))&(1<<20-1); got != want {
			t.Errorf("Slot(%#x) = %d, want %d", k, got, want)
		}
	}
}

// freeAckPort returns a free UDP port for a test's acks: the default
// (40044) may be taken by a test of another package running at once.
func freeAckPort(t *testing.T) uint16 {
	t.Helper()
	uc, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer uc.Close()
	return uint16(uc.LocalAddr().(*net.UDPAddr).Port)
}
