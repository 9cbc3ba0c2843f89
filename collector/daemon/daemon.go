// Package daemon is what cmd/dtacollector runs: a collector built from a
// JSON configuration, its queries over HTTP/JSON and its counters in the
// Prometheus format. A program that embeds a collector can mount Handler
// beside its own.
//
// The HTTP API (all responses JSON, errors as {"error": "..."} with a 4xx
// status):
//
//	GET  /healthz                                   "ok" once serving
//	GET  /v1/collector                              its name, RoCEv2 address and backend
//	GET  /v1/instances                              the instances and their regions
//	GET  /v1/instances/{i}/keywrite?key=K[&n=N]     a Key-Write query (plurality vote)
//	POST /v1/instances/{i}/keywrite   {"keys":[..]} many keys at once
//	GET  /v1/instances/{i}/keyincrement?key=K[&n=N] a count-min query
//	POST /v1/instances/{i}/keyincrement {"keys":[..]}
//	GET  /v1/instances/{i}/postcard?key=F           a flow's path
//	POST /v1/instances/{i}/postcard {"keys":[..]}
//	GET  /v1/instances/{i}/append?list=L[&max=M]    the next entries of a list
//	POST /v1/export   [{"keys":[..]}]               end the epoch and export it now (ExportConfig)
//	GET  /v1/export                                 the export under way and the last one
//	GET  /metrics                                   Prometheus counters
//
// N defaults to the instance's configured redundancy. Reading an Append
// list consumes what it returns (the collector's reader zeroes what it
// read): give each list one consumer (an epoch export drains the lists
// through the same readers, so an entry goes either to a GET or to a file).
// Its "cursor" is the list position the next read starts at (entries read
// or exported, plus those lost), "lost" the entries a lapping writer
// overwrote before a GET could read them.
package daemon

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"strings"

	"github.com/dtakit/dtakit/appendlist"
	"github.com/dtakit/dtakit/collector"
	"github.com/dtakit/dtakit/keyincr"
	"github.com/dtakit/dtakit/keywrite"
	"github.com/dtakit/dtakit/postcard"
)

// ErrConfig is wrapped by every error about the configuration.
var ErrConfig = errors.New("dtacollector: bad configuration")

// Config is the daemon's configuration, read from JSON (LoadConfig).
type Config struct {
	// Name names the collector in exported files and in /v1/collector
	// (default: its RoCEv2 address).
	Name string `json:"name"`
	// Addr is the collector's RoCEv2 address (default 127.0.0.1:4791).
	Addr string `json:"addr"`
	// CMPort is the first instance's CM port (default 40050).
	CMPort uint16 `json:"cm_port"`
	// HTTP is the query and metrics address (default 127.0.0.1:8040).
	HTTP string `json:"http"`
	// Backend is "software" (default) or "verbs" (an RDMA NIC).
	Backend string `json:"backend"`
	// RegionDir backs the regions with files there, kept across restarts.
	RegionDir string `json:"region_dir"`
	// ReplyPort: see collector.Config.ReplyPort.
	ReplyPort uint16     `json:"reply_port"`
	Instances []Instance `json:"instances"`
	// Export, when set, writes each epoch as Parquet files (ExportConfig).
	Export *ExportConfig `json:"export"`
}

// Instance is one primitive instance, in CM port order.
type Instance struct {
	// Primitive is "keywrite", "keyincrement", "postcard" or "append".
	Primitive string `json:"primitive"`
	// Key-Write and Key-Increment: slots (a power of two) and the
	// redundancy queries assume; Key-Write: data bytes per entry.
	Slots      uint64 `json:"slots"`
	DataSize   int    `json:"data_size"`
	Redundancy int    `json:"redundancy"`
	// Postcarding: hops per chunk, chunks (a power of two), copies, and
	// the universe of hop values a path query decodes against, which the
	// advertisement carries: translators refuse postcards of other values
	// (NACK reason 5).
	Hops   int      `json:"hops"`
	Chunks uint32   `json:"chunks"`
	Copies int      `json:"copies"`
	Values []uint32 `json:"values"`
	// Append: lists, entries per list, entry size, batch, markers.
	Lists     int  `json:"lists"`
	Entries   int  `json:"entries"`
	EntrySize int  `json:"entry_size"`
	Batch     int  `json:"batch"`
	Markers   bool `json:"markers"`
	// KeysFrom, for a Key-Increment or Postcarding instance, names the
	// Key-Write instance whose keys an epoch export queries it for.
	KeysFrom *int `json:"keys_from"`
}

// LoadConfig reads a JSON configuration file; unknown fields are errors.
func LoadConfig(path string) (Config, error) {
	f, err := os.Open(path)
	if err != nil {
		return Config{}, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	defer f.Close()
	dec := json.NewDecoder(f)
	dec.DisallowUnknownFields()
	var c Config
	if err := dec.Decode(&c); err != nil {
		return Config{}, fmt.Errorf("%w: %s: %w", ErrConfig, path, err)
	}
	return c, nil
}

func (c *Config) withDefaults() error {
	if c.Addr == "" {
		c.Addr = "127.0.0.1:4791"
	}
	if c.HTTP == "" {
		c.HTTP = "127.0.0.1:8040"
	}
	if c.Backend == "" {
		c.Backend = "software"
	}
	if c.Backend != "software" && c.Backend != "verbs" {
		return fmt.Errorf("%w: backend %q: want software or verbs", ErrConfig, c.Backend)
	}
	if _, err := netip.ParseAddrPort(c.Addr); err != nil {
		return fmt.Errorf("%w: addr: %w", ErrConfig, err)
	}
	if len(c.Instances) == 0 {
		return fmt.Errorf("%w: no instances", ErrConfig)
	}
	if c.Name == "" {
		c.Name = c.Addr
	}
	for i, in := range c.Instances {
		if in.KeysFrom == nil {
			continue
		}
		p := strings.ToLower(in.Primitive)
		if p != "keyincrement" && p != "postcard" {
			return fmt.Errorf("%w: instance %d (%s): keys_from is for keyincrement and postcard instances", ErrConfig, i, in.Primitive)
		}
		if k := *in.KeysFrom; k < 0 || k >= len(c.Instances) || strings.ToLower(c.Instances[k].Primitive) != "keywrite" {
			return fmt.Errorf("%w: instance %d: keys_from %d names no keywrite instance", ErrConfig, i, k)
		}
	}
	return nil
}

// instance is a configured instance with its store.
type instance struct {
	Instance
	index int
	info  collector.Instance
	kw    *keywrite.Store
	ki    *keyincr.Store
	pc    *postcard.Store
	table *postcard.Table
	al    *appendlist.Store
	lists map[uint32]*listReader
}

type listReader struct {
	rd   *appendlist.Reader
	lost uint64
}

// kind is the instance's primitive as the configuration and the API name
// it.
func (in *instance) kind() string { return strings.ToLower(in.Primitive) }

// build adds in to c; errors name the instance.
func (in *instance) build(c *collector.Collector) (err error) {
	wrap := func(err error) error {
		if err == nil {
			return nil
		}
		return fmt.Errorf("%w: instance %d (%s): %w", ErrConfig, in.index, in.Primitive, err)
	}
	if in.Redundancy == 0 {
		in.Redundancy = 2
	}
	switch strings.ToLower(in.Primitive) {
	case "keywrite":
		l := keywrite.Layout{Slots: in.Slots, DataSize: in.DataSize}
		in.kw, err = c.AddKeyWrite(l)
		return wrap(err)
	case "keyincrement":
		l := keyincr.Layout{Slots: in.Slots}
		in.ki, err = c.AddKeyIncrement(l)
		return wrap(err)
	case "postcard":
		l := postcard.Layout{Hops: in.Hops, Chunks: in.Chunks, Copies: in.Copies}
		if err := l.Validate(); err != nil {
			return wrap(err)
		}
		if len(in.Values) == 0 {
			return wrap(errors.New("a postcard instance needs the values its paths hold"))
		}
		if in.table, err = postcard.NewTable(l, in.Values); err != nil {
			return wrap(err)
		}
		in.pc, err = c.AddPostcard(l, in.Values...)
		return wrap(err)
	case "append":
		in.al, err = c.AddAppend(appendlist.Layout{Lists: in.Lists, Entries: in.Entries, EntrySize: in.EntrySize, Batch: in.Batch, Markers: in.Markers})
		in.lists = map[uint32]*listReader{}
		return wrap(err)
	}
	return wrap(fmt.Errorf("unknown primitive %q: want keywrite, keyincrement, postcard or append", in.Primitive))
}
