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
//	POST /v1/instances/{i}/keywrite   {"keys":[..]} many keys at once: {"results":[..]}
//	GET  /v1/instances/{i}/keyincrement?key=K[&n=N] a count-min query
//	POST /v1/instances/{i}/keyincrement {"keys":[..]}
//	GET  /v1/instances/{i}/postcard?key=F           a flow's path
//	POST /v1/instances/{i}/postcard {"keys":[..]}
//	GET  /v1/instances/{i}/append?list=L[&max=M]    the next entries of a list, consumed
//	GET  /v1/instances/{i}/append?list=L&peek=true  the same entries, left for the next read
//	GET  /v1/instances/{i}/{name}?key=K[&n=N]       any other registered primitive's query
//	POST /v1/instances/{i}/{name} {"keys":[..]}
//	POST /v1/export   [{"keys":[..]}]               end the epoch and export it now (ExportConfig)
//	GET  /v1/export                                 the export under way and the last one
//	GET  /metrics                                   Prometheus counters
//
// N defaults to the instance's configured redundancy. Every key's answer
// (KeyResult) has the same shape: the key, a status, "found", "not found"
// or "conflict" for every primitive, and the primitive's fields, present
// even when the key is not found:
//
//	{"key":7,"status":"found","data":"b428d15a","votes":2}   Key-Write
//	{"key":9,"status":"not found","data":"","votes":0}
//	{"key":7,"status":"found","count":7}                     Key-Increment
//	{"key":9,"status":"not found","count":0}
//	{"key":7,"status":"found","path":[3,1,4,1,5]}            Postcarding
//	{"key":9,"status":"not found","path":[]}
//
// An Append read (ListResult) consumes what it returns unless peek=true
// (the collector's reader zeroes what it read): give each list one
// consumer (an epoch export drains the lists through the same readers, so
// an entry goes either to a GET or to a file); peek to look without
// taking. Its "status" is "found" or "empty", "count" the entries
// returned, "cursor" the list position the next read starts at (entries
// read or exported, plus those lost), "lost" the entries a lapping writer
// overwrote before a GET could read them, "consumed" whether this read took
// them.
//
// An export keeps Key-Write and Postcarding memory as it is, zeroes every
// Key-Increment counter (each epoch counts from zero) and drains the
// Append lists; each file in POST /v1/export's answer says which
// ("memory": "kept", "zeroed" or "drained").
//
// A batch POST takes at most Config.MaxBatchKeys keys (413 beyond, naming
// the limit) and streams its answer; should a key after the first fail,
// the answer ends with an "error" field after the results so far. With a
// token configured, every request but /healthz carries "Authorization:
// Bearer <token>" (401 otherwise). docs/DTA-WIRE.md section 8.6, "Who may
// send", has the rules.
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
	"github.com/dtakit/dtakit/internal/httpguard"
	"github.com/dtakit/dtakit/internal/jsonconf"
	"github.com/dtakit/dtakit/primitive"
)

// DefaultMaxBatchKeys is Config.MaxBatchKeys' default.
const DefaultMaxBatchKeys = 65536

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
	// Beyond loopback it needs a bearer token and TLS, or http_insecure
	// (package internal/httpguard; docs/DTA-WIRE.md section 8.6).
	HTTP string `json:"http"`
	// The bearer token, the TLS certificate pair and http_insecure.
	httpguard.Config
	// MaxBatchKeys bounds the keys of one batch query or export request
	// (default DefaultMaxBatchKeys) and the entries one Append read
	// returns: a request beyond it is refused with 413 naming the limit.
	MaxBatchKeys int `json:"max_batch_keys"`
	// Backend is "software" (default) or "verbs" (an RDMA NIC).
	Backend string `json:"backend"`
	// RegionDir backs the regions with files there, kept across restarts.
	RegionDir string `json:"region_dir"`
	// Translators are the addresses or prefixes ("10.0.0.5",
	// "10.0.1.0/24") translators connect from; a connection request from
	// elsewhere is rejected and counted
	// (dtakit_collector_refused_peer_total). Absent means loopback only.
	Translators []string `json:"translators"`
	// ReplyPort: see collector.Config.ReplyPort.
	ReplyPort uint16 `json:"reply_port"`
	// Shards is the number of sockets the software target serves on,
	// each with its own goroutine (collector.Config.Shards; default 1):
	// a sharded translator's connections are served side by side.
	// dtacollector runs as many threads of Go code as shards (package
	// internal/app/threads); on a machine of its own, give it one per
	// core.
	Shards    int        `json:"shards"`
	Instances []Instance `json:"instances"`
	// Export, when set, writes each epoch as Parquet files (ExportConfig).
	Export *ExportConfig `json:"export"`
}

// Instance is one primitive instance, in CM port order.
type Instance struct {
	// Primitive is "keywrite", "keyincrement", "postcard", "append" or
	// the name of another registered primitive that parses its
	// configuration (primitive.Configurer), which decodes the fields
	// below it uses (case does not matter). The old spellings key-write,
	// key-increment, postcarding, keyincr and appendlist are accepted with
	// a warning.
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
// An error in the JSON names the file, line and column (path:line:col).
func LoadConfig(path string) (Config, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return Config{}, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	var c Config
	if err := jsonconf.Decode(path, b, &c); err != nil {
		return Config{}, fmt.Errorf("%w: %w", ErrConfig, err)
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
	if c.MaxBatchKeys == 0 {
		c.MaxBatchKeys = DefaultMaxBatchKeys
	}
	if c.MaxBatchKeys < 0 || c.MaxBatchKeys > 1<<24 {
		return fmt.Errorf("%w: max_batch_keys %d: want 1..%d", ErrConfig, c.MaxBatchKeys, 1<<24)
	}
	if c.Backend == "" {
		c.Backend = "software"
	}
	if c.Shards == 0 {
		c.Shards = 1
	}
	if c.Shards < 0 || c.Shards > 256 {
		return fmt.Errorf("%w: shards %d: want 1..256", ErrConfig, c.Shards)
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
	return c.checkKeysFrom()
}

// checkKeysFrom checks that each keys_from is on an instance of a
// primitive whose store cannot list its keys (primitive.KeyBorrower) and
// names an instance of one whose store lists them (primitive.KeyLister).
func (c *Config) checkKeysFrom() error {
	is := func(name string, role func(primitive.Kind) bool) bool {
		k, ok := primitive.ByName(strings.ToLower(name))
		return ok && role(k)
	}
	for i, in := range c.Instances {
		if in.KeysFrom == nil {
			continue
		}
		if !is(in.Primitive, isKeyBorrower) {
			return fmt.Errorf("%w: instance %d (%s): keys_from is for %s instances", ErrConfig, i, in.Primitive, kindNames(isKeyBorrower, " and "))
		}
		if k := *in.KeysFrom; k < 0 || k >= len(c.Instances) || !is(c.Instances[k].Primitive, isKeyLister) {
			return fmt.Errorf("%w: instance %d: keys_from %d names no %s instance", ErrConfig, i, k, kindNames(isKeyLister, " or "))
		}
	}
	return nil
}

func isKeyBorrower(k primitive.Kind) bool { _, ok := k.(primitive.KeyBorrower); return ok }
func isKeyLister(k primitive.Kind) bool   { _, ok := k.(primitive.KeyLister); return ok }

// kindNames joins the names of the registered primitives that have role.
func kindNames(role func(primitive.Kind) bool, sep string) string {
	var ns []string
	for _, k := range primitive.Kinds() {
		if role(k) {
			ns = append(ns, k.Name())
		}
	}
	return strings.Join(ns, sep)
}

// instance is a configured instance with its store.
type instance struct {
	Instance
	index int
	info  collector.Instance
	store primitive.Store
	// list is an Append instance's store, read a list at a time (GET
	// .../append, the export), and lists its readers.
	list  *appendlist.Store
	lists map[uint32]*listReader
}

type listReader struct {
	rd   *appendlist.Reader
	lost uint64
}

// kind is the instance's primitive as the configuration and the API name
// it.
func (in *instance) kind() string { return strings.ToLower(in.Primitive) }

// build adds in to c, its layout parsed by its primitive from its
// configuration; errors name the instance.
func (in *instance) build(c *collector.Collector) error {
	wrap := func(err error) error {
		return fmt.Errorf("%w: instance %d: %w", ErrConfig, in.index, err)
	}
	if in.Redundancy == 0 {
		in.Redundancy = 2
	}
	k, _ := primitive.ByName(in.kind())
	cf, ok := k.(primitive.Configurer)
	if !ok {
		return wrap(fmt.Errorf("unknown primitive %q: want %s", in.Primitive, strings.Join(configurable(), ", ")))
	}
	raw, err := json.Marshal(in.Instance)
	if err != nil {
		return wrap(err)
	}
	l, err := cf.ParseConfig(raw)
	if err != nil {
		return wrap(err)
	}
	if in.info, err = c.Add(l); err != nil {
		return wrap(err)
	}
	in.store = in.info.Store
	if in.list, ok = appendlist.StoreOf(in.store); ok {
		in.lists = map[uint32]*listReader{}
		return nil
	}
	// A store may make what its queries need at the first one (Postcarding
	// its Table of the advertised values): make it now, before the HTTP
	// server's handlers query it concurrently.
	_, _ = in.store.Query(primitive.Query{Keys: []uint32{}})
	return nil
}

// configurable returns the names of the primitives a configuration can
// name.
func configurable() []string {
	var ns []string
	for _, n := range primitive.Names() {
		if k, _ := primitive.ByName(n); k != nil {
			if _, ok := k.(primitive.Configurer); ok {
				ns = append(ns, n)
			}
		}
	}
	return ns
}
