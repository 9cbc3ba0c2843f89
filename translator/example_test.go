package translator_test

import (
	"fmt"
	"net/netip"
	"time"

	"github.com/dtakit/dtakit/collector"
	"github.com/dtakit/dtakit/dta"
	"github.com/dtakit/dtakit/keywrite"
	"github.com/dtakit/dtakit/rocev2/target"
	"github.com/dtakit/dtakit/translator"
)

// A report followed forward, all in memory: an Engine (the translator)
// connects to a collector's target over the RDMA CM, learns its Key-Write
// region from the advertisement, and turns one report with redundancy 2
// into two RDMA WRITEs, which the target applies to the region the query
// reads. Nothing here opens a socket: the datagrams each side sends are
// handed to the other.
func ExampleEngine() {
	local := netip.MustParseAddrPort("127.0.0.1:5000")
	tgAddr := netip.MustParseAddrPort("127.0.0.1:4791")
	col, err := collector.New(collector.Config{Addr: tgAddr})
	if err != nil {
		panic(err)
	}
	defer col.Close()
	layout := keywrite.Layout{Slots: 1 << 16, DataSize: 4}
	store, err := col.AddKeyWrite(layout)
	if err != nil {
		panic(err)
	}
	e, err := translator.NewEngine(translator.Config{Local: local, Collectors: []netip.AddrPort{tgAddr}})
	if err != nil {
		panic(err)
	}

	// exchange hands the engine's RoCEv2 datagrams to the target and the
	// target's responses back, until neither has anything to send.
	now := time.Now().UnixNano()
	var out target.Output
	exchange := func() (sent int) {
		for {
			roce, _ := e.Output() // and no acks: the report is not sequenced
			for i := range roce {
				roce[i].Addr = local // a datagram's Addr is its peer: here its source
			}
			out.Reset()
			col.Target().Process(now, roce, &out)
			sent += len(roce)
			e.ResetOutput()
			if len(roce) == 0 && out.Len() == 0 {
				return sent
			}
			for _, d := range out.Datagrams() {
				e.HandleRoCE(d.Buf, tgAddr, now)
			}
		}
	}
	e.Start(now)
	exchange()
	fmt.Println(e.Instances()[0].Primitive, "instance ready")

	r := dta.Report{Header: dta.Header{Opcode: dta.OpKeyWrite},
		KeyWrite: dta.KeyWrite{Redundancy: 2, Key: 42, Data: []byte{1, 2, 3, 4}}}
	e.Translate(&r, netip.MustParseAddrPort("127.0.0.1:41000"), now)
	fmt.Println(exchange(), "RDMA WRITEs")

	res, _ := store.Query(42, 2, keywrite.Plurality)
	fmt.Printf("key 42: %v %x\n", res.Status, res.Data)
	// Output:
	// keywrite instance ready
	// 2 RDMA WRITEs
	// key 42: found 01020304
}
