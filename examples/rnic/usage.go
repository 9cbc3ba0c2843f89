package main

// The usage and exit statuses -h prints; the package doc says the same.
const (
	synopsis   = "rnic -addr ADDR [-software] [flags]"
	exitStatus = `  0  every query checked, or -h
  1  any other failure
  2  bad flags, or no RDMA device`
)
