package dart_test

import (
	"context"
	"encoding/binary"
	"errors"
	"net/netip"
	"os"
	"testing"
	"time"

	"github.com/dtakit/dtakit/collector"
	"github.com/dtakit/dtakit/dart"
	"github.com/dtakit/dtakit/keywrite"
	"github.com/dtakit/dtakit/translator"
)

// cmPort keeps off the ports other packages' tests, run in parallel, hold.
var cmPort = uint16(46000 + os.Getpid()%1000)

// serve starts an in-process collector with one Key-Write instance and a
// connected dart.Reporter.
func serve(t testing.TB, slots uint64) (*dart.Reporter, *collector.Collector, *keywrite.Store) {
	t.Helper()
	c, err := collector.New(collector.Config{Addr: netip.MustParseAddrPort("127.0.0.1:0"), CMPort: cmPort})
	if err != nil {
		t.Fatal(err)
	}
	l := keywrite.Layout{Slots: slots, DataSize: 4}
	kw, err := c.AddKeyWrite(l)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	go c.Serve(ctx)
	t.Cleanup(func() { cancel(); c.Close() })
	d, err := dart.New(translator.Config{Collectors: []netip.AddrPort{c.Addr()}, CMPort: cmPort, RingSize: 4096})
	if err != nil {
		t.Fatal(err)
	}
	sctx, scancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer scancel()
	if err := d.Start(sctx); err != nil {
		t.Fatal(err)
	}
	return d, c, kw
}

// write retries a write the full ring refuses.
func write(t testing.TB, f func() error) {
	for {
		err := f()
		if err == nil {
			return
		}
		if !errors.Is(err, translator.ErrBusy) {
			t.Fatal(err)
		}
		time.Sleep(50 * time.Microsecond)
	}
}

// Each report writes exactly one copy, the one asked for, and the store's
// query finds it there.
func TestCopies(t *testing.T) {
	d, c, kw := serve(t, 1<<16)
	val := func(k uint32) []byte { return binary.BigEndian.AppendUint32(nil, k^0xA5A5A5A5) }
	for k := uint32(1); k <= 300; k++ {
		write(t, func() error { return d.KeyWriteCopy(k, val(k), 4, int(k%4)) })
	}
	if err := d.Close(5 * time.Second); err != nil {
		t.Fatal(err)
	}
	c.Counters() // happens-before the region's bytes
	if w := d.Counters().Writes; w != 300 {
		t.Fatalf("%d writes for 300 one-copy reports", w)
	}
	for k := uint32(1); k <= 300; k++ {
		res, _ := kw.Query(k, 4, keywrite.Plurality)
		if res.Status != keywrite.Found || string(res.Data) != string(val(k)) || res.Votes != 1 {
			t.Fatalf("key %d: %+v", k, res)
		}
		for n := uint8(0); n < 4; n++ {
			if _, ok := kw.Copy(k, n); ok != (n == uint8(k%4)) {
				t.Fatalf("key %d: copy %d present %v", k, n, ok)
			}
		}
	}
}

// BenchmarkKeyWrite is one DART report from the caller to the datagram
// queued for the collector.
func BenchmarkKeyWrite(b *testing.B) {
	d, _, _ := serve(b, 1<<20)
	defer d.Close(5 * time.Second)
	data := []byte{1, 2, 3, 4}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		write(b, func() error { return d.KeyWrite(uint32(i), data, 2) })
	}
}
