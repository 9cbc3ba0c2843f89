// Command dtacollector runs a DTA collector: the instances a JSON
// configuration names, served to translators (the software RoCEv2 target,
// or an RDMA NIC), queried over HTTP/JSON, with counters at /metrics in the
// Prometheus format. See package collector/daemon for the configuration and
// the API.
//
//	dtacollector -config collector.json
//
// The HTTP API listens on loopback unless told otherwise; an address
// beyond loopback needs a bearer token and TLS (-http-token-file, -http-cert
// and -http-key, or the file's http_token_file, http_cert_file and
// http_key_file), or -http-insecure. Translators connect from loopback
// unless -translators (or "translators") names their addresses.
//
// Exit status: 0 after a clean shutdown (SIGINT or SIGTERM: requests under
// way are finished, then the collector closes), 2 for bad flags or
// configuration (an HTTP address beyond loopback without a token and TLS
// among them), 3 when the verbs backend finds no RDMA device, 1 for any
// other failure.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"runtime"
	"strings"
	"syscall"
	"time"

	"github.com/dtakit/dtakit/collector"
	"github.com/dtakit/dtakit/collector/daemon"
	"github.com/dtakit/dtakit/internal/app/cli"
	"github.com/dtakit/dtakit/internal/app/cpuprofile"
	"github.com/dtakit/dtakit/internal/app/daemonlog"
	"github.com/dtakit/dtakit/internal/app/threads"
	"github.com/dtakit/dtakit/internal/httpguard"
)

func main() {
	threadsFor = threads.Set
	os.Exit(run())
}

// threadsFor makes the collector's shards the threads that run Go code
// (package threads); main sets it, so that tests running run in-process
// keep their own.
var threadsFor = func(shards int) int { return runtime.GOMAXPROCS(0) }

func run() int {
	fs := flag.NewFlagSet("dtacollector", flag.ContinueOnError)
	cli.Usage(fs, synopsis, exitStatus)
	config := fs.String("config", "", "JSON configuration file (required)")
	httpAddr := fs.String("http", "", "HTTP address for queries and /metrics (overrides the file's)")
	addr := fs.String("addr", "", "RoCEv2 address (overrides the file's)")
	translators := fs.String("translators", "", "addresses or prefixes translators connect from, comma-separated (overrides the file's; default loopback)")
	drain := fs.Duration("drain", 5*time.Second, "how long shutdown waits for requests under way")
	level := fs.String("log-level", "info", "debug, info, warn or error")
	profile := cpuprofile.Flag(fs)
	var web httpguard.Config
	webFlags := web.Flags(fs)
	if code, ok := cli.Parse(fs, os.Args[1:]); !ok {
		return code
	}
	log, err := daemonlog.New(*level)
	if err != nil {
		fmt.Fprintln(os.Stderr, "dtacollector:", err)
		return 2
	}
	stopProfile, err := profile()
	if err != nil {
		log.Error("profile", "err", err)
		return 1
	}
	defer stopProfile(func(err error) { log.Error("profile", "err", err) })
	if *config == "" {
		fmt.Fprintln(os.Stderr, "dtacollector: -config is required")
		return 2
	}
	cfg, err := daemon.LoadConfig(*config)
	if err != nil {
		log.Error("configuration", "err", err)
		return 2
	}
	if *httpAddr != "" {
		cfg.HTTP = *httpAddr
	}
	web = cfg.Config
	webFlags()
	cfg.Config = web
	if *addr != "" {
		cfg.Addr = *addr
	}
	if *translators != "" {
		cfg.Translators = strings.Split(*translators, ",")
	}
	d, err := daemon.New(cfg, log)
	if err != nil {
		log.Error("start", "err", err)
		switch {
		case errors.Is(err, daemon.ErrConfig), errors.Is(err, collector.ErrConfig):
			return 2
		case errors.Is(err, collector.ErrNoRDMA):
			return 3
		}
		return 1
	}
	log.Info("threads", "shards", d.Shards(), "gomaxprocs", threadsFor(d.Shards()))
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if err := d.Run(ctx, *drain); err != nil {
		log.Error("stopped", "err", err)
		return 1
	}
	log.Info("stopped")
	return 0
}
