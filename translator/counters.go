package translator

import "github.com/dtakit/dtakit/dta"

// countOp counts a report of op in a (Counters.Reports or Translated) at
// index op for the four built in; for a primitive registered beyond them,
// at index 0 of a and at index op of by (RegisteredReports or
// RegisteredTranslated).
func countOp(a *[5]uint64, by *[256]uint64, op dta.Opcode) {
	if op.IsValid() {
		a[op]++
		return
	}
	a[0]++
	by[op]++
}
