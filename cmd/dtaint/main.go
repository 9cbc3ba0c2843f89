// Command dtaint is a live INT collector on DTA: it listens for Telemetry
// Reports on UDP (and, with -raw-int, for data packets carrying INT, as
// their INT sink), bridges them to DTA reports sent to a translator
// (dtatranslator, which writes them into a dtacollector), runs
// INTCollector's event detection and the SmartNIC monitor's flow table
// and histograms on them, and serves /metrics and an HTTP/JSON API of
// events, flows, switches and rules. See package intbridge/daemon for the
// configuration file and the API.
//
//	dtaint -listen 127.0.0.1:32766 -translator 127.0.0.1:40040 -http 127.0.0.1:8042 -int-port 5000
//	dtaint -config int.json
//	dtaint -replay reports.pcap -int-port 5000
//	dtaint -raw-int 127.0.0.1:32767 -sink-node 9 -int-port 5000
//
// Exit status: 0 after a clean shutdown (SIGINT or SIGTERM: the inputs
// stop, HTTP requests under way finish, the reporter flushes), 2 for bad
// flags or configuration, 1 for any other failure.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/dtakit/dtakit/intbridge"
	"github.com/dtakit/dtakit/intbridge/daemon"
	"github.com/dtakit/dtakit/internal/app/cli"
	"github.com/dtakit/dtakit/internal/app/daemonlog"
)

func main() { os.Exit(run(os.Args[1:])) }

func run(args []string) int {
	fs := flag.NewFlagSet("dtaint", flag.ContinueOnError)
	cli.Usage(fs, synopsis, exitStatus)
	config := fs.String("config", "", "JSON configuration file")
	listen := fs.String("listen", "", "UDP address Telemetry Reports arrive on (default 127.0.0.1:32766)")
	tr := fs.String("translator", "", `translator's report address (default 127.0.0.1:40040; "none": analytics only)`)
	httpAddr := fs.String("http", "", `HTTP address of the API and /metrics (default 127.0.0.1:8042; "none")`)
	rawINT := fs.String("raw-int", "", "UDP address data packets carrying INT arrive on, one Ethernet frame a datagram (dtaint is their INT sink)")
	sinkNode := fs.Uint("sink-node", 0, "node ID the -raw-int input reports its traces under")
	intPort := fs.Uint("int-port", 0, "UDP port of INT over UDP inside the reports' packets (0: none)")
	period := fs.String("period", "", "INTCollector's P: push a key's value again after this long without an event")
	eventList := fs.Uint("event-list", 0, "Append list the events are written to (0: none)")
	replay := fs.String("replay", "", "a capture of Telemetry Reports to feed through first (pcap or pcapng)")
	replayPort := fs.Uint("replay-port", 0, "UDP port the replayed capture's reports are sent to (default 32766)")
	drain := fs.Duration("drain", 5*time.Second, "how long shutdown waits for HTTP requests under way")
	level := fs.String("log-level", "info", "debug, info, warn or error")
	if code, ok := cli.Parse(fs, args); !ok {
		return code
	}
	log, err := daemonlog.New(*level)
	if err != nil {
		fmt.Fprintln(os.Stderr, "dtaint:", err)
		return 2
	}
	var cfg daemon.Config
	if *config != "" {
		if cfg, err = daemon.LoadConfig(*config); err != nil {
			log.Error("configuration", "err", err)
			return 2
		}
	}
	if *listen != "" {
		cfg.Inputs = []daemon.Input{{Kind: "telemetry-report", Listen: *listen}}
	}
	if *rawINT != "" {
		if len(cfg.Inputs) == 0 && *listen == "" {
			// Raw INT beside the default Telemetry Report input.
			cfg.Inputs = []daemon.Input{{}}
		}
		cfg.Inputs = append(cfg.Inputs, daemon.Input{Kind: "raw-int", Listen: *rawINT})
	}
	if *sinkNode != 0 {
		if *sinkNode > 1<<32-1 {
			log.Error("configuration", "err", fmt.Sprintf("-sink-node %d out of range", *sinkNode))
			return 2
		}
		cfg.SinkNode = uint32(*sinkNode)
	}
	if *tr != "" {
		cfg.Translator = *tr
	}
	if *httpAddr != "" {
		cfg.HTTP = *httpAddr
	}
	if *intPort != 0 {
		if *intPort > 65535 {
			log.Error("configuration", "err", fmt.Sprintf("-int-port %d out of range", *intPort))
			return 2
		}
		cfg.INTPort = uint16(*intPort)
	}
	if *period != "" {
		cfg.Period = *period
	}
	if *eventList != 0 {
		cfg.EventList = uint32(*eventList)
	}
	if *replay != "" {
		cfg.Replay = *replay
	}
	if *replayPort != 0 {
		if *replayPort > 65535 {
			log.Error("configuration", "err", fmt.Sprintf("-replay-port %d out of range", *replayPort))
			return 2
		}
		cfg.ReplayPort = uint16(*replayPort)
	}
	d, err := daemon.New(cfg, log)
	if err != nil {
		log.Error("start", "err", err)
		if errors.Is(err, daemon.ErrConfig) || errors.Is(err, intbridge.ErrConfig) {
			return 2
		}
		return 1
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if err := d.Run(ctx, *drain); err != nil {
		log.Error("stopped", "err", err)
		return 1
	}
	return 0
}
