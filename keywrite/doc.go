// Package keywrite implements DTA's Key-Write primitive in memory: the layout
// of a collector's Key-Write region, the translation of a report into the
// RDMA WRITEs that store its copies, a Store that applies those writes and
// answers queries from the raw memory, and the analytic bounds of the paper's
// Appendix A.5 with a sizing helper built on them.
//
// A region holds S slots (S a power of two) of SlotSize = nextpow2(4 + D)
// bytes, D being the data size. A report (key, data, N) is written N times:
// copy n stores le32(checksum(key)) ‖ data at slot(key, n)·SlotSize, with
// checksum(key) = CRC32(le32(key)) (spec sections 4 and 5). Later reports
// overwrite slots; a query recomputes the N slots, keeps the copies whose
// checksum matches and votes. See docs/DTA-WIRE.md section 8.4 for the
// decisions made here.
//
// # Addressing
//
// By default slots are addressed with tofino.PerCopy: copy 0 at spec section
// 4's CRC32(le32(key) ‖ u8(0)) & (S-1), so one-copy memory is the spec's
// byte for byte, and copy n >= 1 at the same input hashed with a CRC-32 of
// its own polynomial, so copies collide independently and the paper's
// bounds (EmptyProb, WrongProbBounds) hold. Section 4 as written,
// CRC32(le32(key) ‖ u8(n)) for every copy, is tofino.Reference: a CRC is
// affine, so there copy n's slot is copy 0's XOR a key-independent
// constant, copies share their fate and, for N a power of two, redundancy
// does not lower the empty rate at all (EmptyProbReference). Read memory
// written by the reference prototype with Layout.Hasher tofino.Reference.
// Size takes the addressing into account.
package keywrite
