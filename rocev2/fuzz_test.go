package rocev2

import (
	"bytes"
	"encoding/hex"
	"errors"
	"testing"
)

func addVectorSeeds(f *testing.F, udpPayload bool) {
	for _, v := range loadVectors(f)[:40] {
		b, err := hex.DecodeString(v.Frame)
		if err != nil {
			f.Fatal(err)
		}
		if udpPayload {
			b = b[etherHeaderLen+ipv4HeaderLen+udpHeaderLen:]
		}
		f.Add(b)
	}
}

// FuzzFrameDecode: Decode never panics, returns only this package's errors,
// and a frame it accepts re-encodes to the same bytes (up to Ethernet
// padding and pad byte values) and decodes again to the same value.
func FuzzFrameDecode(f *testing.F) {
	addVectorSeeds(f, false)
	f.Fuzz(func(t *testing.T, b []byte) {
		var fr Frame
		err := fr.Decode(b)
		if err != nil {
			if !isPackageError(err) {
				t.Fatalf("foreign error %v", err)
			}
			return
		}
		enc, err := fr.AppendTo(nil)
		if err != nil {
			t.Fatalf("accepted frame does not re-encode: %v", err)
		}
		var again Frame
		if err := again.Decode(enc); err != nil {
			t.Fatalf("re-encoded frame rejected: %v", err)
		}
		if again.BTH != fr.BTH || again.RETH != fr.RETH || again.AETH != fr.AETH || again.DETH != fr.DETH ||
			again.AtomicETH != fr.AtomicETH || again.ICRC != fr.ICRC || !bytes.Equal(again.Payload, fr.Payload) {
			t.Fatalf("re-decoded frame differs")
		}
		// Only the pad bytes (sent as zeros) and Ethernet padding may differ.
		n := len(enc) - ICRCLen - int(fr.BTH.PadCount)
		hl := len(enc) - fr.Packet.Len()
		if !bytes.Equal(enc[:n], clearReserved(b[:n], hl, fr.BTH.Opcode)) {
			t.Fatalf("re-encoded frame differs from the input")
		}
	})
}

// FuzzPacketDecode: Packet.Decode never panics and what it accepts encodes
// back to the same headers and payload.
func FuzzPacketDecode(f *testing.F) {
	addVectorSeeds(f, true)
	f.Fuzz(func(t *testing.T, b []byte) {
		var p Packet
		va, rkey, n, ok := PeekMemory(b) // never panics, whatever b is
		if err := p.Decode(b); err != nil {
			if !isPackageError(err) {
				t.Fatalf("foreign error %v", err)
			}
			return
		}
		checkPeek(t, &p, va, rkey, n, ok)
		enc, err := p.AppendTo(nil)
		if err != nil {
			t.Fatalf("accepted packet does not re-encode: %v", err)
		}
		end := len(enc) - int(p.BTH.PadCount)
		if len(enc) != len(b)-ICRCLen || !bytes.Equal(enc[:end], clearReserved(b[:end], 0, p.BTH.Opcode)) {
			t.Fatalf("re-encoded packet differs")
		}
	})
}

// FuzzHeaders: every header decoder accepts exactly the inputs long enough,
// and its AppendTo reproduces the bytes it read (BTH and DETH up to their
// reserved bits).
func FuzzHeaders(f *testing.F) {
	f.Add(bytes.Repeat([]byte{0xFF}, 28))
	f.Add([]byte{0x0A, 0, 0xFF, 0xFF, 0, 0, 1, 0x23, 0x80, 0, 0, 1})
	f.Fuzz(func(t *testing.T, b []byte) {
		check := func(name string, n int, enc []byte, err error, mask []byte) {
			if (len(b) >= n) != (err == nil) {
				t.Fatalf("%s: len %d, err %v", name, len(b), err)
			}
			if err != nil {
				if !errors.Is(err, ErrTruncated) {
					t.Fatalf("%s: %v", name, err)
				}
				return
			}
			for i := range n {
				m := byte(0xFF)
				if i < len(mask) {
					m = mask[i]
				}
				if enc[i] != b[i]&m {
					t.Fatalf("%s: byte %d: %#x, read %#x", name, i, enc[i], b[i])
				}
			}
		}
		bth, err := DecodeBTH(b)
		check("bth", BTHLen, bth.AppendTo(nil), err, []byte{0xFF, 0xFF, 0xFF, 0xFF, 0xC0, 0xFF, 0xFF, 0xFF, 0x80})
		reth, err := DecodeRETH(b)
		check("reth", RETHLen, reth.AppendTo(nil), err, nil)
		at, err := DecodeAtomicETH(b)
		check("atomiceth", AtomicETHLen, at.AppendTo(nil), err, nil)
		ae, err := DecodeAETH(b)
		check("aeth", AETHLen, ae.AppendTo(nil), err, nil)
		aa, err := DecodeAtomicAckETH(b)
		check("atomicacketh", AtomicAckETHLen, aa.AppendTo(nil), err, nil)
		im, err := DecodeImmDt(b)
		check("immdt", ImmDtLen, im.AppendTo(nil), err, nil)
		de, err := DecodeDETH(b)
		check("deth", DETHLen, de.AppendTo(nil), err, []byte{0xFF, 0xFF, 0xFF, 0xFF, 0})
		ie, err := DecodeIETH(b)
		check("ieth", IETHLen, ie.AppendTo(nil), err, nil)
	})
}

// FuzzVerifyICRC: VerifyICRC never panics and agrees with the reference.
func FuzzVerifyICRC(f *testing.F) {
	for _, v := range loadVectors(f)[:20] {
		b, _ := hex.DecodeString(v.Frame)
		f.Add(b[etherHeaderLen:])
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		got, err := ICRC(b)
		if err != nil {
			if !isPackageError(err) {
				t.Fatalf("foreign error %v", err)
			}
			return
		}
		if ref := icrcReference(b); ref != got {
			t.Fatalf("ICRC %#x, reference %#x", got, ref)
		}
	})
}

// clearReserved returns a copy of b with the reserved bits of the BTH at
// offset o (and of a DETH after it) cleared, as encoders send them.
func clearReserved(b []byte, o int, op Opcode) []byte {
	b = bytes.Clone(b)
	b[o+4] &= 0xC0
	b[o+8] &= 0x80
	if op.Headers()&HasDETH != 0 {
		b[o+BTHLen+4] = 0
	}
	return b
}

func isPackageError(err error) bool {
	for _, e := range []error{ErrTruncated, ErrReservedOpcode, ErrUnsupportedOpcode, ErrLength, ErrHeader, ErrBadICRC} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// checkPeek checks what PeekMemory said of a packet against p, its decoding.
func checkPeek(t *testing.T, p *Packet, va uint64, rkey uint32, n int, ok bool) {
	t.Helper()
	h := p.BTH.Opcode.Headers()
	switch {
	case h&HasRETH != 0:
		if !ok || va != p.RETH.VA || rkey != p.RETH.RKey || n != len(p.Payload) {
			t.Fatalf("PeekMemory = %#x %#x %d %v, packet has %+v and %d bytes of payload", va, rkey, n, ok, p.RETH, len(p.Payload))
		}
	case h&HasAtomicETH != 0:
		if !ok || va != p.AtomicETH.VA || rkey != p.AtomicETH.RKey || n != 8 {
			t.Fatalf("PeekMemory = %#x %#x %d %v, packet has %+v", va, rkey, n, ok, p.AtomicETH)
		}
	case ok:
		t.Fatalf("PeekMemory names memory in a %v", p.BTH.Opcode)
	}
}
