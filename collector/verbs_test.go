package collector

import (
	"errors"
	"net/netip"
	"testing"

	"github.com/dtakit/dtakit/dta"
	"github.com/dtakit/dtakit/keywrite"
	"github.com/dtakit/dtakit/rocev2/target"
	"github.com/dtakit/dtakit/verbs"
)

func TestVerbsAccess(t *testing.T) {
	for a, want := range map[target.Access]verbs.Access{
		target.RemoteWrite:                       verbs.AccessLocalWrite | verbs.AccessRemoteRead | verbs.AccessRemoteWrite,
		target.RemoteAtomic:                      verbs.AccessLocalWrite | verbs.AccessRemoteRead | verbs.AccessRemoteAtomic,
		target.RemoteWrite | target.RemoteAtomic: verbs.AccessRemote,
	} {
		if got := verbsAccess(a); got != want {
			t.Errorf("verbsAccess(%v) = %#x, want %#x", a, got, want)
		}
	}
}

// TestVerbsBackendRefusesWithoutDevice: where there is no RDMA device, the
// verbs backend does not start, and says why.
func TestVerbsBackendRefusesWithoutDevice(t *testing.T) {
	if devs, err := verbs.Devices(); err == nil {
		t.Skipf("this machine has RDMA devices (%v): the device tests cover the verbs backend", devs)
	}
	_, err := New(Config{Addr: netip.MustParseAddrPort("127.0.0.1:4791"), Backend: BackendVerbs})
	if !errors.Is(err, ErrNoRDMA) {
		t.Fatalf("New with the verbs backend and no device: %v, want ErrNoRDMA", err)
	}
	if !errors.Is(err, verbs.ErrNoDevice) && !errors.Is(err, verbs.ErrNotSupported) {
		t.Fatalf("%v does not say why (no device, or no verbs support)", err)
	}
	t.Log(err)
}

func TestUnknownBackend(t *testing.T) {
	if _, err := New(Config{Backend: 7}); !errors.Is(err, ErrConfig) {
		t.Fatalf("backend 7: %v, want ErrConfig", err)
	}
}

// TestReferenceAdvertisement: on request an instance advertises the
// prototype's 16 bytes, naming the same region.
func TestReferenceAdvertisement(t *testing.T) {
	c, err := New(Config{Addr: netip.MustParseAddrPort("127.0.0.1:0"), ReferenceAdvertisement: true})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	l := keywrite.Layout{Slots: 1024, DataSize: 4}
	err = l.Validate()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.AddKeyWrite(l); err != nil {
		t.Fatal(err)
	}
	in := c.Instances()[0]
	if len(in.Advertisement) != 16 {
		t.Fatalf("advertisement of %d bytes, want the prototype's 16", len(in.Advertisement))
	}
	ad, err := dta.ParseAdvertisement(in.Advertisement)
	if err != nil || !ad.IsReference() || ad.VA != in.VA || ad.RKey != in.RKey || ad.Length != in.Length {
		t.Fatalf("advertisement %+v, %v; instance %+v", ad, err, in)
	}
}
