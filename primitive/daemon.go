package primitive

// The optional interfaces below say what a collector and its daemon need
// to know of a primitive beyond collect.go's: how it is named in a Go
// API's errors, what an export leaves in its region, and where its
// exported keys come from. A primitive without them gets the defaults
// each documents.

// Titled is implemented by a Kind with a Go name (KeyWrite), which the
// collector's errors use for the typed method the instance is added with
// (collector.AddKeyWrite), whichever way it was added. Default: Add.
type Titled interface {
	Kind
	Title() string
}

// Export effects: what an epoch's export leaves in an instance's region
// (the collector daemon's ExportFile.Memory).
const (
	// Kept: the next epoch starts from the current contents (Snapshot
	// copies the region). The default.
	Kept = "kept"
	// Zeroed: the counts moved to the export, the next epoch starts from
	// zero (Key-Increment).
	Zeroed = "zeroed"
	// Drained: the entries exported were read out of the region
	// (Append's lists).
	Drained = "drained"
)

// Exported is implemented by a Kind whose export leaves its region other
// than Kept.
type Exported interface {
	Kind
	AfterExport() string
}

// KeyLister is implemented by a Kind whose Stores list the keys they
// hold (Store.Rows with no keys) in the key space of the flows that other
// primitives' reports name too (Key-Write), so that an export of another
// instance may take its keys from one (the collector daemon's
// keys_from).
type KeyLister interface {
	Kind
	ListsKeys()
}

// KeyBorrower is implemented by a Kind whose Stores cannot list their
// keys (Key-Increment's counters, Postcarding's chunks): an export takes
// them from an instance of a KeyLister.
type KeyBorrower interface {
	Kind
	BorrowsKeys()
}
