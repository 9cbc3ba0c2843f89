// Package dart is DART's mode of reporting (Langlet et al., "Zero-CPU
// Collection with Direct Telemetry Access", HotNets 2021): the reporting
// host writes its Key-Write reports into the collectors' memory itself, as
// RoCEv2, with no translator between.
//
// Each report writes one of its N copies, chosen at random, at the slot the
// collector's keywrite layout gives that copy, on the collector
// dta.CollectorChoice names for the key, as DART did; over a key's reports
// the copies fill as a translator's N writes would, and keywrite.Store
// answers the same query. A Reporter connects to the collectors as a
// translator does (RDMA CM, advertisements) and retransmits what they do
// not acknowledge: it runs a translator.Translator that takes reports from
// its caller instead of a socket.
package dart

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/dtakit/dtakit/dta"
	"github.com/dtakit/dtakit/keywrite"
	"github.com/dtakit/dtakit/translator"
)

// Reporter writes Key-Write reports directly. It is safe for concurrent
// use.
type Reporter struct {
	t *translator.Translator
}

// New binds the reporter's RoCEv2 socket. cfg is a translator's
// configuration (Collectors, Local, CMPort, Choice, RingSize, ...); its
// report fields are ignored. Start connects.
func New(cfg translator.Config) (*Reporter, error) {
	cfg.NoReports = true
	t, err := translator.New(cfg)
	if err != nil {
		return nil, err
	}
	return &Reporter{t: t}, nil
}

// Start connects to the collectors; see translator.Translator.Start.
func (d *Reporter) Start(ctx context.Context) error { return d.t.Start(ctx) }

// KeyWrite writes one copy, chosen at random among 0..n-1, of the report
// (key, data, n). It returns an error wrapping translator.ErrBusy when the
// collector's queue pair has no room (retry after a moment),
// translator.ErrNoInstance when the collector is not connected, or
// translator.ErrReport when the data does not fit the collector's layout.
// It does not allocate.
func (d *Reporter) KeyWrite(key uint32, data []byte, n int) error {
	if n < 1 || n > keywrite.MaxRedundancy {
		return fmt.Errorf("%w: redundancy %d, want 1..%d", translator.ErrReport, n, keywrite.MaxRedundancy)
	}
	return d.KeyWriteCopy(key, data, n, rand.IntN(n))
}

// KeyWriteCopy writes copy c (0..n-1) of the report (key, data, n): PINT
// chooses the copy by the packet (package pint).
func (d *Reporter) KeyWriteCopy(key uint32, data []byte, n, c int) error {
	if n < 1 || n > keywrite.MaxRedundancy || c < 0 || c >= n {
		return fmt.Errorf("%w: copy %d of %d", translator.ErrReport, c, n)
	}
	r := dta.Report{Header: dta.Header{Opcode: dta.OpKeyWrite},
		KeyWrite: dta.KeyWrite{Redundancy: uint8(n), Key: key, Data: data}}
	return d.t.Submit(&r, c)
}

// Flush sends the packets queued by KeyWrite now.
func (d *Reporter) Flush() { d.t.Flush() }

// Counters returns the counters of the reporter's translation and RoCEv2.
func (d *Reporter) Counters() translator.Counters { return d.t.Counters() }

// Close waits up to timeout for the collectors to acknowledge every write,
// then disconnects; see translator.Translator.Close.
func (d *Reporter) Close(timeout time.Duration) error { return d.t.Close(timeout) }
