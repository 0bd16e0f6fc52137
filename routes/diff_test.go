package routes_test

import (
	"net/netip"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/ccmkit/ccmkit/routes"
)

var clusterCIDRs = []netip.Prefix{netip.MustParsePrefix("10.244.0.0/16"), netip.MustParsePrefix("fd00:10:244::/56")}

func owned(name, node, cidr string) routes.Entry {
	return routes.Entry{Name: name, Cluster: cluster, TargetNode: types.NodeName(node), DestinationCIDR: cidr}
}

func want(hint, node, cidr string, a ...v1.NodeAddress) routes.Create {
	return routes.Create{NameHint: hint, Entry: routes.Entry{Cluster: cluster, TargetNode: types.NodeName(node), DestinationCIDR: cidr, TargetNodeAddresses: a}}
}

// TestDiffWhole checks the whole form of the differ, a reconcile by the
// route controller's rules.
func TestDiffWhole(t *testing.T) {
	nodeA := routes.NodeRoutes{Node: "node-a", NameHint: uidA, CIDRs: []string{"10.244.1.0/24", "fd00:10:244:1::/64"}, Addresses: addrs("192.168.0.1", "fd00::1")}
	nodeB := routes.NodeRoutes{Node: "node-b", NameHint: uidB, CIDRs: []string{"10.244.2.0/24"}}
	a4, a6, b4 := owned("a4", "node-a", "10.244.1.0/24"), owned("a6", "node-a", "fd00:10:244:1::/64"), owned("b4", "node-b", "10.244.2.0/24")
	blackholed := func(e routes.Entry) routes.Entry { e.Blackhole = true; return e }
	withAddrs := func(e routes.Entry, a []v1.NodeAddress) routes.Entry { e.TargetNodeAddresses = a; return e }

	cases := []struct {
		name, reason string
		in           routes.WholeInput
		want         routes.Changes
	}{
		{
			name: "empty", reason: "nothing wanted, nothing there",
			in: routes.WholeInput{Cluster: cluster, ClusterCIDRs: clusterCIDRs},
		},
		{
			name: "steady dual-stack", reason: "both families present: nothing to do",
			in: routes.WholeInput{Cluster: cluster, ClusterCIDRs: clusterCIDRs, Desired: []routes.NodeRoutes{nodeA, nodeB}, Actual: []routes.Entry{a4, a6, b4}},
		},
		{
			name: "new dual-stack node", reason: "one create per family, both with the node UID as nameHint",
			in: routes.WholeInput{Cluster: cluster, ClusterCIDRs: clusterCIDRs, Desired: []routes.NodeRoutes{nodeA}},
			want: routes.Changes{Create: []routes.Create{
				want(uidA, "node-a", "10.244.1.0/24", nodeA.Addresses...),
				want(uidA, "node-a", "fd00:10:244:1::/64", nodeA.Addresses...),
			}},
		},
		{
			name: "node gone", reason: "routes of a node that is no longer desired are deleted",
			in:   routes.WholeInput{Cluster: cluster, ClusterCIDRs: clusterCIDRs, Desired: []routes.NodeRoutes{nodeB}, Actual: []routes.Entry{a4, a6, b4}},
			want: routes.Changes{Delete: []routes.Entry{a4, a6}},
		},
		{
			name: "foreign routes", reason: "routes of another cluster or of none are never touched, even inside the cluster CIDR",
			in: routes.WholeInput{Cluster: cluster, ClusterCIDRs: clusterCIDRs, Actual: []routes.Entry{
				{Name: "x", Cluster: "other", TargetNode: "node-x", DestinationCIDR: "10.244.9.0/24"},
				{Name: "y", TargetNode: "node-y", DestinationCIDR: "10.244.8.0/24", Blackhole: true},
			}},
		},
		{
			name: "out of range", reason: "owned routes outside every cluster CIDR are never touched (isResponsibleForRoute)",
			in: routes.WholeInput{Cluster: cluster, ClusterCIDRs: clusterCIDRs, Actual: []routes.Entry{
				owned("v4", "node-a", "10.0.0.0/24"), owned("v6", "node-a", "fd00:99::/64"),
				blackholed(owned("bh", "", "192.168.7.0/24")), owned("junk", "node-a", "not-a-cidr"),
				owned("supernet", "node-a", "10.0.0.0/8"),
			}},
		},
		{
			name: "range edge", reason: "a route whose first address is in a cluster CIDR is in range, as upstream computes it",
			in: routes.WholeInput{Cluster: cluster, ClusterCIDRs: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/16")}, Actual: []routes.Entry{
				owned("wide", "node-a", "10.0.0.0/8"), owned("inside", "node-z", "10.0.5.0/24"),
			}},
			want: routes.Changes{Delete: []routes.Entry{owned("wide", "node-a", "10.0.0.0/8"), owned("inside", "node-z", "10.0.5.0/24")}},
		},
		{
			name: "blackhole", reason: "a dead route is deleted and, when still wanted, created again",
			in:   routes.WholeInput{Cluster: cluster, ClusterCIDRs: clusterCIDRs, Desired: []routes.NodeRoutes{nodeB}, Actual: []routes.Entry{blackholed(b4), owned("nt", "", "10.244.3.0/24")}},
			want: routes.Changes{Delete: []routes.Entry{blackholed(b4), owned("nt", "", "10.244.3.0/24")}, Create: []routes.Create{want(uidB, "node-b", "10.244.2.0/24")}},
		},
		{
			name: "next hop moved", reason: "a CIDR now assigned to another node: delete the old route, create the new one",
			in: routes.WholeInput{Cluster: cluster, ClusterCIDRs: clusterCIDRs,
				Desired: []routes.NodeRoutes{{Node: "node-c", NameHint: "uid-c", CIDRs: []string{"10.244.2.0/24"}}}, Actual: []routes.Entry{b4}},
			want: routes.Changes{Delete: []routes.Entry{b4}, Create: []routes.Create{want("uid-c", "node-c", "10.244.2.0/24")}},
		},
		{
			name: "addresses changed", reason: "with CompareAddresses a changed node address is a changed next hop (getRouteAction: update)",
			in: routes.WholeInput{Cluster: cluster, ClusterCIDRs: clusterCIDRs, CompareAddresses: true, Desired: []routes.NodeRoutes{nodeA},
				Actual: []routes.Entry{withAddrs(a4, addrs("192.168.0.99", "fd00::1")), withAddrs(a6, addrs("fd00::1", "192.168.0.1"))}},
			want: routes.Changes{Delete: []routes.Entry{withAddrs(a4, addrs("192.168.0.99", "fd00::1"))}, Create: []routes.Create{want(uidA, "node-a", "10.244.1.0/24", nodeA.Addresses...)}},
		},
		{
			name: "addresses ignored", reason: "without CompareAddresses addresses do not matter",
			in: routes.WholeInput{Cluster: cluster, ClusterCIDRs: clusterCIDRs, Desired: []routes.NodeRoutes{nodeA},
				Actual: []routes.Entry{withAddrs(a4, addrs("192.168.0.99")), a6}},
		},
		{
			name: "duplicates", reason: "a second route for the same node and CIDR is deleted; the same route listed twice is one route",
			in: routes.WholeInput{Cluster: cluster, ClusterCIDRs: clusterCIDRs, Desired: []routes.NodeRoutes{nodeB, nodeB},
				Actual: []routes.Entry{b4, owned("b4-copy", "node-b", "10.244.2.0/24"), b4}},
			want: routes.Changes{Delete: []routes.Entry{owned("b4-copy", "node-b", "10.244.2.0/24")}},
		},
		{
			name: "spelling", reason: "matching is by string, like the route controller: another spelling is another route",
			in: routes.WholeInput{Cluster: cluster, ClusterCIDRs: clusterCIDRs,
				Desired: []routes.NodeRoutes{{Node: "node-a", NameHint: uidA, CIDRs: []string{"fd00:10:244:1::/64"}}},
				Actual:  []routes.Entry{owned("padded", "node-a", "fd00:0010:0244:0001::/64")}},
			want: routes.Changes{Delete: []routes.Entry{owned("padded", "node-a", "fd00:0010:0244:0001::/64")}, Create: []routes.Create{want(uidA, "node-a", "fd00:10:244:1::/64")}},
		},
		{
			name: "desired out of range", reason: "a pod CIDR outside the cluster CIDRs is not routed (it could hijack another network)",
			in: routes.WholeInput{Cluster: cluster, ClusterCIDRs: clusterCIDRs,
				Desired: []routes.NodeRoutes{{Node: "node-a", NameHint: uidA, CIDRs: []string{"172.16.0.0/24", "bogus", "10.244.1.0/24"}}, {NameHint: "no-node", CIDRs: []string{"10.244.5.0/24"}}}},
			want: routes.Changes{
				Create:  []routes.Create{want(uidA, "node-a", "10.244.1.0/24")},
				Skipped: []routes.Create{want(uidA, "node-a", "172.16.0.0/24"), want(uidA, "node-a", "bogus"), want("no-node", "", "10.244.5.0/24")},
			},
		},
		{
			name: "existing out of range", reason: "an owned route outside the cluster CIDRs that is desired is left alone and not reported",
			in: routes.WholeInput{Cluster: cluster, ClusterCIDRs: clusterCIDRs,
				Desired: []routes.NodeRoutes{{Node: "node-a", NameHint: uidA, CIDRs: []string{"172.16.0.0/24"}}},
				Actual:  []routes.Entry{owned("a", "node-a", "172.16.0.0/24")}},
		},
		{
			name: "ownership predicate", reason: "a custom predicate decides what is ours",
			in: routes.WholeInput{Cluster: cluster, ClusterCIDRs: clusterCIDRs, Owned: func(e routes.Entry) bool { return e.Name != "keep-me" },
				Actual: []routes.Entry{owned("keep-me", "node-a", "10.244.1.0/24"), {Name: "mine", TargetNode: "node-q", DestinationCIDR: "10.244.7.0/24"}}},
			want: routes.Changes{Delete: []routes.Entry{{Name: "mine", TargetNode: "node-q", DestinationCIDR: "10.244.7.0/24"}}},
		},
		{
			name: "no cluster name", reason: "with no Cluster and no predicate nothing is owned: unowned routes have an empty Cluster",
			in: routes.WholeInput{ClusterCIDRs: clusterCIDRs, Actual: []routes.Entry{{Name: "x", TargetNode: "n", DestinationCIDR: "10.244.1.0/24", Blackhole: true}}},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := routes.DiffWhole(c.in)
			if diff := cmp.Diff(c.want, got, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("%s: diffWhole (-want +got):\n%s", c.reason, diff)
			}
		})
	}
}

func TestDiffWholeNamesCreates(t *testing.T) {
	n, err := routes.NewNamer(routes.NamerOptions{Prefix: "k8s-"})
	if err != nil {
		t.Fatal(err)
	}
	p := routes.DiffWhole(routes.WholeInput{Cluster: cluster, ClusterCIDRs: clusterCIDRs, Namer: n,
		Desired: []routes.NodeRoutes{{Node: "node-a", NameHint: uidA, CIDRs: []string{"10.244.1.0/24", "fd00:10:244:1::/64"}}}})
	if len(p.Create) != 2 || p.Create[0].Entry.Name != n.Name(uidA, "10.244.1.0/24") || p.Create[1].Entry.Name != n.Name(uidA, "fd00:10:244:1::/64") || p.Create[0].Entry.Name == p.Create[1].Entry.Name {
		t.Errorf("created entries are not named by the Namer per (nameHint, CIDR): %+v", p.Create)
	}
}

// TestDiff checks Diff, the form of a whole-table Table's batch: Remove
// deletes what it names, Desired creates what no route of its name is, a
// taken destination is skipped.
func TestDiff(t *testing.T) {
	namer := mustNamer(t, routes.NamerOptions{})
	named := func(hint string, e routes.Entry) routes.Entry {
		e.Name = namer.Name(hint, e.DestinationCIDR)
		return e
	}
	a4 := named(uidA, owned("", "node-a", "10.244.1.0/24"))
	b4 := named(uidB, owned("", "node-b", "10.244.2.0/24"))
	foreign := routes.Entry{Name: "x", Cluster: "other", TargetNode: "node-x", DestinationCIDR: "10.244.9.0/24"}
	created := func(hint, node, cidr string, a ...v1.NodeAddress) routes.Create {
		c := want(hint, node, cidr, a...)
		c.Entry.Name = namer.Name(hint, cidr)
		return c
	}
	cases := []struct {
		name, reason string
		in           routes.DiffInput
		want         routes.Changes
	}{
		{
			name: "others kept", reason: "routes neither removed nor desired stay, in range or not",
			in: routes.DiffInput{Actual: []routes.Entry{a4, b4, foreign}},
		},
		{
			name: "remove as listed", reason: "Remove matches target and CIDR, and the name when it has one; a route of another cluster is not owned",
			in: routes.DiffInput{Actual: []routes.Entry{a4, b4, foreign}, Remove: []routes.Entry{
				{TargetNode: "node-a", DestinationCIDR: "10.244.1.0/24"}, {Name: "other-name", TargetNode: "node-b", DestinationCIDR: "10.244.2.0/24"}, foreign}},
			want: routes.Changes{Delete: []routes.Entry{a4}},
		},
		{
			name: "create new", reason: "a desired route no route provides is created, named by the Namer",
			in: routes.DiffInput{Actual: []routes.Entry{a4},
				Desired: []routes.NodeRoutes{{Node: "node-b", NameHint: uidB, CIDRs: []string{"10.244.2.0/24"}}}},
			want: routes.Changes{Create: []routes.Create{created(uidB, "node-b", "10.244.2.0/24")}},
		},
		{
			name: "already there", reason: "a route of the same name, cluster, target and addresses is the desired route",
			in: routes.DiffInput{Actual: []routes.Entry{a4},
				Desired: []routes.NodeRoutes{{Node: "node-a", NameHint: uidA, CIDRs: []string{"10.244.1.0/24"}}}},
		},
		{
			name: "rewrite", reason: "the same name with other addresses is replaced: deleted and created again",
			in: routes.DiffInput{Actual: []routes.Entry{a4},
				Desired: []routes.NodeRoutes{{Node: "node-a", NameHint: uidA, CIDRs: []string{"10.244.1.0/24"}, Addresses: addrs("192.168.0.1")}}},
			want: routes.Changes{Delete: []routes.Entry{a4}, Create: []routes.Create{created(uidA, "node-a", "10.244.1.0/24", addrs("192.168.0.1")...)}},
		},
		{
			name: "destination taken", reason: "another route with the same masked destination, of any cluster, keeps it: the desired route is skipped",
			in: routes.DiffInput{Actual: []routes.Entry{foreign},
				Desired: []routes.NodeRoutes{{Node: "node-c", NameHint: "uid-c", CIDRs: []string{"10.244.9.7/24"}}}},
			want: routes.Changes{Skipped: []routes.Create{created("uid-c", "node-c", "10.244.9.7/24")}},
		},
		{
			name: "destination freed", reason: "Remove is applied first: a removed route's destination can be taken by another node",
			in: routes.DiffInput{Actual: []routes.Entry{b4}, Remove: []routes.Entry{b4},
				Desired: []routes.NodeRoutes{{Node: "node-c", NameHint: "uid-c", CIDRs: []string{"10.244.2.0/24"}}}},
			want: routes.Changes{Delete: []routes.Entry{b4}, Create: []routes.Create{created("uid-c", "node-c", "10.244.2.0/24")}},
		},
		{
			name: "in order", reason: "a desired route is settled against the routes earlier ones created: a second node for one destination is skipped",
			in: routes.DiffInput{Desired: []routes.NodeRoutes{
				{Node: "node-c", NameHint: "uid-c", CIDRs: []string{"10.244.3.0/24"}}, {Node: "node-d", NameHint: "uid-d", CIDRs: []string{"10.244.3.0/24"}}}},
			want: routes.Changes{Create: []routes.Create{created("uid-c", "node-c", "10.244.3.0/24")}, Skipped: []routes.Create{created("uid-d", "node-d", "10.244.3.0/24")}},
		},
		{
			name: "not a route", reason: "a desired route without a node or with an unparsable CIDR is skipped",
			in:   routes.DiffInput{Desired: []routes.NodeRoutes{{NameHint: "uid-c", CIDRs: []string{"10.244.3.0/24"}}, {Node: "node-d", NameHint: "uid-d", CIDRs: []string{"bogus"}}}},
			want: routes.Changes{Skipped: []routes.Create{created("uid-c", "", "10.244.3.0/24"), created("uid-d", "node-d", "bogus")}},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			c.in.Cluster, c.in.Namer = cluster, namer
			got := routes.Diff(c.in)
			if diff := cmp.Diff(c.want, got, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("%s: Diff (-want +got):\n%s", c.reason, diff)
			}
		})
	}
}
