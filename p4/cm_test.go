package p4

import (
	"net/netip"
	"testing"
	"time"

	"github.com/dtakit/dtakit/dta"
	"github.com/dtakit/dtakit/keywrite"
	"github.com/dtakit/dtakit/rocev2/target"
)

// TestHandshakeWithTarget runs the switch CPU's CM exchange against the
// software target's listener (in memory): REQ, REP, RTU, the advertisement
// SEND and its ACK; the resulting connection plans, and packets crafted on
// it are applied by the target.
func TestHandshakeWithTarget(t *testing.T) {
	remote := netip.MustParseAddrPort("10.0.0.2:4791")
	local := netip.MustParseAddrPort("10.0.0.1:4791")
	tgt, err := target.New(target.Config{Addr: remote, Peers: []netip.Prefix{netip.PrefixFrom(local.Addr(), 32)}})
	if err != nil {
		t.Fatal(err)
	}
	defer tgt.Close()
	l := keywrite.Layout{Slots: 1 << 12, DataSize: 4}
	err = l.Validate()
	if err != nil {
		t.Fatal(err)
	}
	mem := make([]byte, l.RegionSize())
	r, err := tgt.Register(mem, target.RemoteWrite)
	if err != nil {
		t.Fatal(err)
	}
	geo, _ := l.AppendBinary(nil)
	ad := dta.Advertisement{VA: r.VA(), Length: uint32(len(mem)), RKey: r.RKey(), Primitive: dta.OpKeyWrite, Geometry: geo}
	greeting, err := ad.AppendTo(nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := tgt.Listen(40050, target.ListenConfig{Greeting: greeting}); err != nil {
		t.Fatal(err)
	}
	c := testConnections(t)[0]
	c.Src, c.SrcPort, c.TranslatorQPN, c.StartPSN = local.Addr(), local.Port(), 0x21, 0x777
	c.Ad = dta.Advertisement{}
	h, req, err := NewHandshake(c, local, remote, 40050, 0xC0FFEE)
	if err != nil {
		t.Fatal(err)
	}
	var out target.Output
	pending := [][]byte{req}
	done := false
	for round := 0; round < 10 && !done; round++ {
		now := time.Now()
		for _, b := range pending {
			tgt.Process(now.UnixNano(), []target.Datagram{{Buf: b, Addr: local}}, &out)
		}
		pending = pending[:0]
		for _, d := range out.Datagrams() {
			reply, ok, err := h.Handle(d.Buf)
			if err != nil {
				t.Fatal(err)
			}
			if reply != nil {
				pending = append(pending, append([]byte(nil), reply...))
			}
			done = done || ok
		}
		out.Reset()
	}
	if !done {
		t.Fatal("handshake did not complete")
	}
	for _, b := range pending { // the advertisement's ACK
		tgt.Process(time.Now().UnixNano(), []target.Datagram{{Buf: b, Addr: local}}, &out)
	}
	conn := h.Connection()
	if conn.Ad.VA != ad.VA || conn.Ad.RKey != ad.RKey || conn.CollectorQPN == 0 {
		t.Fatalf("connection %+v", conn)
	}
	if _, err := NewPlan(Config{Collectors: []Collector{{Port: 1, Connections: []Connection{conn}}}}); err != nil {
		t.Fatal(err)
	}
	s, _ := conn.check()
	f := conn.craft(s, 42, []byte{1, 2, 3, 4}, 0, 0, conn.StartPSN)
	b, err := f.AppendTo(nil)
	if err != nil {
		t.Fatal(err)
	}
	before := tgt.Counters().WritePackets
	tgt.Process(time.Now().UnixNano(), []target.Datagram{{Buf: b[14+20+8:], Addr: local}}, &out)
	if cs := tgt.Counters(); cs.WritePackets != before+1 || cs.SendFailures != 0 {
		t.Fatalf("target counters after the first WRITE: %+v", cs)
	}
	store, _ := keywrite.NewStore(l, mem)
	if res, _ := store.Query(42, 1, keywrite.Policy{}); res.Status != keywrite.Found || string(res.Data) != "\x01\x02\x03\x04" {
		t.Fatalf("query after the handshake's first write: %+v", res)
	}
}
