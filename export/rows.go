package export

import (
	"fmt"
	"io"
	"slices"

	"github.com/parquet-go/parquet-go"

	"github.com/dtakit/dtakit/primitive"
)

// Rows exports the rows a primitive's Store passes for q (its Rows and
// Columns). Each row has the epoch's columns (Epoch's) and the Store's
// columns, by the Store's names; the file's dtakit.primitive metadata is
// the primitive's name, and a primitive.Annotator's Annotate adds its own.
// Columns are ordered by name in the file (readers select them by name).
// A Bytes or NullUint32 column is optional: a nil value is null.
func Rows(out io.Writer, s primitive.Store, q primitive.Query, m Meta, o Options) (Stats, error) {
	if s == nil {
		return Stats{}, fmt.Errorf("export.Rows: %w: nil store", ErrArgument)
	}
	cols := s.Columns()
	g := parquet.Group{
		"epoch":       parquet.Uint(64),
		"collector":   parquet.Encoded(parquet.String(), &parquet.RLEDictionary),
		"instance":    parquet.Int(32),
		"epoch_start": parquet.Timestamp(parquet.Microsecond),
		"epoch_end":   parquet.Timestamp(parquet.Microsecond),
	}
	for _, c := range cols {
		n, ok := columnNode(c.Type)
		if _, dup := g[c.Name]; dup || !ok || c.Name == "" {
			return Stats{}, fmt.Errorf("export.Rows: %w: column %q of type %d", ErrArgument, c.Name, c.Type)
		}
		g[c.Name] = n
	}
	o = o.withDefaults()
	name := s.Layout().Kind().Name()
	schema := parquet.NewSchema(name, g)
	opts := []parquet.WriterOption{schema,
		parquet.Compression(o.Compression),
		parquet.MaxRowsPerRowGroup(int64(o.RowGroupRows)),
		parquet.CreatedBy("dtakit", "", ""),
	}
	kv := m.keyValues(name)
	if a, ok := s.(primitive.Annotator); ok {
		more, err := a.Annotate(q)
		if err != nil {
			return Stats{}, fmt.Errorf("export.Rows: %w", err)
		}
		for k, v := range more {
			kv[k] = v
		}
	}
	for k, v := range kv {
		opts = append(opts, parquet.KeyValueMetadata(k, v))
	}
	// index[i] is the file's column of the row's value i: the epoch's
	// five, then the Store's.
	names := []string{"epoch", "collector", "instance", "epoch_start", "epoch_end"}
	for _, c := range cols {
		names = append(names, c.Name)
	}
	sorted := slices.Sorted(slices.Values(names))
	index := make([]int, len(names))
	for i, n := range names {
		index[i], _ = slices.BinarySearch(sorted, n)
	}
	ep := m.epoch()
	head := []parquet.Value{
		parquet.Int64Value(int64(ep.Epoch)), parquet.ByteArrayValue([]byte(ep.Collector)), parquet.Int32Value(ep.Instance),
		parquet.Int64Value(ep.Start.UnixMicro()), parquet.Int64Value(ep.End.UnixMicro()),
	}
	w := parquet.NewWriter(out, opts...)
	rows := make([]parquet.Row, 0, batch)
	var n uint64
	flush := func() error {
		if _, err := w.WriteRows(rows); err != nil {
			return fmt.Errorf("%w: %w", ErrWrite, err)
		}
		n += uint64(len(rows))
		rows = rows[:0]
		return nil
	}
	err := s.Rows(q, func(row []any) error {
		if len(row) != len(cols) {
			return fmt.Errorf("%w: a row of %d values for %d columns", ErrArgument, len(row), len(cols))
		}
		r := make(parquet.Row, len(names))
		for i, v := range head {
			r[index[i]] = v.Level(0, 0, index[i])
		}
		for i, v := range row {
			pv, err := columnValue(cols[i], v)
			if err != nil {
				return err
			}
			r[index[5+i]] = pv.Level(0, definition(cols[i].Type, pv), index[5+i])
		}
		if rows = append(rows, r); len(rows) == cap(rows) {
			return flush()
		}
		return nil
	})
	if err == nil {
		err = flush()
	}
	if err == nil {
		if err = w.Close(); err != nil {
			err = fmt.Errorf("%w: %w", ErrWrite, err)
		}
	}
	if err != nil {
		return Stats{Rows: n}, fmt.Errorf("export.Rows: %w", err)
	}
	if o.Progress != nil {
		o.Progress(Progress{Done: n, Total: n, Rows: n})
	}
	return Stats{Rows: n}, nil
}

// columnNode is the Parquet node of a column type.
func columnNode(t primitive.ColumnType) (parquet.Node, bool) {
	switch t {
	case primitive.Uint32:
		return parquet.Uint(32), true
	case primitive.Uint64:
		return parquet.Uint(64), true
	case primitive.Bytes:
		return parquet.Optional(parquet.Leaf(parquet.ByteArrayType)), true
	case primitive.String:
		return parquet.Encoded(parquet.String(), &parquet.RLEDictionary), true
	case primitive.Bool:
		return parquet.Leaf(parquet.BooleanType), true
	case primitive.Int32:
		return parquet.Int(32), true
	case primitive.NullUint32:
		return parquet.Optional(parquet.Uint(32)), true
	}
	return nil, false
}

// definition is a value's definition level: 1 for a value of an optional
// column present.
func definition(t primitive.ColumnType, v parquet.Value) int {
	if (t == primitive.Bytes || t == primitive.NullUint32) && !v.IsNull() {
		return 1
	}
	return 0
}

// columnValue converts a row's value to its column's Parquet value; the
// bytes are copied (rows are reused).
func columnValue(c primitive.Column, v any) (parquet.Value, error) {
	ok := false
	var pv parquet.Value
	switch c.Type {
	case primitive.Uint32:
		var x uint32
		x, ok = v.(uint32)
		pv = parquet.Int32Value(int32(x))
	case primitive.Uint64:
		var x uint64
		x, ok = v.(uint64)
		pv = parquet.Int64Value(int64(x))
	case primitive.Bytes:
		var x []byte
		if x, ok = v.([]byte); ok {
			pv = parquet.NullValue()
			if x != nil {
				pv = parquet.ByteArrayValue(slices.Clone(x))
			}
		}
	case primitive.String:
		var x string
		x, ok = v.(string)
		pv = parquet.ByteArrayValue([]byte(x))
	case primitive.Bool:
		var x bool
		x, ok = v.(bool)
		pv = parquet.BooleanValue(x)
	case primitive.Int32:
		var x int32
		x, ok = v.(int32)
		pv = parquet.Int32Value(x)
	case primitive.NullUint32:
		var x uint32
		if x, ok = v.(uint32); ok {
			pv = parquet.Int32Value(int32(x))
		} else if ok = v == nil; ok {
			pv = parquet.NullValue()
		}
	}
	if !ok {
		return parquet.Value{}, fmt.Errorf("%w: column %q: a %T", ErrArgument, c.Name, v)
	}
	return pv, nil
}
