package p4

import (
	"bytes"
	"errors"
	"flag"
	"net/netip"
	"os"
	"testing"

	"github.com/dtakit/dtakit/appendlist"
	"github.com/dtakit/dtakit/dta"
	"github.com/dtakit/dtakit/dta/tofino"
	"github.com/dtakit/dtakit/keywrite"
	"github.com/dtakit/dtakit/p4/internal/p4gen"
	"github.com/dtakit/dtakit/rocev2"
)

var update = flag.Bool("update", false, "rewrite the golden files")

func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	if *update {
		if err := os.WriteFile(name, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from the plan (go test ./p4 -run TestPlanGolden -update rewrites it):\n%s", name, got)
	}
}

func testConfig(t *testing.T) Config {
	conns := testConnections(t)
	second := conns[0]
	second.Index, second.TranslatorQPN, second.CollectorQPN = 2, 0x13, 0x777
	second.Dst = second.Dst.Next()
	return Config{
		Collectors:    []Collector{{Port: 8, Connections: conns}, {Port: 12, Connections: []Connection{second}}},
		MulticastBase: 100,
		CPUPort:       64,
		RatePPS:       1_000_000, BurstPackets: 10_000,
		ReportPorts: []uint16{0, 4, 127},
	}
}

// TestPlanGolden pins the control plane's output for two collectors (a
// Key-Write, a Key-Increment and an Append instance on one, a Key-Write
// instance on the other); the golden files were reviewed by hand.
func TestPlanGolden(t *testing.T) {
	p, err := NewPlan(testConfig(t))
	if err != nil {
		t.Fatal(err)
	}
	j, err := p.JSON()
	if err != nil {
		t.Fatal(err)
	}
	golden(t, "testdata/plan.json", j)
	golden(t, "testdata/plan.py", p.BfrtPython("translator"))
	// 256 collector choices: collector i%2 has 3 resp. 1 primitives.
	var instance, groups int
	for _, e := range p.Entries {
		if e.Table == "Ingress.instance" {
			instance++
		}
	}
	groups = len(p.Groups)
	if instance != 128*3+128 || groups != 2*4 || len(p.Nodes) != 2*(1+2+3+4) {
		t.Fatalf("%d instance entries, %d groups, %d nodes", instance, groups, len(p.Nodes))
	}
}

func TestPlanRejects(t *testing.T) {
	mutate := func(f func(c *Config)) error {
		cfg := testConfig(t)
		f(&cfg)
		_, err := NewPlan(cfg)
		return err
	}
	kw8 := keywrite.Layout{Slots: 1 << 10, DataSize: 8}
	geo8, _ := kw8.AppendBinary(nil)
	ref := keywrite.Layout{Slots: 1 << 10, DataSize: 4, Hasher: tofino.Reference}
	geoRef, _ := ref.AppendBinary(nil)
	small := appendlist.Layout{Lists: 16, Entries: 1 << p4gen.AppendEntryBits, EntrySize: 4, Batch: 4}
	apSmall, _ := small.AppendBinary(nil)
	for name, tc := range map[string]struct {
		f    func(c *Config)
		want error
	}{
		"no collectors":         {func(c *Config) { c.Collectors = nil }, ErrConfig},
		"index twice":           {func(c *Config) { c.Collectors[1].Connections[0].Index = 0 }, ErrConfig},
		"data size 8":           {func(c *Config) { c.Collectors[0].Connections[0].Ad.Geometry = geo8 }, ErrAdvertisement},
		"compiled for 5 bytes":  {func(c *Config) { c.Collectors[0].Connections[0].KeyWriteData = 5 }, ErrConfig},
		"reference hash":        {func(c *Config) { c.Collectors[0].Connections[0].Ad.Geometry = geoRef }, ErrAdvertisement},
		"wrong geometry":        {func(c *Config) { c.Collectors[0].Connections[0].Ad.Primitive = dta.OpAppend }, ErrAdvertisement},
		"postcard":              {func(c *Config) { c.Collectors[0].Connections[0].Ad.Primitive = dta.OpPostcard }, ErrAdvertisement},
		"append lists":          {func(c *Config) { c.Collectors[0].Connections[2].Ad.Geometry = apSmall }, ErrAdvertisement},
		"4 GiB boundary":        {func(c *Config) { c.Collectors[0].Connections[0].Ad.VA = 0x1FFFFF000 }, ErrAdvertisement},
		"counters unaligned":    {func(c *Config) { c.Collectors[0].Connections[1].Ad.VA += 4 }, ErrAdvertisement},
		"choice range":          {func(c *Config) { var ch [256]uint8; ch[7] = 2; c.Choice = &ch }, ErrConfig},
		"report ports, 2 pipes": {func(c *Config) { c.ReportPorts = []uint16{4, 128} }, ErrConfig},
		"report port 512":       {func(c *Config) { c.ReportPorts = []uint16{512} }, ErrConfig},
		"port 512":              {func(c *Config) { c.Collectors[1].Port = 512 }, ErrConfig},
		"CPU port 512":          {func(c *Config) { c.CPUPort = 512 }, ErrConfig},
		"IPv6":                  {func(c *Config) { c.Collectors[0].Connections[0].Dst = netip.MustParseAddr("::1") }, ErrConfig},
	} {
		if err := mutate(tc.f); !errors.Is(err, tc.want) {
			t.Errorf("%s: error %v, want %v", name, err, tc.want)
		}
	}
}

// TestPlanKeyWriteData: for every compiled choice of D, a Key-Write
// instance of D-byte data is accepted by a translator built for it
// (Connection.KeyWriteData, -DDTA_KW_DATA_BYTES=D) and refused by the
// default build; its writes carry 4 + D bytes and its ICRC constant is the
// one of frames of that shape.
func TestPlanKeyWriteData(t *testing.T) {
	for _, d := range p4gen.KeyWriteDataChoices {
		cfg := testConfig(t)
		l := keywrite.Layout{Slots: 1 << 10, DataSize: d}
		geo, _ := l.AppendBinary(nil)
		c := &cfg.Collectors[0].Connections[0]
		c.Ad.Geometry, c.KeyWriteData = geo, d
		p, err := NewPlan(cfg)
		if err != nil {
			t.Fatalf("D = %d: %v", d, err)
		}
		if mask := p.Entries[0].Data[9]; mask.Name != "slot_mask" || mask.Value != 1<<10-1 {
			t.Errorf("D = %d: %+v, want slot_mask 1023", d, mask)
		}
		k, err := c.ICRCConstant()
		if err != nil {
			t.Fatal(err)
		}
		s, err := c.check()
		if err != nil {
			t.Fatal(err)
		}
		data := bytes.Repeat([]byte{0xA5}, d)
		f := c.craft(s, 0xDEADBEEF, data, 1, 0, 77)
		if f.RETH.DMALength != uint32(4+d) || len(f.Payload) != 4+d {
			t.Errorf("D = %d: RETH length %d, payload %d bytes", d, f.RETH.DMALength, len(f.Payload))
		}
		// K is the ICRC of this shape with the hashed bytes zero, whatever
		// they hold: a frame of D bytes of data gives the same K.
		b, err := f.AppendTo(nil)
		if err != nil {
			t.Fatal(err)
		}
		if got, err := rocev2.ICRCBase(b[dta.EthernetLen:len(b)-rocev2.ICRCLen], icrcFrom); err != nil || got != k {
			t.Errorf("D = %d: ICRC constant %#x, the frame's %#x (%v)", d, k, got, err)
		}
		if d != p4gen.KeyWriteData {
			c.KeyWriteData = 0
			if _, err := NewPlan(cfg); !errors.Is(err, ErrAdvertisement) {
				t.Errorf("D = %d on the default build: %v, want ErrAdvertisement", d, err)
			}
		}
	}
}
