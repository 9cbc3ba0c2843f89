package e2e

import (
	"encoding/binary"
	"errors"
	"math/rand/v2"
	"net"
	"net/netip"
	"sort"
	"sync"
	"time"

	"github.com/dtakit/dtakit/internal/udpio"
	"github.com/dtakit/dtakit/rocev2"
)

// direction of a datagram through the relay.
type direction int

const (
	toTarget     direction = iota // translator -> target
	toTranslator                  // target -> translator
)

// faults are the relay's per-direction fault probabilities, each applied to
// every datagram independently.
type faults struct {
	Drop      float64       // the datagram is not forwarded
	Duplicate float64       // it is forwarded twice
	Delay     float64       // a copy is held back a random time up to MaxDelay (reordering)
	MaxDelay  time.Duration // the longest hold
	Corrupt   float64       // a copy gets one bit after the BTH flipped, its ICRC left as it was (bad ICRC)
}

// relayCounts counts what the relay did, per direction.
type relayCounts struct {
	In, Out, Dropped, Duplicated, Delayed, Corrupted, Tampered, Cut [2]uint64
}

// tamperFunc sees each RoCEv2 packet going to the target that decodes with
// a good ICRC, before faults apply. When it returns ok, the packets out are
// sent in p's place (encoded with the relay's addresses, so with good
// ICRCs); otherwise p goes on unchanged. p.Payload aliases the datagram.
type tamperFunc func(p *rocev2.Packet) (out []rocev2.Packet, ok bool)

// relay is a UDP relay between translators and one target. Translators send
// to its front address as if it were the target; it forwards each
// translator's datagrams from a back socket of that translator's own (as a
// NAT does), so the target sees one peer per translator, and forwards the
// target's answers to the translator behind that back socket. It moves
// datagrams in batches (recvmmsg, sendmmsg), so that it keeps up with a
// translator's go-back-N bursts instead of overflowing its socket buffers.
//
// The ICRC covers the socket addresses (section 8.3): the relay is not
// transparent to it, so it fixes the ICRC of every datagram for the
// addresses of the hop it sends it on. It XORs the difference of the
// ICRCs over the old and the new addresses into the datagram's ICRC (CRCs
// are affine), which keeps a datagram that arrived corrupted exactly as
// corrupted; tampered packets are re-encoded with AppendDatagram.
type relay struct {
	front  *sock
	addr   netip.AddrPort // front address
	target netip.AddrPort

	mu     sync.Mutex
	rng    *rand.Rand
	f      [2]faults
	cut    bool
	tamper tamperFunc
	backs  map[netip.AddrPort]*back
	counts relayCounts

	delayed chan delayedDatagram
	synced  chan struct{}
	stop    chan struct{}
	wg      sync.WaitGroup
	closed  bool
}

// sock is a batched socket whose writes several goroutines share.
type sock struct {
	c   *udpio.Conn
	wmu sync.Mutex
}

func (s *sock) write(ms []udpio.Datagram) {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	for len(ms) > 0 {
		n, err := s.c.WriteBatch(ms)
		if err != nil {
			n++ // skip what the kernel refuses
		}
		ms = ms[min(n, len(ms)):]
	}
}

// back is the relay's socket towards the target for one translator.
type back struct {
	s      *sock
	addr   netip.AddrPort
	client netip.AddrPort // the translator
}

type delayedDatagram struct {
	at time.Time
	s  *sock
	m  udpio.Datagram
}

const relayBatch = 64

var loopback = netip.AddrFrom4([4]byte{127, 0, 0, 1})

// newRelay opens a relay in front of target, its random choices seeded
// with seed.
func newRelay(target netip.AddrPort, seed uint64) (*relay, error) {
	s, a, err := listen(netip.AddrPortFrom(loopback, 0))
	if err != nil {
		return nil, err
	}
	r := &relay{
		front: s, addr: a, target: target,
		rng:     rand.New(rand.NewPCG(seed, 0xD7A)),
		backs:   make(map[netip.AddrPort]*back),
		delayed: make(chan delayedDatagram, 1024),
		synced:  make(chan struct{}, 1),
		stop:    make(chan struct{}),
	}
	r.wg.Add(2)
	go r.readFront()
	go r.delayer()
	return r, nil
}

func listen(a netip.AddrPort) (*sock, netip.AddrPort, error) {
	uc, err := net.ListenUDP("udp", net.UDPAddrFromAddrPort(a))
	if err != nil {
		return nil, netip.AddrPort{}, err
	}
	_ = uc.SetReadBuffer(8 << 20)
	_ = uc.SetWriteBuffer(8 << 20)
	c, err := udpio.New(uc, relayBatch)
	if err != nil {
		uc.Close()
		return nil, netip.AddrPort{}, err
	}
	return &sock{c: c}, unmap(uc.LocalAddr().(*net.UDPAddr).AddrPort()), nil
}

// Addr returns the address translators send to.
func (r *relay) Addr() netip.AddrPort { return r.addr }

// setFaults sets the faults of direction d.
func (r *relay) setFaults(d direction, f faults) {
	r.mu.Lock()
	r.f[d] = f
	r.mu.Unlock()
}

// setCut makes the relay drop everything, both ways (a crashed translator,
// or a cable pulled), or forward again.
func (r *relay) setCut(cut bool) {
	r.mu.Lock()
	r.cut = cut
	r.mu.Unlock()
}

// setTamper sets the function that sees packets to the target (nil: none).
func (r *relay) setTamper(f tamperFunc) {
	r.mu.Lock()
	r.tamper = f
	r.mu.Unlock()
}

// Counts returns a snapshot of the counters.
func (r *relay) Counts() relayCounts {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.counts
}

// Close closes the relay's sockets and waits for its goroutines.
func (r *relay) Close() {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return
	}
	r.closed = true
	close(r.stop)
	r.front.c.UDPConn().Close()
	for _, b := range r.backs {
		b.s.c.UDPConn().Close()
	}
	r.mu.Unlock()
	r.wg.Wait()
}

// syncMagic is the datagram sync sends to the relay.
const syncMagic = "relay sync"

// sync returns once the relay has handled every datagram that reached its
// front socket before the call: a datagram sent on loopback is queued at its
// receiver when the send returns, and the relay handles its queue in order.
func (r *relay) sync() error {
	uc, err := net.ListenUDP("udp", net.UDPAddrFromAddrPort(netip.AddrPortFrom(loopback, 0)))
	if err != nil {
		return err
	}
	defer uc.Close()
	select {
	case <-r.synced:
	default:
	}
	if _, err := uc.WriteToUDPAddrPort([]byte(syncMagic), r.addr); err != nil {
		return err
	}
	select {
	case <-r.synced:
		return nil
	case <-time.After(5 * time.Second):
		return errors.New("relay sync: timed out")
	}
}

func newBatch() []udpio.Datagram {
	ms := make([]udpio.Datagram, relayBatch)
	buf := make([]byte, relayBatch*2048)
	for i := range ms {
		ms[i].Buf = buf[i*2048 : (i+1)*2048]
	}
	return ms
}

func (r *relay) readFront() {
	defer r.wg.Done()
	ms := newBatch()
	outs := make(map[*sock][]udpio.Datagram)
	var p rocev2.Packet
	for {
		n, err := r.front.c.ReadBatch(ms)
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			continue
		}
		for i := range n {
			src := unmap(ms[i].Addr)
			d := ms[i].Buf
			if string(d) == syncMagic {
				select {
				case r.synced <- struct{}{}:
				default:
				}
				continue
			}
			r.mu.Lock()
			b := r.backs[src]
			if b == nil && !r.closed {
				if s, a, err := listen(netip.AddrPortFrom(loopback, 0)); err == nil {
					b = &back{s: s, addr: a, client: src}
					r.backs[src] = b
					r.wg.Add(1)
					go r.readBack(b)
				}
			}
			tamper := r.tamper
			r.mu.Unlock()
			if b == nil {
				continue
			}
			if tamper != nil && p.DecodeDatagram(d, src, r.addr) == nil && p.BTH.DestQP != 1 {
				if out, ok := tamper(&p); ok {
					r.mu.Lock()
					r.counts.Tampered[toTarget]++
					r.mu.Unlock()
					for i := range out {
						enc, err := out[i].AppendDatagram(nil, b.addr, r.target)
						if err == nil {
							outs[b.s] = r.forward(outs[b.s], toTarget, b.s, r.target, enc, false)
						}
					}
					continue
				}
			}
			fixICRC(d, src, r.addr, b.addr, r.target)
			outs[b.s] = r.forward(outs[b.s], toTarget, b.s, r.target, d, true)
		}
		for s, out := range outs {
			s.write(out)
			clear(out)
			outs[s] = out[:0]
		}
	}
}

func (r *relay) readBack(b *back) {
	defer r.wg.Done()
	ms := newBatch()
	var out []udpio.Datagram
	for {
		n, err := b.s.c.ReadBatch(ms)
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			continue
		}
		for i := range n {
			if unmap(ms[i].Addr) != r.target {
				continue
			}
			d := ms[i].Buf
			fixICRC(d, r.target, b.addr, r.addr, b.client)
			out = r.forward(out, toTranslator, r.front, b.client, d, true)
		}
		r.front.write(out)
		clear(out)
		out = out[:0]
	}
}

// forward passes d, for addr on s, through the direction's faults (unless
// faulty is false, for tampered packets, which are sent as they are): it
// appends the copies to send now to out, and hands delayed ones to the
// delayer.
func (r *relay) forward(out []udpio.Datagram, dir direction, s *sock, to netip.AddrPort, d []byte, faulty bool) []udpio.Datagram {
	r.mu.Lock()
	r.counts.In[dir]++
	if r.cut {
		r.counts.Cut[dir]++
		r.mu.Unlock()
		return out
	}
	f := r.f[dir]
	if !faulty {
		f = faults{}
	}
	copies := 1
	switch x := r.rng.Float64(); {
	case x < f.Drop:
		r.counts.Dropped[dir]++
		copies = 0
	case x < f.Drop+f.Duplicate:
		r.counts.Duplicated[dir]++
		copies = 2
	}
	var delays [2]time.Duration
	var corrupt [2]int // byte index to flip, 0 for none
	for i := range copies {
		if f.Delay > 0 && r.rng.Float64() < f.Delay {
			delays[i] = time.Duration(r.rng.Int64N(int64(f.MaxDelay) + 1))
			r.counts.Delayed[dir]++
		}
		if f.Corrupt > 0 && len(d) > rocev2.BTHLen && r.rng.Float64() < f.Corrupt {
			corrupt[i] = rocev2.BTHLen + r.rng.IntN(len(d)-rocev2.BTHLen)
			r.counts.Corrupted[dir]++
		}
	}
	bit := byte(1) << r.rng.IntN(8)
	r.counts.Out[dir] += uint64(copies)
	r.mu.Unlock()
	for i := range copies {
		b := d
		if corrupt[i] != 0 || delays[i] != 0 {
			b = append([]byte(nil), d...)
			if corrupt[i] != 0 {
				b[corrupt[i]] ^= bit
			}
		}
		if delays[i] != 0 {
			select {
			case r.delayed <- delayedDatagram{at: time.Now().Add(delays[i]), s: s, m: udpio.Datagram{Buf: b, Addr: to}}:
			case <-r.stop:
			}
			continue
		}
		out = append(out, udpio.Datagram{Buf: b, Addr: to})
	}
	return out
}

// delayer sends the delayed datagrams when their time comes.
func (r *relay) delayer() {
	defer r.wg.Done()
	var q []delayedDatagram
	tm := time.NewTimer(time.Hour)
	defer tm.Stop()
	for {
		var wake <-chan time.Time
		if len(q) > 0 {
			tm.Reset(time.Until(q[0].at))
			wake = tm.C
		}
		select {
		case <-r.stop:
			return
		case d := <-r.delayed:
			q = append(q, d)
			sort.SliceStable(q, func(i, j int) bool { return q[i].at.Before(q[j].at) })
		case <-wake:
			now := time.Now()
			for len(q) > 0 && !q[0].at.After(now) {
				q[0].s.write([]udpio.Datagram{q[0].m})
				q = q[1:]
			}
		}
		tm.Stop()
	}
}

// fixICRC rewrites the ICRC of d, a RoCEv2 datagram sent from src to dst,
// for a datagram from nsrc to ndst: the ICRC is affine in the bytes it
// covers, so XORing in the difference of the two correct ICRCs keeps any
// error d carries. Datagrams too short to be RoCEv2 are left alone.
func fixICRC(d []byte, src, dst, nsrc, ndst netip.AddrPort) {
	if len(d) < rocev2.BTHLen+rocev2.ICRCLen {
		return
	}
	n := len(d) - rocev2.ICRCLen
	a, err1 := rocev2.DatagramICRC(src, dst, d[:n])
	b, err2 := rocev2.DatagramICRC(nsrc, ndst, d[:n])
	if err1 != nil || err2 != nil {
		return
	}
	binary.LittleEndian.PutUint32(d[n:], binary.LittleEndian.Uint32(d[n:])^a^b)
}

func unmap(a netip.AddrPort) netip.AddrPort {
	return netip.AddrPortFrom(a.Addr().Unmap(), a.Port())
}
