//go:build linux && cgo && rdma

package collector

import (
	"bufio"
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
	kw := keywrite.Layout{Slots: 1 << 12, DataSize: 4}
	err := kw.Validate()
	if err != nil {
		t.Fatal(err)
	}
	ki := keyincr.Layout{Slots: 1 << 10}
	err = ki.Validate()
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

// anyTranslator lets the device tests' translators, on the NIC's netdev
// or a peer's, connect (the default is loopback).
var anyTranslator = []netip.Prefix{netip.MustParsePrefix("0.0.0.0/0"), netip.MustParsePrefix("::/0")}

// runPair serves the four instances with the verbs backend at addr, runs
// the translator process (argv, then its environment assignments), and
// checks every query against what the process reported.
func runPair(t *testing.T, addr netip.Addr, argv ...string) {
	var env []string
	for len(argv) > 0 && strings.Contains(argv[len(argv)-1], "=") {
		env = append(env, argv[len(argv)-1])
		argv = argv[:len(argv)-1]
	}
	c, f := serveFour(t, Config{Addr: netip.AddrPortFrom(addr, 4791), Backend: BackendVerbs, Translators: anyTranslator})
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
	f.check(t)
}

// four is a collector's four instances, as the workload fills them.
type four struct {
	kwl   keywrite.Layout
	kil   keyincr.Layout
	codec *postcard.Codec
	kw    *keywrite.Store
	ki    *keyincr.Store
	pc    *postcard.Store
	al    *appendlist.Store
}

// serveFour starts a collector with cfg and the four instances, serving
// until the test ends.
func serveFour(t *testing.T, cfg Config) (*Collector, *four) {
	t.Helper()
	c, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	f := &four{}
	var all appendlist.Layout
	f.kwl, f.kil, f.codec, all = ioLayouts(t)
	if f.kw, err = c.AddKeyWrite(f.kwl); err != nil {
		t.Fatal(err)
	}
	if f.ki, err = c.AddKeyIncrement(f.kil); err != nil {
		t.Fatal(err)
	}
	if f.pc, err = c.AddPostcard(f.codec.Layout()); err != nil {
		t.Fatal(err)
	}
	if f.al, err = c.AddAppend(all); err != nil {
		t.Fatal(err)
	}
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- c.Serve(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-served; err != nil {
			t.Errorf("Serve: %v", err)
		}
		if err := c.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return c, f
}

// check compares the instances with what the workload wrote.
func (f *four) check(t *testing.T) {
	t.Helper()
	f.checkKeys(t)
	f.checkPostcards(t)
	f.checkAppend(t)
}

// checkKeys compares the Key-Write and Key-Increment instances with the
// model's stores.
func (f *four) checkKeys(t *testing.T) {
	t.Helper()
	// Key-Write and Key-Increment: the NIC-written regions are byte for
	// byte what the stores write for the same reports in the same order.
	mkw, err := keywrite.NewStore(f.kwl, make([]byte, f.kwl.RegionSize()))
	if err != nil {
		t.Fatal(err)
	}
	for k := uint32(1); k <= ioKeys; k++ {
		if err := mkw.Put(k, ioKWData(k), 2); err != nil {
			t.Fatal(err)
		}
	}
	if !bytes.Equal(mkw.Region(), f.kw.Region()) {
		t.Error("the Key-Write region differs from the model's")
	}
	mki, err := keyincr.NewStore(f.kil, make([]byte, f.kil.RegionSize()))
	if err != nil {
		t.Fatal(err)
	}
	for k := uint32(1); k <= ioCounts; k++ {
		if err := mki.Add(k, uint64(k), 2); err != nil {
			t.Fatal(err)
		}
	}
	if !bytes.Equal(mki.Region(), f.ki.Region()) {
		t.Error("the Key-Increment region differs from the model's")
	}
	found := 0
	for k := uint32(1); k <= ioKeys; k++ {
		if r, err := f.kw.Query(k, 2, keywrite.Plurality); err == nil && r.Status == keywrite.Found && bytes.Equal(r.Data, ioKWData(k)) {
			found++
		}
	}
	if found < ioKeys*98/100 {
		t.Errorf("%d of %d Key-Write keys found", found, ioKeys)
	}
}

// checkPostcards checks every flow's path, complete.
func (f *four) checkPostcards(t *testing.T) {
	t.Helper()
	var values []uint32
	for fl := uint32(1); fl <= ioFlows; fl++ {
		for h := uint32(1); h <= ioHops; h++ {
			values = append(values, ioPCValue(fl, h))
		}
	}
	tab, err := postcard.NewTable(f.codec.Layout(), values)
	if err != nil {
		t.Fatal(err)
	}
	for fl := uint32(1); fl <= ioFlows; fl++ {
		p, o := f.pc.Query(tab, fl)
		if o != postcard.Found || p.Len != ioHops {
			t.Errorf("flow %d: %v, %d hops", fl, o, p.Len)
			continue
		}
		for h := range ioHops {
			if p.Hops[h] != ioPCValue(fl, uint32(h+1)) {
				t.Errorf("flow %d hop %d: %d", fl, h+1, p.Hops[h])
			}
		}
	}
}

// checkAppend checks every entry of every list, in order.
func (f *four) checkAppend(t *testing.T) {
	t.Helper()
	for l := uint32(0); l < ioLists; l++ {
		rd, err := f.al.Reader(l)
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

// TestInteropTranslatorChild is the translator process of the tests above;
// it runs only as that process.
func TestInteropTranslatorChild(t *testing.T) {
	if os.Getenv("DTAKIT_INTEROP_CHILD") == "" {
		t.Skip("helper process of the Device interop tests")
	}
	coll := netip.MustParseAddr(os.Getenv("DTAKIT_INTEROP_COLLECTOR"))
	local := netip.MustParseAddr(os.Getenv("DTAKIT_INTEROP_LOCAL"))
	runTranslator(t, translator.Config{
		ReportAddr: netip.MustParseAddrPort("127.0.0.1:0"),
		// RoCEv2 answers go to port 4791 whatever the request's source port.
		Local: netip.AddrPortFrom(local, 4791),
		// The VM emulates its CPUs: Soft-RoCE's round trips reach tens of
		// milliseconds on a busy host, and the default 10 ms would resend
		// the whole ring again and again (see the closing note of the
		// session that wrote this).
		AckTimeout: 100 * time.Millisecond,
		Collectors: []netip.AddrPort{netip.AddrPortFrom(coll, 4791)},
		Verbs:      os.Getenv("DTAKIT_INTEROP_VERBS") != "",
	})
}

// runTranslator runs a translator with cfg, sends it the workload through a
// reporter, and checks that it applied and flushed every report.
func runTranslator(t *testing.T, cfg translator.Config) {
	t.Helper()
	cfg.AckPort = freeAckPort(t)
	tr, err := translator.New(cfg)
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
	// Wide numbers: each report is acknowledged once applied (with the
	// verbs backend, once the NIC completed its work requests).
	rep, err := reporter.New(reporter.Config{Translator: tr.ReportAddr(), AckPort: cfg.AckPort})
	if err != nil {
		t.Fatal(err)
	}
	sent := 0
	// Paced well below what either end can take. With the cores starved
	// a queue may still fill: a report that meets it is NACKed busy and
	// resent, and the translator counts why (RingFull, checked below).
	pace := func() {
		if sent++; sent%16 == 0 {
			if err := rep.Flush(); err != nil {
				t.Fatal(err)
			}
			time.Sleep(4 * time.Millisecond)
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
			must(t, rep.Postcard(f, postcard.Hop(h), ioHops, postcard.Value(ioPCValue(f, h))))
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
	rc := rep.Counters()
	if rc.Lost+rc.Unconfirmed != 0 || rc.Acks == 0 {
		t.Errorf("reporter counters %+v: want every report acknowledged", rc)
	}
	// The translator also counts Close's copies of the last report, which
	// it drops as duplicates, and resends.
	want := uint64(ioKeys+ioCounts+ioFlows*ioHops+ioLists*ioPerList) + rc.Probes + rc.Resent
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
	// Datagrams for a QP already closed (late duplicate ACKs of
	// retransmissions) count as BadRoCE: check it before Close.
	if c := tr.Counters(); c.BadRoCE != 0 {
		t.Errorf("%d RoCEv2 datagrams did not decode or matched no QP", c.BadRoCE)
	}
	if err := tr.Close(10 * time.Second); err != nil {
		t.Fatalf("Close (flush, wait for every ACK): %v", err)
	}
	c := tr.Counters()
	t.Logf("translator counters: %+v", c)
	if c.Dropped+c.Rejected+c.Malformed+c.Lost+c.FlushLost+c.BadICRC+c.EncodeErrors+c.VerbsErrors != 0 ||
		c.AccessNAKs+c.InvalidNAKs+c.OtherNAKs != 0 {
		t.Fatalf("reports or packets lost or refused: %+v", c)
	}
	// The only refusal allowed is flow control: each NACK for a full
	// queue, and the reporter resent each (it counts none lost above).
	if c.NACKs != c.RingFull || rc.Resent < c.NACKs {
		t.Fatalf("%d reports NACKed, %d for a full queue, %d resent: %+v", c.NACKs, c.RingFull, rc.Resent, c)
	}
}

// TestDeviceRXERequesterToSoftwareTarget: the kernel's Soft-RoCE as the
// requester (the translator's verbs backend on rxe2) and the software
// target as the responder (a collector process in the peer namespace,
// replying to port 4791 as NICs expect).
func TestDeviceRXERequesterToSoftwareTarget(t *testing.T) {
	env := needInterop(t)
	cmd := exec.Command("ip", "netns", "exec", env.netns, os.Args[0], "-test.run", "^TestInteropCollectorChild$", "-test.v")
	cmd.Env = append(os.Environ(), "DTAKIT_INTEROP_COLLECTOR_CHILD=1", "DTAKIT_INTEROP_ADDR="+env.peer.String())
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = pw, pw
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pw.Close()
	ready := make(chan bool, 1)
	go func() {
		buf := make([]byte, 4096)
		for {
			n, err := pr.Read(buf)
			out.Write(buf[:n])
			if bytes.Contains(out.Bytes(), []byte("COLLECTOR READY")) {
				select {
				case ready <- true:
				default:
				}
			}
			if err != nil {
				ready <- false
				return
			}
		}
	}()
	if !<-ready {
		cmd.Wait()
		t.Fatalf("collector process did not start:\n%s", out.String())
	}
	runTranslator(t, translator.Config{
		ReportAddr: netip.MustParseAddrPort("127.0.0.1:0"),
		Local:      netip.AddrPortFrom(env.collector, 0),
		Collectors: []netip.AddrPort{netip.AddrPortFrom(env.peer, 4791)},
		Verbs:      true,
	})
	stdin.Write([]byte("check\n"))
	stdin.Close()
	err = cmd.Wait()
	t.Logf("collector process:\n%s", out.String())
	if err != nil {
		t.Fatalf("collector process: %v", err)
	}
}

// TestInteropCollectorChild is the collector process of the test above: a
// software collector that serves the four instances until its standard
// input says to check them.
func TestInteropCollectorChild(t *testing.T) {
	if os.Getenv("DTAKIT_INTEROP_COLLECTOR_CHILD") == "" {
		t.Skip("helper process of TestDeviceRXERequesterToSoftwareTarget")
	}
	addr := netip.MustParseAddr(os.Getenv("DTAKIT_INTEROP_ADDR"))
	c, f := serveFour(t, Config{Addr: netip.AddrPortFrom(addr, 4791), ReplyPort: 4791, Translators: anyTranslator})
	fmt.Println("COLLECTOR READY")
	if _, err := bufio.NewReader(os.Stdin).ReadString('\n'); err != nil {
		t.Fatalf("waiting for the translator: %v", err)
	}
	t.Logf("target counters: %+v", c.Counters())
	f.check(t)
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
