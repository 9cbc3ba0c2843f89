package reporter_test

import (
	"fmt"
	"net"
	"time"

	"github.com/dtakit/dtakit/reporter"
)

// A paced reporter: Send blocks once the burst (here a batch of 8) is
// spent, so 100 reports at 1000 per second take about 92 ms. The socket
// standing in for the translator sends no acks, so this one is
// fire-and-forget, and says so: none of its reports is confirmed. With
// the zero Delivery it would also take the translator's acks and NACKs,
// slow down, resend, and count what it could not confirm.
func ExampleReporter_paced() {
	translator, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)}) // stands in for the translator
	if err != nil {
		panic(err)
	}
	defer translator.Close()
	r, err := reporter.New(reporter.Config{
		Translator: translator.LocalAddr().(*net.UDPAddr).AddrPort(),
		Delivery:   reporter.FireAndForget,
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
	c := r.Counters()
	fmt.Println(c.Datagrams, "datagrams sent,", c.Unconfirmed, "unconfirmed; paced:", time.Since(start) >= 90*time.Millisecond)
	// Output: 100 datagrams sent, 100 unconfirmed; paced: true
}
