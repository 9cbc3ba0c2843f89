package udpio

import (
	"errors"
	"fmt"
	"testing"
)

func TestMeasureCeiling(t *testing.T) {
	c, err := MeasureCeiling(10000, 64, 128)
	if err != nil {
		t.Fatal(err)
	}
	if c.Sent != 10000 || c.Received < 1 || c.Received > c.Sent || c.Elapsed <= 0 || c.Rate() <= 0 {
		t.Errorf("ceiling %+v, rate %.0f/s", c, c.Rate())
	}
	if _, err := MeasureCeiling(0, 64, 128); !errors.Is(err, ErrBatch) {
		t.Errorf("0 datagrams: %v, want ErrBatch", err)
	}
}

// BenchmarkCeiling measures the loopback ceiling (MeasureCeiling) with
// b.N datagrams of 64 bytes, in batches of 64 and of 128.
func BenchmarkCeiling(b *testing.B) {
	for _, batch := range []int{64, 128} {
		b.Run(fmt.Sprintf("batch=%d", batch), func(b *testing.B) {
			c, err := MeasureCeiling(max(b.N, 1000), 64, batch)
			if err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(c.Rate(), "datagrams/s")
			b.ReportMetric(float64(c.Sent-c.Received)/float64(c.Sent), "lost/sent")
		})
	}
}
