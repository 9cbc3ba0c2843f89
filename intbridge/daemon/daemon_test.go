package daemon

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"

	"github.com/dtakit/dtakit/inband"
	"github.com/dtakit/dtakit/intbridge"
)

const intPort = 5000

// report is a Telemetry Report of a two-hop INT-MD trace of the TCP flow
// from sport, hop 2's queue at q.
func report(t testing.TB, sport uint16, q uint32) []byte {
	bits := uint16(0x8000 | 0x8000>>inband.BitHopLatency | 0x8000>>inband.BitQueue)
	md := &inband.INT{Type: inband.TypeMD, NPT: inband.NPTL4Header, Field: 6, Version: 2, HopML: 3, RemainingHopCount: 3, Instructions: bits}
	md.AppendHop(&inband.Metadata{Present: bits, NodeID: 2, HopLatency: 10, QueueOccupancy: q})
	md.AppendHop(&inband.Metadata{Present: bits, NodeID: 1, HopLatency: 10, QueueOccupancy: 1})
	eth := &layers.Ethernet{SrcMAC: make([]byte, 6), DstMAC: make([]byte, 6), EthernetType: layers.EthernetTypeIPv4}
	ip := &layers.IPv4{Version: 4, TTL: 60, Protocol: layers.IPProtocolUDP, SrcIP: []byte{10, 0, 0, 1}, DstIP: []byte{10, 0, 0, 2}}
	u := &layers.UDP{SrcPort: 9, DstPort: intPort}
	u.SetNetworkLayerForChecksum(ip)
	tcp := make([]byte, 20)
	binary.BigEndian.PutUint16(tcp, sport)
	binary.BigEndian.PutUint16(tcp[2:], 80)
	tcp[12] = 5 << 4
	buf := gopacket.NewSerializeBuffer()
	if err := gopacket.SerializeLayers(buf, gopacket.SerializeOptions{FixLengths: true}, eth, ip, u, md, gopacket.Payload(tcp)); err != nil {
		t.Fatal(err)
	}
	inner := append(buf.Bytes(), make([]byte, (4-len(buf.Bytes())%4)%4)...)
	b, err := (&inband.Report{NodeID: 2, Individuals: []inband.Individual{{RepType: inband.RepINT, InType: inband.InEthernet, Inner: inner}}}).AppendTo(nil)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func start(t *testing.T, cfg Config) (*Daemon, string) {
	t.Helper()
	cfg.Translator, cfg.HTTP, cfg.INTPort = "none", "127.0.0.1:0", intPort
	if cfg.Inputs == nil {
		cfg.Inputs = []Input{{Listen: "127.0.0.1:0"}}
	}
	d, err := New(cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- d.Run(ctx, time.Second) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	return d, "http://" + d.http.Addr().String()
}

func get(t *testing.T, url string, v any) int {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if v != nil {
		json.NewDecoder(resp.Body).Decode(v)
	}
	return resp.StatusCode
}

func putRules(t *testing.T, url, body string) int {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPut, url+"/v1/rules", strings.NewReader(body))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// TestDaemon feeds reports from several goroutines while the API is read
// and the rules change (run with -race), then checks the counts, the
// event ring's bound and the API's answers to bad requests.
func TestDaemon(t *testing.T) {
	d, base := start(t, Config{Events: 8, Rules: map[string]Rule{"queue-occupancy": {Threshold: 5}}})
	var wg sync.WaitGroup
	const senders, each = 3, 100
	for s := range senders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := net.Dial("udp", d.InputAddrs()[0].String())
			if err != nil {
				t.Error(err)
				return
			}
			defer c.Close()
			for p := range each {
				c.Write(report(t, uint16(1000+s), uint32(p%50)))
				if p%10 == 0 {
					time.Sleep(time.Millisecond)
				}
			}
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for range 20 {
			get(t, base+"/v1/events", nil)
			get(t, base+"/v1/flows", nil)
			get(t, base+"/v1/switches", nil)
			get(t, base+"/metrics", nil)
			putRules(t, base, `{"rules": {"hop-latency": {"threshold": 3}}}`)
		}
	}()
	wg.Wait()
	// Loopback UDP under load may drop a datagram: every one received is
	// counted, once, in the flow table.
	var received uint64
	for stable := 0; stable < 10; time.Sleep(20 * time.Millisecond) {
		d.mu.Lock()
		n := d.c.Datagrams
		d.mu.Unlock()
		if n == received {
			stable++
		} else {
			received, stable = n, 0
		}
	}
	var flows struct {
		Flows int
		Rows  []struct{ Packets uint64 }
	}
	get(t, base+"/v1/flows", &flows)
	n := uint64(0)
	for _, r := range flows.Rows {
		n += r.Packets
	}
	t.Logf("%d datagrams sent, %d received", senders*each, received)
	if n != received || received < senders*each/2 {
		t.Fatalf("%d packets in the flow table, %d datagrams received, %d sent", n, received, senders*each)
	}
	if flows.Flows != senders {
		t.Fatalf("%d flows", flows.Flows)
	}
	var ev struct {
		Last   uint64
		Events []struct{ Seq uint64 }
	}
	get(t, base+"/v1/events", &ev)
	d.mu.Lock()
	c := d.c
	d.mu.Unlock()
	if len(ev.Events) != 8 || ev.Last != c.Events || ev.Events[7].Seq != ev.Last || ev.Events[0].Seq != ev.Last-7 || c.EventsOver != c.Events-8 {
		t.Fatalf("events: last %d, %d kept (%+v), counters %+v", ev.Last, len(ev.Events), ev.Events, c)
	}
	get(t, fmt.Sprintf("%s/v1/events?since=%d", base, ev.Last-2), &ev)
	if len(ev.Events) != 2 {
		t.Fatalf("since last-2: %d events", len(ev.Events))
	}
	for _, c := range []struct {
		url  string
		code int
	}{
		{"/v1/events?limit=0", 400}, {"/v1/events?since=x", 400}, {"/v1/flows?limit=-1", 400},
		{"/v1/flows/zz", 400}, {"/v1/flows/0x1", 404}, {"/v1/nothing", 404},
	} {
		if code := get(t, base+c.url, nil); code != c.code {
			t.Errorf("GET %s: %d, want %d", c.url, code, c.code)
		}
	}
	for _, body := range []string{`{"rules": {"nope": {}}}`, `{"rulez": {}}`, `{"period": "-1s"}`, `{"period": "soon"}`, `{`} {
		if code := putRules(t, base, body); code != 400 {
			t.Errorf("PUT %s: %d, want 400", body, code)
		}
	}
}

func TestConfig(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	for _, cfg := range []Config{
		{Rules: map[string]Rule{"nope": {}}},
		{Period: "soon"},
		{Idle: "-"},
		{Inputs: []Input{{Kind: "no-such-kind"}}},
		{Translator: "nowhere"},
		{EventList: 1},
		{Events: -1},
		{LatencyBins: []uint32{3, 2}},
	} {
		cfg.HTTP = "none"
		if cfg.Inputs == nil {
			cfg.Inputs = []Input{{Listen: "127.0.0.1:0"}}
		}
		if _, err := New(cfg, log); err == nil {
			t.Errorf("%+v accepted", cfg)
		} else if !errors.Is(err, ErrConfig) && !strings.Contains(err.Error(), "configuration") {
			t.Errorf("%+v: %v, not a configuration error", cfg, err)
		}
	}
}

// TestInfluxDB: the events reach InfluxDB as INTCollector's lines, and a
// refused write is counted as lost lines.
func TestInfluxDB(t *testing.T) {
	var mu sync.Mutex
	var body strings.Builder
	status := http.StatusNoContent
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		defer mu.Unlock()
		if r.URL.Path != "/write" || r.URL.Query().Get("db") != "int" {
			t.Errorf("write to %s", r.URL)
		}
		if status == http.StatusNoContent {
			body.Write(b)
		}
		w.WriteHeader(status)
	}))
	defer srv.Close()
	d, _ := start(t, Config{InfluxDB: InfluxDB{URL: srv.URL, Database: "int", Interval: "10ms"},
		Rules: map[string]Rule{"queue-occupancy": {Threshold: 100, Level: 200}}})
	c, err := net.Dial("udp", d.InputAddrs()[0].String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.Write(report(t, 1000, 10))
	c.Write(report(t, 1000, 250))
	want := []string{
		`flow_stat\,10.0.0.1:1000->10.0.0.2:80\,proto=6 path="1:2" `,
		`flow_hop_latency\,10.0.0.1:1000->10.0.0.2:80\,proto=6\,sw_id=2 value=10i `,
		`queue_occupancy\,sw_id=2\,queue_id=0 value=10i `,
		`queue_occupancy\,sw_id=2\,queue_id=0 value=250i `,
	}
	deadline := time.Now().Add(15 * time.Second)
	for {
		mu.Lock()
		got := body.String()
		mu.Unlock()
		ok := true
		for _, w := range want {
			ok = ok && strings.Contains(got, w)
		}
		if ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("InfluxDB got:\n%s\nwant lines starting\n%s", got, strings.Join(want, "\n"))
		}
		time.Sleep(10 * time.Millisecond)
	}
	mu.Lock()
	status = http.StatusBadRequest
	mu.Unlock()
	c.Write(report(t, 1000, 10)) // a change and a fall
	deadline = time.Now().Add(15 * time.Second)
	for {
		d.mu.Lock()
		cs := d.c
		d.mu.Unlock()
		if cs.InfluxErrors > 0 {
			if cs.InfluxDropped != 2 {
				t.Fatalf("counters %+v, want 2 lines lost", cs)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no failed write counted: %+v", cs)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestDecoderAllocs: the Telemetry Report input allocates nothing per
// datagram once warm.
func TestDecoderAllocs(t *testing.T) {
	dec, err := newReportDecoder(intbridge.Config{INTPort: intPort})
	if err != nil {
		t.Fatal(err)
	}
	pkt := report(t, 1000, 5)
	now := time.Unix(1, 0)
	if _, recs, err := dec.Decode(pkt, now); err != nil || len(recs) != 1 || len(recs[0].Hops) != 2 {
		t.Fatalf("%d records, %v", len(recs), err)
	}
	if a := testing.AllocsPerRun(100, func() { dec.Decode(pkt, now) }); a != 0 {
		t.Fatalf("Decode allocates %.1f times", a)
	}
}

// TestINTOverTCPOnce: a sink's Telemetry Report of a TCP flow whose INT-MD
// rides after the TCP header (INT after L4), with the sink's own queue
// metadata, is one record: the path from the stack with the sink's hop at
// its end, never also a per-hop record of the sink. (The per-hop records
// came from a second decode that skipped only INT over UDP to the INT
// port, and counted the sink twice.)
func TestINTOverTCPOnce(t *testing.T) {
	dec, err := newReportDecoder(intbridge.Config{INTAfterL4: true})
	if err != nil {
		t.Fatal(err)
	}
	md := &inband.INT{Type: inband.TypeMD, Version: 2, HopML: 2, RemainingHopCount: 8, Instructions: 0x9000}
	for _, n := range []uint32{3, 2, 1} { // the source pushes first: last on the stack
		md.AppendHop(&inband.Metadata{Present: 0x9000, NodeID: n, QueueOccupancy: 10 * n})
	}
	ip := &layers.IPv4{Version: 4, TTL: 61, Protocol: layers.IPProtocolTCP, SrcIP: []byte{10, 0, 0, 1}, DstIP: []byte{10, 0, 0, 2}}
	tcp := &layers.TCP{SrcPort: 1000, DstPort: 80, DataOffset: 5, ACK: true}
	tcp.SetNetworkLayerForChecksum(ip)
	buf := gopacket.NewSerializeBuffer()
	if err := gopacket.SerializeLayers(buf, gopacket.SerializeOptions{FixLengths: true}, ip, tcp, md); err != nil {
		t.Fatal(err)
	}
	ind := inband.Individual{RepType: inband.RepINT, InType: inband.InIPv4, RepMdBits: 0x1000, Inner: buf.Bytes()}
	ind.SetMetadata(&inband.Metadata{Present: 0x1000, QueueOccupancy: 40})
	pkt, err := (&inband.Report{NodeID: 4, Individuals: []inband.Individual{ind}}).AppendTo(nil)
	if err != nil {
		t.Fatal(err)
	}
	_, recs, err := dec.Decode(pkt, time.Unix(1, 0))
	if err != nil || len(recs) != 1 {
		t.Fatalf("%d records (want the trace alone), %v: %+v", len(recs), err, recs)
	}
	r := recs[0]
	var got []string
	for _, h := range r.Hops {
		got = append(got, fmt.Sprintf("%d:%d", h.Switch, h.Occupancy))
	}
	if r.PerHop || strings.Join(got, " ") != "1:10 2:20 3:30 4:40" {
		t.Fatalf("record hops %v, per-hop %v", got, r.PerHop)
	}
}
