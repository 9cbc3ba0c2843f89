package main

// The usage and exit statuses -h prints; the package doc says the same.
const (
	synopsis   = "dtaswitchcp -config FILE [flags]"
	exitStatus = `  0  done (the plan written; with -once, or after SIGINT or SIGTERM), or -h
  1  a collector refused or never answered, or the plan could not be written
  2  bad flags or configuration`
)
