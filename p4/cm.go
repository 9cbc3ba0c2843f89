package p4

import (
	"errors"
	"fmt"
	"net/netip"

	"github.com/dtakit/dtakit/dta"
	"github.com/dtakit/dtakit/rocev2"
	"github.com/dtakit/dtakit/rocev2/cm"
)

// ErrRejected reports a collector that refused the connection (a CM REJ).
var ErrRejected = errors.New("p4: connection rejected")

// Handshake is the switch CPU's side of the RDMA CM for one translator QP:
// it builds the REQ, answers the collector's REP with an RTU, and ACKs the
// collector's advertisement SEND. Its result is the Connection NewPlan
// programs. It works on RoCEv2 datagrams (UDP payloads to and from port
// 4791, ICRC over the socket addresses as rocev2.DatagramICRC), so the CPU
// can run it over a socket bound to the translator's address; the data plane
// sends the CPU every RoCEv2 packet that is not an ACK or NAK
// (Ingress.to_cpu).
type Handshake struct {
	conn          Connection
	local, remote netip.AddrPort
	commID        uint32
	tid           uint64
	remoteComm    uint32
	recvPSN       rocev2.PSN
	replied       bool
	cmPSN         rocev2.PSN
}

// NewHandshake starts the CM exchange of c (whose Index, MACs, addresses,
// SrcPort and TranslatorQPN are set) with the collector listening on CM port
// cmPort at remote. Each side's starting PSN is the one it expects to
// receive, as the Linux CM uses them (docs/DTA-WIRE.md section 8.3): the
// REQ carries c.StartPSN, at which the collector's advertisement SEND must
// arrive, and the REP's starting PSN replaces c.StartPSN as the first PSN
// of the switch's writes. local is the translator's address and the
// port its REQ names. It returns the REQ datagram to send to remote; send it
// again until Handle answers.
func NewHandshake(c Connection, local, remote netip.AddrPort, cmPort uint16, commID uint32) (*Handshake, []byte, error) {
	h := &Handshake{conn: c, local: local, remote: remote, commID: commID, tid: uint64(commID), recvPSN: rocev2.PSN(c.StartPSN)}
	req := cm.ConnectRequest{
		LocalCommID: commID, ServiceID: cm.ServiceID(cmPort), LocalQPN: c.TranslatorQPN,
		ResponderResources: 16, InitiatorDepth: 16, RemoteCMResponseTimeout: 20,
		StartingPSN: c.StartPSN, LocalCMResponseTimeout: 20, RetryCount: 3,
		PKey: rocev2.DefaultPKey, PathMTU: cm.MTU1024, RNRRetryCount: 7, MaxCMRetries: 15,
		Primary: cm.Path{
			LocalLID: 0xFFFF, RemoteLID: 0xFFFF,
			LocalGID: cm.GID(local.Addr()), RemoteGID: cm.GID(remote.Addr()),
			HopLimit: 64, LocalACKTimeout: 14,
		},
	}
	if err := req.SetIPPrivateData(cm.IPHeader{SrcPort: local.Port(), Src: local.Addr(), Dst: remote.Addr()}, nil); err != nil {
		return nil, nil, fmt.Errorf("p4: handshake: %w: %w", ErrConfig, err)
	}
	b, err := h.cm(cm.Header(h.tid, cm.AttrREQ), &req)
	return h, b, err
}

func (h *Handshake) cm(hdr cm.MADHeader, m cm.Message) ([]byte, error) {
	mad, err := cm.AppendMAD(nil, hdr, m)
	if err != nil {
		return nil, fmt.Errorf("p4: handshake: %w", err)
	}
	p := cm.Packet(mad, h.cmPSN)
	h.cmPSN = h.cmPSN.Next()
	b, err := p.AppendDatagram(nil, h.local, h.remote)
	if err != nil {
		return nil, fmt.Errorf("p4: handshake: %w", err)
	}
	return b, nil
}

// Handle takes one datagram from the collector and returns the datagram to
// answer with, if any, and whether the connection is complete (the
// advertisement received and acknowledged). Datagrams that belong to
// another exchange are ignored.
func (h *Handshake) Handle(b []byte) (reply []byte, done bool, err error) {
	var p rocev2.Packet
	if err := p.DecodeDatagram(b, h.remote, h.local); err != nil {
		return nil, false, fmt.Errorf("p4: handshake: %w", err)
	}
	switch {
	case p.BTH.Opcode == rocev2.UDSendOnly && p.BTH.DestQP == cm.GSIQP:
		hdr, m, err := cm.DecodeMAD(p.Payload)
		if err != nil {
			return nil, false, fmt.Errorf("p4: handshake: %w", err)
		}
		switch m := m.(type) {
		case *cm.ConnectReply:
			if m.RemoteCommID != h.commID {
				return nil, false, nil
			}
			h.remoteComm, h.conn.StartPSN = m.LocalCommID, m.StartingPSN
			h.conn.CollectorQPN, h.replied = m.LocalQPN, true
			rtu := cm.ReadyToUse{LocalCommID: h.commID, RemoteCommID: m.LocalCommID}
			reply, err := h.cm(cm.Header(hdr.TransactionID, cm.AttrRTU), &rtu)
			return reply, false, err
		case *cm.Reject:
			if m.RemoteCommID == h.commID {
				return nil, false, fmt.Errorf("p4: handshake: %w: reason %d", ErrRejected, m.Reason)
			}
		}
	case p.BTH.Opcode == rocev2.RCSendOnly && h.replied && p.BTH.DestQP == h.conn.TranslatorQPN && p.BTH.PSN == h.recvPSN:
		ad, err := dta.ParseAdvertisement(p.Payload)
		if err != nil {
			return nil, false, fmt.Errorf("p4: handshake: %w", err)
		}
		h.conn.Ad = ad
		h.conn.Ad.Geometry = append([]byte(nil), ad.Geometry...)
		ack := rocev2.Packet{
			BTH:  rocev2.BTH{Opcode: rocev2.RCAcknowledge, PKey: rocev2.DefaultPKey, DestQP: h.conn.CollectorQPN, PSN: p.BTH.PSN},
			AETH: rocev2.AETH{Syndrome: rocev2.SyndromeACK, MSN: 1},
		}
		reply, err := ack.AppendDatagram(nil, h.local, h.remote)
		if err != nil {
			return nil, false, fmt.Errorf("p4: handshake: %w", err)
		}
		_, err = h.conn.check()
		return reply, err == nil, err
	}
	return nil, false, nil
}

// Connection returns the connection: complete once Handle reported done.
func (h *Handshake) Connection() Connection { return h.conn }
