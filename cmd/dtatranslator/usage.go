package main

// The usage and exit statuses -h prints; the package doc says the same.
const (
	synopsis   = "dtatranslator [-config FILE] [flags]"
	exitStatus = `  0  a clean shutdown (SIGINT or SIGTERM): everything flushed and
     acknowledged; or -h
  1  any other failure
  2  bad flags or configuration, among them an HTTP address beyond
     loopback without a token and TLS (or -http-insecure)
  4  some packets were still unacknowledged after -drain`
)
