package primitive

// Column types beyond the first five, for the built-in primitives' export
// schemas (docs/DTA-WIRE.md 8.8).
const (
	Int32      ColumnType = Bool + 1 + iota // int32
	NullUint32                              // uint32, or nil: null
)

// Annotator is implemented by a Store whose exported rows carry facts of
// the whole file beyond the epoch's, as Parquet key-value metadata
// (docs/DTA-WIRE.md 8.8): the redundancy q.N, where the keys came from,
// Key-Increment's total and delta.
type Annotator interface {
	Store
	// Annotate returns the metadata of a file of the rows q answers.
	Annotate(q Query) (map[string]string, error)
}

// ParamDelta is the Query.Params entry export sets to the probability
// with which a Store's error bounds may be exceeded (Key-Increment's
// error_bound), a Go float.
const ParamDelta = "delta"
