// Package rocev2 encodes and decodes RoCEv2 packets exactly as an RDMA NIC
// expects them: the InfiniBand base and extension transport headers, the IBTA
// opcode table for the RC, UC and UD transports, 24-bit PSN arithmetic, and the
// invariant CRC (ICRC) over IPv4 and IPv6 frames.
//
// Each header is a small comparable value type with an AppendTo encoder and a
// DecodeXxx function. [Packet] is a whole RoCEv2 UDP payload (BTH, the
// extension headers its opcode carries, payload, ICRC) and [Frame] a whole
// Ethernet frame around it; both encode into and decode from caller buffers
// without allocating. The gopacket layers in layers.go bind the headers to UDP
// port 4791 for dissection, and serialize: gopacket.SerializeLayers builds a
// RoCEv2 frame from Ethernet, IP and UDP layers, a [BTHLayer], the extension
// header layers its opcode carries and the payload, with the pad count and
// pad bytes on FixLengths and the ICRC on ComputeChecksums (computed over the
// IP and UDP layers [BTHLayer.SetLayersForICRC] names, as layers.UDP needs
// its network layer for its checksum); see the BTHLayer.SerializeTo example.
//
// The RDMA connection manager messages carried on QP1 live in package
// [github.com/dtakit/dtakit/rocev2/cm].
package rocev2

import (
	"errors"
	"fmt"
)

// UDPPort is the IANA destination port of RoCEv2.
const UDPPort = 4791

// DefaultPKey is the default (full-membership) partition key, the only one
// RoCEv2 peers use in practice.
const DefaultPKey = 0xFFFF

// Errors wrapped by every decode and encode error of this package, so callers
// can tell what was wrong with errors.Is.
var (
	// ErrTruncated: the input ends before a header or field it must hold.
	ErrTruncated = errors.New("rocev2: truncated")
	// ErrReservedOpcode: the BTH opcode is reserved in its transport (RC, UC, UD).
	ErrReservedOpcode = errors.New("rocev2: reserved opcode")
	// ErrUnsupportedOpcode: the opcode belongs to a transport this package does
	// not implement (RD, XRC, CNP, manufacturer specific).
	ErrUnsupportedOpcode = errors.New("rocev2: unsupported opcode")
	// ErrLength: a length field disagrees with the bytes present (pad count,
	// payload on an opcode that carries none, IP or UDP length).
	ErrLength = errors.New("rocev2: bad length")
	// ErrHeader: a header field holds a value this package refuses (a field
	// wider than its bits, transport version, IP version, options, fragments,
	// protocol, UDP port, EtherType, mixed address families).
	ErrHeader = errors.New("rocev2: bad header field")
	// ErrBadICRC: the ICRC on the wire differs from the one computed; the
	// error is an [*ICRCError].
	ErrBadICRC = errors.New("rocev2: ICRC mismatch")
)

// ICRCError reports a frame whose ICRC is wrong. It matches [ErrBadICRC] with
// errors.Is.
type ICRCError struct {
	Wire     uint32 // the ICRC carried by the frame
	Computed uint32 // the ICRC of the frame's covered bytes
}

func (e *ICRCError) Error() string {
	return fmt.Sprintf("rocev2: ICRC mismatch: wire %#08x, computed %#08x", e.Wire, e.Computed)
}

// Is reports whether target is [ErrBadICRC].
func (e *ICRCError) Is(target error) bool { return target == ErrBadICRC }

// Decode errors are allocated once: decoders run per packet.
var (
	errShortBTH          = fmt.Errorf("decode bth: %w: need 12 bytes", ErrTruncated)
	errShortExt          = fmt.Errorf("decode extension headers: %w", ErrTruncated)
	errShortICRC         = fmt.Errorf("decode packet: %w: no room for the 4-byte ICRC", ErrTruncated)
	errTVer              = fmt.Errorf("bth: %w: transport version not 0", ErrHeader)
	errReserved          = fmt.Errorf("bth: %w", ErrReservedOpcode)
	errUnsupported       = fmt.Errorf("bth: %w", ErrUnsupportedOpcode)
	errPadUnaligned      = fmt.Errorf("decode packet: %w: payload and pad not a multiple of 4 bytes", ErrLength)
	errPadTooLong        = fmt.Errorf("decode packet: %w: pad count exceeds the payload", ErrLength)
	errUnexpectedPayload = fmt.Errorf("decode packet: %w: payload on an opcode that carries none", ErrLength)
)

var (
	errShortRETH         = fmt.Errorf("decode reth: %w: need 16 bytes", ErrTruncated)
	errShortAtomicETH    = fmt.Errorf("decode atomiceth: %w: need 28 bytes", ErrTruncated)
	errShortAETH         = fmt.Errorf("decode aeth: %w: need 4 bytes", ErrTruncated)
	errShortAtomicAckETH = fmt.Errorf("decode atomicacketh: %w: need 8 bytes", ErrTruncated)
	errShortImmDt        = fmt.Errorf("decode immdt: %w: need 4 bytes", ErrTruncated)
	errShortDETH         = fmt.Errorf("decode deth: %w: need 8 bytes", ErrTruncated)
	errShortIETH         = fmt.Errorf("decode ieth: %w: need 4 bytes", ErrTruncated)

	errBTHPad     = fmt.Errorf("bth: %w: pad count wider than 2 bits", ErrHeader)
	errBTHVersion = fmt.Errorf("bth: %w: transport version wider than 4 bits", ErrHeader)
	errBTHQP      = fmt.Errorf("bth: %w: destination QP wider than 24 bits", ErrHeader)
	errBTHPSN     = fmt.Errorf("bth: %w: PSN wider than 24 bits", ErrHeader)
)

var (
	errICRCShort      = fmt.Errorf("icrc: %w: shorter than the IP, UDP and BTH headers", ErrTruncated)
	errIPVersion      = fmt.Errorf("ip: %w: version not 4 or 6", ErrHeader)
	errIPv4Options    = fmt.Errorf("ipv4: %w: header with options", ErrHeader)
	errIPv6NextHeader = fmt.Errorf("ipv6: %w: next header not UDP", ErrHeader)
)

var (
	errDETHQP        = fmt.Errorf("deth: %w: source QP wider than 24 bits", ErrHeader)
	errAETHMSN       = fmt.Errorf("aeth: %w: MSN wider than 24 bits", ErrHeader)
	errEncodePayload = fmt.Errorf("encode packet: %w: payload on an opcode that carries none", ErrLength)
	errICRCLayers    = fmt.Errorf("serialize bth: %w: computing the ICRC needs the IP and UDP layers (SetLayersForICRC)", ErrHeader)
	errICRCLayerType = fmt.Errorf("serialize bth: %w: the ICRC is computed over a *layers.IPv4 or *layers.IPv6", ErrHeader)
)

var (
	errFlowLabel  = fmt.Errorf("ipv6: %w: flow label wider than 20 bits", ErrHeader)
	errAddrFamily = fmt.Errorf("ip: %w: source and destination not both IPv4 or both IPv6", ErrHeader)
	errTooLong    = fmt.Errorf("encode frame: %w: IP packet longer than 65535 bytes", ErrLength)
	errShortEther = fmt.Errorf("decode ethernet: %w: need 14 bytes", ErrTruncated)
	errEtherType  = fmt.Errorf("decode ethernet: %w: EtherType not IPv4 or IPv6 (VLAN tags are not supported)", ErrHeader)
	errShortIP    = fmt.Errorf("decode ip: %w", ErrTruncated)
	errIPLength   = fmt.Errorf("decode ip: %w: length field disagrees with the frame", ErrLength)
	errFragment   = fmt.Errorf("decode ipv4: %w: fragment or reserved flag", ErrHeader)
	errIPProto    = fmt.Errorf("decode ipv4: %w: protocol not UDP", ErrHeader)
	errIPChecksum = fmt.Errorf("decode ipv4: %w: bad header checksum", ErrHeader)
	errShortUDP   = fmt.Errorf("decode udp: %w: need 8 bytes", ErrTruncated)
	errUDPPort    = fmt.Errorf("decode udp: %w: destination port not 4791", ErrHeader)
	errUDPLength  = fmt.Errorf("decode udp: %w: length field disagrees with the IP length", ErrLength)
)
