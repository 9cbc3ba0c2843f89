// Command rnic runs a DTA collector and translator on RDMA NICs: the
// collector's regions are registered with the NIC (collector.BackendVerbs),
// and the translator posts its writes and fetch-and-adds through the NIC
// (translator.Config.Verbs), so neither CPU touches a report's bytes after
// the translator has translated it. A reporter sends a few thousand reports
// of each primitive; the program then queries the collector and prints what
// it found.
//
// It needs a Linux host with an RDMA device whose netdev has the IPv4
// address given with -addr (both ends use it, over the NIC's loopback):
//
//   - an RNIC, or Soft-RoCE: `rdma link add rxe0 type rxe netdev eth0`;
//     check with `ibv_devices` and `rdma link`;
//   - rdma-core's libraries (Debian: libibverbs1 librdmacm1 ibverbs-providers;
//     to build: libibverbs-dev librdmacm-dev), cgo and the build tag rdma;
//   - enough locked memory for the regions (`ulimit -l unlimited`, or a
//     limit above the regions' size); hugepages are used when reserved
//     (`echo 64 > /proc/sys/vm/nr_hugepages`).
//
// Run it with
//
//	go run -tags rdma ./examples/rnic -addr 192.0.2.10
//
// Without a device it exits 2 saying why. With -software the same program
// runs both ends in software instead (the software RoCEv2 target and
// translator, on any machine; -addr 127.0.0.1 will do): the backend is a
// field of each side's Config, nothing else changes.
package main

import (
	"context"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"net/netip"
	"os"
	"time"

	"github.com/dtakit/dtakit/appendlist"
	"github.com/dtakit/dtakit/collector"
	"github.com/dtakit/dtakit/internal/app/cli"
	"github.com/dtakit/dtakit/keyincr"
	"github.com/dtakit/dtakit/keywrite"
	"github.com/dtakit/dtakit/postcard"
	"github.com/dtakit/dtakit/reporter"
	"github.com/dtakit/dtakit/translator"
)

func main() {
	addr := flag.String("addr", "", "IPv4 address of the RDMA device's netdev (required)")
	keys := flag.Int("keys", 2000, "Key-Write and Key-Increment keys, postcard flows and Append entries")
	software := flag.Bool("software", false, "serve and translate in software instead of on the NIC")
	cli.Usage(flag.CommandLine, synopsis, exitStatus)
	flag.Parse()
	a, err := netip.ParseAddr(*addr)
	if err != nil {
		fmt.Fprintln(os.Stderr, "rnic: -addr: give the IPv4 address of the RDMA device's netdev:", err)
		os.Exit(2)
	}
	if err := run(a, *keys, !*software); err != nil {
		fmt.Fprintln(os.Stderr, "rnic:", err)
		if errors.Is(err, collector.ErrNoRDMA) {
			os.Exit(2)
		}
		os.Exit(1)
	}
}

// instances are the collector's four primitive instances.
type instances struct {
	kw  *keywrite.Store
	ki  *keyincr.Store
	pc  *postcard.Store
	pcl postcard.Layout
	al  *appendlist.Store
}

// answers counts what the queries found.
type answers struct {
	kwFound, kiExact, pcFound, alRead int
}

func run(addr netip.Addr, n int, nic bool) error {
	c, in, err := startCollector(addr, nic)
	if err != nil {
		return err
	}
	defer c.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go c.Serve(ctx)

	tr, err := startTranslator(ctx, addr, c.Addr(), nic)
	if err != nil {
		return err
	}
	if err := send(tr.ReportAddr(), n); err != nil {
		return err
	}
	time.Sleep(100 * time.Millisecond) // the last reports reach the translator
	closeErr := tr.Close(5 * time.Second)
	tc := tr.Counters()

	a, err := query(in, n)
	if err != nil {
		return err
	}
	how := "sent as RoCEv2 by the software translator"
	if nic {
		how = "posted to the NIC"
	}
	fmt.Printf("translator: %d reports, %d RDMA WRITEs and %d FETCH_ADDs %s, %d dropped, %d verbs errors\n",
		tc.Reports[1]+tc.Reports[2]+tc.Reports[3]+tc.Reports[4], tc.Writes, tc.FetchAdds, how, tc.Dropped, tc.VerbsErrors)
	if nic {
		fmt.Printf("collector: %+v\n", c.VerbsCounters())
	} else {
		fmt.Printf("collector: %+v\n", c.Counters())
	}
	fmt.Printf("Key-Write: %d of %d keys found\nKey-Increment: %d of %d counts exact\nPostcarding: %d of %d paths\nAppend: %d of %d entries read\n",
		a.kwFound, n, a.kiExact, n, a.pcFound, n, a.alRead, n)
	if closeErr != nil {
		return closeErr
	}
	if a.kwFound < n*95/100 || a.kiExact < n*95/100 || a.pcFound < n*95/100 || a.alRead != n {
		return errors.New("fewer answers than the load should give")
	}
	return nil
}

// startCollector starts a collector on addr holding one instance of each
// primitive, its regions registered with the NIC when nic is set. The
// translator speaks RoCEv2 from addr: the collector takes it from there
// (its default is loopback).
func startCollector(addr netip.Addr, nic bool) (*collector.Collector, instances, error) {
	ccfg := collector.Config{Addr: netip.AddrPortFrom(addr, 0), Translators: []netip.Prefix{netip.PrefixFrom(addr, addr.BitLen())}}
	if nic {
		ccfg.Backend = collector.BackendVerbs
	}
	in := instances{pcl: postcard.Layout{Hops: 5, Chunks: 1 << 14}}
	c, err := collector.New(ccfg)
	if err != nil {
		return nil, in, err
	}
	if err := in.add(c); err != nil {
		c.Close()
		return nil, in, err
	}
	if err := c.Start(); err != nil {
		c.Close()
		return nil, in, err
	}
	return c, in, nil
}

// add adds the four instances to c.
func (in *instances) add(c *collector.Collector) error {
	var err error
	if in.kw, err = c.AddKeyWrite(keywrite.Layout{Slots: 1 << 16, DataSize: 4}); err != nil {
		return err
	}
	if in.ki, err = c.AddKeyIncrement(keyincr.Layout{Slots: 1 << 14}); err != nil {
		return err
	}
	if in.pc, err = c.AddPostcard(in.pcl); err != nil {
		return err
	}
	in.al, err = c.AddAppend(appendlist.Layout{Lists: 1, Entries: 1 << 16, EntrySize: 4, Batch: 16, Markers: true})
	return err
}

// startTranslator starts a translator on addr, posting through the NIC
// when nic is set, and connects it to the collector: the software target
// at served, or the NIC's RoCEv2 port on addr.
func startTranslator(ctx context.Context, addr netip.Addr, served netip.AddrPort, nic bool) (*translator.Translator, error) {
	target := served
	if nic {
		target = netip.AddrPortFrom(addr, 4791)
	}
	tr, err := translator.New(translator.Config{
		Local: netip.AddrPortFrom(addr, 0), Collectors: []netip.AddrPort{target}, Verbs: nic,
	})
	if err != nil {
		return nil, err
	}
	if err := tr.Start(ctx); err != nil {
		tr.Close(time.Second)
		return nil, err
	}
	return tr, nil
}

// send sends n reports of each primitive to the translator, unsequenced,
// paced to stay below a full queue.
func send(to netip.AddrPort, n int) error {
	rep, err := reporter.New(reporter.Config{Translator: to, Delivery: reporter.FireAndForget})
	if err != nil {
		return err
	}
	be := func(v uint32) []byte { return binary.BigEndian.AppendUint32(nil, v) }
	sent := 0
	pace := func(err error) error {
		if sent++; err == nil && sent%32 == 0 {
			err = rep.Flush()
			time.Sleep(time.Millisecond) // unsequenced reports: stay below a full queue
		}
		return err
	}
	for k := 1; k <= n && err == nil; k++ {
		err = pace(rep.KeyWrite(uint32(k), be(uint32(k)*3), 2))
	}
	for k := 1; k <= n && err == nil; k++ {
		err = pace(rep.KeyIncrement(uint32(k), 1, 2))
	}
	for f := 1; f <= n && err == nil; f++ {
		for h := 1; h <= 5 && err == nil; h++ {
			err = pace(rep.Postcard(uint32(f), postcard.Hop(h), 5, postcard.Value(f*10+h)))
		}
	}
	for i := 1; i <= n && err == nil; i++ {
		err = pace(rep.Append(0, be(uint32(i)), false))
	}
	if err == nil {
		err = rep.Flush()
	}
	rep.Close()
	return err
}

// query queries what send sent.
func query(in instances, n int) (answers, error) {
	var a answers
	for k := 1; k <= n; k++ {
		if r, err := in.kw.Query(uint32(k), 2, keywrite.Plurality); err == nil && r.Status == keywrite.Found && binary.BigEndian.Uint32(r.Data) == uint32(k)*3 {
			a.kwFound++
		}
		if v, err := in.ki.Query(uint32(k), 2); err == nil && v == 1 {
			a.kiExact++
		}
	}
	var values []uint32
	for f := 1; f <= n; f++ {
		for h := 1; h <= 5; h++ {
			values = append(values, uint32(f*10+h))
		}
	}
	tab, err := postcard.NewTable(in.pcl, values)
	if err != nil {
		return a, err
	}
	for f := 1; f <= n; f++ {
		if p, o := in.pc.Query(tab, uint32(f)); o == postcard.Found && p.Len == 5 && p.Hops[4] == uint32(f*10+5) {
			a.pcFound++
		}
	}
	rd, err := in.al.Reader(0)
	if err != nil {
		return a, err
	}
	buf := make([]byte, 4*n)
	for a.alRead < n {
		k, err := rd.Read(buf[4*a.alRead:])
		if err != nil || k == 0 {
			break
		}
		a.alRead += k
	}
	return a, nil
}
