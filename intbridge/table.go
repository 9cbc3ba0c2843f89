package intbridge

// table is a fixed-size hash index over rows 0..size-1, whose contents
// the caller keeps in its own arrays: the analytics' tables allocate once,
// at their full size, so a flood of new keys evicts old ones and never
// grows memory. Open addressing with linear probing and backward-shift
// deletion.
//
// A table evicts in one of two orders. Strict (newTable): the least
// recently used row, kept in a list threaded through links, index size
// the sentinel, which also gives the rows in order (each, oldest).
// Second chance (newClockTable): touch only marks the row; eviction sweeps
// a hand over the rows, unmarking marked ones, and takes the first
// unmarked. So a row touched or inserted since the hand last passed it is
// never evicted before one that was not. It is for the tables whose order
// nobody reads (the Detector's flows and keys, the Aggregator's switches):
// a touch is one store, not a list splice.
//
// Two tables may share one index (share): each entry then holds a key's
// row in either, so that the second lookup of a key the first just made
// finds its entry in cache. The Detector's and the Aggregator's flow
// tables do (NewAnalytics): a record's flow is probed for once.
type table struct {
	idx   *index
	side  int      // which of an entry's rows is this table's
	keys  []uint64 // by row; ^0 in a row removed
	links []link   // strict: by row, and the sentinel
	ref   []bool   // second chance: by row, touched since the hand passed
	hand  int32
	used  int
	fresh int32   // rows below it have been used
	free  []int32 // rows removed, capacity rows
}

// index is the hash index of one or two tables: open addressing with
// linear probing and backward-shift deletion, power-of-two sized, at most
// half full.
type index struct {
	slots []slot
	mask  uint64
	shift uint
	// recent holds, by a hash of the key, copies of the entries of the
	// keys hashing there last found or inserted (ways of them, the newest
	// first): find reads a key's rows there before probing. A bucket is
	// one cache line, and there are at most maxRecent of them, so a few
	// thousand keys in use stay in cache where their slots, spread over
	// the whole index, would not. A copy's row in a table always holds
	// its key: a table removing a row clears the row from the copies of
	// its key, so find reads no row's key to check it.
	recent []bucket
	rshift uint
}

// ways is the entries a bucket of recent holds.
const ways = 4

type bucket [ways]slot

const maxRecent = 1 << 12

// link is a row's neighbours in the strict order, side by side so that a
// splice reads one place per row.
type link struct{ prev, next int32 }

// slot is an index entry: the key beside its rows, so that a lookup reads
// one place.
type slot struct {
	key uint64
	row [2]int32 // row+1 in each table sharing the index, 0 none; both 0: empty
}

func (s *slot) empty() bool { return s.row == [2]int32{} }

// newTable returns a table of rows evicting the least recently used.
func newTable(rows int) *table {
	t := newRows(rows)
	t.links = make([]link, rows+1)
	s := int32(rows)
	t.links[s] = link{s, s}
	return t
}

// newClockTable returns a table of rows evicting by second chance.
func newClockTable(rows int) *table {
	t := newRows(rows)
	t.ref = make([]bool, rows)
	return t
}

func newRows(rows int) *table {
	return &table{idx: newHashIndex(rows), keys: make([]uint64, rows), free: make([]int32, 0, rows)}
}

// newHashIndex returns an index for keys entries at most.
func newHashIndex(keys int) *index {
	n := 1
	shift := uint(64)
	for n < 2*keys {
		n <<= 1
		shift--
	}
	r, rshift := 1, uint(64)
	for ways*r < keys && r < maxRecent {
		r <<= 1
		rshift--
	}
	return &index{slots: make([]slot, n), mask: uint64(n - 1), shift: shift, recent: make([]bucket, r), rshift: rshift}
}

// recentOf returns k's bucket in recent.
func (x *index) recentOf(k uint64) *bucket {
	return &x.recent[(k*0x9E3779B97F4A7C15)>>x.rshift]
}

// at returns the first of c's ways holding key k, or nil. Find and note
// read the same way: an empty way holds key 0 and no row, so key 0 may
// also be in a later one.
func (c *bucket) at(k uint64) *slot {
	for w := range c {
		if c[w].key == k {
			return &c[w]
		}
	}
	return nil
}

// note records that t holds key k in row: in k's way of bucket c, or in a
// new way, the newest (the oldest dropped).
func (t *table) note(c *bucket, k uint64, row int32) {
	w := c.at(k)
	if w == nil {
		copy(c[1:], c[:ways-1])
		c[0] = slot{key: k}
		w = &c[0]
	}
	w.row[t.side] = row + 1
}

// forget clears t's row from the ways of bucket c holding key k.
func (t *table) forget(c *bucket, k uint64, row int32) {
	for w := range c {
		if c[w].key == k && c[w].row[t.side] == row+1 {
			c[w].row[t.side] = 0
		}
	}
}

// share makes empty tables t and u share one index, u's rows the
// entries' second.
func share(t, u *table) {
	t.idx = newHashIndex(t.rows() + u.rows())
	u.idx, u.side = t.idx, 1
}

func (t *table) strict() bool { return t.links != nil }

func (t *table) rows() int { return len(t.keys) }

func (x *index) home(k uint64) uint64 {
	return (k * 0x9E3779B97F4A7C15) >> x.shift & x.mask
}

// find returns k's slot, or -1.
func (x *index) find(k uint64) int {
	for i := x.home(k); ; i = (i + 1) & x.mask {
		s := &x.slots[i]
		if s.empty() {
			return -1
		}
		if s.key == k {
			return int(i)
		}
	}
}

// find returns k's row, or -1: the row recent holds for k, else the
// index's.
func (t *table) find(k uint64) int32 {
	c := t.idx.recentOf(k)
	if w := c.at(k); w != nil && w.row[t.side] != 0 {
		return w.row[t.side] - 1
	}
	i := t.idx.find(k)
	if i < 0 {
		return -1
	}
	r := t.idx.slots[i].row[t.side] - 1
	if r >= 0 {
		t.note(c, k, r)
	}
	return r
}

// lookup is find, trying row hint first: a row the caller found for k
// before, which still holds it unless it was removed or reused since.
func (t *table) lookup(k uint64, hint int32) int32 {
	if hint >= 0 && hint < t.fresh && t.keys[hint] == k {
		return hint
	}
	return t.find(k)
}

// insert adds k, which must be absent, as the most recent row. When the
// table is full it first removes the row its order gives (victim),
// returned as evicted (else -1), and reuses it.
func (t *table) insert(k uint64) (row, evicted int32) {
	evicted = -1
	if t.used == len(t.keys) {
		evicted = t.victim()
		t.remove(evicted)
	}
	if n := len(t.free); n > 0 {
		row, t.free = t.free[n-1], t.free[:n-1]
	} else {
		row = t.fresh
		t.fresh++
	}
	t.used++
	t.keys[row] = k
	x := t.idx
	i := x.find(k)
	if i < 0 {
		// k is in neither table: a new entry at the end of its probe.
		u := x.home(k)
		for !x.slots[u].empty() {
			u = (u + 1) & x.mask
		}
		i = int(u)
		x.slots[i] = slot{key: k}
	}
	x.slots[i].row[t.side] = row + 1
	t.note(x.recentOf(k), k, row)
	if t.strict() {
		t.link(row)
	} else {
		t.ref[row] = true
	}
	return row, evicted
}

// victim returns the row to evict from a full table: the least recent
// (strict), or the first the hand finds unmarked, unmarking those it
// passes (second chance: at most one turn).
func (t *table) victim() int32 {
	if t.strict() {
		return t.oldest()
	}
	for {
		r := t.hand
		if t.hand++; int(t.hand) == len(t.keys) {
			t.hand = 0
		}
		if !t.ref[r] {
			return r
		}
		t.ref[r] = false
	}
}

// remove deletes row.
func (t *table) remove(row int32) {
	x := t.idx
	k := t.keys[row]
	t.forget(x.recentOf(k), k, row)
	i := x.find(k)
	x.slots[i].row[t.side] = 0
	if x.slots[i].empty() {
		x.delete(uint64(i))
	}
	if t.strict() {
		t.unlink(row)
	}
	t.keys[row] = ^uint64(0)     // no key of a row removed matches a hint
	t.free = append(t.free, row) // within its capacity: rows
	t.used--
}

// delete empties slot i, moving later entries of its probe back.
func (x *index) delete(i uint64) {
	for j := i; ; {
		j = (j + 1) & x.mask
		s := x.slots[j]
		if s.empty() {
			break
		}
		h := x.home(s.key)
		// The entry at j may move to the hole at i unless its home lies
		// cyclically in (i, j].
		if (i <= j && (h <= i || h > j)) || (i > j && h <= i && h > j) {
			x.slots[i] = s
			i = j
		}
	}
	x.slots[i] = slot{}
}

// touch makes row the most recent (strict) or marks it (second chance).
func (t *table) touch(row int32) {
	if !t.strict() {
		t.ref[row] = true
		return
	}
	t.toFront(row)
}

// toFront makes row a strict table's most recent.
func (t *table) toFront(row int32) {
	s := int32(len(t.keys))
	if t.links[s].next == row {
		return
	}
	t.unlink(row)
	t.link(row)
}

// oldest returns a strict table's least recent row, or -1 when the table
// is empty.
func (t *table) oldest() int32 {
	if t.used == 0 {
		return -1
	}
	return t.links[len(t.keys)].prev
}

func (t *table) link(row int32) {
	s := int32(len(t.keys))
	head := t.links[s].next
	t.links[row] = link{s, head}
	t.links[head].prev, t.links[s].next = row, row
}

func (t *table) unlink(row int32) {
	l := t.links[row]
	t.links[l.prev].next, t.links[l.next].prev = l.next, l.prev
}

// each calls fn with every row: from the most to the least recent in a
// strict table, by row in a second-chance one.
func (t *table) each(fn func(row int32)) {
	if !t.strict() {
		for r := range t.fresh {
			if t.keys[r] != ^uint64(0) {
				fn(r)
			}
		}
		return
	}
	s := int32(len(t.keys))
	for r := t.links[s].next; r != s; r = t.links[r].next {
		fn(r)
	}
}
