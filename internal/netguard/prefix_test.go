package netguard

import (
	"errors"
	"net/netip"
	"testing"
)

func TestParsePrefixes(t *testing.T) {
	got, err := ParsePrefixes("translators", []string{"127.0.0.1", " 10.0.1.7/24", "::1", "::ffff:10.9.9.9"})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"127.0.0.1/32", "10.0.1.0/24", "::1/128", "10.9.9.9/32"}
	if len(got) != len(want) {
		t.Fatalf("%v, want %v", got, want)
	}
	for i := range want {
		if got[i].String() != want[i] {
			t.Errorf("entry %d: %v, want %s", i, got[i], want[i])
		}
	}
	if p, err := ParsePrefixes("x", nil); p != nil || err != nil {
		t.Errorf("nil: %v %v, want nil, nil (the caller's default)", p, err)
	}
	for _, bad := range []string{"", "host.example", "10.0.0.0/33", "10.0.0.1:80"} {
		if _, err := ParsePrefixes("reporters", []string{bad}); !errors.Is(err, ErrConfig) {
			t.Errorf("%q: %v, want ErrConfig", bad, err)
		}
	}
	for a, in := range map[string]bool{"10.0.1.200": true, "::ffff:10.0.1.3": true, "10.0.2.1": false, "127.0.0.2": false, "127.0.0.1": true} {
		if Contains(got, netip.MustParseAddr(a)) != in {
			t.Errorf("Contains(%s) = %v", a, !in)
		}
	}
}
