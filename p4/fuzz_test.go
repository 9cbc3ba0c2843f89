package p4

import (
	"net/netip"
	"testing"

	"github.com/dtakit/dtakit/rocev2"
	"github.com/dtakit/dtakit/rocev2/cm"
)

// FuzzHandshakeHandle feeds arbitrary datagrams to the switch CPU's CM
// exchange: no panic, and a completed handshake always yields a connection
// the compiled program can serve.
func FuzzHandshakeHandle(f *testing.F) {
	local := netip.MustParseAddrPort("10.0.0.1:4791")
	remote := netip.MustParseAddrPort("10.0.0.2:4791")
	rep := cm.ConnectReply{LocalCommID: 9, RemoteCommID: 7, LocalQPN: 0x55, StartingPSN: 100}
	mad, _ := cm.AppendMAD(nil, cm.Header(7, cm.AttrREP), &rep)
	p := cm.Packet(mad, 0)
	seed, _ := p.AppendDatagram(nil, remote, local)
	f.Add(seed)
	send := rocev2.Packet{BTH: rocev2.BTH{Opcode: rocev2.RCSendOnly, PKey: 0xFFFF, DestQP: 0x21, PSN: 0x777}, Payload: make([]byte, 16)}
	seed2, _ := send.AppendDatagram(nil, remote, local)
	f.Add(seed2)
	f.Fuzz(func(t *testing.T, b []byte) {
		c := Connection{Src: local.Addr(), Dst: remote.Addr(), SrcPort: 4791, TranslatorQPN: 0x21, StartPSN: 0x777}
		h, _, err := NewHandshake(c, local, remote, 40050, 7)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range [][]byte{seed, b} {
			_, done, err := h.Handle(d)
			if done {
				if err != nil {
					t.Fatalf("done with error %v", err)
				}
				conn := h.Connection()
				if _, err := conn.check(); err != nil {
					t.Fatalf("completed with a connection the switch refuses: %v", err)
				}
			}
		}
	})
}
