package daemon

import (
	"bufio"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/dtakit/dtakit/appendlist"
	"github.com/dtakit/dtakit/collector"
	"github.com/dtakit/dtakit/internal/httpguard"
	"github.com/dtakit/dtakit/internal/netguard"
	"github.com/dtakit/dtakit/primitive"
)

// Daemon is a running collector with its HTTP server.
type Daemon struct {
	name  string
	exp   *exporter // nil unless configured
	cfg   Config
	log   *slog.Logger
	c     *collector.Collector
	insts []*instance
	mu    sync.Mutex // the Append readers
	http  *httpguard.Server
	// batches holds a place for each batch query being answered: the
	// others wait, their bodies unread, so memory is bounded whatever
	// the number of clients.
	batches chan struct{}
}

// maxBatches is the number of batch queries answered at once.
const maxBatches = 4

// New builds the collector and its instances and binds the HTTP address; it
// serves nothing until Run.
func New(cfg Config, log *slog.Logger) (*Daemon, error) {
	cfg.Instances = canonicalPrimitives(cfg.Instances, log)
	if err := cfg.withDefaults(); err != nil {
		return nil, err
	}
	peers, err := netguard.ParsePrefixes("translators", cfg.Translators)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	ccfg := collector.Config{Addr: netip.MustParseAddrPort(cfg.Addr), CMPort: cfg.CMPort, RegionDir: cfg.RegionDir, ReplyPort: cfg.ReplyPort, Translators: peers, Shards: cfg.Shards}
	if cfg.Backend == "verbs" {
		ccfg.Backend = collector.BackendVerbs
	}
	c, err := collector.New(ccfg)
	if err != nil {
		return nil, err
	}
	d := &Daemon{cfg: cfg, log: log, c: c, name: cfg.Name, batches: make(chan struct{}, maxBatches)}
	if cfg.Export != nil {
		if d.exp, err = newExporter(*cfg.Export); err != nil {
			c.Close()
			return nil, err
		}
	}
	for i, ic := range cfg.Instances {
		in := &instance{Instance: ic, index: i}
		if err := in.build(c); err != nil {
			c.Close()
			return nil, err
		}
		d.insts = append(d.insts, in)
	}
	if err := c.Start(); err != nil {
		c.Close()
		return nil, err
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(d)
	mux := d.Handler()
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	if d.http, err = httpguard.Listen(cfg.HTTP, cfg.Config, mux); err != nil {
		c.Close()
		if errors.Is(err, httpguard.ErrExposed) || errors.Is(err, httpguard.ErrConfig) {
			return nil, fmt.Errorf("%w: http: %w", ErrConfig, err)
		}
		return nil, fmt.Errorf("dtacollector: http: %w", err)
	}
	return d, nil
}

// HTTPAddr is the address the HTTP server listens on.
func (d *Daemon) HTTPAddr() net.Addr { return d.http.Addr() }

// Shards returns the number of sockets the software target serves on
// (Config.Shards, its default applied).
func (d *Daemon) Shards() int { return d.cfg.Shards }

// RoCEAddr is the collector's RoCEv2 address.
func (d *Daemon) RoCEAddr() netip.AddrPort { return d.c.Addr() }

// Run serves until ctx is done, then drains: the HTTP server finishes the
// requests under way (up to drain), and the collector closes.
func (d *Daemon) Run(ctx context.Context, drain time.Duration) error {
	errc := make(chan error, 2)
	sctx, stop := context.WithCancel(context.Background())
	defer stop()
	go func() { errc <- d.c.Serve(sctx) }()
	go func() {
		if err := d.http.Serve(); !errors.Is(err, http.ErrServerClosed) {
			errc <- fmt.Errorf("dtacollector: http: %w", err)
			return
		}
		errc <- nil
	}()
	for _, in := range d.insts {
		d.log.Info("instance", "index", in.index, "primitive", in.kind(), "cm_port", in.info.CMPort,
			"bytes", in.info.Length, "restored", in.info.Restored)
	}
	if d.http.Unguarded() {
		d.log.Warn("http beyond loopback without a bearer token or TLS (http_insecure)", "http", d.http.Addr().String())
	}
	d.log.Info("serving", "rocev2", d.c.Addr().String(), "http", d.http.Addr().String(), "tls", d.http.TLS(), "token", d.cfg.TokenFile != "", "backend", d.cfg.Backend)
	if d.exp != nil && d.exp.interval > 0 {
		go d.exportEvery(sctx, d.exp.interval)
	}
	var err error
	select {
	case <-ctx.Done():
		d.log.Info("shutting down")
	case err = <-errc:
		d.log.Error("stopped", "err", err)
	}
	dctx, cancel := context.WithTimeout(context.Background(), drain)
	defer cancel()
	err = errors.Join(err, d.http.Shutdown(dctx))
	stop()
	if d.exp != nil {
		d.exp.close() // waits for an export under way
	}
	err = errors.Join(err, d.c.Close())
	return err
}

// exportEvery exports an epoch every interval until ctx is done.
func (d *Daemon) exportEvery(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		res, err := d.Export(nil)
		if err != nil {
			d.log.Error("export", "err", err)
			continue
		}
		d.log.Info("exported", "epoch", res.Epoch, "dir", res.Dir, "seconds", res.Seconds)
	}
}

// Handler returns the query API's routes (without /metrics), without the
// bearer token check and server limits Run's server adds.
func (d *Daemon) Handler() *http.ServeMux {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { w.Write([]byte("ok\n")) })
	mux.HandleFunc("GET /v1/collector", d.collectorInfo)
	mux.HandleFunc("GET /v1/instances", d.instances)
	mux.HandleFunc("GET /v1/export", func(w http.ResponseWriter, _ *http.Request) {
		if d.exp == nil {
			reply(w, nil, &httpError{http.StatusNotFound, "export is not configured"})
			return
		}
		reply(w, d.exp.status(), nil)
	})
	mux.HandleFunc("POST /v1/export", d.exportRequest)
	mux.HandleFunc("GET /v1/instances/{i}/{prim}", d.query)
	mux.HandleFunc("POST /v1/instances/{i}/{prim}", d.batch)
	return mux
}

type httpError struct {
	status int
	msg    string
}

func (e *httpError) Error() string { return e.msg }

func badRequest(format string, a ...any) error {
	return &httpError{http.StatusBadRequest, fmt.Sprintf(format, a...)}
}

func reply(w http.ResponseWriter, v any, err error) {
	w.Header().Set("Content-Type", "application/json")
	if err != nil {
		status := http.StatusInternalServerError
		var he *httpError
		if errors.As(err, &he) {
			status = he.status
		}
		w.WriteHeader(status)
		v = map[string]string{"error": err.Error()}
	}
	json.NewEncoder(w).Encode(v)
}

func (d *Daemon) instances(w http.ResponseWriter, _ *http.Request) {
	type out struct {
		Index     int    `json:"index"`
		Primitive string `json:"primitive"`
		Kind      string `json:"kind"` // the same as Primitive, for clients that read it
		CMPort    uint16 `json:"cm_port"`
		Bytes     uint32 `json:"bytes"`
		Restored  bool   `json:"restored"`
	}
	var o []out
	for _, in := range d.insts {
		o = append(o, out{in.index, in.kind(), in.kind(), in.info.CMPort, in.info.Length, in.info.Restored})
	}
	reply(w, o, nil)
}

// CollectorInfo is GET /v1/collector's answer.
type CollectorInfo struct {
	Name    string `json:"name"`
	RoCEv2  string `json:"rocev2"`
	Backend string `json:"backend"`
}

func (d *Daemon) collectorInfo(w http.ResponseWriter, _ *http.Request) {
	reply(w, CollectorInfo{Name: d.name, RoCEv2: d.c.Addr().String(), Backend: d.cfg.Backend}, nil)
}

// exportRequest runs an export now; the body, optional, is {"keys": [..]}.
func (d *Daemon) exportRequest(w http.ResponseWriter, r *http.Request) {
	var body struct {
		Keys []uint32 `json:"keys"`
	}
	limit := d.cfg.MaxBatchKeys
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, int64(limit)*16+4096))
	if err := dec.Decode(&body); err != nil && !errors.Is(err, io.EOF) {
		reply(w, nil, bodyError(err, limit))
		return
	}
	if len(body.Keys) > limit {
		reply(w, nil, tooManyKeys(len(body.Keys), limit))
		return
	}
	res, err := d.Export(body.Keys)
	if errors.Is(err, ErrExportBusy) {
		err = &httpError{http.StatusConflict, err.Error()}
	}
	reply(w, res, err)
}

// bodyError is the answer to a request body of keys that did not decode:
// 413 naming the limit when it was too long, 400 otherwise. Bodies are
// read up to 16 bytes a key (ten digits, a separator, spaces) plus 4 KiB.
func bodyError(err error, limit int) error {
	var tooBig *http.MaxBytesError
	if errors.As(err, &tooBig) {
		return &httpError{http.StatusRequestEntityTooLarge, fmt.Sprintf("body larger than %d bytes: a request holds at most %d keys (max_batch_keys)", tooBig.Limit, limit)}
	}
	return badRequest("body: %v", err)
}

func tooManyKeys(n, limit int) error {
	return &httpError{http.StatusRequestEntityTooLarge, fmt.Sprintf("%d keys: a request holds at most %d keys (max_batch_keys)", n, limit)}
}

// instanceFor finds instance {i} serving prim.
func (d *Daemon) instanceFor(r *http.Request) (*instance, error) {
	i, err := strconv.Atoi(r.PathValue("i"))
	if err != nil || i < 0 || i >= len(d.insts) {
		return nil, &httpError{http.StatusNotFound, fmt.Sprintf("no instance %q", r.PathValue("i"))}
	}
	in := d.insts[i]
	prim, _ := primitiveName(r.PathValue("prim")) // old spellings are aliases
	if prim != in.kind() {
		return nil, &httpError{http.StatusNotFound, fmt.Sprintf("instance %d is not a %s instance", i, prim)}
	}
	return in, nil
}

func uintParam(r *http.Request, name string, def uint64, max uint64) (uint64, error) {
	s := r.URL.Query().Get(name)
	if s == "" {
		if def == ^uint64(0) {
			return 0, badRequest("missing %s", name)
		}
		return def, nil
	}
	v, err := strconv.ParseUint(s, 0, 64)
	if err != nil || v > max {
		return 0, badRequest("%s=%q: want an integer up to %d", name, s, max)
	}
	return v, nil
}

// KeyResult is one key's answer, in the same shape for every primitive:
// the key, its status, and the primitive's own fields, present whether or
// not the key was found (Key-Write: data, "" unless found, and votes;
// Key-Increment: count; Postcarding: path, [] unless found). The
// primitive's Store writes it (primitive.Store.Query); a client decodes it
// into a KeyResult.
type KeyResult struct {
	Key uint32 `json:"key"`
	// Status is StatusFound, StatusNotFound or StatusConflict.
	Status string   `json:"status,omitempty"`
	Data   string   `json:"data,omitempty"`  // Key-Write: the value, hex
	Votes  uint8    `json:"votes,omitempty"` // Key-Write: copies that hold it (each tied value's, for a conflict)
	Count  uint64   `json:"count,omitempty"` // Key-Increment: the count-min estimate
	Path   []uint32 `json:"path,omitempty"`  // Postcarding: the hops' values
}

// The statuses of a KeyResult, the same for every primitive.
const (
	// StatusFound: an answer (Key-Increment: a count above zero).
	StatusFound = "found"
	// StatusNotFound: nothing held for the key: no Key-Write copy or
	// Postcarding chunk copy is the key's (never written, or overwritten
	// since), or a Key-Increment count of zero (count-min never counts
	// low, so the key was not counted this epoch).
	StatusNotFound = "not found"
	// StatusConflict: the key's copies hold different values: no answer.
	StatusConflict = "conflict"
)

// answer queries the instance's store for keys with redundancy n: one
// answer per key, up to the first key that fails.
func (in *instance) answer(keys []uint32, n int) ([]any, error) {
	res, err := in.store.Query(primitive.Query{Keys: keys, N: n})
	if err != nil {
		err = badRequest("%v", err)
	}
	return res, err
}

func (d *Daemon) query(w http.ResponseWriter, r *http.Request) {
	in, err := d.instanceFor(r)
	if err != nil {
		reply(w, nil, err)
		return
	}
	if in.list != nil {
		v, err := d.readList(in, r)
		reply(w, v, err)
		return
	}
	key, err := uintParam(r, "key", ^uint64(0), 1<<32-1)
	if err != nil {
		reply(w, nil, err)
		return
	}
	n, err := uintParam(r, "n", uint64(in.Redundancy), 255)
	if err != nil {
		reply(w, nil, err)
		return
	}
	res, err := in.answer([]uint32{uint32(key)}, int(n))
	if err == nil && len(res) != 1 {
		err = fmt.Errorf("dtacollector: %s store: %d answers to one key", in.kind(), len(res))
	}
	if err != nil {
		reply(w, nil, err)
		return
	}
	reply(w, res[0], nil)
}

// batchKeys is the keys a batch query asks the store for at once.
const batchKeys = 256

func (d *Daemon) batch(w http.ResponseWriter, r *http.Request) {
	in, err := d.instanceFor(r)
	if err != nil || in.list != nil {
		if err == nil {
			err = &httpError{http.StatusMethodNotAllowed, "append lists are read with GET"}
		}
		reply(w, nil, err)
		return
	}
	select {
	case d.batches <- struct{}{}:
		defer func() { <-d.batches }()
	case <-r.Context().Done():
		return
	}
	var body struct {
		Keys []uint32 `json:"keys"`
		N    int      `json:"n"`
	}
	limit := d.cfg.MaxBatchKeys
	// Room for limit keys of ten digits with separators and spaces.
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, int64(limit)*16+4096))
	if err := dec.Decode(&body); err != nil {
		reply(w, nil, bodyError(err, limit))
		return
	}
	if len(body.Keys) > limit {
		reply(w, nil, tooManyKeys(len(body.Keys), limit))
		return
	}
	if body.N == 0 {
		body.N = in.Redundancy
	}
	// The first answer decides the status (a bad n fails every key the
	// same way); the rest stream as they are computed.
	var res []any
	if len(body.Keys) > 0 {
		if res, err = in.answer(body.Keys[:1], body.N); err != nil {
			reply(w, nil, err)
			return
		}
	}
	w.Header().Set("Content-Type", "application/json")
	bw := bufio.NewWriterSize(w, 32<<10)
	enc := json.NewEncoder(bw)
	bw.WriteString(`{"results":[`)
	sep := ""
	emit := func(as []any) {
		for _, a := range as {
			bw.WriteString(sep)
			enc.Encode(a)
			sep = ","
		}
	}
	emit(res)
	for i := 1; err == nil && i < len(body.Keys); {
		next := min(i+batchKeys, len(body.Keys))
		res, err = in.answer(body.Keys[i:next], body.N)
		emit(res)
		i = next
	}
	bw.WriteByte(']')
	if err != nil {
		// Too late for a status: the answer says where it stopped.
		msg, _ := json.Marshal(err.Error())
		fmt.Fprintf(bw, `,"error":%s`, msg)
	}
	bw.WriteString("}\n")
	bw.Flush()
}

// ListResult is an Append read's answer.
type ListResult struct {
	List uint32 `json:"list"`
	// Status is StatusFound when Entries holds entries, StatusEmpty when
	// the list has nothing new.
	Status  string   `json:"status"`
	Entries []string `json:"entries"` // hex, in append order; [] when empty
	Count   int      `json:"count"`   // len(Entries)
	// Cursor is the list position the next read starts at: entries read
	// or exported, plus those lost.
	Cursor uint64 `json:"cursor"`
	// Lost counts the entries a lapping writer overwrote before they
	// were read.
	Lost uint64 `json:"lost"`
	// Consumed says whether the read took the entries (the default: the
	// next read returns the ones after them) or peeked (peek=true: they
	// stay for the next read).
	Consumed bool `json:"consumed"`
}

// StatusEmpty: an Append list with nothing new to read.
const StatusEmpty = "empty"

// readList returns the next entries of an Append list, consuming them
// unless peek=true.
func (d *Daemon) readList(in *instance, r *http.Request) (any, error) {
	list, err := uintParam(r, "list", ^uint64(0), uint64(in.Lists-1))
	if err != nil {
		return nil, err
	}
	max, err := uintParam(r, "max", uint64(min(1024, d.cfg.MaxBatchKeys)), uint64(d.cfg.MaxBatchKeys))
	if err != nil {
		return nil, err
	}
	peek := false
	if s := r.URL.Query().Get("peek"); s != "" {
		if peek, err = strconv.ParseBool(s); err != nil {
			return nil, badRequest("peek=%q: want true or false", s)
		}
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	lr, err := d.listReader(in, uint32(list))
	if err != nil {
		return nil, badRequest("%v", err)
	}
	buf := make([]byte, int(max)*in.EntrySize)
	read := lr.rd.Read
	if peek {
		read = lr.rd.Peek
	}
	entries := []string{}
	for len(entries) < int(max) {
		n, err := read(buf[:(int(max)-len(entries))*in.EntrySize])
		var lap *appendlist.LapError
		if errors.As(err, &lap) {
			lr.lost += uint64(lap.Lost)
			continue
		}
		if err != nil {
			return nil, err
		}
		if n == 0 {
			break
		}
		for i := range n {
			entries = append(entries, hex.EncodeToString(buf[i*in.EntrySize:(i+1)*in.EntrySize]))
		}
		if peek {
			break // a peek does not move on: one call returns all it can
		}
	}
	res := ListResult{List: uint32(list), Status: StatusEmpty, Entries: entries, Count: len(entries), Cursor: lr.rd.Tail(), Lost: lr.lost, Consumed: !peek}
	if len(entries) > 0 {
		res.Status = StatusFound
	}
	return res, nil
}

// listReader returns the reader of an Append list, made at first use;
// d.mu is held.
func (d *Daemon) listReader(in *instance, list uint32) (*listReader, error) {
	lr := in.lists[list]
	if lr == nil {
		rd, err := in.list.Reader(list)
		if err != nil {
			return nil, err
		}
		lr = &listReader{rd: rd}
		in.lists[list] = lr
	}
	return lr, nil
}
