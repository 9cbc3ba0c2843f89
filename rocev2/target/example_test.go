package target_test

import (
	"fmt"
	"net/netip"
	"time"

	"github.com/dtakit/dtakit/rocev2"
	"github.com/dtakit/dtakit/rocev2/target"
)

// A target driven in memory: one region, one queue pair made without the
// CM, and a peer's RDMA WRITE Only applied and acknowledged.
func Example() {
	tgAddr := netip.MustParseAddrPort("192.0.2.1:4791")
	peer := netip.MustParseAddrPort("192.0.2.2:49152")
	tg, _ := target.New(target.Config{Addr: tgAddr})
	mem := make([]byte, 64)
	region, _ := tg.Register(mem, target.RemoteWrite)
	qp, _ := tg.NewQP(target.QPConfig{Peer: peer, RemoteQPN: 7, RecvPSN: 100})

	w := rocev2.Packet{
		BTH:     rocev2.BTH{Opcode: rocev2.RCWriteOnly, PKey: rocev2.DefaultPKey, DestQP: qp.QPN(), PSN: 100, AckReq: true},
		RETH:    rocev2.RETH{VA: region.VA() + 8, RKey: region.RKey(), DMALength: 4},
		Payload: []byte("DTA!"),
	}
	frame, _ := w.AppendDatagram(nil, peer, tgAddr)

	var out target.Output
	tg.Process(time.Now().UnixNano(), []target.Datagram{{Buf: frame, Addr: peer}}, &out)
	fmt.Printf("memory: %q\n", mem[8:12])
	for _, d := range out.Datagrams() {
		var ack rocev2.Packet
		if err := ack.DecodeDatagram(d.Buf, tgAddr, d.Addr); err != nil {
			fmt.Println(err)
		}
		fmt.Printf("to %v: %v PSN %d syndrome %#x MSN %d\n", d.Addr, ack.BTH.Opcode, ack.BTH.PSN, ack.AETH.Syndrome, ack.AETH.MSN)
	}
	// Output:
	// memory: "DTA!"
	// to 192.0.2.2:49152: RC Acknowledge PSN 100 syndrome 0x1f MSN 1
}
