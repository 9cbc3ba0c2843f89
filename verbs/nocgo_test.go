//go:build !linux || !cgo

package verbs

const cgoLinux = false
