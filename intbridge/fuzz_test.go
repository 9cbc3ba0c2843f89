package intbridge

import (
	"testing"

	"github.com/gopacket/gopacket/layers"

	"github.com/dtakit/dtakit/inband"
)

// FuzzBridge: any datagram is mapped or refused without panicking, and
// every DTA report the bridge makes is valid.
func FuzzBridge(f *testing.F) {
	sink := inband.Individual{RepType: inband.RepINT, InType: inband.InEthernet, Dropped: true, Congested: true, RepMdBits: 1, Inner: mdPacket(f, []uint32{1, 2, 3})}
	sink.SetMetadata(&inband.Metadata{Present: 1, DropReason: 3})
	f.Add(encode(f, &inband.Report{NodeID: 7, Individuals: []inband.Individual{sink}}))
	f.Add([]byte{0x20, 0, 0, 0, 0, 0, 0, 1, 0x14, 0xFF, 0, 0, 0x45, 0, 0, 20})
	tcp := inband.Individual{RepType: inband.RepINT, InType: inband.InIPv4, Inner: tcpINTPacket(f, []uint32{1, 2, 3, 4, 5, 6, 7}, 60)}
	f.Add(encode(f, &inband.Report{NodeID: 8, Individuals: []inband.Individual{tcp}}))
	f.Add(encode(f, &inband.Report{Format: inband.FormatV1, NodeID: 8, Individuals: []inband.Individual{{NProto: inband.NProtoIPv4, Inner: tcp.Inner}}}))
	f.Add(encode(f, &inband.Report{Format: inband.FormatV05, Individuals: []inband.Individual{{NProto: inband.NProtoDrop, Dropped: true, MD: make([]byte, 12), Inner: sink.Inner}}}))
	b, _ := New(Config{INTPort: intPort, INTDSCP: intDSCP, INTDSCPMask: 0x3F})
	a, _ := New(Config{INTAfterL4: true})
	f.Fuzz(func(t *testing.T, pkt []byte) {
		for _, br := range []*Bridge{a, b} {
			out, err := br.Handle(pkt)
			if err != nil {
				continue
			}
			for _, r := range out {
				if err := r.Validate(); err != nil {
					t.Fatalf("invalid report %+v: %v", r, err)
				}
			}
		}
	})
}

// FuzzHandlePacket: any raw frame is mapped or counted without panicking,
// and every DTA report is valid.
func FuzzHandlePacket(f *testing.F) {
	f.Add(mdPacket(f, []uint32{1, 2, 3}), false)
	f.Add(tcpINTPacket(f, []uint32{1, 2, 3}, 60), true)
	b, _ := New(Config{INTPort: intPort, INTDSCP: intDSCP, INTDSCPMask: 0x3F, INTAfterL4: true})
	f.Fuzz(func(t *testing.T, frame []byte, ip bool) {
		first := layers.LayerTypeEthernet
		if ip {
			first = layers.LayerTypeIPv4
		}
		out, err := b.HandlePacket(frame, first)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range out {
			if err := r.Validate(); err != nil {
				t.Fatalf("invalid report %+v: %v", r, err)
			}
		}
	})
}
