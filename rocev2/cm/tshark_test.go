package cm

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"strconv"
	"strings"
	"testing"

	"github.com/dtakit/dtakit/rocev2"
	"github.com/dtakit/dtakit/rocev2/internal/crosscheck"
)

// TestTsharkDissectsCM builds CM MADs in QP 1 frames and checks that
// Wireshark's InfiniBand dissector reads back every field we set.
func TestTsharkDissectsCM(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 5))
	var frames [][]byte
	var msgs []Message
	var tids []uint64
	for range 4 {
		for _, m := range randomMessages(r) {
			if req, ok := m.(*ConnectRequest); ok {
				// librdmacm's conventions, so tshark decodes the IP CM header.
				req.ServiceID = ServiceID(uint16(r.Uint32()))
				src := netip.AddrFrom4([4]byte{10, 0, byte(r.Uint32()), 1})
				dst := netip.AddrFrom4([4]byte{10, 1, byte(r.Uint32()), 2})
				req.Primary.LocalGID, req.Primary.RemoteGID = GID(src), GID(dst)
				if err := req.SetIPPrivateData(IPHeader{SrcPort: uint16(r.Uint32()), Src: src, Dst: dst}, []byte("dtakit")); err != nil {
					t.Fatal(err)
				}
			}
			tid := r.Uint64()
			mad, err := AppendMAD(nil, Header(tid, 0), m)
			if err != nil {
				t.Fatal(err)
			}
			f := rocev2.Frame{
				Src: netip.MustParseAddr("10.0.0.1"), Dst: netip.MustParseAddr("10.0.0.2"),
				TTL: 64, SrcPort: 0xC000 | uint16(r.IntN(0x4000)), Packet: Packet(mad, rocev2.PSN(r.Uint32()&rocev2.PSNMask)),
			}
			b, err := f.AppendTo(nil)
			if err != nil {
				t.Fatal(err)
			}
			frames = append(frames, b)
			msgs = append(msgs, m)
			tids = append(tids, tid)
		}
	}
	got := crosscheck.Tshark(t, crosscheck.WritePcap(t, frames), "infiniband")
	if len(got) != len(frames) {
		t.Fatalf("tshark dissected %d packets, want %d", len(got), len(frames))
	}
	hx := func(v uint64, digits int) string { return fmt.Sprintf("0x%0*x", digits, v) }
	for i, m := range msgs {
		fields := got[i]
		check := func(key, want string) {
			t.Helper()
			// The CM fields sit in the MAD data subtree; search any parent.
			for k, v := range fields {
				if strings.HasSuffix(k, "/"+key) {
					if v != want {
						t.Errorf("packet %d (%v): %s = %q, want %q", i, m.AttrID(), key, v, want)
					}
					return
				}
			}
			t.Errorf("packet %d (%v): tshark shows no %s", i, m.AttrID(), key)
		}
		check("infiniband.bth.opcode", "100")
		check("infiniband.bth.destqp", "0x000001")
		check("infiniband.deth.q_key", "0x0000000080010000")
		check("infiniband.deth.srcqp", "0x00000001")
		check("infiniband.mad.baseversion", "0x01")
		check("infiniband.mad.mgmtclass", "0x07")
		check("infiniband.mad.classversion", "0x02")
		check("infiniband.mad.method", "0x03")
		check("infiniband.mad.transactionid", hx(tids[i], 16))
		check("infiniband.mad.attributeid", hx(uint64(m.AttrID()), 4))
		switch m := m.(type) {
		case *ConnectRequest:
			const p = "infiniband.cm.req."
			check("infiniband.cm.req", hx(uint64(m.LocalCommID), 8))
			check(p+"serviceid", hx(m.ServiceID, 16))
			check(p+"localcaguid", hx(m.LocalCAGUID, 16))
			check(p+"localqkey", hx(uint64(m.LocalQKey), 8))
			check(p+"localqpn", hx(uint64(m.LocalQPN), 6))
			check(p+"responderres", hx(uint64(m.ResponderResources), 2))
			check(p+"localeecn", hx(uint64(m.LocalEECN), 6))
			check(p+"initdepth", hx(uint64(m.InitiatorDepth), 2))
			check(p+"remoteeecn", hx(uint64(m.RemoteEECN), 6))
			check(p+"remoteresptout", hx(uint64(m.RemoteCMResponseTimeout), 2))
			check(p+"transpsvctype", hx(uint64(m.TransportType), 2))
			check(p+"e2eflowctrl", hx(b2u(m.EndToEndFlowControl), 2))
			check(p+"startpsn", hx(uint64(m.StartingPSN), 6))
			check(p+"localresptout", hx(uint64(m.LocalCMResponseTimeout), 2))
			check(p+"retrcount", hx(uint64(m.RetryCount), 2))
			check(p+"pkey", hx(uint64(m.PKey), 4))
			check(p+"pppmtu", hx(uint64(m.PathMTU), 2))
			check(p+"rdcexist", hx(b2u(m.RDCExists), 2))
			check(p+"rnrretrcount", hx(uint64(m.RNRRetryCount), 2))
			check(p+"maxcmretr", hx(uint64(m.MaxCMRetries), 2))
			check(p+"srq", hx(b2u(m.SRQ), 2))
			check(p+"ext_transport", hx(uint64(m.ExtendedTransportType), 2))
			check(p+"prim_locallid", strconv.Itoa(int(m.Primary.LocalLID)))
			check(p+"prim_remotelid", strconv.Itoa(int(m.Primary.RemoteLID)))
			check(p+"prim_localgid_ipv4", netip.AddrFrom16(m.Primary.LocalGID).Unmap().String())
			check(p+"prim_remotegid_ipv4", netip.AddrFrom16(m.Primary.RemoteGID).Unmap().String())
			// Not compared: flow label and packet rate. Wireshark 4.0 reads them
			// 8 bits off the offsets Linux (ibta_vol1_c12.h: flow label the top
			// 20 bits of the word at 88, packet rate the low 6 bits of byte 91)
			// and this package use; TestLayout pins them instead.
			check(p+"prim_tfcclass", hx(uint64(m.Primary.TrafficClass), 2))
			check(p+"prim_hoplim", hx(uint64(m.Primary.HopLimit), 2))
			check(p+"prim_sl", hx(uint64(m.Primary.SL), 2))
			check(p+"prim_subnetlocal", hx(b2u(m.Primary.SubnetLocal), 2))
			check(p+"prim_localacktout", hx(uint64(m.Primary.LocalACKTimeout), 2))
			check(p+"alt_locallid", strconv.Itoa(int(m.Alternate.LocalLID)))
			check(p+"alt_remotelid", strconv.Itoa(int(m.Alternate.RemoteLID)))
			check(p+"alt_tfcclass", hx(uint64(m.Alternate.TrafficClass), 2))
			check(p+"alt_hoplim", hx(uint64(m.Alternate.HopLimit), 2))
			check(p+"alt_sl", hx(uint64(m.Alternate.SL), 2))
			check(p+"alt_localacktout", hx(uint64(m.Alternate.LocalACKTimeout), 2))
			h, err := DecodeIPHeader(m.PrivateData[:])
			if err != nil {
				t.Fatal(err)
			}
			check(p+"ip_cm.ipv", "0x04")
			check(p+"ip_cm.sport", hx(uint64(h.SrcPort), 4))
			check(p+"ip_cm.sip4", h.Src.String())
			check(p+"ip_cm.dip4", h.Dst.String())
		case *ConnectReply:
			const p = "infiniband.cm.rep."
			check(p+"remotecommid", hx(uint64(m.RemoteCommID), 8))
			check(p+"localqkey", hx(uint64(m.LocalQKey), 8))
			check(p+"localqpn", hx(uint64(m.LocalQPN), 6))
			check(p+"localeecn", hx(uint64(m.LocalEECN), 6))
			check(p+"startpsn", hx(uint64(m.StartingPSN), 6))
			check(p+"respres", hx(uint64(m.ResponderResources), 2))
			check(p+"initdepth", hx(uint64(m.InitiatorDepth), 2))
			check(p+"tgtackdelay", hx(uint64(m.TargetACKDelay), 2))
			check(p+"failoveracc", hx(uint64(m.FailoverAccepted), 2))
			check(p+"e2eflowctrl", hx(b2u(m.EndToEndFlowControl), 2))
			check(p+"rnrretrcount", hx(uint64(m.RNRRetryCount), 2))
			check(p+"srq", hx(b2u(m.SRQ), 2))
			check(p+"localcaguid", hx(m.LocalCAGUID, 16))
		case *ReadyToUse:
			check("infiniband.cm.rtu.localcommid", hx(uint64(m.LocalCommID), 8))
			check("infiniband.cm.rtu.remotecommid", hx(uint64(m.RemoteCommID), 8))
		case *Reject:
			check("infiniband.cm.rej.localcommid", hx(uint64(m.LocalCommID), 8))
			check("infiniband.cm.rej.remotecommid", hx(uint64(m.RemoteCommID), 8))
			check("infiniband.cm.rej.msgrej", hx(uint64(m.MessageRejected), 2))
			check("infiniband.cm.rej.rejinfolen", hx(uint64(m.InfoLength), 2))
			check("infiniband.cm.rej.reason", hx(uint64(m.Reason), 4))
		case *DisconnectRequest:
			check("infiniband.cm.dreq.localcommid", hx(uint64(m.LocalCommID), 8))
			check("infiniband.cm.dreq.remotecommid", hx(uint64(m.RemoteCommID), 8))
			check("infiniband.cm.req.remoteqpneecn", hx(uint64(m.RemoteQPN), 6))
		case *DisconnectReply:
			check("infiniband.cm.drsp.localcommid", hx(uint64(m.LocalCommID), 8))
			check("infiniband.cm.drsp.remotecommid", hx(uint64(m.RemoteCommID), 8))
		}
	}
}

func b2u(v bool) uint64 {
	if v {
		return 1
	}
	return 0
}
