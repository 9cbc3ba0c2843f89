package daemon

import (
	"encoding/json"

	"github.com/dtakit/dtakit/appendlist"
	"github.com/dtakit/dtakit/keyincr"
	"github.com/dtakit/dtakit/keywrite"
	"github.com/dtakit/dtakit/postcard"
)

// typed returns the typed stores of instances 0 to 3, a Key-Write, a
// Key-Increment, a Postcarding and an Append instance (nil where the
// instance is not one).
func typed(d *Daemon) (*keywrite.Store, *keyincr.Store, *postcard.Store, *appendlist.Store) {
	kw, _ := keywrite.StoreOf(d.insts[0].store)
	ki, _ := keyincr.StoreOf(d.insts[1].store)
	var pc *postcard.Store
	var al *appendlist.Store
	if len(d.insts) > 3 {
		pc, _ = postcard.StoreOf(d.insts[2].store)
		al, _ = appendlist.StoreOf(d.insts[3].store)
	}
	return kw, ki, pc, al
}

// one answers one key as GET .../{prim}?key= does, decoded as a client
// would.
func (in *instance) one(prim string, key uint32, n int) (KeyResult, error) {
	var r KeyResult
	if prim != in.kind() {
		return r, badRequest("instance %d is not a %s instance", in.index, prim)
	}
	res, err := in.answer([]uint32{key}, n)
	if err != nil {
		return r, err
	}
	b, err := json.Marshal(res[0])
	if err == nil {
		err = json.Unmarshal(b, &r)
	}
	return r, err
}
