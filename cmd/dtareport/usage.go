package main

// The usage and exit statuses -h prints; the package doc says the same.
const (
	synopsis = `dtareport [flags]

Sends DTA reports to a translator, numbered, taking its acks and NACKs
(resending what it NACKs), and prints its counters as JSON.`
	exitStatus = `  0  every report sent was confirmed applied, or -h
  1  any other failure
  2  bad flags
  3  some were not: lost (NACKed and not resent, or rejected) or
     unconfirmed (never acknowledged: no translator, one that dropped
     them, or -fire-and-forget); standard error says how many`
)
