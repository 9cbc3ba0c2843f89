// Package e2e holds dtakit's end-to-end fault tests: reporter, software
// translator and software collector (or a bare software target) on loopback
// UDP sockets, with a lossy, reordering, duplicating and tampering relay
// between translator and target. The package has no API; its tests and the
// relay they share are in _test.go files. docs/DTA-WIRE.md section 8.6
// ("Faults, end to end") says what each fault does and which test shows it.
package e2e
