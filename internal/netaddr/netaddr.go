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

// NodeIP parses s as the IP address of a node (an instance's address, a
// route's target address) and returns it, or says what was expected: an
// IPv4 or IPv6 address in standard notation, without zone, an IPv4 address
// spelled as IPv4 (not IPv4-mapped IPv6, which instances.BuildAddresses
// rejects too), and unicast.
func NodeIP(s string) (netip.Addr, string) {
	ip, err := netip.ParseAddr(s)
	switch {
	case err != nil || ip.Zone() != "":
		return netip.Addr{}, "expected an IPv4 or IPv6 address without zone"
	case ip.Is4In6():
		return netip.Addr{}, "expected an IPv4 address in dotted form (" + ip.Unmap().String() + "), not IPv4-mapped IPv6"
	case ip.IsUnspecified() || ip.IsMulticast():
		return netip.Addr{}, "expected a unicast address"
	}
	return ip, ""
}
