package translator

// heldTokens holds the wide reports an instance keeps back, up to per for
// each of n slots (a postcard cache entry's hops not yet written, an
// Append list's pending entries), to be settled when their write is
// acknowledged: one array while n·per is at most maxTrackedEntries, a map
// by slot beyond, so that a large cache or layout costs memory for the
// reports held rather than for every slot, and its reports are settled by
// their writes like any other (none is acknowledged on being taken).
type heldTokens struct {
	per    int
	dense  []token // slot·per + i
	sparse map[int][]token
}

func newHeldTokens(n, per int) *heldTokens {
	if n*per <= maxTrackedEntries {
		return &heldTokens{per: per, dense: make([]token, n*per)}
	}
	return &heldTokens{per: per, sparse: make(map[int][]token)}
}

// set holds t as report i (< per) of slot.
func (h *heldTokens) set(slot, i int, t token) {
	if h.dense != nil {
		h.dense[slot*h.per+i] = t
		return
	}
	s := h.sparse[slot]
	for len(s) <= i {
		s = append(s, token{})
	}
	s[i] = t
	h.sparse[slot] = s
}

// take returns the first n reports of slot (empty tokens where none was
// held) and forgets every report of slot. The slice is valid until the
// next set.
func (h *heldTokens) take(slot, n int) []token {
	if h.dense != nil {
		return h.dense[slot*h.per:][:n]
	}
	s := h.sparse[slot]
	delete(h.sparse, slot)
	return s[:min(n, len(s))]
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
