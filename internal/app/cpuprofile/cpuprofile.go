// Package cpuprofile gives a program a -cpuprofile flag: a CPU profile of
// its whole run, written when it stops, for go tool pprof.
package cpuprofile

import (
	"flag"
	"fmt"
	"os"
	"runtime/pprof"
)

// Flag adds -cpuprofile FILE to fs. The function it returns, called once
// fs is parsed, starts the profile when one was asked for and returns the
// function that stops it and writes FILE, handing fail the error if that
// fails (a no-op without the flag).
func Flag(fs *flag.FlagSet) func() (stop func(fail func(error)), err error) {
	file := fs.String("cpuprofile", "", "write a CPU profile of the run to this file (go tool pprof)")
	return func() (func(fail func(error)), error) {
		if *file == "" {
			return func(func(error)) {}, nil
		}
		f, err := os.Create(*file)
		if err != nil {
			return nil, fmt.Errorf("cpuprofile: %w", err)
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			f.Close()
			return nil, fmt.Errorf("cpuprofile: %w", err)
		}
		return func(fail func(error)) {
			pprof.StopCPUProfile()
			if err := f.Close(); err != nil {
				fail(fmt.Errorf("cpuprofile: %w", err))
			}
		}, nil
	}
}
