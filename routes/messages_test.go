package routes_test

import (
	"errors"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/types"
	cloudprovider "k8s.io/cloud-provider"

	"github.com/ccmkit/ccmkit/internal/clip"
	"github.com/ccmkit/ccmkit/routes"
)

// maxMessage bounds the errors of TestTableErrorsQuoteValuesCut: values
// are quoted cut to clip.MaxQuoted bytes and a length note, so a 1 MiB
// value never makes a message near that size. An error quotes at most
// three values (a route's name, CIDR and node), in a sentence of a few
// words.
const maxMessage = 3*(clip.MaxQuoted+32) + 256

// TestTableErrorsQuoteValuesCut gives the Table huge values in each place
// its errors quote one: the error still names the field and shows the
// value's start quoted, and stays short.
func TestTableErrorsQuoteValuesCut(t *testing.T) {
	huge := strings.Repeat("0", 1<<20)
	bigCIDR, bigNode := "10.244.2.0/24"+huge, "n"+huge
	failing := errors.New("cloud quota exceeded")
	cases := []struct {
		name, reason string
		// kinds are the backends the case runs on; nil means both.
		kinds []string
		cfg   routes.Options
		// setup, when set, prepares the driver of a per-route Table.
		setup func(d *memRoutes)
		call  func(tbl *routes.Table) error
		want  []string
	}{
		{name: "CIDR", reason: "an unparsable destination was quoted whole: it is quoted cut to clip.MaxQuoted bytes, as every value ccmkit quotes",
			call: func(tbl *routes.Table) error { return tbl.CreateRoute(t.Context(), cluster, uidA, route("n", bigCIDR)) },
			want: []string{"route.DestinationCIDR " + strconv.Quote(clip.Quoted(bigCIDR)) + ": expected a CIDR"}},
		{name: "CIDR without target", reason: "the CIDR heads the message of a missing target node",
			call: func(tbl *routes.Table) error { return tbl.CreateRoute(t.Context(), cluster, uidA, route("", bigCIDR)) },
			want: []string{`routes: CreateRoute: route "10.244.2.0/2400000`, "route.TargetNode is empty", "expected a node name"}},
		{name: "CIDR without name hint", reason: "the CIDR heads the message of a missing nameHint",
			call: func(tbl *routes.Table) error { return tbl.CreateRoute(t.Context(), cluster, "", route("n", bigCIDR)) },
			want: []string{`routes: CreateRoute: route "10.244.2.0/2400000`, "nameHint is empty", "expected the node UID"}},
		{name: "target node of an IPv6 route", reason: "an IPv4Only Table names the node of the route it refuses",
			cfg: routes.Options{IPv4Only: true},
			call: func(tbl *routes.Table) error {
				return tbl.CreateRoute(t.Context(), cluster, uidA, route(bigNode, "fd00::/64"))
			},
			want: []string{`route.DestinationCIDR "fd00::/64" for node "n0000`, "expected IPv4"}},
		{name: "target node of a failed create", reason: "a driver error is wrapped with the route's node",
			kinds: []string{"per-route"}, setup: func(d *memRoutes) { d.createErr = failing },
			call: func(tbl *routes.Table) error {
				return tbl.CreateRoute(t.Context(), cluster, uidA, route(bigNode, "10.244.1.0/24"))
			},
			want: []string{`-> node "n0000`, "cloud quota exceeded"}},
		{name: "route of a failed delete", reason: "DeleteRoute's route comes from the caller: its name, CIDR and node are quoted cut",
			kinds: []string{"per-route"}, setup: func(d *memRoutes) { d.deleteErr = failing },
			call: func(tbl *routes.Table) error {
				return tbl.DeleteRoute(t.Context(), cluster, &cloudprovider.Route{Name: "r" + huge, TargetNode: types.NodeName(bigNode), DestinationCIDR: bigCIDR})
			},
			want: []string{`routes: DeleteRoute: route "r0000`, `"10.244.2.0/2400000`, `-> node "n0000`, "cloud quota exceeded"}},
		{name: "route of a failed look-up", reason: "a route without a name is looked up by listing",
			kinds: []string{"per-route"}, setup: func(d *memRoutes) { d.listErr = failing },
			call: func(tbl *routes.Table) error {
				return tbl.DeleteRoute(t.Context(), cluster, &cloudprovider.Route{TargetNode: types.NodeName(bigNode), DestinationCIDR: bigCIDR})
			},
			want: []string{`routes: DeleteRoute: route "10.244.2.0/2400000`, `-> node "n0000`, "list routes to find it"}},
		{name: "delete without cluster", reason: "the route's name heads the message",
			call: func(tbl *routes.Table) error {
				return tbl.DeleteRoute(t.Context(), "", &cloudprovider.Route{Name: "r" + huge, DestinationCIDR: "10.244.1.0/24"})
			},
			want: []string{`routes: DeleteRoute: route "r0000`, "clusterName is empty"}},
	}
	for _, b := range backends {
		for _, tc := range cases {
			if tc.kinds != nil && tc.kinds[0] != b.name {
				continue
			}
			t.Run(b.name+"/"+tc.name, func(t *testing.T) {
				var tbl *routes.Table
				if tc.setup != nil {
					d := &memRoutes{}
					tc.setup(d)
					var err error
					if tbl, err = routes.NewTable(d, tc.cfg); err != nil {
						t.Fatal(err)
					}
				} else {
					tbl, _, _ = b.make(t, tc.cfg)
				}
				err := tc.call(tbl)
				if err == nil {
					t.Fatalf("%s: accepted", tc.reason)
				}
				msg := err.Error()
				shown := msg[:min(len(msg), 300)]
				for _, w := range tc.want {
					if !strings.Contains(msg, w) {
						t.Errorf("%s: error %q does not contain %q", tc.reason, shown, w)
					}
				}
				if len(msg) > maxMessage {
					t.Errorf("%s: error of %d bytes; want at most %d: %q", tc.reason, len(msg), maxMessage, shown)
				}
			})
		}
	}
}

// TestTableEqualDestinationError checks the error of a CreateRoute whose
// destination network another route of the whole table already has: it
// names the field, quotes the caller's value, says what was expected and
// which route has the destination, and wraps ErrCIDRInUse.
func TestTableEqualDestinationError(t *testing.T) {
	seed := routes.Entry{Name: "other", Cluster: "blue", DestinationCIDR: "10.244.1.0/24", TargetNode: "node-1"}
	cases := []struct {
		name, reason, cidr, want string
	}{
		{"equal", "the same spelling as the other route's", "10.244.1.0/24",
			`routes: CreateRoute: route.DestinationCIDR "10.244.1.0/24" for node "node-2": route "other" of cluster "blue" -> node "node-1" has the destination "10.244.1.0/24": expected a destination no other route has (the route controller deletes a stale route of its cluster in the same reconcile): destination CIDR is already routed elsewhere`},
		{"same network", "host bits set: the same network spelled another way, quoted as the caller wrote it", "10.244.1.7/24",
			`routes: CreateRoute: route.DestinationCIDR "10.244.1.7/24" for node "node-2": route "other" of cluster "blue" -> node "node-1" has the destination "10.244.1.0/24": expected a destination no other route has (the route controller deletes a stale route of its cluster in the same reconcile): destination CIDR is already routed elsewhere`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d := &memTable{entries: []routes.Entry{seed}}
			tbl, err := routes.NewWholeTable(d, routes.Options{})
			if err != nil {
				t.Fatal(err)
			}
			err = tbl.CreateRoute(t.Context(), cluster, uidB, route("node-2", tc.cidr))
			if !errors.Is(err, routes.ErrCIDRInUse) {
				t.Fatalf("%s: CreateRoute: %v; want ErrCIDRInUse", tc.reason, err)
			}
			if diff := cmp.Diff(tc.want, err.Error()); diff != "" {
				t.Errorf("%s: error (-want +got):\n%s", tc.reason, diff)
			}
			if diff := cmp.Diff([]routes.Entry{seed}, d.snapshot()); diff != "" {
				t.Errorf("%s: the table changed (-want +got):\n%s", tc.reason, diff)
			}
		})
	}
}
