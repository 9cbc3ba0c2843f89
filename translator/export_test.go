package translator

import (
	"fmt"

	"github.com/dtakit/dtakit/dta"
	"github.com/dtakit/dtakit/internal/exactly"
	"github.com/dtakit/dtakit/rocev2"
)

// seqWindow is the span of numbers behind the newest that a source's state
// remembers, for the tests.
const seqWindow = exactly.Window

// StartCollector is startCollector for the external tests.
var StartCollector = startCollector

// attach adds an instance to collector c (an index into Config.Collectors)
// as if discovery had found it and its advertisement ad had arrived on an RC
// connection whose target QP is remoteQPN and whose first PSN is start: it is
// ready at once. It is for the benchmarks and tests that drive the engine
// without a CM peer (the ACKs they feed back go to the returned QPN). The instance
// takes the next CM port of the collector.
func (e *Engine) attach(c int, ad dta.Advertisement, remoteQPN uint32, start rocev2.PSN) (qpn uint32, err error) {
	if c < 0 || c >= len(e.collectors) {
		return 0, fmt.Errorf("%w: collector %d of %d", ErrConfig, c, len(e.collectors))
	}
	if remoteQPN > rocev2.PSNMask || !start.Valid() {
		return 0, fmt.Errorf("%w: QPN %#x or PSN %#x wider than 24 bits", ErrConfig, remoteQPN, start)
	}
	col := e.collectors[c]
	in := &instance{col: col, port: e.cfg.CMPort + uint16(len(col.instances))}
	if err := in.configure(ad, e.cfg); err != nil {
		return 0, fmt.Errorf("%w: %w", ErrAdvertisement, err)
	}
	e.nextQPN = (e.nextQPN + 1) & rocev2.PSNMask
	if e.nextQPN < 2 {
		e.nextQPN = 2
	}
	q := &qp{
		inst: in, remote: col.addr, qpn: e.nextQPN, remoteQPN: remoteQPN, state: qpReady,
		startPSN: start, tokens: float64(e.cfg.RateBurst), lastRefill: e.now,
	}
	if q.req, err = e.newRequester(q); err != nil {
		return 0, err
	}
	in.conn = q
	e.qps[q.qpn] = q
	col.instances = append(col.instances, in)
	e.assign(col)
	return q.qpn, nil
}
