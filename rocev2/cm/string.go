package cm

import (
	"fmt"
	"net/netip"
)

// The String methods print the fields a reader of a capture looks for, on
// one line; private data is summarised.

func (m *ConnectRequest) String() string {
	s := fmt.Sprintf("REQ comm %#x service %#x QPN %#x PSN %#x P_Key %#x MTU code %d resp res %d init depth %d retry %d RNR retry %d GIDs %v -> %v",
		m.LocalCommID, m.ServiceID, m.LocalQPN, m.StartingPSN, m.PKey, m.PathMTU, m.ResponderResources,
		m.InitiatorDepth, m.RetryCount, m.RNRRetryCount,
		netip.AddrFrom16(m.Primary.LocalGID).Unmap(), netip.AddrFrom16(m.Primary.RemoteGID).Unmap())
	if h, err := DecodeIPHeader(m.PrivateData[:]); err == nil && h.Validate() == nil {
		s += fmt.Sprintf(" IP CM %v:%d -> %v", h.Src, h.SrcPort, h.Dst)
	}
	return s
}

func (m *ConnectReply) String() string {
	return fmt.Sprintf("REP comm %#x remote comm %#x QPN %#x PSN %#x resp res %d init depth %d RNR retry %d",
		m.LocalCommID, m.RemoteCommID, m.LocalQPN, m.StartingPSN, m.ResponderResources, m.InitiatorDepth, m.RNRRetryCount)
}

func (m *ReadyToUse) String() string {
	return fmt.Sprintf("RTU comm %#x remote comm %#x", m.LocalCommID, m.RemoteCommID)
}

func (m *Reject) String() string {
	return fmt.Sprintf("REJ comm %#x remote comm %#x message %d reason %d", m.LocalCommID, m.RemoteCommID, m.MessageRejected, m.Reason)
}

func (m *DisconnectRequest) String() string {
	return fmt.Sprintf("DREQ comm %#x remote comm %#x remote QPN %#x", m.LocalCommID, m.RemoteCommID, m.RemoteQPN)
}

func (m *DisconnectReply) String() string {
	return fmt.Sprintf("DREP comm %#x remote comm %#x", m.LocalCommID, m.RemoteCommID)
}
