package translator_test

import (
	"fmt"
	"net/netip"

	"github.com/dtakit/dtakit/dta"
	"github.com/dtakit/dtakit/keywrite"
	"github.com/dtakit/dtakit/rocev2"
	"github.com/dtakit/dtakit/translator"
)

// An Engine translates reports in memory: here a Key-Write instance is
// attached without a CM exchange, and one report with redundancy 2 becomes
// two RDMA WRITEs.
func ExampleEngine() {
	local := netip.MustParseAddrPort("127.0.0.1:5000")
	target := netip.MustParseAddrPort("127.0.0.1:4791")
	e, err := translator.NewEngine(translator.Config{Local: local, Collectors: []netip.AddrPort{target}})
	if err != nil {
		panic(err)
	}
	layout, _ := keywrite.NewLayout(1<<16, 4)
	geom, _ := layout.AppendBinary(nil)
	ad := dta.Advertisement{VA: 0x10000, Length: uint32(layout.RegionSize()), RKey: 7, Primitive: dta.OpKeyWrite, Geometry: geom}
	if _, err := e.Attach(0, ad, 0x11, 100); err != nil {
		panic(err)
	}

	r := dta.Report{Header: dta.Header{Opcode: dta.OpKeyWrite},
		KeyWrite: dta.KeyWrite{Redundancy: 2, Key: 42, Data: []byte{1, 2, 3, 4}}}
	e.Translate(&r, netip.MustParseAddrPort("127.0.0.1:41000"))
	roce, _ := e.Output() // and no acks: the report was not sequenced
	for _, d := range roce {
		var p rocev2.Packet
		if err := p.DecodeDatagram(d.Buf, local, d.Addr); err != nil {
			panic(err)
		}
		off := p.RETH.VA - ad.VA
		if off != layout.Offset(42, 0) && off != layout.Offset(42, 1) {
			panic("not a slot of key 42")
		}
		fmt.Printf("%v PSN %d AckReq %v, %d bytes at offset %#x\n",
			p.BTH.Opcode, p.BTH.PSN, p.BTH.AckReq, p.RETH.DMALength, off)
	}
	e.ResetOutput()
	fmt.Println(e.Counters().Writes, "writes")
	// Output:
	// RC RDMA WRITE Only PSN 100 AckReq false, 8 bytes at offset 0x605c0
	// RC RDMA WRITE Only PSN 101 AckReq true, 8 bytes at offset 0x48ad8
	// 2 writes
}
