package collector

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dtakit/dtakit/dta/tofino"
	"github.com/dtakit/dtakit/keyincr"
	"github.com/dtakit/dtakit/keywrite"
	"github.com/dtakit/dtakit/reporter"
	"github.com/dtakit/dtakit/translator"
)

const rfKeys = 3000

func rfLayouts(t *testing.T) (keywrite.Layout, keyincr.Layout) {
	kw := keywrite.Layout{Slots: 1 << 14, DataSize: 8}
	err := kw.Validate()
	if err != nil {
		t.Fatal(err)
	}
	ki := keyincr.Layout{Slots: 1 << 12}
	err = ki.Validate()
	if err != nil {
		t.Fatal(err)
	}
	return kw, ki
}

func rfData(k uint32) []byte { return binary.BigEndian.AppendUint64(nil, uint64(k)*0x9E3779B1) }

// TestRegionFileSurvivesKill9: a collector process whose regions are files
// is killed with SIGKILL after a translator in another process had every
// report acknowledged; restarted on the same files, it has every byte.
func TestRegionFileSurvivesKill9(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("file-backed regions need Linux")
	}
	dir := t.TempDir()
	child := func(mode string) *exec.Cmd {
		cmd := exec.Command(os.Args[0], "-test.run", "^TestRegionFileChild$", "-test.v")
		cmd.Env = append(os.Environ(), "DTAKIT_REGION_CHILD="+mode, "DTAKIT_REGION_DIR="+dir)
		return cmd
	}
	srv := child("serve")
	out, err := srv.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	srv.Stderr = os.Stderr
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	defer srv.Process.Kill()
	var addr netip.AddrPort
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		if a, ok := strings.CutPrefix(sc.Text(), "COLLECTOR "); ok {
			addr = netip.MustParseAddrPort(a)
			break
		}
	}
	if !addr.IsValid() {
		t.Fatal("the collector process did not start")
	}
	go func() {
		for sc.Scan() {
		}
	}()

	ackPort := freeAckPort(t)
	tr, err := translator.New(translator.Config{ReportAddr: netip.MustParseAddrPort("127.0.0.1:0"), Collectors: []netip.AddrPort{addr}, AckPort: ackPort})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := tr.Start(ctx); err != nil {
		t.Fatal(err)
	}
	// Confirmed delivery (the zero value): under load the kernel may drop
	// a report, which is then resent rather than missing from the check.
	rep, err := reporter.New(reporter.Config{Translator: tr.ReportAddr(), AckPort: ackPort})
	if err != nil {
		t.Fatal(err)
	}
	for k := uint32(1); k <= rfKeys; k++ {
		must(t, rep.KeyWrite(k, rfData(k), 2))
		must(t, rep.KeyIncrement(k, uint64(k), 2))
		if k%16 == 0 {
			must(t, rep.Flush())
			time.Sleep(time.Millisecond)
		}
	}
	must(t, rep.Flush())
	must(t, rep.Close())
	if c := rep.Counters(); c.Lost+c.Unconfirmed != 0 {
		t.Fatalf("reporter: %d lost, %d unconfirmed of %d reports", c.Lost, c.Unconfirmed, 2*rfKeys)
	}
	deadline := time.Now().Add(10 * time.Second)
	for c := tr.Counters(); c.Reports[1]+c.Reports[3] < 2*rfKeys; c = tr.Counters() {
		if time.Now().After(deadline) {
			t.Fatalf("the translator received %d of %d reports", c.Reports[1]+c.Reports[3], 2*rfKeys)
		}
		time.Sleep(5 * time.Millisecond)
	}
	if err := tr.Close(10 * time.Second); err != nil { // every write acknowledged
		t.Fatal(err)
	}
	if c := tr.Counters(); c.Dropped+c.Lost+c.Rejected != 0 {
		t.Fatalf("translator counters %+v: reports not applied", c)
	}
	if err := srv.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	srv.Wait()

	check := child("check")
	if b, err := check.CombinedOutput(); err != nil {
		t.Fatalf("the restarted collector: %v\n%s", err, b)
	}
}

// TestRegionFileChild is the collector process of the test above.
func TestRegionFileChild(t *testing.T) {
	mode := os.Getenv("DTAKIT_REGION_CHILD")
	if mode == "" {
		t.Skip("helper process of TestRegionFileSurvivesKill9")
	}
	kwl, kil := rfLayouts(t)
	c, err := New(Config{Addr: netip.MustParseAddrPort("127.0.0.1:0"), RegionDir: os.Getenv("DTAKIT_REGION_DIR")})
	if err != nil {
		t.Fatal(err)
	}
	kw, err := c.AddKeyWrite(kwl)
	if err != nil {
		t.Fatal(err)
	}
	ki, err := c.AddKeyIncrement(kil)
	if err != nil {
		t.Fatal(err)
	}
	ins := c.Instances()
	if mode == "serve" {
		if ins[0].Restored || ins[1].Restored {
			t.Fatal("fresh region files reported as restored")
		}
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		os.Stdout.WriteString("COLLECTOR " + c.Addr().String() + "\n")
		c.Serve(context.Background()) // until killed
		return
	}
	if !ins[0].Restored || !ins[1].Restored {
		t.Fatalf("instances %+v: want both restored", ins)
	}
	mkw, _ := keywrite.NewStore(kwl, make([]byte, kwl.RegionSize()))
	mki, _ := keyincr.NewStore(kil, make([]byte, kil.RegionSize()))
	for k := uint32(1); k <= rfKeys; k++ {
		must(t, mkw.Put(k, rfData(k), 2))
		must(t, mki.Add(k, uint64(k), 2))
	}
	if !bytes.Equal(kw.Region(), mkw.Region()) {
		t.Error("the Key-Write region after the restart differs from the reports applied")
	}
	if !bytes.Equal(ki.Region(), mki.Region()) {
		t.Error("the Key-Increment region after the restart differs from the reports applied")
	}
	c.Close()
	// Another layout on the same files is refused.
	c2, err := New(Config{Addr: netip.MustParseAddrPort("127.0.0.1:0"), RegionDir: os.Getenv("DTAKIT_REGION_DIR")})
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	// The same size, another addressing: only the recorded layout tells.
	other := keywrite.Layout{Slots: 1 << 14, DataSize: 8, Hasher: tofino.Reference}
	err = other.Validate()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c2.AddKeyWrite(other); !errors.Is(err, ErrRegion) {
		t.Errorf("another layout on instance 0's file: %v, want ErrRegion", err)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
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
