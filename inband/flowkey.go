package inband

import (
	"encoding/binary"
	"math"
	"net/netip"

	"github.com/dtakit/dtakit/dta/tofino"
)

// crc32IEEE is CRC-32 (IEEE), the reporter's crc_32, sliced by eight.
var crc32IEEE = func() *tofino.Hash {
	h, err := tofino.NewPredefined(32, "crc_32")
	if err != nil {
		panic(err)
	}
	return h
}()

// FiveTuple identifies a flow: the addresses, the IP protocol and the
// TCP/UDP ports (zero for other protocols).
type FiveTuple struct {
	Src, Dst         netip.Addr
	Proto            uint8
	SrcPort, DstPort uint16
}

// FlowKey returns the flow's 32-bit DTA key: the CRC-32 (IEEE) of the
// 5-tuple in wire order, for IPv4 src(4) dst(4) proto(1) sport(2)
// dport(2), the 13 bytes p4/reporter's flow_key hashes, so keys computed
// here and on the switch agree; for IPv6 the same over 16-byte addresses
// (37 bytes). Distinct flows collide: see ExpectedCollisions. It does not
// allocate.
func FlowKey(t FiveTuple) uint32 {
	var b [37]byte
	n := 0
	if t.Src.Is4() && t.Dst.Is4() {
		s, d := t.Src.As4(), t.Dst.As4()
		n += copy(b[n:], s[:])
		n += copy(b[n:], d[:])
	} else {
		s, d := t.Src.As16(), t.Dst.As16()
		n += copy(b[n:], s[:])
		n += copy(b[n:], d[:])
	}
	b[n] = t.Proto
	binary.BigEndian.PutUint16(b[n+1:], t.SrcPort)
	binary.BigEndian.PutUint16(b[n+3:], t.DstPort)
	// crc32.ChecksumIEEE would let b escape (it dispatches through a
	// function value); tofino's sliced CRC does not, and is four times
	// faster than a byte-wise loop on 13 bytes.
	return uint32(crc32IEEE.SumBytes(b[:n+5]))
}

// ExpectedCollisions returns the expected number of pairs among flows
// distinct flows that share a 32-bit key, C(flows, 2)/2^32 (about 11 641
// at 10 M flows, 1.2 M at 100 M), and the expected number of flows that
// share their key with another, flows·(1 - (1 - 2^-32)^(flows-1)). A key
// shared by two flows mixes their reports in every primitive; size the
// key space, or tolerate the rate, accordingly.
func ExpectedCollisions(flows uint64) (pairs, flowsAffected float64) {
	f := float64(flows)
	pairs = f * (f - 1) / 2 / math.Ldexp(1, 32)
	flowsAffected = f * -math.Expm1((f-1)*math.Log1p(-math.Ldexp(1, -32)))
	return pairs, flowsAffected
}
