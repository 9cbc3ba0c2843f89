// Package netguard holds the address lists that say who may send to
// dtakit's daemons: translators to a collector, reporters to a
// translator.
package netguard

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"
)

// ErrConfig is wrapped by every configuration error of this package.
var ErrConfig = errors.New("netguard: bad configuration")

// ParsePrefixes parses addresses ("127.0.0.1", a single host) and
// prefixes ("10.0.0.0/24"). Nil in, nil out: the caller's default
// applies.
func ParsePrefixes(what string, list []string) ([]netip.Prefix, error) {
	if list == nil {
		return nil, nil
	}
	out := make([]netip.Prefix, 0, len(list))
	for _, s := range list {
		s = strings.TrimSpace(s)
		if strings.Contains(s, "/") {
			p, err := netip.ParsePrefix(s)
			if err != nil {
				return nil, fmt.Errorf("%w: %s: %w", ErrConfig, what, err)
			}
			out = append(out, p.Masked())
			continue
		}
		a, err := netip.ParseAddr(s)
		if err != nil {
			return nil, fmt.Errorf("%w: %s: %q is neither an address nor a prefix", ErrConfig, what, s)
		}
		a = a.Unmap()
		out = append(out, netip.PrefixFrom(a, a.BitLen()))
	}
	return out, nil
}

// Contains reports whether a lies in one of ps.
func Contains(ps []netip.Prefix, a netip.Addr) bool {
	a = a.Unmap()
	for _, p := range ps {
		if p.Contains(a) {
			return true
		}
	}
	return false
}
