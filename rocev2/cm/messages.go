package cm

import (
	"encoding/binary"
	"fmt"
)

// Path is a REQ's primary or alternate path (44 bytes). For RoCEv2 the GIDs
// are the IP addresses ([GID]) and the remote LID is 0xFFFF when the hop
// limit exceeds 1.
type Path struct {
	LocalLID        uint16
	RemoteLID       uint16
	LocalGID        [16]byte
	RemoteGID       [16]byte
	FlowLabel       uint32 // 20 bits
	PacketRate      uint8  // 6 bits
	TrafficClass    uint8
	HopLimit        uint8
	SL              uint8 // 4 bits: service level
	SubnetLocal     bool
	LocalACKTimeout uint8 // 5 bits: 4.096 µs · 2^t
}

func (p *Path) validate() error {
	switch {
	case p.FlowLabel > 0xFFFFF:
		return fieldError("req path", "flow label", 20)
	case p.PacketRate > 63:
		return fieldError("req path", "packet rate", 6)
	case p.SL > 15:
		return fieldError("req path", "SL", 4)
	case p.LocalACKTimeout > 31:
		return fieldError("req path", "local ACK timeout", 5)
	}
	return nil
}

func (p *Path) put(b []byte) {
	binary.BigEndian.PutUint16(b[0:], p.LocalLID)
	binary.BigEndian.PutUint16(b[2:], p.RemoteLID)
	copy(b[4:20], p.LocalGID[:])
	copy(b[20:36], p.RemoteGID[:])
	binary.BigEndian.PutUint32(b[36:], (p.FlowLabel&0xFFFFF)<<12|uint32(p.PacketRate&63))
	b[40] = p.TrafficClass
	b[41] = p.HopLimit
	b[42] = (p.SL&15)<<4 | flag(p.SubnetLocal, 3)
	b[43] = (p.LocalACKTimeout & 31) << 3
}

func (p *Path) get(b []byte) {
	*p = Path{
		LocalLID:        be16(b[0:]),
		RemoteLID:       be16(b[2:]),
		LocalGID:        [16]byte(b[4:20]),
		RemoteGID:       [16]byte(b[20:36]),
		FlowLabel:       be32(b[36:]) >> 12,
		PacketRate:      b[39] & 63,
		TrafficClass:    b[40],
		HopLimit:        b[41],
		SL:              b[42] >> 4,
		SubnetLocal:     b[42]&8 != 0,
		LocalACKTimeout: b[43] >> 3,
	}
}

// ConnectRequest (REQ, table 106) asks a peer to connect a QP:
//
//	0 local comm ID · 5 vendor ID (24) · 8 service ID · 16 local CA GUID ·
//	28 local Q_Key · 32 local QPN (24), responder resources · 36 local EECN
//	(24), initiator depth · 40 remote EECN (24), remote CM response timeout
//	(5), transport service type (2), end-to-end flow control (1) · 44
//	starting PSN (24), local CM response timeout (5), retry count (3) · 48
//	P_Key · 50 path MTU (4), RDC exists (1), RNR retry count (3) · 51 max
//	CM retries (4), SRQ (1), extended transport type (3) · 52 primary path
//	· 96 alternate path · 139 bit 5 SAP supported · 140 private data (92)
type ConnectRequest struct {
	LocalCommID             uint32
	VendorID                uint32 // 24 bits (ECE vendor ID; 0 for none)
	ServiceID               uint64 // see ServiceID
	LocalCAGUID             uint64
	LocalQKey               uint32
	LocalQPN                uint32 // 24 bits
	ResponderResources      uint8  // RDMA READ and atomic operations the sender accepts in flight
	LocalEECN               uint32 // 24 bits
	InitiatorDepth          uint8  // RDMA READ and atomic operations the sender issues in flight
	RemoteEECN              uint32 // 24 bits
	RemoteCMResponseTimeout uint8  // 5 bits
	TransportType           uint8  // 2 bits: 0 RC, 1 UC, 3 see ExtendedTransportType
	EndToEndFlowControl     bool
	StartingPSN             uint32 // 24 bits: the PSN the sender starts with
	LocalCMResponseTimeout  uint8  // 5 bits
	RetryCount              uint8  // 3 bits
	PKey                    uint16
	PathMTU                 uint8 // 4 bits: MTU256 .. MTU4096
	RDCExists               bool
	RNRRetryCount           uint8 // 3 bits
	MaxCMRetries            uint8 // 4 bits
	SRQ                     bool
	ExtendedTransportType   uint8 // 3 bits
	Primary                 Path
	Alternate               Path
	SAPSupported            bool
	PrivateData             [92]byte // starts with the IPHeader for librdmacm peers
}

// AttrID returns AttrREQ.
func (*ConnectRequest) AttrID() AttrID { return AttrREQ }

// Validate reports a field wider than its bits.
func (m *ConnectRequest) Validate() error {
	const msg = "req"
	for _, f := range []struct {
		name    string
		v, bits uint32
	}{
		{"vendor ID", m.VendorID, 24}, {"local QPN", m.LocalQPN, 24}, {"local EECN", m.LocalEECN, 24},
		{"remote EECN", m.RemoteEECN, 24}, {"remote CM response timeout", uint32(m.RemoteCMResponseTimeout), 5},
		{"transport type", uint32(m.TransportType), 2}, {"starting PSN", m.StartingPSN, 24},
		{"local CM response timeout", uint32(m.LocalCMResponseTimeout), 5}, {"retry count", uint32(m.RetryCount), 3},
		{"path MTU", uint32(m.PathMTU), 4}, {"RNR retry count", uint32(m.RNRRetryCount), 3},
		{"max CM retries", uint32(m.MaxCMRetries), 4}, {"extended transport type", uint32(m.ExtendedTransportType), 3},
	} {
		if f.v>>f.bits != 0 {
			return fieldError(msg, f.name, int(f.bits))
		}
	}
	if err := m.Primary.validate(); err != nil {
		return err
	}
	return m.Alternate.validate()
}

// AppendTo appends the 232-byte REQ body to b.
func (m *ConnectRequest) AppendTo(b []byte) []byte {
	var w [BodyLen]byte
	binary.BigEndian.PutUint32(w[0:], m.LocalCommID)
	put24(w[5:], m.VendorID)
	binary.BigEndian.PutUint64(w[8:], m.ServiceID)
	binary.BigEndian.PutUint64(w[16:], m.LocalCAGUID)
	binary.BigEndian.PutUint32(w[28:], m.LocalQKey)
	put24(w[32:], m.LocalQPN)
	w[35] = m.ResponderResources
	put24(w[36:], m.LocalEECN)
	w[39] = m.InitiatorDepth
	put24(w[40:], m.RemoteEECN)
	w[43] = (m.RemoteCMResponseTimeout&31)<<3 | (m.TransportType&3)<<1 | flag(m.EndToEndFlowControl, 0)
	put24(w[44:], m.StartingPSN)
	w[47] = (m.LocalCMResponseTimeout&31)<<3 | m.RetryCount&7
	binary.BigEndian.PutUint16(w[48:], m.PKey)
	w[50] = (m.PathMTU&15)<<4 | flag(m.RDCExists, 3) | m.RNRRetryCount&7
	w[51] = (m.MaxCMRetries&15)<<4 | flag(m.SRQ, 3) | m.ExtendedTransportType&7
	m.Primary.put(w[52:])
	m.Alternate.put(w[96:])
	w[139] |= flag(m.SAPSupported, 2)
	copy(w[140:], m.PrivateData[:])
	return append(b, w[:]...)
}

func (m *ConnectRequest) decode(w *[BodyLen]byte) {
	*m = ConnectRequest{
		LocalCommID:             be32(w[0:]),
		VendorID:                be24(w[5:]),
		ServiceID:               be64(w[8:]),
		LocalCAGUID:             be64(w[16:]),
		LocalQKey:               be32(w[28:]),
		LocalQPN:                be24(w[32:]),
		ResponderResources:      w[35],
		LocalEECN:               be24(w[36:]),
		InitiatorDepth:          w[39],
		RemoteEECN:              be24(w[40:]),
		RemoteCMResponseTimeout: w[43] >> 3,
		TransportType:           w[43] >> 1 & 3,
		EndToEndFlowControl:     w[43]&1 != 0,
		StartingPSN:             be24(w[44:]),
		LocalCMResponseTimeout:  w[47] >> 3,
		RetryCount:              w[47] & 7,
		PKey:                    be16(w[48:]),
		PathMTU:                 w[50] >> 4,
		RDCExists:               w[50]&8 != 0,
		RNRRetryCount:           w[50] & 7,
		MaxCMRetries:            w[51] >> 4,
		SRQ:                     w[51]&8 != 0,
		ExtendedTransportType:   w[51] & 7,
		SAPSupported:            w[139]&4 != 0,
		PrivateData:             [92]byte(w[140:]),
	}
	m.Primary.get(w[52:])
	m.Alternate.get(w[96:])
}

// ConnectReply (REP, table 110) accepts a REQ:
//
//	0 local comm ID · 4 remote comm ID · 8 local Q_Key · 12 local QPN (24),
//	vendor ID high byte · 16 local EECN (24), vendor ID middle · 20 starting
//	PSN (24), vendor ID low · 24 responder resources · 25 initiator depth ·
//	26 target ACK delay (5), failover accepted (2), end-to-end flow control
//	(1) · 27 RNR retry count (3), SRQ (1) · 28 local CA GUID · 36 private
//	data (196)
type ConnectReply struct {
	LocalCommID         uint32
	RemoteCommID        uint32 // the REQ's local comm ID
	LocalQKey           uint32
	LocalQPN            uint32 // 24 bits
	VendorID            uint32 // 24 bits
	LocalEECN           uint32 // 24 bits
	StartingPSN         uint32 // 24 bits
	ResponderResources  uint8
	InitiatorDepth      uint8
	TargetACKDelay      uint8 // 5 bits
	FailoverAccepted    uint8 // 2 bits
	EndToEndFlowControl bool
	RNRRetryCount       uint8 // 3 bits
	SRQ                 bool
	LocalCAGUID         uint64
	PrivateData         [196]byte // no IP CM header
}

// AttrID returns AttrREP.
func (*ConnectReply) AttrID() AttrID { return AttrREP }

// Validate reports a field wider than its bits.
func (m *ConnectReply) Validate() error {
	switch {
	case m.LocalQPN > 0xFFFFFF:
		return fieldError("rep", "local QPN", 24)
	case m.VendorID > 0xFFFFFF:
		return fieldError("rep", "vendor ID", 24)
	case m.LocalEECN > 0xFFFFFF:
		return fieldError("rep", "local EECN", 24)
	case m.StartingPSN > 0xFFFFFF:
		return fieldError("rep", "starting PSN", 24)
	case m.TargetACKDelay > 31:
		return fieldError("rep", "target ACK delay", 5)
	case m.FailoverAccepted > 3:
		return fieldError("rep", "failover accepted", 2)
	case m.RNRRetryCount > 7:
		return fieldError("rep", "RNR retry count", 3)
	}
	return nil
}

// AppendTo appends the 232-byte REP body to b.
func (m *ConnectReply) AppendTo(b []byte) []byte {
	var w [BodyLen]byte
	binary.BigEndian.PutUint32(w[0:], m.LocalCommID)
	binary.BigEndian.PutUint32(w[4:], m.RemoteCommID)
	binary.BigEndian.PutUint32(w[8:], m.LocalQKey)
	put24(w[12:], m.LocalQPN)
	w[15] = byte(m.VendorID >> 16)
	put24(w[16:], m.LocalEECN)
	w[19] = byte(m.VendorID >> 8)
	put24(w[20:], m.StartingPSN)
	w[23] = byte(m.VendorID)
	w[24] = m.ResponderResources
	w[25] = m.InitiatorDepth
	w[26] = (m.TargetACKDelay&31)<<3 | (m.FailoverAccepted&3)<<1 | flag(m.EndToEndFlowControl, 0)
	w[27] = (m.RNRRetryCount&7)<<5 | flag(m.SRQ, 4)
	binary.BigEndian.PutUint64(w[28:], m.LocalCAGUID)
	copy(w[36:], m.PrivateData[:])
	return append(b, w[:]...)
}

func (m *ConnectReply) decode(w *[BodyLen]byte) {
	*m = ConnectReply{
		LocalCommID:         be32(w[0:]),
		RemoteCommID:        be32(w[4:]),
		LocalQKey:           be32(w[8:]),
		LocalQPN:            be24(w[12:]),
		VendorID:            uint32(w[15])<<16 | uint32(w[19])<<8 | uint32(w[23]),
		LocalEECN:           be24(w[16:]),
		StartingPSN:         be24(w[20:]),
		ResponderResources:  w[24],
		InitiatorDepth:      w[25],
		TargetACKDelay:      w[26] >> 3,
		FailoverAccepted:    w[26] >> 1 & 3,
		EndToEndFlowControl: w[26]&1 != 0,
		RNRRetryCount:       w[27] >> 5,
		SRQ:                 w[27]&0x10 != 0,
		LocalCAGUID:         be64(w[28:]),
		PrivateData:         [196]byte(w[36:]),
	}
}

// ReadyToUse (RTU, table 111) completes a connection: 0 local comm ID · 4
// remote comm ID · 8 private data (224).
type ReadyToUse struct {
	LocalCommID  uint32
	RemoteCommID uint32
	PrivateData  [224]byte
}

// AttrID returns AttrRTU.
func (*ReadyToUse) AttrID() AttrID { return AttrRTU }

// Validate returns nil: every field is full width.
func (*ReadyToUse) Validate() error { return nil }

// AppendTo appends the 232-byte RTU body to b.
func (m *ReadyToUse) AppendTo(b []byte) []byte {
	b = binary.BigEndian.AppendUint32(b, m.LocalCommID)
	b = binary.BigEndian.AppendUint32(b, m.RemoteCommID)
	return append(b, m.PrivateData[:]...)
}

func (m *ReadyToUse) decode(w *[BodyLen]byte) {
	*m = ReadyToUse{LocalCommID: be32(w[0:]), RemoteCommID: be32(w[4:]), PrivateData: [224]byte(w[8:])}
}

// Reject (REJ, table 108) refuses a REQ or REP: 0 local comm ID · 4 remote
// comm ID · 8 message rejected (2) · 9 reject info length (7) · 10 reason ·
// 12 additional reject information (72) · 84 private data (148).
type Reject struct {
	LocalCommID     uint32
	RemoteCommID    uint32
	MessageRejected uint8 // 2 bits: 0 REQ, 1 REP, 2 other
	InfoLength      uint8 // 7 bits: bytes of ARI that are meaningful
	Reason          uint16
	ARI             [72]byte
	PrivateData     [148]byte
}

// AttrID returns AttrREJ.
func (*Reject) AttrID() AttrID { return AttrREJ }

// Validate reports a field wider than its bits or an info length beyond the
// ARI.
func (m *Reject) Validate() error {
	switch {
	case m.MessageRejected > 3:
		return fieldError("rej", "message rejected", 2)
	case m.InfoLength > 72:
		return fmt.Errorf("rej: %w: reject info length %d above the 72 bytes of ARI", ErrField, m.InfoLength)
	}
	return nil
}

// AppendTo appends the 232-byte REJ body to b.
func (m *Reject) AppendTo(b []byte) []byte {
	b = binary.BigEndian.AppendUint32(b, m.LocalCommID)
	b = binary.BigEndian.AppendUint32(b, m.RemoteCommID)
	b = append(b, (m.MessageRejected&3)<<6, (m.InfoLength&127)<<1)
	b = binary.BigEndian.AppendUint16(b, m.Reason)
	b = append(b, m.ARI[:]...)
	return append(b, m.PrivateData[:]...)
}

func (m *Reject) decode(w *[BodyLen]byte) {
	*m = Reject{
		LocalCommID:     be32(w[0:]),
		RemoteCommID:    be32(w[4:]),
		MessageRejected: w[8] >> 6,
		InfoLength:      w[9] >> 1,
		Reason:          be16(w[10:]),
		ARI:             [72]byte(w[12:]),
		PrivateData:     [148]byte(w[84:]),
	}
}

// DisconnectRequest (DREQ, table 112): 0 local comm ID · 4 remote comm ID ·
// 8 remote QPN (24) · 12 private data (220).
type DisconnectRequest struct {
	LocalCommID  uint32
	RemoteCommID uint32
	RemoteQPN    uint32 // 24 bits: the peer's QPN
	PrivateData  [220]byte
}

// AttrID returns AttrDREQ.
func (*DisconnectRequest) AttrID() AttrID { return AttrDREQ }

// Validate reports a remote QPN wider than 24 bits.
func (m *DisconnectRequest) Validate() error {
	if m.RemoteQPN > 0xFFFFFF {
		return fieldError("dreq", "remote QPN", 24)
	}
	return nil
}

// AppendTo appends the 232-byte DREQ body to b.
func (m *DisconnectRequest) AppendTo(b []byte) []byte {
	b = binary.BigEndian.AppendUint32(b, m.LocalCommID)
	b = binary.BigEndian.AppendUint32(b, m.RemoteCommID)
	b = binary.BigEndian.AppendUint32(b, (m.RemoteQPN&0xFFFFFF)<<8)
	return append(b, m.PrivateData[:]...)
}

func (m *DisconnectRequest) decode(w *[BodyLen]byte) {
	*m = DisconnectRequest{LocalCommID: be32(w[0:]), RemoteCommID: be32(w[4:]), RemoteQPN: be24(w[8:]), PrivateData: [220]byte(w[12:])}
}

// DisconnectReply (DREP, table 113): 0 local comm ID · 4 remote comm ID · 8
// private data (224), the layout of [ReadyToUse], whose encoder and decoder
// it shares (the conversion between the two stops compiling if one of them
// changes).
type DisconnectReply struct {
	LocalCommID  uint32
	RemoteCommID uint32
	PrivateData  [224]byte
}

// AttrID returns AttrDREP.
func (*DisconnectReply) AttrID() AttrID { return AttrDREP }

// Validate returns nil: every field is full width.
func (*DisconnectReply) Validate() error { return nil }

// AppendTo appends the 232-byte DREP body to b.
func (m *DisconnectReply) AppendTo(b []byte) []byte { return (*ReadyToUse)(m).AppendTo(b) }

func (m *DisconnectReply) decode(w *[BodyLen]byte) { (*ReadyToUse)(m).decode(w) }
