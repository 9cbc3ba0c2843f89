package export

import (
	"bufio"

	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/parquet-go/parquet-go/compress"
	"github.com/parquet-go/parquet-go/compress/snappy"
	"github.com/parquet-go/parquet-go/compress/uncompressed"
	"github.com/parquet-go/parquet-go/compress/zstd"

	"github.com/dtakit/dtakit/keywrite"
)

// countWriter counts the bytes of a file it does not keep.
type countWriter struct{ n int64 }

func (w *countWriter) Write(b []byte) (int, error) { w.n += int64(len(b)); return len(b), nil }

// filledKeyWrite returns a Key-Write store of size bytes, 4-byte values
// (8-byte slots), holding keys at load 0.5 over two copies.
func filledKeyWrite(b *testing.B, size uint64) *keywrite.Store {
	l := keywrite.Layout{Slots: size / 8, DataSize: 4}
	err := l.Validate()
	if err != nil {
		b.Fatal(err)
	}
	s, _ := keywrite.NewStore(l, nil)
	var v [4]byte
	for i := range uint32(l.Slots / 4) {
		k := mix(i)
		v[0], v[1], v[2], v[3] = byte(i), byte(i>>8), byte(i>>16), 1
		s.Put(k, v[:], 2)
	}
	return s
}

// vmHWM returns the process's peak resident set in bytes, after
// resetPeak the peak since then (Linux; 0 elsewhere).
func vmHWM() uint64 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmHWM:"); ok {
			kb, _ := strconv.ParseUint(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb << 10
		}
	}
	return 0
}

func resetPeak() { os.WriteFile("/proc/self/clear_refs", []byte("5"), 0) }

// BenchmarkKeyWriteExport exports a whole Key-Write region, scanned for its
// keys, with the default options: rows/s and region MB/s on one core, the
// file's size, and the peak RSS during the export beyond the region's.
// The 1GiB case needs about 2 GiB of memory and a minute:
//
//	go test -run '^$' -bench 'KeyWriteExport/region=1GiB' -benchtime 1x ./export
func BenchmarkKeyWriteExport(b *testing.B) {
	for _, size := range []uint64{64 << 20, 1 << 30} {
		b.Run(fmt.Sprintf("region=%s", sizeName(size)), func(b *testing.B) {
			s := filledKeyWrite(b, size)
			runtime.GC()
			prev := runtime.GOMAXPROCS(1)
			defer runtime.GOMAXPROCS(prev)
			resetPeak()
			base := vmHWM()
			b.ResetTimer()
			var rows uint64
			var w countWriter
			for range b.N {
				st, err := KeyWrite(&w, s, 2, nil, meta, Options{})
				if err != nil {
					b.Fatal(err)
				}
				rows += st.Rows
			}
			sec := b.Elapsed().Seconds()
			b.ReportMetric(float64(rows)/sec, "rows/s")
			b.ReportMetric(float64(size)*float64(b.N)/sec/1e6, "region-MB/s")
			b.ReportMetric(float64(w.n)/float64(b.N)/1e6, "file-MB")
			if peak := vmHWM(); peak > 0 {
				b.ReportMetric(float64(peak-min(peak, base))/1e6, "peak-extra-RSS-MB")
			}
		})
	}
}

func sizeName(n uint64) string {
	if n >= 1<<30 {
		return fmt.Sprintf("%dGiB", n>>30)
	}
	return fmt.Sprintf("%dMiB", n>>20)
}

// BenchmarkCodecs is the measurement behind DefaultCompression and
// DefaultRowGroupRows: each codec and row group size on one 64 MiB
// Key-Write region (file-MB and rows/s).
func BenchmarkCodecs(b *testing.B) {
	s := filledKeyWrite(b, 64<<20)
	codecs := []struct {
		name string
		c    compress.Codec
	}{
		{"none", &uncompressed.Codec{}},
		{"snappy", &snappy.Codec{}},
		{"zstd-fastest", &zstd.Codec{Level: zstd.SpeedFastest}},
		{"zstd-default", &zstd.Codec{Level: zstd.SpeedDefault}},
	}
	for _, c := range codecs {
		for _, rg := range []int{1 << 16, 1 << 18, 1 << 20} {
			b.Run(fmt.Sprintf("codec=%s/rowgroup=%d", c.name, rg), func(b *testing.B) {
				var w countWriter
				var rows uint64
				for range b.N {
					st, err := KeyWrite(&w, s, 2, nil, meta, Options{Compression: c.c, RowGroupRows: rg})
					if err != nil {
						b.Fatal(err)
					}
					rows += st.Rows
				}
				b.ReportMetric(float64(rows)/b.Elapsed().Seconds(), "rows/s")
				b.ReportMetric(float64(w.n)/float64(b.N)/1e6, "file-MB")
			})
		}
	}
}
