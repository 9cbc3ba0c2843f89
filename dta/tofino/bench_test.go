package tofino

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"testing"
)

var benchSink uint64

// key5Inputs returns 256 field lists le32(key) ‖ u8(n) for distinct keys
// and copies 0..3, for the Key5 benchmarks to cycle through.
func key5Inputs() [][]byte {
	ins := make([][]byte, 256)
	for i := range ins {
		ins[i] = binary.LittleEndian.AppendUint32(nil, uint32(i)*0x9E3779B9)
		ins[i] = append(ins[i], byte(i%4))
	}
	return ins
}

// BenchmarkCRC32Key5 is the query hot path: CRC32 of le32(key) ‖ u8(n).
func BenchmarkCRC32Key5(b *testing.B) {
	h, _ := NewPredefined(32, "CRC32")
	ins := key5Inputs()
	b.SetBytes(5)
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		benchSink += h.SumBytes(ins[i&255])
	}
}

// BenchmarkStdlibCRC32Key5 is BenchmarkCRC32Key5 with hash/crc32, for scale.
func BenchmarkStdlibCRC32Key5(b *testing.B) {
	ins := key5Inputs()
	b.SetBytes(5)
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		benchSink += uint64(crc32.ChecksumIEEE(ins[i&255]))
	}
}

// benchInputs returns 64 different inputs of n bytes. Benchmarks cycle
// through them rather than patch one input in place: a byte store followed by
// a wider load of the same bytes stalls store forwarding, which would measure
// the benchmark, not the hash.
func benchInputs(n int) [][]byte {
	ins := make([][]byte, 64)
	for i := range ins {
		ins[i] = make([]byte, n)
		for j := range ins[i] {
			ins[i][j] = byte(i*131 + j*7)
		}
	}
	return ins
}

func benchmarkCRC32Bytes(b *testing.B, n int) {
	h, _ := NewPredefined(32, "CRC32")
	ins := benchInputs(n)
	b.SetBytes(int64(n))
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		benchSink += h.SumBytes(ins[i&63])
	}
}

// BenchmarkCRC32Bytes13 hashes a 13-byte 5-tuple.
func BenchmarkCRC32Bytes13(b *testing.B) { benchmarkCRC32Bytes(b, 13) }

// BenchmarkCRC32Bytes64 hashes a 64-byte input.
func BenchmarkCRC32Bytes64(b *testing.B) { benchmarkCRC32Bytes(b, 64) }

// BenchmarkSumBytes covers each width, both register orientations, at
// several sizes.
func BenchmarkSumBytes(b *testing.B) {
	for _, name := range []string{"crc_8", "crc_16_riello", "crc_32", "crc_32_bzip2", "crc_64", "crc_64_jones"} {
		h, _ := NewPredefined(64, name)
		for _, size := range []int{4, 5, 13, 64, 1024} {
			ins := benchInputs(size)
			b.Run(fmt.Sprintf("%s/size=%d", name, size), func(b *testing.B) {
				b.SetBytes(int64(size))
				b.ReportAllocs()
				for i := 0; b.Loop(); i++ {
					benchSink += h.SumBytes(ins[i&63])
				}
			})
		}
	}
}

// BenchmarkSum hashes a 17-bit and a 104-bit field list, building each time.
func BenchmarkSum(b *testing.B) {
	h, _ := NewPredefined(16, "crc_16")
	b.Run("bits=17", func(b *testing.B) {
		b.ReportAllocs()
		var f FieldList
		for i := 0; b.Loop(); i++ {
			f.Reset()
			f.Add(uint64(i)&0xFFFF, 16).Add(1, 1)
			v, _ := h.Sum(&f)
			benchSink += v
		}
	})
	b.Run("bits=104", func(b *testing.B) {
		b.ReportAllocs()
		var f FieldList
		for i := 0; b.Loop(); i++ {
			f.Reset()
			f.Add(uint64(i)&0xFFFFFFFF, 32).Add(0x0A000001, 32).Add(443, 16).Add(uint64(i)&0xFFFF, 16).Add(6, 8)
			v, _ := h.Sum(&f)
			benchSink += v
		}
	})
}

func benchmarkHasher(b *testing.B, h Hasher) {
	b.Run("Slot", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			benchSink += uint64(h.Slot(uint32(i), uint8(i)))
		}
	})
	b.Run("Checksum", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			benchSink += uint64(h.Checksum(uint32(i)))
		}
	})
	for _, n := range []int{1, 2, 4, 8} {
		b.Run(fmt.Sprintf("Slots/copies=%d", n), func(b *testing.B) {
			dst := make([]uint32, n)
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				h.Slots(uint32(i), dst)
			}
			benchSink += uint64(dst[0])
		})
	}
}

func BenchmarkReference(b *testing.B) { benchmarkHasher(b, Reference) }

func BenchmarkPerCopy(b *testing.B) { benchmarkHasher(b, PerCopy) }

func BenchmarkXXHash(b *testing.B) { benchmarkHasher(b, XXHash) }

func BenchmarkNewHash(b *testing.B) {
	c, _ := Predefined("crc_32")
	b.ReportAllocs()
	for b.Loop() {
		h, _ := NewHash(32, c)
		benchSink += h.start
	}
}

// BenchmarkPerCopyDirect is PerCopy called on its type, as batch queries
// call it: the checksum and N slot hashes in one call.
func BenchmarkPerCopyDirect(b *testing.B) {
	var h PerCopyHasher
	b.Run("Hashes2", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			c, s0, s1 := h.Hashes2(uint32(i))
			benchSink += uint64(c ^ s0 ^ s1)
		}
	})
	for _, n := range []int{2, 4} {
		b.Run(fmt.Sprintf("Hashes/copies=%d", n), func(b *testing.B) {
			dst := make([]uint32, n)
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				benchSink += uint64(h.Hashes(uint32(i), dst))
			}
			benchSink += uint64(dst[0])
		})
	}
}
