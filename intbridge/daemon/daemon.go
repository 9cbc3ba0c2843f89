// Package daemon is dtaint's library: a live INT collector on DTA. It
// listens for INT telemetry on UDP (Telemetry Reports, or raw data packets
// carrying INT with the daemon as INT sink; an input kind is one Decoder
// registered under a name), bridges it to DTA reports sent to a
// translator, runs the analytics (intbridge's Detector and Aggregator),
// serves /metrics and an HTTP/JSON API of events, flows, switches and
// the detection rules, and can send the events to InfluxDB in
// INTCollector's schema so that its dashboards keep working.
//
// The API, under HTTP (loopback by default; with Token set, changing rules
// needs "Authorization: Bearer <token>"):
//
//	GET /v1/events?since=N&limit=M  events after sequence number N (the ring keeps the last Events)
//	GET /v1/flows?limit=M           the flow table, most recently seen first
//	GET /v1/flows/{key}             one flow (key in hex, 0x1a2b3c4d, or decimal)
//	GET /v1/switches                per-switch histograms
//	GET /v1/rules                   the detection rules and the period
//	PUT /v1/rules                   replace some rules: {"rules": {"queue-occupancy": {"threshold": 100, "level": 200}}, "period": "1s"}
//	GET /metrics, /healthz
package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"sync"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"

	"github.com/dtakit/dtakit/dta"
	"github.com/dtakit/dtakit/intbridge"
	"github.com/dtakit/dtakit/internal/jsonconf"
	"github.com/dtakit/dtakit/reporter"
)

// ErrConfig is wrapped by configuration errors.
var ErrConfig = errors.New("intbridge/daemon: invalid configuration")

// Config is the daemon's configuration, its JSON file. Every field is
// optional; the zero value listens on loopback only.
type Config struct {
	// Inputs are the sockets telemetry arrives on (default one
	// "telemetry-report" input on 127.0.0.1:32766).
	Inputs []Input `json:"inputs"`
	// Translator is where DTA reports go (default 127.0.0.1:40040);
	// "none" runs the analytics alone.
	Translator string `json:"translator"`
	// HTTP is the API's address (default 127.0.0.1:8042; "none": no API).
	HTTP string `json:"http"`
	// Token, when set, is required to change the rules over HTTP.
	Token string `json:"token"`
	// Bridge is intbridge's configuration (intbridge.Config): where INT
	// is found in a packet (int_port, int_dscp under int_dscp_mask,
	// int_after_l4), the path and postcard layouts, the flows' initial
	// TTL, the drop and congestion lists, and the node ID the raw INT
	// inputs, acting as INT sink, report traces under.
	INTPort        uint16 `json:"int_port"`
	INTDSCP        uint8  `json:"int_dscp"`
	INTDSCPMask    uint8  `json:"int_dscp_mask"`
	INTAfterL4     bool   `json:"int_after_l4"`
	PathHops       int    `json:"path_hops"`
	PostcardHops   int    `json:"postcard_hops"`
	InitialTTL     uint8  `json:"initial_ttl"`
	DropList       uint32 `json:"drop_list"`
	CongestionList uint32 `json:"congestion_list"`
	SinkNode       uint32 `json:"sink_node"`
	// EventList, when positive, is the Append list the detector's events
	// are written to (docs/DTA-WIRE.md 8.11); 0 writes none.
	EventList uint32 `json:"event_list"`
	// Rules are the detection rules by metric name (intbridge.Metric's
	// String), Period INTCollector's P ("1s"; empty: no periodic push).
	Rules  map[string]Rule `json:"rules"`
	Period string          `json:"period"`
	// MaxFlows bounds the detector's and the flow table's flows, MaxKeys
	// the detector's (switch, queue) and (switch, port) keys, Switches
	// the switches with histograms (intbridge's defaults when 0).
	MaxFlows int `json:"max_flows"`
	MaxKeys  int `json:"max_keys"`
	Switches int `json:"switches"`
	// Idle ages out flows not seen for it ("30s"; empty: never).
	Idle string `json:"idle"`
	// LatencyBins, QueueBins and TxUtilBins are the histograms' bin upper
	// bounds (default powers of two).
	LatencyBins []uint32 `json:"latency_bins"`
	QueueBins   []uint32 `json:"queue_bins"`
	TxUtilBins  []uint32 `json:"tx_util_bins"`
	// Events is the events the API keeps (default 4096).
	Events int `json:"events"`
	// Replay, when set, is a capture (pcap or pcapng) of Telemetry Reports
	// sent to ReplayPort (default 32766) that Run feeds through the
	// daemon first, each report at its capture time, before serving on.
	Replay     string `json:"replay"`
	ReplayPort uint16 `json:"replay_port"`
	// InfluxDB, when its URL is set, receives the events as line protocol
	// in INTCollector's schema (intbridge.WriteEventLines) every Interval.
	InfluxDB InfluxDB `json:"influxdb"`
}

// InfluxDB is where events go as line protocol: a 2.x/3.x bucket (Org,
// Bucket, Token) or a 1.x Database.
type InfluxDB struct {
	URL      string `json:"url"`
	Org      string `json:"org"`
	Bucket   string `json:"bucket"`
	Token    string `json:"token"`
	Database string `json:"database"`
	// Interval is how often the lines are sent ("1s" by default).
	Interval string `json:"interval"`
}

// maxPending bounds the line protocol waiting for InfluxDB: lines beyond
// it are counted in InfluxDropped, never held.
const maxPending = 4 << 20

// Input is one socket and the kind of telemetry it carries.
type Input struct {
	Kind   string `json:"kind"`   // a registered Decoder kind: "telemetry-report" (default), "raw-int" (Ethernet frames carrying INT) or "raw-int-ip" (IP packets)
	Listen string `json:"listen"` // UDP address (default 127.0.0.1:32766)
}

// Rule is intbridge.Rule in JSON.
type Rule struct {
	Threshold uint32 `json:"threshold"`
	NoChange  bool   `json:"no_change,omitempty"`
	Level     uint32 `json:"level,omitempty"`
}

// LoadConfig reads a JSON configuration file; unknown fields are errors.
// An error in the JSON names the file, line and column (path:line:col).
func LoadConfig(path string) (Config, error) {
	var c Config
	b, err := os.ReadFile(path)
	if err != nil {
		return c, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	if err := jsonconf.Decode(path, b, &c); err != nil {
		return c, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	return c, nil
}

// A Decoder turns one datagram of an input into DTA reports and analytics
// records, both valid until its next call. Each input has its own.
type Decoder interface {
	Decode(payload []byte, now time.Time) ([]dta.Report, []intbridge.Record, error)
	// Counters are exported at /metrics as dtakit_int_<kind>_<field>_total.
	Counters() any
}

// NewDecoder makes an input kind's Decoder from the bridge configuration.
type NewDecoder func(cfg intbridge.Config) (Decoder, error)

var kinds = map[string]NewDecoder{}

// Register adds an input kind: a raw INT input (INT in the data packets)
// is one Decoder registered under its name.
func Register(kind string, f NewDecoder) { kinds[kind] = f }

func init() {
	Register("telemetry-report", newReportDecoder)
	Register("raw-int", newRawDecoder(layers.LayerTypeEthernet))
	Register("raw-int-ip", newRawDecoder(layers.LayerTypeIPv4))
}

// reportDecoder decodes Telemetry Reports: the bridge's DTA reports and
// its traces and per-hop reports as records.
type reportDecoder struct{ b *intbridge.Bridge }

func newReportDecoder(cfg intbridge.Config) (Decoder, error) {
	b, err := intbridge.New(cfg)
	if err != nil {
		return nil, err
	}
	return &reportDecoder{b: b}, nil
}

func (r *reportDecoder) Decode(payload []byte, now time.Time) ([]dta.Report, []intbridge.Record, error) {
	reps, err := r.b.Handle(payload)
	if err != nil {
		return nil, nil, err
	}
	return reps, r.b.Records(now), nil
}

func (r *reportDecoder) Counters() any { return r.b.Counters() }

// rawDecoder is the bridge as INT sink (Bridge.HandlePacket): each datagram
// is one data packet that may carry INT, an Ethernet frame ("raw-int") or
// an IPv4 or IPv6 packet ("raw-int-ip"), as a mirror port or a tap sends
// them. Its traces go under Config.SinkNode.
type rawDecoder struct {
	b     *intbridge.Bridge
	first gopacket.LayerType
}

func newRawDecoder(first gopacket.LayerType) NewDecoder {
	return func(cfg intbridge.Config) (Decoder, error) {
		b, err := intbridge.New(cfg)
		if err != nil {
			return nil, err
		}
		return &rawDecoder{b: b, first: first}, nil
	}
}

func (r *rawDecoder) Decode(payload []byte, now time.Time) ([]dta.Report, []intbridge.Record, error) {
	first := r.first
	if first != layers.LayerTypeEthernet && len(payload) > 0 && payload[0]>>4 == 6 {
		first = layers.LayerTypeIPv6
	}
	reps, err := r.b.HandlePacket(payload, first)
	if err != nil {
		return nil, nil, err
	}
	return reps, r.b.Records(now), nil
}

func (r *rawDecoder) Counters() any { return r.b.Counters() }

// Counters count what the daemon did.
type Counters struct {
	Datagrams  uint64 // datagrams received
	Malformed  uint64 // datagrams the input's decoder refused
	Records    uint64 // analytics records
	Events     uint64 // events detected
	Reports    uint64 // DTA reports sent to the translator
	SendErrors uint64 // DTA reports the reporter refused
	EventsSent uint64 // events written to the event list
	EventsOver uint64 // events the API's ring dropped to keep its size
	// InfluxLines counts event lines InfluxDB accepted, InfluxDropped
	// those lost: the pending buffer was full or a write failed.
	InfluxLines   uint64
	InfluxDropped uint64
	InfluxErrors  uint64 // writes that failed
}

// Daemon is a running INT collector.
type Daemon struct {
	cfg   Config
	log   *slog.Logger
	conns []net.PacketConn
	decs  []Decoder
	kinds []string
	rep   *reporter.Reporter
	http  net.Listener

	mu     sync.Mutex // guards the analytics, the ring and the counters
	det    *intbridge.Detector
	agg    *intbridge.Aggregator
	events []intbridge.Event // scratch
	ring   []eventJSON       // the last events, oldest at head once full
	head   int
	seq    uint64 // the last event's sequence number
	period time.Duration
	bcfg   intbridge.Config
	influx *intbridge.InfluxDB
	every  time.Duration
	lines  []byte // event lines waiting for InfluxDB
	nlines uint64
	c      Counters
	entry  [intbridge.DetectorEntrySize]byte
}

// New checks cfg and binds the daemon's sockets.
func New(cfg Config, log *slog.Logger) (*Daemon, error) {
	d := &Daemon{cfg: cfg, log: log}
	if err := d.setup(); err != nil {
		d.close()
		return nil, err
	}
	return d, nil
}

func (d *Daemon) setup() error {
	cfg := &d.cfg
	if len(cfg.Inputs) == 0 {
		cfg.Inputs = []Input{{}}
	}
	if cfg.Translator == "" {
		cfg.Translator = "127.0.0.1:40040"
	}
	if cfg.HTTP == "" {
		cfg.HTTP = "127.0.0.1:8042"
	}
	if cfg.Events == 0 {
		cfg.Events = 4096
	}
	if cfg.Events < 1 || cfg.Events > 1<<20 {
		return fmt.Errorf("%w: events %d (1..2^20)", ErrConfig, cfg.Events)
	}
	if err := d.analytics(); err != nil {
		return err
	}
	d.bcfg = intbridge.Config{INTPort: cfg.INTPort, INTDSCP: cfg.INTDSCP, INTDSCPMask: cfg.INTDSCPMask, INTAfterL4: cfg.INTAfterL4,
		PathHops: cfg.PathHops, PostcardHops: cfg.PostcardHops, InitialTTL: cfg.InitialTTL,
		DropList: cfg.DropList, CongestionList: cfg.CongestionList, SinkNode: cfg.SinkNode}
	if cfg.EventList != 0 && (cfg.EventList == cfg.DropList || cfg.EventList == cfg.CongestionList || cfg.EventList == 1 && cfg.DropList == 0 && cfg.CongestionList == 0) {
		return fmt.Errorf("%w: event list %d is the drop or the congestion list", ErrConfig, cfg.EventList)
	}
	if err := d.inputs(); err != nil {
		return err
	}
	if err := d.influxDB(); err != nil {
		return err
	}
	return d.outputs()
}

// analytics makes the Detector and the Aggregator from the configuration.
func (d *Daemon) analytics() error {
	cfg := &d.cfg
	dcfg := intbridge.DetectorConfig{MaxFlows: cfg.MaxFlows, MaxKeys: cfg.MaxKeys}
	for name, r := range cfg.Rules {
		m, err := intbridge.ParseMetric(name)
		if err != nil {
			return fmt.Errorf("%w: rules: %w", ErrConfig, err)
		}
		dcfg.Rules[m] = intbridge.Rule(r)
	}
	var err error
	if cfg.Period != "" {
		if dcfg.Period, err = time.ParseDuration(cfg.Period); err != nil {
			return fmt.Errorf("%w: period: %w", ErrConfig, err)
		}
	}
	acfg := intbridge.AggregatorConfig{Flows: cfg.MaxFlows, Switches: cfg.Switches,
		LatencyBins: cfg.LatencyBins, QueueBins: cfg.QueueBins, TxUtilBins: cfg.TxUtilBins}
	if cfg.Idle != "" {
		if acfg.Idle, err = time.ParseDuration(cfg.Idle); err != nil {
			return fmt.Errorf("%w: idle: %w", ErrConfig, err)
		}
	}
	d.period = dcfg.Period
	d.det, d.agg, err = intbridge.NewAnalytics(dcfg, acfg)
	return err
}

// inputs binds the inputs' sockets, each with its decoder.
func (d *Daemon) inputs() error {
	for i := range d.cfg.Inputs {
		in := &d.cfg.Inputs[i]
		if in.Kind == "" {
			in.Kind = "telemetry-report"
		}
		if in.Listen == "" {
			in.Listen = "127.0.0.1:32766"
		}
		mk := kinds[in.Kind]
		if mk == nil {
			return fmt.Errorf("%w: input kind %q", ErrConfig, in.Kind)
		}
		dec, err := mk(d.bcfg)
		if err != nil {
			return err
		}
		conn, err := net.ListenPacket("udp", in.Listen)
		if err != nil {
			return fmt.Errorf("intbridge/daemon: input %s: %w", in.Listen, err)
		}
		d.conns, d.decs, d.kinds = append(d.conns, conn), append(d.decs, dec), append(d.kinds, in.Kind)
	}
	return nil
}

// influxDB makes the InfluxDB writer, if configured.
func (d *Daemon) influxDB() error {
	ic := d.cfg.InfluxDB
	if ic.URL == "" {
		return nil
	}
	d.influx = &intbridge.InfluxDB{URL: ic.URL, Org: ic.Org, Bucket: ic.Bucket, Token: ic.Token, Database: ic.Database,
		Client: &http.Client{Timeout: 10 * time.Second}}
	d.every = time.Second
	if ic.Interval != "" {
		var err error
		if d.every, err = time.ParseDuration(ic.Interval); err != nil || d.every <= 0 {
			return fmt.Errorf("%w: influxdb interval %q", ErrConfig, ic.Interval)
		}
	}
	if ic.Bucket == "" && ic.Database == "" {
		return fmt.Errorf("%w: influxdb needs a bucket (2.x) or a database (1.x)", ErrConfig)
	}
	return nil
}

// outputs makes the translator's reporter and binds the HTTP API.
func (d *Daemon) outputs() error {
	var err error
	if d.cfg.Translator != "none" {
		ap, err := netip.ParseAddrPort(d.cfg.Translator)
		if err != nil {
			return fmt.Errorf("%w: translator: %w", ErrConfig, err)
		}
		if d.rep, err = reporter.New(reporter.Config{Translator: ap}); err != nil {
			return err
		}
	}
	if d.cfg.HTTP != "none" {
		if d.http, err = net.Listen("tcp", d.cfg.HTTP); err != nil {
			return fmt.Errorf("intbridge/daemon: http: %w", err)
		}
	}
	return nil
}

// InputAddrs returns the inputs' bound addresses.
func (d *Daemon) InputAddrs() []net.Addr {
	a := make([]net.Addr, len(d.conns))
	for i, c := range d.conns {
		a[i] = c.LocalAddr()
	}
	return a
}

func (d *Daemon) close() {
	for _, c := range d.conns {
		c.Close()
	}
	if d.http != nil {
		d.http.Close()
	}
}

// Run serves until ctx ends, then stops the inputs, finishes the HTTP
// requests under way (at most drain) and flushes the reporter.
func (d *Daemon) Run(ctx context.Context, drain time.Duration) error {
	for i, c := range d.conns {
		d.log.Info("listening", "input", d.kinds[i], "addr", c.LocalAddr().String())
	}
	var srv *http.Server
	errc := make(chan error, len(d.conns)+1)
	if d.http != nil {
		srv = &http.Server{Handler: d.Handler(), ReadHeaderTimeout: 5 * time.Second}
		d.log.Info("http", "addr", d.http.Addr().String())
		go func() {
			if err := srv.Serve(d.http); err != nil && !errors.Is(err, http.ErrServerClosed) {
				errc <- fmt.Errorf("intbridge/daemon: http: %w", err)
			}
		}()
	}
	if d.cfg.Replay != "" {
		if err := d.replay(); err != nil {
			d.close()
			return err
		}
	}
	var wg sync.WaitGroup
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if d.rep != nil {
		// The reporter sends full batches at once; what a quiet input
		// leaves in a partial one goes within a millisecond.
		every(ctx, &wg, time.Millisecond, func() {
			if err := d.rep.Flush(); err != nil {
				d.log.Debug("flush", "err", err)
			}
		})
	}
	if d.influx != nil {
		every(ctx, &wg, d.every, func() { d.pushInflux(ctx) })
	}
	for i := range d.conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			dec := d.decs[i]
			err := intbridge.Listen(ctx, d.conns[i], func(payload []byte, _ net.Addr) error {
				d.handle(dec, payload, time.Now())
				return nil
			})
			if err != nil {
				errc <- fmt.Errorf("intbridge/daemon: input %s: %w", d.conns[i].LocalAddr(), err)
			}
		}()
	}
	var err error
	select {
	case <-ctx.Done():
	case err = <-errc:
	}
	d.log.Info("stopping")
	cancel()
	for _, c := range d.conns {
		c.Close()
	}
	wg.Wait()
	if srv != nil {
		sctx, cancel := context.WithTimeout(context.Background(), drain)
		err = errors.Join(err, srv.Shutdown(sctx))
		cancel()
	}
	if d.rep != nil {
		err = errors.Join(err, d.rep.Close())
	}
	if d.influx != nil {
		// The last lines, within the drain.
		ictx, cancel := context.WithTimeout(context.Background(), drain)
		d.pushInflux(ictx)
		cancel()
	}
	d.mu.Lock()
	c := d.c
	d.mu.Unlock()
	d.log.Info("stopped", "datagrams", c.Datagrams, "malformed", c.Malformed, "records", c.Records, "events", c.Events, "reports", c.Reports, "send_errors", c.SendErrors)
	return err
}

// replay feeds the capture Replay names through a Telemetry Report
// decoder of its own.
func (d *Daemon) replay() error {
	dec, err := newReportDecoder(d.bcfg)
	if err != nil {
		return err
	}
	f, err := os.Open(d.cfg.Replay)
	if err != nil {
		return fmt.Errorf("intbridge/daemon: replay: %w", err)
	}
	defer f.Close()
	port := d.cfg.ReplayPort
	if port == 0 {
		port = 32766
	}
	st, err := intbridge.Replay(f, port, func(payload []byte, ts time.Time) error {
		d.handle(dec, payload, ts)
		return nil
	})
	if err != nil {
		return fmt.Errorf("intbridge/daemon: replay %s: %w", d.cfg.Replay, err)
	}
	if d.rep != nil {
		err = d.rep.Flush()
	}
	d.mu.Lock()
	c := d.c
	d.mu.Unlock()
	d.log.Info("replayed", "file", d.cfg.Replay, "packets", st.Packets, "reports", st.Reports, "skipped", st.Skipped, "records", c.Records, "events", c.Events)
	return err
}

// handle runs one datagram through its input's decoder, the reporter and
// the analytics. The inputs share the analytics under d.mu.
func (d *Daemon) handle(dec Decoder, payload []byte, now time.Time) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.c.Datagrams++
	reps, recs, err := dec.Decode(payload, now)
	if err != nil {
		d.c.Malformed++
		d.log.Debug("malformed", "err", err)
		return
	}
	for i := range reps {
		d.send(&reps[i])
	}
	for i := range recs {
		d.c.Records++
		d.agg.Add(&recs[i])
		d.events = d.det.Observe(&recs[i], d.events[:0])
		for j := range d.events {
			d.event(&d.events[j])
		}
	}
}

func (d *Daemon) send(r *dta.Report) {
	if d.rep == nil {
		return
	}
	if err := d.rep.Send(r); err != nil {
		d.c.SendErrors++
		return
	}
	d.c.Reports++
}

func (d *Daemon) event(e *intbridge.Event) {
	d.c.Events++
	d.seq++
	if len(d.ring) < d.cfg.Events {
		d.ring = append(d.ring, toJSON(d.seq, e))
	} else {
		// Full: overwrite the oldest.
		d.ring[d.head] = toJSON(d.seq, e)
		d.head = (d.head + 1) % len(d.ring)
		d.c.EventsOver++
	}
	if d.influx != nil {
		if n := len(d.lines); n < maxPending {
			d.lines = intbridge.AppendEventLine(d.lines, e)
			d.nlines++
		} else {
			d.c.InfluxDropped++
		}
	}
	if d.cfg.EventList != 0 && d.rep != nil {
		b := intbridge.AppendEventEntry(d.entry[:0], e)
		r := dta.Report{Header: dta.Header{Opcode: dta.OpAppend}, Append: dta.Append{ListID: d.cfg.EventList, Data: b}}
		if err := d.rep.Send(&r); err != nil {
			d.c.SendErrors++
			return
		}
		d.c.EventsSent++
	}
}

// pushInflux sends the pending event lines; lines a failed write held are
// lost and counted.
func (d *Daemon) pushInflux(ctx context.Context) {
	d.mu.Lock()
	lines, n := d.lines, d.nlines
	d.lines, d.nlines = nil, 0
	d.mu.Unlock()
	if n == 0 {
		return
	}
	err := d.influx.Write(ctx, lines)
	d.mu.Lock()
	if err != nil {
		d.c.InfluxErrors++
		d.c.InfluxDropped += n
	} else {
		d.c.InfluxLines += n
	}
	d.mu.Unlock()
	if err != nil {
		d.log.Warn("influxdb", "lines", n, "err", err)
	}
}

// eventJSON is an event as the API gives it.
type eventJSON struct {
	Seq    uint64    `json:"seq"`
	Time   time.Time `json:"time"`
	Metric string    `json:"metric"`
	Kind   string    `json:"kind"`
	Flow   string    `json:"flow,omitempty"`
	Tuple  string    `json:"tuple,omitempty"`
	Switch *uint32   `json:"switch,omitempty"`
	Queue  *uint8    `json:"queue,omitempty"`
	Port   *uint32   `json:"port,omitempty"`
	Hop    *uint8    `json:"hop,omitempty"`
	// Old and New are the values in Unit; a path event has none, its
	// paths' node IDs instead.
	Old     *uint32  `json:"old,omitempty"`
	New     *uint32  `json:"new,omitempty"`
	Unit    string   `json:"unit,omitempty"`
	OldPath []uint32 `json:"old_path,omitempty"`
	NewPath []uint32 `json:"new_path,omitempty"`
}

func toJSON(seq uint64, e *intbridge.Event) eventJSON {
	j := eventJSON{Seq: seq, Time: e.Time.UTC(), Metric: e.Metric.String(), Kind: e.Kind.String()}
	if e.Metric != intbridge.MetricPath {
		old, nw := e.Old, e.New
		j.Old, j.New, j.Unit = &old, &nw, e.Metric.Unit()
	}
	sw, q, port, hop := e.Switch, e.Queue, e.Port, e.Hop
	switch e.Metric {
	case intbridge.MetricPath, intbridge.MetricFlowLatency, intbridge.MetricHopLatency:
		j.Flow = fmt.Sprintf("%#08x", e.Flow)
		if e.Tuple.Src.IsValid() {
			j.Tuple = tupleString(e)
		}
		if e.Metric == intbridge.MetricHopLatency {
			j.Switch, j.Hop = &sw, &hop
		} else {
			j.OldPath = append([]uint32{}, e.OldPath.Slice()...)
			j.NewPath = append([]uint32{}, e.NewPath.Slice()...)
		}
	case intbridge.MetricLinkUtilization:
		j.Switch, j.Port = &sw, &port
	default:
		j.Switch, j.Queue = &sw, &q
	}
	return j
}

func tupleString(e *intbridge.Event) string {
	t := &e.Tuple
	return fmt.Sprintf("%s->%s proto %d", netip.AddrPortFrom(t.Src, t.SrcPort), netip.AddrPortFrom(t.Dst, t.DstPort), t.Proto)
}

// every runs f every period until ctx is done, in a goroutine wg waits
// for.
func every(ctx context.Context, wg *sync.WaitGroup, period time.Duration, f func()) {
	wg.Add(1)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(period)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
				f()
			}
		}
	}()
}
