package rocev2

import "fmt"

var errICRCSplit = fmt.Errorf("icrc base: %w: split outside the bytes after the masked BTH byte", ErrLength)

// ICRCBase returns the ICRC that ipPacket (as for [ICRC]) would have if its
// bytes from offset from to the end were zero. A CRC is affine and leading
// zeros leave its linear part unchanged, so
//
//	ICRC(ipPacket) = ICRCBase(ipPacket, from) XOR crc0(ipPacket[from:])
//
// where crc0 is the ICRC's CRC-32 with init 0 and no final XOR. A switch
// that crafts RoCEv2 packets keeps ICRCBase per queue pair and packet shape
// and hashes only the bytes that vary (p4/translator). from must lie after
// the BTH's masked byte 4 and at most at the end of ipPacket.
func ICRCBase(ipPacket []byte, from int) (uint32, error) {
	icrc, err := ICRC(ipPacket)
	if err != nil {
		return 0, err
	}
	min := ipv4HeaderLen + udpHeaderLen + 5
	if ipPacket[0]>>4 == 6 {
		min = ipv6HeaderLen + udpHeaderLen + 5
	}
	if from < min || from > len(ipPacket) {
		return 0, errICRCSplit
	}
	return icrc ^ ^UpdateCRC(^uint32(0), ipPacket[from:]), nil
}

// DeltaTables derives the ICRCs of datagrams that differ only in a window
// of at most 16 consecutive bytes, as a requester's copies of one write
// differ in PSN and address, or a responder's ACKs in PSN, syndrome and
// MSN. For UDP payloads x and y of one length,
//
//	ICRC(x) = ICRC(y) XOR LinearCRC(x XOR y)
//
// so the ICRC of x is that of its base (x with the window zeroed, computed
// once with [DatagramICRC]) XOR Sum of the window: one table lookup per
// byte. t[k][v] is what byte v adds when after+k bytes follow it (Fill's
// after, the bytes after the window).
type DeltaTables [16][256]uint32

// Fill makes t the tables of a window followed by after bytes.
func (t *DeltaTables) Fill(after int) {
	for k := range t {
		DeltaTable(&t[k], after+k)
	}
}

// Sum returns what the bytes of w, a window of at most 16 bytes followed by
// Fill's after bytes, add to the ICRC. It does not allocate. Hot paths
// unroll it for their window (package rc), tested against DatagramICRC.
func (t *DeltaTables) Sum(w []byte) uint32 {
	var s uint32
	last := len(w) - 1
	for i, v := range w {
		s ^= t[(last-i)&15][v]
	}
	return s
}
