package intbridge

// table is a fixed-size hash index with least-recently-used order over
// rows 0..size-1, whose contents the caller keeps in its own arrays: the
// analytics' tables allocate once, at their full size, so a flood of new
// keys evicts old ones and never grows memory. Open addressing with
// linear probing and backward-shift deletion; the list is threaded
// through prev and next, index size the sentinel.
type table struct {
	slots      []slot
	keys       []uint64 // by row
	prev, next []int32
	used       int
	fresh      int32   // rows below it have been used
	free       []int32 // rows removed, capacity rows
	mask       uint64
	shift      uint
}

// slot is an index entry: the key beside its row, so that a lookup reads
// one place.
type slot struct {
	key uint64
	row int32 // row+1, 0 empty
}

func newTable(rows int) *table {
	n := 1
	shift := uint(64)
	for n < 2*rows {
		n <<= 1
		shift--
	}
	t := &table{slots: make([]slot, n), keys: make([]uint64, rows), prev: make([]int32, rows+1), next: make([]int32, rows+1),
		mask: uint64(n - 1), shift: shift, free: make([]int32, 0, rows)}
	s := int32(rows)
	t.prev[s], t.next[s] = s, s
	return t
}

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
// table is full it first removes the least recent row, returned as
// evicted (else -1), and reuses it.
func (t *table) insert(k uint64) (row, evicted int32) {
	evicted = -1
	if t.used == len(t.keys) {
		evicted = t.oldest()
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
	t.link(row)
	return row, evicted
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
	t.unlink(row)
	t.keys[row] = ^uint64(0)     // no key of a row removed matches a hint
	t.free = append(t.free, row) // within its capacity: rows
	t.used--
}

// touch makes row the most recent.
func (t *table) touch(row int32) {
	s := int32(len(t.keys))
	if t.next[s] == row {
		return
	}
	t.unlink(row)
	t.link(row)
}

// oldest returns the least recent row, or -1 when the table is empty.
func (t *table) oldest() int32 {
	if t.used == 0 {
		return -1
	}
	return t.prev[len(t.keys)]
}

func (t *table) link(row int32) {
	s := int32(len(t.keys))
	t.prev[row], t.next[row] = s, t.next[s]
	t.prev[t.next[s]], t.next[s] = row, row
}

func (t *table) unlink(row int32) {
	p, n := t.prev[row], t.next[row]
	t.next[p], t.prev[n] = n, p
}

// each calls fn with every row from the most to the least recent.
func (t *table) each(fn func(row int32)) {
	s := int32(len(t.keys))
	for r := t.next[s]; r != s; r = t.next[r] {
		fn(r)
	}
}
