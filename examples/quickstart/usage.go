package main

// The usage and exit statuses -h prints; the package doc says the same.
const (
	synopsis   = "quickstart [flags]"
	exitStatus = `  0  every success rate within its tolerance and nothing out of bounds, or -h
  1  a check failed (it says which) or the pipeline could not start
  2  bad flags`
)
