//go:build !linux || !cgo || !rdma

package verbs

const cgoLinux = false
