package collector_test

import (
	"context"
	"fmt"
	"net/netip"
	"time"

	"github.com/dtakit/dtakit/collector"
	"github.com/dtakit/dtakit/keyincr"
	"github.com/dtakit/dtakit/keywrite"
)

// A collector with a Key-Write and a Key-Increment instance, served on a
// loopback port. A translator connects to CM ports 40050 and 40051, receives
// each region's advertisement and writes; the stores answer queries over the
// same memory.
func Example() {
	c, err := collector.New(collector.Config{Addr: netip.MustParseAddrPort("127.0.0.1:0")})
	if err != nil {
		fmt.Println(err)
		return
	}
	kwl := keywrite.Layout{Slots: 1 << 16, DataSize: 4}
	kw, _ := c.AddKeyWrite(kwl)
	kil := keyincr.Layout{Slots: 1 << 16}
	ki, _ := c.AddKeyIncrement(kil)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	go c.Serve(ctx)

	for _, in := range c.Instances() {
		fmt.Printf("instance %d: %v on CM port %d, %d bytes\n", in.Index, in.Primitive, in.CMPort, in.Length)
	}
	// ... a translator writes; then:
	res, _ := kw.Query(42, 2, keywrite.Plurality)
	count, _ := ki.Query(42, 2)
	fmt.Println(res.Status, count)
	c.Close()
	// Output:
	// instance 0: keywrite on CM port 40050, 524288 bytes
	// instance 1: keyincrement on CM port 40051, 524288 bytes
	// empty 0
}
