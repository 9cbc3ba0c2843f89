// Package keywrite implements DTA's Key-Write primitive in memory: the layout
// of a collector's Key-Write region, the translation of a report into the
// RDMA WRITEs that store its copies, a Store that applies those writes and
// answers queries from the raw memory, and the analytic bounds of the paper's
// Appendix A.5 with a sizing helper built on them.
//
// A region holds S slots (S a power of two) of SlotSize = nextpow2(4 + D)
// bytes, D being the data size. A report (key, data, N) is written N times:
// copy n stores le32(checksum(key)) ‖ data at slot(key, n)·SlotSize, where
// slot(key, n) = CRC32(le32(key) ‖ u8(n)) & (S-1) and checksum(key) =
// CRC32(le32(key)) (spec sections 4 and 5). Later reports overwrite slots; a
// query recomputes the N slots, keeps the copies whose checksum matches and
// votes. See docs/DTA-WIRE.md section 8.4 for the decisions made here.
//
// The paper's bounds (EmptyProb, WrongProbBounds) assume every copy is
// hashed independently. The switch's CRC does not do that: copy n's slot is
// copy 0's XOR a constant, so copies share their fate and, for N a power of
// two, redundancy does not lower the empty rate at all (EmptyProbSwitch).
// Size takes the addressing into account.
package keywrite
