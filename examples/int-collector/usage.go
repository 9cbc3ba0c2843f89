package main

// The usage and exit statuses -h prints.
const (
	synopsis   = "int-collector [-pcap FILE] [flags]"
	exitStatus = `  0  done, or -h
  1  any failure`
)
