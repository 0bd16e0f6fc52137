package netaddr

import (
	"net/netip"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestLast(t *testing.T) {
	tests := []struct {
		name   string
		reason string
		prefix netip.Prefix
		want   string
	}{
		{name: "IPv4 /24", reason: "the broadcast address", prefix: netip.MustParsePrefix("10.0.0.0/24"), want: "10.0.0.255"},
		{name: "IPv4 /20", reason: "a prefix that ends inside a byte", prefix: netip.MustParsePrefix("10.1.16.0/20"), want: "10.1.31.255"},
		{name: "IPv4 unmasked", reason: "host bits already set stay set: no masking needed", prefix: netip.PrefixFrom(netip.MustParseAddr("10.0.0.7"), 30), want: "10.0.0.7"},
		{name: "IPv4 /32", reason: "a single address is its own last", prefix: netip.MustParsePrefix("192.0.2.1/32"), want: "192.0.2.1"},
		{name: "IPv4 /0", reason: "every bit is a host bit", prefix: netip.MustParsePrefix("0.0.0.0/0"), want: "255.255.255.255"},
		{name: "IPv6 /64", reason: "the interface identifier all ones", prefix: netip.MustParsePrefix("fd00:1::/64"), want: "fd00:1::ffff:ffff:ffff:ffff"},
		{name: "IPv6 /125", reason: "a prefix that ends inside the last byte", prefix: netip.MustParsePrefix("fd00::8/125"), want: "fd00::f"},
		{name: "IPv6 /128", reason: "a single address", prefix: netip.MustParsePrefix("fd00::1/128"), want: "fd00::1"},
		{name: "invalid", reason: "the zero Prefix has no addresses", prefix: netip.Prefix{}, want: "invalid IP"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, Last(tt.prefix).String()); diff != "" {
				t.Errorf("Last(%v) (-want +got):\n%s\n%s", tt.prefix, diff, tt.reason)
			}
		})
	}
}

func TestNodeIP(t *testing.T) {
	tests := []struct {
		in, want, problem string
	}{
		{in: "10.0.0.1", want: "10.0.0.1"},
		{in: "2001:db8::1", want: "2001:db8::1"},
		{in: "not-an-ip", problem: "expected an IPv4 or IPv6 address without zone"},
		{in: "fe80::1%eth0", problem: "expected an IPv4 or IPv6 address without zone"},
		{in: "::ffff:10.0.0.1", problem: "expected an IPv4 address in dotted form (10.0.0.1), not IPv4-mapped IPv6"},
		{in: "0.0.0.0", problem: "expected a unicast address"},
		{in: "224.0.0.1", problem: "expected a unicast address"},
	}
	for _, tc := range tests {
		ip, problem := NodeIP(tc.in)
		got := ""
		if ip.IsValid() {
			got = ip.String()
		}
		if got != tc.want || problem != tc.problem {
			t.Errorf("NodeIP(%q) = %q, %q; want %q, %q", tc.in, got, problem, tc.want, tc.problem)
		}
	}
}
