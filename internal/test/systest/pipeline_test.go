package systest

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/dtakit/dtakit/dta"
	"github.com/dtakit/dtakit/internal/app/stream"
	"github.com/dtakit/dtakit/internal/test/proctest"
	"github.com/dtakit/dtakit/keywrite"
	"github.com/dtakit/dtakit/postcard"
	"github.com/dtakit/dtakit/reporter"
)

// pipeline is the three daemons' addresses and the stream sent.
type pipeline struct {
	coll, tr         *proctest.Proc
	collHTTP, trHTTP string
	report, roce     string
	reporterIP       string
	st               stream.Synthetic
	n                int // reports sent
	kwSlots, kiSlots uint64
	chunks, entries  int
	dtareport        string
	collBin, trBin   string
	collArgs, trArgs []string
	repArgs          []string // more dtareport flags
}

func binaries(t testing.TB) (coll, tr, rep string) {
	return proctest.Build(t, "github.com/dtakit/dtakit/cmd/dtacollector", "dtacollector"),
		proctest.Build(t, "github.com/dtakit/dtakit/cmd/dtatranslator", "dtatranslator"),
		proctest.Build(t, "github.com/dtakit/dtakit/cmd/dtareport", "dtareport")
}

// start starts the collector (four instances sized for keys keys and n
// reports) and the translator, and waits until the translator is connected.
func start(t testing.TB, n, keys int) *pipeline { return startWith(t, n, keys, "") }

// startWith is start with the collector's regions backed by files in
// regionDir when it is not empty.
func startWith(t testing.TB, n, keys int, regionDir string) *pipeline {
	// A shard per core; the default ring, so that the translator refuses
	// reports now and then and the NACK path runs too.
	return startConfigured(t, n, keys, options{regionDir: regionDir, trConfig: `{"ring_size": 1024, "shards": 2}`})
}

// options are how the pipeline is configured beyond its instances.
type options struct {
	regionDir string // backs the collector's regions with files there
	// trConfig is the translator's configuration file, none (every
	// default) when empty; collConfig more fields of the collector's
	// ("\"shards\": 1, "), after its instances' geometry.
	trConfig, collConfig string
	// profile, when not empty, is a directory each program writes a CPU
	// profile into (collector.pprof, translator.pprof, report.pprof: the
	// collector's only once stopped with SIGTERM).
	profile string
}

// startConfigured is start configured by o.
func startConfigured(t testing.TB, n, keys int, o options) *pipeline {
	regionDir, trConfig, profile := o.regionDir, o.trConfig, o.profile
	collBin, trBin, repBin := binaries(t)
	p := &pipeline{
		collHTTP: fmt.Sprintf("127.0.0.1:%d", proctest.FreePort(t, "tcp")),
		trHTTP:   fmt.Sprintf("127.0.0.1:%d", proctest.FreePort(t, "tcp")),
		report:   fmt.Sprintf("127.0.0.1:%d", proctest.FreePort(t, "udp")),
		roce:     fmt.Sprintf("127.0.0.1:%d", proctest.FreePort(t, "udp")),
		// The reporter takes NACKs on the DTA ack port of an address of its
		// own, random so that runs side by side do not collide.
		reporterIP: fmt.Sprintf("127.%d.%d.%d", 100+rand.IntN(100), rand.IntN(256), 1+rand.IntN(250)),
		st:         stream.Default,
		n:          n,
		kwSlots:    1 << 18, kiSlots: 1 << 16, chunks: 1 << 16,
		dtareport: repBin, collBin: collBin, trBin: trBin,
	}
	p.st.Keys = keys
	perList := n/len(p.st.Mix)/p.st.Lists + 1
	p.entries = 1
	for p.entries < perList+64 {
		p.entries *= 2
	}
	values := make([]string, p.st.Universe)
	for i := range values {
		values[i] = strconv.Itoa(i + 1)
	}
	cmPort := 43000 + os.Getpid()%1000
	cfg := fmt.Sprintf(`{%s"addr": %q, "http": %q, "cm_port": %d, "region_dir": %q, "instances": [
		{"primitive": "keywrite", "slots": %d, "data_size": 4, "redundancy": 2},
		{"primitive": "keyincrement", "slots": %d, "redundancy": 2},
		{"primitive": "postcard", "hops": %d, "chunks": %d, "copies": 2, "values": [%s]},
		{"primitive": "append", "lists": %d, "entries": %d, "entry_size": %d, "batch": 16, "markers": true}]}`,
		o.collConfig, p.roce, p.collHTTP, cmPort, regionDir, p.kwSlots, p.kiSlots, p.st.Hops, p.chunks, strings.Join(values, ","),
		p.st.Lists, p.entries, p.st.EntrySize)
	file := filepath.Join(t.TempDir(), "collector.json")
	if err := os.WriteFile(file, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	p.collArgs = []string{"-config", file}
	if profile != "" {
		p.collArgs = append(p.collArgs, "-cpuprofile", filepath.Join(profile, "collector.pprof"))
		p.repArgs = []string{"-cpuprofile", filepath.Join(profile, "report.pprof")}
	}
	p.startCollector(t)
	p.trArgs = []string{"-report", p.report, "-collectors", p.roce, "-cm-port", strconv.Itoa(cmPort), "-http", p.trHTTP, "-drain", "10s"}
	if trConfig != "" {
		trFile := filepath.Join(t.TempDir(), "translator.json")
		if err := os.WriteFile(trFile, []byte(trConfig), 0o644); err != nil {
			t.Fatal(err)
		}
		p.trArgs = append([]string{"-config", trFile}, p.trArgs...)
	}
	if profile != "" {
		p.trArgs = append(p.trArgs, "-cpuprofile", filepath.Join(profile, "translator.pprof"))
	}
	p.startTranslator(t)
	return p
}

// startCollector starts the collector and waits until it serves.
func (p *pipeline) startCollector(t testing.TB) {
	p.coll = proctest.Start(t, p.collBin, p.collArgs...)
	proctest.WaitFor(t, "the collector to serve", 10*time.Second, func() bool { return get(p.collHTTP+"/healthz", nil) == nil }, p.coll)
}

// startTranslator starts the translator and waits until its four
// instances are connected.
func (p *pipeline) startTranslator(t testing.TB) {
	p.tr = proctest.Start(t, p.trBin, p.trArgs...)
	p.waitConnected(t)
}

func (p *pipeline) waitConnected(t testing.TB) {
	proctest.WaitFor(t, "the translator to connect its four instances", 20*time.Second, func() bool {
		var st struct {
			Instances []struct {
				Ready bool `json:"ready"`
			} `json:"instances"`
		}
		if get(p.trHTTP+"/v1/translator", &st) != nil || len(st.Instances) != 4 {
			return false
		}
		for _, in := range st.Instances {
			if !in.Ready {
				return false
			}
		}
		return true
	}, p.coll, p.tr)
}

// get GETs http://url into v.
func get(url string, v any) error { return proctest.GetJSON("http://"+url, v) }

func post(url string, body, v any) error {
	b, err := json.Marshal(body)
	if err != nil {
		return err
	}
	resp, err := http.Post("http://"+url, "application/json", bytes.NewReader(b))
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s", url, resp.Status)
	}
	return json.NewDecoder(resp.Body).Decode(v)
}

// reportResult is dtareport's output.
type reportResult struct {
	Reports  int     `json:"reports"`
	Rate     float64 `json:"reports_per_second"`
	Counters struct {
		Datagrams, Resent, NACKs, Lost, Unconfirmed, Errors, Acks, Waits, Backoffs, GaveUp, Unknown, ResendAcks, Retimed, Superseded uint64
	} `json:"counters"`
}

// send runs dtareport to the end and returns what it printed; it must
// exit 0.
func (p *pipeline) send(t testing.TB) reportResult {
	wait := p.sendAsync(t, "")
	res, code, logs := wait()
	if code != 0 {
		t.Errorf("dtareport: exit %d: %+v\n%s", code, res, logs)
	}
	return res
}

// sendAsync starts dtareport, with -losses losses when not empty, and
// returns a function that waits for it to end and returns what it printed,
// its exit status and its standard error.
func (p *pipeline) sendAsync(t testing.TB, losses string) func() (reportResult, int, string) {
	args := []string{"-translator", p.report, "-local", p.reporterIP + ":0", "-nacks",
		"-count", strconv.Itoa(p.n), "-keys", strconv.Itoa(p.st.Keys), "-seed", strconv.FormatUint(p.st.Seed, 10)}
	if losses != "" {
		args = append(args, "-losses", losses)
	}
	args = append(args, p.repArgs...)
	cmd := exec.Command(p.dtareport, args...)
	var out, logs bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &logs
	proctest.DieWithTest(cmd)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	return func() (reportResult, int, string) {
		err := cmd.Wait()
		var exit *exec.ExitError
		if err != nil && !errors.As(err, &exit) {
			t.Fatal(err)
		}
		var res reportResult
		if jerr := json.Unmarshal(out.Bytes(), &res); jerr != nil {
			t.Fatalf("dtareport: %v, output %q\n%s", err, out.String(), logs.String())
		}
		return res, cmd.ProcessState.ExitCode(), logs.String()
	}
}

// stop ends the translator with SIGTERM, which flushes its cached
// postcards and partial Append batches and waits until every RDMA
// operation is acknowledged; it must exit 0.
func (p *pipeline) stop(t testing.TB) {
	if err := p.tr.Cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- p.tr.Cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("translator: %v\n%s", err, p.tr.Logs())
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("translator did not stop\n%s", p.tr.Logs())
	}
}

// check queries every key through the collector's HTTP API and compares
// with what the stream sent. lost holds the reports (by stream index) the
// reporter counted lost or unconfirmed: each of those may or may not have
// been applied; every other one was acknowledged and must be there once.
func (p *pipeline) check(t testing.TB, lost map[int]bool) {
	c := &checker{p: p, lost: lost, perOp: make(map[dta.Opcode]int)}
	st := &p.st
	for i := range p.n {
		c.perOp[st.Mix[i%len(st.Mix)]]++
	}
	c.keys = make([]uint32, st.Keys)
	for k := range c.keys {
		c.keys[k] = uint32(k)
	}
	kwShared := c.keyWrite(t)
	c.keyIncrement(t)
	c.postcard(t, kwShared)
	c.append(t)
}

// checker is what check compares the collector's answers with: the
// stream, the reports lost or unconfirmed, the reports per primitive and
// the keys.
type checker struct {
	p     *pipeline
	lost  map[int]bool
	perOp map[dta.Opcode]int
	keys  []uint32
}

// at returns the stream index of the j-th report of op (each primitive is
// once in the mix).
func (c *checker) at(op dta.Opcode, j int) int {
	st := &c.p.st
	return j*len(st.Mix) + slices.Index(st.Mix, op)
}

// queryResult is the collector's answer to a batch query.
type queryResult struct {
	Results []struct {
		Key    uint32   `json:"key"`
		Status string   `json:"status"`
		Data   string   `json:"data"`
		Count  uint64   `json:"count"`
		Path   []uint32 `json:"path"`
	} `json:"results"`
}

// keyWrite checks the Key-Write keys and returns how many were not read
// back because every copy collided.
func (c *checker) keyWrite(t testing.TB) (kwShared int) {
	p, st, K, keys := c.p, &c.p.st, c.p.st.Keys, c.keys
	lost, perOp := c.lost, c.perOp
	// Key-Write: key k's j-th report (j mod K = k) has data Value(k, j / K).
	// Its data is the last acknowledged report's, or a later lost one's,
	// unless every copy's slot is shared with another key (collided).
	var kw queryResult
	if err := post(p.collHTTP+"/v1/instances/0/keywrite", map[string]any{"keys": keys}, &kw); err != nil {
		t.Fatal(err)
	}
	nKW, bad := perOp[dta.OpKeyWrite], 0
	kwl := keywrite.Layout{Slots: p.kwSlots, DataSize: 4}
	kwUsers := map[uint64]int{}
	for _, k := range keys {
		for n := range st.Redundancy {
			kwUsers[kwl.Slot(k, uint8(n))]++
		}
	}
	kwCollided := func(k uint32) bool {
		for n := range st.Redundancy {
			if kwUsers[kwl.Slot(k, uint8(n))] == 1 {
				return false
			}
		}
		return true
	}
	for _, r := range kw.Results {
		k, ok := int(r.Key), false
		for j := (nKW-1-k)/K*K + k; j >= 0 && !ok; j -= K {
			var want [4]byte
			binary.BigEndian.PutUint32(want[:], st.Value(k, j/K))
			ok = r.Status == "found" && r.Data == hex.EncodeToString(want[:])
			if !lost[c.at(dta.OpKeyWrite, j)] {
				break // acknowledged: no earlier report may show
			}
		}
		switch {
		case ok:
		case kwCollided(r.Key):
			kwShared++
		default:
			if bad++; bad <= 5 {
				t.Errorf("Key-Write: key %d: %s %q, its last acknowledged report not there, a copy's slot its own", k, r.Status, r.Data)
			}
		}
	}
	if bad > 0 {
		t.Errorf("Key-Write: %d of %d keys wrong (%d more collided)", bad, K, kwShared)
	}
	return kwShared
}

// keyIncrement checks the Key-Increment counts.
func (c *checker) keyIncrement(t testing.TB) {
	p, K, keys := c.p, c.p.st.Keys, c.keys
	lost, perOp := c.lost, c.perOp
	// Key-Increment: each report adds 1; count-min never under-counts, so
	// a count below the acknowledged reports is a report lost after its
	// acknowledgement, and one above all those sent, beyond collisions, a
	// report applied twice. At load 2K/slots allow 1 % of keys over.
	var ki queryResult
	if err := post(p.collHTTP+"/v1/instances/1/keyincrement", map[string]any{"keys": keys}, &ki); err != nil {
		t.Fatal(err)
	}
	nKI, over := perOp[dta.OpKeyIncrement], 0
	for _, r := range ki.Results {
		k := int(r.Key)
		var acked, sent uint64
		for j := k; j < nKI; j += K {
			sent++
			if !lost[c.at(dta.OpKeyIncrement, j)] {
				acked++
			}
		}
		if r.Count < acked {
			t.Fatalf("Key-Increment: key %d counts %d, %d reports acknowledged: acknowledged reports lost", k, r.Count, acked)
		}
		if r.Count > sent {
			over++
		}
	}
	if over > K/100 {
		t.Errorf("Key-Increment: %d of %d keys over-counted", over, K)
	}
}

// postcard checks the Postcarding paths (kwShared for the log line).
func (c *checker) postcard(t testing.TB, kwShared int) {
	p, st, K, keys := c.p, &c.p.st, c.p.st.Keys, c.keys
	lost, perOp := c.lost, c.perOp
	// Postcarding: each round of a flow takes a new path. A flow whose
	// last complete round was acknowledged shows that round's path; one
	// that lost a postcard of it, or has a partial round after it, may
	// show anything. A path found but wrong is an acknowledged round lost,
	// and so is one not found unless every copy of its chunk is shared
	// with another flow (collided).
	var pc queryResult
	nPC := perOp[dta.OpPostcard]
	flows := keys[:min(K, nPC/st.Hops)]
	if err := post(p.collHTTP+"/v1/instances/2/postcard", map[string]any{"keys": flows}, &pc); err != nil {
		t.Fatal(err)
	}
	codec, err := postcard.NewCodec(postcard.Layout{Hops: st.Hops, Chunks: uint32(p.chunks), Copies: 2})
	if err != nil {
		t.Fatal(err)
	}
	users := map[uint32]int{}
	for _, f := range flows {
		for j := range 2 {
			users[codec.ChunkIndex(f, j)]++
		}
	}
	collided := func(f uint32) bool {
		for j := range 2 {
			if users[codec.ChunkIndex(f, j)] == 1 {
				return false
			}
		}
		return true
	}
	missed, excused, shared := 0, 0, 0
	for _, r := range pc.Results {
		f := int(r.Key)
		last := (nPC/st.Hops-1-f)/K*K + f // its last complete round's place
		unsure := nPC%st.Hops != 0 && (nPC/st.Hops)%K == f
		for h := range st.Hops {
			unsure = unsure || lost[c.at(dta.OpPostcard, last*st.Hops+h)]
		}
		ok := r.Status == "found" && len(r.Path) == st.Hops
		for h := 0; ok && h < st.Hops; h++ {
			ok = r.Path[h] == st.PostcardValue(f, h, last/K)
		}
		switch {
		case ok:
		case unsure:
			excused++
		case r.Status == "found":
			t.Errorf("Postcarding: flow %d shows %v, not its last round (%d), acknowledged", f, r.Path, last/K)
		case collided(r.Key):
			shared++
		default:
			if missed++; missed <= 5 {
				t.Errorf("Postcarding: flow %d: %s, its last round (%d) acknowledged and a copy of its chunk its own", f, r.Status, last/K)
			}
		}
	}
	if missed > 0 {
		t.Errorf("Postcarding: %d of %d paths acknowledged not found (%d more with a lost postcard, %d more collided)", missed, len(flows), excused, shared)
	}
	t.Logf("excused: %d of %d Key-Write keys and %d of %d flows not read back, every copy collided; %d flows with a lost postcard", kwShared, K, shared, len(flows), excused)
}

// append checks the Append lists.
func (c *checker) append(t testing.TB) {
	p, st := c.p, &c.p.st
	lost, perOp := c.lost, c.perOp
	// Append: list l got values 1..cnt; the v-th is report j = (v-1)·Lists
	// + l. Each acknowledged one is read exactly once, a lost one at most
	// once.
	nAL := perOp[dta.OpAppend]
	for l := range st.Lists {
		cnt := nAL / st.Lists
		if l < nAL%st.Lists {
			cnt++
		}
		seen := make([]int, cnt+1)
		got := 0
		for {
			var rd struct {
				Entries []string `json:"entries"`
				Lost    uint64   `json:"lost"`
			}
			if err := get(fmt.Sprintf("%s/v1/instances/3/append?list=%d&max=65536", p.collHTTP, l), &rd); err != nil {
				t.Fatal(err)
			}
			if rd.Lost != 0 {
				t.Fatalf("Append list %d: %d entries lapped", l, rd.Lost)
			}
			if len(rd.Entries) == 0 {
				break
			}
			for _, e := range rd.Entries {
				b, _ := hex.DecodeString(e)
				v := int(binary.BigEndian.Uint32(b[len(b)-4:]))
				if v < 1 || v > cnt {
					t.Fatalf("Append list %d: entry %d, sent 1..%d", l, v, cnt)
				}
				seen[v]++
				got++
			}
		}
		for v := 1; v <= cnt; v++ {
			if acked := !lost[c.at(dta.OpAppend, (v-1)*st.Lists+l)]; seen[v] > 1 || acked && seen[v] != 1 {
				t.Fatalf("Append list %d: entry %d (acknowledged %v) read %d times (%d entries read, %d sent)", l, v, acked, seen[v], got, cnt)
			}
		}
	}
}

// TestThreeProcesses streams a million reports of the four primitives
// from dtareport through dtatranslator into dtacollector, each its own
// process, at the highest rate the reporter's flow control reaches, and
// checks every key through the collector's HTTP API: nothing lost, nothing
// applied twice.
func TestThreeProcesses(t *testing.T) {
	n := 1_000_000
	if testing.Short() {
		n = 200_000
	}
	start(t, n, 4096).deliver(t, "dtareport")
}

// TestThreeProcessesSplit is TestThreeProcesses with dtareport -split: a
// reporter per primitive, each from its own address, so each key's,
// list's and flow's reports still come from one reporter in order.
func TestThreeProcessesSplit(t *testing.T) {
	n := 1_000_000
	if testing.Short() {
		n = 200_000
	}
	p := start(t, n, 4096)
	p.repArgs = []string{"-split"}
	p.deliver(t, "dtareport -split")
}

// deliver sends the stream, which must all be delivered (none lost,
// unconfirmed or refused by a socket), stops the translator and checks
// every key.
func (p *pipeline) deliver(t *testing.T, what string) {
	res := p.send(t)
	t.Logf("%s: %d reports at %.0f/s, %+v", what, res.Reports, res.Rate, res.Counters)
	if res.Reports != p.n || res.Counters.Lost != 0 || res.Counters.Unconfirmed != 0 || res.Counters.Errors != 0 {
		var st map[string]any // the translator's counters say which side gave up
		_ = get(p.trHTTP+"/v1/translator", &st)
		t.Logf("translator at the end: %v", st)
		t.Fatalf("dtareport: %+v", res)
	}
	p.stop(t)
	p.check(t, nil)
}

// TestThreeProcessesBusyCores is TestThreeProcesses with every core kept
// busy by a bounded spinning process at the same time: the daemons get
// the CPU in slices, their queues fill, and still nothing is lost or
// applied twice.
func TestThreeProcessesBusyCores(t *testing.T) {
	n := 1_000_000
	if testing.Short() {
		n = 100_000
	}
	p := start(t, n, 4096)
	busyCores(t)
	p.deliver(t, "dtareport with busy cores")
}

// busyCores keeps every core busy with a bounded spinning process until
// the test ends.
func busyCores(t *testing.T) {
	for range runtime.NumCPU() {
		// Its own process group, so that the cleanup ends the shell that
		// timeout runs too.
		spin := exec.Command("timeout", "120", "sh", "-c", "while :; do :; done")
		spin.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		proctest.DieWithTest(spin)
		if err := spin.Start(); err != nil {
			t.Fatalf("cannot start a busy loop: %v", err)
		}
		t.Cleanup(func() {
			syscall.Kill(-spin.Process.Pid, syscall.SIGKILL)
			spin.Wait()
		})
	}
}

// BenchmarkThreeProcesses measures the three daemons as separate
// processes: reports/s dtareport delivered (b.N reports, at least 100 000;
// every one acknowledged, none lost), checked through the HTTP API after.
// Use -benchtime=1000000x.
func BenchmarkThreeProcesses(b *testing.B) {
	n := max(b.N, 100_000)
	p := start(b, n, 4096)
	b.ResetTimer()
	res := p.send(b)
	b.StopTimer()
	if res.Reports != n || res.Counters.Lost != 0 || res.Counters.Unconfirmed != 0 {
		b.Fatalf("dtareport: %+v", res)
	}
	p.stop(b)
	p.check(b, nil)
	b.ReportMetric(res.Rate, "reports/s")
}

// TestKill9Translator kills the translator with SIGKILL a third of the way
// into a stream of a million reports and starts it again on the same
// ports; the collector's regions are files. TestKill9Collector does the
// same to the collector. Nothing acknowledged is lost: every report the
// reporter did not count lost or unconfirmed (dtareport -losses) is in the
// collector, once, and the reporter goes on to the end of the stream.
func TestKill9Translator(t *testing.T) { killMidStream(t, "translator", false) }

// TestKill9Collector: see TestKill9Translator.
func TestKill9Collector(t *testing.T) { killMidStream(t, "collector", false) }

// TestKill9BusyCores: TestKill9Translator and TestKill9Collector with every
// core kept busy.
func TestKill9BusyCores(t *testing.T) {
	t.Run("translator", func(t *testing.T) { killMidStream(t, "translator", true) })
	t.Run("collector", func(t *testing.T) { killMidStream(t, "collector", true) })
}

// TestKill9TranslatorSplit is TestKill9Translator with dtareport -split:
// the losses each reporter names map back to their places in the stream.
func TestKill9TranslatorSplit(t *testing.T) { killMidStream(t, "translator", false, "-split") }

func killMidStream(t *testing.T, which string, busy bool, repArgs ...string) {
	n := 1_000_000
	if testing.Short() || busy {
		n = 300_000
	}
	p := startWith(t, n, 4096, t.TempDir())
	p.repArgs = repArgs
	if busy {
		busyCores(t)
	}
	losses := filepath.Join(t.TempDir(), "losses.jsonl")
	wait := p.sendAsync(t, losses)
	proctest.WaitFor(t, "a third of the stream", time.Minute, func() bool {
		return p.translated() >= uint64(n/3)
	}, p.coll, p.tr)
	victim := p.tr
	if which == "collector" {
		victim = p.coll
	}
	if err := victim.Cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	victim.Cmd.Wait()
	time.Sleep(200 * time.Millisecond)
	if which == "collector" {
		p.startCollector(t)
		var st []struct {
			Restored bool `json:"restored"`
		}
		if err := get(p.collHTTP+"/v1/instances", &st); err != nil || len(st) != 4 || !st[0].Restored {
			t.Fatalf("restarted collector's instances %+v (%v): want 4, restored from their files", st, err)
		}
		p.waitConnected(t)
	} else {
		p.startTranslator(t)
	}
	res, code, logs := wait()
	t.Logf("kill -9 of the %s: %d reports at %.0f/s, exit %d, %+v", which, res.Reports, res.Rate, code, res.Counters)
	if res.Reports != p.n {
		t.Fatalf("dtareport sent %d of %d reports\n%s", res.Reports, p.n, logs)
	}
	p.stop(t)
	lost := map[int]bool{}
	b, err := os.ReadFile(losses)
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		if line == "" {
			continue
		}
		var l struct{ Seq int }
		if err := json.Unmarshal([]byte(line), &l); err != nil {
			t.Fatalf("-losses line %q: %v", line, err)
		}
		lost[l.Seq] = true
	}
	if uint64(len(lost)) != res.Counters.Lost+res.Counters.Unconfirmed {
		t.Errorf("%d reports in -losses, the counters say %d lost and %d unconfirmed", len(lost), res.Counters.Lost, res.Counters.Unconfirmed)
	}
	if len(lost) == 0 || len(lost) > n/10 {
		t.Errorf("%d reports lost or unconfirmed: want some (a process died) and at most a tenth", len(lost))
	}
	p.check(t, lost)
}

// TestKill9CachedPostcards: postcards of flows still waiting in the
// translator's cache for their other hops are not acknowledged; when the
// translator is killed with SIGKILL they are lost, and the reporter counts
// every one unconfirmed and hands it to OnLoss, while the Key-Increments
// sent before them were acknowledged.
func TestKill9CachedPostcards(t *testing.T) {
	p := start(t, 1000, 1000)
	// A linger longer than the test: the flows stay cached.
	trFile := filepath.Join(t.TempDir(), "translator.json")
	if err := os.WriteFile(trFile, []byte(`{"shards": 2, "postcard_linger": "1m"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	p.trArgs[1] = trFile
	p.tr.Cmd.Process.Kill()
	p.tr.Cmd.Wait()
	p.startTranslator(t)

	var mu sync.Mutex
	unconfirmed := map[uint32]dta.Opcode{}
	rep, err := reporter.New(reporter.Config{
		Translator: netip.MustParseAddrPort(p.report), Local: netip.MustParseAddrPort(p.reporterIP + ":0"),
		OnLoss: func(seq uint32, b []byte, reason dta.Reason) {
			r, err := dta.ParseReport(b)
			mu.Lock()
			defer mu.Unlock()
			if err != nil || reason != dta.ReasonUnconfirmed {
				t.Errorf("loss of %d: %v, reason %d; want an unconfirmed report", seq, err, reason)
			}
			unconfirmed[seq] = r.Header.Opcode
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	const kis, flows = 100, 100
	for k := range uint32(kis) {
		if err := rep.KeyIncrement(k, 1, 2); err != nil {
			t.Fatal(err)
		}
	}
	for f := range uint32(flows) { // two hops of five
		for hop := postcard.Hop(1); hop <= 2; hop++ {
			if err := rep.Postcard(f, hop, postcard.PathLength(p.st.Hops), postcard.Value(1+f%uint32(p.st.Universe))); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := rep.Flush(); err != nil {
		t.Fatal(err)
	}
	proctest.WaitFor(t, "the Key-Increments to be acknowledged", 10*time.Second, func() bool {
		return rep.Counters().Acks > 0 && rep.Counters().Unconfirmed == 0 && p.translated() == kis+2*flows
	}, p.coll, p.tr)
	time.Sleep(50 * time.Millisecond)
	if err := p.tr.Cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	p.tr.Cmd.Wait()
	p.startTranslator(t)
	if err := rep.Close(); err != nil {
		t.Fatal(err)
	}
	c := rep.Counters()
	mu.Lock()
	defer mu.Unlock()
	pcs := 0
	for _, op := range unconfirmed {
		if op == dta.OpPostcard {
			pcs++
		}
	}
	t.Logf("reporter: %+v", c)
	if c.Unconfirmed != uint64(len(unconfirmed)) || pcs != 2*flows || c.Lost != 0 {
		t.Fatalf("%d unconfirmed (%d postcards, %d handed to OnLoss): want the %d cached postcards, and only those", c.Unconfirmed, pcs, len(unconfirmed), 2*flows)
	}
	for seq, op := range unconfirmed {
		if op != dta.OpPostcard {
			t.Errorf("report %d (%v) unconfirmed: it was acknowledged", seq, op)
		}
	}
}

// translated returns how many reports the translator took, by its
// counters.
func (p *pipeline) translated() uint64 {
	var st struct {
		Counters struct {
			Reports [5]uint64 `json:"Reports"`
		} `json:"counters"`
	}
	if get(p.trHTTP+"/v1/translator", &st) != nil {
		return 0
	}
	sum := uint64(0)
	for _, c := range st.Counters.Reports {
		sum += c
	}
	return sum
}
