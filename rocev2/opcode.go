package rocev2

import "strconv"

// Opcode is the BTH opcode: the transport in bits 7..5 and the operation in
// bits 4..0 (IBTA vol. 1, table 38).
type Opcode uint8

// Transport is the transport service named by an opcode's top three bits.
type Transport uint8

// Transports. Only RC, UC and UD are implemented.
const (
	RC  Transport = 0 // reliable connection
	UC  Transport = 1 // unreliable connection
	RD  Transport = 2 // reliable datagram (not implemented)
	UD  Transport = 3 // unreliable datagram
	CNP Transport = 4 // RoCEv2 congestion notification (not implemented)
	XRC Transport = 5 // extended reliable connection (not implemented)
)

var transportNames = [8]string{"RC", "UC", "RD", "UD", "CNP", "XRC", "MFR6", "MFR7"}

func (t Transport) String() string { return transportNames[t&7] }

// Operations: an opcode's low five bits.
const (
	opSendFirst          = 0x00
	opSendMiddle         = 0x01
	opSendLast           = 0x02
	opSendLastImm        = 0x03
	opSendOnly           = 0x04
	opSendOnlyImm        = 0x05
	opWriteFirst         = 0x06
	opWriteMiddle        = 0x07
	opWriteLast          = 0x08
	opWriteLastImm       = 0x09
	opWriteOnly          = 0x0A
	opWriteOnlyImm       = 0x0B
	opReadRequest        = 0x0C
	opReadResponseFirst  = 0x0D
	opReadResponseMiddle = 0x0E
	opReadResponseLast   = 0x0F
	opReadResponseOnly   = 0x10
	opAcknowledge        = 0x11
	opAtomicAcknowledge  = 0x12
	opCompareSwap        = 0x13
	opFetchAdd           = 0x14
	opSendLastInvalidate = 0x16
	opSendOnlyInvalidate = 0x17

	// IBA 1.5 added RDMA FLUSH and ATOMIC WRITE to RC; this package does not
	// implement them.
	rcFlush       = Opcode(0x1C)
	rcAtomicWrite = Opcode(0x1D)

	transportRC = uint8(RC) << 5
	transportUC = uint8(UC) << 5
	transportUD = uint8(UD) << 5
)

// The opcodes of the RC, UC and UD transports (IBTA vol. 1, table 38).
const (
	RCSendFirst          = Opcode(transportRC | opSendFirst)
	RCSendMiddle         = Opcode(transportRC | opSendMiddle)
	RCSendLast           = Opcode(transportRC | opSendLast)
	RCSendLastImm        = Opcode(transportRC | opSendLastImm)
	RCSendOnly           = Opcode(transportRC | opSendOnly)
	RCSendOnlyImm        = Opcode(transportRC | opSendOnlyImm)
	RCWriteFirst         = Opcode(transportRC | opWriteFirst)
	RCWriteMiddle        = Opcode(transportRC | opWriteMiddle)
	RCWriteLast          = Opcode(transportRC | opWriteLast)
	RCWriteLastImm       = Opcode(transportRC | opWriteLastImm)
	RCWriteOnly          = Opcode(transportRC | opWriteOnly)
	RCWriteOnlyImm       = Opcode(transportRC | opWriteOnlyImm)
	RCReadRequest        = Opcode(transportRC | opReadRequest)
	RCReadResponseFirst  = Opcode(transportRC | opReadResponseFirst)
	RCReadResponseMiddle = Opcode(transportRC | opReadResponseMiddle)
	RCReadResponseLast   = Opcode(transportRC | opReadResponseLast)
	RCReadResponseOnly   = Opcode(transportRC | opReadResponseOnly)
	RCAcknowledge        = Opcode(transportRC | opAcknowledge)
	RCAtomicAcknowledge  = Opcode(transportRC | opAtomicAcknowledge)
	RCCompareSwap        = Opcode(transportRC | opCompareSwap)
	RCFetchAdd           = Opcode(transportRC | opFetchAdd)
	RCSendLastInvalidate = Opcode(transportRC | opSendLastInvalidate)
	RCSendOnlyInvalidate = Opcode(transportRC | opSendOnlyInvalidate)
	UCSendFirst          = Opcode(transportUC | opSendFirst)
	UCSendMiddle         = Opcode(transportUC | opSendMiddle)
	UCSendLast           = Opcode(transportUC | opSendLast)
	UCSendLastImm        = Opcode(transportUC | opSendLastImm)
	UCSendOnly           = Opcode(transportUC | opSendOnly)
	UCSendOnlyImm        = Opcode(transportUC | opSendOnlyImm)
	UCWriteFirst         = Opcode(transportUC | opWriteFirst)
	UCWriteMiddle        = Opcode(transportUC | opWriteMiddle)
	UCWriteLast          = Opcode(transportUC | opWriteLast)
	UCWriteLastImm       = Opcode(transportUC | opWriteLastImm)
	UCWriteOnly          = Opcode(transportUC | opWriteOnly)
	UCWriteOnlyImm       = Opcode(transportUC | opWriteOnlyImm)
	UDSendOnly           = Opcode(transportUD | opSendOnly)
	UDSendOnlyImm        = Opcode(transportUD | opSendOnlyImm)
)

// Headers is a set of extension headers. In a packet they follow the BTH in
// the order of the bits below, lowest first (IBTA vol. 1, 9.2).
type Headers uint8

// Extension headers.
const (
	HasDETH         Headers = 1 << iota // datagram ETH, 8 bytes
	HasRETH                             // RDMA ETH, 16 bytes
	HasAtomicETH                        // atomic ETH, 28 bytes
	HasAETH                             // ACK ETH, 4 bytes
	HasAtomicAckETH                     // atomic ACK ETH, 8 bytes
	HasImmDt                            // immediate data, 4 bytes
	HasIETH                             // invalidate ETH, 4 bytes
)

// Len returns the length in bytes of the extension headers in h.
func (h Headers) Len() int {
	n := 0
	if h&HasDETH != 0 {
		n += DETHLen
	}
	if h&HasRETH != 0 {
		n += RETHLen
	}
	if h&HasAtomicETH != 0 {
		n += AtomicETHLen
	}
	if h&HasAETH != 0 {
		n += AETHLen
	}
	if h&HasAtomicAckETH != 0 {
		n += AtomicAckETHLen
	}
	if h&HasImmDt != 0 {
		n += ImmDtLen
	}
	if h&HasIETH != 0 {
		n += IETHLen
	}
	return n
}

type opcodeInfo struct {
	name    string
	headers Headers
	// payload: the opcode carries a payload (possibly empty); when false the
	// packet ends with its last extension header.
	payload bool
	valid   bool
	extLen  uint8 // headers.Len(), cached for the hot paths
}

// operations describes the operation of each low five bits; a transport
// allows a subset of them (opcodeTable).
var operations = [32]opcodeInfo{
	opSendFirst:          {"SEND First", 0, true, true, 0},
	opSendMiddle:         {"SEND Middle", 0, true, true, 0},
	opSendLast:           {"SEND Last", 0, true, true, 0},
	opSendLastImm:        {"SEND Last with Immediate", HasImmDt, true, true, 0},
	opSendOnly:           {"SEND Only", 0, true, true, 0},
	opSendOnlyImm:        {"SEND Only with Immediate", HasImmDt, true, true, 0},
	opWriteFirst:         {"RDMA WRITE First", HasRETH, true, true, 0},
	opWriteMiddle:        {"RDMA WRITE Middle", 0, true, true, 0},
	opWriteLast:          {"RDMA WRITE Last", 0, true, true, 0},
	opWriteLastImm:       {"RDMA WRITE Last with Immediate", HasImmDt, true, true, 0},
	opWriteOnly:          {"RDMA WRITE Only", HasRETH, true, true, 0},
	opWriteOnlyImm:       {"RDMA WRITE Only with Immediate", HasRETH | HasImmDt, true, true, 0},
	opReadRequest:        {"RDMA READ Request", HasRETH, false, true, 0},
	opReadResponseFirst:  {"RDMA READ response First", HasAETH, true, true, 0},
	opReadResponseMiddle: {"RDMA READ response Middle", 0, true, true, 0},
	opReadResponseLast:   {"RDMA READ response Last", HasAETH, true, true, 0},
	opReadResponseOnly:   {"RDMA READ response Only", HasAETH, true, true, 0},
	opAcknowledge:        {"Acknowledge", HasAETH, false, true, 0},
	opAtomicAcknowledge:  {"ATOMIC Acknowledge", HasAETH | HasAtomicAckETH, false, true, 0},
	opCompareSwap:        {"CmpSwap", HasAtomicETH, false, true, 0},
	opFetchAdd:           {"FetchAdd", HasAtomicETH, false, true, 0},
	opSendLastInvalidate: {"SEND Last with Invalidate", HasIETH, true, true, 0},
	opSendOnlyInvalidate: {"SEND Only with Invalidate", HasIETH, true, true, 0},
}

// opcodeTable holds every opcode's description, built once from operations
// and the subset each transport allows.
var opcodeTable = func() (t [256]opcodeInfo) {
	for op := range 32 {
		info := operations[op]
		if !info.valid {
			continue
		}
		t[transportRC|uint8(op)] = info
		if op <= opWriteOnlyImm {
			t[transportUC|uint8(op)] = info
		}
		if op == opSendOnly || op == opSendOnlyImm {
			ud := info
			ud.headers |= HasDETH
			t[transportUD|uint8(op)] = ud
		}
	}
	for i := range t {
		t[i].extLen = uint8(t[i].headers.Len())
	}
	return t
}()

// Transport returns the transport named by o's top three bits.
func (o Opcode) Transport() Transport { return Transport(o >> 5) }

// Valid reports whether o is an opcode of RC, UC or UD that this package
// encodes and decodes.
func (o Opcode) Valid() bool { return opcodeTable[o].valid }

// Headers returns the extension headers that follow the BTH in a packet with
// opcode o, or 0 when o is not valid.
func (o Opcode) Headers() Headers { return opcodeTable[o].headers }

// HasPayload reports whether a packet with opcode o carries a payload after
// its extension headers (which may be empty). READ requests, acknowledgements
// and atomic requests carry none.
func (o Opcode) HasPayload() bool { return opcodeTable[o].payload }

// String returns the IBTA name, such as "RC RDMA WRITE Only", or
// "reserved(0x15)".
func (o Opcode) String() string {
	if !o.Valid() {
		return "reserved(0x" + strconv.FormatUint(uint64(o), 16) + ")"
	}
	return o.Transport().String() + " " + opcodeTable[o].name
}

// check returns nil when o is valid, else the preallocated decode error
// saying why not.
func (o Opcode) check() error {
	if o.Valid() {
		return nil
	}
	switch o.Transport() {
	case RC:
		if o == rcFlush || o == rcAtomicWrite {
			return errUnsupported
		}
		return errReserved
	case UC, UD:
		return errReserved
	}
	return errUnsupported
}
