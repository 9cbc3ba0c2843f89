package intbridge

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/gopacket/gopacket/pcapgo"
)

// ErrCapture is wrapped by Replay's errors about the capture itself.
var ErrCapture = errors.New("intbridge: unreadable capture")

// ReplayStats counts what Replay read.
type ReplayStats struct {
	Packets uint64 // packets in the capture
	Reports uint64 // UDP datagrams to the report port, handed to fn
	Skipped uint64 // other packets (other ports, not UDP, not IP, fragments)
}

// Replay reads a capture, pcap or pcapng, from r and calls fn with the UDP
// payload of each packet sent to port (IPv4 or IPv6, over Ethernet or raw
// IP) and its capture time; the payload is valid during the call. It stops
// at the end of the capture or at fn's first error, which it returns.
func Replay(r io.Reader, port uint16, fn func(payload []byte, ts time.Time) error) (ReplayStats, error) {
	var (
		eth  layers.Ethernet
		ip4  layers.IPv4
		ip6  layers.IPv6
		udp  layers.UDP
		decs []gopacket.LayerType
	)
	parsers := map[gopacket.LayerType]*gopacket.DecodingLayerParser{}
	for _, first := range []gopacket.LayerType{layers.LayerTypeEthernet, layers.LayerTypeIPv4, layers.LayerTypeIPv6} {
		p := gopacket.NewDecodingLayerParser(first, &eth, &ip4, &ip6, &udp)
		p.IgnoreUnsupported = true
		parsers[first] = p
	}
	return replay(r, func(st *ReplayStats, data []byte, first gopacket.LayerType, ts time.Time) error {
		_ = parsers[first].DecodeLayers(data, &decs) // what decoded is enough
		isUDP := false
		for _, t := range decs {
			if t == layers.LayerTypeUDP {
				isUDP = true
			}
		}
		if !isUDP || uint16(udp.DstPort) != port {
			st.Skipped++
			return nil
		}
		st.Reports++
		return fn(udp.Payload, ts)
	})
}

// ReplayFrames reads a capture, pcap or pcapng, from r and calls fn with
// every frame, the layer it starts with (layers.LayerTypeEthernet,
// LayerTypeIPv4 or LayerTypeIPv6) and its capture time: the raw INT input,
// data packets for Bridge.HandlePacket. The frame is valid during the
// call; every frame counts in Reports. It stops at the end of the capture
// or at fn's first error, which it returns.
func ReplayFrames(r io.Reader, fn func(frame []byte, first gopacket.LayerType, ts time.Time) error) (ReplayStats, error) {
	return replay(r, func(st *ReplayStats, data []byte, first gopacket.LayerType, ts time.Time) error {
		st.Reports++
		return fn(data, first, ts)
	})
}

// replay reads a capture and calls each with every packet and its first
// layer (raw IP by its version nibble).
func replay(r io.Reader, each func(st *ReplayStats, data []byte, first gopacket.LayerType, ts time.Time) error) (ReplayStats, error) {
	var st ReplayStats
	br := bufio.NewReader(r)
	magic, err := br.Peek(4)
	if err != nil {
		return st, fmt.Errorf("%w: %w", ErrCapture, err)
	}
	var src interface {
		ZeroCopyReadPacketData() ([]byte, gopacket.CaptureInfo, error)
		LinkType() layers.LinkType
	}
	if bytes.Equal(magic, []byte{0x0A, 0x0D, 0x0D, 0x0A}) {
		ng, err := pcapgo.NewNgReader(br, pcapgo.DefaultNgReaderOptions)
		if err != nil {
			return st, fmt.Errorf("%w: pcapng: %w", ErrCapture, err)
		}
		src = ng
	} else {
		p, err := pcapgo.NewReader(br)
		if err != nil {
			return st, fmt.Errorf("%w: %w", ErrCapture, err)
		}
		src = p
	}
	raw := false
	switch lt := src.LinkType(); lt {
	case layers.LinkTypeEthernet:
	case layers.LinkTypeRaw, layers.LinkTypeIPv4, layers.LinkTypeIPv6:
		raw = true // the version nibble says which IP
	default:
		return st, fmt.Errorf("%w: link type %v (Ethernet or raw IP)", ErrCapture, lt)
	}
	for {
		data, ci, err := src.ZeroCopyReadPacketData()
		if err == io.EOF {
			return st, nil
		}
		if err != nil {
			return st, fmt.Errorf("%w: packet %d: %w", ErrCapture, st.Packets+1, err)
		}
		st.Packets++
		first := layers.LayerTypeEthernet
		if raw {
			first = layers.LayerTypeIPv4
			if len(data) > 0 && data[0]>>4 == 6 {
				first = layers.LayerTypeIPv6
			}
		}
		if err := each(&st, data, first, ci.Timestamp); err != nil {
			return st, err
		}
	}
}

// Listen reads datagrams from conn until ctx is done, calling fn with each
// payload (valid during the call) and its source. It returns nil when ctx
// ends, fn's first error, or conn's error other than a timeout.
func Listen(ctx context.Context, conn net.PacketConn, fn func(payload []byte, src net.Addr) error) error {
	buf := make([]byte, 65536)
	for ctx.Err() == nil {
		// Wake now and then to see ctx.
		_ = conn.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
		n, src, err := conn.ReadFrom(buf)
		if err != nil {
			if errors.Is(err, os.ErrDeadlineExceeded) {
				continue
			}
			return err
		}
		if err := fn(buf[:n], src); err != nil {
			return err
		}
	}
	return nil
}

// ErrInfluxDB is wrapped by InfluxDB.Write's errors: the server refused the
// write or could not be reached.
var ErrInfluxDB = errors.New("intbridge: InfluxDB write failed")

// InfluxDB writes line protocol (WriteLineProtocol, WriteEventLines) to an
// InfluxDB server over HTTP, with nanosecond timestamps: to /api/v2/write
// with Org and Bucket and a token (InfluxDB 2.x and 3.x), or, when Bucket is
// empty, to /write?db=Database (1.x).
type InfluxDB struct {
	URL      string // base URL, e.g. http://localhost:8086
	Org      string
	Bucket   string
	Token    string // sent as "Authorization: Token ..." when set
	Database string
	Client   *http.Client // nil: http.DefaultClient
}

// Write sends lines.
func (c *InfluxDB) Write(ctx context.Context, lines []byte) error {
	u, err := url.Parse(c.URL)
	if err != nil || u.Scheme == "" || u.Host == "" {
		return fmt.Errorf("%w: base URL %q", ErrConfig, c.URL)
	}
	q := url.Values{"precision": {"ns"}}
	switch {
	case c.Bucket != "":
		u = u.JoinPath("api/v2/write")
		q.Set("bucket", c.Bucket)
		if c.Org != "" {
			q.Set("org", c.Org)
		}
	case c.Database != "":
		u = u.JoinPath("write")
		q.Set("db", c.Database)
	default:
		return fmt.Errorf("%w: InfluxDB needs a bucket (2.x) or a database (1.x)", ErrConfig)
	}
	u.RawQuery = q.Encode()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u.String(), bytes.NewReader(lines))
	if err != nil {
		return fmt.Errorf("%w: %w", ErrInfluxDB, err)
	}
	req.Header.Set("Content-Type", "text/plain; charset=utf-8")
	if c.Token != "" {
		req.Header.Set("Authorization", "Token "+c.Token)
	}
	hc := c.Client
	if hc == nil {
		hc = http.DefaultClient
	}
	resp, err := hc.Do(req)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrInfluxDB, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return fmt.Errorf("%w: %s: %s", ErrInfluxDB, resp.Status, bytes.TrimSpace(body))
	}
	return nil
}
