package instances_test

import (
	"errors"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	nodehelpers "k8s.io/cloud-provider/node/helpers"

	"github.com/ccmkit/ccmkit/instances"
)

var fuzzTypes = []v1.NodeAddressType{v1.NodeInternalIP, v1.NodeExternalIP, v1.NodeInternalDNS, v1.NodeExternalDNS, v1.NodeHostName}

// decodeFuzzAddresses reads one address per line: a type digit 0-4 (any
// other first byte is used as the type itself) followed by the address.
func decodeFuzzAddresses(data string) []v1.NodeAddress {
	var out []v1.NodeAddress
	for line := range strings.SplitSeq(data, "\n") {
		if line == "" {
			continue
		}
		t := v1.NodeAddressType(line[:1])
		if d := line[0] - '0'; d < 5 {
			t = fuzzTypes[d]
		}
		out = append(out, v1.NodeAddress{Type: t, Address: line[1:]})
	}
	return out
}

// FuzzBuildAddresses checks that BuildAddresses never panics, reports every
// failure with one of its sentinels, and otherwise returns a canonical,
// de-duplicated list: a fixed point of itself and of upstream
// GetNodeAddressesFromNodeIP, independent of input order.
func FuzzBuildAddresses(f *testing.F) {
	f.Add("010.0.0.1\n0fd00::1\n1203.0.113.7\n4node-1", "", false, false, false)
	f.Add("010.0.0.2\n010.0.0.1\n0::ffff:10.0.0.1\n12001:DB8::1\n12001:db8::1\n2Node-1.Internal.\n4node-1", "10.0.0.1", false, false, false)
	f.Add("0fd00::2\n0fd00::1\n010.0.0.1\n110.0.0.1", "fd00::2,10.0.0.1", true, true, false)
	f.Add("1203.0.113.7\n3example.com", "203.0.113.7", false, false, true)
	f.Add("0fe80::1%eth0\n00.0.0.0\nXfoo\n0", "", false, false, false)
	f.Add("", "", false, false, true)
	f.Fuzz(func(t *testing.T, data, providedIP string, preferIPv6, dualStack, allowNoInternal bool) {
		in := decodeFuzzAddresses(data)
		opts := instances.AddressPolicy{ProvidedNodeIP: providedIP, PreferIPv6: preferIPv6, RequireDualStack: dualStack, AllowNoInternalIP: allowNoInternal}
		got, err := instances.BuildAddresses(in, opts)
		if err != nil {
			if !errors.Is(err, instances.ErrInvalidAddress) && !errors.Is(err, instances.ErrNoInternalIP) && !errors.Is(err, instances.ErrProvidedNodeIP) {
				t.Fatalf("error wraps no sentinel: %v", err)
			}
			if got != nil {
				t.Fatalf("error %v with a non-nil result %v", err, got)
			}
			return
		}
		seen := map[v1.NodeAddress]bool{}
		internals := 0
		for _, a := range got {
			if seen[a] {
				t.Fatalf("duplicate %v in %v", a, got)
			}
			seen[a] = true
			switch a.Type {
			case v1.NodeInternalIP, v1.NodeExternalIP:
				ip, perr := netip.ParseAddr(a.Address)
				if perr != nil || ip.String() != a.Address || ip.Is4In6() {
					t.Fatalf("IP %q is not in canonical form", a.Address)
				}
				if a.Type == v1.NodeInternalIP {
					internals++
				}
			case v1.NodeInternalDNS, v1.NodeExternalDNS, v1.NodeHostName:
				if a.Address != strings.ToLower(a.Address) || strings.HasSuffix(a.Address, ".") {
					t.Fatalf("name %q is not in canonical form", a.Address)
				}
			default:
				t.Fatalf("unknown type in result: %v", a)
			}
		}
		if internals == 0 && !allowNoInternal {
			t.Fatalf("no InternalIP in %v", got)
		}
		again, err := instances.BuildAddresses(got, opts)
		if err != nil {
			t.Fatalf("BuildAddresses of its own result %v: %v", got, err)
		}
		if diff := cmp.Diff(got, again); diff != "" {
			t.Fatalf("not a fixed point (-first +second):\n%s", diff)
		}
		reversed := slices.Clone(in)
		slices.Reverse(reversed)
		rev, err := instances.BuildAddresses(reversed, opts)
		if err != nil {
			t.Fatalf("reversed input fails: %v", err)
		}
		if diff := cmp.Diff(got, rev); diff != "" {
			t.Fatalf("order depends on input order (-forward +reversed):\n%s", diff)
		}
		if providedIP != "" {
			up, err := nodehelpers.GetNodeAddressesFromNodeIP(providedIP, got)
			if err != nil {
				t.Fatalf("upstream rejects our result %v for %q: %v", got, providedIP, err)
			}
			if len(up) == 0 {
				up = nil
			}
			if diff := cmp.Diff(got, up); diff != "" {
				t.Fatalf("upstream GetNodeAddressesFromNodeIP changes our result (-ours +upstream):\n%s", diff)
			}
		}
	})
}
