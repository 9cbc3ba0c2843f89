// Package translator is dtakit's software DTA translator: it receives DTA
// reports on UDP, connects to collectors with the RDMA connection manager
// (active side), learns each primitive instance's memory region from the
// collector's advertisement, and turns every report into RoCEv2 RDMA
// operations with the primitives' own translation code, as a translator
// switch would.
//
// The work is split in two. [Engine] is the whole translator without
// sockets or clocks: reports, RoCEv2 datagrams from the targets and the
// passing of time (Unix nanoseconds, as in rocev2's cores) go in,
// datagrams to send come out ([Engine.Output]).
// It holds the per-QP requester state (PSN, bounded retransmit ring,
// AckReq policy, ACK/NAK processing, rate limit), the CM state machine and
// discovery, the collector choice table, the postcard caches and the append
// batchers. [Translator] runs an Engine on UDP sockets with batched I/O.
//
// Section 8.6 of docs/DTA-WIRE.md ("Software translator and reporter")
// records the policies: PSNs and retransmission, AckReq, rate limiting,
// NACKs to reporters, discovery, and what Close flushes.
package translator
