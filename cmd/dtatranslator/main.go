// Command dtatranslator runs the software DTA translator as a daemon: DTA
// reports in on UDP, RoCEv2 out to the collectors it discovers through the
// RDMA CM (retrying with backoff until they answer), counters at /metrics in
// the Prometheus format and its state at /v1/translator.
//
//	dtatranslator -config translator.json
//	dtatranslator -report 127.0.0.1:40040 -collectors 127.0.0.11:4791,127.0.0.12:4791 -http 127.0.0.1:8041
//
// The configuration file (every field optional; flags override it):
//
//	{"report": "127.0.0.1:40040", "reporters": ["127.0.0.0/8"], "local": "127.0.0.1:0",
//	 "collectors": ["127.0.0.11:4791"], "cm_port": 40050, "ack_port": 40044,
//	 "ring_size": 16384, "rate_limit": 0, "shards": 2, "append_linger": "2ms",
//	 "postcard_linger": "2ms", "dead_after": "1s",
//	 "http": "127.0.0.1:8041"}
//
// "shards" defaults to 1. The translator runs as many threads of Go code
// (GOMAXPROCS) as it has shards, unless the GOMAXPROCS environment
// variable is set: on a machine it shares with the collector and the
// reporters, as in the README, one shard is the fastest; on a machine of
// its own, give it one shard per core, and reports from several reporters
// are translated side by side (a reporter's reports go to one shard).
//
// Reports are taken from loopback unless -reporters (or "reporters") names
// the reporters' addresses or prefixes. The HTTP address, like the
// collector's, needs a bearer token and TLS beyond loopback
// (-http-token-file, -http-cert and -http-key, or http_token_file,
// http_cert_file and http_key_file), or -http-insecure.
//
// Exit status: 0 after a clean shutdown (SIGINT or SIGTERM: cached postcards
// and partial Append batches are flushed and every packet is acknowledged
// before the QPs are disconnected), 4 when some packets were still
// unacknowledged after -drain, 2 for bad flags or configuration (an HTTP
// address beyond loopback without a token and TLS among them), 1 for any
// other failure.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net/http"
	"net/netip"
	"os"
	"os/signal"
	"runtime"
	"strings"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/dtakit/dtakit/dta"
	"github.com/dtakit/dtakit/internal/app/cli"
	"github.com/dtakit/dtakit/internal/app/cpuprofile"
	"github.com/dtakit/dtakit/internal/app/daemonlog"
	"github.com/dtakit/dtakit/internal/app/threads"
	"github.com/dtakit/dtakit/internal/httpguard"
	"github.com/dtakit/dtakit/internal/jsonconf"
	"github.com/dtakit/dtakit/internal/netguard"
	"github.com/dtakit/dtakit/internal/promname"
	"github.com/dtakit/dtakit/primitive"
	"github.com/dtakit/dtakit/translator"
)

// Config is the configuration file.
type Config struct {
	Report string `json:"report"`
	// Reporters are the addresses or prefixes reports are taken from
	// (default loopback); reports from elsewhere are dropped and counted
	// (dtakit_translator_refused_source_total).
	Reporters  []string `json:"reporters"`
	Local      string   `json:"local"`
	Collectors []string `json:"collectors"`
	CMPort     uint16   `json:"cm_port"`
	// AckPort is the port acks and NACKs are sent to, at each report's
	// source address (default 40044): a reporter's -ack-port.
	AckPort   uint16  `json:"ack_port"`
	RingSize  int     `json:"ring_size"`
	RateLimit float64 `json:"rate_limit"`
	Shards    int     `json:"shards"`
	// AppendLinger is the longest a partial Append batch waits, and
	// PostcardLinger the longest a postcard flow waits for its other hops,
	// before being written, as Go durations ("2ms").
	AppendLinger   string `json:"append_linger"`
	PostcardLinger string `json:"postcard_linger"`
	// DeadAfter is how long a collector's QP may make no progress before
	// it is given up and its pending reports NACKed unconfirmed ("1s").
	DeadAfter string `json:"dead_after"`
	// HTTP is the address of /metrics, /v1/translator and /healthz (none
	// by default). Beyond loopback it needs a bearer token and TLS, or
	// http_insecure.
	HTTP string `json:"http"`
	// The bearer token, the TLS certificate pair and http_insecure.
	httpguard.Config
}

func main() {
	threadsFor = threads.Set
	os.Exit(run(os.Args[1:]))
}

// threadsFor makes the translator's shards the threads that run Go code
// (package threads); main sets it, so that tests running run in-process
// keep their own.
var threadsFor = func(shards int) int { return runtime.GOMAXPROCS(0) }

func run(args []string) int {
	fs := flag.NewFlagSet("dtatranslator", flag.ContinueOnError)
	cli.Usage(fs, synopsis, exitStatus)
	config := fs.String("config", "", "JSON configuration file")
	var o overrides
	fs.StringVar(&o.report, "report", "", "address reports arrive on (default 127.0.0.1:40040)")
	fs.StringVar(&o.reporters, "reporters", "", "addresses or prefixes reports are taken from, comma-separated (default loopback)")
	fs.StringVar(&o.local, "local", "", "RoCEv2 source address (default 127.0.0.1, any port)")
	fs.StringVar(&o.collectors, "collectors", "", "collectors' RoCEv2 addresses, comma-separated, in the choice table's order")
	fs.UintVar(&o.cmPort, "cm-port", 0, "CM port of the collectors' first instance (default 40050)")
	fs.UintVar(&o.ackPort, "ack-port", 0, "port acks and NACKs are sent to at each report's source address (default 40044)")
	fs.StringVar(&o.http, "http", "", "HTTP address for /metrics, /v1/translator and /healthz (none by default)")
	drain := fs.Duration("drain", 5*time.Second, "how long shutdown waits for acknowledgements")
	level := fs.String("log-level", "info", "debug, info, warn or error")
	profile := cpuprofile.Flag(fs)
	var web httpguard.Config
	webFlags := web.Flags(fs)
	if code, ok := cli.Parse(fs, args); !ok {
		return code
	}
	log, err := daemonlog.New(*level)
	if err != nil {
		fmt.Fprintln(os.Stderr, "dtatranslator:", err)
		return 2
	}
	stopProfile, err := profile()
	if err != nil {
		log.Error("profile", "err", err)
		return 1
	}
	defer stopProfile(func(err error) { log.Error("profile", "err", err) })
	var cfg Config
	if *config != "" {
		b, err := os.ReadFile(*config)
		if err == nil {
			err = jsonconf.Decode(*config, b, &cfg)
		}
		if err != nil {
			log.Error("configuration", "file", *config, "err", err)
			return 2
		}
	}
	if err := o.apply(&cfg); err != nil {
		log.Error("configuration", "err", err.Error())
		return 2
	}
	web = cfg.Config
	webFlags()
	cfg.Config = web
	tcfg, err := cfg.translator()
	if err != nil {
		log.Error("configuration", "err", err)
		return 2
	}
	procs := threadsFor(tcfg.Shards)
	t, err := translator.New(tcfg)
	if err != nil {
		log.Error("start", "err", err)
		if errors.Is(err, translator.ErrConfig) {
			return 2
		}
		return 1
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	srv, code := serveHTTP(cfg, t, log)
	if code != 0 {
		t.Close(0)
		return code
	}
	log.Info("translating", "report", t.ReportAddr().String(), "local", t.LocalAddr().String(), "collectors", cfg.Collectors,
		"shards", tcfg.Shards, "gomaxprocs", procs)
	// Start returns once every collector answered or failed; the
	// translator keeps retrying those that failed, with backoff.
	go func() {
		if err := t.Start(ctx); err != nil && ctx.Err() == nil {
			log.Warn("collectors not all connected yet; retrying", "err", err)
		}
		for _, in := range t.Instances() {
			log.Info("instance", "collector", in.Collector, "port", in.Port, "primitive", in.Primitive.String(), "ready", in.Ready)
		}
	}()
	<-ctx.Done()
	log.Info("shutting down", "drain", drain.String())
	code = 0
	if err := t.Close(*drain); err != nil {
		log.Error("shutdown", "err", err)
		code = 4
	}
	c := t.Counters()
	log.Info("stopped", "writes", c.Writes, "fetch_adds", c.FetchAdds, "dropped", c.Dropped, "nacks", c.NACKs, "retransmits", c.Retransmits)
	if srv != nil {
		sctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		srv.Shutdown(sctx)
	}
	return code
}

// overrides are the flags that override the configuration file's fields.
type overrides struct {
	report, reporters, local, collectors, http string
	cmPort, ackPort                            uint
}

// apply overrides cfg's fields with the flags given.
func (o overrides) apply(cfg *Config) error {
	if o.report != "" {
		cfg.Report = o.report
	}
	if o.local != "" {
		cfg.Local = o.local
	}
	if o.reporters != "" {
		cfg.Reporters = strings.Split(o.reporters, ",")
	}
	if o.collectors != "" {
		cfg.Collectors = strings.Split(o.collectors, ",")
	}
	if o.cmPort != 0 {
		if o.cmPort > 65535 {
			return fmt.Errorf("-cm-port %d out of range", o.cmPort)
		}
		cfg.CMPort = uint16(o.cmPort)
	}
	if o.ackPort != 0 {
		if o.ackPort > 65535 {
			return fmt.Errorf("-ack-port %d out of range", o.ackPort)
		}
		cfg.AckPort = uint16(o.ackPort)
	}
	if o.http != "" {
		cfg.HTTP = o.http
	}
	return nil
}

// serveHTTP serves t's HTTP endpoints when cfg names an address. On a
// failure it has logged it and returns the exit status.
func serveHTTP(cfg Config, t *translator.Translator, log *slog.Logger) (*httpguard.Server, int) {
	if cfg.HTTP == "" {
		return nil, 0
	}
	srv, err := httpguard.Listen(cfg.HTTP, cfg.Config, handler(t))
	if err != nil {
		log.Error("http", "err", err)
		if errors.Is(err, httpguard.ErrExposed) || errors.Is(err, httpguard.ErrConfig) {
			return nil, 2
		}
		return nil, 1
	}
	if srv.Unguarded() {
		log.Warn("http beyond loopback without a bearer token or TLS (http_insecure)", "http", srv.Addr().String())
	}
	go srv.Serve()
	log.Info("http", "addr", srv.Addr().String(), "tls", srv.TLS(), "token", cfg.TokenFile != "")
	return srv, 0
}

// translator checks cfg and turns it into the translator's.
func (cfg Config) translator() (translator.Config, error) {
	var tc translator.Config
	var err error
	if cfg.Report != "" {
		if tc.ReportAddr, err = netip.ParseAddrPort(cfg.Report); err != nil {
			return tc, fmt.Errorf("report address: %w", err)
		}
	}
	if cfg.Local != "" {
		if tc.Local, err = netip.ParseAddrPort(cfg.Local); err != nil {
			return tc, fmt.Errorf("local address: %w", err)
		}
	}
	if tc.Reporters, err = netguard.ParsePrefixes("reporters", cfg.Reporters); err != nil {
		return tc, err
	}
	if len(cfg.Collectors) == 0 {
		return tc, errors.New("no collectors (-collectors or \"collectors\")")
	}
	for _, s := range cfg.Collectors {
		a, err := netip.ParseAddrPort(strings.TrimSpace(s))
		if err != nil {
			return tc, fmt.Errorf("collector address: %w", err)
		}
		tc.Collectors = append(tc.Collectors, a)
	}
	if cfg.RingSize < 0 || cfg.RateLimit < 0 || cfg.Shards < 0 {
		return tc, fmt.Errorf("ring_size %d, rate_limit %g and shards %d must not be negative", cfg.RingSize, cfg.RateLimit, cfg.Shards)
	}
	tc.CMPort, tc.AckPort, tc.RingSize, tc.RateLimit, tc.Shards = cfg.CMPort, cfg.AckPort, cfg.RingSize, cfg.RateLimit, cfg.Shards
	if tc.Shards == 0 {
		tc.Shards = 1 // and one thread: see package threads
	}
	for _, d := range []struct {
		name, v string
		to      *time.Duration
	}{
		{"append_linger", cfg.AppendLinger, &tc.AppendLinger},
		{"postcard_linger", cfg.PostcardLinger, &tc.PostcardLinger},
		{"dead_after", cfg.DeadAfter, &tc.DeadAfter},
	} {
		if d.v == "" {
			continue
		}
		v, err := time.ParseDuration(d.v)
		if err != nil || v <= 0 {
			return tc, fmt.Errorf("%s %q: want a positive duration such as \"2ms\"", d.name, d.v)
		}
		*d.to = v
	}
	return tc, nil
}

// Status is GET /v1/translator.
type Status struct {
	Report    string              `json:"report"`
	Local     string              `json:"local"`
	Counters  translator.Counters `json:"counters"`
	Instances []Instance          `json:"instances"`
}

// Instance is one collector instance in Status.
type Instance struct {
	Collector int    `json:"collector"`
	Port      uint16 `json:"cm_port"`
	Primitive string `json:"primitive"`
	Ready     bool   `json:"ready"`
	Used      bool   `json:"used"`
	Error     string `json:"error,omitempty"`
}

func handler(t *translator.Translator) http.Handler {
	mux := http.NewServeMux()
	reg := prometheus.NewRegistry()
	reg.MustRegister(metrics{t})
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { w.Write([]byte("ok\n")) })
	mux.HandleFunc("GET /v1/translator", func(w http.ResponseWriter, _ *http.Request) {
		st := Status{Report: t.ReportAddr().String(), Local: t.LocalAddr().String(), Counters: t.Counters(), Instances: []Instance{}}
		for _, in := range t.Instances() {
			i := Instance{Collector: in.Collector, Port: in.Port, Primitive: in.Primitive.String(), Ready: in.Ready, Used: in.Used}
			if in.Err != nil {
				i.Error = in.Err.Error()
			}
			st.Instances = append(st.Instances, i)
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(st)
	})
	return mux
}

// metrics exports every translator counter as
// dtakit_translator_<counter>_total. Translator.Counters' Reports counts
// report datagrams, a resend or a duplicate again each time: it is
// dtakit_translator_report_datagrams_total, labelled by primitive, beside
// nacks_total (refused, to be resent) and duplicates_total (resends of
// reports already applied); Translated, each report once, is
// dtakit_translator_reports_total, labelled by primitive.
type metrics struct{ t *translator.Translator }

// byPrimitive returns c's report datagrams and reports translated of the
// primitive op.
func byPrimitive(c *translator.Counters, op dta.Opcode) (reports, translated uint64) {
	if op.IsValid() {
		return c.Reports[op], c.Translated[op]
	}
	return c.RegisteredReports[op], c.RegisteredTranslated[op]
}

func (m metrics) Describe(ch chan<- *prometheus.Desc) { prometheus.DescribeByCollect(m, ch) }

func (m metrics) Collect(ch chan<- prometheus.Metric) {
	c := m.t.Counters()
	promname.Counters(ch, "dtakit_translator", "translator counter", c)
	desc := prometheus.NewDesc("dtakit_translator_report_datagrams_total", "report datagrams decoded, by primitive; each resend and duplicate counts again", []string{"primitive"}, nil)
	translated := prometheus.NewDesc("dtakit_translator_reports_total", "reports translated, by primitive: each once, however many datagrams it took", []string{"primitive"}, nil)
	for _, k := range primitive.Kinds() {
		reports, done := byPrimitive(&c, k.Opcode())
		ch <- prometheus.MustNewConstMetric(desc, prometheus.CounterValue, float64(reports), k.Name())
		ch <- prometheus.MustNewConstMetric(translated, prometheus.CounterValue, float64(done), k.Name())
	}
	var ready float64
	for _, in := range m.t.Instances() {
		if in.Ready {
			ready++
		}
	}
	ch <- prometheus.MustNewConstMetric(prometheus.NewDesc("dtakit_translator_ready_instances", "collector instances ready for reports", nil, nil), prometheus.GaugeValue, ready)
}
