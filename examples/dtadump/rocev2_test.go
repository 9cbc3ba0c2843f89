package main

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/dtakit/dtakit/rocev2"
	"github.com/dtakit/dtakit/rocev2/cm"
)

const (
	rocePcapPath   = "testdata/rocev2.pcap"
	roceGoldenPath = "testdata/rocev2.jsonl"
)

// roceSample is one packet of testdata/rocev2.pcap: the layers dtadump must
// print (key -> JSON, written by hand from the values set below), or a
// substring of its error.
type roceSample struct {
	frame   []byte
	want    map[string]string
	wantErr string
}

func roceFrame(t testing.TB, v6 bool, p rocev2.Packet) []byte {
	t.Helper()
	f := rocev2.Frame{
		SrcMAC: [6]byte{0x0c, 0x42, 0xa1, 0, 0, 1}, DstMAC: [6]byte{0xb8, 0xce, 0xf6, 0xd2, 0x12, 0xc7},
		Src: netip.MustParseAddr("10.0.0.200"), Dst: netip.MustParseAddr("10.0.0.51"),
		TTL: 64, DontFragment: true, SrcPort: 0xC001, Packet: p,
	}
	if v6 {
		f.Src, f.Dst = netip.MustParseAddr("fd00::200"), netip.MustParseAddr("fd00::51")
		f.FlowLabel = 0x12345
	}
	b, err := f.AppendTo(nil)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func madFrame(t testing.TB, tid uint64, m cm.Message) []byte {
	t.Helper()
	mad, err := cm.AppendMAD(nil, cm.Header(tid, 0), m)
	if err != nil {
		t.Fatal(err)
	}
	return roceFrame(t, false, cm.Packet(mad, 0x10))
}

// icrcOf returns the ICRC dtadump must print: the frame's last 4 bytes,
// least-significant first.
func icrcOf(b []byte) string { return fmt.Sprintf("%#08x", binary.LittleEndian.Uint32(b[len(b)-4:])) }

func roceSamples(t testing.TB) []roceSample {
	bth := func(op rocev2.Opcode, qp uint32, ack bool, psn uint32) rocev2.BTH {
		return rocev2.BTH{Opcode: op, PKey: 0xFFFF, DestQP: qp, AckReq: ack, PSN: rocev2.PSN(psn)}
	}
	var ss []roceSample
	add := func(frame []byte, want map[string]string) {
		ss = append(ss, roceSample{frame: frame, want: want})
	}

	w := roceFrame(t, false, rocev2.Packet{BTH: bth(rocev2.RCWriteOnly, 0x11, true, 0xFFFFFF),
		RETH: rocev2.RETH{VA: 0x7f0000001000, RKey: 0xabcd, DMALength: 8}, Payload: []byte{1, 2, 3, 4, 5, 6, 7, 8}})
	add(w, map[string]string{
		"bth":  `{"opcode":"RC RDMA WRITE Only","opcode_value":10,"solicited":false,"mig_req":false,"pad_count":0,"version":0,"pkey":"0xffff","fecn":false,"becn":false,"dest_qp":"0x11","ack_req":true,"psn":16777215,"icrc":"` + icrcOf(w) + `","payload":"0102030405060708","icrc_valid":true}`,
		"reth": `{"va":"0x7f0000001000","rkey":"0xabcd","dma_length":8}`,
	})
	bad := bytes.Clone(w)
	bad[len(bad)-1] ^= 0xFF
	add(bad, map[string]string{"reth": `{"va":"0x7f0000001000","rkey":"0xabcd","dma_length":8}`, "bth.icrc_valid": `false`})

	wi := roceFrame(t, true, rocev2.Packet{BTH: bth(rocev2.RCWriteOnlyImm, 0x22, true, 5),
		RETH: rocev2.RETH{VA: 0x2000, RKey: 7, DMALength: 3}, ImmDt: rocev2.ImmDt{Data: 0xdeadbeef}, Payload: []byte{9, 9, 9}})
	add(wi, map[string]string{
		"ipv6":           `{"src":"fd00::200","dst":"fd00::51","hop_limit":64,"traffic_class":0,"flow_label":74565,"length":48}`,
		"immdt":          `{"data":"0xdeadbeef"}`,
		"bth.pad_count":  `1`,
		"bth.payload":    `"090909"`,
		"bth.icrc_valid": `true`,
	})
	add(roceFrame(t, false, rocev2.Packet{BTH: bth(rocev2.RCFetchAdd, 0x33, true, 9),
		AtomicETH: rocev2.AtomicETH{VA: 0x3000, RKey: 0x99, SwapAddData: 5}}), map[string]string{
		"atomic_eth":     `{"va":"0x3000","rkey":"0x99","swap_add":5,"compare":0}`,
		"bth.icrc_valid": `true`,
	})
	add(roceFrame(t, false, rocev2.Packet{BTH: bth(rocev2.RCAcknowledge, 0x44, false, 9),
		AETH: rocev2.AETH{Syndrome: rocev2.SyndromeNAKPSNSequenceError, MSN: 3}}), map[string]string{
		"aeth": `{"syndrome":"0x60","kind":"nak","value":0,"msn":3}`,
	})
	add(roceFrame(t, false, rocev2.Packet{BTH: bth(rocev2.RCAtomicAcknowledge, 0x44, false, 10),
		AETH: rocev2.AETH{Syndrome: rocev2.SyndromeACK, MSN: 4}, AtomicAckETH: rocev2.AtomicAckETH{OrigRemoteData: 41}}), map[string]string{
		"aeth":           `{"syndrome":"0x1f","kind":"ack","value":31,"msn":4}`,
		"atomic_ack_eth": `{"orig_remote_data":41}`,
	})
	add(roceFrame(t, false, rocev2.Packet{BTH: bth(rocev2.RCSendOnlyInvalidate, 0x55, true, 1),
		IETH: rocev2.IETH{RKey: 0x1234}, Payload: []byte{0xaa, 0xbb, 0xcc, 0xdd}}), map[string]string{
		"ieth":        `{"rkey":"0x1234"}`,
		"bth.payload": `"aabbccdd"`,
	})

	// The RDMA CM exchange of one connection, then its teardown.
	src, dst := netip.MustParseAddr("10.0.0.200"), netip.MustParseAddr("10.0.0.51")
	req := &cm.ConnectRequest{LocalCommID: 0x1001, ServiceID: cm.ServiceID(4791), LocalCAGUID: 0x0c42a1fffe000001,
		LocalQPN: 0x101, ResponderResources: 16, InitiatorDepth: 16, StartingPSN: 0x500, RetryCount: 7,
		PKey: 0xFFFF, PathMTU: cm.MTU1024, RNRRetryCount: 7, MaxCMRetries: 15,
		Primary: cm.Path{RemoteLID: 0xFFFF, LocalGID: cm.GID(src), RemoteGID: cm.GID(dst), HopLimit: 64, LocalACKTimeout: 18}}
	if err := req.SetIPPrivateData(cm.IPHeader{SrcPort: 0xC001, Src: src, Dst: dst}, []byte("hi")); err != nil {
		t.Fatal(err)
	}
	reqFrame := madFrame(t, 0x77, req)
	add(reqFrame, map[string]string{
		"deth": `{"qkey":"0x80010000","src_qp":"0x1"}`,
		"cm": `{"attribute":"ConnectRequest","transaction_id":"0x77","status":0,"attribute_modifier":"0x0",` +
			`"local_comm_id":"0x1001","service_id":"0x10612b7","local_ca_guid":"0xc42a1fffe000001","local_qkey":"0x0",` +
			`"local_qpn":"0x101","responder_resources":16,"initiator_depth":16,"transport_type":0,"starting_psn":1280,` +
			`"pkey":"0xffff","path_mtu":3,"retry_count":7,"rnr_retry_count":7,"max_cm_retries":15,` +
			`"primary_path":{"local_gid":"10.0.0.200","remote_gid":"10.0.0.51","remote_lid":"0xffff","hop_limit":64,"traffic_class":0,"flow_label":0,"sl":0,"local_ack_timeout":18},` +
			`"ip_cm":{"src":"10.0.0.200","src_port":49153,"dst":"10.0.0.51"},"private_data":"6869"}`,
		"bth.dest_qp":    `"0x1"`,
		"bth.icrc_valid": `true`,
	})
	add(madFrame(t, 0x77, &cm.ConnectReply{LocalCommID: 0x2002, RemoteCommID: 0x1001, LocalQPN: 0x202, StartingPSN: 0x600,
		ResponderResources: 16, InitiatorDepth: 16, RNRRetryCount: 7, LocalCAGUID: 0xb8cef6fffed212c7}), map[string]string{
		"cm": `{"attribute":"ConnectReply","transaction_id":"0x77","status":0,"attribute_modifier":"0x0",` +
			`"local_comm_id":"0x2002","remote_comm_id":"0x1001","local_qkey":"0x0","local_qpn":"0x202","starting_psn":1536,` +
			`"responder_resources":16,"initiator_depth":16,"target_ack_delay":0,"rnr_retry_count":7,"srq":false,` +
			`"local_ca_guid":"0xb8cef6fffed212c7","private_data":""}`,
	})
	add(madFrame(t, 0x77, &cm.ReadyToUse{LocalCommID: 0x1001, RemoteCommID: 0x2002}), map[string]string{
		"cm": `{"attribute":"ReadyToUse","transaction_id":"0x77","status":0,"attribute_modifier":"0x0","local_comm_id":"0x1001","remote_comm_id":"0x2002","private_data":""}`,
	})
	add(madFrame(t, 0x78, &cm.Reject{LocalCommID: 0x2003, RemoteCommID: 0x1002, Reason: cm.RejectInvalidServiceID}), map[string]string{
		"cm": `{"attribute":"Reject","transaction_id":"0x78","status":0,"attribute_modifier":"0x0","local_comm_id":"0x2003","remote_comm_id":"0x1002","message_rejected":0,"reason":8,"ari":"","private_data":""}`,
	})
	add(madFrame(t, 0x79, &cm.DisconnectRequest{LocalCommID: 0x1001, RemoteCommID: 0x2002, RemoteQPN: 0x202}), map[string]string{
		"cm": `{"attribute":"DisconnectRequest","transaction_id":"0x79","status":0,"attribute_modifier":"0x0","local_comm_id":"0x1001","remote_comm_id":"0x2002","remote_qpn":"0x202","private_data":""}`,
	})
	add(madFrame(t, 0x79, &cm.DisconnectReply{LocalCommID: 0x2002, RemoteCommID: 0x1001}), map[string]string{
		"cm": `{"attribute":"DisconnectReply","transaction_id":"0x79","status":0,"attribute_modifier":"0x0","local_comm_id":"0x2002","remote_comm_id":"0x1001","private_data":""}`,
	})

	// Packets that do not decode.
	reserved := bytes.Clone(w)
	reserved[14+20+8] = 0x15
	// A MAD of another management class on QP 1.
	mad, err := cm.AppendMAD(nil, cm.Header(1, 0), &cm.ReadyToUse{})
	if err != nil {
		t.Fatal(err)
	}
	mad[1] = 0x01
	ss = append(ss,
		roceSample{frame: reserved, wantErr: "reserved opcode"},
		roceSample{frame: udpFrame(t, 0xC001, rocev2.UDPPort, []byte{0x0a, 0, 0xff, 0xff, 0}), wantErr: "truncated"},
		roceSample{frame: udpFrame(t, 0xC001, rocev2.UDPPort, nil), wantErr: "decode bth: rocev2: truncated"},
		roceSample{frame: roceFrame(t, false, cm.Packet(mad, 0)), wantErr: "cm: not a CM MAD"},
	)
	return ss
}

func writeRoCECapture(t *testing.T, ss []roceSample) []byte {
	t.Helper()
	plain := make([]sample, len(ss))
	for i, s := range ss {
		plain[i] = sample{frame: s.frame}
	}
	return writeCapture(t, plain)
}

// TestRoCEv2Pcap checks dtadump's output on RoCEv2 and CM packets against
// the hand-written expectations and the golden file, and that the shipped
// capture is what the generator produces (-update rewrites both).
func TestRoCEv2Pcap(t *testing.T) {
	ss := roceSamples(t)
	capture := writeRoCECapture(t, ss)
	var out bytes.Buffer
	if err := dump(bytes.NewReader(capture), &out); err != nil {
		t.Fatalf("dump: %v", err)
	}
	if *update {
		if err := os.WriteFile(rocePcapPath, capture, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(roceGoldenPath, out.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	if len(lines) != len(ss) {
		t.Fatalf("%d lines for %d packets:\n%s", len(lines), len(ss), out.String())
	}
	for i, s := range ss {
		var got map[string]any
		if err := json.Unmarshal([]byte(lines[i]), &got); err != nil {
			t.Fatalf("line %d: %v", i+1, err)
		}
		errMsg, hasErr := got["error"].(string)
		if s.wantErr != "" {
			if !hasErr || !strings.Contains(errMsg, s.wantErr) {
				t.Errorf("line %d: error %q, want it to contain %q\n%s", i+1, errMsg, s.wantErr, lines[i])
			}
			continue
		}
		if hasErr {
			t.Errorf("line %d: unexpected error %q", i+1, errMsg)
			continue
		}
		for key, wantJSON := range s.want {
			var want any
			if err := json.Unmarshal([]byte(wantJSON), &want); err != nil {
				t.Fatalf("sample %d %s: bad expectation: %v", i+1, key, err)
			}
			var g any = got
			for _, k := range strings.Split(key, ".") {
				m, _ := g.(map[string]any)
				g = m[k]
			}
			if !reflect.DeepEqual(g, want) {
				t.Errorf("line %d: %s =\n %v\nwant\n %v", i+1, key, g, want)
			}
		}
	}
	shipped, err := os.ReadFile(rocePcapPath)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(shipped, capture) {
		t.Errorf("%s differs from the generator's output; run go generate ./examples/dtadump", rocePcapPath)
	}
	golden, err := os.ReadFile(roceGoldenPath)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(out.Bytes(), golden) {
		t.Errorf("output differs from %s:\n%s", roceGoldenPath, out.Bytes())
	}
}
