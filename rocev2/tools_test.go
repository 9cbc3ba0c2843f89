package rocev2

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"github.com/dtakit/dtakit/rocev2/internal/crosscheck"
	"math/rand/v2"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
)

func TestTsharkDissectsFrames(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 12))
	var frames [][]byte
	var want []Frame
	// Every valid opcode at least twice, IPv4 and IPv6, plus random ones.
	for i := range 256 {
		op := Opcode(i)
		if !op.Valid() {
			continue
		}
		for _, v6 := range []bool{false, true} {
			f := randomFrame(r, v6)
			f.BTH.Opcode = op
			if !op.HasPayload() {
				f.Payload = nil
			} else if f.Payload == nil {
				f.Payload = []byte{1, 2, 3}
			}
			f = refill(r, f)
			// Wireshark picks the UDP dissector of the lower port: keep the
			// source port above the registered range.
			f.SrcPort |= 0xC000
			b, err := f.AppendTo(nil)
			if err != nil {
				t.Fatal(err)
			}
			frames = append(frames, b)
			want = append(want, f)
		}
	}
	pcap := crosscheck.WritePcap(t, frames)
	got := crosscheck.Tshark(t, pcap, "infiniband", "data")
	if len(got) != len(frames) {
		t.Fatalf("tshark dissected %d packets, want %d", len(got), len(frames))
	}
	for i, f := range want {
		m := got[i]
		check := func(key, want string) {
			t.Helper()
			if m[key] != want {
				t.Errorf("packet %d (%v): %s = %q, want %q", i, f.BTH.Opcode, key, m[key], want)
			}
		}
		dec := func(v uint64) string { return strconv.FormatUint(v, 10) }
		b2i := func(v bool) string {
			if v {
				return "1"
			}
			return "0"
		}
		const bt = "infiniband.bth_tree/"
		check(bt+"infiniband.bth.opcode", dec(uint64(f.BTH.Opcode)))
		check(bt+"infiniband.bth.se", b2i(f.BTH.Solicited))
		check(bt+"infiniband.bth.m", b2i(f.BTH.MigReq))
		check(bt+"infiniband.bth.padcnt", dec(uint64(-len(f.Payload)&3)))
		check(bt+"infiniband.bth.tver", "0")
		check(bt+"infiniband.bth.p_key", dec(uint64(f.BTH.PKey)))
		check(bt+"infiniband.reserved", fmt.Sprintf("%02x", bit(f.BTH.FECN, 7)|bit(f.BTH.BECN, 6)))
		check(bt+"infiniband.bth.destqp", fmt.Sprintf("0x%06x", f.BTH.DestQP))
		check(bt+"infiniband.bth.a", b2i(f.BTH.AckReq))
		check(bt+"infiniband.bth.psn", dec(uint64(f.BTH.PSN)))
		h := f.BTH.Opcode.Headers()
		present := func(key string, has Headers) bool {
			t.Helper()
			_, ok := m["infiniband/"+key]
			if ok != (h&has != 0) {
				t.Errorf("packet %d (%v): tshark sees %s: %v", i, f.BTH.Opcode, key, ok)
			}
			return ok && h&has != 0
		}
		if present("infiniband.reth", HasRETH) {
			check("infiniband.reth_tree/infiniband.reth.va", fmt.Sprintf("0x%016x", f.RETH.VA))
			check("infiniband.reth_tree/infiniband.reth.r_key", fmt.Sprintf("0x%08x", f.RETH.RKey))
			check("infiniband.reth_tree/infiniband.reth.dmalen", dec(uint64(f.RETH.DMALength)))
		}
		if present("infiniband.atomiceth", HasAtomicETH) {
			check("infiniband.atomiceth_tree/infiniband.reth.va", fmt.Sprintf("0x%016x", f.AtomicETH.VA))
			check("infiniband.atomiceth_tree/infiniband.reth.r_key", fmt.Sprintf("0x%08x", f.AtomicETH.RKey))
			check("infiniband.atomiceth_tree/infiniband.atomiceth.swapdt", dec(f.AtomicETH.SwapAddData))
			check("infiniband.atomiceth_tree/infiniband.atomiceth.cmpdt", dec(f.AtomicETH.CompareData))
		}
		if present("infiniband.aeth", HasAETH) {
			check("infiniband.aeth_tree/infiniband.aeth.syndrome", dec(uint64(f.AETH.Syndrome)))
			check("infiniband.aeth_tree/infiniband.aeth.msn", dec(uint64(f.AETH.MSN)))
		}
		if present("infiniband.atomicacketh", HasAtomicAckETH) {
			check("infiniband.atomicacketh_tree/infiniband.atomicacketh.origremdt", dec(f.AtomicAckETH.OrigRemoteData))
		}
		if present("infiniband.deth", HasDETH) {
			check("infiniband.deth_tree/infiniband.deth.q_key", fmt.Sprintf("0x%016x", f.DETH.QKey))
			check("infiniband.deth_tree/infiniband.deth.srcqp", fmt.Sprintf("0x%08x", f.DETH.SrcQP))
		}
		if present("infiniband.immdt", HasImmDt) {
			check("infiniband/infiniband.immdt", colonHex(binary.BigEndian.AppendUint32(nil, f.ImmDt.Data)))
		}
		if present("infiniband.ieth", HasIETH) {
			check("infiniband/infiniband.ieth", colonHex(binary.BigEndian.AppendUint32(nil, f.IETH.RKey)))
		}
		// tshark reads the ICRC's 4 wire bytes as a big-endian number.
		b := frames[i]
		check("infiniband/infiniband.invariant.crc", fmt.Sprintf("0x%08x", binary.BigEndian.Uint32(b[len(b)-4:])))
		if len(f.Payload) > 0 && f.BTH.DestQP != 1 {
			// tshark shows the payload with its pad bytes.
			padded := append(bytes.Clone(f.Payload), make([]byte, -len(f.Payload)&3)...)
			check("data/data.data", colonHex(padded))
		}
	}
}

// refill gives the headers of f's opcode random values again (randomFrame
// zeroed those of its own opcode's absent headers).
func refill(r *rand.Rand, f Frame) Frame {
	h := f.BTH.Opcode.Headers()
	if h&HasDETH != 0 {
		f.DETH = DETH{QKey: r.Uint32(), SrcQP: r.Uint32() & PSNMask}
	}
	if h&HasRETH != 0 {
		f.RETH = RETH{VA: r.Uint64(), RKey: r.Uint32(), DMALength: r.Uint32()}
	}
	if h&HasAtomicETH != 0 {
		f.AtomicETH = AtomicETH{VA: r.Uint64(), RKey: r.Uint32(), SwapAddData: r.Uint64(), CompareData: r.Uint64()}
	}
	if h&HasAETH != 0 {
		f.AETH = AETH{Syndrome: Syndrome(r.Uint32()), MSN: r.Uint32() & PSNMask}
	}
	if h&HasAtomicAckETH != 0 {
		f.AtomicAckETH = AtomicAckETH{OrigRemoteData: r.Uint64()}
	}
	if h&HasImmDt != 0 {
		f.ImmDt = ImmDt{Data: r.Uint32()}
	}
	if h&HasIETH != 0 {
		f.IETH = IETH{RKey: r.Uint32()}
	}
	return f
}

func colonHex(b []byte) string {
	s := hex.EncodeToString(b)
	var sb strings.Builder
	for i := 0; i < len(s); i += 2 {
		if i > 0 {
			sb.WriteByte(':')
		}
		sb.WriteString(s[i : i+2])
	}
	return sb.String()
}

// scapyICRC is run by /usr/bin/python3: for each hex frame on stdin it clears
// the ICRC of scapy's RoCE BTH layer, rebuilds the frame (scapy computes the
// ICRC) and prints the rebuilt frame's last 4 bytes in hex.
const scapyICRC = `
import sys
from scapy.all import Ether, raw
from scapy.contrib.roce import BTH
for line in sys.stdin:
    p = Ether(bytes.fromhex(line.strip()))
    if BTH not in p:
        print("no-bth")
        continue
    p[BTH].icrc = None
    print(raw(p)[-4:].hex())
`

func TestScapyICRC(t *testing.T) {
	python := "/usr/bin/python3"
	if _, err := os.Stat(python); err != nil {
		crosscheck.LookTool(t, "/usr/bin/python3", "python3-scapy")
	}
	if err := exec.Command(python, "-c", "import scapy.contrib.roce").Run(); err != nil {
		if os.Getenv("DTAKIT_REQUIRE_TOOLS") == "1" {
			t.Fatalf("scapy's RoCE layer cannot be imported (install Debian package python3-scapy): %v", err)
		}
		t.Skipf("skipping cross-check: scapy's RoCE layer cannot be imported (install Debian package python3-scapy; DTAKIT_REQUIRE_TOOLS=1 makes this a failure): %v", err)
	}
	r := rand.New(rand.NewPCG(21, 22))
	n := 300
	if testing.Short() {
		n = 60
	}
	var in strings.Builder
	var want []string
	for range n {
		// scapy computes the ICRC of IPv4 frames only.
		f := refill(r, randomFrame(r, false))
		b, err := f.AppendTo(nil)
		if err != nil {
			t.Fatal(err)
		}
		in.WriteString(hex.EncodeToString(b) + "\n")
		want = append(want, hex.EncodeToString(b[len(b)-4:]))
	}
	cmd := exec.Command(python, "-c", scapyICRC)
	cmd.Stdin = strings.NewReader(in.String())
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("scapy: %v\n%s", err, stderr.String())
	}
	got := strings.Fields(string(out))
	if len(got) != len(want) {
		t.Fatalf("scapy answered %d lines, want %d\n%s", len(got), len(want), stderr.String())
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("frame %d: scapy ICRC %s, ours %s", i, got[i], want[i])
		}
	}
}
