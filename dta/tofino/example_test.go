package tofino_test

import (
	"fmt"

	"github.com/dtakit/dtakit/dta/tofino"
)

// A P4 program hashing a 5-tuple-like list with an odd-sized field:
//
//	Hash<bit<16>>(HashAlgorithm_t.CRC16) h;
//	h.get({ src_addr, dst_port, flag });  // bit<32>, bit<16>, bit<1>
//
// The collector computes the same value with the same list.
func ExampleHash_Sum() {
	h, err := tofino.NewPredefined(16, "CRC16")
	if err != nil {
		panic(err)
	}
	var f tofino.FieldList
	f.Add(0x0A000001, 32).Add(4791, 16).Add(1, 1)
	v, err := h.Sum(&f)
	if err != nil {
		panic(err)
	}
	fmt.Printf("%d bits hash to %#04x\n", f.Len(), v)

	f.Add(0, 99) // no such field width: the list records the error
	_, err = h.Sum(&f)
	fmt.Println(err)
	// Output:
	// 49 bits hash to 0x68f8
	// tofino: invalid field list: field width outside 1..64
}

// The catalogue check value of CRC-32: the hash of "123456789".
func ExampleHash_SumBytes() {
	h, err := tofino.NewPredefined(32, "crc_32")
	if err != nil {
		panic(err)
	}
	fmt.Printf("%#08x\n", h.SumBytes([]byte("123456789")))
	// Output: 0xcbf43926
}

// A custom polynomial, as CRCPolynomial declares it in P4, truncated to 8 bits.
func ExampleNewHash() {
	c := tofino.CRC{Width: 32, Poly: 0x1EDC6F41, Reversed: true, Init: 0xFFFFFFFF, XorOut: 0xFFFFFFFF}
	h, err := tofino.NewHash(8, c)
	if err != nil {
		panic(err)
	}
	fmt.Printf("%#02x\n", h.SumBytes([]byte("123456789"))) // CRC-32C's check 0xe3069283, low byte

	c.Poly = 0x1EDC6F40
	_, err = tofino.NewHash(8, c)
	fmt.Println(err)
	// Output:
	// 0x83
	// tofino: invalid CRC: polynomial 0x1edc6f40 is even (no x^0 term); set AllowEven to accept it
}

// Slot hashes of a key for three copies under spec section 4 as written,
// masked to 1024 slots.
func ExampleReference() {
	var slots [3]uint32
	tofino.Reference.Slots(42, slots[:])
	for n, s := range slots {
		fmt.Printf("copy %d: slot %d\n", n, s&1023)
	}
	fmt.Printf("checksum %#08x\n", tofino.Reference.Checksum(42))
	// Output:
	// copy 0: slot 184
	// copy 1: slot 46
	// copy 2: slot 404
	// checksum 0xeecb9046
}

// The project's default: copy 0 is Reference's, later copies use their own
// polynomials.
func ExamplePerCopy() {
	var slots [3]uint32
	tofino.PerCopy.Slots(42, slots[:])
	for n, s := range slots {
		fmt.Printf("copy %d: slot %d (polynomial %#08x)\n", n, s&1023, tofino.CopyPolynomial(uint8(n)))
	}
	fmt.Printf("checksum %#08x\n", tofino.PerCopy.Checksum(42))
	// Output:
	// copy 0: slot 184 (polynomial 0x04c11db7)
	// copy 1: slot 347 (polynomial 0x043ad9cf)
	// copy 2: slot 33 (polynomial 0x4703e211)
	// checksum 0xeecb9046
}
