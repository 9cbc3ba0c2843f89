// Package verbs is a thin Go binding of rdma-core's libibverbs and librdmacm:
// devices, protection domains, memory regions, completion queues and
// channels, RC queue pairs with their state transitions, the RDMA connection
// manager, posting work requests (SEND, RECV, RDMA WRITE with or without
// immediate, RDMA READ, atomic FETCH_ADD and CMP_SWAP) and polling
// completions. The names follow rdma-core's pyverbs: Context, PD, MR, CQ,
// CompChannel, QP, CMID, EventChannel.
//
// It knows nothing of DTA and imports nothing else of dtakit.
//
// # Platforms
//
// The binding needs Linux, cgo and the build tag rdma (`go build -tags
// rdma`), rdma-core's headers to build (Debian: libibverbs-dev,
// librdmacm-dev) and its libraries to run (libibverbs1, librdmacm1,
// ibverbs-providers). Without the tag, so on any machine with only Go, the
// package builds and every call returns an error wrapping
// [ErrNotSupported]: programs that import it (through package collector or
// translator) need rdma-core only when they ask for it. With no RDMA device, [Devices] and [Open] return an
// error wrapping [ErrNoDevice]; Soft-RoCE (`rdma link add rxe0 type rxe
// netdev eth0`) provides one on any Linux host whose kernel has rdma_rxe.
//
// # Lifetimes
//
// Every object is released by its Close method, which is safe to call twice;
// close in the reverse order of creation (QPs, then MRs and CQs, then PDs,
// then the Context). There are no finalizers: an object that is not closed
// keeps its kernel resources until the process exits.
//
// [PD.RegMR] registers caller memory. The memory must stay valid until the
// MR is closed: the NIC reads and writes it at any time. Memory from the Go
// heap is pinned with a [runtime.Pinner] for the MR's life, so the garbage
// collector neither frees nor moves it; memory mapped outside the Go heap
// (a hugepage or file mapping) is the usual choice for large regions.
//
// # Errors
//
// Every failed call returns an [*Error] naming the rdma-core function and
// carrying its errno, so errors.Is(err, syscall.ENOMEM) works, as do the
// package's sentinels where they apply.
//
// # Concurrency
//
// Posting to one QP and polling one CQ are each safe from one goroutine at a
// time (libibverbs locks internally, but the package's own state is not
// guarded). Different objects may be used from different goroutines.
package verbs
