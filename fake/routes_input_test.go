package fake_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	cloudprovider "k8s.io/cloud-provider"
	"k8s.io/cloud-provider/api"

	"github.com/ccmkit/ccmkit/fake"
	"github.com/ccmkit/ccmkit/routes"
)

// maxRouteError bounds the length of a route error: values are quoted cut
// to a bounded length.
const maxRouteError = 1500

// checkRejected fails the test unless err is a refusal wrapping want,
// naming every string of mention, bounded in length and not a throttle.
func checkRejected(t *testing.T, what string, err, want error, mention []string, reason string) {
	t.Helper()
	if !errors.Is(err, want) {
		t.Fatalf("%s = %v; want an error wrapping %q (%s)", what, err, want, reason)
	}
	for _, m := range mention {
		if !strings.Contains(err.Error(), m) {
			t.Errorf("%s = %q; want it to name %q (%s)", what, err, m, reason)
		}
	}
	if n := len(err.Error()); n > maxRouteError {
		t.Errorf("%s: error of %d bytes; want at most %d (values cut to a bounded length)", what, n, maxRouteError)
	}
	var retry *api.RetryError
	if errors.As(err, &retry) {
		t.Errorf("%s = %v wraps an *api.RetryError; want a refusal that is not retried as a throttle", what, err)
	}
}

// routeTo is a route to node-01 (an instance of cloudWithNodes) with
// destination cidr.
func routeTo(cidr string) *cloudprovider.Route {
	return &cloudprovider.Route{TargetNode: "node-01", DestinationCIDR: cidr}
}

// TestCreateRouteRejectsBadInput: CreateRoute refuses what no cloud would
// route, with an error naming the field, the value (bounded) and what was
// expected; the refusal writes nothing, is not retried as a throttle, and
// leaves the cloud as it was. The last cases are accepted: the rules do not
// refuse what the route controller legitimately sends.
func TestCreateRouteRejectsBadInput(t *testing.T) {
	long := strings.Repeat("a", 10_000)
	tests := []struct {
		name, reason string
		// setup runs on the fresh cloud (two instances, node-01 and
		// node-02) before the call.
		setup func(t *testing.T, c *fake.Cloud, rt cloudprovider.Routes)
		route *cloudprovider.Route
		// want is the sentinel the error wraps; nil: accepted.
		want    error
		mention []string
	}{
		{name: "IPv4 default route", reason: "0.0.0.0/0 is a default route, not a pod route",
			route: routeTo("0.0.0.0/0"), want: routes.ErrInvalidRoute,
			mention: []string{"route.destinationCIDR", `"0.0.0.0/0"`, "prefix length above 0"}},
		{name: "IPv6 default route", reason: "::/0 neither",
			route: routeTo("::/0"), want: routes.ErrInvalidRoute,
			mention: []string{"route.destinationCIDR", `"::/0"`, "prefix length above 0"}},
		{name: "contains another route", reason: "a /16 over a node's /24 would take its traffic",
			setup: createRoute("node-02", "10.244.1.0/24"), route: routeTo("10.244.0.0/16"), want: routes.ErrCIDRInUse,
			mention: []string{"route.destinationCIDR", `"10.244.0.0/16"`, `contains "10.244.1.0/24"`, `of cluster "test-cluster"`}},
		{name: "inside another route", reason: "a /24 inside another node's /16 is as ambiguous",
			setup: createRoute("node-02", "10.244.0.0/16"), route: routeTo("10.244.1.0/24"), want: routes.ErrCIDRInUse,
			mention: []string{"route.destinationCIDR", `"10.244.1.0/24"`, `lies in "10.244.0.0/16"`}},
		{name: "IPv6 inside another route", reason: "overlap is checked per family too",
			setup: createRoute("node-02", "fd00:10:244::/48"), route: routeTo("fd00:10:244:1::/64"), want: routes.ErrCIDRInUse,
			mention: []string{`"fd00:10:244:1::/64"`, `lies in "fd00:10:244::/48"`}},
		{name: "inside another cluster's route", reason: "one table for the whole network: another cluster's pod routes count",
			setup: addRoute(fake.Route{Cluster: "other", Name: "other-pods", DestinationCIDR: "10.245.0.0/16", TargetNode: "node-02"}),
			route: routeTo("10.245.3.0/24"), want: routes.ErrCIDRInUse,
			mention: []string{`lies in "10.245.0.0/16"`, `route "other-pods" of cluster "other"`}},
		{name: "IPv4-mapped IPv6 CIDR", reason: "the IPv4 network in another spelling, which the route controller would never list back",
			route: routeTo("::ffff:10.0.0.0/120"), want: routes.ErrInvalidRoute,
			mention: []string{"route.destinationCIDR", `"::ffff:10.0.0.0/120"`, "IPv4-mapped", "10.0.0.0/24"}},
		{name: "host bits set", reason: "a destination is a network address",
			route: routeTo("10.244.1.5/24"), want: routes.ErrInvalidRoute,
			mention: []string{"route.destinationCIDR", `"10.244.1.5/24"`, "host bits", "10.244.1.0/24"}},
		{name: "zone", reason: "a destination has no interface zone (the routes.Table refuses what does not parse)",
			route: routeTo("fe80::%eth0/64"), want: routes.ErrInvalidRoute,
			mention: []string{"route.DestinationCIDR", `"fe80::%eth0/64"`, "expected a CIDR"}},
		{name: "not a CIDR", reason: "the value is quoted with what was expected (by the routes.Table)",
			route: routeTo("nope"), want: routes.ErrInvalidRoute,
			mention: []string{"route.DestinationCIDR", `"nope"`, "expected a CIDR"}},
		{name: "target address not an IP", reason: "an InternalIP is an IP",
			route: &cloudprovider.Route{TargetNode: "node-01", DestinationCIDR: "10.244.1.0/24",
				TargetNodeAddresses: []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: "10.0.0.1"}, {Type: v1.NodeInternalIP, Address: "not-an-ip"}}},
			want: routes.ErrInvalidRoute, mention: []string{"route.targetNodeAddresses[1].address", `"not-an-ip"`, "expected an IPv4 or IPv6 address"}},
		{name: "target address IPv4-mapped", reason: "as instances.BuildAddresses, the fake takes IPv4 spelled as IPv4 only",
			route: &cloudprovider.Route{TargetNode: "node-01", DestinationCIDR: "10.244.1.0/24",
				TargetNodeAddresses: []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: "::ffff:10.0.0.1"}}},
			want: routes.ErrInvalidRoute, mention: []string{"route.targetNodeAddresses[0].address", `"::ffff:10.0.0.1"`, "IPv4-mapped", "10.0.0.1"}},
		{name: "target address of an unknown type", reason: "node address types are a closed set",
			route: &cloudprovider.Route{TargetNode: "node-01", DestinationCIDR: "10.244.1.0/24",
				TargetNodeAddresses: []v1.NodeAddress{{Type: "MagicIP", Address: "10.0.0.1"}}},
			want: routes.ErrInvalidRoute, mention: []string{"route.targetNodeAddresses[0].type", `"MagicIP"`, "InternalIP"}},
		{name: "target host name not a name", reason: "a Hostname address is a DNS name",
			route: &cloudprovider.Route{TargetNode: "node-01", DestinationCIDR: "10.244.1.0/24",
				TargetNodeAddresses: []v1.NodeAddress{{Type: v1.NodeHostName, Address: "not a name"}}},
			want: routes.ErrInvalidRoute, mention: []string{"route.targetNodeAddresses[0].address", `"not a name"`, "DNS-1123"}},
		{name: "node name with a slash", reason: "a Node name is a DNS-1123 subdomain",
			route: &cloudprovider.Route{TargetNode: "node/01", DestinationCIDR: "10.244.1.0/24"}, want: routes.ErrInvalidRoute,
			mention: []string{"route.targetNode", `"node/01"`, "DNS-1123"}},
		{name: "node name with NUL", reason: "control characters are quoted, not printed",
			route: &cloudprovider.Route{TargetNode: "node\x0001", DestinationCIDR: "10.244.1.0/24"}, want: routes.ErrInvalidRoute,
			mention: []string{"route.targetNode", `"node\x0001"`}},
		{name: "node name of 10k characters", reason: "a Node name has at most 253; the error quotes a bounded part",
			route: &cloudprovider.Route{TargetNode: types.NodeName(long), DestinationCIDR: "10.244.1.0/24"}, want: routes.ErrInvalidRoute,
			mention: []string{"route.targetNode", "(10000 bytes)", "253"}},

		{name: "accepted: the same route again", reason: "CreateRoute is idempotent: an equal route is the same route",
			setup: createRoute("node-01", "10.244.1.0/24"), route: routeTo("10.244.1.0/24")},
		{name: "accepted: inside a route of no cluster", reason: "a pod route is the more specific route under the network's default route",
			setup: addRoute(fake.Route{Name: "default", DestinationCIDR: "0.0.0.0/0", TargetNode: "gateway"}), route: routeTo("10.244.1.0/24")},
		{name: "accepted: beside another route", reason: "adjacent destinations do not overlap",
			setup: createRoute("node-02", "10.244.0.0/24"), route: routeTo("10.244.1.0/24")},
		{name: "accepted: non-canonical IPv6 spelling", reason: "the API server accepts it in spec.podCIDRs; it is stored verbatim",
			route: routeTo("FD00:10:244:1:0::/80")},
		{name: "accepted: every address type", reason: "a Node's addresses as the node controller sets them",
			route: &cloudprovider.Route{TargetNode: "node-01", DestinationCIDR: "10.244.1.0/24", TargetNodeAddresses: []v1.NodeAddress{
				{Type: v1.NodeInternalIP, Address: "10.0.0.1"}, {Type: v1.NodeExternalIP, Address: "2001:db8::1"},
				{Type: v1.NodeInternalDNS, Address: "node-01.internal"}, {Type: v1.NodeExternalDNS, Address: "node-01.example.com"},
				{Type: v1.NodeHostName, Address: "node-01"},
			}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, _ := cloudWithNodes(t, fake.Config{}, 2)
			rt := routesOf(t, c)
			if tt.setup != nil {
				tt.setup(t, c, rt)
			}
			before, calls, stats := c.Snapshot(), c.Calls(), fake.RouteStats(c)
			err := rt.CreateRoute(t.Context(), cluster, "uid-01", tt.route)
			if tt.want == nil {
				if err != nil {
					t.Fatalf("CreateRoute(%q) = %v; want it accepted (%s)", tt.route.DestinationCIDR, err, tt.reason)
				}
				return
			}
			checkRejected(t, "CreateRoute", err, tt.want, tt.mention, tt.reason)
			if diff := cmp.Diff(before, c.Snapshot(), fake.CmpModel); diff != "" {
				t.Errorf("a refused CreateRoute changed the cloud (-before +after):\n%s", diff)
			}
			if got := c.Calls(); got.ByOp[fake.OpWriteRouteTable] != calls.ByOp[fake.OpWriteRouteTable] {
				t.Errorf("a refused CreateRoute wrote the route table (%d writes, %d before); want no write", got.ByOp[fake.OpWriteRouteTable], calls.ByOp[fake.OpWriteRouteTable])
			}
			if got := fake.RouteStats(c); got.Throttled != stats.Throttled {
				t.Errorf("RouteStats.Throttled %d → %d; want a refusal not taken for a throttle", stats.Throttled, got.Throttled)
			}
		})
	}
}

// createRoute is a setup that creates the route of node (nameHint
// uid-<node>) to cidr.
func createRoute(node, cidr string) func(*testing.T, *fake.Cloud, cloudprovider.Routes) {
	return func(t *testing.T, _ *fake.Cloud, rt cloudprovider.Routes) {
		t.Helper()
		r := &cloudprovider.Route{TargetNode: types.NodeName(node), DestinationCIDR: cidr}
		if err := rt.CreateRoute(t.Context(), cluster, "uid-"+strings.TrimPrefix(node, "node-"), r); err != nil {
			t.Fatalf("setup: CreateRoute(%s → %s): %v", cidr, node, err)
		}
	}
}

// addRoute is a setup that adds r through the control surface.
func addRoute(r fake.Route) func(*testing.T, *fake.Cloud, cloudprovider.Routes) {
	return func(t *testing.T, c *fake.Cloud, _ cloudprovider.Routes) {
		t.Helper()
		if err := c.AddRoute(r); err != nil {
			t.Fatalf("setup: AddRoute(%+v): %v", r, err)
		}
	}
}

// TestCreateRouteRefusedAlone: a refused route, among concurrent
// CreateRoute calls that the routes.Table batches into one table write,
// fails alone; the others are created.
func TestCreateRouteRefusedAlone(t *testing.T) {
	c, nodes := cloudWithNodes(t, fake.Config{}, 10)
	rt := routesOf(t, c)
	errs := make([]error, len(nodes)+1)
	var wg sync.WaitGroup
	for i, n := range nodes {
		wg.Go(func() {
			r := &cloudprovider.Route{TargetNode: types.NodeName(n.Name), DestinationCIDR: fmt.Sprintf("10.244.%d.0/24", i)}
			errs[i] = rt.CreateRoute(t.Context(), cluster, string(n.UID), r)
		})
	}
	wg.Go(func() { errs[len(nodes)] = rt.CreateRoute(t.Context(), cluster, "uid-bad", routeTo("0.0.0.0/0")) })
	wg.Wait()
	for i, err := range errs[:len(nodes)] {
		if err != nil {
			t.Errorf("CreateRoute of node %d beside a refused route: %v; want it created", i, err)
		}
	}
	checkRejected(t, "the default route among pod routes", errs[len(nodes)], routes.ErrInvalidRoute, []string{`"0.0.0.0/0"`}, "a default route is not a pod route")
	if got := len(c.Snapshot().Routes); got != len(nodes) {
		t.Errorf("%d routes in the table; want the %d valid ones", got, len(nodes))
	}
}

// TestRouteTableWriteRejectsBadTable: a whole-table write (the cloud API
// the routes.Table calls) that would store a route breaking the table's
// rules is refused as a whole, changes nothing, and says which route and
// field; here an interceptor stands for a driver that sends such a table.
func TestRouteTableWriteRejectsBadTable(t *testing.T) {
	tests := []struct {
		name, reason string
		// change makes the route the write adds beside first, the
		// created route (routes[0], 10.244.1.0/24), out of a valid one.
		change  func(e *routes.Entry, first routes.Entry)
		want    error
		mention []string
	}{
		{"destination not a CIDR", "the cloud checks every route it stores",
			func(e *routes.Entry, first routes.Entry) { e.DestinationCIDR = "nope" },
			routes.ErrInvalidRoute, []string{`route "extra" of cluster "test-cluster"`, "routes[1].destinationCIDR", `"nope"`}},
		{"cluster default route", "not a pod route",
			func(e *routes.Entry, first routes.Entry) { e.DestinationCIDR = "0.0.0.0/0" },
			routes.ErrInvalidRoute, []string{"routes[1].destinationCIDR", `"0.0.0.0/0"`}},
		{"overlapping routes in one write", "CreateRoute's check cannot see the routes of its batch; the write does",
			func(e *routes.Entry, first routes.Entry) { e.DestinationCIDR = "10.244.0.0/16" },
			routes.ErrCIDRInUse, []string{"routes[1].destinationCIDR", `contains "10.244.1.0/24"`}},
		{"equal destinations", "one destination, one route",
			func(e *routes.Entry, first routes.Entry) { e.DestinationCIDR = "10.244.1.0/24" },
			routes.ErrCIDRInUse, []string{"routes[1].destinationCIDR", `equals "10.244.1.0/24"`}},
		{"repeated name", "(cluster, name) is a route's identity",
			func(e *routes.Entry, first routes.Entry) { e.Name = first.Name },
			routes.ErrInvalidRoute, []string{"routes[1].name", "duplicates routes[0].name"}},
		{"bad target address", "the cloud checks the addresses it stores",
			func(e *routes.Entry, first routes.Entry) {
				e.TargetNodeAddresses = []v1.NodeAddress{{Type: v1.NodeExternalIP, Address: "10.0.0.1%eth0"}}
			},
			routes.ErrInvalidRoute, []string{"routes[1].targetNodeAddresses[0].address", `"10.0.0.1%eth0"`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, _ := cloudWithNodes(t, fake.Config{}, 2)
			before := c.Snapshot()
			extra := routes.Entry{Cluster: cluster, Name: "extra", DestinationCIDR: "10.250.0.0/24", TargetNode: "node-02"}
			c.SetInterceptor(fake.Funcs{
				WriteRouteTable: func(ctx context.Context, next routes.TableDriver, rev string, entries []routes.Entry) error {
					tt.change(&extra, entries[0])
					return next.WriteTable(ctx, rev, append(entries, extra))
				},
			})
			err := routesOf(t, c).CreateRoute(t.Context(), cluster, "uid-01", routeTo("10.244.1.0/24"))
			checkRejected(t, "CreateRoute whose table write adds a route with "+tt.name, err, tt.want, tt.mention, tt.reason)
			if diff := cmp.Diff(before, c.Snapshot(), fake.CmpModel); diff != "" {
				t.Errorf("a refused table write changed the cloud (-before +after):\n%s", diff)
			}
		})
	}
}

// TestAddRouteRejectsBadInput: the control surface keeps the route table's
// rules too; routes of no cluster may be default routes and cover pod
// routes.
func TestAddRouteRejectsBadInput(t *testing.T) {
	existing := []fake.Route{
		{Cluster: cluster, Name: "pods-1", DestinationCIDR: "10.244.1.0/24", TargetNode: "node-01"},
		{Name: "default", DestinationCIDR: "0.0.0.0/0", TargetNode: "gateway"},
	}
	tests := []struct {
		name, reason string
		route        fake.Route
		want         error // nil: accepted
		mention      []string
	}{
		{"cluster default route", "a cluster's routes are pod routes",
			fake.Route{Cluster: cluster, Name: "r", DestinationCIDR: "::/0", TargetNode: "node-02"},
			routes.ErrInvalidRoute, []string{`route "r" of cluster "test-cluster"`, "route.destinationCIDR", `"::/0"`}},
		{"destination not a CIDR", "the value and what was expected",
			fake.Route{Cluster: cluster, Name: "r", DestinationCIDR: "nope"},
			routes.ErrInvalidRoute, []string{"route.destinationCIDR", `"nope"`, "expected a CIDR"}},
		{"IPv4-mapped destination", "IPv4 spelled as IPv4",
			fake.Route{Name: "r", DestinationCIDR: "::ffff:10.0.0.0/104"},
			routes.ErrInvalidRoute, []string{"route.destinationCIDR", "IPv4-mapped", "10.0.0.0/8"}},
		{"overlapping cluster route", "contains pods-1",
			fake.Route{Cluster: "other", Name: "r", DestinationCIDR: "10.244.0.0/16"},
			routes.ErrCIDRInUse, []string{"route.destinationCIDR", `contains "10.244.1.0/24"`, `route "pods-1"`}},
		{"repeated name", "a cluster has one route of a name",
			fake.Route{Cluster: cluster, Name: "pods-1", DestinationCIDR: "10.244.2.0/24"},
			routes.ErrInvalidRoute, []string{"route.name", `"pods-1"`, "duplicates routes[0].name"}},
		{"target address not an IP", "stored as an InternalIP",
			fake.Route{Name: "r", DestinationCIDR: "192.0.2.0/24", TargetNodeAddresses: []string{"10.0.0.1", "gateway"}},
			routes.ErrInvalidRoute, []string{"route.targetNodeAddresses[1]", `"gateway"`, "expected an IPv4 or IPv6 address"}},
		{"node name with a slash", "a Node name",
			fake.Route{Name: "r", DestinationCIDR: "192.0.2.0/24", TargetNode: "a/b"},
			routes.ErrInvalidRoute, []string{"route.targetNode", `"a/b"`}},
		{"destination of 10k characters", "the value is cut in the error, and so is the name",
			fake.Route{Name: strings.Repeat("n", 10_000), DestinationCIDR: strings.Repeat("1", 10_000)},
			routes.ErrInvalidRoute, []string{"route.destinationCIDR", `"1111`, "(10000 bytes)", "expected a CIDR"}},
		{"accepted: another network route of no cluster", "routes of no cluster are the network's: they may cover pod routes",
			fake.Route{Name: "vpn", DestinationCIDR: "10.0.0.0/8", TargetNode: "vpn-gateway"}, nil, nil},
		{"accepted: a route without a target", "a stale route of a deleted node (listed as Blackhole)",
			fake.Route{Cluster: cluster, Name: "stale", DestinationCIDR: "10.244.9.0/24"}, nil, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, _ := cloudWithNodes(t, fake.Config{}, 2)
			for _, r := range existing {
				if err := c.AddRoute(r); err != nil {
					t.Fatalf("setup: AddRoute(%+v): %v", r, err)
				}
			}
			before := c.Snapshot()
			err := c.AddRoute(tt.route)
			if tt.want == nil {
				if err != nil {
					t.Fatalf("AddRoute(%+v) = %v; want it accepted (%s)", tt.route, err, tt.reason)
				}
				return
			}
			checkRejected(t, "AddRoute", err, tt.want, tt.mention, tt.reason)
			if diff := cmp.Diff(before, c.Snapshot(), fake.CmpModel); diff != "" {
				t.Errorf("a refused AddRoute changed the cloud (-before +after):\n%s", diff)
			}
		})
	}
}
