package main

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dtakit/dtakit/internal/test/proctest"
	"github.com/dtakit/dtakit/keywrite"
	"github.com/dtakit/dtakit/p4"
	"github.com/dtakit/dtakit/rocev2"
)

// switchConfig writes a dtaswitchcp configuration for one collector.
func switchConfig(t *testing.T, program string, local, collector netip.AddrPort, cmPort int, out string) string {
	t.Helper()
	cfg := fmt.Sprintf(`{"program": %q, "local": %q, "mac": "02:00:00:00:00:01",
		"collectors": [{"addr": %q, "mac": "02:00:00:00:00:02", "port": 8}],
		"cm_port": %d, "cpu_port": 64, "multicast_base": 100, "report_ports": [0, 4], "out": %q, "timeout": "30s"}`,
		program, local, collector, cmPort, out)
	path := filepath.Join(t.TempDir(), "switch.json")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func wait(t *testing.T, p *proctest.Proc, d time.Duration) int {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- p.Cmd.Wait() }()
	select {
	case <-done:
		return p.Cmd.ProcessState.ExitCode()
	case <-time.After(d):
		t.Fatalf("still running after %v\n%s", d, p.Logs())
		return -1
	}
}

func readPlan(t *testing.T, dir string) p4.Plan {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "plan.json"))
	if err != nil {
		t.Fatal(err)
	}
	var plan p4.Plan
	if err := json.Unmarshal(b, &plan); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "plan.py")); err != nil {
		t.Fatal(err)
	}
	return plan
}

func field(e p4.Entry, name string) uint64 {
	for _, f := range e.Data {
		if f.Name == name {
			return f.Value
		}
	}
	return 1<<64 - 1
}

// TestAgainstCollector runs dtaswitchcp before a dtacollector process (it
// keeps asking, then connects), with the four primitives on the collector:
// the translator build connects Key-Write, Key-Increment and Append and
// skips Postcarding, the postcard build the reverse. A Key-Write WRITE
// built from the plan's entries alone, sent from the switch's address,
// lands in the collector's region.
func TestAgainstCollector(t *testing.T) {
	bin := proctest.Build(t, ".", "dtaswitchcp")
	colBin := proctest.Build(t, "../dtacollector", "dtacollector")
	roce := netip.MustParseAddrPort(fmt.Sprintf("127.0.0.1:%d", proctest.FreePort(t, "udp")))
	local := netip.MustParseAddrPort(fmt.Sprintf("127.0.0.1:%d", proctest.FreePort(t, "udp")))
	web := fmt.Sprintf("127.0.0.1:%d", proctest.FreePort(t, "tcp"))
	cmPort := 43000 + os.Getpid()%1000
	out := t.TempDir()

	sw := proctest.Start(t, bin, "-once", "-log-level", "debug", "-config", switchConfig(t, "translator", local, roce, cmPort, out))
	time.Sleep(500 * time.Millisecond) // the switch asks before the collector is up
	colCfg := filepath.Join(t.TempDir(), "c.json")
	os.WriteFile(colCfg, []byte(fmt.Sprintf(`{"addr": %q, "http": %q, "cm_port": %d, "instances": [
		{"primitive": "keywrite", "slots": 4096, "data_size": 4},
		{"primitive": "postcard", "hops": 5, "chunks": 1024, "copies": 2, "values": [1, 2, 3]},
		{"primitive": "keyincrement", "slots": 1024},
		{"primitive": "append", "lists": 1024, "entries": 4096, "entry_size": 4, "batch": 4}]}`, roce, web, cmPort)), 0o600)
	col := proctest.Start(t, colBin, "-config", colCfg)
	if code := wait(t, sw, 30*time.Second); code != 0 {
		t.Fatalf("dtaswitchcp exited %d\n%s\n%s", code, sw.Logs(), col.Logs())
	}
	if !strings.Contains(sw.Logs(), "no answer yet") {
		t.Errorf("dtaswitchcp never asked again before the collector was up:\n%s", sw.Logs())
	}
	plan := readPlan(t, out)
	var qps []p4.Entry
	reportPorts := 0
	for _, e := range plan.Entries {
		if e.Table == "Egress.qp" {
			qps = append(qps, e)
		}
		if e.Table == "Ingress.report_ports" {
			reportPorts++
		}
	}
	if reportPorts != 2 {
		t.Errorf("%d report port entries, want 2 (report_ports)", reportPorts)
	}
	if len(qps) != 3 || !strings.Contains(sw.Logs(), `"why":"postcard is not compiled into translator.p4"`) {
		t.Fatalf("%d queue pairs planned, want 3 (Postcarding skipped)\n%s", len(qps), sw.Logs())
	}

	// A Key-Write from the switch's address with the plan's values.
	kw := qps[0]
	l := keywrite.Layout{Slots: 4096, DataSize: 4}
	key, data := uint32(77), []byte{1, 2, 3, 4}
	var psn uint64
	for _, r := range plan.Registers {
		if r.Register == "Egress.psn" && r.Index == 0 {
			psn = r.Value
		}
	}
	va := field(kw, "va_hi")<<32 | field(kw, "va_lo")
	pkt := rocev2.Packet{
		BTH:     rocev2.BTH{Opcode: rocev2.RCWriteOnly, PKey: rocev2.DefaultPKey, DestQP: uint32(field(kw, "dst_qp")), PSN: rocev2.PSN(psn), AckReq: true},
		RETH:    rocev2.RETH{VA: va + l.Offset(key, 0), RKey: uint32(field(kw, "rkey")), DMALength: 8},
		Payload: append(binary.LittleEndian.AppendUint32(nil, l.Checksum(key)), data...),
	}
	b, err := pkt.AppendDatagram(nil, local, roce)
	if err != nil {
		t.Fatal(err)
	}
	uc, err := net.ListenUDP("udp4", net.UDPAddrFromAddrPort(local))
	if err != nil {
		t.Fatal(err)
	}
	defer uc.Close()
	var res struct{ Status, Data string }
	proctest.WaitFor(t, "the crafted write readable", 10*time.Second, func() bool {
		uc.WriteToUDPAddrPort(b, roce)
		time.Sleep(50 * time.Millisecond)
		resp, err := http.Get(fmt.Sprintf("http://%s/v1/instances/0/keywrite?key=%d&n=1", web, key))
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		json.NewDecoder(resp.Body).Decode(&res)
		return res.Status == "found" && res.Data == hex.EncodeToString(data)
	}, col)
	uc.Close()

	postcardDaemon(t, bin, col, local, roce, cmPort)
	tofino2Plan(t, bin, local, roce, cmPort)
}

// postcardDaemon runs the postcard build as a daemon against the collector
// at roce: it writes the plan, keeps serving, and exits 0 on SIGTERM.
func postcardDaemon(t *testing.T, bin string, col *proctest.Proc, local, roce netip.AddrPort, cmPort int) {
	out2 := t.TempDir()
	sw2 := proctest.Start(t, bin, "-config", switchConfig(t, "postcard", local, roce, cmPort, out2))
	proctest.WaitFor(t, "the postcard plan", 30*time.Second, func() bool {
		_, err := os.Stat(filepath.Join(out2, "plan.json"))
		return err == nil
	}, sw2, col)
	plan := readPlan(t, out2)
	var qps []p4.Entry
	for _, e := range plan.Entries {
		if e.Table == "Egress.qp" {
			qps = append(qps, e)
		}
	}
	if len(qps) != 1 || field(qps[0], "chunk_mask") != 1023*32 || len(plan.Groups) != 2 {
		t.Fatalf("postcard plan: %d queue pairs %+v, %d groups", len(qps), qps, len(plan.Groups))
	}
	sw2.Cmd.Process.Signal(syscall.SIGTERM)
	if code := wait(t, sw2, 10*time.Second); code != 0 {
		t.Fatalf("exit %d after SIGTERM\n%s", code, sw2.Logs())
	}
}

// tofino2Plan runs the Tofino-2 program's control plane once against the
// collector at roce: all four instances connected in one plan.
func tofino2Plan(t *testing.T, bin string, local, roce netip.AddrPort, cmPort int) {
	out3 := t.TempDir()
	sw3 := proctest.Start(t, bin, "-once", "-config", switchConfig(t, "translator_t2", local, roce, cmPort, out3))
	if code := wait(t, sw3, 30*time.Second); code != 0 {
		t.Fatalf("dtaswitchcp (translator_t2) exited %d\n%s", code, sw3.Logs())
	}
	plan := readPlan(t, out3)
	masks := map[uint64]int{}
	for _, e := range plan.Entries {
		if e.Table == "Egress.qp" {
			masks[field(e, "slot_mask")]++
		}
	}
	// Key-Write 4095, Postcarding 1023 (C-1), Key-Increment 1023, Append 0.
	if len(masks) != 3 || masks[4095] != 1 || masks[1023] != 2 || masks[0] != 1 {
		t.Fatalf("translator_t2 plan: slot masks %v, want 4095, 1023 twice and 0", masks)
	}
	py, err := os.ReadFile(filepath.Join(out3, "plan.py"))
	if err != nil || !bytes.Contains(py, []byte("\np = bfrt.translator_t2.pipe\n")) || !bytes.Contains(py, []byte("add_with_to_pc_instance")) {
		t.Fatalf("translator_t2 plan.py (%v):\n%.300s", err, py)
	}
}

// TestBadConfig: configuration errors exit 2 and name the problem.
func TestBadConfig(t *testing.T) {
	bin := proctest.Build(t, ".", "dtaswitchcp")
	for name, cfg := range map[string]string{
		"unknown field": `{"program": "translator", "local": "127.0.0.1:4791", "colectors": []}`,
		"program":       `{"program": "tofino2", "local": "127.0.0.1:4791", "collectors": [{"addr": "127.0.0.1:4791"}]}`,
		"local":         `{"local": "[::1]:4791", "collectors": [{"addr": "127.0.0.1:4791"}]}`,
		"no collectors": `{"local": "127.0.0.1:4791"}`,
		"mac":           `{"local": "127.0.0.1:4791", "mac": "zz", "collectors": [{"addr": "127.0.0.1:4791"}]}`,
		"timeout":       `{"local": "127.0.0.1:4791", "timeout": "soon", "collectors": [{"addr": "127.0.0.1:4791"}]}`,
	} {
		path := filepath.Join(t.TempDir(), "c.json")
		os.WriteFile(path, []byte(cfg), 0o600)
		out, err := exec.Command(bin, "-config", path).CombinedOutput()
		if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 2 || !strings.Contains(string(out), "configuration") {
			t.Errorf("%s: %v\n%s", name, err, out)
		}
	}
	// A collector that never answers: exit 1 after the timeout.
	path := filepath.Join(t.TempDir(), "c.json")
	port := proctest.FreePort(t, "udp")
	os.WriteFile(path, []byte(fmt.Sprintf(`{"local": "127.0.0.1:%d", "timeout": "1s", "collectors": [{"addr": "127.0.0.1:%d"}]}`,
		proctest.FreePort(t, "udp"), port)), 0o600)
	out, err := exec.Command(bin, "-once", "-config", path).CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 || !strings.Contains(string(out), "no answer before the timeout") {
		t.Errorf("silent collector: %v\n%s", err, out)
	}
}
