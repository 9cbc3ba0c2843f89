package export

import (
	"fmt"
	"io"
	"strconv"

	"github.com/dtakit/dtakit/primitive"
)

// Store exports s, a snapshot of a primitive's Store, queried with
// redundancy n for keys (nil: the keys s lists itself), through Rows: the
// built-in primitives' Stores pass the rows of docs/DTA-WIRE.md section
// 8.8's schemas, with Options.Delta as their query's primitive.ParamDelta.
// An Append store is exported from its readers (Append).
func Store(out io.Writer, s primitive.Store, n int, keys Keys, m Meta, o Options) (Stats, error) {
	if s == nil {
		return Stats{}, fmt.Errorf("export.Store: %w: nil store", ErrArgument)
	}
	o = o.withDefaults()
	q := primitive.Query{N: n, Params: map[string]string{primitive.ParamDelta: strconv.FormatFloat(o.Delta, 'g', -1, 64)}}
	if keys != nil {
		q.Keys = []uint32{}
		buf := make([]uint32, batch)
		for {
			c, err := keys.Next(buf)
			if err != nil {
				return Stats{}, fmt.Errorf("export.Store: %w", err)
			}
			if c == 0 {
				break
			}
			q.Keys = append(q.Keys, buf[:c]...)
		}
	}
	return Rows(out, s, q, m, o)
}

// StoreKeys returns the keys s, a primitive's Store, lists with
// redundancy n, each once, as the first column of its rows (read at the
// first Next), for the keys of a primitive that shares its key space. A
// store that cannot list its keys fails Next with an error wrapping
// primitive.ErrUnsupported.
func StoreKeys(s primitive.Store, n int) Keys {
	return &rowKeys{s: s, n: n}
}

// rowKeys are the keys of a store's rows.
type rowKeys struct {
	s    primitive.Store
	n    int
	keys []uint32
	read bool
	err  error
	next int
}

func (k *rowKeys) Next(buf []uint32) (int, error) {
	if !k.read {
		k.read = true
		k.err = k.s.Rows(primitive.Query{N: k.n}, func(row []any) error {
			key, ok := row[0].(uint32)
			if !ok {
				return fmt.Errorf("%w: the store's rows start with a %T, not a key", primitive.ErrUnsupported, row[0])
			}
			k.keys = append(k.keys, key)
			return nil
		})
	}
	if k.err != nil {
		return 0, k.err
	}
	c := copy(buf, k.keys[k.next:])
	k.next += c
	return c, nil
}

func (k *rowKeys) Progress() (uint64, uint64) { return uint64(k.next), uint64(len(k.keys)) }
