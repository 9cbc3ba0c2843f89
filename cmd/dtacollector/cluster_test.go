package main

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dtakit/dtakit/collector/cluster"
	"github.com/dtakit/dtakit/collector/daemon"
	"github.com/dtakit/dtakit/dta"
	"github.com/dtakit/dtakit/internal/test/proctest"
	"github.com/dtakit/dtakit/keyincr"
	"github.com/dtakit/dtakit/keywrite"
	"github.com/dtakit/dtakit/reporter"
	"github.com/dtakit/dtakit/translator"
)

// daemonProc is a dtacollector process of a test.
type daemonProc struct {
	*proctest.Proc
	base string // HTTP API
	roce netip.AddrPort
}

// startDaemon starts bin with the configuration JSON and waits until it
// answers.
func startDaemon(t *testing.T, bin, cfg string, roce netip.AddrPort, web string) *daemonProc {
	t.Helper()
	path := filepath.Join(t.TempDir(), "c.json")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	d := &daemonProc{Proc: proctest.Start(t, bin, "-config", path), base: "http://" + web, roce: roce}
	proctest.WaitFor(t, "the daemon up", 10*time.Second, func() bool {
		resp, err := http.Get(d.base + "/healthz")
		if err == nil {
			resp.Body.Close()
		}
		return err == nil
	}, d.Proc)
	return d
}

// startTranslator starts an in-process translator on cfg (its reports on a
// free loopback port unless cfg names one) and a reporter sending to it,
// with confirmed delivery on an ack port of their own: the reporter's
// Close returns once the translator acknowledged every report (see
// closeReporter), however late a loaded machine lets it read them.
func startTranslator(t *testing.T, ctx context.Context, cfg translator.Config) (*translator.Translator, *reporter.Reporter) {
	t.Helper()
	if !cfg.ReportAddr.IsValid() {
		cfg.ReportAddr = netip.MustParseAddrPort(fmt.Sprintf("127.0.0.1:%d", freePort(t, "udp")))
	}
	cfg.AckPort = uint16(freePort(t, "udp"))
	tr, err := translator.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := tr.Start(ctx); err != nil {
		t.Fatal(err)
	}
	rep, err := reporter.New(reporter.Config{Translator: tr.ReportAddr(), AckPort: cfg.AckPort})
	if err != nil {
		t.Fatal(err)
	}
	return tr, rep
}

// closeReporter closes rep, which waits for the translator's acks, and
// fails the test unless every report was confirmed applied.
func closeReporter(t *testing.T, rep *reporter.Reporter) {
	t.Helper()
	if err := rep.Close(); err != nil {
		t.Fatal(err)
	}
	if c := rep.Counters(); c.Lost != 0 || c.Unconfirmed != 0 {
		t.Fatalf("reporter: %d reports lost, %d unconfirmed, want every one confirmed: %+v", c.Lost, c.Unconfirmed, c)
	}
}

func postJSON(t *testing.T, url, body string, v any) int {
	t.Helper()
	resp, err := http.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		t.Fatalf("%s: %v", url, err)
	}
	return resp.StatusCode
}

const (
	clusterKeys = 3000
	kwSlots     = 1 << 14
	kiSlots     = 1 << 12
)

func kwValue(k uint32) []byte {
	return binary.LittleEndian.AppendUint32(binary.LittleEndian.AppendUint32(nil, k), k*3+1)
}
func kiCount(k uint32) uint64 { return uint64(k%10 + 1) }

// TestCluster runs three dtacollector processes and one translator on
// loopback: the translator spreads the reports of 3000 keys over the
// collectors by the choice table, and the cluster client, asking the three
// as one, answers every key as a store fed that collector's share would.
// Then each collector exports its epoch as Parquet files, which DuckDB
// reads (TestClusterDuckDB's queries).
func TestCluster(t *testing.T) {
	bin := build(t)
	cr := &clusterRun{cmPort: 43000 + os.Getpid()%1000, choice: dta.DefaultCollectorChoice(3)}
	for i := range 3 {
		cr.start(t, bin, i)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cr.send(t, ctx)

	cl, err := cluster.New(ctx, cluster.Config{Collectors: []string{cr.procs[0].base, cr.procs[1].base, cr.procs[2].base}, RoCEv2: cr.roces})
	if err != nil {
		t.Fatal(err)
	}
	kwRes, err := cl.KeyWrite(ctx, cr.keys)
	if err != nil {
		t.Fatal(err)
	}
	kiRes, err := cl.KeyIncrement(ctx, cr.keys)
	if err != nil {
		t.Fatal(err)
	}
	cr.checkAnswers(t, kwRes, kiRes)
	cr.checkNoForeignKeys(t)
	// A misordered client is refused, not silently wrong.
	if _, err := cluster.New(ctx, cluster.Config{Collectors: []string{cr.procs[1].base, cr.procs[0].base, cr.procs[2].base}, RoCEv2: cr.roces}); err == nil || !strings.Contains(err.Error(), "out of order") {
		t.Fatalf("a client with collectors out of order: %v", err)
	}

	files := cr.export(t)
	t.Run("DuckDB", func(t *testing.T) { checkDuckDB(t, files, cr.keys, kwRes, kiRes) })

	// The epoch moved on: Key-Increment counts start again from zero, and
	// the next export is epoch 2.
	var after struct{ Results []daemon.KeyResult }
	postJSON(t, cr.procs[0].base+"/v1/instances/1/keyincrement", `{"keys": [17]}`, &after)
	if len(after.Results) != 1 || after.Results[0].Count != 0 {
		t.Fatalf("after the export the live counters hold %+v", after)
	}
	var res daemon.ExportResult
	if postJSON(t, cr.procs[0].base+"/v1/export", `{"keys": [17, 18]}`, &res); res.Epoch != 2 || res.Files[1].Rows != 2 || res.Files[0].Keys != "given" {
		t.Fatalf("second export: %+v", res)
	}
	for _, p := range cr.procs {
		p.Cmd.Process.Signal(syscall.SIGTERM)
		if err := p.Cmd.Wait(); err != nil {
			t.Fatalf("exit after SIGTERM: %v\n%s", err, p.Logs())
		}
	}
}

// clusterRun is TestCluster's three collectors, the keys sent and a model
// store per collector, fed the reports the choice sends there.
type clusterRun struct {
	cmPort     int
	procs      []*daemonProc
	roces      []netip.AddrPort
	exportDirs [3]string
	choice     dta.CollectorChoice
	keys       []uint32
	kwModel    [3]*keywrite.Store
	kiModel    [3]*keyincr.Store
}

// start starts collector i on 127.0.0.(11+i).
func (cr *clusterRun) start(t *testing.T, bin string, i int) {
	ip := fmt.Sprintf("127.0.0.%d", 11+i)
	roce := netip.MustParseAddrPort(fmt.Sprintf("%s:%d", ip, 4791))
	web := fmt.Sprintf("127.0.0.1:%d", freePort(t, "tcp"))
	cr.exportDirs[i] = t.TempDir()
	cfg := fmt.Sprintf(`{"name": "c%d", "addr": %q, "http": %q, "cm_port": %d,
			"export": {"dir": %q, "row_group_rows": 500},
			"instances": [
				{"primitive": "keywrite", "slots": %d, "data_size": 8},
				{"primitive": "keyincrement", "slots": %d, "keys_from": 0}]}`,
		i, roce, web, cr.cmPort, cr.exportDirs[i], kwSlots, kiSlots)
	cr.procs = append(cr.procs, startDaemon(t, bin, cfg, roce, web))
	cr.roces = append(cr.roces, roce)
}

// send sends a Key-Write and a Key-Increment report for each of
// clusterKeys keys through a translator, feeding the models as it goes,
// and checks the choice spread them.
func (cr *clusterRun) send(t *testing.T, ctx context.Context) {
	// A ring that holds the whole burst: backpressure is not this test's subject.
	tr, rep := startTranslator(t, ctx, translator.Config{Collectors: cr.roces, CMPort: uint16(cr.cmPort), RingSize: 8192})
	kwl := keywrite.Layout{Slots: kwSlots, DataSize: 8}
	kil := keyincr.Layout{Slots: kiSlots}
	for i := range 3 {
		cr.kwModel[i], _ = keywrite.NewStore(kwl, nil)
		cr.kiModel[i], _ = keyincr.NewStore(kil, nil)
	}
	cr.keys = make([]uint32, clusterKeys)
	perCollector := [3]int{}
	for i := range cr.keys {
		k := uint32(i)*2654435761 + 17
		cr.keys[i] = k
		c := cr.choice.Collector(k)
		perCollector[c]++
		cr.kwModel[c].Put(k, kwValue(k), 2)
		cr.kiModel[c].Add(k, kiCount(k), 2)
		if err := rep.KeyWrite(k, kwValue(k), 2); err != nil {
			t.Fatal(err)
		}
		if err := rep.KeyIncrement(k, kiCount(k), 2); err != nil {
			t.Fatal(err)
		}
	}
	closeReporter(t, rep)
	if err := tr.Close(10 * time.Second); err != nil {
		t.Fatal(err)
	}
	if c := tr.Counters(); c.Dropped != 0 {
		t.Fatalf("the translator dropped reports: %+v", c)
	}
	for i, n := range perCollector {
		if n < clusterKeys/4 {
			t.Fatalf("collector %d got %d of %d keys: the choice does not spread", i, n, clusterKeys)
		}
	}
}

// checkAnswers: the cluster answers every key as the model store of its
// collector does.
func (cr *clusterRun) checkAnswers(t *testing.T, kwRes []daemon.KeyResult, kiRes []daemon.KeyResult) {
	found := 0
	for i, k := range cr.keys {
		c := cr.choice.Collector(k)
		q, _ := cr.kwModel[c].Query(k, 2, keywrite.Plurality)
		want := ""
		if q.Status == keywrite.Found {
			want = hex.EncodeToString(q.Data)
			found++
		}
		status := map[keywrite.Status]string{keywrite.Found: daemon.StatusFound, keywrite.Empty: daemon.StatusNotFound, keywrite.Ambiguous: daemon.StatusConflict}[q.Status]
		if r := kwRes[i]; r.Key != k || r.Status != status || r.Data != want {
			t.Fatalf("key %#x (collector %d): cluster answered %+v, model %v %s", k, c, r, q.Status, want)
		}
		est, _ := cr.kiModel[c].Query(k, 2)
		if r := kiRes[i]; r.Key != k || r.Count != est || est < kiCount(k) {
			t.Fatalf("key %#x (collector %d): cluster counted %d, model %d, sent %d", k, c, r.Count, est, kiCount(k))
		}
	}
	if found < clusterKeys*9/10 {
		t.Fatalf("only %d of %d keys found", found, clusterKeys)
	}
}

// checkNoForeignKeys: no collector holds another's keys: asked directly,
// the others answer empty for every key.
func (cr *clusterRun) checkNoForeignKeys(t *testing.T) {
	for ci, p := range cr.procs {
		var others []uint32
		for _, k := range cr.keys {
			if cr.choice.Collector(k) != ci {
				others = append(others, k)
			}
		}
		body, _ := json.Marshal(map[string]any{"keys": others})
		var resp struct{ Results []daemon.KeyResult }
		postJSON(t, p.base+"/v1/instances/0/keywrite", string(body), &resp)
		for _, r := range resp.Results {
			if r.Status != daemon.StatusNotFound {
				t.Fatalf("collector %d holds key %#x, which the choice sends elsewhere: %+v", ci, r.Key, r)
			}
		}
	}
}

// export has each collector export its epoch and returns the files, by
// collector and primitive.
func (cr *clusterRun) export(t *testing.T) [3]map[string]string {
	var files [3]map[string]string // primitive -> path
	for i, p := range cr.procs {
		var res daemon.ExportResult
		if code := postJSON(t, p.base+"/v1/export", "", &res); code != http.StatusOK || res.Epoch != 1 || len(res.Files) != 2 {
			t.Fatalf("export of collector %d: %d %+v\n%s", i, code, res, p.Logs())
		}
		files[i] = map[string]string{}
		for _, f := range res.Files {
			if f.Skipped != "" || f.Rows == 0 {
				t.Fatalf("collector %d: %+v", i, f)
			}
			if _, err := os.Stat(f.Path); err != nil {
				t.Fatal(err)
			}
			files[i][f.Primitive] = f.Path
		}
		var st daemon.ExportStatus
		if getJSON(t, p.base+"/v1/export", &st); st.Running || st.Epochs != 1 || st.Last == nil || st.Last.Epoch != 1 {
			t.Fatalf("export status: %+v", st)
		}
		// The epoch's directory is complete; nothing is left half-written.
		ents, _ := os.ReadDir(cr.exportDirs[i])
		if len(ents) != 1 || ents[0].Name() != "epoch-000001" {
			t.Fatalf("export dir holds %v", ents)
		}
	}
	return files
}

// duckDB runs SQL statements in DuckDB (npm's @duckdb/node-api, which .ci/run
// installs) and returns each one's rows as JSON objects.
func duckDB(t *testing.T, stmts ...string) [][]map[string]any {
	t.Helper()
	modules := os.Getenv("DTAKIT_NODE_MODULES")
	if modules == "" {
		modules = "/opt/dtakit-npm/node_modules"
	}
	node, err := exec.LookPath("node")
	if err == nil {
		_, err = os.Stat(filepath.Join(modules, "@duckdb", "node-api"))
	}
	if err != nil {
		if os.Getenv("DTAKIT_REQUIRE_TOOLS") == "1" {
			t.Fatalf("node with @duckdb/node-api in %s not found and DTAKIT_REQUIRE_TOOLS=1: %v", modules, err)
		}
		t.Skipf("node with @duckdb/node-api in %s (DTAKIT_NODE_MODULES) not found: %v; skipping the DuckDB check (set DTAKIT_REQUIRE_TOOLS=1 to fail instead)", modules, err)
	}
	script := `
const { DuckDBInstance } = require('@duckdb/node-api');
(async () => {
  const con = await (await DuckDBInstance.create(':memory:')).connect();
  const out = [];
  for (const sql of JSON.parse(process.argv[1])) {
    out.push((await con.runAndReadAll(sql)).getRowObjectsJson());
  }
  console.log(JSON.stringify(out));
})().catch(e => { console.error(e.message); process.exit(1); });`
	stmtsJSON, _ := json.Marshal(stmts)
	cmd := exec.Command(node, "-e", script, string(stmtsJSON))
	cmd.Env = append(os.Environ(), "NODE_PATH="+modules)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("duckdb: %v\n%s", err, stderr.String())
	}
	var res [][]map[string]any
	if err := json.Unmarshal(out, &res); err != nil {
		t.Fatalf("duckdb output: %v\n%s", err, out)
	}
	return res
}

func sqlList(paths []string) string {
	q := make([]string, len(paths))
	for i, p := range paths {
		q[i] = "'" + strings.ReplaceAll(p, "'", "''") + "'"
	}
	return "[" + strings.Join(q, ", ") + "]"
}

// checkDuckDB has DuckDB read the three collectors' files and compares its
// answers with the cluster client's: the top keys by count, a join of each
// key's Key-Write value with its count, and the epoch columns.
func checkDuckDB(t *testing.T, files [3]map[string]string, keys []uint32, kwRes, kiRes []daemon.KeyResult) {
	var kw, ki []string
	for _, f := range files {
		kw, ki = append(kw, f["keywrite"]), append(ki, f["keyincrement"])
	}
	res := duckDB(t,
		`SELECT key::VARCHAR AS key, estimate::VARCHAR AS estimate FROM read_parquet(`+sqlList(ki)+`) ORDER BY estimate::UBIGINT DESC, key LIMIT 10`,
		`SELECT count(*)::VARCHAR AS n, sum(ki.estimate)::VARCHAR AS total, count(DISTINCT kw.collector)::VARCHAR AS collectors
		   FROM read_parquet(`+sqlList(kw)+`) kw JOIN read_parquet(`+sqlList(ki)+`) ki USING (collector, key)
		  WHERE kw.verdict = 'found'`,
		`SELECT key::VARCHAR AS key, lower(hex(value)) AS value FROM read_parquet(`+sqlList(kw)+`) WHERE verdict = 'found'`,
		`SELECT DISTINCT epoch::VARCHAR AS epoch, collector, instance::VARCHAR AS instance FROM read_parquet(`+sqlList(kw)+`) ORDER BY collector`,
	)
	// Top 10 by count, ties by key, from the client's answers. Only keys
	// with a Key-Write copy were exported (keys_from), so rank those.
	type kc struct {
		key   uint32
		count uint64
	}
	var ranked []kc
	var joinN, joinSum uint64
	wantValues := map[string]string{}
	for i, k := range keys {
		if kwRes[i].Status == daemon.StatusNotFound {
			continue
		}
		ranked = append(ranked, kc{k, kiRes[i].Count})
		if kwRes[i].Status == "found" {
			joinN++
			joinSum += kiRes[i].Count
			wantValues[fmt.Sprint(k)] = kwRes[i].Data
		}
	}
	sort.Slice(ranked, func(a, b int) bool {
		if ranked[a].count != ranked[b].count {
			return ranked[a].count > ranked[b].count
		}
		return fmt.Sprint(ranked[a].key) < fmt.Sprint(ranked[b].key) // DuckDB orders the VARCHAR key
	})
	for i, row := range res[0] {
		if row["key"] != fmt.Sprint(ranked[i].key) || row["estimate"] != fmt.Sprint(ranked[i].count) {
			t.Fatalf("top-10 row %d: DuckDB %v, Go %+v", i, row, ranked[i])
		}
	}
	if len(res[0]) != 10 {
		t.Fatalf("top 10: %v", res[0])
	}
	if j := res[1][0]; j["n"] != fmt.Sprint(joinN) || j["total"] != fmt.Sprint(joinSum) || j["collectors"] != "3" {
		t.Fatalf("join: DuckDB %v, Go n=%d total=%d over 3 collectors", j, joinN, joinSum)
	}
	if len(res[2]) != len(wantValues) {
		t.Fatalf("DuckDB found %d values, Go %d", len(res[2]), len(wantValues))
	}
	for _, row := range res[2] {
		if k := row["key"].(string); wantValues[k] != row["value"] {
			t.Fatalf("key %s: DuckDB value %v, Go %s", k, row["value"], wantValues[k])
		}
	}
	if e := res[3]; len(e) != 3 || e[0]["collector"] != "c0" || e[2]["collector"] != "c2" || e[0]["epoch"] != "1" || e[0]["instance"] != "0" {
		t.Fatalf("epoch columns: %v", e)
	}
}

// TestExportTimer: with an interval the daemon exports epochs by itself,
// and a restarted daemon numbers its epochs on from the last one on disk.
func TestExportTimer(t *testing.T) {
	bin := build(t)
	dir := t.TempDir()
	config := func(interval string) (string, netip.AddrPort, string) {
		roce := netip.MustParseAddrPort(fmt.Sprintf("127.0.0.1:%d", freePort(t, "udp")))
		web := fmt.Sprintf("127.0.0.1:%d", freePort(t, "tcp"))
		return fmt.Sprintf(`{"addr": %q, "http": %q, "cm_port": %d, "export": {"dir": %q, "interval": %q},
			"instances": [{"primitive": "keywrite", "slots": 1024, "data_size": 4},
				{"primitive": "append", "lists": 2, "entries": 64, "entry_size": 4},
				{"primitive": "postcard", "hops": 3, "chunks": 64, "values": [1, 2, 3], "keys_from": 0}]}`,
			roce, web, 44000+os.Getpid()%1000, dir, interval), roce, web
	}
	cfg, roce, web := config("150ms")
	d := startDaemon(t, bin, cfg, roce, web)
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if _, err := os.Stat(filepath.Join(dir, "epoch-000003", "instance-0-keywrite.parquet")); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no third epoch after 10 s:\n%s", d.Logs())
		}
	}
	var st daemon.ExportStatus
	if getJSON(t, d.base+"/v1/export", &st); st.Epochs < 3 || st.Last == nil || !st.Last.End.After(st.Last.Start) {
		t.Fatalf("status %+v", st)
	}
	if f := st.Last.Files; len(f) != 3 || f[1].Primitive != "append" || f[1].Path == "" || f[2].Primitive != "postcard" || f[2].Keys != "instance 0" || f[2].Path == "" {
		t.Fatalf("files: %+v", st.Last.Files)
	}
	d.Cmd.Process.Signal(syscall.SIGTERM)
	if err := d.Cmd.Wait(); err != nil {
		t.Fatal(err)
	}
	ents, _ := os.ReadDir(dir)
	last := ents[len(ents)-1].Name()
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), ".") {
			t.Fatalf("a partial epoch was left: %s", e.Name())
		}
	}
	cfg, roce, web = config("")
	d = startDaemon(t, bin, cfg, roce, web)
	var res daemon.ExportResult
	postJSON(t, d.base+"/v1/export", "", &res)
	if want := fmt.Sprintf("epoch-%06d", len(ents)+1); filepath.Base(res.Dir) != want || last >= want {
		t.Fatalf("after a restart the export went to %s, want %s (last before: %s)", res.Dir, want, last)
	}
}
