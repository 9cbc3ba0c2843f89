// Package cluster queries the collectors of a deployment as one: it sends
// each key to the collector the translator sent the key's reports to
// (dta.CollectorChoice), one batched request per collector, in parallel, and
// returns the answers in the caller's order. It talks to dtacollector's
// HTTP API (package collector/daemon).
//
//	c, err := cluster.New(ctx, cluster.Config{Collectors: []string{
//		"http://10.0.0.1:8040", "http://10.0.0.2:8040", "http://10.0.0.3:8040"}})
//	res, err := c.KeyWrite(ctx, keys)
//
// Collectors must be listed in the translator's order (its Collectors), and
// Choice must be the translator's: a key asked of another collector than
// the one holding it reads another key's slots. Give RoCEv2, the
// translator's own list of addresses, and New checks each collector's
// address against it.
//
// As the translator does, the client uses the first instance of a primitive
// on each collector.
package cluster

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"strings"
	"sync"

	"github.com/dtakit/dtakit/collector/daemon"
	"github.com/dtakit/dtakit/dta"
)

// Errors returned by this package, wrapped with what was wrong.
var (
	// ErrConfig: the configuration is invalid or does not match the
	// collectors found (a RoCEv2 address that differs, a primitive that
	// some collector lacks).
	ErrConfig = errors.New("cluster: invalid configuration")
	// ErrCollector: a collector did not answer, or answered with an error.
	ErrCollector = errors.New("cluster: collector failed")
)

// Config describes the deployment.
type Config struct {
	// Collectors are the collectors' HTTP API base URLs, in the
	// translator's collector order.
	Collectors []string
	// RoCEv2, when set, is the translator's list of collector addresses:
	// New checks that collector i serves RoCEv2 at RoCEv2[i].
	RoCEv2 []netip.AddrPort
	// Choice is the translator's choice table (nil: the default,
	// dta.DefaultCollectorChoice).
	Choice *dta.CollectorChoice
	// HTTP is the client used (nil: http.DefaultClient).
	HTTP *http.Client
	// Token, when set, is the bearer token every request carries (the
	// collectors' http_token_file).
	Token string
	// BatchKeys is the most keys one request asks a collector (default
	// daemon.DefaultMaxBatchKeys, the collectors' default max_batch_keys);
	// a query of more is split.
	BatchKeys int
}

// Client queries a deployment's collectors.
type Client struct {
	choice dta.CollectorChoice
	http   *http.Client
	token  string
	batch  int
	colls  []coll
}

type coll struct {
	base string
	info daemon.CollectorInfo
	// first instance of each primitive ("keywrite", ...); absent if none.
	first map[string]int
}

// New asks every collector for its address and instances.
func New(ctx context.Context, cfg Config) (*Client, error) {
	n := len(cfg.Collectors)
	if n == 0 || n > 256 {
		return nil, fmt.Errorf("cluster.New: %w: %d collectors, want 1..256", ErrConfig, n)
	}
	if cfg.RoCEv2 != nil && len(cfg.RoCEv2) != n {
		return nil, fmt.Errorf("cluster.New: %w: %d RoCEv2 addresses for %d collectors", ErrConfig, len(cfg.RoCEv2), n)
	}
	c := &Client{choice: dta.DefaultCollectorChoice(n), http: cfg.HTTP, token: cfg.Token, batch: cfg.BatchKeys}
	if c.batch <= 0 {
		c.batch = daemon.DefaultMaxBatchKeys
	}
	if cfg.Choice != nil {
		for i, v := range cfg.Choice {
			if int(v) >= n {
				return nil, fmt.Errorf("cluster.New: %w: choice entry %d names collector %d of %d", ErrConfig, i, v, n)
			}
		}
		c.choice = *cfg.Choice
	}
	if c.http == nil {
		c.http = http.DefaultClient
	}
	for i, base := range cfg.Collectors {
		co := coll{base: strings.TrimSuffix(base, "/"), first: map[string]int{}}
		if err := c.get(ctx, co.base+"/v1/collector", &co.info); err != nil {
			return nil, fmt.Errorf("cluster.New: collector %d: %w", i, err)
		}
		if cfg.RoCEv2 != nil && co.info.RoCEv2 != cfg.RoCEv2[i].String() {
			return nil, fmt.Errorf("cluster.New: %w: collector %d (%s) serves RoCEv2 at %s, the translator's list says %s: out of order?", ErrConfig, i, co.base, co.info.RoCEv2, cfg.RoCEv2[i])
		}
		var insts []struct {
			Index int    `json:"index"`
			Kind  string `json:"kind"`
		}
		if err := c.get(ctx, co.base+"/v1/instances", &insts); err != nil {
			return nil, fmt.Errorf("cluster.New: collector %d: %w", i, err)
		}
		for _, in := range insts {
			if _, ok := co.first[in.Kind]; !ok {
				co.first[in.Kind] = in.Index
			}
		}
		c.colls = append(c.colls, co)
	}
	return c, nil
}

// Collector returns the index of the collector that holds key.
func (c *Client) Collector(key uint32) int { return c.choice.Collector(key) }

// KeyWrite answers keys from the Key-Write instances, with each
// instance's configured redundancy and a plurality vote.
func (c *Client) KeyWrite(ctx context.Context, keys []uint32) ([]daemon.KeyResult, error) {
	return c.query(ctx, "keywrite", keys)
}

// KeyIncrement answers keys' count-min estimates (KeyResult.Count).
func (c *Client) KeyIncrement(ctx context.Context, keys []uint32) ([]daemon.KeyResult, error) {
	return c.query(ctx, "keyincrement", keys)
}

// Postcard answers the flows' paths (KeyResult.Path).
func (c *Client) Postcard(ctx context.Context, keys []uint32) ([]daemon.KeyResult, error) {
	return c.query(ctx, "postcard", keys)
}

// query splits keys by collector, asks each collector once, in parallel,
// and puts the answers back in keys' order.
func (c *Client) query(ctx context.Context, prim string, keys []uint32) ([]daemon.KeyResult, error) {
	per := make([][]int, len(c.colls)) // positions in keys, per collector
	for i, k := range keys {
		ci := c.choice.Collector(k)
		per[ci] = append(per[ci], i)
	}
	// Refuse before asking anyone: no request is left running on return.
	for ci, pos := range per {
		if _, ok := c.colls[ci].first[prim]; len(pos) > 0 && !ok {
			return nil, fmt.Errorf("cluster: %w: collector %d (%s) has no %s instance", ErrConfig, ci, c.colls[ci].base, prim)
		}
	}
	out := make([]daemon.KeyResult, len(keys))
	errs := make([]error, len(c.colls))
	var wg sync.WaitGroup
	for ci, pos := range per {
		if len(pos) == 0 {
			continue
		}
		co := &c.colls[ci]
		inst := co.first[prim]
		wg.Add(1)
		go func() {
			defer wg.Done()
			for len(pos) > 0 {
				chunk := pos[:min(len(pos), c.batch)]
				pos = pos[len(chunk):]
				ks := make([]uint32, len(chunk))
				for j, p := range chunk {
					ks[j] = keys[p]
				}
				var resp struct {
					Results []daemon.KeyResult `json:"results"`
					Error   string             `json:"error"` // a streamed answer cut short
				}
				body, _ := json.Marshal(map[string]any{"keys": ks})
				err := c.post(ctx, fmt.Sprintf("%s/v1/instances/%d/%s", co.base, inst, prim), body, &resp)
				switch {
				case err != nil:
				case resp.Error != "":
					err = fmt.Errorf("%w: %s after %d of %d keys", ErrCollector, resp.Error, len(resp.Results), len(ks))
				case len(resp.Results) != len(ks):
					err = fmt.Errorf("%w: %d answers to %d keys", ErrCollector, len(resp.Results), len(ks))
				}
				if err != nil {
					errs[ci] = fmt.Errorf("collector %d (%s): %w", ci, co.base, err)
					return
				}
				for j, p := range chunk {
					out[p] = resp.Results[j]
				}
			}
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("cluster: %s: %w", prim, err)
	}
	return out, nil
}

func (c *Client) get(ctx context.Context, url string, v any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrConfig, err)
	}
	return c.do(req, v)
}

func (c *Client) post(ctx context.Context, url string, body []byte, v any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("%w: %w", ErrConfig, err)
	}
	req.Header.Set("Content-Type", "application/json")
	return c.do(req, v)
}

func (c *Client) do(req *http.Request, v any) error {
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrCollector, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<30))
	if err != nil {
		return fmt.Errorf("%w: %s: %w", ErrCollector, req.URL, err)
	}
	if resp.StatusCode != http.StatusOK {
		var e struct {
			Error string `json:"error"`
		}
		json.Unmarshal(b, &e)
		return fmt.Errorf("%w: %s: %s: %s", ErrCollector, req.URL, resp.Status, e.Error)
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("%w: %s: %w", ErrCollector, req.URL, err)
	}
	return nil
}
