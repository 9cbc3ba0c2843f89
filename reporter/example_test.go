package reporter_test

import (
	"fmt"
	"net"
	"time"

	"github.com/dtakit/dtakit/reporter"
)

// A paced reporter: Send blocks once the burst (here a batch of 8) is
// spent, so 100 reports at 1000 per second take about 92 ms. With
// Sequenced, HandleNACKs and OnLoss it would also slow down when the
// translator NACKs, resend, and report what it could not deliver.
func ExampleReporter_paced() {
	translator, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)}) // stands in for the translator
	if err != nil {
		panic(err)
	}
	defer translator.Close()
	r, err := reporter.New(reporter.Config{
		Translator: translator.LocalAddr().(*net.UDPAddr).AddrPort(),
		Rate:       1000,
		Batch:      8,
	})
	if err != nil {
		panic(err)
	}
	start := time.Now()
	for key := range uint32(100) {
		if err := r.KeyWrite(key, []byte{1, 2, 3, 4}, 2); err != nil {
			panic(err)
		}
	}
	if err := r.Close(); err != nil {
		panic(err)
	}
	fmt.Println(r.Counters().Sent, "reports sent; paced:", time.Since(start) >= 90*time.Millisecond)
	// Output: 100 reports sent; paced: true
}
