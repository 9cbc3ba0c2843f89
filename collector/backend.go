package collector

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"sync"

	"github.com/dtakit/dtakit/internal/udpio"
	"github.com/dtakit/dtakit/rocev2"
	"github.com/dtakit/dtakit/rocev2/target"
)

// backend is what serves a collector's regions (Config.Backend): the
// software target or an RDMA NIC. Collector holds one, chosen by New, and
// calls it with its mutex held except for serve and close.
type backend interface {
	// register makes mem a region translators may write with access.
	register(in *instance, mem []byte, access target.Access) (va uint64, rkey uint32, err error)
	// unregister undoes what register did for in, if anything.
	unregister(in *instance)
	// sendsHeads reports whether the backend sends an instance's heads
	// after its advertisement (dta.ListHeads).
	sendsHeads() bool
	// listen accepts connections to in on CM port port, greeting each
	// with in.Advertisement.
	listen(in *instance, port uint16) error
	// start binds the backend's sockets, if any; again is a no-op.
	start() error
	// localAddr returns the bound RoCEv2 address, if start bound one.
	localAddr() (netip.AddrPort, bool)
	// serve serves until ctx is done or halt.
	serve(ctx context.Context) error
	// halt makes serve return (Close; the collector's mutex is held).
	halt() error
	// close releases everything; serve has returned.
	close() error
}

// software is the software target's backend: UDP sockets on Config.Addr
// (several with Config.Shards), served by rocev2/target.
type software struct {
	t      *target.Target
	addr   netip.AddrPort
	shards int
	ucs    []*net.UDPConn
}

func (s *software) register(in *instance, mem []byte, a target.Access) (uint64, uint32, error) {
	r, err := s.t.Register(mem, a)
	if err != nil {
		return 0, 0, err
	}
	in.region = r
	return r.VA(), r.RKey(), nil
}

func (s *software) unregister(in *instance) {
	if in.region != nil {
		s.t.Deregister(in.region)
	}
}

func (*software) sendsHeads() bool { return true }

func (s *software) listen(in *instance, port uint16) error {
	lc := target.ListenConfig{Greeting: in.Advertisement}
	if in.notify != nil {
		lc.OnRecv = in.onRecv
	}
	if in.heads != nil {
		lc.FollowUp = in.followUp
	}
	return s.t.Listen(port, lc)
}

func (s *software) start() error {
	if s.ucs != nil {
		return nil
	}
	ucs, err := udpio.ListenShards(s.addr, s.shards)
	if err != nil {
		return err
	}
	for _, uc := range ucs {
		// Bursts of a translator's packets queue in the socket while the
		// target works: ask for large buffers (the system caps them at its
		// maximum).
		_ = uc.SetReadBuffer(SocketBuffer)
		_ = uc.SetWriteBuffer(SocketBuffer)
		if err := rocev2.ConfigureSocket(uc); err != nil {
			for _, uc := range ucs {
				uc.Close()
			}
			return err
		}
	}
	s.ucs = ucs
	return nil
}

func (s *software) localAddr() (netip.AddrPort, bool) {
	if s.ucs == nil {
		return netip.AddrPort{}, false
	}
	a := s.ucs[0].LocalAddr().(*net.UDPAddr).AddrPort()
	return netip.AddrPortFrom(a.Addr().Unmap(), a.Port()), true
}

// serve runs the target on every socket, each on its own goroutine.
func (s *software) serve(ctx context.Context) error {
	errs := make([]error, len(s.ucs))
	var wg sync.WaitGroup
	for i, uc := range s.ucs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = s.t.Serve(ctx, uc)
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

func (s *software) halt() error {
	var errs []error
	for _, uc := range s.ucs {
		errs = append(errs, uc.Close())
	}
	return errors.Join(errs...)
}

// close closes the target: once it is closed no packet reaches the
// memory (Close waits for a Process under way, and every later one
// returns at once).
func (s *software) close() error { return s.t.Close() }
