// Command dtasim reproduces the DTA and DART papers' figures from dtakit's
// own code (package internal/app/sim): reports written through the primitives'
// real operations into their real stores, measured with 95 % confidence
// intervals beside the analysis. For each figure it writes NAME.csv,
// NAME.svg and NAME.png (7 × 4.5 in; the PNG at 300 dpi, 2100 px wide)
// into -out.
//
//	go run ./cmd/dtasim -quick -out /tmp/figures   # every figure in seconds
//	go run ./cmd/dtasim -out figures               # the larger scales (minutes)
//	go run ./cmd/dtasim -only keywrite-alpha,postcard-flows
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/dtakit/dtakit/internal/app/cli"
	"github.com/dtakit/dtakit/internal/app/sim"
)

func main() { os.Exit(run()) }

func run() int {
	quick := flag.Bool("quick", false, "small scales, for CI (under 30 s on 2 cores)")
	seed := flag.Uint64("seed", 1, "random seed: the same seed gives the same data")
	out := flag.String("out", "figures", "output directory")
	only := flag.String("only", "", "comma-separated figure names (default: all)")
	list := flag.Bool("list", false, "list the figures and exit")
	cli.Usage(flag.CommandLine, synopsis, exitStatus)
	flag.Parse()
	if *list {
		for _, f := range sim.Figures {
			fmt.Printf("%-16s %s\n", f.Name, f.About)
		}
		return 0
	}
	want := map[string]bool{}
	for _, n := range strings.Split(*only, ",") {
		if n != "" {
			want[n] = true
		}
	}
	for n := range want {
		if sim.Lookup(n) == nil {
			fmt.Fprintf(os.Stderr, "dtasim: no figure %q (dtasim -list)\n", n)
			return 2
		}
	}
	if err := os.MkdirAll(*out, 0o755); err != nil {
		fmt.Fprintln(os.Stderr, "dtasim:", err)
		return 1
	}
	cfg := sim.Config{Quick: *quick, Seed: *seed}
	for _, spec := range sim.Figures {
		if len(want) > 0 && !want[spec.Name] {
			continue
		}
		t0 := time.Now()
		f, err := spec.Run(cfg)
		if err == nil {
			err = sim.Write(f, *out)
		}
		if err != nil {
			fmt.Fprintf(os.Stderr, "dtasim: %s: %v\n", spec.Name, err)
			return 1
		}
		fmt.Printf("%-16s %5.1fs  %s\n", spec.Name, time.Since(t0).Seconds(), filepath.Join(*out, spec.Name)+".{csv,svg,png}")
	}
	return 0
}
