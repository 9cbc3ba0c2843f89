package translator

import (
	"fmt"
	"net/netip"
	"time"

	"github.com/dtakit/dtakit/dta"
)

// Defaults of Config's zero fields (docs/DTA-WIRE.md section 8.6).
const (
	DefaultCMPort         = 40050
	DefaultRingSize       = 16384
	DefaultAckTimeout     = 10 * time.Millisecond
	DefaultMaxRetries     = 8
	DefaultDeadAfter      = time.Second
	DefaultCMTimeout      = 100 * time.Millisecond
	DefaultCMTries        = 5
	DefaultPostcardCache  = 4096
	DefaultMaxInstances   = 64
	DefaultRetryInterval  = time.Second
	DefaultAppendLinger   = 2 * time.Millisecond
	DefaultPostcardLinger = 2 * time.Millisecond
	DefaultAckPace        = 100 * time.Microsecond
	// MaxDiscoveryBackoff caps the wait between probes of a collector that
	// does not answer.
	MaxDiscoveryBackoff = 30 * time.Second
	// AckReqInterval is the most packets a QP sends without asking for an
	// acknowledgement.
	AckReqInterval = 64
	// MTU is the path MTU the translator asks for in its REQ (code 3): the
	// payload bytes of one RDMA WRITE packet.
	MTU = 1024
)

// LoopbackReporters is Config.Reporters' default: 127.0.0.0/8 and ::1.
var LoopbackReporters = []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("::1/128")}

// Config configures an Engine and a Translator. The zero value of every
// field but Collectors takes the default named beside it.
type Config struct {
	// ReportAddr is where the Translator receives reports (default
	// 127.0.0.1:40040). The Engine ignores it.
	ReportAddr netip.AddrPort
	// Reporters are the addresses or prefixes the Translator takes
	// reports from; a datagram from elsewhere is dropped unread and counted
	// (Counters.RefusedSource). Nil means loopback only (LoopbackReporters).
	// The Engine ignores it: its caller hands it reports.
	Reporters []netip.Prefix
	// NoReports makes the Translator take reports only from its caller
	// (Submit): no report socket is bound and ReportAddr is ignored. A
	// reporting host writing into collectors itself, as DART does
	// (package dart), runs a Translator so.
	NoReports bool
	// Local is the translator's RoCEv2 address, the source of every packet
	// it sends to the targets. It must be a specific address, since the ICRC
	// covers it; the Translator binds it (default 127.0.0.1:0, the port
	// chosen by the system) and fills the Engine's in.
	Local netip.AddrPort
	// Collectors are the targets' RoCEv2 addresses, one per collector.
	Collectors []netip.AddrPort
	// CMPort is the CM service port of a collector's first instance; instance
	// i listens on CMPort+i (default 40050).
	CMPort uint16
	// RingSize is the retransmit ring of each QP, in packets: a power of two
	// (default 16384). It bounds the packets in flight: a report that finds
	// its QP's ring full is refused (NACKed), so a ring shallower than a
	// burst of reporters' credit turns bursts into NACKs and resends.
	RingSize int
	// AckTimeout is the least a QP waits for progress before it resends
	// its unacknowledged packets, and the wait before it has timed a round
	// trip (default 10 ms). The wait follows the measured round trip above
	// it and doubles at each timeout, up to 4 times (docs/DTA-WIRE.md).
	AckTimeout time.Duration
	// MaxRetries is the number of timeouts in a row without progress after
	// which a QP is reconnected (default 8).
	MaxRetries int
	// DeadAfter is the least time without progress before a QP is given
	// up, however many timeouts (default 1 s): a collector starved of CPU
	// for a moment is not taken for dead, since giving up leaves its
	// reports unconfirmed.
	DeadAfter time.Duration
	// CMTimeout and CMTries: a REQ is resent after CMTimeout, CMTries times in
	// all, before the collector counts as not listening (100 ms, 5).
	CMTimeout time.Duration
	CMTries   int
	// RetryInterval is how long an instance whose reconnection failed waits
	// before it tries again (default 1 s).
	RetryInterval time.Duration
	// RateLimit caps each QP at this many packets per second, 0 for no
	// limit. RateBurst is the token bucket's depth in packets (default
	// RateLimit/100, at least AckReqInterval).
	RateLimit float64
	RateBurst int
	// AckPort is the UDP port NACKs are sent to, at the report's source
	// address (default 40044, dta.AckPort).
	AckPort uint16
	// Choice is the collector choice table: a report with key k goes to
	// collector Choice[CRC8(be32(k))]. Nil means entry i names collector
	// i mod len(Collectors).
	Choice *dta.CollectorChoice
	// AckPace is the least time between two cumulative acks to one source
	// (default 100 µs, DefaultAckPace; negative: one after every batch
	// read or acknowledged, as the engine's tests drive it). A source due
	// an ack sooner gets it with a later batch or tick, or at Flush:
	// each ack is a system call here and a wakeup at its sender, while a
	// sender's credit lasts many paces.
	AckPace time.Duration
	// AppendLinger is the longest an Append entry waits in a partial
	// batch before the batch is written (on a tick, so up to a tick more;
	// default 2 ms): a sender's ack for it waits for the write.
	AppendLinger time.Duration
	// PostcardLinger is how long a postcard flow waits in the cache for
	// its other hops before its chunk is written with what it has (looked
	// for every half linger, so up to 1.5 times as long; default 2 ms). The flow stays cached: a hop that comes later
	// joins it and the chunk is written again whole. A sender's ack for a
	// postcard waits for the write.
	PostcardLinger time.Duration
	// PostcardCache is the number of entries of each postcard cache, a power
	// of two (default 4096).
	PostcardCache int
	// MaxInstances bounds discovery: at most this many instances per
	// collector (default 64).
	MaxInstances int
	// Shards is the number of engines the Translator runs side by side
	// (default 1), each with its own report socket on ReportAddr
	// (SO_REUSEPORT), its own RoCEv2 socket and queue pairs to every
	// collector, and its own goroutines: translation then uses that many
	// cores. The engine ignores it. See docs/DTA-WIRE.md section 8.8 for
	// the order it keeps.
	Shards int
	// Verbs makes the Translator post its RDMA operations through the local
	// RDMA NIC that owns Local's address (package verbs) instead of sending
	// RoCEv2 datagrams: the NIC runs the connections, the engine translates
	// as before, with the same counters. Local's port, RingSize, AckTimeout,
	// MaxRetries, the CM timings and RateLimit do not apply. New fails,
	// wrapping verbs.ErrNoDevice or verbs.ErrNotSupported, where there is no
	// NIC.
	Verbs bool
}

func (c Config) withDefaults() Config {
	if c.NoReports {
		c.ReportAddr = netip.AddrPort{}
	} else if !c.ReportAddr.IsValid() {
		c.ReportAddr = netip.AddrPortFrom(netip.AddrFrom4([4]byte{127, 0, 0, 1}), dta.ReportPort)
	}
	if c.Reporters == nil {
		c.Reporters = LoopbackReporters
	}
	if c.CMPort == 0 {
		c.CMPort = DefaultCMPort
	}
	if c.RingSize == 0 {
		c.RingSize = DefaultRingSize
	}
	if c.AckPace == 0 {
		c.AckPace = DefaultAckPace
	}
	if c.AppendLinger == 0 {
		c.AppendLinger = DefaultAppendLinger
	}
	if c.PostcardLinger == 0 {
		c.PostcardLinger = DefaultPostcardLinger
	}
	if c.AckTimeout == 0 {
		c.AckTimeout = DefaultAckTimeout
	}
	if c.DeadAfter == 0 {
		c.DeadAfter = DefaultDeadAfter
	}
	if c.MaxRetries == 0 {
		c.MaxRetries = DefaultMaxRetries
	}
	if c.CMTimeout == 0 {
		c.CMTimeout = DefaultCMTimeout
	}
	if c.CMTries == 0 {
		c.CMTries = DefaultCMTries
	}
	if c.RetryInterval == 0 {
		c.RetryInterval = DefaultRetryInterval
	}
	if c.RateLimit > 0 && c.RateBurst == 0 {
		c.RateBurst = max(int(c.RateLimit/100), AckReqInterval)
	}
	if c.AckPort == 0 {
		c.AckPort = dta.AckPort
	}
	if c.PostcardCache == 0 {
		c.PostcardCache = DefaultPostcardCache
	}
	if c.MaxInstances == 0 {
		c.MaxInstances = DefaultMaxInstances
	}
	if c.Shards == 0 {
		c.Shards = 1
	}
	return c
}

func (c Config) validate() error {
	if !c.Local.IsValid() || c.Local.Addr().IsUnspecified() {
		return fmt.Errorf("%w: local address %v is not a specific address", ErrConfig, c.Local)
	}
	if err := c.validateLimits(); err != nil {
		return err
	}
	return c.validateAddrs()
}

// validateLimits checks the counts, sizes and durations.
func (c Config) validateLimits() error {
	switch {
	case len(c.Collectors) == 0 || len(c.Collectors) > 256:
		return fmt.Errorf("%w: %d collectors, want 1..256", ErrConfig, len(c.Collectors))
	case c.RingSize < 2 || c.RingSize&(c.RingSize-1) != 0 || c.RingSize > 1<<16:
		return fmt.Errorf("%w: ring of %d packets, want a power of two in 2..65536", ErrConfig, c.RingSize)
	case c.AckTimeout < 0 || c.CMTimeout < 0 || c.CMTries < 0 || c.MaxRetries < 0 || c.RetryInterval < 0 || c.AppendLinger < 0 || c.PostcardLinger < 0 || c.DeadAfter < 0:
		return fmt.Errorf("%w: negative timeout or count", ErrConfig)
	case c.RateLimit < 0 || c.RateBurst < 0:
		return fmt.Errorf("%w: negative rate limit", ErrConfig)
	case c.Shards < 1 || c.Shards > 256:
		return fmt.Errorf("%w: %d shards, want 1..256", ErrConfig, c.Shards)
	case c.MaxInstances < 1 || int(c.CMPort)+c.MaxInstances > 1<<16:
		return fmt.Errorf("%w: %d instances from CM port %d overflow the port range", ErrConfig, c.MaxInstances, c.CMPort)
	}
	return nil
}

// validateAddrs checks the reporter prefixes, the collectors' addresses
// and the choice table's collector numbers.
func (c Config) validateAddrs() error {
	for _, p := range c.Reporters {
		if !p.IsValid() {
			return fmt.Errorf("%w: reporter prefix %v", ErrConfig, p)
		}
	}
	for i, a := range c.Collectors {
		if !a.IsValid() || a.Addr().IsUnspecified() || a.Port() == 0 {
			return fmt.Errorf("%w: collector %d address %v", ErrConfig, i, a)
		}
		if a.Addr().Unmap().Is4() != c.Local.Addr().Unmap().Is4() {
			return fmt.Errorf("%w: collector %d address %v and local address %v are of different families", ErrConfig, i, a, c.Local)
		}
	}
	if c.Choice != nil {
		for i, v := range c.Choice {
			if int(v) >= len(c.Collectors) {
				return fmt.Errorf("%w: choice table entry %d names collector %d of %d", ErrConfig, i, v, len(c.Collectors))
			}
		}
	}
	return nil
}
