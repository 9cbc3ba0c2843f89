package p4

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math/rand/v2"
	"net/netip"
	"testing"
	"time"

	"github.com/dtakit/dtakit/appendlist"
	"github.com/dtakit/dtakit/dta"
	"github.com/dtakit/dtakit/p4/internal/p4gen"
	"github.com/dtakit/dtakit/rocev2"
	"github.com/dtakit/dtakit/rocev2/target"
)

// apSwitch models translator.p4's Append state for a build of batch B,
// register by register: ap_count (ap_next), the B-1 held-entry registers
// ap_e0..ap_e(B-2) (DTA_AP_HOLD, DTA_AP_READ) and ap_head (ap_advance).
type apSwitch struct {
	b     int
	count []uint8
	held  [][]uint32 // held[p][list]: ap_e<p>
	head  []uint32
}

func newAPSwitch(b int) *apSwitch {
	m := &apSwitch{b: b, count: make([]uint8, 1<<p4gen.AppendListBits), head: make([]uint32, 1<<p4gen.AppendListBits)}
	for range b - 1 {
		m.held = append(m.held, make([]uint32, 1<<p4gen.AppendListBits))
	}
	return m
}

// report runs one Append report (list below L, data non-zero) through
// ingress and, when it completes a batch, egress's payload (DTA_AP_FILL):
// the batch's bytes and the ring head it goes to.
func (m *apSwitch) report(list, data uint32) (batch []byte, head uint32, sent bool) {
	pos := m.count[list]
	if int(pos) == m.b-1 {
		m.count[list] = 0
	} else {
		m.count[list]++
	}
	if int(pos) != m.b-1 {
		m.held[pos][list] = data
		return nil, 0, false // held: dropped
	}
	for p := range m.b - 1 {
		batch = binary.BigEndian.AppendUint32(batch, m.held[p][list])
	}
	batch = binary.BigEndian.AppendUint32(batch, data)
	head = m.head[list]
	if head == 1<<p4gen.AppendEntryBits-uint32(m.b) {
		m.head[list] = 0
	} else {
		m.head[list] += uint32(m.b)
	}
	return batch, head, true
}

// TestPlanAppendBatch: for every compiled Append batch B
// (p4gen.AppendBatchChoices, -DDTA_AP_BATCH=B), an Append instance of
// batch B is accepted by a translator built for it (Connection.AppendBatch)
// and refused by the default build; its ICRC constant is the one of a
// B-entry write; and reports run through the model of the build's
// registers, crafted and fed to rocev2/target, leave the region byte-equal
// to what appendlist.Batcher (the software translator) writes, ring
// wrap-around included.
func TestPlanAppendBatch(t *testing.T) {
	for _, b := range p4gen.AppendBatchChoices {
		conns := testConnections(t)
		c := &conns[2]
		l := appendlist.Layout{Lists: 1 << p4gen.AppendListBits, Entries: 1 << p4gen.AppendEntryBits, EntrySize: p4gen.AppendEntry, Batch: b}
		geo, err := l.AppendBinary(nil)
		if err != nil {
			t.Fatal(err)
		}
		tgt, err := target.New(target.Config{Addr: netip.MustParseAddrPort("10.0.0.2:4791"), Peers: []netip.Prefix{netip.MustParsePrefix("10.0.0.1/32")}})
		if err != nil {
			t.Fatal(err)
		}
		mem := make([]byte, l.RegionSize())
		attach(t, tgt, c, mem, target.RemoteWrite)
		c.Ad.Geometry, c.Ad.Length, c.AppendBatch = geo, uint32(len(mem)), b
		if b != p4gen.AppendBatch {
			c.AppendBatch = 0
			if _, err := c.check(); !errors.Is(err, ErrAdvertisement) {
				t.Errorf("B = %d on the default build: %v, want ErrAdvertisement", b, err)
			}
			c.AppendBatch = b
		}
		s, err := c.check()
		if err != nil {
			tgt.Close()
			t.Skipf("skipping: the target's region placement does not fit the switch: %v", err)
		}
		k, err := c.ICRCConstant()
		if err != nil {
			t.Fatal(err)
		}
		zero := c.craft(s, 5, make([]byte, b*p4gen.AppendEntry), 0, 0, 9)
		if zero.RETH.DMALength != uint32(b*p4gen.AppendEntry) {
			t.Errorf("B = %d: RETH length %d", b, zero.RETH.DMALength)
		}
		if fb, err := zero.AppendTo(nil); err != nil {
			t.Fatal(err)
		} else if got, err := rocev2.ICRCBase(fb[dta.EthernetLen:len(fb)-rocev2.ICRCLen], icrcFrom); err != nil || got != k {
			t.Errorf("B = %d: ICRC constant %#x, the frame's %#x (%v)", b, k, got, err)
		}

		// Enough reports on 3 lists for list 0's ring to wrap.
		sw := newAPSwitch(b)
		bat, err := appendlist.NewBatcher(l)
		if err != nil {
			t.Fatal(err)
		}
		want := make([]byte, len(mem))
		rng := rand.New(rand.NewPCG(uint64(b), 32))
		psn := c.StartPSN
		var out target.Output
		var ws []appendlist.Write
		sent := 0
		for r := range 3 * (1<<p4gen.AppendEntryBits + 100) {
			list := uint32(r % 3)
			data := 1 + rng.Uint32N(1<<31)
			if batch, head, ok := sw.report(list, data); ok {
				f := c.craft(s, list, batch, 0, head, psn)
				psn = (psn + 1) & rocev2.PSNMask
				fb, err := f.AppendTo(nil)
				if err != nil {
					t.Fatal(err)
				}
				tgt.Process(time.Now().UnixNano(), []target.Datagram{{Buf: fb[dta.EthernetLen+20+8:], Addr: netip.AddrPortFrom(c.Src, c.SrcPort)}}, &out)
				sent++
			}
			ws, err = bat.AppendWrites(ws[:0], list, binary.BigEndian.AppendUint32(nil, data), false)
			if err != nil {
				t.Fatal(err)
			}
			for _, w := range ws {
				copy(want[w.Offset:], w.Data)
			}
		}
		cs := tgt.Counters()
		tgt.Close()
		if cs.WritePackets != uint64(sent) || cs.BadICRC != 0 || cs.OutOfOrder != 0 || cs.Malformed != 0 {
			t.Fatalf("B = %d: target counters %+v, want %d writes", b, cs, sent)
		}
		if sent != 3*((1<<p4gen.AppendEntryBits+100)/b) {
			t.Errorf("B = %d: %d batches sent", b, sent)
		}
		if !bytes.Equal(mem, want) {
			t.Errorf("B = %d: region written by the switch model differs from appendlist.Batcher's", b)
		}
	}
}
