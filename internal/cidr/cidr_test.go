package cidr

import (
	"net/netip"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestCompareAndJoin(t *testing.T) {
	for _, tc := range []struct {
		name, reason string
		in           []string
		want         string
	}{
		{name: "empty", reason: "no prefixes is the empty list", in: nil, want: ""},
		{name: "families", reason: "IPv4 sorts before IPv6", in: []string{"::/0", "10.0.0.0/8"}, want: "10.0.0.0/8,::/0"},
		{name: "lengths", reason: "one address: the shorter prefix first", in: []string{"10.0.0.0/16", "10.0.0.0/8"}, want: "10.0.0.0/8,10.0.0.0/16"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var ps []netip.Prefix
			for _, s := range tc.in {
				ps = append(ps, netip.MustParsePrefix(s))
			}
			slices.SortFunc(ps, Compare)
			if diff := cmp.Diff(tc.want, Join(ps)); diff != "" {
				t.Errorf("%s (-want +got):\n%s", tc.reason, diff)
			}
		})
	}
}
