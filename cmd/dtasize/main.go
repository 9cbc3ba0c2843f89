// Command dtasize sizes a DTA collector's memory before it is bought: from
// a workload, the geometry each primitive needs to reach a target, and why.
//
//	dtasize keywrite     -keys 10M -success 0.99 -value 20B
//	dtasize keyincrement -reports 100M -error 1000 -success 0.99
//	dtasize postcard     -flows 1M -hops 5 -values 4096 -success 0.99
//	dtasize append       -rate 1M -lag 10ms -lists 64 -entry 16B -success 0.999
//
// -json prints the answer as one JSON object. Counts take K, M, G
// suffixes (decimal); sizes B, KiB, MiB, GiB or KB, MB, GB.
//
// Exit status: 0 with an answer (or for -h), 2 for bad arguments, 1 for a
// target no geometry reaches.
package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/dtakit/dtakit/dta/tofino"
	"github.com/dtakit/dtakit/internal/app/cli"
	"github.com/dtakit/dtakit/internal/units"
	"github.com/dtakit/dtakit/primitive"

	// The primitives dtasize sizes register themselves.
	_ "github.com/dtakit/dtakit/appendlist"
	_ "github.com/dtakit/dtakit/keyincr"
	_ "github.com/dtakit/dtakit/keywrite"
	_ "github.com/dtakit/dtakit/postcard"
)

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

// Answer is what dtasize prints.
type Answer struct {
	Primitive string         `json:"primitive"`
	Bytes     uint64         `json:"bytes"`
	Memory    string         `json:"memory"`
	N         int            `json:"n,omitempty"`
	Success   float64        `json:"success"`
	Geometry  map[string]any `json:"geometry"`
	Why       string         `json:"why"`
}

var errUsage = errors.New("usage")

// countFlag and bytesFlag parse with units.
type countFlag struct{ v *uint64 }

func (f countFlag) String() string {
	if f.v == nil {
		return ""
	}
	return fmt.Sprint(*f.v)
}
func (f countFlag) Set(s string) (err error) { *f.v, err = units.ParseCount(s); return err }

type bytesFlag struct{ v *uint64 }

func (f bytesFlag) String() string {
	if f.v == nil {
		return ""
	}
	return fmt.Sprint(*f.v)
}
func (f bytesFlag) Set(s string) (err error) { *f.v, err = units.ParseBytes(s); return err }

func usage(w io.Writer) {
	fmt.Fprintln(w, `usage: dtasize PRIMITIVE [flags]   (dtasize PRIMITIVE -h lists the flags)
  keywrite      -keys K -success P -value SIZE [-reference]
  keyincrement  -epsilon E | -reports T -error E   -success P
  postcard      -flows F -hops B -values V -success P
  append        -rate R -lag D -lists L -entry SIZE [-batch B] -success P
add -json for a JSON answer

Exit status:
`+exitStatus)
}

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 && (args[0] == "-h" || args[0] == "-help" || args[0] == "--help") {
		usage(stdout)
		return 0
	}
	if len(args) == 0 || strings.HasPrefix(args[0], "-") {
		usage(stderr)
		return 2
	}
	ans, err := size(args[0], args[1:], stderr)
	var asJSON bool
	for _, a := range args[1:] {
		asJSON = asJSON || a == "-json" || a == "--json" || a == "-json=true"
	}
	switch {
	case errors.Is(err, flag.ErrHelp):
		return 0
	case errors.Is(err, errUsage):
		if msg, ok := strings.CutPrefix(fmt.Sprint(err), errUsage.Error()+": "); ok {
			fmt.Fprintln(stderr, "dtasize:", msg)
		}
		return 2
	case errors.Is(err, primitive.ErrSizing):
		fmt.Fprintln(stderr, "dtasize:", err)
		return 1
	case err != nil:
		fmt.Fprintln(stderr, "dtasize:", err)
		return 2
	}
	if asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		enc.SetEscapeHTML(false)
		enc.Encode(ans)
		return 0
	}
	fmt.Fprintf(stdout, "%s: %s, success %.6g\n", ans.Primitive, ans.Memory, ans.Success)
	fmt.Fprintf(stdout, "  %s\n", ans.Why)
	return 0
}

func size(prim string, args []string, stderr io.Writer) (Answer, error) {
	k, _ := primitive.ByName(prim)
	sizer, ok := k.(primitive.Sizer)
	declare := workloads[prim]
	if !ok || declare == nil {
		usage(stderr)
		return Answer{}, fmt.Errorf("%w: unknown primitive %q", errUsage, prim)
	}
	fs := flag.NewFlagSet("dtasize "+prim, flag.ContinueOnError)
	fs.SetOutput(stderr)
	cli.Usage(fs, "dtasize "+prim+" [flags]", exitStatus)
	fs.Bool("json", false, "print the answer as JSON")
	success := fs.Float64("success", 0.99, "target: the probability a query succeeds")
	need := func(names ...string) error {
		if !(*success > 0 && *success < 1) {
			return fmt.Errorf("%s: -success %v: want a probability in (0, 1)", prim, *success)
		}
		set := map[string]bool{}
		fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
		for _, n := range names {
			if !set[n] {
				return fmt.Errorf("%s: -%s is required", prim, n)
			}
		}
		return nil
	}
	var w primitive.Workload
	check := declare(fs, &w)
	if err := fs.Parse(args); err != nil {
		return Answer{}, usageErr(err)
	}
	if err := check(need); err != nil {
		return Answer{}, err
	}
	w.Success = *success
	sz, err := sizer.Size(w)
	if err != nil {
		return Answer{}, err
	}
	return Answer{Primitive: prim, Bytes: sz.Bytes, Memory: units.Bytes(sz.Bytes), N: sz.N, Success: sz.Success,
		Geometry: sz.Geometry, Why: sz.Why}, nil
}

// workloads are the flags of each primitive's workload: a declare adds
// them to fs, filling w when parsed, and returns the check that, after
// parsing, says with need which are missing and finishes w.
var workloads = map[string]func(fs *flag.FlagSet, w *primitive.Workload) (check func(need func(names ...string) error) error){
	"keywrite": func(fs *flag.FlagSet, w *primitive.Workload) func(func(...string) error) error {
		var keys, value uint64
		fs.Var(countFlag{&keys}, "keys", "distinct keys per epoch (the oldest is queried after keys-1 others)")
		fs.Var(bytesFlag{&value}, "value", "data bytes per key, a multiple of 4")
		ref := fs.Bool("reference", false, "copies hashed as spec section 4 writes it (tofino.Reference)")
		return func(need func(...string) error) error {
			w.Keys, w.DataSize = max(keys, 1)-1, int(value)
			if *ref {
				w.Hasher = tofino.Reference
			}
			return need("keys", "value")
		}
	},
	"keyincrement": func(fs *flag.FlagSet, w *primitive.Workload) func(func(...string) error) error {
		var reports, errAbs uint64
		fs.Float64Var(&w.Epsilon, "epsilon", 0, "allowed overestimate as a fraction of the epoch's total")
		fs.Var(countFlag{&reports}, "reports", "total count per epoch (with -error)")
		fs.Var(countFlag{&errAbs}, "error", "allowed overestimate in counts (with -reports)")
		return func(need func(...string) error) error {
			if w.Epsilon != 0 {
				return need()
			}
			if err := need("reports", "error"); err != nil {
				return fmt.Errorf("%w (or -epsilon)", err)
			}
			if reports == 0 {
				return fmt.Errorf("keyincrement: -reports must be positive")
			}
			w.Epsilon = float64(errAbs) / float64(reports)
			return nil
		}
	},
	"postcard": func(fs *flag.FlagSet, w *primitive.Workload) func(func(...string) error) error {
		var flows uint64
		fs.Var(countFlag{&flows}, "flows", "distinct flows per epoch")
		fs.IntVar(&w.Hops, "hops", 5, "the longest path")
		fs.IntVar(&w.Values, "values", 0, "distinct hop values (switch IDs)")
		return func(need func(...string) error) error {
			w.Keys = max(flows, 1) - 1
			return need("flows", "values")
		}
	},
	"append": func(fs *flag.FlagSet, w *primitive.Workload) func(func(...string) error) error {
		var rate, entry uint64
		fs.Var(countFlag{&rate}, "rate", "entries per second per list")
		fs.DurationVar(&w.Lag, "lag", 0, "the longest a reader leaves its list unread")
		fs.IntVar(&w.Lists, "lists", 1, "lists")
		fs.Var(bytesFlag{&entry}, "entry", "bytes per entry, a multiple of 4")
		fs.IntVar(&w.Batch, "batch", 1, "entries the translator writes at once")
		return func(need func(...string) error) error {
			w.Rate, w.DataSize = float64(rate), int(entry)
			return need("rate", "lag", "entry")
		}
	},
}
