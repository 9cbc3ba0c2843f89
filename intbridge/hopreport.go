package intbridge

import (
	"net/netip"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"

	"github.com/dtakit/dtakit/inband"
)

// HopReports turns the per-hop reports in Telemetry Reports (INT-XD and
// INT-MX postcards, drop and congestion reports: an individual report of
// RepType INT whose truncated packet carries no INT-MD stack on INTPort)
// into one-hop Records for the Detector and the Aggregator: the reporting
// node is the hop's switch, the report's metadata its values, a D flag
// one drop in the drop queue, a Q flag the queue's congestion. INT-MD path
// traces come from Bridge.Traces instead. It is not safe for concurrent
// use.
type HopReports struct {
	intPort uint16
	ttl     uint8 // the flows' initial TTL
	rep     inband.Report
	parser  map[uint8]*gopacket.DecodingLayerParser
	eth     layers.Ethernet
	ip4     layers.IPv4
	ip6     layers.IPv6
	udp     layers.UDP
	tcp     layers.TCP
	decs    []gopacket.LayerType
	recs    []Record
	hops    []Hop
}

// NewHopReports returns a HopReports for the bridge's configuration: it
// leaves out reports carrying INT over UDP to cfg.INTPort (0: none are
// left out), and places a report on its flow's path as the bridge places
// a postcard, at hop 1 + cfg.InitialTTL (default 64) - TTL.
func NewHopReports(cfg Config) *HopReports {
	h := &HopReports{intPort: cfg.INTPort, ttl: cfg.InitialTTL, parser: map[uint8]*gopacket.DecodingLayerParser{}}
	if h.ttl == 0 {
		h.ttl = 64
	}
	for in, first := range map[uint8]gopacket.LayerType{inband.InEthernet: layers.LayerTypeEthernet, inband.InIPv4: layers.LayerTypeIPv4, inband.InIPv6: layers.LayerTypeIPv6} {
		p := gopacket.NewDecodingLayerParser(first, &h.eth, &h.ip4, &h.ip6, &h.udp, &h.tcp)
		p.IgnoreUnsupported = true
		h.parser[in] = p
	}
	return h
}

// Records returns the per-hop records in the Telemetry Report payload,
// received at now; they are valid until the next call. Reports without a
// flow (no IP in the truncated packet) are left out.
func (h *HopReports) Records(payload []byte, now time.Time) ([]Record, error) {
	h.recs, h.hops = h.recs[:0], h.hops[:0]
	if err := h.rep.DecodeFromBytes(payload, gopacket.NilDecodeFeedback); err != nil {
		return nil, err
	}
	for i := range h.rep.Individuals {
		ind := &h.rep.Individuals[i]
		if ind.RepType != inband.RepINT {
			continue
		}
		p := h.parser[ind.InType]
		if p == nil {
			continue
		}
		_ = p.DecodeLayers(ind.Inner, &h.decs) // a truncated packet: what decoded is enough
		var t inband.FiveTuple
		ok := false
		var ttl uint8
		for _, lt := range h.decs {
			switch lt {
			case layers.LayerTypeIPv4:
				ok, ttl = true, h.ip4.TTL
				t.Src, _ = netip.AddrFromSlice(h.ip4.SrcIP.To4())
				t.Dst, _ = netip.AddrFromSlice(h.ip4.DstIP.To4())
				t.Proto = uint8(h.ip4.Protocol)
			case layers.LayerTypeIPv6:
				ok, ttl = true, h.ip6.HopLimit
				t.Src, _ = netip.AddrFromSlice(h.ip6.SrcIP)
				t.Dst, _ = netip.AddrFromSlice(h.ip6.DstIP)
				t.Proto = uint8(h.ip6.NextHeader)
			case layers.LayerTypeUDP:
				t.SrcPort, t.DstPort = uint16(h.udp.SrcPort), uint16(h.udp.DstPort)
			case layers.LayerTypeTCP:
				t.SrcPort, t.DstPort = uint16(h.tcp.SrcPort), uint16(h.tcp.DstPort)
			}
		}
		if !ok || h.intPort != 0 && t.Proto == uint8(layers.IPProtocolUDP) && t.DstPort == h.intPort {
			continue
		}
		var m inband.Metadata
		_ = ind.Metadata(&m) // RepType INT: cannot fail
		var hop Hop
		hop.SetMetadata(&m)
		hop.Switch, hop.Has = h.rep.NodeID, hop.Has|HasSwitch
		if ind.Dropped {
			hop.Queue, hop.Drops, hop.Has = m.DropQueueID, 1, hop.Has|HasDrops
		}
		if ind.Congested && m.Has(inband.BitQueue) {
			hop.Congestion, hop.Has = m.QueueOccupancy, hop.Has|HasCongestion
		}
		h.hops = append(h.hops, hop)
		rec := Record{Flow: inband.FlowKey(t), Tuple: t, Time: now, PerHop: true}
		if p := 1 + int(h.ttl) - int(ttl); p >= 1 && p <= MaxHops {
			rec.Position = uint8(p)
		}
		h.recs = append(h.recs, rec)
	}
	for i := range h.recs {
		h.recs[i].Hops = h.hops[i : i+1 : i+1]
	}
	return h.recs, nil
}
