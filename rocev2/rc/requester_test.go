package rc

import (
	"errors"
	"net/netip"
	"testing"
	"time"

	"github.com/dtakit/dtakit/rocev2"
)

var (
	testLocal  = netip.MustParseAddrPort("127.0.0.1:5000")
	testRemote = netip.MustParseAddrPort("127.0.0.2:4791")
)

const ms = int64(time.Millisecond)

func newTest(t *testing.T, start rocev2.PSN) *Requester {
	t.Helper()
	r, err := New(Config{Local: testLocal, Remote: testRemote, RemoteQPN: 0x11, StartPSN: start, Ring: 8,
		MaxPacket: 128, AckReqEvery: 64, AckTimeout: 10 * time.Millisecond, MaxRetries: 3, DeadAfter: 100 * time.Millisecond}, 0)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// decode checks that b is a well-formed datagram of r (the ICRC included)
// and returns it.
func decode(t *testing.T, b []byte) rocev2.Packet {
	t.Helper()
	var p rocev2.Packet
	if err := p.DecodeDatagram(b, testLocal, testRemote); err != nil {
		t.Fatalf("datagram % x: %v", b, err)
	}
	return p
}

func TestNewRefusesBadConfig(t *testing.T) {
	good := Config{Local: testLocal, Remote: testRemote, Ring: 8, MaxPacket: 128}
	for name, mod := range map[string]func(*Config){
		"ring 0":         func(c *Config) { c.Ring = 0 },
		"ring 6":         func(c *Config) { c.Ring = 6 },
		"ring 2^17":      func(c *Config) { c.Ring = 1 << 17 },
		"packet 8":       func(c *Config) { c.MaxPacket = 8 },
		"packet 5000":    func(c *Config) { c.MaxPacket = 5000 },
		"PSN 2^24":       func(c *Config) { c.StartPSN = 1 << 24 },
		"QPN 2^24":       func(c *Config) { c.RemoteQPN = 1 << 24 },
		"IPv6 from IPv4": func(c *Config) { c.Remote = netip.MustParseAddrPort("[::2]:4791") },
	} {
		c := good
		mod(&c)
		if _, err := New(c, 0); !errors.Is(err, ErrConfig) {
			t.Errorf("%s: %v, want ErrConfig", name, err)
		}
	}
	if _, err := New(good, 0); err != nil {
		t.Errorf("good config: %v", err)
	}
}

// TestEndRound: packets without AckReq until the round ends; then its last
// packet asks for one, with its ICRC recomputed.
func TestEndRound(t *testing.T) {
	r := newTest(t, 100)
	var out [][]byte
	for i := range 3 {
		out = append(out, r.WriteOnly(uint64(8*i), 7, []byte{1, 2, 3, 4}, false, 0, 0))
	}
	for i, b := range out {
		if p := decode(t, b); p.BTH.AckReq || p.BTH.PSN != rocev2.PSN(100+i) {
			t.Fatalf("packet %d: PSN %d AckReq %v before the round ends", i, p.BTH.PSN, p.BTH.AckReq)
		}
	}
	r.EndRound()
	for i, b := range out {
		if p := decode(t, b); p.BTH.AckReq != (i == 2) {
			t.Errorf("packet %d: AckReq %v after the round", i, p.BTH.AckReq)
		}
	}
	if b := r.FetchAdd(64, 7, 1, 0); !decode(t, b).BTH.AckReq {
		t.Error("a FETCH_ADD without AckReq")
	}
}

// TestGoBackOnSequenceNAK: a sequence error NAK acknowledges what came
// before the PSN it names and resends from there, once: the same NAK again
// within the timeout is a repeat.
func TestGoBackOnSequenceNAK(t *testing.T) {
	r := newTest(t, rocev2.PSNMask-1) // the PSNs wrap
	for i := range 5 {
		r.WriteOnly(uint64(8*i), 7, []byte{1, 2, 3, 4}, false, 0, 0)
	}
	r.EndRound()
	nak := rocev2.PSN(rocev2.PSNMask - 1).Add(2)
	if ev := r.HandleAck(nak, rocev2.SyndromeNAKPSNSequenceError, ms); ev != Acked|GoBack {
		t.Fatalf("event %v, want Acked|GoBack", ev)
	}
	if r.Una() != nak || r.ResendFrom() != nak || r.InFlight() != 3 {
		t.Errorf("una %d, resend from %d, %d in flight; want %d, %d, 3", r.Una(), r.ResendFrom(), r.InFlight(), nak, nak)
	}
	if p := decode(t, r.Packet(r.Next().Add(rocev2.PSNMask))); !p.BTH.AckReq {
		t.Error("the last packet resent has no AckReq")
	}
	if ev := r.HandleAck(nak, rocev2.SyndromeNAKPSNSequenceError, 2*ms); ev != 0 {
		t.Errorf("repeated NAK: event %v, want none", ev)
	}
	if c := r.Counters(); c.SeqNAKs != 2 || c.DupNAKs != 1 || c.Retransmits != 3 || c.Packets != 5 {
		t.Errorf("counters %+v", c)
	}
	if ev := r.HandleAck(nak.Add(2), rocev2.SyndromeACK, 3*ms); ev != Acked || r.InFlight() != 0 {
		t.Errorf("final ACK: event %v, %d in flight", ev, r.InFlight())
	}
}

// TestAcksOutsideTheWindow: an ACK for a packet already acknowledged or
// never sent changes nothing and is counted.
func TestAcksOutsideTheWindow(t *testing.T) {
	r := newTest(t, 10)
	r.FetchAdd(0, 7, 1, 0)
	r.FetchAdd(8, 7, 1, 0)
	if ev := r.HandleAck(10, rocev2.SyndromeACK, ms); ev != Acked {
		t.Fatalf("event %v", ev)
	}
	if ev := r.HandleAck(9, rocev2.SyndromeACK, ms); ev != 0 {
		t.Errorf("stale ACK: event %v", ev)
	}
	if ev := r.HandleAck(12, rocev2.SyndromeACK, ms); ev != 0 {
		t.Errorf("ACK of a packet never sent: event %v", ev)
	}
	if c := r.Counters(); c.StaleACKs != 1 || c.BadACKs != 1 || r.Una() != 11 {
		t.Errorf("counters %+v, una %d", c, r.Una())
	}
	for _, s := range []rocev2.Syndrome{rocev2.SyndromeNAKRemoteAccessError, rocev2.SyndromeNAKInvalidRequest, rocev2.SyndromeNAKRemoteOperational} {
		if ev := r.HandleAck(11, s, ms); ev != Broken {
			t.Errorf("syndrome %#x: event %v, want Broken", s, ev)
		}
	}
	if ev := r.HandleAck(11, rocev2.SyndromeRNRNAK, ms); ev != 0 || r.Counters().RNRNAKs != 1 {
		t.Errorf("RNR NAK: event %v", ev)
	}
}

// TestTimeouts: without progress the requester resends everything after
// each timeout, doubling it (up to 4 times), learns a round trip longer
// than the floor from a packet sent once, and is dead after MaxRetries
// timeouts spanning DeadAfter.
func TestTimeouts(t *testing.T) {
	r := newTest(t, 0)
	r.FetchAdd(0, 7, 1, 0)
	if ev := r.Tick(9 * ms); ev != 0 {
		t.Fatalf("before the timeout: event %v", ev)
	}
	if ev := r.Tick(10 * ms); ev != GoBack || r.ResendFrom() != 0 || r.RTO() != 20*time.Millisecond {
		t.Fatalf("timeout: event %v, resend from %d, RTO %v", ev, r.ResendFrom(), r.RTO())
	}
	if ev := r.Tick(30 * ms); ev != GoBack || r.RTO() != 40*time.Millisecond {
		t.Fatalf("second timeout: event %v, RTO %v", ev, r.RTO())
	}
	if ev := r.Tick(70 * ms); ev != GoBack || r.RTO() != 40*time.Millisecond {
		t.Fatalf("third timeout: event %v, RTO %v (the doubling stops at 4x)", ev, r.RTO())
	}
	if ev := r.Tick(109 * ms); ev != 0 {
		t.Fatalf("before the fourth timeout: event %v", ev)
	}
	if ev := r.Tick(110 * ms); ev != Dead {
		t.Fatalf("fourth timeout, 4 > MaxRetries and 100 ms stuck: event %v, want Dead", ev)
	}

	// A 30 ms round trip, measured on a packet sent once, raises the RTO
	// above the 10 ms floor: srtt + 4 rttvar = 30 + 4·15.
	r = newTest(t, 0)
	r.FetchAdd(0, 7, 1, 0)
	r.HandleAck(0, rocev2.SyndromeACK, 30*ms)
	if r.RTO() != 90*time.Millisecond {
		t.Errorf("RTO %v after one 30 ms sample, want 90ms", r.RTO())
	}
	// Karn: an ACK after a resend times nothing, and the doubled RTO stays
	// until a packet sent once is timed.
	r.FetchAdd(8, 7, 1, 100*ms)
	r.Tick(190 * ms) // resent
	r.HandleAck(1, rocev2.SyndromeACK, 400*ms)
	if r.RTO() != 180*time.Millisecond {
		t.Errorf("RTO %v after the ACK of a resent packet, want 180ms (doubled, no sample)", r.RTO())
	}
	r.FetchAdd(16, 7, 1, 500*ms)
	r.HandleAck(2, rocev2.SyndromeACK, 530*ms)
	if r.RTO() != 75*time.Millisecond {
		t.Errorf("RTO %v after a second 30 ms sample, want 75ms (30 + 4·11.25)", r.RTO())
	}
}
