package routes

import (
	"slices"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// NodeRoutes is the desired routing of one node: a route to Node for each of
// its pod CIDRs.
type NodeRoutes struct {
	// Node is the node name, the routes' TargetNode.
	Node types.NodeName
	// NameHint is what the route controller passes to CreateRoute: the node
	// UID (route_controller.go, reconcile: nameHint := string(node.UID)).
	NameHint string
	// CIDRs are node.spec.podCIDRs, spelled exactly as there: one per IP
	// family on a dual-stack node.
	CIDRs []string
	// Addresses are node.status.addresses, the TargetNodeAddresses of the
	// routes created: a route of the same name whose addresses differ (in
	// order) is replaced.
	Addresses []v1.NodeAddress
}

// DiffInput is everything Diff looks at: a change to a route table, as a
// whole-table Table's batch of CreateRoute and DeleteRoute calls is, and
// the table it applies to. Diff does not modify it.
type DiffInput struct {
	// Cluster is the owning cluster's name; created entries carry it in
	// Entry.Cluster.
	Cluster string
	// Desired are the routes to create (not the whole routing: a route
	// Desired does not name is kept). They are settled in order, each
	// against the table the earlier ones left; a later one of the same
	// name replaces an earlier one.
	Desired []NodeRoutes
	// Actual is the route table as read, routes of every cluster and of
	// none.
	Actual []Entry
	// Owned reports whether an actual route belongs to this cluster; routes
	// not owned are never deleted. nil means e.Cluster == Cluster with a
	// non-empty Cluster.
	Owned func(Entry) bool
	// Namer names the created entries (Entry.Name). Set it: a desired
	// route is matched with the actual route of its name, and nil leaves
	// every Name empty.
	Namer *Namer
	// Remove lists routes to delete as ListRoutes listed them: every owned
	// actual route with the same DestinationCIDR and TargetNode, and the
	// same Name unless it is empty, is deleted.
	Remove []Entry
}

// Create is one route Diff wants created.
type Create struct {
	// NameHint is the nameHint to pass to CreateRoute (the node UID).
	NameHint string
	// Entry is the route: Cluster, DestinationCIDR (the desired spelling),
	// TargetNode and a copy of TargetNodeAddresses; Name when DiffInput.Namer
	// is set.
	Entry Entry
}

// Changes is the output of Diff. Apply Delete before Create: a replaced
// route is a delete and a create of the same name, and a destination that
// Remove frees may be routed again by Create.
type Changes struct {
	// Delete lists the actual routes to delete, as given in
	// DiffInput.Actual, in its order: those Remove names and those a
	// desired route replaces.
	Delete []Entry
	// Create lists the routes to create: the replacements first, in the
	// order of the routes they replace, then the new routes, in the order
	// of DiffInput.Desired.
	Create []Create
	// Skipped lists desired routes that are not created: those with no
	// node or an unparsable CIDR, then those whose destination another
	// route holds.
	Skipped []Create
}

// Diff computes the change a batch of CreateRoute and DeleteRoute calls
// makes to a route table: owned routes that Remove names are deleted, and
// each desired route is created unless a route of its name and cluster
// already is it; every other route is kept. A desired route whose
// destination (its masked prefix) another route holds, of any cluster or
// none, is not created and is reported in Changes.Skipped, as are those
// with no node or an unparsable CIDR. A route of the same name and cluster
// whose target, addresses (in order) or blackhole state differ is
// replaced: deleted and created again. It is what a whole-table Table
// (NewWholeTable) computes for every batch, against the table it read.
//
// Diff is a pure function, safe for concurrent use, and its Changes is
// deterministic. It runs in time linear in the number of routes: it
// indexes Remove and Desired, reads Actual once, then settles Desired in
// order. It does not apply the route controller's rules of a whole
// reconcile (the cluster CIDRs, a changed next hop): the controller has
// decided each call.
func Diff(in DiffInput) Changes {
	return diffPartial(&in).plan(&in)
}

// owns applies Owned, or its default.
func (in *DiffInput) owns(e *Entry) bool {
	if in.Owned != nil {
		return in.Owned(*e)
	}
	return in.Cluster != "" && e.Cluster == in.Cluster
}

func (in *DiffInput) create(d *NodeRoutes, cidr string) Create {
	c := Create{NameHint: d.NameHint, Entry: Entry{
		Cluster:             in.Cluster,
		DestinationCIDR:     cidr,
		TargetNode:          d.Node,
		TargetNodeAddresses: slices.Clone(d.Addresses),
	}}
	if in.Namer != nil {
		c.Entry.Name = in.Namer.Name(d.NameHint, cidr)
	}
	return c
}
