package fake_test

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	cloudprovider "k8s.io/cloud-provider"

	"github.com/ccmkit/ccmkit/fake"
	"github.com/ccmkit/ccmkit/routes"
)

func TestRoutesRoundTrip(t *testing.T) {
	c, nodes := cloudWithNodes(t, fake.Config{Routes: fake.RoutesSection{EnableNodeAddresses: true}}, 1)
	rt := routesOf(t, c)
	node := nodes[0]
	addrs := []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: "10.0.0.1"}, {Type: v1.NodeHostName, Address: "node-01"}}
	// A dual-stack node: one nameHint for two CIDRs, the IPv6 one spelled
	// non-canonically, as it may be in node.spec.podCIDRs.
	for _, cidr := range []string{"10.244.1.0/24", "fd00:10:244:1:0::/80"} {
		r := &cloudprovider.Route{Name: "ignored", TargetNode: types.NodeName(node.Name), DestinationCIDR: cidr, TargetNodeAddresses: addrs}
		if err := rt.CreateRoute(t.Context(), cluster, string(node.UID), r); err != nil {
			t.Fatalf("CreateRoute %s: %v", cidr, err)
		}
	}
	listed, err := rt.ListRoutes(t.Context(), cluster)
	if err != nil {
		t.Fatal(err)
	}
	want := []*cloudprovider.Route{
		{TargetNode: types.NodeName(node.Name), DestinationCIDR: "10.244.1.0/24", EnableNodeAddresses: true, TargetNodeAddresses: addrs},
		{TargetNode: types.NodeName(node.Name), DestinationCIDR: "fd00:10:244:1:0::/80", EnableNodeAddresses: true, TargetNodeAddresses: addrs},
	}
	opts := cmp.Options{
		cmpopts.IgnoreFields(cloudprovider.Route{}, "Name"),
		cmpopts.SortSlices(func(a, b *cloudprovider.Route) bool { return a.DestinationCIDR < b.DestinationCIDR }),
	}
	if diff := cmp.Diff(want, listed, opts, fake.CmpModel); diff != "" {
		t.Errorf("ListRoutes (-want +got): DestinationCIDR must be byte-identical, addresses as created:\n%s", diff)
	}
	if len(listed) == 2 && (listed[0].Name == listed[1].Name || listed[0].Name == "ignored") {
		t.Errorf("route names %q, %q; want distinct names per (node, CIDR), not Route.Name", listed[0].Name, listed[1].Name)
	}
	for _, r := range listed {
		if err := rt.DeleteRoute(t.Context(), cluster, r); err != nil {
			t.Errorf("DeleteRoute(%s) as listed: %v", r.DestinationCIDR, err)
		}
	}
	if listed, _ := rt.ListRoutes(t.Context(), cluster); len(listed) != 0 {
		t.Errorf("routes left after deleting all: %+v", listed)
	}
}

func TestRoutesBlackholeWhenInstanceGone(t *testing.T) {
	c, nodes := cloudWithNodes(t, fake.Config{}, 3)
	rt := routesOf(t, c)
	// The last route's Node is named unlike every instance, as a kubelet
	// run with --hostname-override names it.
	targets := []string{nodes[0].Name, nodes[1].Name, nodes[2].Name, "worker-7f3a"}
	for i, name := range targets {
		r := &cloudprovider.Route{TargetNode: types.NodeName(name), DestinationCIDR: fmt.Sprintf("10.244.%d.0/24", i)}
		if err := rt.CreateRoute(t.Context(), cluster, fmt.Sprint("uid-", i), r); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.TerminateInstance("i-1"); err != nil {
		t.Fatal(err)
	}
	if err := c.RemoveInstanceContext(t.Context(), "i-2"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.StopInstance("i-3"); err != nil {
		t.Fatal(err)
	}
	listed, err := rt.ListRoutes(t.Context(), cluster)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	for _, r := range listed {
		got[string(r.TargetNode)] = r.Blackhole
	}
	want := map[string]bool{"node-01": true, "node-02": false, "node-03": false, "worker-7f3a": false}
	if diff := cmp.Diff(want, got, fake.CmpModel); diff != "" {
		t.Errorf("Blackhole per target (-want +got): a terminated instance is dead; a stopped one is not; a Node no instance is named after "+
			"(renamed, or its instance removed without a trace) is not known dead, and the route controller would delete and recreate its route forever:\n%s", diff)
	}

	// In doubt (the instance list fails), ListRoutes fails rather than
	// report live routes as Blackhole.
	if err := c.AddFault(fake.Fault{Op: fake.OpListInstances, Times: 1}); err != nil {
		t.Fatal(err)
	}
	if _, err := rt.ListRoutes(t.Context(), cluster); !errors.Is(err, fake.ErrInjected) {
		t.Errorf("ListRoutes while instances cannot be listed = %v; want the injected error", err)
	}
}

func TestRoutesOfOthersAreNeverTouched(t *testing.T) {
	c, nodes := cloudWithNodes(t, fake.Config{}, 1)
	rt := routesOf(t, c)
	foreign := []fake.Route{
		{Cluster: "", Name: "default", DestinationCIDR: "0.0.0.0/0", TargetNode: "gateway"},
		{Cluster: "other", Name: "other-route", DestinationCIDR: "10.244.9.0/24", TargetNode: "node-01"},
	}
	for _, r := range foreign {
		if err := c.AddRoute(r); err != nil {
			t.Fatal(err)
		}
	}
	n := nodes[0]
	if err := rt.CreateRoute(t.Context(), cluster, string(n.UID), &cloudprovider.Route{TargetNode: types.NodeName(n.Name), DestinationCIDR: "10.244.1.0/24"}); err != nil {
		t.Fatal(err)
	}
	listed, err := rt.ListRoutes(t.Context(), cluster)
	if err != nil || len(listed) != 1 {
		t.Fatalf("ListRoutes(%s) = %+v, %v; want only this cluster's route", cluster, listed, err)
	}
	// The same destination as the other cluster's route is in use.
	err = rt.CreateRoute(t.Context(), cluster, string(n.UID), &cloudprovider.Route{TargetNode: types.NodeName(n.Name), DestinationCIDR: "10.244.9.0/24"})
	if !errors.Is(err, routes.ErrCIDRInUse) {
		t.Errorf("CreateRoute on another cluster's destination = %v; want ErrCIDRInUse", err)
	}
	if err := rt.DeleteRoute(t.Context(), cluster, listed[0]); err != nil {
		t.Fatal(err)
	}
	left := slices.Clone(c.Snapshot().Routes)
	if diff := cmp.Diff(foreign, left, cmpopts.SortSlices(func(a, b fake.Route) bool { return a.Name < b.Name }), fake.CmpModel); diff != "" {
		t.Errorf("routes of no cluster and of another cluster changed (-want +got):\n%s", diff)
	}
}

func TestRoutesIPv4Only(t *testing.T) {
	c, nodes := cloudWithNodes(t, fake.Config{Routes: fake.RoutesSection{IPv4Only: true}}, 1)
	err := routesOf(t, c).CreateRoute(t.Context(), cluster, string(nodes[0].UID), &cloudprovider.Route{TargetNode: "node-01", DestinationCIDR: "fd00::/64"})
	if !errors.Is(err, routes.ErrIPv6Unsupported) {
		t.Errorf("CreateRoute IPv6 on an IPv4-only cloud = %v; want ErrIPv6Unsupported", err)
	}
}

// TestRoutesCoalesce makes 200 concurrent CreateRoute calls, as the route
// controller does, and checks that the whole-table driver wrote the table
// far fewer times.
func TestRoutesCoalesce(t *testing.T) {
	c := newCloud(t, fake.Config{})
	rt := routesOf(t, c)
	const n = 200
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Go(func() {
			r := &cloudprovider.Route{TargetNode: types.NodeName(fmt.Sprintf("n%d", i)), DestinationCIDR: fmt.Sprintf("10.%d.%d.0/24", 100+i/256, i%256)}
			errs <- rt.CreateRoute(t.Context(), cluster, fmt.Sprintf("uid-%d", i), r)
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if got := len(c.Snapshot().Routes); got != n {
		t.Fatalf("table has %d routes; want %d", got, n)
	}
	writes := c.Calls().ByOp[fake.OpWriteRouteTable]
	if writes >= n/2 {
		t.Errorf("%d CreateRoute calls made %d table writes; want them coalesced (well under %d)", n, writes, n/2)
	}
	if s := fake.RouteStats(c); s.Calls != n || uint64(writes) != s.Writes { //nolint:gosec // G115: a call count, never negative
		t.Errorf("RouteStats = %+v; want Calls %d and Writes equal to the counted %d", s, n, writes)
	}
}
