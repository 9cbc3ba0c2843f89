package intbridge

import (
	"testing"

	"github.com/dtakit/dtakit/inband"
)

// FuzzBridge: any datagram is mapped or refused without panicking, and
// every DTA report the bridge makes is valid.
func FuzzBridge(f *testing.F) {
	sink := inband.Individual{RepType: inband.RepINT, InType: inband.InEthernet, Dropped: true, Congested: true, RepMdBits: 1, Inner: mdPacket(f, []uint32{1, 2, 3})}
	sink.SetMetadata(&inband.Metadata{Present: 1, DropReason: 3})
	f.Add(encode(f, &inband.Report{NodeID: 7, Individuals: []inband.Individual{sink}}))
	f.Add([]byte{0x20, 0, 0, 0, 0, 0, 0, 1, 0x14, 0xFF, 0, 0, 0x45, 0, 0, 20})
	b, _ := New(Config{INTPort: intPort})
	f.Fuzz(func(t *testing.T, pkt []byte) {
		out, err := b.Handle(pkt)
		if err != nil {
			return
		}
		for _, r := range out {
			if err := r.Validate(); err != nil {
				t.Fatalf("invalid report %+v: %v", r, err)
			}
		}
	})
}
