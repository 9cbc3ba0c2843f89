package daemon

import (
	"crypto/subtle"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/dtakit/dtakit/intbridge"
	"github.com/dtakit/dtakit/internal/promname"
)

// maxLimit bounds the rows one request returns.
const maxLimit = 10000

// Handler returns the daemon's HTTP API.
func (d *Daemon) Handler() http.Handler {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collector{d})
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "ok\n") })
	mux.HandleFunc("GET /v1/events", d.getEvents)
	mux.HandleFunc("GET /v1/flows", d.getFlows)
	mux.HandleFunc("GET /v1/flows/{key}", d.getFlow)
	mux.HandleFunc("GET /v1/switches", d.getSwitches)
	mux.HandleFunc("GET /v1/rules", d.getRules)
	mux.HandleFunc("PUT /v1/rules", d.putRules)
	return mux
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	json.NewEncoder(w).Encode(v)
}

func fail(w http.ResponseWriter, code int, msg string) {
	writeJSON(w, code, map[string]string{"error": msg})
}

// limit reads ?limit= (default and most maxLimit).
func limit(r *http.Request) (int, error) {
	s := r.URL.Query().Get("limit")
	if s == "" {
		return maxLimit, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 {
		return 0, fmt.Errorf("limit %q: want a positive number", s)
	}
	return min(n, maxLimit), nil
}

func (d *Daemon) getEvents(w http.ResponseWriter, r *http.Request) {
	n, err := limit(r)
	var since uint64
	if s := r.URL.Query().Get("since"); err == nil && s != "" {
		since, err = strconv.ParseUint(s, 10, 64)
	}
	if err != nil {
		fail(w, http.StatusBadRequest, err.Error())
		return
	}
	d.mu.Lock()
	out := make([]eventJSON, 0, min(n, len(d.ring)))
	for i := range d.ring {
		e := &d.ring[(d.head+i)%len(d.ring)]
		if e.Seq > since && len(out) < n {
			out = append(out, *e)
		}
	}
	last := d.seq
	d.mu.Unlock()
	writeJSON(w, http.StatusOK, map[string]any{"last": last, "events": out})
}

// unitsJSON names the units of the values beside it.
type unitsJSON struct {
	Latency string `json:"latency"`
	Queue   string `json:"queue"`
	TxUtil  string `json:"tx_util"`
}

var units = unitsJSON{Latency: intbridge.MetricHopLatency.Unit(), Queue: intbridge.MetricQueueOccupancy.Unit(), TxUtil: intbridge.MetricLinkUtilization.Unit()}

type hopJSON struct {
	Switch  uint32          `json:"switch"`
	Samples uint64          `json:"samples"`
	Latency intbridge.Value `json:"latency"`
	Queue   intbridge.Value `json:"queue"`
	TxUtil  intbridge.Value `json:"tx_util"`
}

type flowJSON struct {
	Key        string          `json:"key"`
	Tuple      string          `json:"tuple"`
	First      time.Time       `json:"first"`
	Last       time.Time       `json:"last"`
	Packets    uint64          `json:"packets"`
	Path       []uint32        `json:"path"`
	Latency    intbridge.Value `json:"latency"`
	MaxLatency uint32          `json:"max_latency"`
	Hops       []hopJSON       `json:"hops"`
	Units      unitsJSON       `json:"units"`
}

func flowOf(f *intbridge.FlowStats) flowJSON {
	j := flowJSON{Key: fmt.Sprintf("%#08x", f.Key), First: f.First.UTC(), Last: f.Last.UTC(), Packets: f.Packets,
		Path: append([]uint32{}, f.Path.Slice()...), Latency: f.Latency, MaxLatency: f.MaxLatency, Hops: []hopJSON{}, Units: units}
	if f.Tuple.Src.IsValid() {
		j.Tuple = tupleString(&intbridge.Event{Tuple: f.Tuple})
	}
	for _, h := range f.Hops[:f.Path.Len] {
		j.Hops = append(j.Hops, hopJSON{Switch: h.Switch, Samples: h.Samples, Latency: h.Latency, Queue: h.Queue, TxUtil: h.TxUtil})
	}
	return j
}

func (d *Daemon) getFlows(w http.ResponseWriter, r *http.Request) {
	n, err := limit(r)
	if err != nil {
		fail(w, http.StatusBadRequest, err.Error())
		return
	}
	d.mu.Lock()
	out := []flowJSON{}
	total := d.agg.Len()
	d.agg.Flows(func(f *intbridge.FlowStats) bool {
		out = append(out, flowOf(f))
		return len(out) < n
	})
	d.mu.Unlock()
	writeJSON(w, http.StatusOK, map[string]any{"flows": total, "rows": out})
}

func (d *Daemon) getFlow(w http.ResponseWriter, r *http.Request) {
	key, err := strconv.ParseUint(r.PathValue("key"), 0, 32)
	if err != nil {
		fail(w, http.StatusBadRequest, fmt.Sprintf("flow key %q: want a 32-bit number", r.PathValue("key")))
		return
	}
	d.mu.Lock()
	f, ok := d.agg.Flow(uint32(key))
	d.mu.Unlock()
	if !ok {
		fail(w, http.StatusNotFound, fmt.Sprintf("flow %#08x is not in the table", key))
		return
	}
	writeJSON(w, http.StatusOK, flowOf(&f))
}

type histJSON struct {
	Bins   []uint32 `json:"bins"`   // upper bounds; Counts has one more, the values above
	Counts []uint64 `json:"counts"` // per bin, not cumulative
	Count  uint64   `json:"count"`
	Sum    uint64   `json:"sum"`
	Min    uint32   `json:"min"`
	Max    uint32   `json:"max"`
}

func histOf(h *intbridge.Histogram) histJSON {
	return histJSON{Bins: h.Bins, Counts: append([]uint64{}, h.Counts...), Count: h.Count, Sum: h.Sum, Min: h.Min, Max: h.Max}
}

func (d *Daemon) getSwitches(w http.ResponseWriter, _ *http.Request) {
	type swJSON struct {
		Switch  uint32   `json:"switch"`
		Packets uint64   `json:"packets"`
		Latency histJSON `json:"latency"`
		Queue   histJSON `json:"queue"`
		TxUtil  histJSON `json:"tx_util"`
	}
	d.mu.Lock()
	out := []swJSON{}
	for _, id := range d.agg.SwitchIDs() {
		s := d.agg.Switch(id)
		out = append(out, swJSON{Switch: id, Packets: s.Packets, Latency: histOf(&s.Latency), Queue: histOf(&s.Queue), TxUtil: histOf(&s.TxUtil)})
	}
	d.mu.Unlock()
	writeJSON(w, http.StatusOK, map[string]any{"switches": out, "units": units})
}

type rulesJSON struct {
	Rules  map[string]Rule `json:"rules"`
	Period string          `json:"period"`
}

func (d *Daemon) rules() rulesJSON {
	j := rulesJSON{Rules: map[string]Rule{}}
	for m := intbridge.MetricPath; int(m) < intbridge.NumMetrics; m++ {
		j.Rules[m.String()] = Rule(d.det.Rule(m))
	}
	j.Period = d.period.String()
	return j
}

func (d *Daemon) getRules(w http.ResponseWriter, _ *http.Request) {
	d.mu.Lock()
	j := d.rules()
	d.mu.Unlock()
	writeJSON(w, http.StatusOK, j)
}

// putRules replaces the rules it names (and the period when given): all
// or none.
func (d *Daemon) putRules(w http.ResponseWriter, r *http.Request) {
	if d.cfg.Token != "" {
		got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		if !ok || subtle.ConstantTimeCompare([]byte(got), []byte(d.cfg.Token)) != 1 {
			fail(w, http.StatusUnauthorized, "a bearer token is required")
			return
		}
	}
	var in rulesJSON
	dec := json.NewDecoder(io.LimitReader(r.Body, 1<<16))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&in); err != nil {
		fail(w, http.StatusBadRequest, err.Error())
		return
	}
	rules := map[intbridge.Metric]intbridge.Rule{}
	for name, rule := range in.Rules {
		m, err := intbridge.ParseMetric(name)
		if err != nil {
			fail(w, http.StatusBadRequest, err.Error())
			return
		}
		rules[m] = intbridge.Rule(rule)
	}
	var period time.Duration
	if in.Period != "" {
		var err error
		if period, err = time.ParseDuration(in.Period); err != nil || period < 0 {
			fail(w, http.StatusBadRequest, fmt.Sprintf("period %q: want a duration ≥ 0", in.Period))
			return
		}
	}
	d.mu.Lock()
	for m, rule := range rules {
		d.det.SetRule(m, rule)
	}
	if in.Period != "" {
		d.det.SetPeriod(period)
		d.period = period
	}
	j := d.rules()
	d.mu.Unlock()
	d.log.Info("rules changed", "rules", len(rules), "period", j.Period)
	writeJSON(w, http.StatusOK, j)
}

// collector exports the daemon's metrics.
type collector struct{ d *Daemon }

func (c collector) Describe(ch chan<- *prometheus.Desc) { prometheus.DescribeByCollect(c, ch) }

func (c collector) Collect(ch chan<- prometheus.Metric) {
	d := c.d
	d.mu.Lock()
	defer d.mu.Unlock()
	d.agg.Collect(ch)
	d.det.Collect(ch)
	promname.Counters(ch, "dtakit_int_daemon", "dtaint:", d.c)
	// Each kind's first input (metric names carry no input label).
	seen := map[string]bool{}
	for i, dec := range d.decs {
		if !seen[d.kinds[i]] {
			seen[d.kinds[i]] = true
			promname.Counters(ch, "dtakit_int_"+strings.ReplaceAll(d.kinds[i], "-", "_"), "input "+d.kinds[i]+":", dec.Counters())
		}
	}
	if d.rep != nil {
		promname.Counters(ch, "dtakit_int_reporter", "dtaint's reporter:", d.rep.Counters())
	}
}
