package verbs

import (
	"errors"
	"runtime"
	"syscall"
	"testing"
	"unsafe"
)

func TestAccessValidate(t *testing.T) {
	for _, c := range []struct {
		a  Access
		ok bool
	}{
		{0, true},
		{AccessLocalWrite, true},
		{AccessRemote, true},
		{AccessRemoteRead, true},
		{AccessRemoteWrite, false},                     // needs local write
		{AccessRemoteAtomic | AccessRemoteRead, false}, // likewise
		{AccessLocalWrite | 1<<7, false},               // unknown bit
	} {
		err := c.a.validate()
		if (err == nil) != c.ok || (err != nil && !errors.Is(err, ErrInvalid)) {
			t.Errorf("Access(%#x).validate() = %v, want ok %v", uint32(c.a), err, c.ok)
		}
	}
}

func TestQPStateMachine(t *testing.T) {
	allowed := map[[2]QPState]bool{
		{QPReset, QPInit}: true, {QPInit, QPInit}: true, {QPInit, QPRTR}: true,
		{QPRTR, QPRTS}: true, {QPRTS, QPRTS}: true, {QPSQD, QPRTS}: true, {QPSQE, QPRTS}: true,
	}
	for from := QPReset; from <= QPErr; from++ {
		for to := QPReset; to <= QPUnknown; to++ {
			want := allowed[[2]QPState{from, to}] || to == QPReset || to == QPErr
			if got := from.canMove(to); got != want {
				t.Errorf("%v -> %v allowed %v, want %v", from, to, got, want)
			}
		}
	}
}

// fakeQP has a handle that is never dereferenced: every call below is
// refused in Go before reaching C.
func fakeQP(state QPState) *QP {
	return &QP{h: qpH(unsafe.Pointer(new([256]byte))), state: state, inline: 16}
}

func TestQPRefusesBadTransitions(t *testing.T) {
	qp := fakeQP(QPReset)
	if err := qp.ToRTR(RTRAttr{PathMTU: MTU1024}); !errors.Is(err, ErrState) {
		t.Errorf("RESET -> RTR: %v, want ErrState", err)
	}
	if err := qp.ToRTS(RTSAttr{}); !errors.Is(err, ErrState) {
		t.Errorf("RESET -> RTS: %v, want ErrState", err)
	}
	qp = fakeQP(QPInit)
	if err := qp.ToRTR(RTRAttr{PathMTU: 9}); !errors.Is(err, ErrInvalid) {
		t.Errorf("RTR with MTU 9: %v, want ErrInvalid", err)
	}
	if err := qp.ToRTR(RTRAttr{PathMTU: MTU1024, RQPSN: 1 << 24}); !errors.Is(err, ErrInvalid) {
		t.Errorf("RTR with a 25-bit PSN: %v, want ErrInvalid", err)
	}
	if err := qp.ToInit(1, AccessRemoteWrite); !errors.Is(err, ErrInvalid) {
		t.Errorf("INIT with remote write but no local write: %v, want ErrInvalid", err)
	}
	if qp.State() != QPInit {
		t.Errorf("a refused transition changed the state to %v", qp.State())
	}
}

func TestPostSendChecks(t *testing.T) {
	mr := &MR{h: mrH(unsafe.Pointer(new([64]byte))), buf: make([]byte, 64), lkey: 1}
	for name, c := range map[string]struct {
		state QPState
		wr    SendWR
		want  error
	}{
		"not RTS":         {QPRTR, SendWR{Opcode: OpWrite, Local: SGE{MR: mr, Length: 8}}, ErrState},
		"unknown opcode":  {QPRTS, SendWR{Opcode: 99}, ErrInvalid},
		"past the MR":     {QPRTS, SendWR{Opcode: OpWrite, Local: SGE{MR: mr, Offset: 60, Length: 8}}, ErrInvalid},
		"negative offset": {QPRTS, SendWR{Opcode: OpWrite, Local: SGE{MR: mr, Offset: -1, Length: 8}}, ErrInvalid},
		"no MR":           {QPRTS, SendWR{Opcode: OpSend, Local: SGE{Length: 8}}, ErrInvalid},
		"atomic of 4":     {QPRTS, SendWR{Opcode: OpFetchAdd, Local: SGE{MR: mr, Length: 4}}, ErrInvalid},
		"unaligned CAS":   {QPRTS, SendWR{Opcode: OpCompareSwap, Local: SGE{MR: mr, Length: 8}, RemoteAddr: 4}, ErrInvalid},
		"inline too long": {QPRTS, SendWR{Opcode: OpSend, Flags: SendInline, Inline: make([]byte, 17)}, ErrInvalid},
		"inline READ":     {QPRTS, SendWR{Opcode: OpRead, Flags: SendInline}, ErrInvalid},
	} {
		qp := fakeQP(c.state)
		if err := qp.PostSend(&c.wr); !errors.Is(err, c.want) {
			t.Errorf("%s: %v, want %v", name, err, c.want)
		}
	}
	if err := fakeQP(QPReset).PostRecv(1, SGE{MR: mr, Length: 8}); !errors.Is(err, ErrState) {
		t.Errorf("PostRecv in RESET: %v, want ErrState", err)
	}
	if err := fakeQP(QPInit).PostRecv(1, SGE{MR: mr, Offset: 64, Length: 1}); !errors.Is(err, ErrInvalid) {
		t.Errorf("PostRecv past the MR: %v, want ErrInvalid", err)
	}
}

func TestErrorWrapping(t *testing.T) {
	err := error(&Error{Op: "ibv_reg_mr", Errno: syscall.ENOMEM})
	if !errors.Is(err, syscall.ENOMEM) || errors.Is(err, ErrNoDevice) {
		t.Errorf("errno error does not match as it should: %v", err)
	}
	if got := err.Error(); got != "verbs: ibv_reg_mr: cannot allocate memory" {
		t.Errorf("Error() = %q", got)
	}
	err = &Error{Op: "ibv_open_device", Err: ErrNoDevice}
	if !errors.Is(err, ErrNoDevice) {
		t.Errorf("%v does not match ErrNoDevice", err)
	}
	var ve *Error
	if !errors.As(err, &ve) || ve.Op != "ibv_open_device" {
		t.Errorf("errors.As: %v", ve)
	}
	wc := WC{ID: 7, Status: WCRemAccessErr}
	var ce *CompletionError
	if !errors.As(wc.Err(), &ce) || ce.WC.Status != WCRemAccessErr || (WC{}).Err() != nil {
		t.Errorf("WC.Err: %v", wc.Err())
	}
	if s := WCRetryExcErr.String(); s != "transport retry counter exceeded" {
		t.Errorf("WCRetryExcErr.String() = %q", s)
	}
}

func TestClosedObjects(t *testing.T) {
	var c *Context
	if err := c.Close(); err != nil {
		t.Errorf("nil Context Close: %v", err)
	}
	if _, err := c.AllocPD(); !errors.Is(err, ErrClosed) {
		t.Errorf("AllocPD on nil Context: %v", err)
	}
	pd := &PD{}
	if err := pd.Close(); err != nil {
		t.Errorf("closed PD Close: %v", err)
	}
	if _, err := pd.RegMR(make([]byte, 8), AccessLocalWrite); !errors.Is(err, ErrClosed) {
		t.Errorf("RegMR on closed PD: %v", err)
	}
	var mr *MR
	if err := mr.Close(); err != nil {
		t.Errorf("nil MR Close: %v", err)
	}
	var cq *CQ
	if _, err := cq.Poll(make([]WC, 1)); !errors.Is(err, ErrClosed) {
		t.Errorf("Poll on nil CQ: %v", err)
	}
}

func TestMTU(t *testing.T) {
	for m, n := range map[MTU]int{MTU256: 256, MTU1024: 1024, MTU4096: 4096, 0: 0, 6: 0} {
		if m.Bytes() != n {
			t.Errorf("MTU(%d).Bytes() = %d, want %d", m, m.Bytes(), n)
		}
	}
}

// TestNoDevice asserts what a machine without an RDMA device sees; where a
// device exists the device tests run instead.
func TestNoDevice(t *testing.T) {
	devs, err := Devices()
	if err == nil {
		if len(devs) == 0 {
			t.Fatal("Devices() returned no device and no error")
		}
		t.Skipf("this machine has RDMA devices (%v): the no-device path is not reachable here", devs)
	}
	want := ErrNoDevice
	if !cgoLinux {
		want = ErrNotSupported
	}
	if !errors.Is(err, want) {
		t.Fatalf("Devices(): %v, want an error wrapping %v", err, want)
	}
	if _, err := Open(""); !errors.Is(err, want) {
		t.Fatalf("Open(\"\"): %v, want an error wrapping %v", err, want)
	}
	if _, err := Open("mlx5_0"); !errors.Is(err, want) {
		t.Fatalf("Open(mlx5_0): %v, want an error wrapping %v", err, want)
	}
	t.Logf("no device, as expected: %v (%s/%s)", err, runtime.GOOS, runtime.GOARCH)
}
