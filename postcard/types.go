package postcard

// A postcard names a flow (its key), a hop on the flow's path, the path's
// length and the value the hop saw. Hop, PathLength and Value are distinct
// types so that a variable of one role passed where another is expected
// does not compile; every API that takes them takes them in the order
// key, hop, path length, value ([Cache.Insert], reporter.Reporter.Postcard):
// where the value goes, then the value. Untyped constants still convert to
// any of them, which is why the order is the same everywhere.
//
// The wire struct dta.Postcard keeps plain integers (wire packages import
// none of ours); conversion happens where a report meets this package.

// Hop is a 1-based hop number on a flow's path (1..Layout.Hops).
type Hop uint8

// PathLength is the number of hops on a flow's path; 0 means unknown.
type PathLength uint8

// Value is what a hop reports: an element of the value set, 0 being the
// blank and never sent.
type Value uint32
