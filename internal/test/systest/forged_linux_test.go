package systest

import (
	"errors"
	"math/rand/v2"
	"net/netip"
	"os"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/dtakit/dtakit/dta"
	"github.com/dtakit/dtakit/reporter"
)

// rawSocket opens a raw IPv4 socket whose datagrams carry their own IP
// header (IPPROTO_RAW implies IP_HDRINCL), so that a test can send
// datagrams from any source address and port. It needs root (CAP_NET_RAW):
// without it the test skips, or fails under DTAKIT_REQUIRE_TOOLS=1 (CI).
func rawSocket(t *testing.T) int {
	t.Helper()
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_RAW, unix.IPPROTO_RAW)
	if err != nil {
		msg := "a raw socket (IPPROTO_RAW) needs root or CAP_NET_RAW"
		if errors.Is(err, unix.EPERM) || errors.Is(err, unix.EACCES) {
			msg += ", which this test does not have"
		}
		if os.Getenv("DTAKIT_REQUIRE_TOOLS") == "1" {
			t.Fatalf("%s: %v (DTAKIT_REQUIRE_TOOLS=1)", msg, err)
		}
		t.Skipf("%s: %v; skipping (run as root; DTAKIT_REQUIRE_TOOLS=1 fails instead)", msg, err)
	}
	t.Cleanup(func() { unix.Close(fd) })
	return fd
}

// TestForgedSourceRawSocket: an off-path sender forges wide reports from a
// victim reporter's address and port (a raw socket on loopback), with a
// session of its own, since it cannot see the victim's: 200 numbered as
// the victim's first reports, sent before them, and 1000 more during the
// victim's stream, one after every second report of the victim, each
// numbered 200 ahead of it (the number of a report the victim sends
// later). The victim streams 2000
// Key-Increments through the translator and collector processes. It must
// finish without stalling, have at least 99 % of its reports confirmed,
// and every report it counts confirmed must be in the collector's memory
// (each key's count-min at least 1: count-min never under-counts). The
// answers to the forged reports reach the victim's ack port, and it
// ignores them (Foreign).
func TestForgedSourceRawSocket(t *testing.T) {
	fd := rawSocket(t)
	const n, early, during = 2000, 200, 1000
	p := start(t, n, 4096)
	report := netip.MustParseAddrPort(p.report)

	var mu sync.Mutex
	unsure := map[uint32]bool{} // keys of reports counted lost or unconfirmed
	rep, err := reporter.New(reporter.Config{
		Translator: report, Local: netip.MustParseAddrPort(p.reporterIP + ":0"),
		Sequenced: true, WideSequence: true,
		OnLoss: func(_ uint32, b []byte, _ dta.Reason) {
			r, err := dta.ParseReport(b)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				t.Errorf("loss of a report that does not parse: %v", err)
				return
			}
			unsure[r.KeyIncrement.Key] = true
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	victim := rep.LocalAddr()

	session := rand.Uint64()
	for session == rep.Session() {
		session = rand.Uint64()
	}
	fb := dta.FrameBuilder{SrcIP: victim.Addr(), DstIP: report.Addr(), SrcPort: victim.Port(), DstPort: report.Port()}
	to := &unix.SockaddrInet4{Addr: report.Addr().As4()}
	var frame []byte
	forge := func(seq uint32) error {
		r := dta.Report{Header: dta.Header{Opcode: dta.OpKeyIncrement, Sequenced: true, Wide: true, Seq: seq, Session: session},
			KeyIncrement: dta.KeyIncrement{Redundancy: 2, Key: 1<<20 + seq, Counter: 1}}
		var err error
		if frame, err = fb.AppendFrame(frame[:0], &r); err != nil {
			return err
		}
		return unix.Sendto(fd, frame[dta.EthernetLen:], 0, to)
	}
	for seq := range uint32(early) {
		if err := forge(seq); err != nil {
			t.Fatalf("forging report %d: %v", seq, err)
		}
	}
	sent := make(chan error, 1)
	begin := time.Now()
	go func() {
		for k := range uint32(n) {
			if err := rep.KeyIncrement(k, 1, 2); err != nil {
				sent <- err
				return
			}
			if k%2 == 1 && k/2 < during {
				if err := forge(k + early); err != nil {
					sent <- err
					return
				}
			}
		}
		sent <- rep.Close()
	}()
	select {
	case err := <-sent:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("the victim stalled: %d reports not sent and closed in 30 s; counters %+v", n, rep.Counters())
	}
	took := time.Since(begin)
	c := rep.Counters()
	t.Logf("victim: %d reports in %v, counters %+v", n, took, c)
	mu.Lock()
	defer mu.Unlock()
	if c.Foreign == 0 {
		t.Errorf("the victim got no answer to the forged reports: were they sent? counters %+v", c)
	}
	if c.Lost+c.Unconfirmed != uint64(len(unsure)) || len(unsure) > n/100 {
		t.Errorf("%d lost and %d unconfirmed, %d keys handed to OnLoss: want at most %d", c.Lost, c.Unconfirmed, len(unsure), n/100)
	}

	checkAcknowledgedCounted(t, p, n, unsure)
}

// checkAcknowledgedCounted: every one of keys 0..n-1 not in unsure (whose
// report was acknowledged) counts at least 1 in the collector's memory.
func checkAcknowledgedCounted(t *testing.T, p *pipeline, n int, unsure map[uint32]bool) {
	keys := make([]uint32, n)
	for k := range keys {
		keys[k] = uint32(k)
	}
	var ki struct {
		Results []struct {
			Key   uint32 `json:"key"`
			Count uint64 `json:"count"`
		} `json:"results"`
	}
	if err := post(p.collHTTP+"/v1/instances/1/keyincrement", map[string]any{"keys": keys}, &ki); err != nil {
		t.Fatal(err)
	}
	if len(ki.Results) != n {
		t.Fatalf("%d results for %d keys", len(ki.Results), n)
	}
	missing := 0
	for _, r := range ki.Results {
		if r.Count == 0 && !unsure[r.Key] {
			if missing++; missing <= 10 {
				t.Errorf("key %d: count 0, its report was acknowledged", r.Key)
			}
		}
	}
	if missing > 0 {
		t.Fatalf("%d of %d acknowledged reports not in the collector's memory", missing, n-len(unsure))
	}
}
