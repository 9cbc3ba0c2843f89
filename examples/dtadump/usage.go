package main

// The usage and exit statuses -h prints; the package doc says the same.
const (
	synopsis = `dtadump [-report-port P] [-int-port P] [-int-after-l4] [capture.pcap|capture.pcapng|-]

With no file or -, reads standard input.`
	exitStatus = `  0  every packet printed (those that do not decode with an "error" field), or -h
  1  the capture could not be read
  2  bad flags`
)
