// Command dtaswitchcp is the control plane of a Tofino translator switch
// (p4/translator), run on the switch CPU. It connects one switch queue pair
// to each collector instance through the RDMA CM (p4.Handshake over a UDP
// socket on the translator's RoCEv2 address: the data plane punts RoCEv2
// packets to the CPU and forwards what the CPU sends), then writes what the
// program needs (table entries, PSN registers, multicast groups, meters) as
// plan.json and as a bfrt_python script, plan.py, to load with
// `bfshell -b plan.py`.
//
//	dtaswitchcp -config switch.json
//
// The configuration file:
//
//	{"program": "translator",            // or "postcard" (p4/translator/postcard.p4), "translator_t2" (Tofino-2)
//	 "local": "10.0.0.1:4791",           // the translator's RoCEv2 address (this socket)
//	 "mac": "02:00:00:00:00:01",         // the switch's MAC toward the collectors
//	 "collectors": [{"addr": "10.0.0.2:4791", "mac": "02:00:00:00:00:02", "port": 8}],
//	 "cm_port": 40050,                   // CM port of each collector's first instance
//	 "cpu_port": 64, "multicast_base": 100, "rate_pps": 0, "burst": 0,
//	 "report_ports": [0, 4],             // where reports enter: ports of one pipe
//	 "kw_data": 4,                       // Key-Write data size translator.p4 was compiled for (-DDTA_KW_DATA_BYTES)
//	 "ap_batch": 4,                      // Append batch translator.p4 was compiled for (-DDTA_AP_BATCH)
//	 "out": "plan", "timeout": "60s"}
//
// Instances are discovered as the software translator does: CM port
// cm_port, cm_port+1, ... of each collector until one is refused; only the
// instances the program translates are connected. A collector that does not
// answer is asked again with backoff until -timeout.
//
// After writing the plan it keeps answering the collectors on the socket (an
// advertisement sent again is acknowledged again) until SIGINT or SIGTERM;
// -once exits instead. Exit status: 0 done, 1 a collector refused or never
// answered, or the plan could not be written, 2 bad flags or configuration.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/netip"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/dtakit/dtakit/internal/app/cli"
	"github.com/dtakit/dtakit/internal/app/daemonlog"
	"github.com/dtakit/dtakit/p4"
)

// Collector is one collector in the configuration file.
type Collector struct {
	Addr string `json:"addr"`
	MAC  string `json:"mac"`
	Port uint16 `json:"port"`
}

// Config is the configuration file.
type Config struct {
	Program       string      `json:"program"`
	Local         string      `json:"local"`
	MAC           string      `json:"mac"`
	Collectors    []Collector `json:"collectors"`
	CMPort        uint16      `json:"cm_port"`
	CPUPort       uint16      `json:"cpu_port"`
	MulticastBase uint16      `json:"multicast_base"`
	RatePPS       uint64      `json:"rate_pps"`
	ReportPorts   []uint16    `json:"report_ports"`
	KWData        int         `json:"kw_data"`
	APBatch       int         `json:"ap_batch"`
	Burst         uint64      `json:"burst"`
	Out           string      `json:"out"`
	Timeout       string      `json:"timeout"`
}

// maxInstances bounds discovery per collector, as the software translator's
// default.
const maxInstances = 8

type setup struct {
	program p4.Program
	local   netip.AddrPort
	mac     [6]byte
	cols    []collector
	cfg     Config
	timeout time.Duration
}

type collector struct {
	addr netip.AddrPort
	mac  [6]byte
	port uint16
}

var errConfig = errors.New("configuration")

func parse(cfg Config) (*setup, error) {
	s := &setup{cfg: cfg, timeout: 60 * time.Second}
	switch cfg.Program {
	case "", "translator":
		s.program = p4.TranslatorProgram
	case "postcard":
		s.program = p4.PostcardProgram
	case "translator_t2":
		s.program = p4.Tofino2Program
	default:
		return nil, fmt.Errorf("%w: program %q, want translator, postcard or translator_t2", errConfig, cfg.Program)
	}
	var err error
	if s.local, err = netip.ParseAddrPort(cfg.Local); err != nil || !s.local.Addr().Is4() {
		return nil, fmt.Errorf("%w: local %q: want an IPv4 address and port", errConfig, cfg.Local)
	}
	if s.mac, err = parseMAC(cfg.MAC); err != nil {
		return nil, fmt.Errorf("%w: mac: %w", errConfig, err)
	}
	if len(cfg.Collectors) == 0 {
		return nil, fmt.Errorf("%w: no collectors", errConfig)
	}
	for i, c := range cfg.Collectors {
		a, err := netip.ParseAddrPort(c.Addr)
		if err != nil || !a.Addr().Is4() {
			return nil, fmt.Errorf("%w: collector %d: addr %q: want an IPv4 address and port", errConfig, i, c.Addr)
		}
		m, err := parseMAC(c.MAC)
		if err != nil {
			return nil, fmt.Errorf("%w: collector %d: mac: %w", errConfig, i, err)
		}
		s.cols = append(s.cols, collector{a, m, c.Port})
	}
	if s.cfg.CMPort == 0 {
		s.cfg.CMPort = 40050
	}
	if s.cfg.Out == "" {
		s.cfg.Out = "."
	}
	if cfg.Timeout != "" {
		if s.timeout, err = time.ParseDuration(cfg.Timeout); err != nil || s.timeout <= 0 {
			return nil, fmt.Errorf("%w: timeout %q", errConfig, cfg.Timeout)
		}
	}
	return s, nil
}

func parseMAC(s string) ([6]byte, error) {
	var m [6]byte
	if s == "" {
		return m, nil // the collectors' next hop is set later by hand
	}
	hw, err := net.ParseMAC(s)
	if err != nil || len(hw) != 6 {
		return m, fmt.Errorf("%q is not an Ethernet MAC", s)
	}
	copy(m[:], hw)
	return m, nil
}

func main() { os.Exit(run(os.Args[1:])) }

func run(args []string) int {
	fs := flag.NewFlagSet("dtaswitchcp", flag.ContinueOnError)
	cli.Usage(fs, synopsis, exitStatus)
	config := fs.String("config", "", "JSON configuration file (required)")
	once := fs.Bool("once", false, "exit after writing the plan")
	level := fs.String("log-level", "info", "debug, info, warn or error")
	if code, ok := cli.Parse(fs, args); !ok {
		return code
	}
	log, err := daemonlog.New(*level)
	if err != nil {
		fmt.Fprintln(os.Stderr, "dtaswitchcp:", err)
		return 2
	}
	if *config == "" {
		log.Error("-config is required")
		return 2
	}
	b, err := os.ReadFile(*config)
	if err != nil {
		log.Error("reading the configuration", "err", err)
		return 2
	}
	var cfg Config
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&cfg); err != nil {
		log.Error("configuration", "file", *config, "err", err)
		return 2
	}
	s, err := parse(cfg)
	if err != nil {
		log.Error("configuration", "file", *config, "err", err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	uc, err := net.ListenUDP("udp4", net.UDPAddrFromAddrPort(s.local))
	if err != nil {
		log.Error("socket", "local", s.local, "err", err)
		return 1
	}
	defer uc.Close()
	hs, err := s.connect(ctx, uc, log)
	if err != nil {
		log.Error("connecting the switch's queue pairs", "err", err)
		return 1
	}
	pcfg := p4.Config{Program: s.program, MulticastBase: s.cfg.MulticastBase, CPUPort: s.cfg.CPUPort, RatePPS: s.cfg.RatePPS, BurstPackets: s.cfg.Burst, ReportPorts: s.cfg.ReportPorts}
	for i, c := range s.cols {
		col := p4.Collector{Port: c.port}
		for _, h := range hs {
			if h.col == i {
				col.Connections = append(col.Connections, h.h.Connection())
			}
		}
		pcfg.Collectors = append(pcfg.Collectors, col)
	}
	plan, err := p4.NewPlan(pcfg)
	if err != nil {
		log.Error("plan", "err", err)
		return 1
	}
	if err := write(s.cfg.Out, plan, s.program); err != nil {
		log.Error("writing the plan", "err", err)
		return 1
	}
	log.Info("plan written", "dir", s.cfg.Out, "program", s.program.String(), "queue_pairs", len(hs), "entries", len(plan.Entries))
	if *once {
		return 0
	}
	serve(ctx, uc, hs, log)
	log.Info("stopped")
	return 0
}

// handshake is one switch queue pair being connected to a collector instance.
type handshake struct {
	col  int
	h    *p4.Handshake
	req  []byte
	from netip.AddrPort
}

// connect discovers and connects every collector's instances, in order.
func (s *setup) connect(ctx context.Context, uc *net.UDPConn, log *slog.Logger) ([]*handshake, error) {
	deadline := time.Now().Add(s.timeout)
	var done []*handshake
	for ci, c := range s.cols {
		n := 0
		for i := range maxInstances {
			idx := len(done)
			if idx >= 256 {
				return nil, fmt.Errorf("more than 256 queue pairs")
			}
			conn := p4.Connection{
				Index: uint8(idx), SrcMAC: s.mac, DstMAC: c.mac, Src: s.local.Addr(), Dst: c.addr.Addr(),
				SrcPort: s.local.Port(), TranslatorQPN: 0x100 + uint32(idx), StartPSN: rand.Uint32() & 0xFFFFFF,
				KeyWriteData: s.cfg.KWData, AppendBatch: s.cfg.APBatch,
			}
			h, req, err := p4.NewHandshake(conn, s.local, c.addr, s.cfg.CMPort+uint16(i), rand.Uint32())
			if err != nil {
				return nil, err
			}
			hs := &handshake{col: ci, h: h, req: req, from: c.addr}
			err = hs.run(ctx, uc, deadline, log)
			if errors.Is(err, p4.ErrRejected) {
				log.Info("discovery ends", "collector", c.addr, "cm_port", s.cfg.CMPort+uint16(i), "instances", i)
				break
			}
			if errors.Is(err, p4.ErrAdvertisement) {
				// An instance this program does not translate: skip it.
				log.Info("instance skipped", "collector", c.addr, "cm_port", s.cfg.CMPort+uint16(i), "why", err.Error())
				continue
			}
			if err != nil {
				return nil, fmt.Errorf("collector %v, CM port %d: %w", c.addr, s.cfg.CMPort+uint16(i), err)
			}
			conn = h.Connection()
			if !s.program.Serves(conn.Ad.Primitive) {
				log.Info("instance skipped", "collector", c.addr, "cm_port", s.cfg.CMPort+uint16(i),
					"why", fmt.Sprintf("%v is not compiled into %v", conn.Ad.Primitive, s.program))
				continue
			}
			log.Info("connected", "collector", c.addr, "cm_port", s.cfg.CMPort+uint16(i), "qp_index", conn.Index,
				"primitive", conn.Ad.Primitive.String(), "collector_qpn", conn.CollectorQPN)
			done = append(done, hs)
			n++
		}
		if n == 0 {
			return nil, fmt.Errorf("collector %v has no instance %v translates", c.addr, s.program)
		}
	}
	return done, nil
}

// run sends the REQ until the collector answers, with backoff, and answers
// until the advertisement is acknowledged.
func (h *handshake) run(ctx context.Context, uc *net.UDPConn, deadline time.Time, log *slog.Logger) error {
	buf := make([]byte, 4096)
	wait := 100 * time.Millisecond
	send := func(b []byte) error {
		_, err := uc.WriteToUDPAddrPort(b, h.from)
		return err
	}
	if err := send(h.req); err != nil {
		return err
	}
	replied := false
	for {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("no answer before the timeout")
		}
		uc.SetReadDeadline(time.Now().Add(wait))
		n, from, err := uc.ReadFromUDPAddrPort(buf)
		if err != nil {
			var ne net.Error
			if !errors.As(err, &ne) || !ne.Timeout() {
				return err
			}
			if !replied {
				log.Debug("no answer yet, asking again", "collector", h.from, "after", wait)
				wait = min(2*wait, 2*time.Second)
				if err := send(h.req); err != nil {
					return err
				}
			}
			continue
		}
		if from != h.from {
			continue
		}
		reply, ok, err := h.h.Handle(buf[:n])
		if errors.Is(err, p4.ErrRejected) || errors.Is(err, p4.ErrAdvertisement) {
			return err
		}
		if err != nil {
			log.Debug("datagram ignored", "collector", from, "err", err)
			continue
		}
		if reply != nil {
			replied = true
			if err := send(reply); err != nil {
				return err
			}
		}
		if ok {
			return nil
		}
	}
}

// serve answers the collectors until ctx ends: an advertisement sent again
// (its ACK was lost) is acknowledged again.
func serve(ctx context.Context, uc *net.UDPConn, hs []*handshake, log *slog.Logger) {
	go func() {
		<-ctx.Done()
		uc.SetReadDeadline(time.Now())
	}()
	buf := make([]byte, 4096)
	for ctx.Err() == nil {
		n, from, err := uc.ReadFromUDPAddrPort(buf)
		if err != nil {
			if ctx.Err() == nil {
				log.Warn("socket", "err", err)
				time.Sleep(10 * time.Millisecond)
			}
			continue
		}
		answered := false
		for _, h := range hs {
			if h.from != from {
				continue
			}
			if reply, _, err := h.h.Handle(buf[:n]); err == nil && reply != nil {
				uc.WriteToUDPAddrPort(reply, from)
				answered = true
				break
			}
		}
		log.Debug("datagram", "from", from, "bytes", n, "answered", answered)
	}
}

// write writes plan.json and plan.py into dir, each through a temporary
// file renamed into place, so a reader never sees half a plan.
func write(dir string, plan *p4.Plan, prog p4.Program) error {
	j, err := plan.JSON()
	if err != nil {
		return err
	}
	name := prog.Name()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for file, b := range map[string][]byte{"plan.json": j, "plan.py": plan.BfrtPython(name)} {
		tmp := filepath.Join(dir, "."+file+".tmp")
		if err := os.WriteFile(tmp, b, 0o644); err != nil {
			return err
		}
		if err := os.Rename(tmp, filepath.Join(dir, file)); err != nil {
			return err
		}
	}
	return nil
}
