package collector

import (
	"errors"
	"net/netip"
	"testing"

	"github.com/dtakit/dtakit/appendlist"
	"github.com/dtakit/dtakit/keyincr"
	"github.com/dtakit/dtakit/keywrite"
	"github.com/dtakit/dtakit/postcard"
)

// TestLayoutErrors: an invalid layout's error says each layer once: the
// collector's operation, the primitive's sentinel, what is wrong.
func TestLayoutErrors(t *testing.T) {
	c, err := New(Config{Addr: netip.MustParseAddrPort("127.0.0.1:0")})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_, kw := c.AddKeyWrite(keywrite.Layout{Slots: 1000, DataSize: 4})
	_, ki := c.AddKeyIncrement(keyincr.Layout{Slots: 1000})
	_, pc := c.AddPostcard(postcard.Layout{Hops: 5, Chunks: 1000, Copies: 2})
	_, al := c.AddAppend(appendlist.Layout{Lists: 1, Entries: 1000, EntrySize: 4})
	for _, e := range []struct {
		err      error
		sentinel error
		want     string
	}{
		{kw, keywrite.ErrLayout, "collector.AddKeyWrite: keywrite: invalid layout: slot count 1000 is not a power of two in 1..2^32"},
		{ki, keyincr.ErrLayout, "collector.AddKeyIncrement: keyincr: invalid layout: slot count 1000 is not a power of two in 1..2^32"},
		{pc, postcard.ErrLayout, "collector.AddPostcard: postcard: invalid layout: 1000 chunks, want a power of two"},
		{al, appendlist.ErrLayout, "collector.AddAppend: appendlist: invalid layout: 1000 entries per list, want a power of two up to 2^30"},
	} {
		if e.err == nil || e.err.Error() != e.want || !errors.Is(e.err, e.sentinel) {
			t.Errorf("%v\nwant %s", e.err, e.want)
		}
	}
}
