package dta

import (
	"bytes"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/gopacket/gopacket/pcapgo"
)

// needTool returns the path of an external tool, skipping the test when it
// is missing unless DTAKIT_REQUIRE_TOOLS=1 (CI), where it fails instead.
func needTool(t *testing.T, name string) string {
	t.Helper()
	path, err := exec.LookPath(name)
	if err != nil {
		if os.Getenv("DTAKIT_REQUIRE_TOOLS") == "1" {
			t.Fatalf("%s not found and DTAKIT_REQUIRE_TOOLS=1: %v", name, err)
		}
		t.Skipf("%s not installed; skipping the cross-check (set DTAKIT_REQUIRE_TOOLS=1 to fail instead)", name)
	}
	return path
}

// TestFramesWithTshark has Wireshark's dissector check the frames
// FrameBuilder writes: IPv4 and UDP checksums good, UDP length right, and
// the UDP payload exactly the report's encoding.
func TestFramesWithTshark(t *testing.T) {
	tshark := needTool(t, "tshark")
	var capture bytes.Buffer
	w := pcapgo.NewWriter(&capture)
	if err := w.WriteFileHeader(65536, layers.LinkTypeEthernet); err != nil {
		t.Fatal(err)
	}
	var payloads [][]byte
	for i, r := range testReports {
		frame, err := testBuilder.AppendFrame(nil, &r)
		if err != nil {
			t.Fatal(err)
		}
		ci := gopacket.CaptureInfo{Timestamp: time.Unix(int64(i), 0), CaptureLength: len(frame), Length: len(frame)}
		if err := w.WritePacket(ci, frame); err != nil {
			t.Fatal(err)
		}
		payloads = append(payloads, r.AppendTo(nil))
	}
	path := filepath.Join(t.TempDir(), "frames.pcap")
	if err := os.WriteFile(path, capture.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(tshark, "-r", path,
		"-o", "ip.check_checksum:TRUE", "-o", "udp.check_checksum:TRUE",
		"-T", "fields", "-e", "ip.checksum.status", "-e", "udp.checksum.status",
		"-e", "ip.len", "-e", "udp.length", "-e", "udp.dstport", "-e", "udp.payload")
	cmd.Dir = t.TempDir() // tshark may write its profile files here
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("tshark: %v\n%s", err, stderr.String())
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) != len(payloads) {
		t.Fatalf("tshark printed %d lines for %d frames:\n%s", len(lines), len(payloads), out)
	}
	for i, line := range lines {
		f := strings.Split(line, "\t")
		if len(f) != 6 {
			t.Fatalf("frame %d: tshark fields %q", i+1, line)
		}
		// checksum status 1 is "Good"
		if f[0] != "1" || f[1] != "1" {
			t.Errorf("frame %d: IPv4 checksum status %s, UDP %s, want 1 (good)", i+1, f[0], f[1])
		}
		ipLen, _ := strconv.Atoi(f[2])
		udpLen, _ := strconv.Atoi(f[3])
		if udpLen != UDPLen+len(payloads[i]) || ipLen != IPv4Len+udpLen {
			t.Errorf("frame %d: ip.len %d, udp.length %d, for a %d-byte report", i+1, ipLen, udpLen, len(payloads[i]))
		}
		if f[4] != strconv.Itoa(ReportPort) {
			t.Errorf("frame %d: destination port %s", i+1, f[4])
		}
		payload, err := hex.DecodeString(strings.ReplaceAll(f[5], ":", ""))
		if err != nil || !bytes.Equal(payload, payloads[i]) {
			t.Errorf("frame %d: tshark payload %s, want % x", i+1, f[5], payloads[i])
		}
	}
}
