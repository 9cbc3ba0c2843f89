package rocev2

import (
	"fmt"
	"testing"

	"github.com/gopacket/gopacket"
)

// BenchmarkFrameAppend builds a complete RC RDMA WRITE Only frame
// (Ethernet, IPv4, UDP, BTH, RETH, 64-byte payload, ICRC) into a reused
// buffer. Goal: <= 60 ns, 0 allocs.
func BenchmarkFrameAppend(b *testing.B) {
	f := writeOnlyFrame()
	buf := make([]byte, 0, 256)
	b.ReportAllocs()
	b.SetBytes(int64(f.Len()))
	for b.Loop() {
		var err error
		buf, err = f.AppendTo(buf[:0])
		if err != nil {
			b.Fatal(err)
		}
		f.BTH.PSN = f.BTH.PSN.Next()
	}
}

// BenchmarkFrameDecode decodes the same frame and verifies its ICRC.
func BenchmarkFrameDecode(b *testing.B) {
	f := writeOnlyFrame()
	frame, err := f.AppendTo(nil)
	if err != nil {
		b.Fatal(err)
	}
	var g Frame
	b.ReportAllocs()
	b.SetBytes(int64(len(frame)))
	for b.Loop() {
		if err := g.Decode(frame); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkICRC measures ICRC throughput. Goal at size=4096: >= 5 GB/s.
func BenchmarkICRC(b *testing.B) {
	for _, size := range []int{64, 1024, 4096} {
		b.Run(fmt.Sprintf("size=%d", size), func(b *testing.B) {
			f := writeOnlyFrame()
			f.Payload = make([]byte, size)
			frame, err := f.AppendTo(nil)
			if err != nil {
				b.Fatal(err)
			}
			ip := frame[etherHeaderLen : len(frame)-ICRCLen]
			b.ReportAllocs()
			b.SetBytes(int64(size))
			for b.Loop() {
				if _, err := ICRC(ip); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkSerializeLayers builds the frame BenchmarkFrameAppend builds
// with gopacket.SerializeLayers, lengths fixed and checksums (the ICRC, the
// IPv4 and UDP checksums) computed, into a reused buffer: the convenience
// path, for comparison with Frame.AppendTo.
func BenchmarkSerializeLayers(b *testing.B) {
	f := writeOnlyFrame()
	g := newGopacketFrame(b, &f)
	buf := gopacket.NewSerializeBuffer()
	b.ReportAllocs()
	b.SetBytes(int64(f.Len()))
	for b.Loop() {
		if err := gopacket.SerializeLayers(buf, fixAll, g.all...); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkPacketDecode decodes the UDP payloads a translator and a target
// exchange: an RDMA WRITE Only with a 64-byte payload, a FetchAdd, an
// Acknowledge and an ATOMIC Acknowledge. Goal: 0 allocs.
func BenchmarkPacketDecode(b *testing.B) {
	bth := BTH{PKey: DefaultPKey, DestQP: 0x000123, AckReq: true, PSN: 0x00FFFE}
	for _, c := range []struct {
		name string
		p    Packet
	}{
		{"op=WriteOnly", Packet{BTH: withOp(bth, RCWriteOnly), RETH: RETH{VA: 0x7F00_1234_5678_0000, RKey: 0xABCD_0001, DMALength: 64}, Payload: make([]byte, 64)}},
		{"op=FetchAdd", Packet{BTH: withOp(bth, RCFetchAdd), AtomicETH: AtomicETH{VA: 0x7F00_1234_5678_0000, RKey: 0xABCD_0001, SwapAddData: 1}}},
		{"op=Ack", Packet{BTH: withOp(bth, RCAcknowledge), AETH: AETH{Syndrome: SyndromeACK, MSN: 7}}},
		{"op=AtomicAck", Packet{BTH: withOp(bth, RCAtomicAcknowledge), AETH: AETH{Syndrome: SyndromeACK, MSN: 7}, AtomicAckETH: AtomicAckETH{OrigRemoteData: 9}}},
	} {
		b.Run(c.name, func(b *testing.B) {
			buf, err := c.p.AppendTo(nil)
			if err != nil {
				b.Fatal(err)
			}
			buf = append(buf, 1, 2, 3, 4) // the ICRC
			var q Packet
			b.ReportAllocs()
			b.SetBytes(int64(len(buf)))
			for b.Loop() {
				if err := q.Decode(buf); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func withOp(h BTH, op Opcode) BTH {
	h.Opcode = op
	return h
}
