package p4

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dtakit/dtakit/appendlist"
	"github.com/dtakit/dtakit/dta"
	"github.com/dtakit/dtakit/keyincr"
	"github.com/dtakit/dtakit/keywrite"
	"github.com/dtakit/dtakit/p4/internal/p4gen"
	"github.com/dtakit/dtakit/rocev2"
	"github.com/dtakit/dtakit/rocev2/target"
)

type report struct {
	conn  int
	key   uint32 // the key, or the Append list
	value []byte // data, counter, or an Append batch
	head  uint32 // the Append batch's ring head
}

// crafted is a run of reports crafted as the translator would, copy by
// copy, with consecutive PSNs from each connection's start.
type crafted struct {
	frames  [][]byte
	want    []rocev2.Frame
	reports []report
	n       int // redundancy of every report
}

func craftRun(t *testing.T, conns []Connection, reports int) crafted {
	t.Helper()
	rng := rand.New(rand.NewPCG(5, 6))
	c := crafted{n: 1 + rng.IntN(p4gen.MaxCopies)}
	psn := make([]uint32, len(conns))
	heads := map[uint32]uint32{}
	for i := range conns {
		psn[i] = conns[i].StartPSN
	}
	for r := range reports {
		i := r % len(conns)
		s, err := conns[i].check()
		if err != nil {
			t.Fatal(err)
		}
		key := rng.Uint32()
		value := make([]byte, 8)
		binary.BigEndian.PutUint64(value, rng.Uint64()>>rng.IntN(64))
		copies, head := c.n, uint32(0)
		switch s.op {
		case dta.OpPostcard:
			copies = s.pc.Layout().Copies
			value = make([]byte, s.pc.Layout().ChunkSize())
			s.pc.EncodeChunk(value, key, []uint32{rng.Uint32(), rng.Uint32()})
		case dta.OpKeyWrite:
			value = value[4:]
		case dta.OpAppend:
			// One batch of DTA_AP_BATCH non-zero entries on one of 8 lists.
			copies, key = 1, uint32(rng.IntN(8))
			value = value[:0]
			for range p4gen.AppendBatch {
				value = binary.BigEndian.AppendUint32(value, 1+rng.Uint32N(1<<31))
			}
			head = heads[key]
			heads[key] = (head + p4gen.AppendBatch) % (1 << p4gen.AppendEntryBits)
		}
		c.reports = append(c.reports, report{i, key, value, head})
		for copy := range copies {
			f := conns[i].craft(s, key, value, uint8(copy), head, psn[i])
			psn[i] = (psn[i] + 1) & rocev2.PSNMask
			b, err := f.AppendTo(nil)
			if err != nil {
				t.Fatal(err)
			}
			c.frames = append(c.frames, b)
			c.want = append(c.want, f)
		}
	}
	return c
}

// attach registers mem on tgt for c and opens the target's QP for it, as
// the collector's advertisement and CM exchange would: c takes the region's
// VA and rkey and the target's QPN.
func attach(t *testing.T, tgt *target.Target, c *Connection, mem []byte, access target.Access) {
	t.Helper()
	r, err := tgt.Register(mem, access)
	if err != nil {
		t.Fatal(err)
	}
	c.Ad.VA, c.Ad.RKey = r.VA(), r.RKey()
	qp, err := tgt.NewQP(target.QPConfig{
		Peer:      netip.AddrPortFrom(c.Src, c.SrcPort),
		RemoteQPN: c.TranslatorQPN, RecvPSN: rocev2.PSN(c.StartPSN),
	})
	if err != nil {
		t.Fatal(err)
	}
	c.CollectorQPN = qp.QPN()
}

// TestTargetAcceptsCrafted feeds packets built as the translator's egress
// builds them (ICRC included, PSNs wrapping) to the software RoCEv2 target
// and queries what landed with the collector's own packages.
func TestTargetAcceptsCrafted(t *testing.T) {
	tgtAddr := netip.MustParseAddrPort("10.0.0.2:4791")
	tgt, err := target.New(target.Config{Addr: tgtAddr, Peers: []netip.Prefix{netip.MustParsePrefix("10.0.0.1/32")}})
	if err != nil {
		t.Fatal(err)
	}
	defer tgt.Close()
	conns := testConnections(t)
	kwl, _ := keywrite.ParseLayout(conns[0].Ad.Geometry)
	kil, _ := keyincr.ParseLayout(conns[1].Ad.Geometry)
	apl, _ := appendlist.ParseLayout(conns[2].Ad.Geometry)
	kwMem := make([]byte, kwl.RegionSize())
	kiMem := make([]byte, kil.RegionSize())
	apMem := make([]byte, apl.RegionSize())
	for i, mem := range [][]byte{kwMem, kiMem, apMem} {
		access := target.RemoteWrite
		if i == 1 {
			access = target.RemoteAtomic
		}
		attach(t, tgt, &conns[i], mem, access)
	}
	for i := range conns {
		if _, err := conns[i].check(); err != nil {
			t.Skipf("skipping: the target's region placement does not fit the switch: %v", err)
		}
	}
	run := craftRun(t, conns, 200)
	feedTarget(tgt, run)
	checkApplied(t, tgt.Counters(), run.want)
	// The same reports applied by the collector's own packages give the
	// same bytes, overwrites and collisions included.
	kws, kis, apWant := applyReports(t, kwl, kil, apl, run)
	if !bytes.Equal(apMem, apWant) {
		t.Error("Append region written through the target differs from the batches at their lists' heads")
	}
	if !bytes.Equal(kwMem, kws.Region()) {
		t.Error("Key-Write region written through the target differs from keywrite.Store.Put's")
	}
	if !bytes.Equal(kiMem, kis.Region()) {
		t.Error("Key-Increment region written through the target differs from keyincr.Store.Add's")
	}
	found := 0
	for _, r := range run.reports {
		if r.conn == 0 {
			if res, _ := kws.Query(r.key, run.n, keywrite.Policy{}); res.Status == keywrite.Found {
				found++
			}
		}
	}
	if found < len(run.reports)/3*9/10 {
		t.Fatalf("only %d of %d Key-Write reports readable", found, len(run.reports)/3)
	}
}

// feedTarget hands the run's frames to tgt as UDP datagrams from their
// sources.
func feedTarget(tgt *target.Target, run crafted) {
	var out target.Output
	for i, b := range run.frames {
		udp := b[dta.EthernetLen+20:]
		src := netip.AddrPortFrom(run.want[i].Src, run.want[i].SrcPort)
		tgt.Process(time.Now().UnixNano(), []target.Datagram{{Buf: udp[8:], Addr: src}}, &out)
	}
}

// checkApplied requires the target to have applied every frame of want:
// each WRITE and each atomic, none refused.
func checkApplied(t *testing.T, cs target.Counters, want []rocev2.Frame) {
	t.Helper()
	writes, atomics := uint64(0), uint64(0)
	for _, f := range want {
		if f.BTH.Opcode == rocev2.RCWriteOnly {
			writes++ // Key-Write and Append
		} else {
			atomics++
		}
	}
	if cs.BadICRC != 0 || cs.Malformed != 0 || cs.Unknown != 0 || cs.OutOfOrder != 0 || cs.NAKAccess != 0 {
		t.Fatalf("target refused crafted packets: %+v", cs)
	}
	if cs.WritePackets != writes || cs.Atomics != atomics {
		t.Fatalf("target applied %d writes and %d atomics, want %d and %d", cs.WritePackets, cs.Atomics, writes, atomics)
	}
}

// applyReports applies the run's reports (connections 0, 1, 2: Key-Write,
// Key-Increment, Append) with the collector's packages and returns the
// stores and the Append region they give.
func applyReports(t *testing.T, kwl keywrite.Layout, kil keyincr.Layout, apl appendlist.Layout, run crafted) (*keywrite.Store, *keyincr.Store, []byte) {
	t.Helper()
	kws, err := keywrite.NewStore(kwl, nil)
	if err != nil {
		t.Fatal(err)
	}
	kis, err := keyincr.NewStore(kil, nil)
	if err != nil {
		t.Fatal(err)
	}
	apWant := make([]byte, apl.RegionSize())
	for _, r := range run.reports {
		switch r.conn {
		case 0:
			err = kws.Put(r.key, r.value, run.n)
		case 1:
			err = kis.Add(r.key, binary.BigEndian.Uint64(r.value), run.n)
		case 2:
			copy(apWant[apl.ListOffset(r.key)+uint64(r.head)*uint64(apl.SlotSize()):], r.value)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	return kws, kis, apWant
}

// TestTsharkDissectsCrafted has Wireshark's infiniband dissector read the
// crafted packets. Wireshark shows the ICRC without checking it; the
// target above checks it.
func TestTsharkDissectsCrafted(t *testing.T) {
	tshark, err := exec.LookPath("tshark")
	if err != nil {
		if os.Getenv("DTAKIT_REQUIRE_TOOLS") == "1" {
			t.Fatalf("tshark is required (DTAKIT_REQUIRE_TOOLS=1): %v", err)
		}
		t.Skip("skipping: tshark not found (Debian package tshark)")
	}
	run := craftRun(t, append(testConnections(t), pcConnection(t)), 40)
	pcap := filepath.Join(t.TempDir(), "crafted.pcap")
	if err := os.WriteFile(pcap, pcapFile(run.frames), 0o644); err != nil {
		t.Fatal(err)
	}
	fields := []string{"infiniband.bth.opcode", "infiniband.bth.destqp", "infiniband.bth.psn",
		"infiniband.reth.va", "infiniband.reth.dmalen", "infiniband.atomiceth.swapdt", "infiniband.invariant.crc"}
	args := []string{"-r", pcap, "-T", "fields", "-E", "separator=,"}
	for _, f := range fields {
		args = append(args, "-e", f)
	}
	out, err := exec.Command(tshark, args...).Output()
	if err != nil {
		t.Fatalf("tshark: %v", err)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) != len(run.frames) {
		t.Fatalf("tshark printed %d packets, want %d", len(lines), len(run.frames))
	}
	for i, f := range run.want {
		b := run.frames[i]
		icrc := binary.BigEndian.Uint32(b[len(b)-4:]) // Wireshark shows the wire bytes as a number
		want := []string{fmt.Sprint(uint8(f.BTH.Opcode)), fmt.Sprint(f.BTH.DestQP), fmt.Sprint(uint32(f.BTH.PSN)), "", "", "", ""}
		if f.BTH.Opcode == rocev2.RCWriteOnly {
			want[3], want[4] = "0x"+fmt.Sprintf("%016x", f.RETH.VA), fmt.Sprint(f.RETH.DMALength)
		} else {
			want[3], want[5] = "0x"+fmt.Sprintf("%016x", f.AtomicETH.VA), fmt.Sprint(f.AtomicETH.SwapAddData)
		}
		want[6] = "0x" + fmt.Sprintf("%08x", icrc)
		got := strings.Split(lines[i], ",")
		for j := range want {
			if j < len(got) && normalize(got[j]) == normalize(want[j]) {
				continue
			}
			t.Fatalf("packet %d: tshark %q, want %q (fields %v)", i, lines[i], strings.Join(want, ","), fields)
		}
	}
}

// normalize reads a tshark value as a number where it is one, so that hex
// and decimal renderings compare equal.
func normalize(s string) string {
	if v, err := strconv.ParseUint(s, 0, 64); err == nil {
		return strconv.FormatUint(v, 10)
	}
	return s
}

// pcapFile returns a classic pcap file of Ethernet frames.
func pcapFile(frames [][]byte) []byte {
	b := binary.LittleEndian.AppendUint32(nil, 0xA1B2C3D4)
	b = binary.LittleEndian.AppendUint16(b, 2)
	b = binary.LittleEndian.AppendUint16(b, 4)
	b = binary.LittleEndian.AppendUint64(b, 0)
	b = binary.LittleEndian.AppendUint32(b, 65535)
	b = binary.LittleEndian.AppendUint32(b, 1) // Ethernet
	for i, f := range frames {
		b = binary.LittleEndian.AppendUint32(b, uint32(i))
		b = binary.LittleEndian.AppendUint32(b, 0)
		b = binary.LittleEndian.AppendUint32(b, uint32(len(f)))
		b = binary.LittleEndian.AppendUint32(b, uint32(len(f)))
		b = append(b, f...)
	}
	return b
}
