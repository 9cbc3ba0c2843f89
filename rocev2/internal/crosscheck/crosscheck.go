// Package crosscheck runs the external tools (tshark, scapy) that the tests
// of rocev2 and rocev2/cm cross-check their encodings with.
package crosscheck

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/gopacket/gopacket/pcapgo"
)

// LookTool returns the path of an external cross-check tool. When it is
// missing the test is skipped, or fails when DTAKIT_REQUIRE_TOOLS=1 (CI).
func LookTool(t testing.TB, name, pkg string) string {
	t.Helper()
	path, err := exec.LookPath(name)
	if err != nil {
		if os.Getenv("DTAKIT_REQUIRE_TOOLS") == "1" {
			t.Fatalf("%s not found (install Debian package %s): %v", name, pkg, err)
		}
		t.Skipf("skipping cross-check: %s not found (install Debian package %s; DTAKIT_REQUIRE_TOOLS=1 makes this a failure)", name, pkg)
	}
	return path
}

// WritePcap writes frames to a pcap file in a temporary directory.
func WritePcap(t testing.TB, frames [][]byte) string {
	t.Helper()
	name := filepath.Join(t.TempDir(), "frames.pcap")
	fh, err := os.Create(name)
	if err != nil {
		t.Fatal(err)
	}
	defer fh.Close()
	w := pcapgo.NewWriter(fh)
	if err := w.WriteFileHeader(65536, layers.LinkTypeEthernet); err != nil {
		t.Fatal(err)
	}
	for i, b := range frames {
		ci := gopacket.CaptureInfo{Timestamp: time.Unix(int64(i), 0), CaptureLength: len(b), Length: len(b)}
		if err := w.WritePacket(ci, b); err != nil {
			t.Fatal(err)
		}
	}
	if err := fh.Close(); err != nil {
		t.Fatal(err)
	}
	return name
}

// Tshark runs tshark over a pcap and returns, per packet, the named
// protocols' fields flattened to "parent/field" -> value, where parent is the
// subtree holding the field (infiniband.reth_tree, ...).
func Tshark(t testing.TB, pcap string, protos ...string) []map[string]string {
	t.Helper()
	tshark := LookTool(t, "tshark", "tshark")
	args := []string{"-r", pcap, "-T", "json", "-J", strings.Join(protos, " ")}
	// Payloads are random: keep the heuristic dissectors of RDMA upper
	// protocols from claiming them.
	for _, h := range []string{"smc", "smb_direct", "rpcordma", "nvme-rdma", "lnet", "iser",
		"infiniband.eoib", "infiniband_sdp", "fcoib", "drbd"} {
		args = append(args, "--disable-protocol", h)
	}
	cmd := exec.Command(tshark, args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("tshark %v: %v\n%s", args, err, stderr.String())
	}
	var pkts []struct {
		Source struct {
			Layers map[string]any `json:"layers"`
		} `json:"_source"`
	}
	if err := json.Unmarshal(out, &pkts); err != nil {
		t.Fatalf("tshark output: %v", err)
	}
	res := make([]map[string]string, len(pkts))
	for i, p := range pkts {
		m := map[string]string{}
		var walk func(parent string, v any)
		walk = func(parent string, v any) {
			switch v := v.(type) {
			case map[string]any:
				for k, c := range v {
					if s, ok := c.(string); ok {
						m[parent+"/"+k] = s
					} else {
						walk(k, c)
					}
				}
			}
		}
		for _, proto := range protos {
			if l, ok := p.Source.Layers[proto]; ok {
				walk(proto, l)
			}
		}
		res[i] = m
	}
	return res
}
