package main

import (
	"encoding/hex"
	"flag"

	"github.com/dtakit/dtakit/inband"
	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
)

// INT and Telemetry Reports travel on deployment-chosen UDP ports.
var (
	reportPort = flag.Uint("report-port", 32766, "UDP port of Telemetry Reports (0: none)")
	intPort    = flag.Uint("int-port", 0, "UDP port that carries INT over UDP (0: none)")
	intAfterL4 = flag.Bool("int-after-l4", false, "in reports' inner packets, decode INT after every TCP/UDP header (INT over TCP, INTCollector's frames)")
)

// registerInband registers the inband layers on the ports the flags name.
func registerInband() {
	printers[inband.LayerTypeINT] = layerPrinter{name: "int", fields: intFields, target: true}
	printers[inband.LayerTypeReport] = layerPrinter{name: "telemetry_report", fields: telemetryReportFields, target: true}
	if *reportPort != 0 {
		inband.RegisterReportPort(uint16(*reportPort))
	}
	if *intPort != 0 {
		inband.RegisterUDPPort(uint16(*intPort))
	}
}

func metadataFields(m *inband.Metadata) object {
	o := object{}
	add := func(bit int, name string, v any) {
		if m.Has(bit) {
			o = append(o, field{name, v})
		}
	}
	add(inband.BitNodeID, "node_id", m.NodeID)
	if m.Has(inband.BitL1Ports) {
		o = append(o, field{"l1_ingress", m.L1Ingress}, field{"l1_egress", m.L1Egress})
	}
	add(inband.BitHopLatency, "hop_latency", m.HopLatency)
	if m.Has(inband.BitQueue) {
		o = append(o, field{"queue_id", m.QueueID}, field{"queue_occupancy", m.QueueOccupancy})
	}
	add(inband.BitIngressTS, "ingress_timestamp", m.IngressTimestamp)
	add(inband.BitEgressTS, "egress_timestamp", m.EgressTimestamp)
	if m.Has(inband.BitL2Ports) {
		o = append(o, field{"l2_ingress", m.L2Ingress}, field{"l2_egress", m.L2Egress})
	}
	add(inband.BitTxUtil, "tx_utilization", m.TxUtilization)
	add(inband.BitQueueCongestion, "queue_congestion", m.QueueCongestion)
	if m.Has(inband.BitBuffer) {
		o = append(o, field{"buffer_id", m.BufferID}, field{"buffer_occupancy", m.BufferOccupancy})
	}
	if len(m.DomainSpecific) > 0 {
		o = append(o, field{"domain_specific", hex.EncodeToString(m.DomainSpecific)})
	}
	return o
}

func intFields(l gopacket.Layer) object {
	i := l.(*inband.INT)
	o := object{{"type", i.Type}, {"npt", i.NPT}, {"length", i.Length}, {"field", i.Field}}
	if i.Legacy {
		// INT 0.5 or 1.0: an 8-bit shim Type.
		o = append(o, field{"legacy", true}, field{"rep", i.Replication}, field{"c", i.Copy})
		if i.Type == inband.TypeMD && i.Version == 0 {
			o = append(o, field{"max_hop_count", i.MaxHopCount}, field{"total_hop_count", i.TotalHopCount},
				field{"tail_proto", i.TailProto}, field{"tail_port", i.TailPort}, field{"tail_dscp", i.TailDSCP})
		}
	}
	if i.Type == inband.TypeDestination {
		return append(o, field{"data", hex.EncodeToString(i.Stack)})
	}
	o = append(o, field{"version", i.Version}, field{"d", i.Discard})
	if i.Type == inband.TypeMD {
		o = append(o, field{"e", i.HopCountExceeded}, field{"m", i.MTUExceeded}, field{"hop_ml", i.HopML}, field{"remaining_hop_count", i.RemainingHopCount})
	}
	o = append(o, field{"instructions", i.Instructions}, field{"domain_id", i.DomainID}, field{"ds_instructions", i.DSInstructions}, field{"ds_flags", i.DSFlags})
	if i.Type == inband.TypeMX {
		return append(o, field{"source_inserted", hex.EncodeToString(i.Stack)})
	}
	n, err := i.Hops()
	if err != nil {
		// Source-only metadata of unknown length: show the stack raw.
		return append(o, field{"stack", hex.EncodeToString(i.Stack)}, field{"hops_error", err.Error()})
	}
	hops := make([]object, n)
	var m inband.Metadata
	for h := range n {
		i.Hop(h, &m)
		hops[h] = metadataFields(&m)
	}
	return append(o, field{"hops", hops})
}

func telemetryReportFields(l gopacket.Layer) object {
	r := l.(*inband.Report)
	o := object{{"version", r.Version}, {"hw_id", r.HardwareID}, {"seq", r.Sequence}, {"node_id", r.NodeID}}
	if r.Format != inband.FormatV2 {
		o = append(o, field{"format", map[inband.Format]string{inband.FormatV1: "1.0", inband.FormatV05: "0.5"}[r.Format]}, field{"ingress_timestamp", r.IngressTimestamp})
	}
	reports := make([]object, len(r.Individuals))
	for k := range r.Individuals {
		ind := &r.Individuals[k]
		ro := object{{"rep_type", ind.RepType}, {"in_type", ind.InType}, {"length", ind.Length}, {"md_length", ind.MDLength},
			{"d", ind.Dropped}, {"q", ind.Congested}, {"f", ind.Tracked}, {"i", ind.Intermediate}}
		if r.Format != inband.FormatV2 {
			ro = append(ro, field{"nproto", ind.NProto})
		}
		if ind.RepType == inband.RepINT {
			var m inband.Metadata
			ind.Metadata(&m)
			ro = append(ro, field{"rep_md_bits", ind.RepMdBits})
			if r.Format == inband.FormatV2 {
				ro = append(ro, field{"domain_id", ind.DomainID}, field{"ds_md_bits", ind.DSMdBits}, field{"ds_md_status", ind.DSMdStatus})
			}
			ro = append(ro, field{"metadata", metadataFields(&m)})
			if m.Has(inband.BitDropReason) {
				ro = append(ro, field{"drop_queue_id", m.DropQueueID}, field{"drop_reason", m.DropReason})
			}
		}
		if inner := innerFields(ind); inner != nil {
			ro = append(ro, field{"inner", inner})
		} else if len(ind.Inner) > 0 {
			ro = append(ro, field{"inner_raw", hex.EncodeToString(ind.Inner)})
		}
		reports[k] = ro
	}
	return append(o, field{"reports", reports})
}

// innerFields decodes a truncated packet (InType 3, 4, 5) as dtadump
// decodes a captured one, INT included.
func innerFields(ind *inband.Individual) object {
	first := map[uint8]gopacket.LayerType{inband.InEthernet: layers.LayerTypeEthernet, inband.InIPv4: layers.LayerTypeIPv4, inband.InIPv6: layers.LayerTypeIPv6}[ind.InType]
	if first == 0 {
		return nil
	}
	p := gopacket.NewPacket(ind.Inner, first, gopacket.DecodeOptions{NoCopy: true, Lazy: false})
	o := object{}
	hasINT := false
	for _, l := range p.Layers() {
		if pr, ok := printers[l.LayerType()]; ok {
			o = append(o, field{pr.name, pr.fields(l)})
		}
		hasINT = hasINT || l.LayerType() == inband.LayerTypeINT
	}
	if tl := p.TransportLayer(); *intAfterL4 && !hasINT && tl != nil {
		var in inband.INT
		if in.DecodeFromBytes(tl.LayerPayload(), gopacket.NilDecodeFeedback) == nil {
			o = append(o, field{printers[inband.LayerTypeINT].name, intFields(&in)})
		}
	}
	if el := p.ErrorLayer(); el != nil {
		// A truncated packet ends where the switch cut it.
		o = append(o, field{"error", el.Error().Error()})
	}
	return o
}
