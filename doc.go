// Package dtakit is the Go SDK for Direct Telemetry Access (DTA): reporters
// send small UDP reports, a translator turns each into RDMA (RoCEv2)
// operations, and those operations write straight into queryable structures
// in a collector's memory, with no collector CPU per report. This package
// holds no code; it is the map from DTA's concepts to the packages that
// implement them. Start with examples/README.md, which says which example to
// read first for what you want to do; docs/DTA-WIRE.md is the contract for
// every byte on the wire and in memory.
//
// # The path of a report
//
//   - Report, the wire format: package [github.com/dtakit/dtakit/dta]
//     (base header, the four primitive sub-headers, acknowledgements, the
//     collector's advertisement; reports on UDP 40040, acknowledgements on
//     40044). The switch's hash unit, which places every key in memory, is
//     [github.com/dtakit/dtakit/dta/tofino].
//   - Reporter, what sends reports: package
//     [github.com/dtakit/dtakit/reporter] (batches, sequence numbers,
//     resends of what a translator NACKs); the command cmd/dtareport; the
//     Tofino reporter program in p4/reporter.
//   - Translator, report to RDMA: package
//     [github.com/dtakit/dtakit/translator] (software, over UDP sockets or
//     an RDMA NIC) and its daemon cmd/dtatranslator; on a Tofino switch,
//     p4/translator with its control plane cmd/dtaswitchcp.
//   - RDMA: packages [github.com/dtakit/dtakit/rocev2] (packets, ICRC),
//     [github.com/dtakit/dtakit/rocev2/cm] (the connection manager),
//     [github.com/dtakit/dtakit/rocev2/rc] (a reliable connection's
//     requester), [github.com/dtakit/dtakit/rocev2/target] (a software
//     target, for collectors without an RDMA NIC) and
//     [github.com/dtakit/dtakit/verbs] (rdma-core, for those with one).
//   - Collector, the memory and its queries: package
//     [github.com/dtakit/dtakit/collector] for a program of your own; the
//     daemon cmd/dtacollector (package
//     [github.com/dtakit/dtakit/collector/daemon]) with queries over
//     HTTP/JSON; [github.com/dtakit/dtakit/collector/cluster] asks many
//     collectors as one.
//
// # The four primitives
//
// Each primitive has one name in prose and one identifier, the same in a
// collector's JSON configuration, its logs, its HTTP paths and answers,
// /metrics labels, dtareport's -mix, dtasize's subcommands, Parquet file
// names and dta.Opcode's String. A configuration may still use the old
// spellings (key-write, key-increment, postcarding, keyincr, appendlist):
// the collector accepts them and logs a warning naming the identifier. Go
// package names differ where Go asks for it (append is a built-in
// function):
//
//	prose          identifier     Go package   what it keeps
//	Key-Write      keywrite       keywrite     a value per key, in N copies
//	Key-Increment  keyincrement   keyincr      a count per key (count-min)
//	Postcarding    postcard       postcard     a flow's path, hop by hop
//	Append         append         appendlist   lists of entries, in order
//
// Every primitive package has the same shape: a Layout literal, NewStore
// over a region, the translator's side (AppendWrites, or a stateful Cache or
// Batcher), queries, the paper's bounds and Size(Workload).
//
// Each also registers itself with [github.com/dtakit/dtakit/primitive], the
// one seam through which code that runs every primitive reaches them: a
// Kind by opcode or identifier, its Layout, a Translator writing through a
// Sink, a Store over collector memory. A fifth primitive is one package and
// one primitive.Register (internal/test/keymax is one).
//
// # Telemetry in, history out, sizing
//
//   - INT and Telemetry Reports: [github.com/dtakit/dtakit/inband] decodes
//     them, [github.com/dtakit/dtakit/intbridge] turns them into DTA
//     reports; [github.com/dtakit/dtakit/pint] traces paths with PINT over
//     Key-Write; [github.com/dtakit/dtakit/dart] writes Key-Write copies
//     from the reporting host itself (DART).
//   - History: [github.com/dtakit/dtakit/export] writes an epoch of each
//     instance as a Parquet file.
//   - Sizing: cmd/dtasize says how much memory each primitive needs for a
//     workload, and why; cmd/dtasim redraws the papers' figures from this
//     code.
package dtakit
