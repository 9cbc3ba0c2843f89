// Package cli gives dtakit's commands one way to answer -h and bad flags:
// -h (or -help) prints the usage, the flags and the command's exit
// statuses, and exits 0; a bad flag prints what was wrong and the same
// usage, and exits 2.
package cli

import (
	"errors"
	"flag"
	"fmt"
)

// Usage makes fs print "usage: " and synopsis (one or more lines), its
// flags, then "Exit status:" and exits (one status a line, "0  meaning").
func Usage(fs *flag.FlagSet, synopsis, exits string) {
	fs.Usage = func() {
		w := fs.Output()
		fmt.Fprintf(w, "usage: %s\n\nFlags:\n", synopsis)
		fs.PrintDefaults()
		fmt.Fprintf(w, "\nExit status:\n%s\n", exits)
	}
}

// Parse parses args into fs (which must be flag.ContinueOnError). It
// reports whether the command goes on; if not, code is its exit status: 0
// after -h, 2 after a bad flag.
func Parse(fs *flag.FlagSet, args []string) (code int, ok bool) {
	switch err := fs.Parse(args); {
	case errors.Is(err, flag.ErrHelp):
		return 0, false
	case err != nil:
		return 2, false
	}
	return 0, true
}
