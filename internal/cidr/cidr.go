// Package cidr holds the prefix helpers that the annotation and
// loadbalancer packages share: one canonical order and one list form, so
// that an annotation's canonical value and a load balancer's source
// ranges are written the same way.
package cidr

import (
	"cmp"
	"net/netip"
	"strings"
)

// Compare orders prefixes by address (IPv4 before IPv6), then by length.
func Compare(a, b netip.Prefix) int {
	return cmp.Or(a.Addr().Compare(b.Addr()), cmp.Compare(a.Bits(), b.Bits()))
}

// Join writes ps comma-separated without spaces ("10.0.0.0/8,::/0").
func Join(ps []netip.Prefix) string {
	var b strings.Builder
	for i, p := range ps {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(p.String())
	}
	return b.String()
}
