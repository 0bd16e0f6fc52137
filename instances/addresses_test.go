package instances_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	nodehelpers "k8s.io/cloud-provider/node/helpers"

	"github.com/ccmkit/ccmkit/instances"
)

func addr(t v1.NodeAddressType, a string) v1.NodeAddress { return v1.NodeAddress{Type: t, Address: a} }

func internal(a string) v1.NodeAddress { return addr(v1.NodeInternalIP, a) }
func external(a string) v1.NodeAddress { return addr(v1.NodeExternalIP, a) }
func hostname(a string) v1.NodeAddress { return addr(v1.NodeHostName, a) }

func TestBuildAddresses(t *testing.T) {
	tests := []struct {
		name   string
		reason string
		in     []v1.NodeAddress
		opts   instances.AddressPolicy
		want   []v1.NodeAddress
		err    error
	}{
		{
			name:   "canonical order by type, family, value",
			reason: "types in InternalIP, ExternalIP, InternalDNS, ExternalDNS, Hostname order; IPv4 before IPv6; numeric order inside a family",
			in: []v1.NodeAddress{
				hostname("node-1"),
				addr(v1.NodeExternalDNS, "node-1.example.com"),
				external("203.0.113.7"),
				internal("fd00::10"),
				internal("10.0.0.9"),
				addr(v1.NodeInternalDNS, "node-1.internal"),
				internal("10.0.0.10"),
				internal("fd00::9"),
				external("2001:db8::7"),
			},
			want: []v1.NodeAddress{
				internal("10.0.0.9"), internal("10.0.0.10"), internal("fd00::9"), internal("fd00::10"),
				external("203.0.113.7"), external("2001:db8::7"),
				addr(v1.NodeInternalDNS, "node-1.internal"),
				addr(v1.NodeExternalDNS, "node-1.example.com"),
				hostname("node-1"),
			},
		},
		{
			name:   "PreferIPv6 puts IPv6 first within each type",
			reason: "IPv6-primary dual-stack clusters need an IPv6 first InternalIP",
			in:     []v1.NodeAddress{internal("10.0.0.1"), external("2001:db8::7"), internal("fd00::1"), external("203.0.113.7")},
			opts:   instances.AddressPolicy{PreferIPv6: true},
			want:   []v1.NodeAddress{internal("fd00::1"), internal("10.0.0.1"), external("2001:db8::7"), external("203.0.113.7")},
		},
		{
			name:   "duplicates removed, also in other spellings",
			reason: "2001:DB8:0::1 and 2001:db8::1 are one address, as are NODE-1. and node-1",
			in: []v1.NodeAddress{
				internal("10.0.0.1"), internal("10.0.0.1"),
				external("2001:DB8:0::1"), external("2001:db8::1"),
				hostname("NODE-1."), hostname("node-1"),
			},
			want: []v1.NodeAddress{internal("10.0.0.1"), external("2001:db8::1"), hostname("node-1")},
		},
		{
			name:   "same IP under two types kept twice",
			reason: "upstream keeps one entry per (type, address); GetNodeAddressesFromNodeIP handles both",
			in:     []v1.NodeAddress{external("10.0.0.1"), internal("10.0.0.1")},
			want:   []v1.NodeAddress{internal("10.0.0.1"), external("10.0.0.1")},
		},
		{
			name:   "provided node IP moves to the front and is the only one of its type",
			reason: "agrees with GetNodeAddressesFromNodeIP, as the node controller applies it",
			in:     []v1.NodeAddress{internal("10.0.0.1"), internal("10.0.0.2"), external("203.0.113.7"), hostname("node-1")},
			opts:   instances.AddressPolicy{ProvidedNodeIP: "10.0.0.2"},
			want:   []v1.NodeAddress{internal("10.0.0.2"), external("203.0.113.7"), hostname("node-1")},
		},
		{
			name:   "dual-stack provided node IPs in annotation order",
			reason: "an IPv6-first annotation makes IPv6 the primary even without PreferIPv6",
			in:     []v1.NodeAddress{internal("10.0.0.1"), internal("fd00::1"), internal("fd00::2"), external("203.0.113.7")},
			opts:   instances.AddressPolicy{ProvidedNodeIP: "fd00::2,10.0.0.1", RequireDualStack: true},
			want:   []v1.NodeAddress{internal("fd00::2"), internal("10.0.0.1"), external("203.0.113.7")},
		},
		{
			name:   "provided node IP matching an ExternalIP keeps the InternalIPs",
			reason: "only addresses of the matched type are filtered",
			in:     []v1.NodeAddress{internal("10.0.0.1"), external("203.0.113.8"), external("203.0.113.7")},
			opts:   instances.AddressPolicy{ProvidedNodeIP: "203.0.113.8"},
			want:   []v1.NodeAddress{external("203.0.113.8"), internal("10.0.0.1")},
		},
		{
			name:   "provided node IP in a sloppy spelling still matches",
			reason: "upstream parses the annotation with ParseIPSloppy and compares IPs, not strings",
			in:     []v1.NodeAddress{internal("10.0.0.1"), internal("10.0.0.2")},
			opts:   instances.AddressPolicy{ProvidedNodeIP: "010.000.000.002"},
			want:   []v1.NodeAddress{internal("10.0.0.2")},
		},
		{
			name:   "provided node IP not among the addresses",
			reason: "the node controller would refuse to initialize the Node",
			in:     []v1.NodeAddress{internal("10.0.0.1")},
			opts:   instances.AddressPolicy{ProvidedNodeIP: "10.0.0.99"},
			err:    instances.ErrProvidedNodeIP,
		},
		{
			name:   "provided node IP does not parse",
			reason: "upstream ParseNodeIPAnnotation rejects it",
			in:     []v1.NodeAddress{internal("10.0.0.1")},
			opts:   instances.AddressPolicy{ProvidedNodeIP: "not-an-ip"},
			err:    instances.ErrProvidedNodeIP,
		},
		{
			name:   "single-family provided IP with RequireDualStack",
			reason: "the filter drops the other family's InternalIP, which dual-stack forbids",
			in:     []v1.NodeAddress{internal("10.0.0.1"), internal("fd00::1")},
			opts:   instances.AddressPolicy{ProvidedNodeIP: "10.0.0.1", RequireDualStack: true},
			err:    instances.ErrNoInternalIP,
		},
		{
			name:   "no InternalIP",
			reason: "the contract needs at least one InternalIP",
			in:     []v1.NodeAddress{external("203.0.113.7"), hostname("node-1")},
			err:    instances.ErrNoInternalIP,
		},
		{
			name:   "no addresses at all",
			reason: "nothing is not enough either",
			err:    instances.ErrNoInternalIP,
		},
		{
			name:   "no InternalIP allowed",
			reason: "AllowNoInternalIP turns the requirement off",
			in:     []v1.NodeAddress{hostname("node-1"), external("203.0.113.7")},
			opts:   instances.AddressPolicy{AllowNoInternalIP: true},
			want:   []v1.NodeAddress{external("203.0.113.7"), hostname("node-1")},
		},
		{
			name:   "empty input allowed is nil",
			reason: "an empty result is nil",
			opts:   instances.AddressPolicy{AllowNoInternalIP: true},
			want:   nil,
		},
		{
			name:   "dual-stack required and present",
			reason: "one InternalIP of each family",
			in:     []v1.NodeAddress{internal("fd00::1"), internal("10.0.0.1")},
			opts:   instances.AddressPolicy{RequireDualStack: true},
			want:   []v1.NodeAddress{internal("10.0.0.1"), internal("fd00::1")},
		},
		{
			name:   "dual-stack required, IPv6 only external",
			reason: "an ExternalIP does not count as the IPv6 InternalIP",
			in:     []v1.NodeAddress{internal("10.0.0.1"), external("2001:db8::1")},
			opts:   instances.AddressPolicy{RequireDualStack: true},
			err:    instances.ErrNoInternalIP,
		},
		{name: "unknown type", reason: "only the five NodeAddressTypes exist", in: []v1.NodeAddress{internal("10.0.0.1"), addr("PublicIP", "1.2.3.4")}, err: instances.ErrInvalidAddress},
		{name: "empty type", reason: "a type is required", in: []v1.NodeAddress{addr("", "1.2.3.4")}, err: instances.ErrInvalidAddress},
		{name: "empty address", reason: "a value is required", in: []v1.NodeAddress{internal("")}, err: instances.ErrInvalidAddress},
		{name: "not an IP", reason: "IP types hold IPs", in: []v1.NodeAddress{internal("node-1")}, err: instances.ErrInvalidAddress},
		{name: "CIDR", reason: "an address, not a prefix", in: []v1.NodeAddress{internal("10.0.0.1/24")}, err: instances.ErrInvalidAddress},
		{name: "leading zeros", reason: "ambiguous (octal?) spellings are rejected", in: []v1.NodeAddress{internal("010.0.0.1")}, err: instances.ErrInvalidAddress},
		{name: "zone", reason: "a zone is meaningless off the host", in: []v1.NodeAddress{internal("fe80::1%eth0")}, err: instances.ErrInvalidAddress},
		{name: "unspecified IPv4", reason: "0.0.0.0 is not a node address", in: []v1.NodeAddress{internal("0.0.0.0")}, err: instances.ErrInvalidAddress},
		{name: "unspecified IPv6", reason: ":: is not a node address", in: []v1.NodeAddress{internal("10.0.0.1"), external("::")}, err: instances.ErrInvalidAddress},
		{name: "multicast", reason: "not a unicast address", in: []v1.NodeAddress{internal("224.0.0.1")}, err: instances.ErrInvalidAddress},
		{name: "IPv4-mapped IPv6", reason: "one spelling per address, IPv4 as IPv4 (the fake and Kubernetes' strict IP validation refuse ::ffff:a.b.c.d)", in: []v1.NodeAddress{internal("::ffff:10.0.0.1")}, err: instances.ErrInvalidAddress},
		{name: "IPv4-mapped IPv6 beside its IPv4", reason: "not silently merged into the IPv4 address", in: []v1.NodeAddress{internal("10.0.0.1"), external("::ffff:10.0.0.1")}, err: instances.ErrInvalidAddress},
		{name: "whitespace", reason: "no trimming of IPs", in: []v1.NodeAddress{internal(" 10.0.0.1")}, err: instances.ErrInvalidAddress},
		{name: "bad DNS name", reason: "DNS types hold DNS-1123 subdomains", in: []v1.NodeAddress{internal("10.0.0.1"), addr(v1.NodeInternalDNS, "node_1.internal")}, err: instances.ErrInvalidAddress},
		{name: "bad hostname", reason: "hostnames are DNS-1123 subdomains", in: []v1.NodeAddress{internal("10.0.0.1"), hostname("-node")}, err: instances.ErrInvalidAddress},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := append([]v1.NodeAddress(nil), tt.in...)
			got, err := instances.BuildAddresses(in, tt.opts)
			if !errors.Is(err, tt.err) {
				t.Fatalf("BuildAddresses(%v): error %v, want %v (%s)", tt.in, err, tt.err, tt.reason)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("BuildAddresses(%v) (-want +got):\n%s\n(%s)", tt.in, diff, tt.reason)
			}
			if diff := cmp.Diff(tt.in, in); diff != "" {
				t.Errorf("BuildAddresses modified its input (-before +after):\n%s", diff)
			}
			if err != nil {
				return
			}
			// Fixed point: the result goes through unchanged, and so through
			// the node controller's own GetNodeAddressesFromNodeIP.
			again, err := instances.BuildAddresses(got, tt.opts)
			if err != nil {
				t.Fatalf("BuildAddresses of its own result: %v", err)
			}
			if diff := cmp.Diff(got, again); diff != "" {
				t.Errorf("BuildAddresses of its own result (-first +second):\n%s", diff)
			}
			if tt.opts.ProvidedNodeIP != "" {
				up, err := nodehelpers.GetNodeAddressesFromNodeIP(tt.opts.ProvidedNodeIP, got)
				if err != nil {
					t.Fatalf("upstream GetNodeAddressesFromNodeIP on the result: %v", err)
				}
				if diff := cmp.Diff(got, up); diff != "" {
					t.Errorf("upstream GetNodeAddressesFromNodeIP changed the result (-ours +upstream):\n%s", diff)
				}
			}
		})
	}
}

// TestBuildAddressesErrors: each error names the address (its index, type
// and value, cut to a bounded length) and says what was expected.
func TestBuildAddressesErrors(t *testing.T) {
	huge := strings.Repeat("1", 1<<20)
	tests := []struct {
		name, reason string
		in           []v1.NodeAddress
		opts         instances.AddressPolicy
		want         error
		// exact is the whole message; otherwise mention lists parts of it.
		exact   string
		mention []string
	}{
		{name: "octet over 255", reason: "netip's reason is kept for a short value",
			in: []v1.NodeAddress{internal("10.0.0.1"), internal("10.0.0.300")}, want: instances.ErrInvalidAddress,
			exact: `invalid node address: addresses[1] (type "InternalIP", address "10.0.0.300"): expected an IPv4 or IPv6 address: ParseAddr("10.0.0.300"): IPv4 field has value >255`},
		{name: "IPv4-mapped IPv6", reason: "refused, not rewritten: the fake and Kubernetes' strict IP validation refuse that spelling",
			in: []v1.NodeAddress{internal("10.0.0.1"), external("::ffff:10.0.0.1")}, want: instances.ErrInvalidAddress,
			exact: `invalid node address: addresses[1] (type "ExternalIP", address "::ffff:10.0.0.1"): expected an IPv4 address in dotted form (10.0.0.1), not IPv4-mapped IPv6, a spelling Kubernetes' strict IP validation refuses`},
		{name: "empty address", reason: "says what was expected",
			in: []v1.NodeAddress{internal("")}, want: instances.ErrInvalidAddress,
			exact: `invalid node address: addresses[0] (type "InternalIP", address ""): empty: expected an address`},
		{name: "address of 1 MiB", reason: "the value is quoted cut, and netip's error, which quotes it whole, left out",
			in: []v1.NodeAddress{internal(huge)}, want: instances.ErrInvalidAddress,
			mention: []string{"addresses[0]", `"1111`, "(1048576 bytes)", "expected an IPv4 or IPv6 address"}},
		{name: "type of 1 MiB", reason: "the type is quoted cut too",
			in: []v1.NodeAddress{addr(v1.NodeAddressType(huge), "10.0.0.1")}, want: instances.ErrInvalidAddress,
			mention: []string{"addresses[0]", `(type "1111`, "(1048576 bytes)", "expected one of InternalIP"}},
		{name: "zone of 1 MiB", reason: "the zone is quoted cut",
			in: []v1.NodeAddress{internal("fe80::1%" + huge)}, want: instances.ErrInvalidAddress,
			mention: []string{"addresses[0]", "without a zone", "(1048576 bytes)"}},
		{name: "provided node IP not among the addresses", reason: "the annotation is named with what was expected",
			in: []v1.NodeAddress{internal("10.0.0.4")}, opts: instances.AddressPolicy{ProvidedNodeIP: "10.0.0.99"}, want: instances.ErrProvidedNodeIP,
			mention: []string{`alpha.kubernetes.io/provided-node-ip="10.0.0.99"`, "expected an IP address", "among the node's addresses"}},
		{name: "provided node IP of 1 MiB", reason: "the annotation, and the upstream error quoting it, are cut",
			in: []v1.NodeAddress{internal("10.0.0.4")}, opts: instances.AddressPolicy{ProvidedNodeIP: huge}, want: instances.ErrProvidedNodeIP,
			mention: []string{`provided-node-ip="1111`, "(1048576 bytes)", "expected an IP address"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := instances.BuildAddresses(tt.in, tt.opts)
			if !errors.Is(err, tt.want) || got != nil {
				t.Fatalf("BuildAddresses = %v, %.200v; want an error wrapping %v (%s)", got, err, tt.want, tt.reason)
			}
			if tt.exact != "" && err.Error() != tt.exact {
				t.Errorf("error:\n got %s\nwant %s\n(%s)", err, tt.exact, tt.reason)
			}
			for _, m := range tt.mention {
				if !strings.Contains(err.Error(), m) {
					t.Errorf("error %.300q; want it to contain %q (%s)", err, m, tt.reason)
				}
			}
			if n := len(err.Error()); n > 1024 {
				t.Errorf("error of %d bytes; want at most 1024 (values quoted cut)", n)
			}
		})
	}
}

// TestBuildAddressesStableUnderPermutation checks the promise the node
// controller needs: the same set in any order gives the same slice.
func TestBuildAddressesStableUnderPermutation(t *testing.T) {
	set := []v1.NodeAddress{
		internal("10.0.0.2"), internal("fd00::1"), internal("10.0.0.1"), external("203.0.113.7"),
		external("2001:db8::7"), hostname("node-1"), addr(v1.NodeInternalDNS, "node-1.internal"),
	}
	for _, opts := range []instances.AddressPolicy{{}, {PreferIPv6: true}, {ProvidedNodeIP: "fd00::1,10.0.0.2"}} {
		want, err := instances.BuildAddresses(set, opts)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		permute(set, 0, func(p []v1.NodeAddress) {
			n++
			got, err := instances.BuildAddresses(p, opts)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Fatalf("opts %+v, input %v (-want +got):\n%s", opts, p, diff)
			}
		})
		if n != 5040 {
			t.Fatalf("checked %d permutations, want 7! = 5040", n)
		}
	}
}

// permute calls f with every permutation of s[k:] (Heap-free swap recursion).
func permute(s []v1.NodeAddress, k int, f func([]v1.NodeAddress)) {
	if k == len(s) {
		f(s)
		return
	}
	for i := k; i < len(s); i++ {
		s[k], s[i] = s[i], s[k]
		permute(s, k+1, f)
		s[k], s[i] = s[i], s[k]
	}
}
