package translator

// heldTokens holds the wide reports an instance's Translator keeps back,
// up to per for each of n slots (a postcard cache entry's hops not yet
// written, an Append list's pending entries), to be settled when their
// write is acknowledged: one array while n·per is at most
// maxTrackedEntries, a map by slot beyond, so that a large cache or layout
// costs memory for the reports held rather than for every slot, and its
// reports are settled by their writes like any other (none is acknowledged
// on being taken).
type heldTokens struct {
	slots  int
	per    int
	n      []int32 // dense: the reports each slot holds
	dense  []token // slot·per + i
	sparse map[int][]token
}

func newHeldTokens(n, per int) *heldTokens {
	if n*per <= maxTrackedEntries {
		return &heldTokens{slots: n, per: per, n: make([]int32, n), dense: make([]token, n*per)}
	}
	return &heldTokens{slots: n, per: per, sparse: make(map[int][]token)}
}

// valid reports whether slot is one of h's.
func (h *heldTokens) valid(slot int) bool { return slot >= 0 && slot < h.slots }

// add holds t under slot; false when slot holds per reports already, or
// is not one of the n (a Translator that holds more than it said).
func (h *heldTokens) add(slot int, t token) bool {
	if !h.valid(slot) {
		return false
	}
	if h.dense != nil {
		i := int(h.n[slot])
		if i >= h.per {
			return false
		}
		h.dense[slot*h.per+i] = t
		h.n[slot]++
		return true
	}
	s := h.sparse[slot]
	if len(s) >= h.per {
		return false
	}
	h.sparse[slot] = append(s, t)
	return true
}

// count returns how many reports slot holds.
func (h *heldTokens) count(slot int) int {
	if !h.valid(slot) {
		return 0
	}
	if h.dense != nil {
		return int(h.n[slot])
	}
	return len(h.sparse[slot])
}

// take returns the reports of slot and forgets them; the caller clears
// the slice once it has settled them. It is valid until the next add.
func (h *heldTokens) take(slot int) []token {
	if !h.valid(slot) {
		return nil
	}
	if h.dense != nil {
		n := h.n[slot]
		h.n[slot] = 0
		return h.dense[slot*h.per:][:n]
	}
	s := h.sparse[slot]
	delete(h.sparse, slot)
	return s
}

// unconfirmHeld settles every report h holds as unconfirmed (h may be
// nil): their slots' writes will not come.
func (e *Engine) unconfirmHeld(h *heldTokens) {
	if h == nil {
		return
	}
	e.unconfirmTokens(h.dense)
	for _, s := range h.sparse {
		e.unconfirmTokens(s)
	}
}
