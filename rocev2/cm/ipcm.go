package cm

import (
	"encoding/binary"
	"fmt"
	"net/netip"
)

// IPHeaderLen is the length of the IP CM header that opens a REQ's private
// data, leaving 56 bytes for the application.
const IPHeaderLen = 36

// IPHeader is librdmacm's private-data header of a REQ (struct cma_hdr):
//
//	0 CMA version (8) = 0 · 1 IP version (high nibble: 4 or 6) · 2 source
//	port (16) · 4 source address (16 bytes) · 20 destination address (16)
//
// An IPv4 address sits in the last 4 bytes of its 16 after 12 zero bytes. A
// listener compares these with its own address and port.
type IPHeader struct {
	SrcPort  uint16     // the active side's port
	Src, Dst netip.Addr // both IPv4 or both IPv6
}

// Validate reports addresses that are not both IPv4 or both IPv6.
func (h IPHeader) Validate() error {
	if (h.Src.Is4() && h.Dst.Is4()) || (h.Src.Is6() && h.Dst.Is6()) {
		return nil
	}
	return errIPFamily
}

// AppendTo appends the 36-byte header to b. Addresses of no family are
// written as zeros; Validate reports them.
func (h IPHeader) AppendTo(b []byte) []byte {
	ver := byte(6 << 4)
	if h.Src.Is4() {
		ver = 4 << 4
	}
	b = append(b, 0, ver)
	b = binary.BigEndian.AppendUint16(b, h.SrcPort)
	return appendCMAAddr(appendCMAAddr(b, h.Src), h.Dst)
}

func appendCMAAddr(b []byte, a netip.Addr) []byte {
	var w [16]byte
	switch {
	case a.Is4():
		v := a.As4()
		copy(w[12:], v[:])
	case a.Is6():
		w = a.As16()
	}
	return append(b, w[:]...)
}

var (
	errCMAVersion = fmt.Errorf("decode ip cm header: %w: CMA version not 0", ErrField)
	errIPVersion  = fmt.Errorf("decode ip cm header: %w: IP version not 4 or 6", ErrField)
	errIPFamily   = fmt.Errorf("ip cm header: %w: addresses not both IPv4 or both IPv6", ErrField)
	errUserData   = fmt.Errorf("ip cm header: %w: more than 56 bytes of user private data", ErrLength)
)

// DecodeIPHeader decodes the header from the first 36 bytes of b (a REQ's
// private data). It rejects a CMA version other than 0 and an IP version
// other than 4 or 6.
func DecodeIPHeader(b []byte) (IPHeader, error) {
	if len(b) < IPHeaderLen {
		return IPHeader{}, errShortIPHdr
	}
	if b[0] != 0 {
		return IPHeader{}, errCMAVersion
	}
	h := IPHeader{SrcPort: binary.BigEndian.Uint16(b[2:])}
	switch b[1] >> 4 {
	case 4:
		h.Src = netip.AddrFrom4([4]byte(b[16:20]))
		h.Dst = netip.AddrFrom4([4]byte(b[32:36]))
	case 6:
		h.Src = netip.AddrFrom16([16]byte(b[4:20]))
		h.Dst = netip.AddrFrom16([16]byte(b[20:36]))
	default:
		return IPHeader{}, errIPVersion
	}
	return h, nil
}

// SetIPPrivateData fills m's private data with h followed by user (at most
// 56 bytes) and zeros, as librdmacm's rdma_connect does.
func (m *ConnectRequest) SetIPPrivateData(h IPHeader, user []byte) error {
	if err := h.Validate(); err != nil {
		return err
	}
	if len(user) > len(m.PrivateData)-IPHeaderLen {
		return errUserData
	}
	m.PrivateData = [92]byte{}
	h.AppendTo(m.PrivateData[:0])
	copy(m.PrivateData[IPHeaderLen:], user)
	return nil
}
