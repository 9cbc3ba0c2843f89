package main

import (
	"errors"
	"flag"
)

// The exit statuses -h prints; the package doc says the same.
const exitStatus = `  0  an answer, or -h
  1  a target no geometry reaches
  2  bad arguments`

// usageErr is what a subcommand's flag error means to run: -h stays
// flag.ErrHelp (exit 0), anything else is errUsage (exit 2).
func usageErr(err error) error {
	if errors.Is(err, flag.ErrHelp) {
		return err
	}
	return errUsage
}
