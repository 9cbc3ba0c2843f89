package intbridge

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/gopacket/gopacket/pcapgo"
)

// frame is an Ethernet/IPv4/UDP frame to port carrying payload.
func frame(t testing.TB, port uint16, payload []byte) []byte {
	eth := &layers.Ethernet{SrcMAC: make([]byte, 6), DstMAC: make([]byte, 6), EthernetType: layers.EthernetTypeIPv4}
	ip := ipv4(64, layers.IPProtocolUDP)
	u := &layers.UDP{SrcPort: 7000, DstPort: layers.UDPPort(port)}
	u.SetNetworkLayerForChecksum(ip)
	buf := gopacket.NewSerializeBuffer()
	if err := gopacket.SerializeLayers(buf, gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true}, eth, ip, u, gopacket.Payload(payload)); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestReplay(t *testing.T) {
	payloads := [][]byte{[]byte("first report"), []byte("second")}
	frames := [][]byte{frame(t, 32766, payloads[0]), frame(t, 53, []byte("dns")), frame(t, 32766, payloads[1]), {1, 2, 3}}
	t0 := time.Unix(1700000000, 5000)
	for _, ng := range []bool{false, true} {
		var buf bytes.Buffer
		var write func([]byte, time.Time) error
		flush := func() error { return nil }
		if ng {
			w, err := pcapgo.NewNgWriter(&buf, layers.LinkTypeEthernet)
			if err != nil {
				t.Fatal(err)
			}
			write = func(b []byte, ts time.Time) error {
				return w.WritePacket(gopacket.CaptureInfo{Timestamp: ts, CaptureLength: len(b), Length: len(b)}, b)
			}
			flush = w.Flush
		} else {
			w := pcapgo.NewWriterNanos(&buf)
			w.WriteFileHeader(65535, layers.LinkTypeEthernet)
			write = func(b []byte, ts time.Time) error {
				return w.WritePacket(gopacket.CaptureInfo{Timestamp: ts, CaptureLength: len(b), Length: len(b)}, b)
			}
		}
		for i, f := range frames {
			if err := write(f, t0.Add(time.Duration(i)*time.Millisecond)); err != nil {
				t.Fatal(err)
			}
		}
		if err := flush(); err != nil {
			t.Fatal(err)
		}
		data := buf.Bytes()
		var got [][]byte
		var times []time.Time
		st, err := Replay(bytes.NewReader(data), 32766, func(p []byte, ts time.Time) error {
			got = append(got, append([]byte(nil), p...))
			times = append(times, ts)
			return nil
		})
		if err != nil {
			t.Fatalf("pcapng %v: %v", ng, err)
		}
		if st != (ReplayStats{Packets: 4, Reports: 2, Skipped: 2}) || len(got) != 2 || !bytes.Equal(got[0], payloads[0]) || !bytes.Equal(got[1], payloads[1]) {
			t.Fatalf("pcapng %v: %+v %q", ng, st, got)
		}
		if !times[1].Equal(t0.Add(2 * time.Millisecond)) {
			t.Fatalf("pcapng %v: timestamp %v", ng, times[1])
		}
		// fn's error stops the replay.
		stop := errors.New("stop")
		if st, err := Replay(bytes.NewReader(data), 32766, func([]byte, time.Time) error { return stop }); err != stop || st.Reports != 1 {
			t.Fatalf("pcapng %v: %+v %v", ng, st, err)
		}
	}
	if _, err := Replay(strings.NewReader("not a capture at all"), 1, nil); !errors.Is(err, ErrCapture) {
		t.Fatalf("garbage: %v", err)
	}
	var buf bytes.Buffer
	w := pcapgo.NewWriter(&buf)
	w.WriteFileHeader(65535, layers.LinkTypeIEEE802_11)
	if _, err := Replay(&buf, 1, nil); !errors.Is(err, ErrCapture) || !strings.Contains(err.Error(), "link type") {
		t.Fatalf("802.11: %v", err)
	}
}

// FuzzReplay: a capture from anywhere yields payloads or an error, never a
// panic.
func FuzzReplay(f *testing.F) {
	var buf bytes.Buffer
	w := pcapgo.NewWriter(&buf)
	w.WriteFileHeader(65535, layers.LinkTypeEthernet)
	fr := frame(f, 32766, []byte("r"))
	w.WritePacket(gopacket.CaptureInfo{CaptureLength: len(fr), Length: len(fr)}, fr)
	f.Add(buf.Bytes())
	f.Fuzz(func(t *testing.T, data []byte) {
		Replay(bytes.NewReader(data), 32766, func(p []byte, _ time.Time) error {
			_ = append([]byte(nil), p...)
			return nil
		})
	})
}

func TestListen(t *testing.T) {
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	ctx, cancel := context.WithCancel(context.Background())
	got := make(chan string, 4)
	done := make(chan error, 1)
	go func() {
		done <- Listen(ctx, pc, func(p []byte, _ net.Addr) error { got <- string(p); return nil })
	}()
	c, err := net.Dial("udp", pc.LocalAddr().String())
	if err != nil {
		t.Fatal(err)
	}
	c.Write([]byte("a report"))
	if s := <-got; s != "a report" {
		t.Fatalf("got %q", s)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Listen after cancel: %v", err)
	}
}

func TestInfluxDB(t *testing.T) {
	var path, query, auth, body string
	status := http.StatusNoContent
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		path, query, auth, body = r.URL.Path, r.URL.RawQuery, r.Header.Get("Authorization"), string(b)
		w.WriteHeader(status)
		if status != http.StatusNoContent {
			w.Write([]byte(`{"code":"invalid","message":"unable to parse 'x': missing fields"}`))
		}
	}))
	defer srv.Close()
	ctx := context.Background()
	var lines bytes.Buffer
	a, _ := NewAggregator(AggregatorConfig{Flows: 16})
	a.Add(&Record{Flow: 7, Time: time.Unix(1, 0)})
	a.WriteLineProtocol(&lines, time.Unix(1, 0))
	v2 := &InfluxDB{URL: srv.URL, Org: "net", Bucket: "int", Token: "s3cret"}
	if err := v2.Write(ctx, lines.Bytes()); err != nil {
		t.Fatal(err)
	}
	if path != "/api/v2/write" || query != "bucket=int&org=net&precision=ns" || auth != "Token s3cret" || body != lines.String() {
		t.Fatalf("v2 write: %s?%s %q %q", path, query, auth, body)
	}
	v1 := &InfluxDB{URL: srv.URL + "/", Database: "telemetry"}
	if err := v1.Write(ctx, []byte("m v=1i 1\n")); err != nil {
		t.Fatal(err)
	}
	if path != "/write" || query != "db=telemetry&precision=ns" || auth != "" {
		t.Fatalf("v1 write: %s?%s %q", path, query, auth)
	}
	status = http.StatusBadRequest
	if err := v1.Write(ctx, []byte("x\n")); !errors.Is(err, ErrInfluxDB) || !strings.Contains(err.Error(), "missing fields") {
		t.Fatalf("refused write: %v", err)
	}
	if err := (&InfluxDB{URL: srv.URL}).Write(ctx, nil); !errors.Is(err, ErrConfig) {
		t.Fatalf("no bucket or database: %v", err)
	}
	if err := (&InfluxDB{URL: "localhost:8086", Bucket: "b"}).Write(ctx, nil); !errors.Is(err, ErrConfig) {
		t.Fatalf("no scheme: %v", err)
	}
}

// TestReplayFrames: a raw-IP capture of data packets carrying INT, through
// ReplayFrames into the bridge as INT sink.
func TestReplayFrames(t *testing.T) {
	var buf bytes.Buffer
	w := pcapgo.NewWriter(&buf)
	w.WriteFileHeader(65535, layers.LinkTypeRaw)
	pkts := [][]byte{tcpINTPacket(t, []uint32{4, 5, 6}, 61), tcpINTPacket(t, []uint32{4, 7, 6}, 61)}
	for _, p := range pkts {
		w.WritePacket(gopacket.CaptureInfo{CaptureLength: len(p), Length: len(p)}, p)
	}
	b, _ := New(Config{INTDSCP: intDSCP, INTDSCPMask: 0x3F, SinkNode: 3})
	var paths [][]uint32
	st, err := ReplayFrames(&buf, func(frame []byte, first gopacket.LayerType, _ time.Time) error {
		if first != layers.LayerTypeIPv4 {
			t.Fatalf("first layer %v", first)
		}
		if _, err := b.HandlePacket(frame, first); err != nil {
			return err
		}
		for _, tr := range b.Traces() {
			var p []uint32
			for _, h := range tr.Hops {
				p = append(p, h.NodeID)
			}
			paths = append(paths, p)
		}
		return nil
	})
	if err != nil || st != (ReplayStats{Packets: 2, Reports: 2}) || len(paths) != 2 || paths[1][1] != 7 || b.Counters().KeyWrites != 2 {
		t.Fatalf("%v %+v %v %+v", err, st, paths, b.Counters())
	}
}
