package main

// The usage and exit statuses -h prints; the package doc says the same.
const (
	synopsis   = "dtasim [-quick] [-out DIR] [-only NAME,...] [flags]"
	exitStatus = `  0  every figure written, or -list, or -h
  1  a figure could not be made or written
  2  bad flags or an unknown figure`
)
