// Package export writes an epoch of a collector's memory as Parquet files,
// for the engines built to analyse history (DuckDB, ClickHouse, Spark,
// pandas): one file per primitive instance and epoch, one row per key, hop
// or entry, with the epoch, the collector, the instance and the epoch's time
// range in every row (constant columns cost a few bytes once dictionary- and
// run-length-encoded) and in the file's key-value metadata. The schemas are
// docs/DTA-WIRE.md section 8.9's.
//
// The four exporters share one shape, Primitive(w, source, Meta, Options):
//
//	KeyWrite(w, store, n, keys, meta, opts)     key, value, copies, matches, verdict
//	KeyIncrement(w, store, n, keys, meta, opts) key, estimate, error_bound
//	Postcard(w, store, table, keys, meta, opts) key, hop, value, verdict
//	Append(w, readers, meta, opts)              list, position, entry
//
// Export from a snapshot (the primitives' Store.Snapshot) so the translator
// keeps writing the next epoch while the file is written. Writing streams:
// rows are decoded a batch at a time and flushed a row group at a time, so
// memory is bounded by Options.RowGroupRows whatever the region's size.
//
// Keys: Key-Increment counters and Postcarding chunks do not hold their
// keys, so their exporters take the caller's key set. A Key-Write slot's
// checksum names its key (tofino.KeyRecoverer), so KeyWrite with nil keys
// exports every key that has a verifying copy, found by keywrite's
// Store.Scan, with the vote's verdict; given keys, it exports exactly those
// (a key with no copy left is a row with verdict "not found").
package export

import (
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"time"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/compress"
	"github.com/parquet-go/parquet-go/compress/zstd"

	"github.com/dtakit/dtakit/appendlist"
	"github.com/dtakit/dtakit/keyincr"
	"github.com/dtakit/dtakit/keywrite"
	"github.com/dtakit/dtakit/postcard"
)

// Errors returned by this package, wrapped with what was wrong.
var (
	// ErrArgument: an exporter's argument is invalid (redundancy, delta,
	// a nil store).
	ErrArgument = errors.New("export: invalid argument")
	// ErrWrite: the Parquet writer or the output failed.
	ErrWrite = errors.New("export: write failed")
)

// Meta names the epoch a file holds.
type Meta struct {
	Epoch      uint64    // the epoch's number, increasing
	Collector  string    // the collector's name (its address, by default)
	Instance   int       // the instance's index on the collector
	Start, End time.Time // the epoch's time range
}

// Options tune an export. The zero value is the defaults.
type Options struct {
	// RowGroupRows is the rows per row group (default DefaultRowGroupRows):
	// the writer holds one row group in memory before it flushes it.
	RowGroupRows int
	// Compression is the column codec (default zstd at its fastest level;
	// see DefaultCompression).
	Compression compress.Codec
	// Delta is the probability with which Key-Increment's error_bound may
	// be exceeded (default 0.01).
	Delta float64
	// Progress, when set, is called after every batch with the work done.
	Progress func(Progress)
}

// DefaultRowGroupRows is the default row group: files of 2^16 to 2^20-row
// groups measured within 0.5 % of each other in size and speed
// (BenchmarkCodecs), so the group is sized for readers (a few MB
// compressed, enough per column chunk for engines to skip by statistics)
// and for the writer's memory, which holds one group.
const DefaultRowGroupRows = 1 << 18

// DefaultCompression is zstd at its fastest level: on Key-Write exports
// (BenchmarkCodecs) its files were 20 % smaller than snappy's and 5 times
// smaller than uncompressed ones, for about 7 % more time than either;
// zstd's default level gained nothing more.
var DefaultCompression compress.Codec = &zstd.Codec{Level: zstd.SpeedFastest}

// Progress reports an export under way: Done of Total units of its source
// (slots scanned, keys queried or entries read) and the rows written.
type Progress struct {
	Done, Total uint64
	Rows        uint64
}

// Stats sums up a finished export.
type Stats struct {
	Rows uint64
	// Lost counts Append entries a lapping writer overwrote unread.
	Lost uint64
}

// Keys is where a keyed export takes its keys from.
type Keys interface {
	// Next fills buf with the next keys and returns how many: 0 and nil
	// at the end.
	Next(buf []uint32) (int, error)
	// Progress returns the work done and in all, in the source's units
	// (keys, or slots scanned).
	Progress() (done, total uint64)
}

// KeyList returns the keys of a slice, in order.
func KeyList(keys []uint32) Keys { return &keyList{keys: keys} }

type keyList struct {
	keys []uint32
	next int
}

func (k *keyList) Next(buf []uint32) (int, error) {
	c := copy(buf, k.keys[k.next:])
	k.next += c
	return c, nil
}

func (k *keyList) Progress() (uint64, uint64) { return uint64(k.next), uint64(len(k.keys)) }

// ScanKeys returns the keys that have a verifying copy among their first n
// in a Key-Write store, found by Store.Scan, each once. Use it for the keys
// of another primitive that shares Key-Write's key space (a flow's
// Key-Increment counters, its postcards).
func ScanKeys(s *keywrite.Store, n int) Keys { return &scanKeys{s: s, n: n} }

type scanKeys struct {
	s    *keywrite.Store
	n    int
	next uint64
}

func (k *scanKeys) Next(buf []uint32) (int, error) {
	for k.next < k.s.Layout().Slots {
		c, next, err := k.s.Scan(k.next, k.n, buf)
		k.next = next
		if c > 0 || err != nil {
			return c, err
		}
	}
	return 0, nil
}

func (k *scanKeys) Progress() (uint64, uint64) { return k.next, k.s.Layout().Slots }

// batch is the number of keys or entries decoded between two writes.
const batch = 4096

func (o Options) withDefaults() Options {
	if o.RowGroupRows <= 0 {
		o.RowGroupRows = DefaultRowGroupRows
	}
	if o.Compression == nil {
		o.Compression = DefaultCompression
	}
	if o.Delta == 0 {
		o.Delta = 0.01
	}
	return o
}

func (m Meta) keyValues(primitive string) map[string]string {
	return map[string]string{
		"dtakit.primitive":   primitive,
		"dtakit.epoch":       strconv.FormatUint(m.Epoch, 10),
		"dtakit.collector":   m.Collector,
		"dtakit.instance":    strconv.Itoa(m.Instance),
		"dtakit.epoch_start": m.Start.UTC().Format(time.RFC3339Nano),
		"dtakit.epoch_end":   m.End.UTC().Format(time.RFC3339Nano),
	}
}

// Epoch is the columns every row starts with.
type Epoch struct {
	Epoch     uint64    `parquet:"epoch"`
	Collector string    `parquet:"collector,dict"`
	Instance  int32     `parquet:"instance"`
	Start     time.Time `parquet:"epoch_start,timestamp(microsecond)"`
	End       time.Time `parquet:"epoch_end,timestamp(microsecond)"`
}

func (m Meta) epoch() Epoch {
	return Epoch{Epoch: m.Epoch, Collector: m.Collector, Instance: int32(m.Instance), Start: m.Start.UTC(), End: m.End.UTC()}
}

// KeyWriteRow is a row of a Key-Write export: the answer to a query of Key
// with the export's redundancy and a plurality vote.
type KeyWriteRow struct {
	Epoch
	Key     uint32 `parquet:"key"`
	Value   []byte `parquet:"value,optional"` // null unless verdict is "found"
	Copies  int32  `parquet:"copies"`         // matching copies that hold Value (the vote)
	Matches int32  `parquet:"matches"`        // copies whose checksum matched Key
	Verdict string `parquet:"verdict,dict"`   // found, not found or conflict (keywrite.Status.Verdict)
}

// KeyIncrementRow is a row of a Key-Increment export: Key's count-min
// estimate, which exceeds its true count by at most ErrorBound with
// probability at least 1-Delta (Options.Delta, in the file's metadata).
type KeyIncrementRow struct {
	Epoch
	Key        uint32 `parquet:"key"`
	Estimate   uint64 `parquet:"estimate"`
	ErrorBound uint64 `parquet:"error_bound"`
}

// PostcardRow is a row of a Postcarding export: hop Hop (1..) of flow Key's
// path, one row per hop when the path decodes; a flow whose path does not
// decode is one row with Hop 0, a null Value and the verdict ("not found"
// or "conflict").
type PostcardRow struct {
	Epoch
	Key     uint32  `parquet:"key"`
	Hop     int32   `parquet:"hop"`
	Value   *uint32 `parquet:"value,optional"`
	Verdict string  `parquet:"verdict,dict"`
}

// AppendRow is a row of an Append export: the entry at absolute position
// Position (counted from the list's first entry) of list List.
type AppendRow struct {
	Epoch
	List     uint32 `parquet:"list"`
	Position uint64 `parquet:"position"`
	Entry    []byte `parquet:"entry"`
}

// writer is a GenericWriter with the export's options and error wrapping.
type writer[T any] struct {
	w    *parquet.GenericWriter[T]
	rows []T
	n    uint64
}

func newWriter[T any](out io.Writer, primitive string, m Meta, o Options, kv map[string]string) *writer[T] {
	opts := []parquet.WriterOption{
		parquet.Compression(o.Compression),
		parquet.MaxRowsPerRowGroup(int64(o.RowGroupRows)),
		parquet.CreatedBy("dtakit", "", ""),
	}
	for k, v := range m.keyValues(primitive) {
		opts = append(opts, parquet.KeyValueMetadata(k, v))
	}
	for k, v := range kv {
		opts = append(opts, parquet.KeyValueMetadata(k, v))
	}
	return &writer[T]{w: parquet.NewGenericWriter[T](out, opts...), rows: make([]T, 0, batch)}
}

// flush writes the buffered rows.
func (w *writer[T]) flush() error {
	if len(w.rows) == 0 {
		return nil
	}
	if _, err := w.w.Write(w.rows); err != nil {
		return fmt.Errorf("%w: %w", ErrWrite, err)
	}
	w.n += uint64(len(w.rows))
	clear(w.rows) // drop references into the region
	w.rows = w.rows[:0]
	return nil
}

func (w *writer[T]) close() (uint64, error) {
	if err := w.flush(); err != nil {
		return w.n, err
	}
	if err := w.w.Close(); err != nil {
		return w.n, fmt.Errorf("%w: %w", ErrWrite, err)
	}
	return w.n, nil
}

// KeyWrite exports a Key-Write store queried with redundancy n: the keys
// of keys, or with nil keys ScanKeys(s, n), every key with a verifying copy
// (see the package doc). Value aliases the store until the batch is
// written, so export a snapshot, not a region being written.
func KeyWrite(out io.Writer, s *keywrite.Store, n int, keys Keys, m Meta, o Options) (Stats, error) {
	if s == nil || n < 1 || n > keywrite.MaxRedundancy {
		return Stats{}, fmt.Errorf("export.KeyWrite: %w: store %v, redundancy %d (1..255)", ErrArgument, s != nil, n)
	}
	o = o.withDefaults()
	source := "given"
	if keys == nil {
		keys, source = ScanKeys(s, n), "scanned"
	}
	w := newWriter[KeyWriteRow](out, "keywrite", m, o, map[string]string{"dtakit.redundancy": strconv.Itoa(n), "dtakit.keys": source})
	ep := m.epoch()
	buf := make([]uint32, batch)
	res := make([]keywrite.Result, batch)
	for {
		c, err := keys.Next(buf)
		if err == nil && c > 0 {
			err = s.QueryBatch(buf[:c], n, keywrite.Plurality, res)
		}
		if err != nil {
			return Stats{Rows: w.n}, fmt.Errorf("export.KeyWrite: %w", err)
		}
		if c == 0 {
			break
		}
		for i, k := range buf[:c] {
			r := &res[i]
			row := KeyWriteRow{Epoch: ep, Key: k, Matches: int32(r.Matches), Verdict: r.Status.Verdict()}
			if r.Status == keywrite.Found {
				row.Value, row.Copies = r.Data, int32(r.Votes)
			}
			w.rows = append(w.rows, row)
		}
		if err := w.flush(); err != nil {
			return Stats{Rows: w.n}, fmt.Errorf("export.KeyWrite: %w", err)
		}
		report(o, keys, w.n)
	}
	rows, err := w.close()
	if err != nil {
		err = fmt.Errorf("export.KeyWrite: %w", err)
	}
	return Stats{Rows: rows}, err
}

// KeyIncrement exports the count-min estimates of keys from a Key-Increment
// store queried with redundancy n. error_bound is ε·T, T the epoch's total
// (the store's Total over n) and ε keyincr.Epsilon for Options.Delta: with
// independent copy hashes (the default), an estimate exceeds the true count
// by more than that with probability at most Delta.
func KeyIncrement(out io.Writer, s *keyincr.Store, n int, keys Keys, m Meta, o Options) (Stats, error) {
	o = o.withDefaults()
	if s == nil || keys == nil || n < 1 || n > keyincr.MaxRedundancy || !(o.Delta > 0 && o.Delta < 1) {
		return Stats{}, fmt.Errorf("export.KeyIncrement: %w: store %v, redundancy %d (1..255), delta %v (0..1)", ErrArgument, s != nil && keys != nil, n, o.Delta)
	}
	total := s.Total() / uint64(n)
	bound := uint64(math.Ceil(keyincr.Epsilon(s.Layout().Slots, n, o.Delta) * float64(total)))
	w := newWriter[KeyIncrementRow](out, "keyincrement", m, o, map[string]string{
		"dtakit.redundancy": strconv.Itoa(n),
		"dtakit.delta":      strconv.FormatFloat(o.Delta, 'g', -1, 64),
		"dtakit.total":      strconv.FormatUint(total, 10),
	})
	ep := m.epoch()
	buf := make([]uint32, batch)
	est := make([]uint64, batch)
	for {
		c, err := keys.Next(buf)
		if err == nil && c > 0 {
			err = s.QueryBatch(buf[:c], n, est)
		}
		if err != nil {
			return Stats{Rows: w.n}, fmt.Errorf("export.KeyIncrement: %w", err)
		}
		if c == 0 {
			break
		}
		ks := buf[:c]
		for j, k := range ks {
			w.rows = append(w.rows, KeyIncrementRow{Epoch: ep, Key: k, Estimate: est[j], ErrorBound: bound})
		}
		if err := w.flush(); err != nil {
			return Stats{Rows: w.n}, fmt.Errorf("export.KeyIncrement: %w", err)
		}
		report(o, keys, w.n)
	}
	rows, err := w.close()
	if err != nil {
		err = fmt.Errorf("export.KeyIncrement: %w", err)
	}
	return Stats{Rows: rows}, err
}

// Postcard exports the paths of the flows keys from a Postcarding store,
// decoded against t.
func Postcard(out io.Writer, s *postcard.Store, t *postcard.Table, keys Keys, m Meta, o Options) (Stats, error) {
	if s == nil || t == nil || keys == nil {
		return Stats{}, fmt.Errorf("export.Postcard: %w: store %v, table %v, keys %v", ErrArgument, s != nil, t != nil, keys != nil)
	}
	o = o.withDefaults()
	w := newWriter[PostcardRow](out, "postcard", m, o, nil)
	ep := m.epoch()
	const per = batch / postcard.MaxHops
	buf := make([]uint32, per)
	paths := make([]postcard.Path, per)
	outs := make([]postcard.Outcome, per)
	for {
		c, err := keys.Next(buf)
		if err != nil {
			return Stats{Rows: w.n}, fmt.Errorf("export.Postcard: %w", err)
		}
		if c == 0 {
			break
		}
		ks := buf[:c]
		s.QueryBatch(t, ks, paths, outs)
		for j, k := range ks {
			if outs[j] != postcard.Found {
				w.rows = append(w.rows, PostcardRow{Epoch: ep, Key: k, Verdict: outs[j].String()})
				continue
			}
			p := &paths[j]
			for h := range p.Len {
				w.rows = append(w.rows, PostcardRow{Epoch: ep, Key: k, Hop: int32(h + 1), Value: &p.Hops[h], Verdict: "found"})
			}
		}
		if err := w.flush(); err != nil {
			return Stats{Rows: w.n}, fmt.Errorf("export.Postcard: %w", err)
		}
		report(o, keys, w.n)
	}
	rows, err := w.close()
	if err != nil {
		err = fmt.Errorf("export.Postcard: %w", err)
	}
	return Stats{Rows: rows}, err
}

// Append drains the readers of an Append region: every entry they have not
// read yet is consumed (zeroed in the region, as Reader.Read does) and
// exported, so consecutive exports hold each entry once. Entries a lapping
// writer overwrote unread are counted in Stats.Lost. Use the readers the
// collector's other consumers use, or none: an entry goes to one reader.
func Append(out io.Writer, readers []*appendlist.Reader, entrySize int, m Meta, o Options) (Stats, error) {
	if entrySize <= 0 {
		return Stats{}, fmt.Errorf("export.Append: %w: entry size %d", ErrArgument, entrySize)
	}
	o = o.withDefaults()
	w := newWriter[AppendRow](out, "append", m, o, map[string]string{"dtakit.entry_size": strconv.Itoa(entrySize)})
	ep := m.epoch()
	buf := make([]byte, batch*entrySize)
	var st Stats
	for li, rd := range readers {
		for {
			tail := rd.Tail()
			c, err := rd.Read(buf)
			var lap *appendlist.LapError
			if errors.As(err, &lap) {
				st.Lost += uint64(lap.Lost)
				continue
			}
			if err != nil {
				return Stats{Rows: w.n, Lost: st.Lost}, fmt.Errorf("export.Append: list %d: %w", rd.List(), err)
			}
			if c == 0 {
				break
			}
			// Rows alias buf, which the next Read overwrites: write first.
			for i := range c {
				w.rows = append(w.rows, AppendRow{Epoch: ep, List: rd.List(), Position: tail + uint64(i), Entry: buf[i*entrySize : (i+1)*entrySize]})
			}
			if err := w.flush(); err != nil {
				return Stats{Rows: w.n, Lost: st.Lost}, fmt.Errorf("export.Append: %w", err)
			}
		}
		if o.Progress != nil {
			o.Progress(Progress{Done: uint64(li + 1), Total: uint64(len(readers)), Rows: w.n})
		}
	}
	rows, err := w.close()
	if err != nil {
		err = fmt.Errorf("export.Append: %w", err)
	}
	return Stats{Rows: rows, Lost: st.Lost}, err
}

func report(o Options, keys Keys, rows uint64) {
	if o.Progress != nil {
		done, total := keys.Progress()
		o.Progress(Progress{Done: done, Total: total, Rows: rows})
	}
}
