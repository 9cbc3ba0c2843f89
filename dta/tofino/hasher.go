package tofino

// Hasher computes the hashes of DTA's key-addressed primitives (spec section 4):
// the slot hash of copy n, CRC32(le32(key) ‖ u8(n)), and the key checksum,
// CRC32(le32(key)). Callers mask slot hashes with their slot count.
type Hasher interface {
	// Slot returns the unmasked slot hash of copy n of key.
	Slot(key uint32, n uint8) uint32
	// Slots sets dst[n] = Slot(key, n) for every n < len(dst), sharing the
	// work on the key's bytes between copies.
	Slots(key uint32, dst []uint32)
	// Checksum returns the key checksum.
	Checksum(key uint32) uint32
}

// Switch is the Hasher the switch uses: Tofino CRC32 over le32(key) ‖ u8(n).
// It is the default everywhere.
var Switch Hasher = switchHasher{}

type switchHasher struct{}

var crc32Hash, _ = NewHash(32, CRC{Width: 32, Poly: 0x04C11DB7, Reversed: true, Init: 0xFFFFFFFF, XorOut: 0xFFFFFFFF, Extend: true})

func (switchHasher) Slot(key uint32, n uint8) uint32 {
	b := [5]byte{byte(key), byte(key >> 8), byte(key >> 16), byte(key >> 24), n}
	return uint32(crc32Hash.SumBytes(b[:]))
}

func (s switchHasher) Slots(key uint32, dst []uint32) {
	for n := range dst {
		dst[n] = s.Slot(key, uint8(n))
	}
}

func (switchHasher) Checksum(key uint32) uint32 {
	b := [4]byte{byte(key), byte(key >> 8), byte(key >> 16), byte(key >> 24)}
	return uint32(crc32Hash.SumBytes(b[:]))
}
