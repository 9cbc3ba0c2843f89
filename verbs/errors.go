package verbs

import (
	"errors"
	"fmt"
	"strings"
	"syscall"
)

// Sentinel errors. Errors returned by the package wrap one of them or an
// errno.
var (
	// ErrNotSupported: the package was built without cgo or not for Linux.
	ErrNotSupported = errors.New("verbs: not supported on this build (needs linux, cgo and -tags rdma)")
	// ErrNoDevice: ibv_get_device_list found no RDMA device, or none has
	// the name asked for.
	ErrNoDevice = errors.New("verbs: no RDMA device")
	// ErrClosed: the object was closed.
	ErrClosed = errors.New("verbs: use of closed object")
	// ErrState: a QP state transition the verbs state machine does not
	// allow, or a post in a state that cannot take it.
	ErrState = errors.New("verbs: invalid QP state transition")
	// ErrInvalid: an argument out of range (a buffer outside its MR, an
	// empty buffer, a bad size); the call was not made.
	ErrInvalid = errors.New("verbs: invalid argument")
	// ErrTimeout: no event or completion arrived within the time given.
	ErrTimeout = errors.New("verbs: timed out")
)

// Error is a failed rdma-core call: the function's name and the errno it set
// (or returned).
type Error struct {
	Op    string        // the rdma-core function, e.g. "ibv_reg_mr"
	Errno syscall.Errno // 0 when the function failed without setting errno
	Err   error         // a package sentinel this failure also is, or nil
}

func (e *Error) Error() string {
	var sentinel string
	if e.Err != nil {
		sentinel = strings.TrimPrefix(e.Err.Error(), "verbs: ")
	}
	switch {
	case e.Err != nil && e.Errno != 0:
		return fmt.Sprintf("verbs: %s: %s (%v)", e.Op, sentinel, e.Errno)
	case e.Err != nil:
		return fmt.Sprintf("verbs: %s: %s", e.Op, sentinel)
	case e.Errno != 0:
		return fmt.Sprintf("verbs: %s: %v", e.Op, e.Errno)
	}
	return fmt.Sprintf("verbs: %s failed", e.Op)
}

// Unwrap returns the errno and the sentinel, so errors.Is matches either.
func (e *Error) Unwrap() []error {
	var errs []error
	if e.Errno != 0 {
		errs = append(errs, e.Errno)
	}
	if e.Err != nil {
		errs = append(errs, e.Err)
	}
	return errs
}

func opErr(op string, err error) error {
	return &Error{Op: op, Err: err}
}
