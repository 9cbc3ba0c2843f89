package p4

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"

	"github.com/dtakit/dtakit/appendlist"
	"github.com/dtakit/dtakit/dta"
	"github.com/dtakit/dtakit/dta/tofino"
	"github.com/dtakit/dtakit/keyincr"
	"github.com/dtakit/dtakit/keywrite"
	"github.com/dtakit/dtakit/p4/internal/p4gen"
	"github.com/dtakit/dtakit/postcard"
	"github.com/dtakit/dtakit/primitive"
	"github.com/dtakit/dtakit/rocev2"
)

// Errors of the control plane, grouped here.
var (
	// ErrConfig reports a translator configuration the switch cannot run.
	ErrConfig = errors.New("p4: invalid configuration")
	// ErrAdvertisement reports an advertisement the compiled program cannot
	// serve (primitive, geometry or region placement).
	ErrAdvertisement = errors.New("p4: advertisement the switch cannot serve")
)

// icrcFrom is where the translator's ICRC hash starts in the IP packet: BTH
// byte 8 (AckReq, Resv7, PSN), after IPv4 and UDP; the egress hash covers
// every byte from there to the end of the payload.
const icrcFrom = 20 + 8 + 8

// Connection is one RC queue pair the switch translator writes on: what its
// egress qp table, PSN register and responder table hold for it. The CM
// exchange that creates it (rocev2/cm, run by the switch's CPU) provides the
// QPNs and the starting PSN; the collector's advertisement the region.
type Connection struct {
	Index          uint8      // QP index in the switch's tables and registers
	SrcMAC, DstMAC [6]byte    // the switch port's MAC and the collector's (next hop)
	Src, Dst       netip.Addr // translator and collector IPv4 addresses
	SrcPort        uint16     // UDP source port of every packet on the QP
	TranslatorQPN  uint32     // the switch's QPN: the collector's ACKs and NAKs go to it
	CollectorQPN   uint32     // destination QP of the crafted packets
	StartPSN       uint32     // first PSN of the switch's packets: the collector's REP's starting PSN
	Ad             dta.Advertisement
	// KeyWriteData is the Key-Write data size D translator.p4 was compiled
	// with (-DDTA_KW_DATA_BYTES, one of p4gen.KeyWriteDataChoices); 0 means
	// p4gen.KeyWriteData, the default build's.
	KeyWriteData int
	// AppendBatch is the Append batch B translator.p4 was compiled with
	// (-DDTA_AP_BATCH, one of p4gen.AppendBatchChoices); 0 means
	// p4gen.AppendBatch, the default build's.
	AppendBatch int
}

// kwData returns the Key-Write data size the program was compiled with.
func (c *Connection) kwData() int {
	if c.KeyWriteData == 0 {
		return p4gen.KeyWriteData
	}
	return c.KeyWriteData
}

// apBatch returns the Append batch the program was compiled with.
func (c *Connection) apBatch() int {
	if c.AppendBatch == 0 {
		return p4gen.AppendBatch
	}
	return c.AppendBatch
}

// shape is what the compiled translator can write for a connection.
type shape struct {
	op    dta.Opcode
	t     *tofinoKind
	slots uint64
	kw    keywrite.Layout
	ki    keyincr.Layout
	ap    appendlist.Layout
	pc    *postcard.Codec
}

// check validates c against the compiled program (p4/include/dta_constants.p4).
func (c *Connection) check() (shape, error) {
	var s shape
	if !c.Src.Is4() || !c.Dst.Is4() {
		return s, fmt.Errorf("p4: connection %d: %w: addresses must be IPv4", c.Index, ErrConfig)
	}
	if c.TranslatorQPN > rocev2.PSNMask || c.CollectorQPN > rocev2.PSNMask || c.StartPSN > rocev2.PSNMask {
		return s, fmt.Errorf("p4: connection %d: %w: QPN or PSN wider than 24 bits", c.Index, ErrConfig)
	}
	if int(c.Index) >= 1<<p4gen.QPBits {
		return s, fmt.Errorf("p4: connection %d: %w: index beyond the QP registers", c.Index, ErrConfig)
	}
	if !slices.Contains(p4gen.KeyWriteDataChoices, c.kwData()) {
		return s, fmt.Errorf("p4: connection %d: %w: Key-Write data size %d is not one of the compiled choices %v",
			c.Index, ErrConfig, c.KeyWriteData, p4gen.KeyWriteDataChoices)
	}
	if !slices.Contains(p4gen.AppendBatchChoices, c.apBatch()) {
		return s, fmt.Errorf("p4: connection %d: %w: Append batch %d is not one of the compiled choices %v",
			c.Index, ErrConfig, c.AppendBatch, p4gen.AppendBatchChoices)
	}
	if err := s.of(c); err != nil {
		return s, fmt.Errorf("p4: connection %d: %w", c.Index, err)
	}
	// The switch adds the slot offset to the low 32 bits of the VA only.
	if c.Ad.VA&0xFFFFFFFF+uint64(c.Ad.Length) > 1<<32 {
		return s, fmt.Errorf("p4: connection %d: %w: region crosses a 4 GiB boundary", c.Index, ErrAdvertisement)
	}
	if s.slots > 1<<32 {
		return s, fmt.Errorf("p4: connection %d: %w: more than 2^32 slots", c.Index, ErrAdvertisement)
	}
	return s, nil
}

// of fills s with the primitive c's advertisement names, its layout
// decoded by the primitive's Kind and checked against the compiled
// constants.
func (s *shape) of(c *Connection) error {
	s.op = c.Ad.Primitive
	t, err := lookup(s.op)
	if err == nil {
		s.t = t
		var l primitive.Layout
		if l, err = primitive.Parse(s.op, c.Ad.Geometry); err == nil {
			err = t.check(c, l, s)
		}
	}
	if err != nil {
		return fmt.Errorf("%w: %w", ErrAdvertisement, err)
	}
	return nil
}

// perCopy accepts the hasher the egress slot hashes compute: tofino.PerCopy
// (CRC32 for copy 0, tofino.CopyCRC(n) for copy n).
func perCopy(h tofino.Hasher) error {
	if _, ok := h.(tofino.PerCopyHasher); !ok {
		return errors.New("hasher is not tofino.PerCopy")
	}
	return nil
}

// craft returns the frame the translator's egress builds for copy n of a
// report with PSN psn: the same fields, in the same order, from the same
// constants. value is the Key-Write data, the big-endian counter, or an
// Append batch (key the list, head its ring head in entries), or a
// Postcarding chunk (key the flow).
func (c *Connection) craft(s shape, key uint32, value []byte, n uint8, head, psn uint32) rocev2.Frame {
	f := c.packet(psn)
	s.t.frame(c, &s, &f, key, value, n, head)
	return f
}

// packet returns what every packet of the connection shares: addresses,
// ports, the BTH's P_Key, destination QP and PSN psn.
func (c *Connection) packet(psn uint32) rocev2.Frame {
	f := rocev2.Frame{
		DstMAC: c.DstMAC, SrcMAC: c.SrcMAC, Src: c.Src, Dst: c.Dst,
		TTL: 64, DontFragment: true, SrcPort: c.SrcPort,
	}
	f.BTH = rocev2.BTH{PKey: rocev2.DefaultPKey, DestQP: c.CollectorQPN, PSN: rocev2.PSN(psn)}
	return f
}

// probe returns the probe the translator's egress sends in place of f, a
// stalled QP's report frame crafted with the probe's PSN (section 8.7):
// f with AckReq, but for a FETCH_ADD the zero-length WRITE zeroWrite.
func (c *Connection) probe(f rocev2.Frame) rocev2.Frame {
	if f.BTH.Opcode == rocev2.RCFetchAdd {
		return c.zeroWrite(uint32(f.BTH.PSN))
	}
	f.BTH.AckReq = true
	return f
}

// zeroWrite returns a Key-Increment QP's probe with PSN psn: an RDMA WRITE
// Only of no bytes at the region's base, AckReq set. A responder may drop
// a duplicate atomic it kept no result for (Linux rxe); a duplicate WRITE
// it answers with an ACK, and a zero-length one checks no R_Key, so a
// region open to atomics only takes it.
func (c *Connection) zeroWrite(psn uint32) rocev2.Frame {
	f := c.packet(psn)
	f.BTH.Opcode, f.BTH.AckReq = rocev2.RCWriteOnly, true
	f.RETH = rocev2.RETH{VA: c.Ad.VA, RKey: c.Ad.RKey}
	return f
}

// ICRCConstant returns the per-QP constant of the translator's ICRC: the
// ICRC of the connection's packets with every byte the egress hash covers
// (BTH byte 8 to the end of the payload) zero. The switch XORs it with
// CRC(DTA_CRC_ICRC) over those bytes.
func (c *Connection) ICRCConstant() (uint32, error) {
	s, err := c.check()
	if err != nil {
		return 0, err
	}
	return c.icrcConstant(s)
}

// icrcConstant is ICRCConstant for a connection check has accepted as s.
func (c *Connection) icrcConstant(s shape) (uint32, error) {
	value := make([]byte, s.t.valueLen(&s))
	return c.icrcBase(c.craft(s, 0, value, 0, 0, 0))
}

// probeICRCConstant is the per-QP constant of the ICRC of zeroWrite, a
// Key-Increment QP's probe: the qp table's probe_icrc.
func (c *Connection) probeICRCConstant() (uint32, error) {
	return c.icrcBase(c.zeroWrite(0))
}

// icrcBase returns f's ICRC with every byte the egress hash covers zero.
func (c *Connection) icrcBase(f rocev2.Frame) (uint32, error) {
	b, err := f.AppendTo(nil)
	if err != nil {
		return 0, fmt.Errorf("p4: connection %d: %w", c.Index, err)
	}
	return rocev2.ICRCBase(b[dta.EthernetLen:len(b)-rocev2.ICRCLen], icrcFrom)
}
