package translator

// conn is an instance's connection to its collector, through which its
// primitive's operations go: the software QP (qp.go: rocev2/rc's requester,
// packets through the engine's socket) or the verbs QP (verbs.go: work
// requests to a local RDMA NIC, which runs RC). The instance's conn is set
// where it connects (connect, attachVerbs) and nil while it has none.
type conn interface {
	// ready reports whether the connection takes operations.
	ready() bool
	// room reports whether n more operations fit now; the software QP
	// also applies the rate limit, and counts why not.
	room(e *Engine, n int) bool
	// flushRoom reports whether n more operations fit, whatever the rate
	// limit.
	flushRoom(n int) bool
	// write posts one RDMA WRITE of data at va; with imm, its last packet
	// carries the immediate. The caller checked the region's bounds.
	write(e *Engine, va uint64, rkey uint32, data []byte, imm bool, immData uint32)
	// fetchAdd posts one FETCH_ADD of add to the counter at va.
	fetchAdd(e *Engine, va uint64, rkey uint32, add uint64)
	// shareTail says whether the operations posted next are copies of one
	// report (rc.Requester.ShareTail; the NIC has no use for it).
	shareTail(on bool)
	// pend records that t's report is applied once the last operation
	// posted is acknowledged (software) or completed (verbs).
	pend(t token)
	// tick settles what completed since the last tick (the software QP's
	// acknowledgements settle as they come: nothing to do).
	tick(e *Engine)
	// idle reports whether everything posted was acknowledged or
	// completed; a connection in error is idle (what it had is lost).
	idle() bool
}

var (
	_ conn = (*qp)(nil)
	_ conn = (*verbsQP)(nil)
)
