package daemon

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dtakit/dtakit/appendlist"
	"github.com/dtakit/dtakit/export"
	"github.com/dtakit/dtakit/internal/hugemem"
	"github.com/dtakit/dtakit/primitive"
)

// ExportConfig turns on epoch export (package export): every Interval, and
// on POST /v1/export, each instance's epoch is written as a Parquet file
// Dir/epoch-<N>/instance-<i>-<primitive>.parquet. An epoch's directory is
// built as Dir/.epoch-<N>.tmp and renamed when every file is complete, so a
// reader that globs epoch-*/*.parquet never sees a partial epoch. Epoch
// numbers go on from the highest already in Dir, across restarts.
type ExportConfig struct {
	Dir string `json:"dir"`
	// Interval is a Go duration ("1m"); empty: only on request.
	Interval string `json:"interval"`
	// Delta and RowGroupRows: see export.Options.
	Delta        float64 `json:"delta"`
	RowGroupRows int     `json:"row_group_rows"`
}

// ErrExportBusy: an export was asked for while another runs.
var ErrExportBusy = errors.New("dtacollector: an export is under way")

// ExportFile is one instance's file of an epoch.
type ExportFile struct {
	Instance  int    `json:"instance"`
	Primitive string `json:"primitive"`
	Path      string `json:"path,omitempty"`
	Rows      uint64 `json:"rows"`
	Lost      uint64 `json:"lost,omitempty"` // Append entries lapped unread
	Bytes     int64  `json:"bytes"`
	Keys      string `json:"keys,omitempty"`    // where the keys came from
	Skipped   string `json:"skipped,omitempty"` // why no file was written
	// Memory says what the export left in the instance's memory: "kept"
	// (Key-Write and Postcarding: the next epoch starts from the current
	// values), "zeroed" (Key-Increment: every counter starts the next
	// epoch from zero) or "drained" (Append: the entries exported are read
	// out of the lists, so GETs do not see them).
	Memory string `json:"memory"`
}

// ExportResult describes a finished epoch export.
type ExportResult struct {
	Epoch   uint64       `json:"epoch"`
	Start   time.Time    `json:"start"`
	End     time.Time    `json:"end"`
	Dir     string       `json:"dir"`
	Files   []ExportFile `json:"files"`
	Seconds float64      `json:"seconds"`
}

// ExportStatus is GET /v1/export's answer: the export under way, if any,
// and the last one finished.
type ExportStatus struct {
	Running  bool          `json:"running"`
	Epoch    uint64        `json:"epoch,omitempty"`
	Instance int           `json:"instance"`
	Done     uint64        `json:"done"`
	Total    uint64        `json:"total"`
	Rows     uint64        `json:"rows"`
	Last     *ExportResult `json:"last,omitempty"`
	Epochs   uint64        `json:"epochs"` // exported since the daemon started
}

// exporter is the daemon's export state.
type exporter struct {
	cfg      ExportConfig
	interval time.Duration
	run      sync.Mutex // one export at a time
	running  atomic.Bool
	progress struct {
		epoch, done, total, rows atomic.Uint64
		instance                 atomic.Int64
	}
	mu     sync.Mutex // guards what follows
	epoch  uint64     // the last epoch number used
	start  time.Time  // the current epoch's start
	last   *ExportResult
	epochs uint64
	failed uint64
	// snaps are the snapshot regions, one per keyed instance, kept across
	// epochs (allocated at the first export).
	snaps map[int]*hugemem.Mem
}

func newExporter(cfg ExportConfig) (*exporter, error) {
	if cfg.Dir == "" {
		return nil, fmt.Errorf("%w: export: dir is required", ErrConfig)
	}
	e := &exporter{cfg: cfg, start: time.Now(), snaps: map[int]*hugemem.Mem{}}
	if cfg.Interval != "" {
		d, err := time.ParseDuration(cfg.Interval)
		if err != nil || d <= 0 {
			return nil, fmt.Errorf("%w: export: interval %q: want a positive Go duration", ErrConfig, cfg.Interval)
		}
		e.interval = d
	}
	if cfg.Delta < 0 || cfg.Delta >= 1 || cfg.RowGroupRows < 0 {
		return nil, fmt.Errorf("%w: export: delta %v (0..1), row_group_rows %d", ErrConfig, cfg.Delta, cfg.RowGroupRows)
	}
	if err := os.MkdirAll(cfg.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("%w: export: %w", ErrConfig, err)
	}
	ents, err := os.ReadDir(cfg.Dir)
	if err != nil {
		return nil, fmt.Errorf("%w: export: %w", ErrConfig, err)
	}
	for _, de := range ents {
		if v, ok := strings.CutPrefix(de.Name(), "epoch-"); ok && de.IsDir() {
			if n, err := strconv.ParseUint(v, 10, 64); err == nil && n > e.epoch {
				e.epoch = n
			}
		}
	}
	return e, nil
}

func (e *exporter) close() {
	e.run.Lock()
	defer e.run.Unlock()
	for _, m := range e.snaps {
		m.Close()
	}
	e.snaps = nil
}

func (e *exporter) status() ExportStatus {
	e.mu.Lock()
	defer e.mu.Unlock()
	s := ExportStatus{Last: e.last, Epochs: e.epochs, Running: e.running.Load()}
	if s.Running {
		p := &e.progress
		s.Epoch, s.Instance, s.Done, s.Total, s.Rows = p.epoch.Load(), int(p.instance.Load()), p.done.Load(), p.total.Load(), p.rows.Load()
	}
	return s
}

// snapshot returns instance i's snapshot memory of size bytes.
func (e *exporter) snapshot(i int, size uint64) ([]byte, error) {
	m := e.snaps[i]
	if m == nil {
		var err error
		if m, err = hugemem.Alloc(int((size + 7) &^ 7)); err != nil {
			return nil, err
		}
		e.snaps[i] = m
	}
	return m.Bytes()[:size], nil
}

// Export ends the current epoch and writes it (see ExportConfig). keys,
// when not nil, are the keys of every keyed instance; otherwise Key-Write
// instances export every key they hold and Key-Increment and Postcarding
// instances the keys of the Key-Write instance their keys_from names (or
// are skipped). It returns ErrExportBusy while another export runs.
func (d *Daemon) Export(keys []uint32) (*ExportResult, error) {
	e := d.exp
	if e == nil {
		return nil, &httpError{404, "export is not configured (the configuration's \"export\")"}
	}
	if !e.run.TryLock() {
		return nil, ErrExportBusy
	}
	defer e.run.Unlock()
	if e.snaps == nil {
		return nil, fmt.Errorf("dtacollector: export: %w", errClosed)
	}
	e.running.Store(true)
	defer e.running.Store(false)
	t0 := time.Now()
	e.mu.Lock()
	epoch, start := e.epoch+1, e.start
	e.mu.Unlock()
	res, err := d.export(epoch, start, keys)
	e.mu.Lock()
	defer e.mu.Unlock()
	if err != nil {
		e.failed++
		return nil, err
	}
	res.Seconds = time.Since(t0).Seconds()
	e.epoch, e.start, e.last = epoch, res.End, res
	e.epochs++
	return res, nil
}

var errClosed = errors.New("the collector is closed")

func (d *Daemon) export(epoch uint64, start time.Time, keys []uint32) (*ExportResult, error) {
	e := d.exp
	e.progress.epoch.Store(epoch)
	// Snapshot every keyed instance back to back, so one moment ends the
	// epoch for all of them; the files are written from the snapshots
	// while the translator writes the next epoch.
	snaps := map[int]primitive.Store{}
	for _, in := range d.insts {
		if in.list != nil {
			continue // drained through its readers instead
		}
		s, err := d.snapshot(in)
		if err != nil {
			return nil, fmt.Errorf("dtacollector: export: snapshot of instance %d: %w", in.index, err)
		}
		snaps[in.index] = s
	}
	end := time.Now()
	res := &ExportResult{Epoch: epoch, Start: start, End: end, Dir: filepath.Join(e.cfg.Dir, fmt.Sprintf("epoch-%06d", epoch))}
	tmp := filepath.Join(e.cfg.Dir, fmt.Sprintf(".epoch-%06d.tmp", epoch))
	os.RemoveAll(tmp) // a crashed export's leftovers
	if err := os.Mkdir(tmp, 0o755); err != nil {
		return nil, fmt.Errorf("dtacollector: export: %w", err)
	}
	for _, in := range d.insts {
		f, err := d.exportInstance(in, epochFiles{tmp: tmp, dir: res.Dir, meta: export.Meta{Epoch: epoch, Collector: d.name, Instance: in.index, Start: start, End: end}, keys: keys, snaps: snaps})
		if err != nil {
			os.RemoveAll(tmp)
			return nil, fmt.Errorf("dtacollector: export: instance %d: %w", in.index, err)
		}
		res.Files = append(res.Files, f)
	}
	if err := os.Rename(tmp, res.Dir); err != nil {
		os.RemoveAll(tmp)
		return nil, fmt.Errorf("dtacollector: export: %w", err)
	}
	return res, nil
}

// epochFiles is what every instance's file of an epoch shares.
type epochFiles struct {
	tmp, dir string // the epoch's directory while written, and after
	meta     export.Meta
	keys     []uint32                // given, or nil
	snaps    map[int]primitive.Store // the keyed instances' snapshots
}

// exportInstance writes instance in's file of the epoch.
func (d *Daemon) exportInstance(in *instance, ef epochFiles) (ExportFile, error) {
	e := d.exp
	e.progress.instance.Store(int64(in.index))
	e.progress.done.Store(0)
	e.progress.total.Store(0)
	opts := export.Options{Delta: e.cfg.Delta, RowGroupRows: e.cfg.RowGroupRows, Progress: func(p export.Progress) {
		e.progress.done.Store(p.Done)
		e.progress.total.Store(p.Total)
		e.progress.rows.Store(p.Rows)
	}}
	f := ExportFile{Instance: in.index, Primitive: in.kind(), Memory: primitive.Kept}
	if k, ok := in.store.Layout().Kind().(primitive.Exported); ok {
		f.Memory = k.AfterExport()
	}
	var ks export.Keys // nil: the store lists its keys
	switch {
	case in.list != nil:
	case ef.keys != nil:
		f.Keys, ks = "given", export.KeyList(ef.keys)
	case in.KeysFrom != nil:
		f.Keys, ks = fmt.Sprintf("instance %d", *in.KeysFrom), export.StoreKeys(ef.snaps[*in.KeysFrom], d.insts[*in.KeysFrom].Redundancy)
	case !listsKeys(ef.snaps[in.index], in.Redundancy):
		f.Skipped = "no keys: give them in the request or name a keywrite instance in keys_from"
		return f, nil
	default:
		f.Keys = "scanned"
	}
	name := fmt.Sprintf("instance-%d-%s.parquet", in.index, f.Primitive)
	path := filepath.Join(ef.tmp, name)
	out, err := os.Create(path)
	if err != nil {
		return f, err
	}
	var st export.Stats
	if in.list != nil {
		st, err = d.exportAppend(in, out, ef.meta, opts)
	} else {
		st, err = export.Store(out, ef.snaps[in.index], in.Redundancy, ks, ef.meta, opts)
	}
	if err == nil {
		err = out.Sync()
	}
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return f, err
	}
	fi, _ := os.Stat(path)
	f.Path, f.Rows, f.Lost, f.Bytes = filepath.Join(ef.dir, name), st.Rows, st.Lost, fi.Size()
	return f, nil
}

// listsKeys reports whether a store lists its keys itself (Rows with no
// keys passes rows, or none, rather than refusing with ErrUnsupported, as
// a count-min sketch or postcard chunks, which hold no keys, do).
func listsKeys(s primitive.Store, n int) bool {
	err := s.Rows(primitive.Query{N: n}, func([]any) error { return errProbe })
	return !errors.Is(err, primitive.ErrUnsupported)
}

var errProbe = errors.New("probe")

// snapshot ends the epoch of an instance's region in its snapshot memory
// (primitive.Store.Snapshot: Key-Increment's counters move there and
// start again from zero) and returns the snapshot's Store.
func (d *Daemon) snapshot(in *instance) (primitive.Store, error) {
	mem, err := d.exp.snapshot(in.index, in.store.Layout().RegionSize())
	if err != nil {
		return nil, err
	}
	return in.store.Snapshot(mem)
}

// exportAppend drains every list through the readers the HTTP API uses, so
// each entry goes to one of them.
func (d *Daemon) exportAppend(in *instance, o *os.File, m export.Meta, opts export.Options) (export.Stats, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	ids := make([]int, 0, in.Lists)
	for l := range in.Lists {
		ids = append(ids, l)
	}
	sort.Ints(ids)
	readers := make([]*appendlist.Reader, 0, len(ids))
	for _, l := range ids {
		lr, err := d.listReader(in, uint32(l))
		if err != nil {
			return export.Stats{}, err
		}
		readers = append(readers, lr.rd)
	}
	return export.Append(o, readers, in.EntrySize, m, opts)
}
