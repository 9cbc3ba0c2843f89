package daemon

import (
	"github.com/dtakit/dtakit/keyincr"
	"github.com/dtakit/dtakit/keywrite"
)

// benchStores returns the benchmark daemon's typed stores.
func benchStores(d *Daemon) (*keywrite.Store, *keyincr.Store) {
	kw, ki, _, _ := typed(d)
	return kw, ki
}
