package dta

import (
	"fmt"
	"sync/atomic"
)

// registered marks the opcodes beyond the four that RegisterOpcode added.
var registered [256]atomic.Bool

// RegisterOpcode makes reports with opcode op decode and encode: their
// sub-header and data, whatever follows the base header, are carried
// opaque in [Report.Body], for the primitive that registered op to decode
// (package primitive registers the opcodes of its Kinds). It refuses
// opcode 0, the four defined opcodes and an opcode already registered.
// Call it from an init function: it is not meant to race with decoding.
func RegisterOpcode(op Opcode) error {
	if op == 0 || op.IsValid() {
		return fmt.Errorf("dta: register opcode %#02x: %w: 0 or a defined opcode", uint8(op), ErrInvalidField)
	}
	if registered[op].Swap(true) {
		return fmt.Errorf("dta: register opcode %#02x: %w: registered already", uint8(op), ErrInvalidField)
	}
	return nil
}

// IsKnown reports whether reports with opcode op decode: one of the four
// defined opcodes, or an opcode registered with [RegisterOpcode].
func (op Opcode) IsKnown() bool { return op.IsValid() || registered[op].Load() }
