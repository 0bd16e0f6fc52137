// Package netaddr holds the IP prefix arithmetic that more than one ccmkit
// block needs (the route differ's overlap test, the fake's address pools),
// written once. It is internal: no ccmkit API exposes it.
package netaddr

import "net/netip"

// Last returns the last address of p: p's address with every host bit (the
// bits after p.Bits()) set, so it need not be masked first. For an IPv4
// prefix it is the broadcast address. An invalid p gives the zero
// netip.Addr. It is safe for concurrent use.
func Last(p netip.Prefix) netip.Addr {
	if !p.IsValid() {
		return netip.Addr{}
	}
	b := p.Addr().AsSlice()
	for i := p.Bits(); i < len(b)*8; i++ {
		b[i/8] |= 0x80 >> (i % 8)
	}
	a, _ := netip.AddrFromSlice(b)
	return a
}
