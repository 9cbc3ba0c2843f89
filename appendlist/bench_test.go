package appendlist

import (
	"testing"
)

// fillList writes E entries of list 0 directly, as the NIC would have.
func fillList(g *rig) {
	mem := g.r.Region()[:g.l.ListSize()]
	for i := 0; i < len(mem); i += 4 {
		mem[i] = byte(i>>2) | 1
	}
}

func BenchmarkReaderDrain(b *testing.B) {
	const E = 1 << 16
	for _, e := range []int{4, 16} {
		b.Run("entry="+itoa(e), func(b *testing.B) {
			g := newRig(b, Layout{Lists: 1, Entries: E, EntrySize: e, Batch: 16})
			rd, _ := g.r.Reader(0)
			dst := make([]byte, E*e)
			b.SetBytes(int64(E * e))
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				fillList(g)
				b.StartTimer()
				if n, _ := rd.Read(dst); n != E {
					b.Fatalf("read %d of %d", n, E)
				}
			}
			b.ReportMetric(float64(b.N)*E/b.Elapsed().Seconds()/1e6, "Mentries/s")
		})
	}
}

func BenchmarkReaderDrainMarkers(b *testing.B) {
	const E = 1 << 16
	l := Layout{Lists: 1, Entries: E, EntrySize: 4, Batch: 16, Markers: true}
	g := newRig(b, l)
	rd, _ := g.r.Reader(0)
	dst := make([]byte, E*4)
	var ws []Write
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		for v := range uint32(E) {
			ws, _ = g.b.AppendWrites(ws[:0], 0, entry(4, v), false)
			for _, w := range ws {
				_ = g.r.Apply(w)
			}
		}
		b.StartTimer()
		if n, err := rd.Read(dst); n != E {
			b.Fatalf("read %d of %d: %v", n, E, err)
		}
	}
	b.ReportMetric(float64(b.N)*E/b.Elapsed().Seconds()/1e6, "Mentries/s")
}

func BenchmarkBatcher(b *testing.B) {
	for _, markers := range []bool{false, true} {
		name := "reference"
		if markers {
			name = "markers"
		}
		b.Run(name, func(b *testing.B) {
			bt, err := NewBatcher(Layout{Lists: 1024, Entries: 1 << 12, EntrySize: 4, Batch: 16, Markers: markers})
			if err != nil {
				b.Fatal(err)
			}
			d := entry(4, 1)
			ws := make([]Write, 0, 2)
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				ws, _ = bt.AppendWrites(ws[:0], uint32(i)&1023, d, false)
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds()/1e6, "Mentries/s")
		})
	}
}

func itoa(n int) string {
	if n < 10 {
		return string(rune('0' + n))
	}
	return itoa(n/10) + string(rune('0'+n%10))
}
