package routes_test

import (
	"fmt"
	"net/netip"

	"github.com/ccmkit/ccmkit/routes"
)

// A dual-stack node's two routes share its UID as nameHint and still get
// distinct names, which map back to exactly what CreateRoute got.
func ExampleNamer() {
	n, err := routes.NewNamer(routes.NamerOptions{Prefix: "k8s-", MaxLength: 63})
	if err != nil {
		panic(err)
	}
	const uid = "0d4c5f1e-8f4a-4c49-9a39-2f1b5f8e6a01"
	v4, v6 := n.Name(uid, "10.244.1.0/24"), n.Name(uid, "fd00:10:244:1::/64")
	fmt.Println(len(v4) <= 63, len(v6) <= 63, v4 != v6)

	key, err := n.Parse(v6)
	fmt.Println(key.NameHint == uid, key.CIDR, err)

	_, err = n.Parse("default-route")
	fmt.Println(err)
	// Output:
	// true true true
	// true fd00:10:244:1::/64 <nil>
	// routes: route name "default-route": expected the prefix "k8s-" and a marker: route name was not made by this namer
}

// Diff plans the repair of a route table: the blackholed route of node-a is
// replaced, the route of a deleted node goes, node-b's IPv6 route is added,
// and routes of another cluster or outside the cluster CIDRs stay.
func ExampleDiff() {
	plan := routes.Diff(routes.DiffInput{
		Cluster:      "kubernetes",
		ClusterCIDRs: []netip.Prefix{netip.MustParsePrefix("10.244.0.0/16"), netip.MustParsePrefix("fd00:10:244::/56")},
		Desired: []routes.NodeRoutes{
			{Node: "node-a", NameHint: "uid-a", CIDRs: []string{"10.244.1.0/24"}},
			{Node: "node-b", NameHint: "uid-b", CIDRs: []string{"10.244.2.0/24", "fd00:10:244:2::/64"}},
		},
		Actual: []routes.Entry{
			{Name: "a", Cluster: "kubernetes", TargetNode: "node-a", DestinationCIDR: "10.244.1.0/24", Blackhole: true},
			{Name: "b", Cluster: "kubernetes", TargetNode: "node-b", DestinationCIDR: "10.244.2.0/24"},
			{Name: "old", Cluster: "kubernetes", TargetNode: "node-gone", DestinationCIDR: "10.244.9.0/24"},
			{Name: "theirs", Cluster: "other", TargetNode: "node-x", DestinationCIDR: "10.244.7.0/24"},
			{Name: "vpn", Cluster: "kubernetes", TargetNode: "gw", DestinationCIDR: "172.16.0.0/12"},
		},
	})
	for _, e := range plan.Delete {
		fmt.Println("delete", e.Name, e.DestinationCIDR)
	}
	for _, c := range plan.Create {
		fmt.Println("create", c.Entry.TargetNode, c.Entry.DestinationCIDR, "hint", c.NameHint)
	}
	// Output:
	// delete a 10.244.1.0/24
	// delete old 10.244.9.0/24
	// create node-a 10.244.1.0/24 hint uid-a
	// create node-b fd00:10:244:2::/64 hint uid-b
}
