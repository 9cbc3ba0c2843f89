// Package cm encodes and decodes the RDMA connection manager messages (IBTA
// vol. 1, chapter 12) that open and close an RC connection with a peer that
// listens with librdmacm: ConnectRequest (REQ), ConnectReply (REP),
// ReadyToUse (RTU), Reject (REJ), DisconnectRequest (DREQ) and
// DisconnectReply (DREP), each in a 256-byte MAD of management class 0x07,
// carried on QP 1 as a UD SEND Only with a DETH ([Packet]).
//
// The IP-based CM conventions of librdmacm are here too: [ServiceID] of an
// RDMA_PS_TCP listener and the 36-byte [IPHeader] that opens a REQ's private
// data.
//
// Each side's exchange for one connection is a small state machine that
// deals in MADs and events: [Dialer] for the active side (a translator),
// [Acceptor] for the passive side (a target). Neither touches a socket or
// knows what the queue pair carries. They follow package rc's conventions
// for socket-free cores: time as Unix nanoseconds (now int64); what to send
// appended to the caller's buffer b and the extended buffer returned beside
// an Event (b itself when there is nothing to send), as rc.Responder does;
// a MAD, which the caller carries in a [Packet]. With room in b for a MAD
// they do not allocate.
//
// Byte offsets in comments count from the end of the 24-byte MAD header; bit
// positions from the most significant bit.
package cm

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"

	"github.com/dtakit/dtakit/rocev2"
)

// MAD geometry.
const (
	MADLen       = 256                   // a MAD on QP 1
	MADHeaderLen = 24                    // the common MAD header
	BodyLen      = MADLen - MADHeaderLen // a CM message after the header
)

// Fixed values of a CM MAD and of its QP 1 transport.
const (
	BaseVersion  = 1          // MAD base version
	ClassCM      = 0x07       // management class of the communication manager
	ClassVersion = 2          // CM class version (IBA 1.2 onwards)
	MethodSend   = 0x03       // every CM message is a SEND
	QKey         = 0x80010000 // the well-known Q_Key of QP 1
	GSIQP        = 1          // the general services QP that carries MADs
)

// AttrID is the MAD attribute ID naming a CM message.
type AttrID uint16

// CM attribute IDs.
const (
	AttrREQ  AttrID = 0x0010
	AttrMRA  AttrID = 0x0011
	AttrREJ  AttrID = 0x0012
	AttrREP  AttrID = 0x0013
	AttrRTU  AttrID = 0x0014
	AttrDREQ AttrID = 0x0015
	AttrDREP AttrID = 0x0016
)

var attrNames = map[AttrID]string{
	AttrREQ: "ConnectRequest", AttrMRA: "MessageReceiptAck", AttrREJ: "Reject", AttrREP: "ConnectReply",
	AttrRTU: "ReadyToUse", AttrDREQ: "DisconnectRequest", AttrDREP: "DisconnectReply",
}

func (a AttrID) String() string {
	if s, ok := attrNames[a]; ok {
		return s
	}
	return fmt.Sprintf("AttrID(%#04x)", uint16(a))
}

// Errors wrapped by every error of this package.
var (
	// ErrTruncated: the input is shorter than a MAD or header.
	ErrTruncated = errors.New("cm: truncated")
	// ErrLength: a MAD longer than 256 bytes, or private data too long.
	ErrLength = errors.New("cm: bad length")
	// ErrClass: the MAD's base version, management class, class version or
	// method is not that of a CM message.
	ErrClass = errors.New("cm: not a CM MAD")
	// ErrAttribute: the attribute ID names no message this package decodes
	// (MRA, LAP, APR, SIDR and unknown IDs).
	ErrAttribute = errors.New("cm: unsupported attribute")
	// ErrField: a field is wider than its bits, or holds a value refused
	// (CMA version, IP version, address family).
	ErrField = errors.New("cm: bad field")
)

var (
	errShortHeader = fmt.Errorf("decode mad header: %w: need 24 bytes", ErrTruncated)
	errShortMAD    = fmt.Errorf("decode mad: %w: need 256 bytes", ErrTruncated)
	errLongMAD     = fmt.Errorf("decode mad: %w: longer than 256 bytes", ErrLength)
	errBaseVersion = fmt.Errorf("decode mad: %w: base version not 1", ErrClass)
	errMgmtClass   = fmt.Errorf("decode mad: %w: management class not 0x07", ErrClass)
	errClassVer    = fmt.Errorf("decode mad: %w: class version not 2", ErrClass)
	errMethod      = fmt.Errorf("decode mad: %w: method not SEND", ErrClass)
	errShortIPHdr  = fmt.Errorf("decode ip cm header: %w: need 36 bytes", ErrTruncated)
)

// MADHeader is the common MAD header:
//
//	| BaseVersion | MgmtClass | ClassVersion | R | Method |
//	| Status (16)                | ClassSpecific (16)       |
//	| TransactionID (64)                                    |
//	| AttributeID (16)           | Reserved (16)            |
//	| AttributeModifier (32)                                |
type MADHeader struct {
	BaseVersion   uint8
	MgmtClass     uint8
	ClassVersion  uint8
	Method        uint8 // the R (response) bit included
	Status        uint16
	ClassSpecific uint16
	// TransactionID: a REP, RTU, REJ or DREP carries the ID of the message it
	// answers (as Linux's CM does).
	TransactionID uint64
	AttrID        AttrID
	AttrModifier  uint32
}

// Header returns the MAD header of a CM message with attribute a.
func Header(tid uint64, a AttrID) MADHeader {
	return MADHeader{BaseVersion: BaseVersion, MgmtClass: ClassCM, ClassVersion: ClassVersion,
		Method: MethodSend, TransactionID: tid, AttrID: a}
}

// AppendTo appends the 24-byte header to b.
func (h MADHeader) AppendTo(b []byte) []byte {
	b = append(b, h.BaseVersion, h.MgmtClass, h.ClassVersion, h.Method)
	b = binary.BigEndian.AppendUint16(b, h.Status)
	b = binary.BigEndian.AppendUint16(b, h.ClassSpecific)
	b = binary.BigEndian.AppendUint64(b, h.TransactionID)
	b = binary.BigEndian.AppendUint16(b, uint16(h.AttrID))
	b = append(b, 0, 0)
	return binary.BigEndian.AppendUint32(b, h.AttrModifier)
}

// DecodeMADHeader decodes the first 24 bytes of b. It checks only the length.
func DecodeMADHeader(b []byte) (MADHeader, error) {
	if len(b) < MADHeaderLen {
		return MADHeader{}, errShortHeader
	}
	_ = b[23]
	return MADHeader{
		BaseVersion:   b[0],
		MgmtClass:     b[1],
		ClassVersion:  b[2],
		Method:        b[3],
		Status:        binary.BigEndian.Uint16(b[4:]),
		ClassSpecific: binary.BigEndian.Uint16(b[6:]),
		TransactionID: binary.BigEndian.Uint64(b[8:]),
		AttrID:        AttrID(binary.BigEndian.Uint16(b[16:])),
		AttrModifier:  binary.BigEndian.Uint32(b[20:]),
	}, nil
}

// Message is one of the six CM messages: [*ConnectRequest],
// [*ConnectReply], [*ReadyToUse], [*Reject], [*DisconnectRequest],
// [*DisconnectReply].
type Message interface {
	// AttrID returns the attribute ID of the message.
	AttrID() AttrID
	// Validate reports a field wider than its bits.
	Validate() error
	// AppendTo appends the 232-byte message body (after the MAD header) to b.
	// Bits of a field beyond its width are dropped; reserved bits are 0.
	AppendTo(b []byte) []byte
	// String summarises the message on one line.
	String() string
	// decode fills the message from a 232-byte body.
	decode(body *[BodyLen]byte)
}

// AppendMAD validates m and appends the 256-byte MAD carrying it, with
// header h (whose AttrID is set to m's), to b.
func AppendMAD(b []byte, h MADHeader, m Message) ([]byte, error) {
	if err := m.Validate(); err != nil {
		return b, err
	}
	h.AttrID = m.AttrID()
	b = h.AppendTo(b)
	return m.AppendTo(b), nil
}

// DecodeMAD decodes a 256-byte CM MAD. It rejects MADs whose base version,
// class, class version or method is not a CM SEND (ErrClass) and attributes
// other than the six messages (ErrAttribute).
func DecodeMAD(b []byte) (MADHeader, Message, error) {
	switch {
	case len(b) < MADLen:
		return MADHeader{}, nil, errShortMAD
	case len(b) > MADLen:
		return MADHeader{}, nil, errLongMAD
	}
	h, _ := DecodeMADHeader(b)
	switch {
	case h.BaseVersion != BaseVersion:
		return h, nil, errBaseVersion
	case h.MgmtClass != ClassCM:
		return h, nil, errMgmtClass
	case h.ClassVersion != ClassVersion:
		return h, nil, errClassVer
	case h.Method != MethodSend:
		return h, nil, errMethod
	}
	var m Message
	switch h.AttrID {
	case AttrREQ:
		m = new(ConnectRequest)
	case AttrREP:
		m = new(ConnectReply)
	case AttrRTU:
		m = new(ReadyToUse)
	case AttrREJ:
		m = new(Reject)
	case AttrDREQ:
		m = new(DisconnectRequest)
	case AttrDREP:
		m = new(DisconnectReply)
	default:
		return h, nil, fmt.Errorf("decode mad: %w: %v", ErrAttribute, h.AttrID)
	}
	m.decode((*[BodyLen]byte)(b[MADHeaderLen:]))
	// Some fields decode to values the message cannot hold (a REJ's reject
	// info length above its 72 bytes of ARI): such a message is malformed.
	if err := m.Validate(); err != nil {
		return h, nil, fmt.Errorf("decode mad: %w", err)
	}
	return h, m, nil
}

// Packet returns the RoCEv2 packet that carries mad to QP 1 of a peer: a UD
// SEND Only with P_Key 0xFFFF, PSN psn, and a DETH with Q_Key 0x80010000 and
// source QP 1. Payload aliases mad.
func Packet(mad []byte, psn rocev2.PSN) rocev2.Packet {
	return rocev2.Packet{
		BTH:     rocev2.BTH{Opcode: rocev2.UDSendOnly, PKey: rocev2.DefaultPKey, DestQP: GSIQP, PSN: psn & rocev2.PSNMask},
		DETH:    rocev2.DETH{QKey: QKey, SrcQP: GSIQP},
		Payload: mad,
	}
}

// ServiceID returns the service ID of a librdmacm RDMA_PS_TCP (0x0106)
// listener on port.
func ServiceID(port uint16) uint64 { return 0x0000000001060000 | uint64(port) }

// GID returns the RoCEv2 GID of an address: an IPv4 address becomes the
// IPv4-mapped IPv6 address ::ffff:a.b.c.d.
func GID(a netip.Addr) [16]byte { return a.As16() }

// PathMTU codes of a REQ.
const (
	MTU256  = 1
	MTU512  = 2
	MTU1024 = 3
	MTU2048 = 4
	MTU4096 = 5
)

// Reject reasons (IBTA vol. 1, table 109) that a translator meets.
const (
	RejectInvalidServiceID = 8
	RejectInvalidMTU       = 26
	RejectConsumer         = 28
)

// fieldError returns an ErrField error naming a field too wide.
func fieldError(msg, field string, bits int) error {
	return fmt.Errorf("%s: %w: %s wider than %d bits", msg, ErrField, field, bits)
}

func be16(b []byte) uint16 { return binary.BigEndian.Uint16(b) }
func be24(b []byte) uint32 { return uint32(b[0])<<16 | uint32(b[1])<<8 | uint32(b[2]) }
func be32(b []byte) uint32 { return binary.BigEndian.Uint32(b) }
func be64(b []byte) uint64 { return binary.BigEndian.Uint64(b) }

func put24(b []byte, v uint32) { b[0], b[1], b[2] = byte(v>>16), byte(v>>8), byte(v) }

func flag(v bool, bit uint) byte {
	if v {
		return 1 << bit
	}
	return 0
}
