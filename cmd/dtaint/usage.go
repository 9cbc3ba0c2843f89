package main

// The usage and exit statuses -h prints; the package doc says the same.
const (
	synopsis   = "dtaint [-config FILE] [flags]"
	exitStatus = `  0  a clean shutdown (SIGINT or SIGTERM), or -h
  1  any other failure
  2  bad flags or configuration`
)
