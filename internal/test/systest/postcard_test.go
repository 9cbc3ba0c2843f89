package systest

import (
	"bytes"
	"encoding/json"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dtakit/dtakit/dta"
	"github.com/dtakit/dtakit/internal/test/proctest"
	"github.com/dtakit/dtakit/postcard"
	"github.com/dtakit/dtakit/reporter"
)

// TestKill9PostcardsPerFlow kills the translator with SIGKILL while
// postcards are in flight: the flows' hops are sent hop by hop over all
// flows, so that every flow is partly written (after its linger) when the
// translator dies, with the last postcards still cached, and its other
// hops reach a translator started again with an empty cache. Every flow whose five postcards the reporter did not
// count lost or unconfirmed must then read its path through the
// collector's HTTP API, as a user queries it: an acknowledged postcard is
// in memory, whichever translator wrote its flow's other hops. The flows
// are chosen so that no two share a chunk: a flow not found is an
// acknowledged postcard lost, never a collision.
func TestKill9PostcardsPerFlow(t *testing.T) { kill9PostcardsPerFlow(t, false) }

// TestKill9PostcardsPerFlowBusyCores is TestKill9PostcardsPerFlow with
// every core kept busy by a bounded spinning process.
func TestKill9PostcardsPerFlowBusyCores(t *testing.T) { kill9PostcardsPerFlow(t, true) }

func kill9PostcardsPerFlow(t *testing.T, busy bool) {
	const flows, hops, rate = 2000, 5, 20000.0
	p := start(t, 1000, 1000)
	if busy {
		busyCores(t)
	}
	// A linger of 200 ms: the postcards sent just before the kill are
	// still cached, even if the test is descheduled a while.
	trFile := filepath.Join(t.TempDir(), "translator.json")
	if err := os.WriteFile(trFile, []byte(`{"shards": 2, "postcard_linger": "200ms"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	p.trArgs[1] = trFile
	p.tr.Cmd.Process.Kill()
	p.tr.Cmd.Wait()
	p.startTranslator(t)

	keys := disjointFlows(t, p, flows)
	value := func(f, hop int) uint32 { return 1 + uint32(f*7+hop*131)%uint32(p.st.Universe) }

	sent := make([]sentPC, 0, flows*hops) // by sequence number
	var mu sync.Mutex
	lost := map[uint32]dta.Reason{}
	rep, err := reporter.New(reporter.Config{
		Translator: netip.MustParseAddrPort(p.report), Local: netip.MustParseAddrPort(p.reporterIP + ":0"),
		Sequenced: true, WideSequence: true, Rate: rate,
		OnLoss: func(seq uint32, _ []byte, reason dta.Reason) {
			mu.Lock()
			defer mu.Unlock()
			lost[seq] = reason
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	send := func(h int, fs []uint32, from int) {
		for i, k := range fs {
			sent = append(sent, sentPC{from + i, h})
			// A datagram refused while no translator listens is counted
			// (Errors) and numbered: it goes on.
			_ = rep.Postcard(k, postcard.Hop(h), hops, postcard.Value(value(from+i, h)))
		}
	}
	// Hops 1 and 2 of every flow, written after their linger and
	// acknowledged, then hop 3 of a quarter of the flows: the translator
	// dies with those cached.
	send(1, keys, 0)
	send(2, keys, 0)
	if err := rep.Flush(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second)
	send(3, keys[:flows/4], 0)
	if err := rep.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := p.tr.Cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	p.tr.Cmd.Wait()
	p.startTranslator(t)
	send(3, keys[flows/4:], flows/4)
	send(4, keys, 0)
	send(5, keys, 0)
	if err := rep.Close(); err != nil {
		t.Fatal(err)
	}
	c := rep.Counters()
	t.Logf("reporter: %+v", c)
	var st struct {
		Counters struct{ PartialChunks, Lingered uint64 } `json:"counters"`
	}
	if err := get(p.trHTTP+"/v1/translator", &st); err != nil {
		t.Fatal(err)
	}
	t.Logf("restarted translator: %+v", st.Counters)
	if st.Counters.PartialChunks == 0 {
		t.Error("the restarted translator wrote no partial chunk: the flows' late hops were not tested")
	}

	mu.Lock()
	defer mu.Unlock()
	if len(sent) != flows*hops {
		t.Fatalf("%d postcards numbered, want %d", len(sent), flows*hops)
	}
	if uint64(len(lost)) != c.Lost+c.Unconfirmed {
		t.Errorf("%d reports handed to OnLoss, the counters say %d lost and %d unconfirmed", len(lost), c.Lost, c.Unconfirmed)
	}
	if len(lost) == 0 {
		t.Error("no postcard lost or unconfirmed: the translator died with none in flight, the test tests nothing")
	}
	checkFlowPaths(t, p, keys, hops, sent, lost, value)
}

// sentPC is a postcard sent: its flow's index and its hop.
type sentPC struct{ flow, hop int }

// disjointFlows returns flows keys whose copies share no chunk with
// another flow's in the collector's Postcarding layout (startWith).
func disjointFlows(t *testing.T, p *pipeline, flows int) []uint32 {
	codec, err := postcard.NewCodec(postcard.Layout{Hops: p.st.Hops, Chunks: uint32(p.chunks), Copies: 2})
	if err != nil {
		t.Fatal(err)
	}
	used := map[uint32]bool{}
	var keys []uint32
	for k := uint32(1); len(keys) < flows; k++ {
		a, b := codec.ChunkIndex(k, 0), codec.ChunkIndex(k, 1)
		if used[a] || used[b] || a == b {
			continue
		}
		used[a], used[b] = true, true
		keys = append(keys, k)
	}
	return keys
}

// checkFlowPaths: every flow of keys (of hops postcards) none of whose
// postcards (sent, by sequence number) is in lost reads its path,
// value(flow, hop) hop by hop.
func checkFlowPaths(t *testing.T, p *pipeline, keys []uint32, hops int, sent []sentPC, lost map[uint32]dta.Reason, value func(f, hop int) uint32) {
	flows := len(keys)
	unsure := make([]bool, flows)
	for seq := range lost {
		unsure[sent[seq].flow] = true
	}
	var want []uint32
	var wantF []int
	for f, k := range keys {
		if !unsure[f] {
			want, wantF = append(want, k), append(wantF, f)
		}
	}
	if len(want) < flows/2 {
		t.Fatalf("only %d of %d flows had every postcard acknowledged", len(want), flows)
	}
	var res struct {
		Results []struct {
			Key    uint32   `json:"key"`
			Status string   `json:"status"`
			Path   []uint32 `json:"path"`
		} `json:"results"`
	}
	if err := post(p.collHTTP+"/v1/instances/2/postcard", map[string]any{"keys": want}, &res); err != nil {
		t.Fatal(err)
	}
	if len(res.Results) != len(want) {
		t.Fatalf("%d answers for %d flows", len(res.Results), len(want))
	}
	bad := 0
	for i, r := range res.Results {
		f := wantF[i]
		ok := r.Key == want[i] && r.Status == "found" && len(r.Path) == hops
		for h := 1; ok && h <= hops; h++ {
			ok = r.Path[h-1] == value(f, h)
		}
		if !ok {
			if bad++; bad <= 5 {
				exp := make([]uint32, hops)
				for h := range exp {
					exp[h] = value(f, h+1)
				}
				t.Errorf("flow %d (key %d), every postcard acknowledged: %s %v, want %v", f, want[i], r.Status, r.Path, exp)
			}
		}
	}
	if bad > 0 {
		t.Errorf("%d of %d flows with every postcard acknowledged do not read their path (%d flows excused, a postcard lost or unconfirmed)", bad, len(want), flows-len(want))
	}
}

// TestPostcardValuesOutsideTheSet runs the README's three processes with
// its collector configuration, whose postcard instance holds the values
// 1..16, and dtareport without -universe 16: its postcards' values go up
// to 4096. The translator refuses those outside the set the collector
// advertises, counts them and NACKs them with reason Rejected; the
// reporter counts each lost and rejected, writes it with reason 5 to
// -losses and exits non-zero. (Before, every one was acknowledged, the
// translator counted 0 rejected, and every path query said not found.)
func TestPostcardValuesOutsideTheSet(t *testing.T) {
	const n = 20000
	p := start(t, n, 4096)
	// The README's collector.json, on the test's ports.
	var cfg struct {
		Addr   string `json:"addr"`
		HTTP   string `json:"http"`
		CMPort int    `json:"cm_port"`
		Insts  []any  `json:"instances"`
	}
	cfg.Addr, cfg.HTTP, cfg.CMPort = p.roce, p.collHTTP, 43000+os.Getpid()%1000
	cfg.Insts = []any{
		map[string]any{"primitive": "keywrite", "slots": 262144, "data_size": 4, "redundancy": 2},
		map[string]any{"primitive": "keyincrement", "slots": 65536, "redundancy": 2},
		map[string]any{"primitive": "postcard", "hops": 5, "chunks": 65536, "copies": 2, "values": []int{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}},
		map[string]any{"primitive": "append", "lists": 8, "entries": 65536, "entry_size": 4, "batch": 16, "markers": true},
	}
	b, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "collector.json")
	if err := os.WriteFile(file, b, 0o644); err != nil {
		t.Fatal(err)
	}
	p.tr.Cmd.Process.Kill()
	p.tr.Cmd.Wait()
	p.coll.Cmd.Process.Kill()
	p.coll.Cmd.Wait()
	p.collArgs = []string{"-config", file}
	p.startCollector(t)
	p.startTranslator(t)

	losses := filepath.Join(t.TempDir(), "losses.jsonl")
	cmd := exec.Command(p.dtareport, "-translator", p.report, "-local", p.reporterIP+":0", "-nacks",
		"-count", strconv.Itoa(n), "-keys", "4096", "-mix", "postcard", "-losses", losses)
	var out, logs bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &logs
	proctest.DieWithTest(cmd)
	err = cmd.Run()
	var res struct {
		Counters struct{ Datagrams, Lost, Unconfirmed, Rejected uint64 } `json:"counters"`
	}
	if jerr := json.Unmarshal(out.Bytes(), &res); jerr != nil {
		t.Fatalf("dtareport: %v, output %q\n%s", err, out.String(), logs.String())
	}
	t.Logf("dtareport: exit %d, %+v", cmd.ProcessState.ExitCode(), res.Counters)
	if cmd.ProcessState.ExitCode() == 0 {
		t.Error("dtareport exited 0 with postcards refused")
	}
	var st struct {
		Counters struct{ Rejected, OutsideValues, NACKs uint64 } `json:"counters"`
	}
	if err := get(p.trHTTP+"/v1/translator", &st); err != nil {
		t.Fatal(err)
	}
	t.Logf("translator: %+v", st.Counters)
	// Values are 1..4096: all but about 1/256 of the postcards are outside.
	if st.Counters.Rejected < n/2 || st.Counters.OutsideValues != st.Counters.Rejected {
		t.Errorf("translator: %d rejected, %d outside the values; want most of the %d postcards, all for their values", st.Counters.Rejected, st.Counters.OutsideValues, n)
	}
	if res.Counters.Rejected != st.Counters.Rejected || res.Counters.Lost < res.Counters.Rejected {
		t.Errorf("reporter: %d rejected, %d lost; want the translator's %d rejected, counted lost", res.Counters.Rejected, res.Counters.Lost, st.Counters.Rejected)
	}
	lb, err := os.ReadFile(losses)
	if err != nil {
		t.Fatal(err)
	}
	var reason5 uint64
	for _, line := range strings.Split(strings.TrimSpace(string(lb)), "\n") {
		if line == "" {
			continue
		}
		var l struct{ Reason int }
		if err := json.Unmarshal([]byte(line), &l); err != nil {
			t.Fatalf("-losses line %q: %v", line, err)
		}
		if l.Reason == int(dta.ReasonRejected) {
			reason5++
		}
	}
	if reason5 != res.Counters.Rejected {
		t.Errorf("-losses names %d reports with reason 5, the reporter counted %d rejected", reason5, res.Counters.Rejected)
	}
}
