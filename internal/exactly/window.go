// Package exactly holds what lets a wide report be applied once
// (docs/DTA-WIRE.md, "Exactly once"), for the translator and the reporter
// alike: the window of sequence numbers and their arithmetic, the state
// the translator keeps per source, the bounded table of sources, and the
// reporter's store of NACKed reports awaiting their resend's
// acknowledgement.
//
// Times are Unix nanoseconds (int64) and durations time.Duration, as in
// every socket-free core (docs/DTA-WIRE.md, "Timers and sockets").
//
// It is internal: users see its effects through reporter.Config,
// reporter.WideWindow and the translator's counters, and the two sides
// must agree on it, which one package guarantees.
package exactly

// Window is the span of wide sequence numbers behind the newest that a
// translator's source state remembers and a reporter keeps for resending.
const Window = 4096

// Credit is how many numbers beyond its last cumulative ack a reporter
// keeps in flight (docs/DTA-WIRE.md, "Reporter flow control"); the
// translator holds acks so that its sources' unread reports add up to
// about one Credit.
const Credit = Window * 3 / 4

// Diff returns a−b in wide sequence arithmetic: negative when a comes
// before b, for numbers less than 2^31 apart.
func Diff(a, b uint32) int32 { return int32(a - b) }

// Bits holds one bit per number of a Window, indexed by the number modulo
// Window.
type Bits [Window / 64]uint64

// Set sets or clears seq's bit.
func (b *Bits) Set(seq uint32, on bool) {
	i := seq % Window
	if on {
		b[i/64] |= 1 << (i % 64)
	} else {
		b[i/64] &^= 1 << (i % 64)
	}
}

// Has reports seq's bit.
func (b *Bits) Has(seq uint32) bool {
	i := seq % Window
	return b[i/64]&(1<<(i%64)) != 0
}
