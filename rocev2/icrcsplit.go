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
