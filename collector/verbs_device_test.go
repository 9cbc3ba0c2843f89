//go:build linux && cgo

package collector

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/dtakit/dtakit/appendlist"
	"github.com/dtakit/dtakit/keyincr"
	"github.com/dtakit/dtakit/keywrite"
	"github.com/dtakit/dtakit/postcard"
	"github.com/dtakit/dtakit/reporter"
	"github.com/dtakit/dtakit/translator"
	"github.com/dtakit/dtakit/verbs"
)

// The interop tests run a software translator (its own RoCEv2 and CM,
// package translator) in .ci/rxe-vm's "peer" network namespace, against a
// collector whose regions the kernel's Soft-RoCE serves through package
// verbs: two independent RoCEv2 stacks. They need that VM (DTAKIT_RXE=1),
// or a host set up the same way (DTAKIT_VERBS_PEER_NETNS, _ADDR and
// _PEER_ADDR naming a namespace without rxe and the two addresses; the
// verbs-to-verbs test runs both ends at DTAKIT_VERBS_ADDR).

type interopEnv struct {
	netns           string
	collector, peer netip.Addr
}

func needInterop(t *testing.T) interopEnv {
	t.Helper()
	if _, err := verbs.Devices(); err != nil {
		if os.Getenv("DTAKIT_RXE") != "" {
			t.Fatalf("no RDMA device inside the rxe VM: %v", err)
		}
		t.Skipf("no RDMA device (%v): run with .ci/rxe-vm, or on a Soft-RoCE host (see README)", err)
	}
	e := interopEnv{netns: os.Getenv("DTAKIT_VERBS_PEER_NETNS")}
	c, p := os.Getenv("DTAKIT_VERBS_ADDR"), os.Getenv("DTAKIT_VERBS_PEER_ADDR")
	if e.netns == "" && os.Getenv("DTAKIT_RXE") != "" {
		e.netns, c, p = "peer", "10.78.0.1", "10.78.0.2" // .ci/rxe-vm's rxe2 and its peer
	}
	if e.netns == "" || c == "" || p == "" {
		t.Skip("set DTAKIT_VERBS_PEER_NETNS, DTAKIT_VERBS_ADDR and DTAKIT_VERBS_PEER_ADDR (a namespace without rxe that reaches the RDMA netdev's address)")
	}
	e.collector, e.peer = netip.MustParseAddr(c), netip.MustParseAddr(p)
	return e
}

// The workload both processes derive: what the child reports and the parent
// checks.
const (
	ioKeys    = 500
	ioCounts  = 200
	ioFlows   = 50
	ioHops    = 5
	ioLists   = 4
	ioPerList = 32
)

func ioKWData(k uint32) []byte     { return binary.BigEndian.AppendUint32(nil, k*7+1) }
func ioPCValue(f, h uint32) uint32 { return f*100 + h }
func ioEntry(l, i uint32) []byte   { return binary.BigEndian.AppendUint32(nil, l<<16|i+1) }

func ioLayouts(t *testing.T) (keywrite.Layout, keyincr.Layout, *postcard.Codec, appendlist.Layout) {
	kw, err := keywrite.NewLayout(1<<12, 4)
	if err != nil {
		t.Fatal(err)
	}
	ki, err := keyincr.NewLayout(1 << 10)
	if err != nil {
		t.Fatal(err)
	}
	pc, err := postcard.NewCodec(postcard.Layout{Hops: ioHops, Chunks: 1 << 10})
	if err != nil {
		t.Fatal(err)
	}
	al := appendlist.Layout{Lists: ioLists, Entries: 64, EntrySize: 4, Batch: 4, Markers: true}
	return kw, ki, pc, al
}

func TestDeviceSoftwareTranslatorToVerbsCollector(t *testing.T) {
	env := needInterop(t)
	runPair(t, env.collector, "ip", "netns", "exec", env.netns, os.Args[0], "-test.run", "^TestInteropTranslatorChild$", "-test.v",
		"DTAKIT_INTEROP_LOCAL="+env.peer.String())
}

// TestDeviceVerbsTranslatorToVerbsCollector: the translator's verbs
// backend (the NIC runs its connections) writes into a verbs collector, in
// two processes on one device.
func TestDeviceVerbsTranslatorToVerbsCollector(t *testing.T) {
	needInterop(t)
	a := os.Getenv("DTAKIT_VERBS_ADDR")
	if a == "" {
		a = "10.77.0.2" // .ci/rxe-vm's rxe1, both ends on it
	}
	addr := netip.MustParseAddr(a)
	runPair(t, addr, os.Args[0], "-test.run", "^TestInteropTranslatorChild$", "-test.v",
		"DTAKIT_INTEROP_LOCAL="+addr.String(), "DTAKIT_INTEROP_VERBS=1")
}

// runPair serves the four instances with the verbs backend at addr, runs
// the translator process (argv, then its environment assignments), and
// checks every query against what the process reported.
func runPair(t *testing.T, addr netip.Addr, argv ...string) {
	var env []string
	for len(argv) > 0 && strings.Contains(argv[len(argv)-1], "=") {
		env = append(env, argv[len(argv)-1])
		argv = argv[:len(argv)-1]
	}
	c, err := New(Config{Addr: netip.AddrPortFrom(addr, 4791), Backend: BackendVerbs})
	if err != nil {
		t.Fatal(err)
	}
	kwl, kil, codec, all := ioLayouts(t)
	kw, err := c.AddKeyWrite(kwl)
	if err != nil {
		t.Fatal(err)
	}
	ki, err := c.AddKeyIncrement(kil)
	if err != nil {
		t.Fatal(err)
	}
	pc, err := c.AddPostcard(codec)
	if err != nil {
		t.Fatal(err)
	}
	al, err := c.AddAppend(all)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- c.Serve(ctx) }()
	defer func() {
		cancel()
		if err := <-served; err != nil {
			t.Errorf("Serve: %v", err)
		}
		if err := c.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	}()

	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(append(os.Environ(), "DTAKIT_INTEROP_CHILD=1", "DTAKIT_INTEROP_COLLECTOR="+addr.String()), env...)
	out, err := cmd.CombinedOutput()
	t.Logf("translator process:\n%s", out)
	vc := c.VerbsCounters()
	t.Logf("verbs backend: %+v", vc)
	if err != nil {
		t.Fatalf("translator process: %v", err)
	}
	if vc.Connections < 4 || vc.Advertisements < 4 || vc.Errors != 0 {
		t.Errorf("verbs counters %+v: want 4 connections and advertisements, no errors", vc)
	}

	// Key-Write and Key-Increment: the NIC-written regions are byte for
	// byte what the stores write for the same reports in the same order.
	mkw, err := keywrite.NewStore(kwl, make([]byte, kwl.RegionSize()))
	if err != nil {
		t.Fatal(err)
	}
	for k := uint32(1); k <= ioKeys; k++ {
		if err := mkw.Put(k, ioKWData(k), 2); err != nil {
			t.Fatal(err)
		}
	}
	if !bytes.Equal(mkw.Region(), kw.Region()) {
		t.Error("the Key-Write region differs from the model's")
	}
	mki, err := keyincr.NewStore(kil, make([]byte, kil.RegionSize()))
	if err != nil {
		t.Fatal(err)
	}
	for k := uint32(1); k <= ioCounts; k++ {
		if err := mki.Add(k, uint64(k), 2); err != nil {
			t.Fatal(err)
		}
	}
	if !bytes.Equal(mki.Region(), ki.Region()) {
		t.Error("the Key-Increment region differs from the model's")
	}
	found := 0
	for k := uint32(1); k <= ioKeys; k++ {
		if r, err := kw.Query(k, 2, keywrite.Plurality); err == nil && r.Status == keywrite.Found && bytes.Equal(r.Data, ioKWData(k)) {
			found++
		}
	}
	if found < ioKeys*98/100 {
		t.Errorf("%d of %d Key-Write keys found", found, ioKeys)
	}

	// Postcarding: every flow's path, complete.
	var values []uint32
	for f := uint32(1); f <= ioFlows; f++ {
		for h := uint32(1); h <= ioHops; h++ {
			values = append(values, ioPCValue(f, h))
		}
	}
	tab, err := postcard.NewTable(codec, values)
	if err != nil {
		t.Fatal(err)
	}
	for f := uint32(1); f <= ioFlows; f++ {
		p, o := pc.Query(tab, f)
		if o != postcard.Found || p.Len != ioHops {
			t.Errorf("flow %d: %v, %d hops", f, o, p.Len)
			continue
		}
		for h := range ioHops {
			if p.Hops[h] != ioPCValue(f, uint32(h+1)) {
				t.Errorf("flow %d hop %d: %d", f, h+1, p.Hops[h])
			}
		}
	}

	// Append: every entry of every list, in order.
	for l := uint32(0); l < ioLists; l++ {
		rd, err := al.Reader(l)
		if err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, 4*ioPerList*2)
		n, err := rd.Read(buf)
		if err != nil || n != ioPerList {
			t.Errorf("list %d: read %d entries, %v; want %d", l, n, err, ioPerList)
			continue
		}
		for i := range uint32(ioPerList) {
			if got := buf[4*i : 4*i+4]; !bytes.Equal(got, ioEntry(l, i)) {
				t.Errorf("list %d entry %d: %x", l, i, got)
			}
		}
	}
}

// TestInteropTranslatorChild is the translator process of the test above;
// it runs only as that process.
func TestInteropTranslatorChild(t *testing.T) {
	if os.Getenv("DTAKIT_INTEROP_CHILD") == "" {
		t.Skip("helper process of TestDeviceSoftwareTranslatorToVerbsCollector")
	}
	coll := netip.MustParseAddr(os.Getenv("DTAKIT_INTEROP_COLLECTOR"))
	local := netip.MustParseAddr(os.Getenv("DTAKIT_INTEROP_LOCAL"))
	tr, err := translator.New(translator.Config{
		ReportAddr: netip.MustParseAddrPort("127.0.0.1:0"),
		// RoCEv2 answers go to port 4791 whatever the request's source port.
		Local:      netip.AddrPortFrom(local, 4791),
		Collectors: []netip.AddrPort{netip.AddrPortFrom(coll, 4791)},
		Verbs:      os.Getenv("DTAKIT_INTEROP_VERBS") != "",
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := tr.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if err := waitReady(tr, 4, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	rep, err := reporter.New(reporter.Config{Translator: tr.ReportAddr()})
	if err != nil {
		t.Fatal(err)
	}
	sent := 0
	pace := func() {
		if sent++; sent%32 == 0 {
			if err := rep.Flush(); err != nil {
				t.Fatal(err)
			}
			time.Sleep(2 * time.Millisecond)
		}
	}
	for k := uint32(1); k <= ioKeys; k++ {
		must(t, rep.KeyWrite(k, ioKWData(k), 2))
		pace()
	}
	for k := uint32(1); k <= ioCounts; k++ {
		must(t, rep.KeyIncrement(k, uint64(k), 2))
		pace()
	}
	for f := uint32(1); f <= ioFlows; f++ {
		for h := uint32(1); h <= ioHops; h++ {
			must(t, rep.Postcard(f, uint8(h), ioPCValue(f, h), ioHops))
			pace()
		}
	}
	for i := range uint32(ioPerList) {
		for l := uint32(0); l < ioLists; l++ {
			must(t, rep.Append(l, ioEntry(l, i), i == ioPerList-1))
			pace()
		}
	}
	must(t, rep.Flush())
	must(t, rep.Close())
	want := uint64(ioKeys + ioCounts + ioFlows*ioHops + ioLists*ioPerList)
	deadline := time.Now().Add(10 * time.Second)
	for {
		c := tr.Counters()
		if got := c.Reports[1] + c.Reports[2] + c.Reports[3] + c.Reports[4]; got == want {
			break
		} else if time.Now().After(deadline) {
			t.Fatalf("the translator received %d of %d reports", got, want)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := tr.Close(10 * time.Second); err != nil {
		t.Fatalf("Close (flush, wait for every ACK): %v", err)
	}
	c := tr.Counters()
	t.Logf("translator counters: %+v", c)
	if c.Dropped+c.NACKs+c.Rejected+c.Malformed+c.Lost+c.FlushLost+c.BadICRC+c.BadRoCE+c.EncodeErrors != 0 ||
		c.AccessNAKs+c.InvalidNAKs+c.OtherNAKs != 0 {
		t.Fatalf("reports or packets lost or refused: %+v", c)
	}
}

func waitReady(tr *translator.Translator, n int, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		ready := 0
		var errs []error
		for _, in := range tr.Instances() {
			if in.Ready {
				ready++
			}
			if in.Err != nil {
				errs = append(errs, fmt.Errorf("instance on port %d (%v): %w", in.Port, in.Primitive, in.Err))
			}
		}
		if ready == n {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d of %d instances ready after %v: %w", ready, n, timeout, errors.Join(errs...))
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
