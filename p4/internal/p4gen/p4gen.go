// Package p4gen writes p4/include/dta_constants.p4, the P4 programs' only
// source of DTA constants, from the Go packages that define them, so the
// switch and the SDK cannot drift apart.
package p4gen

import (
	"bytes"
	"fmt"
	"math/bits"
	"strings"

	"github.com/dtakit/dtakit/dta"
	"github.com/dtakit/dtakit/dta/tofino"
	"github.com/dtakit/dtakit/keywrite"
	"github.com/dtakit/dtakit/postcard"
	"github.com/dtakit/dtakit/rocev2"
	"github.com/dtakit/dtakit/rocev2/cm"
)

// Sizes the P4 programs are compiled for. They are the switch's compile-time
// geometry; the collector's advertisement must match them (the control plane
// checks it).
const (
	// KeyWriteData is the default Key-Write data size D in bytes (the
	// reference prototype's default); KeyWriteDataChoices lists the others
	// a translator can be compiled for.
	KeyWriteData = 4
	// MaxCopies is the highest redundancy N the translator replicates: one
	// hash unit per copy.
	MaxCopies = 4
	// PostcardHops is B, the hops per path.
	PostcardHops = 5
	// PostcardCacheBits is log2 of the translator's postcard cache entries.
	PostcardCacheBits = 12
	// PostcardChunkBits bounds the chunks C of a Postcarding region to
	// 2^PostcardChunkBits: the egress keeps that many bits of the chunk hash.
	PostcardChunkBits = 27
	// PostcardEvicted marks the replication IDs of an evicted flow's copies
	// (the copy index is the rest).
	PostcardEvicted = 0x80
	// AppendEntry is the Append entry size e in bytes and AppendBatch the
	// batch B.
	AppendEntry = 4
	AppendBatch = 4
	// AppendListBits is log2 of L, the lists the translator keeps heads
	// for, and AppendEntryBits log2 of E, the entries of each list's ring.
	AppendListBits  = 10
	AppendEntryBits = 12
	// QPBits is log2 of the per-QP register entries (PSNs).
	QPBits = 8
	// StallBits is log2 of StallPackets: the reports a QP sends with no
	// ACK, NAK or atomic ACK coming back before the egress takes it for
	// stalled (a lost sequence error NAK) and sends its reports as probes.
	// It must exceed the reports of one AckReq interval (64) plus one round
	// trip of the QP's packets, so that a healthy QP never probes.
	StallBits    = 12
	StallPackets = 1 << StallBits
	// ProbeBehind is how far behind the QP's next PSN a probe's PSN is:
	// inside the responder's duplicate region (the 2^23 PSNs behind the
	// expected one) for any gap shorter than 2^22 packets, so the responder
	// does not execute it and answers with an ACK of its expected PSN - 1.
	ProbeBehind = 1 << 22
)

// KeyWriteDataChoices are the Key-Write data sizes D translator.p4 compiles
// for (the reference prototype's 4, 12 and 28, and 8 and 16): one is chosen
// with -DDTA_KW_DATA_BYTES=D, KeyWriteData by default.
var KeyWriteDataChoices = []int{4, 8, 12, 16, 28}

// AppendBatchChoices are the Append batches B translator.p4 compiles for:
// every power of two from 1 to 16 (appendlist.Layout's batches, the
// reference prototype's range), one chosen with -DDTA_AP_BATCH=B,
// AppendBatch by default.
var AppendBatchChoices = []int{1, 2, 4, 8, 16}

// HopMask returns what the postcard translator's Ingress.hops table gives a
// postcard of hop (1-based) whose flow needs want hops: the hop's bit in the
// cache's hop mask, and the mask of the other hops the flow must already
// hold to complete with this one. ok is false for a postcard the cache
// rejects (hop 0, hop above want, want above B).
func HopMask(hop, want int) (bit, need uint8, ok bool) {
	if hop < 1 || want < hop || want > PostcardHops {
		return 0, 0, false
	}
	bit = 1 << (hop - 1)
	return bit, uint8(1<<want-1) &^ bit, true
}

// HopEntry is one entry of the postcard translator's Ingress.hops table.
type HopEntry struct {
	Hop                   int
	Sequenced, HasPathLen bool
	PathLen               int // 0: unknown (B hops)
	UDPLen                int
	Bit, Need             uint8
}

// HopEntries returns the entries of Ingress.hops: every well-formed
// (hop, path length) pair with and without the sequence byte.
func HopEntries() []HopEntry {
	var es []HopEntry
	for _, seq := range []bool{false, true} {
		udp := 8 + 2 + dta.PostcardLen
		if seq {
			udp++
		}
		for pl := -1; pl <= PostcardHops; pl++ { // -1: no path length byte
			want := pl
			if pl <= 0 {
				want = PostcardHops
			}
			for hop := 1; hop <= want; hop++ {
				bit, need, _ := HopMask(hop, want)
				e := HopEntry{Hop: hop, Sequenced: seq, HasPathLen: pl >= 0, PathLen: max(pl, 0), UDPLen: udp, Bit: bit, Need: need}
				if e.HasPathLen {
					e.UDPLen++
				}
				es = append(es, e)
			}
		}
	}
	return es
}

// Hash names one CRC the P4 programs instantiate: the macro the include
// defines and the Go CRC it must equal.
type Hash struct {
	Macro string
	Width int // output bits of the Hash<bit<W>> that uses it
	CRC   tofino.CRC
}

// ICRCCRC is the linear part of the ICRC's CRC-32 (init 0, no final XOR);
// the data plane hashes the variable bytes of a packet with it (rocev2.ICRCBase).
var ICRCCRC = tofino.CRC{Width: 32, Poly: 0x04C11DB7, Reversed: true}

// Hashes returns every custom CRC the include defines, in order.
func Hashes() []Hash {
	crc32, _ := tofino.Predefined("CRC32")
	h := []Hash{{"DTA_CRC32", 32, crc32}}
	for n := 1; n < MaxCopies; n++ {
		h = append(h, Hash{fmt.Sprintf("DTA_CRC_COPY%d", n), 32, tofino.CopyCRC(uint8(n))})
	}
	for i := 0; i < PostcardHops; i++ {
		h = append(h, Hash{fmt.Sprintf("DTA_CRC_HOP%d", i+1), 32, postcard.HopCRC(postcard.DefaultChecksums, i+1)})
	}
	h = append(h, Hash{"DTA_CRC_ICRC", 32, ICRCCRC})
	return h
}

// appendBatches writes DTA_AP_BATCH and, per choice of it, the macros
// that spell translator.p4's batch out entry by entry: P4 has no loops over
// header fields or registers, so the B-1 held entries' registers, their
// holding and reading, the batch's payload fields, the bridged entries and
// the ICRC's field list are generated here. The held registers come in two
// forms: a put and a get action each (DTA_AP_REGISTERS, DTA_AP_HOLD,
// DTA_AP_READ; translator.p4), or one action each that puts at its
// position and always reads (DTA_AP_KEEP_REGISTERS, DTA_AP_KEEP;
// translator_t2.p4, whose back end failed on the first form).
func appendBatches(b *bytes.Buffer, d func(string, uint64, string)) {
	b.WriteString("#ifndef DTA_AP_BATCH\n")
	d("DTA_AP_BATCH", AppendBatch, "Append batch B; -DDTA_AP_BATCH=B for another choice")
	b.WriteString("#endif\n")
	var choices []string
	for i, bt := range AppendBatchChoices {
		if i == 0 {
			fmt.Fprintf(b, "#if DTA_AP_BATCH == %d\n", bt)
		} else {
			fmt.Fprintf(b, "#elif DTA_AP_BATCH == %d\n", bt)
		}
		def := func(name, why string, parts []string, sep string) {
			fmt.Fprintf(b, "// %s\n#define %s", why, name)
			for j, p := range parts {
				if j > 0 {
					b.WriteString(sep)
				}
				fmt.Fprintf(b, " \\\n    %s", p)
			}
			b.WriteString("\n")
		}
		var held, payload, regs, put, get, keepRegs, keep, fill, icrc []string
		for e := range bt {
			payload = append(payload, fmt.Sprintf("bit<%d> e%d;", AppendEntry*8, e))
			icrc = append(icrc, fmt.Sprintf("h.ap_payload.e%d", e))
			if e == bt-1 {
				fill = append(fill, fmt.Sprintf("h.ap_payload.e%d = h.ap.data;", e))
				break
			}
			held = append(held, fmt.Sprintf("bit<%d> e%d;", AppendEntry*8, e))
			fill = append(fill, fmt.Sprintf("h.ap_payload.e%d = h.bridge_ap.e%d;", e, e))
			regs = append(regs,
				fmt.Sprintf("Register<bit<%d>, bit<DTA_AP_LIST_BITS>>(1 << DTA_AP_LIST_BITS, 0) ap_e%d;", AppendEntry*8, e),
				fmt.Sprintf("RegisterAction<bit<%[1]d>, bit<DTA_AP_LIST_BITS>, bit<%[1]d>>(ap_e%[2]d) ap_put%[2]d = { void apply(inout bit<%[1]d> v) { v = h.ap.data; } };", AppendEntry*8, e),
				fmt.Sprintf("RegisterAction<bit<%[1]d>, bit<DTA_AP_LIST_BITS>, bit<%[1]d>>(ap_e%[2]d) ap_get%[2]d = { void apply(inout bit<%[1]d> v, out bit<%[1]d> r) { r = v; } };", AppendEntry*8, e))
			put = append(put, fmt.Sprintf("if (m.pos == %d) { ap_put%d.execute(lidx); }", e, e))
			get = append(get, fmt.Sprintf("h.bridge_ap.e%d = ap_get%d.execute(lidx);", e, e))
			keepRegs = append(keepRegs,
				fmt.Sprintf("Register<bit<%d>, bit<DTA_AP_LIST_BITS>>(1 << DTA_AP_LIST_BITS, 0) ap_e%d;", AppendEntry*8, e),
				fmt.Sprintf("RegisterAction<bit<%[1]d>, bit<DTA_AP_LIST_BITS>, bit<%[1]d>>(ap_e%[2]d) ap_keep%[2]d = { void apply(inout bit<%[1]d> v, out bit<%[1]d> r) { if (m.pos == %[2]d) { v = h.ap.data; } r = v; } };", AppendEntry*8, e))
			keep = append(keep, fmt.Sprintf("h.bridge_ap.e%d = ap_keep%d.execute(lidx);", e, e))
		}
		def("DTA_AP_HELD_FIELDS", "the B-1 held entries, bridged to egress", held, "")
		def("DTA_AP_PAYLOAD_FIELDS", "the batch's B entries in list order", payload, "")
		def("DTA_AP_REGISTERS", "per list, one register per held entry: position p's holds its entry", regs, "")
		def("DTA_AP_HOLD(lidx)", "an entry at position m.pos < B-1 goes to its register", put, "")
		def("DTA_AP_READ(lidx)", "the batch's last entry reads the held ones", get, "")
		def("DTA_AP_KEEP_REGISTERS", "DTA_AP_REGISTERS with one stateful action per register, run for every entry", keepRegs, "")
		def("DTA_AP_KEEP(lidx)", "every entry: position m.pos's register takes it, each held one is read", keep, "")
		def("DTA_AP_FILL", "egress: the held entries, then the report's own", fill, "")
		def("DTA_AP_ICRC_FIELDS", "the batch's entries in the ICRC's field list", icrc, ",")
		choices = append(choices, fmt.Sprint(bt))
	}
	fmt.Fprintf(b, "#else\n#error \"DTA_AP_BATCH must be one of %s\"\n#endif\n", strings.Join(choices, ", "))
}

func ceilPow2(n int) int {
	p := 1
	for p < n {
		p <<= 1
	}
	return p
}

// Generate returns the include's text.
func Generate() []byte {
	var b bytes.Buffer
	b.WriteString("// Code generated by go generate ./p4 (internal/p4gen); DO NOT EDIT.\n\n")
	b.WriteString("#ifndef _DTA_CONSTANTS_P4_\n#define _DTA_CONSTANTS_P4_\n\n")
	c := func(typ, name string, v uint64, why string) {
		fmt.Fprintf(&b, "const %s %s = 0x%X; // %s\n", typ, name, v, why)
	}
	d := func(name string, v uint64, why string) {
		fmt.Fprintf(&b, "#define %s %d // %s\n", name, v, why)
	}
	b.WriteString("// Transport (docs/DTA-WIRE.md section 1).\n")
	c("bit<16>", "DTA_REPORT_PORT", dta.ReportPort, "dta.ReportPort")
	c("bit<16>", "DTA_ACK_PORT", dta.AckPort, "dta.AckPort")
	c("bit<16>", "ROCE_UDP_PORT", rocev2.UDPPort, "rocev2.UDPPort")
	b.WriteString("\n// DTA opcodes and flags (sections 2, 3).\n")
	c("bit<8>", "DTA_OP_KEY_WRITE", uint64(dta.OpKeyWrite), "dta.OpKeyWrite")
	c("bit<8>", "DTA_OP_APPEND", uint64(dta.OpAppend), "dta.OpAppend")
	c("bit<8>", "DTA_OP_KEY_INCREMENT", uint64(dta.OpKeyIncrement), "dta.OpKeyIncrement")
	c("bit<8>", "DTA_OP_POSTCARD", uint64(dta.OpPostcard), "dta.OpPostcard")
	c("bit<8>", "DTA_ACK_NACK", 0x80, "dta.Ack: byte 1 bit 7")
	b.WriteString("\n// RoCEv2 (section 6).\n")
	c("bit<8>", "ROCE_RC_SEND_ONLY", uint64(rocev2.RCSendOnly), "rocev2.RCSendOnly")
	c("bit<8>", "ROCE_RC_WRITE_ONLY", uint64(rocev2.RCWriteOnly), "rocev2.RCWriteOnly")
	c("bit<8>", "ROCE_RC_WRITE_ONLY_IMM", uint64(rocev2.RCWriteOnlyImm), "rocev2.RCWriteOnlyImm")
	c("bit<8>", "ROCE_RC_FETCH_ADD", uint64(rocev2.RCFetchAdd), "rocev2.RCFetchAdd")
	c("bit<8>", "ROCE_RC_ACK", uint64(rocev2.RCAcknowledge), "rocev2.RCAcknowledge")
	c("bit<8>", "ROCE_RC_ATOMIC_ACK", uint64(rocev2.RCAtomicAcknowledge), "rocev2.RCAtomicAcknowledge")
	c("bit<16>", "ROCE_PKEY", rocev2.DefaultPKey, "rocev2.DefaultPKey")
	c("bit<32>", "ROCE_CM_QKEY", cm.QKey, "cm.QKey")
	c("bit<8>", "ROCE_SYNDROME_ACK", uint64(rocev2.SyndromeACK), "rocev2.SyndromeACK")
	c("bit<8>", "ROCE_SYNDROME_NAK_PSN", uint64(rocev2.SyndromeNAKPSNSequenceError), "rocev2.SyndromeNAKPSNSequenceError")
	b.WriteString("\n// Header lengths in bytes.\n")
	d("DTA_KEY_INCREMENT_LEN", dta.KeyIncrementLen, "dta.KeyIncrementLen")
	d("DTA_POSTCARD_LEN", dta.PostcardLen, "dta.PostcardLen")
	d("ROCE_BTH_LEN", rocev2.BTHLen, "rocev2.BTHLen")
	d("ROCE_RETH_LEN", rocev2.RETHLen, "rocev2.RETHLen")
	d("ROCE_ATOMICETH_LEN", rocev2.AtomicETHLen, "rocev2.AtomicETHLen")
	d("ROCE_AETH_LEN", rocev2.AETHLen, "rocev2.AETHLen")
	d("ROCE_IMMDT_LEN", rocev2.ImmDtLen, "rocev2.ImmDtLen")
	d("ROCE_ICRC_LEN", rocev2.ICRCLen, "rocev2.ICRCLen")
	b.WriteString("\n// Compile-time geometry (internal/p4gen; sections 5, 8.4, 8.5).\n")
	b.WriteString("#ifndef DTA_KW_DATA_BYTES\n")
	d("DTA_KW_DATA_BYTES", KeyWriteData, "Key-Write data size D; -DDTA_KW_DATA_BYTES=D for another choice")
	b.WriteString("#endif\n")
	var choices []string
	for i, dsize := range KeyWriteDataChoices {
		kw := keywrite.Layout{Slots: 1, DataSize: dsize}
		if err := kw.Validate(); err != nil {
			panic(err) // the choices are valid by construction
		}
		if i == 0 {
			fmt.Fprintf(&b, "#if DTA_KW_DATA_BYTES == %d\n", dsize)
		} else {
			fmt.Fprintf(&b, "#elif DTA_KW_DATA_BYTES == %d\n", dsize)
		}
		d("DTA_KW_SLOT_BYTES", uint64(kw.SlotSize()), "keywrite.Layout.SlotSize: nextpow2(4 + D)")
		d("DTA_KW_SLOT_SHIFT", uint64(bits.TrailingZeros(uint(kw.SlotSize()))), "log2 DTA_KW_SLOT_BYTES")
		choices = append(choices, fmt.Sprint(dsize))
	}
	fmt.Fprintf(&b, "#else\n#error \"DTA_KW_DATA_BYTES must be one of %s\"\n#endif\n", strings.Join(choices, ", "))
	d("DTA_MAX_COPIES", MaxCopies, "highest redundancy N replicated")
	d("DTA_PC_HOPS", PostcardHops, "postcard hops B")
	d("DTA_PC_CHUNK_BYTES", uint64(ceilPow2(PostcardHops*4)), "nextpow2(B*4), b = 32")
	d("DTA_PC_CACHE_BITS", PostcardCacheBits, "log2 postcard cache entries")
	d("DTA_PC_EVICTED", PostcardEvicted, "replication ID flag of an evicted flow's copies")
	b.WriteString("// Ingress.hops of the postcard translator: (hop, sequenced, path length\n// present, path length, UDP length) -> hop_mask(bit, need), from HopMask.\n#define DTA_PC_HOP_ENTRIES")
	for _, e := range HopEntries() {
		pl := "0 &&& 0"
		if e.HasPathLen {
			pl = fmt.Sprintf("%d &&& 0xFF", e.PathLen)
		}
		fmt.Fprintf(&b, " \\\n    (%d, %t, %t, %s, %d): hop_mask(%d, %d);", e.Hop, e.Sequenced, e.HasPathLen, pl, e.UDPLen, e.Bit, e.Need)
	}
	b.WriteString("\n")
	d("DTA_AP_ENTRY_BYTES", AppendEntry, "Append entry size e")
	appendBatches(&b, d)
	d("DTA_AP_LIST_BITS", AppendListBits, "log2 lists L")
	d("DTA_AP_ENTRIES", 1<<AppendEntryBits, "entries E per list")
	d("DTA_QP_BITS", QPBits, "log2 per-QP register entries")
	d("DTA_STALL_BITS", StallBits, "log2 DTA_STALL_PACKETS")
	d("DTA_STALL_PACKETS", StallPackets, "reports with no ACK before a QP probes (section 8.7)")
	d("DTA_PROBE_BEHIND", ProbeBehind, "PSNs a probe is behind the QP's next (section 8.7)")
	b.WriteString("\n// Hashes (sections 4, 7, 8.2, 8.5): CRCPolynomial(coeff, reversed, msb,\n// extended, init, xor) for Hash<bit<32>>(HashAlgorithm_t.CUSTOM, ...).\n")
	for _, h := range Hashes() {
		fmt.Fprintf(&b, "#define %s CRCPolynomial<bit<%[2]d>>(%[2]dw0x%08[3]X, %[4]t, false, %[5]t, %[2]dw0x%08[6]X, %[2]dw0x%08[7]X)\n",
			h.Macro, h.CRC.Width, h.CRC.Poly, h.CRC.Reversed, h.CRC.Extend, h.CRC.Init, h.CRC.XorOut)
	}
	b.WriteString("\n#endif\n")
	return b.Bytes()
}
