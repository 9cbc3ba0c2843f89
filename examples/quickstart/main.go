// Command quickstart runs a whole DTA pipeline in one process and checks
// that it works: a software collector (package collector) serving one
// instance of each primitive (Key-Write, Key-Increment, Postcarding, Append)
// through the software RoCEv2 target, the software translator (package
// translator) connected to it with the RDMA connection manager, and four
// reporters (package reporter), one per primitive, all on loopback UDP sockets
// with ports the system picks, so that two runs do not collide.
//
// It streams reports across the four primitives, waits until the translator
// has received them and has every RDMA operation acknowledged, then queries
// everything it sent through the collector's stores and readers and prints a
// table per primitive: reports sent and received, RDMA operations, the query
// success rate and what the primitive's analysis predicts for the load
// reached. It exits 0 only if every success rate is within its tolerance of
// the prediction and the target saw nothing out of bounds (no remote access
// NAK, no bad ICRC); otherwise it says which check failed and exits 1.
// It also prints the send phase's rate: reports the translator received and
// had acknowledged, per second (over a million on a 2-core Linux machine,
// where internal/udpio sends runs of equal datagrams with UDP segmentation
// offload). The demo has no flow control of its own: the reporters number
// their reports (wide sequence numbers), the translator acknowledges them,
// NACKs what it cannot take or never got, and applies each once, and the
// reporters slow down and resend (package reporter, docs/DTA-WIRE.md
// "Exactly once" and "Reporter flow control"). A report lost all the same
// is counted in the table and fails its query.
//
// It needs only Go and a loopback interface. On Linux each reporter binds its
// own 127.x.y.z address, so that each can listen for the translator's NACKs on
// the DTA ack port; elsewhere the reporters share 127.0.0.1, do without
// NACKs, and send at a fixed pace.
//
//	go run ./examples/quickstart
//	go run ./examples/quickstart -keys 262144      # load factor 1: watch Key-Write degrade as predicted
//	go run ./examples/quickstart -bench -reports 4000000   # Key-Write and Append only, as fast as possible
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"

	"github.com/dtakit/dtakit/internal/app/cli"
)

func main() {
	cfg := defaultConfig()
	flag.IntVar(&cfg.Keys, "keys", cfg.Keys, "Key-Write keys; Key-Increment keys and postcard flows are a quarter of it")
	flag.IntVar(&cfg.Slots, "slots", cfg.Slots, "Key-Write slots (a power of two); Key-Increment counters and postcard chunks are a quarter of it")
	flag.IntVar(&cfg.Reports, "reports", cfg.Reports, "reports to send, split evenly across the primitives")
	flag.Float64Var(&cfg.Rate, "rate", cfg.Rate, "cap on the reports sent per second, 0 for as fast as the translator takes them")
	flag.Uint64Var(&cfg.Seed, "seed", cfg.Seed, "seed of the keys and values")
	flag.BoolVar(&cfg.Quiet, "quiet", cfg.Quiet, "no progress line")
	flag.BoolVar(&cfg.Bench, "bench", cfg.Bench, "throughput run: Key-Write and Append reports only")
	flag.BoolVar(&cfg.verbose, "v", false, "print every counter")
	cli.Usage(flag.CommandLine, synopsis, exitStatus)
	flag.Parse()
	if flag.NArg() != 0 {
		flag.Usage()
		os.Exit(2)
	}
	if fi, err := os.Stdout.Stat(); err == nil && fi.Mode()&os.ModeCharDevice != 0 {
		cfg.Terminal = true
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, cfg, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
