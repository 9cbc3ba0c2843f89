// Package systest runs dtakit as users deploy it: the collector, the
// translator and a reporter as separate OS processes (cmd/dtacollector,
// cmd/dtatranslator, cmd/dtareport), talking over loopback sockets, checked
// through the collector's HTTP API against what the stream sent. It has
// tests only.
package systest
