package verbs

import "fmt"

// The values of these types are rdma-core's own (verbs.h, rdma_cma.h), so
// they pass to C unchanged; TestConstantsMatchC checks them where cgo builds.

// Access is a set of memory and QP access rights (enum ibv_access_flags).
type Access uint32

// Access rights.
const (
	AccessLocalWrite   Access = 1 << 0 // IBV_ACCESS_LOCAL_WRITE
	AccessRemoteWrite  Access = 1 << 1 // IBV_ACCESS_REMOTE_WRITE
	AccessRemoteRead   Access = 1 << 2 // IBV_ACCESS_REMOTE_READ
	AccessRemoteAtomic Access = 1 << 3 // IBV_ACCESS_REMOTE_ATOMIC

	accessKnown = AccessLocalWrite | AccessRemoteWrite | AccessRemoteRead | AccessRemoteAtomic
)

// AccessRemote is what a region written by a remote requester needs: the
// rights the DTA prototype's collector registers its memory with.
const AccessRemote = AccessLocalWrite | AccessRemoteWrite | AccessRemoteRead | AccessRemoteAtomic

// validate reports a right the package does not know, or a remote write or
// atomic right without local write, which the verbs specification forbids
// (ibv_reg_mr fails with EINVAL).
func (a Access) validate() error {
	if a&^accessKnown != 0 {
		return fmt.Errorf("%w: unknown access bits %#x", ErrInvalid, uint32(a&^accessKnown))
	}
	if a&(AccessRemoteWrite|AccessRemoteAtomic) != 0 && a&AccessLocalWrite == 0 {
		return fmt.Errorf("%w: remote write or atomic access needs local write", ErrInvalid)
	}
	return nil
}

// QPState is a queue pair's state (enum ibv_qp_state).
type QPState uint8

// QP states.
const (
	QPReset QPState = iota
	QPInit
	QPRTR // ready to receive
	QPRTS // ready to send
	QPSQD // send queue drained
	QPSQE // send queue error
	QPErr
	QPUnknown
)

var qpStateNames = [...]string{"RESET", "INIT", "RTR", "RTS", "SQD", "SQE", "ERR", "UNKNOWN"}

func (s QPState) String() string {
	if int(s) < len(qpStateNames) {
		return qpStateNames[s]
	}
	return fmt.Sprintf("QPState(%d)", uint8(s))
}

// canMove reports whether the verbs state machine (IBA 10.3.1, as rdma-core
// enforces it for RC) allows modifying a QP from s to next. Any state may go
// to RESET or ERR; otherwise RESET->INIT, INIT->INIT, INIT->RTR, RTR->RTS,
// RTS->RTS, SQD->RTS, SQE->RTS.
func (s QPState) canMove(next QPState) bool {
	switch next {
	case QPReset, QPErr:
		return s <= QPErr
	case QPInit:
		return s == QPReset || s == QPInit
	case QPRTR:
		return s == QPInit
	case QPRTS:
		return s == QPRTR || s == QPRTS || s == QPSQD || s == QPSQE
	}
	return false
}

// MTU is a path MTU (enum ibv_mtu).
type MTU uint8

// Path MTUs.
const (
	MTU256  MTU = 1
	MTU512  MTU = 2
	MTU1024 MTU = 3
	MTU2048 MTU = 4
	MTU4096 MTU = 5
)

// Bytes returns the MTU in bytes, or 0 for an invalid value.
func (m MTU) Bytes() int {
	if m < MTU256 || m > MTU4096 {
		return 0
	}
	return 128 << m
}

// Opcode is a send work request's operation (enum ibv_wr_opcode).
type Opcode uint8

// Work request opcodes.
const (
	OpWrite        Opcode = 0 // RDMA WRITE
	OpWriteImm     Opcode = 1 // RDMA WRITE with immediate
	OpSend         Opcode = 2
	OpSendImm      Opcode = 3
	OpRead         Opcode = 4 // RDMA READ
	OpCompareSwap  Opcode = 5 // atomic CMP_SWAP
	OpFetchAdd     Opcode = 6 // atomic FETCH_ADD
	opcodeMaxKnown        = OpFetchAdd
)

var opcodeNames = [...]string{"WRITE", "WRITE_WITH_IMM", "SEND", "SEND_WITH_IMM", "READ", "CMP_SWAP", "FETCH_ADD"}

func (o Opcode) String() string {
	if o <= opcodeMaxKnown {
		return opcodeNames[o]
	}
	return fmt.Sprintf("Opcode(%d)", uint8(o))
}

func (o Opcode) atomic() bool { return o == OpCompareSwap || o == OpFetchAdd }

// SendFlags modify a send work request (enum ibv_send_flags).
type SendFlags uint32

// Send flags.
const (
	SendFence     SendFlags = 1 << 0
	SendSignaled  SendFlags = 1 << 1 // generate a completion
	SendSolicited SendFlags = 1 << 2
	SendInline    SendFlags = 1 << 3 // copy the data into the WQE
)

// WCOpcode is what a completion completed (enum ibv_wc_opcode).
type WCOpcode uint8

// Completion opcodes.
const (
	WCSend        WCOpcode = 0
	WCWrite       WCOpcode = 1
	WCRead        WCOpcode = 2
	WCCompareSwap WCOpcode = 3
	WCFetchAdd    WCOpcode = 4
	WCRecv        WCOpcode = 128
	WCRecvImm     WCOpcode = 129 // an RDMA WRITE with immediate consumed a RECV
)

// WCStatus is a completion's status (enum ibv_wc_status).
type WCStatus uint8

// Completion statuses (the common ones; others keep their number).
const (
	WCSuccess         WCStatus = 0
	WCLocLenErr       WCStatus = 1
	WCLocQPOpErr      WCStatus = 2
	WCLocProtErr      WCStatus = 4
	WCFlushErr        WCStatus = 5
	WCBadRespErr      WCStatus = 7
	WCLocAccessErr    WCStatus = 8
	WCRemInvReqErr    WCStatus = 9
	WCRemAccessErr    WCStatus = 10
	WCRemOpErr        WCStatus = 11
	WCRetryExcErr     WCStatus = 12
	WCRNRRetryExcErr  WCStatus = 13
	WCRemAbortErr     WCStatus = 16
	WCFatalErr        WCStatus = 19
	WCRespTimeoutErr  WCStatus = 20
	WCGeneralErr      WCStatus = 21
	wcStatusNamesSize          = 22
)

var wcStatusNames = [wcStatusNamesSize]string{
	"success", "local length error", "local QP operation error", "local EE context operation error",
	"local protection error", "work request flushed", "memory window bind error", "bad response",
	"local access error", "remote invalid request", "remote access error", "remote operation error",
	"transport retry counter exceeded", "RNR retry counter exceeded", "local RDD violation",
	"remote invalid RD request", "remote aborted", "invalid EE context number",
	"invalid EE context state", "fatal error", "response timeout", "general error",
}

func (s WCStatus) String() string {
	if int(s) < len(wcStatusNames) {
		return wcStatusNames[s]
	}
	return fmt.Sprintf("WCStatus(%d)", uint8(s))
}

// WC is a work completion.
type WC struct {
	ID        uint64 // the work request's ID
	Status    WCStatus
	Opcode    WCOpcode
	VendorErr uint32
	ByteLen   uint32 // bytes received (RECV) or read (READ, atomics: 8)
	Imm       uint32 // the immediate data, host order, when HasImm
	HasImm    bool
	QPN       uint32 // the local QP number
	SrcQPN    uint32
}

// Err returns nil for a successful completion, else an error naming the
// status.
func (wc WC) Err() error {
	if wc.Status == WCSuccess {
		return nil
	}
	return &CompletionError{WC: wc}
}

// CompletionError is a completion with an error status.
type CompletionError struct{ WC WC }

func (e *CompletionError) Error() string {
	return fmt.Sprintf("verbs: work request %d completed with %v (vendor error %#x)", e.WC.ID, e.WC.Status, e.WC.VendorErr)
}

// PortAttr is what ibv_query_port reports of a port, in part.
type PortAttr struct {
	State     uint8 // enum ibv_port_state: 4 is ACTIVE
	MaxMTU    MTU
	ActiveMTU MTU
	GIDTblLen int
	LinkLayer uint8 // 1 InfiniBand, 2 Ethernet
}

// PortActive is PortAttr.State of a port that can carry traffic.
const PortActive = 4

// CMEventType is an RDMA CM event (enum rdma_cm_event_type).
type CMEventType uint8

// RDMA CM events.
const (
	CMAddrResolved CMEventType = iota
	CMAddrError
	CMRouteResolved
	CMRouteError
	CMConnectRequest
	CMConnectResponse
	CMConnectError
	CMUnreachable
	CMRejected
	CMEstablished
	CMDisconnected
	CMDeviceRemoval
	CMMulticastJoin
	CMMulticastError
	CMAddrChange
	CMTimewaitExit
)

var cmEventNames = [...]string{
	"ADDR_RESOLVED", "ADDR_ERROR", "ROUTE_RESOLVED", "ROUTE_ERROR", "CONNECT_REQUEST",
	"CONNECT_RESPONSE", "CONNECT_ERROR", "UNREACHABLE", "REJECTED", "ESTABLISHED",
	"DISCONNECTED", "DEVICE_REMOVAL", "MULTICAST_JOIN", "MULTICAST_ERROR", "ADDR_CHANGE",
	"TIMEWAIT_EXIT",
}

func (t CMEventType) String() string {
	if int(t) < len(cmEventNames) {
		return cmEventNames[t]
	}
	return fmt.Sprintf("CMEventType(%d)", uint8(t))
}
