package translator

import (
	"context"
	"net/netip"
	"testing"

	"github.com/dtakit/dtakit/appendlist"
	dtacollector "github.com/dtakit/dtakit/collector"
	"github.com/dtakit/dtakit/keyincr"
	"github.com/dtakit/dtakit/keywrite"
	"github.com/dtakit/dtakit/postcard"
)

// testCollector is a software collector on loopback serving one instance
// of each primitive, for the end-to-end tests.
type testCollector struct {
	*dtacollector.Collector
	KW *keywrite.Store
	KI *keyincr.Store
	PC *postcard.Store
	AR *appendlist.Store
}

// startCollector serves a collector with the given instances until the
// test ends.
func startCollector(t *testing.T, kwl keywrite.Layout, kil keyincr.Layout, pcc *postcard.Codec, all appendlist.Layout) *testCollector {
	t.Helper()
	// Two target sockets: each translator shard's connection is read by
	// one of them (as the quickstart runs it).
	c, err := dtacollector.New(dtacollector.Config{Addr: netip.MustParseAddrPort("127.0.0.1:0"), Shards: 2})
	if err != nil {
		t.Fatal(err)
	}
	tc := &testCollector{Collector: c}
	var e [4]error
	tc.KW, e[0] = c.AddKeyWrite(kwl)
	tc.KI, e[1] = c.AddKeyIncrement(kil)
	tc.PC, e[2] = c.AddPostcard(pcc.Layout())
	tc.AR, e[3] = c.AddAppend(all)
	for _, err := range e {
		if err != nil {
			c.Close()
			t.Fatal(err)
		}
	}
	if err := c.Start(); err != nil {
		c.Close()
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	go c.Serve(ctx)
	t.Cleanup(func() {
		cancel()
		c.Close()
	})
	return tc
}
