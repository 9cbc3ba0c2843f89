package main

// The usage and exit statuses -h prints; the package doc says the same.
const (
	synopsis   = "dtareport [flags]"
	exitStatus = `  0  every report went out and was delivered, or -h
  1  any other failure
  2  bad flags
  3  some reports were lost or unconfirmed (NACKed and not resent, refused
     by the socket, or never acknowledged)`
)
