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
type table struct {
	slots []slot
	keys  []uint64 // by row; ^0 in a row removed
	links []link   // strict: by row, and the sentinel
	ref   []bool   // second chance: by row, touched since the hand passed
	hand  int32
	used  int
	fresh int32   // rows below it have been used
	free  []int32 // rows removed, capacity rows
	mask  uint64
	shift uint
}

// link is a row's neighbours in the strict order, side by side so that a
// splice reads one place per row.
type link struct{ prev, next int32 }

// slot is an index entry: the key beside its row, so that a lookup reads
// one place.
type slot struct {
	key uint64
	row int32 // row+1, 0 empty
}

// newTable returns a table of rows evicting the least recently used.
func newTable(rows int) *table {
	t := newIndex(rows)
	t.links = make([]link, rows+1)
	s := int32(rows)
	t.links[s] = link{s, s}
	return t
}

// newClockTable returns a table of rows evicting by second chance.
func newClockTable(rows int) *table {
	t := newIndex(rows)
	t.ref = make([]bool, rows)
	return t
}

func newIndex(rows int) *table {
	n := 1
	shift := uint(64)
	for n < 2*rows {
		n <<= 1
		shift--
	}
	return &table{slots: make([]slot, n), keys: make([]uint64, rows), mask: uint64(n - 1), shift: shift, free: make([]int32, 0, rows)}
}

func (t *table) strict() bool { return t.links != nil }

func (t *table) rows() int { return len(t.keys) }

func (t *table) home(k uint64) uint64 {
	return (k * 0x9E3779B97F4A7C15) >> t.shift & t.mask
}

// find returns k's row, or -1.
func (t *table) find(k uint64) int32 {
	for i := t.home(k); ; i = (i + 1) & t.mask {
		s := &t.slots[i]
		if s.row == 0 {
			return -1
		}
		if s.key == k {
			return s.row - 1
		}
	}
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
	i := t.home(k)
	for t.slots[i].row != 0 {
		i = (i + 1) & t.mask
	}
	t.slots[i] = slot{key: k, row: row + 1}
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
	i := t.home(t.keys[row])
	for t.slots[i].row != row+1 {
		i = (i + 1) & t.mask
	}
	for j := i; ; {
		j = (j + 1) & t.mask
		s := t.slots[j]
		if s.row == 0 {
			break
		}
		h := t.home(s.key)
		// The entry at j may move to the hole at i unless its home lies
		// cyclically in (i, j].
		if (i <= j && (h <= i || h > j)) || (i > j && h <= i && h > j) {
			t.slots[i] = s
			i = j
		}
	}
	t.slots[i] = slot{}
	if t.strict() {
		t.unlink(row)
	}
	t.keys[row] = ^uint64(0)     // no key of a row removed matches a hint
	t.free = append(t.free, row) // within its capacity: rows
	t.used--
}

// touch makes row the most recent (strict) or marks it (second chance).
func (t *table) touch(row int32) {
	if !t.strict() {
		t.ref[row] = true
		return
	}
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
