package main

// The usage and exit statuses -h prints; the package doc says the same.
const (
	synopsis   = "dtacollector -config FILE [flags]"
	exitStatus = `  0  a clean shutdown (SIGINT or SIGTERM), or -h
  1  any other failure
  2  bad flags or configuration, among them an HTTP address beyond
     loopback without a token and TLS (or -http-insecure)
  3  the verbs backend found no RDMA device`
)
