package routes_test

import (
	"fmt"

	v1 "k8s.io/api/core/v1"

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

// Diff computes what a batch of the route controller's calls changes in a
// route table read whole, as a whole-table Table does for every batch:
// node-gone's route goes (as ListRoutes listed it, without a name),
// node-a's route is rewritten with its new addresses, node-b's is added,
// and node-c's destination is another cluster's route, so it is not
// created; the routes of other clusters and the internet route stay.
func ExampleDiff() {
	namer, err := routes.NewNamer(routes.NamerOptions{})
	if err != nil {
		panic(err)
	}
	const uidA = "0d4c5f1e-8f4a-4c49-9a39-2f1b5f8e6a01"
	addrA := []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: "192.168.0.10"}}
	plan := routes.Diff(routes.DiffInput{
		Cluster: "kubernetes",
		Namer:   namer,
		Actual: []routes.Entry{
			{Name: "internet", DestinationCIDR: "0.0.0.0/0"},
			{Name: namer.Name(uidA, "10.244.1.0/24"), Cluster: "kubernetes", TargetNode: "node-a", DestinationCIDR: "10.244.1.0/24"},
			{Name: "old", Cluster: "kubernetes", TargetNode: "node-gone", DestinationCIDR: "10.244.9.0/24"},
			{Name: "theirs", Cluster: "other", TargetNode: "node-x", DestinationCIDR: "10.244.7.0/24"},
		},
		Remove: []routes.Entry{{TargetNode: "node-gone", DestinationCIDR: "10.244.9.0/24"}},
		Desired: []routes.NodeRoutes{
			{Node: "node-a", NameHint: uidA, CIDRs: []string{"10.244.1.0/24"}, Addresses: addrA},
			{Node: "node-b", NameHint: "uid-b", CIDRs: []string{"10.244.2.0/24"}},
			{Node: "node-c", NameHint: "uid-c", CIDRs: []string{"10.244.7.0/24"}},
		},
	})
	for _, e := range plan.Delete {
		fmt.Println("delete", e.TargetNode, e.DestinationCIDR)
	}
	for _, c := range plan.Create {
		fmt.Println("create", c.Entry.TargetNode, c.Entry.DestinationCIDR, "addresses", len(c.Entry.TargetNodeAddresses))
	}
	for _, c := range plan.Skipped {
		fmt.Println("skip", c.Entry.TargetNode, c.Entry.DestinationCIDR)
	}
	// Output:
	// delete node-a 10.244.1.0/24
	// delete node-gone 10.244.9.0/24
	// create node-a 10.244.1.0/24 addresses 1
	// create node-b 10.244.2.0/24 addresses 0
	// skip node-c 10.244.7.0/24
}
