package routes

import (
	"hash/maphash"
	"net/netip"
	"slices"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/ccmkit/ccmkit/internal/netaddr"
)

// The whole form of the differ: a reconcile of the whole routing by the
// route controller's rules (route_controller.go, reconcile). Nothing in
// the library calls it: the route controller reconciles, and a Table only
// executes its calls, with the partial form (Diff). It stays, unexported,
// tested (TestDiffWhole, the properties of diff_prop_test.go) and
// measured (BenchmarkDiffer, BENCHMARKS.md), for a provider-side drift
// repair that would need it; export it with its first caller.

// wholeInput is everything diffWhole looks at. diffWhole does not modify
// it. Its fields are exported for the tests' alias (export_test.go) only.
type wholeInput struct {
	// Cluster is the owning cluster's name; created entries carry it in
	// Entry.Cluster.
	Cluster string
	// ClusterCIDRs are the cluster's pod CIDRs (--cluster-cidr, one per
	// family). An actual route is in range, as in the route controller's
	// isResponsibleForRoute, when its first or last address lies in one of
	// them; routes out of range are never deleted, and desired routes out
	// of range are not created (they are reported in Changes.Skipped, unless
	// an owned route already provides them).
	ClusterCIDRs []netip.Prefix
	// Desired is the wanted routing; a (node, CIDR) listed twice counts once,
	// as its first listing: that NodeRoutes' Addresses are compared and its
	// NameHint and Addresses go into the Create.
	Desired []NodeRoutes
	// Actual is the routes in the cloud, of every cluster and of none.
	Actual []Entry
	// Owned reports whether an actual route belongs to this cluster, as
	// DiffInput.Owned.
	Owned func(Entry) bool
	// CompareAddresses makes a route whose TargetNodeAddresses differ (as a
	// set, like the route controller's equalNodeAddrs) from the node's
	// addresses a changed next hop: deleted and created again. Set it when
	// the Table lists routes with EnableNodeAddresses.
	CompareAddresses bool
	// Namer, when set, names the created entries (Entry.Name); otherwise
	// their Name is empty and the applier names them.
	Namer *Namer
}

// diffWhole computes the routes to delete and to create so that the owned,
// in-range routes of the cloud become exactly Desired. In its Changes,
// Delete lists actual routes, in the order of Actual: owned, in range, and
// blackhole, without a target, not desired, with changed addresses, or a
// duplicate (same node and CIDR, another name) of a route that is kept;
// Create lists desired routes that have no live, owned actual route, in
// the order of Desired; Skipped those that no owned route provides and
// that are not created because their CIDR does not parse or lies outside
// every cluster CIDR, or their node name is empty.
//
// It is a pure function, runs in time linear in the number of routes (one
// hash-index entry per NodeRoutes, no sorting; a node listed k times in
// Desired costs k-fold on its lookups) and is safe for concurrent use. The
// Changes is deterministic.
//
// Matching follows the route controller: an actual route satisfies a desired
// one when TargetNode and the DestinationCIDR string are equal (a different
// spelling of the same prefix does not match, since the controller would not
// match it either). Applying the Changes and diffing again yields an empty
// Changes.
func diffWhole(in wholeInput) Changes {
	x := getDesiredIndex(in.Desired)
	defer x.put()
	base := DiffInput{Cluster: in.Cluster, Owned: in.Owned, Namer: in.Namer}
	w := wholeDiff{in: &in, base: &base, ranges: maskAll(in.ClusterCIDRs), seed: maphash.MakeSeed(), x: x}
	w.indexDesired()
	plan := Changes{Delete: w.matchActual()}
	w.createWanted(&plan)
	return plan
}

// wholeDiff is one diffWhole, in three passes: indexDesired
// over in.Desired, matchActual over in.Actual, createWanted over the index.
// The Changes it builds and the pooled index's release stay out of it:
// Go's escape analysis does not tell a struct's fields apart, so appending
// to a slice field through a pointer to it, or handing x to the pool from
// it, would move diffWhole's wholeInput to the heap, an allocation per call.
// (go build -gcflags=-m ./routes shows no "moved to heap: in".)
type wholeDiff struct {
	in     *wholeInput
	base   *DiffInput     // in's Cluster, Owned and Namer: owns and create
	ranges []netip.Prefix // in.ClusterCIDRs, masked
	seed   maphash.Seed   // of the node-name hashes in x
	x      *desiredIndex  // in.Desired, with each CIDR's state
	// churnCap is the capacity of a plan slice's first append: room for
	// churn of about 1.5% of the table, so a typical churn allocates each
	// slice once instead of doubling it (garbage that a large live heap
	// makes costly to collect). A converged table allocates nothing.
	churnCap int
}

func (w *wholeDiff) hash(n types.NodeName) uint64 { return maphash.String(w.seed, string(n)) }

// indexDesired is the pass over in.Desired: every CIDR is wanted until an
// owned live route provides it. Whether it is routable is settled at the
// end, and only for CIDRs no in-range route matched (a match proves it).
func (w *wholeDiff) indexDesired() {
	for di := range w.in.Desired {
		w.x.add(di, w.hash(w.in.Desired[di].Node))
	}
	w.churnCap = max(8, (len(w.in.Actual)+len(w.x.state))/128)
}

// matchActual is the pass over in.Actual: each owned route either provides
// a wanted CIDR (its state becomes the route's index) or, in range, is
// deleted; it returns the routes to delete. Whether a route is in range is
// only asked of routes that would be deleted: a route that matches a
// desired one is kept either way.
func (w *wholeDiff) matchActual() (del []Entry) {
	in, x := w.in, w.x
	var lastNode types.NodeName // never "": such routes are deleted above
	var lastHash uint64
	for ai := range in.Actual {
		e := &in.Actual[ai]
		if !w.base.owns(e) {
			continue
		}
		if e.Blackhole || e.TargetNode == "" {
			if inRange(e.DestinationCIDR, w.ranges) {
				del = appendCap(del, w.churnCap, *e)
			}
			continue
		}
		// A node's routes are often listed together (a dual-stack pair):
		// hash the node name once for a run of its routes.
		if e.TargetNode != lastNode {
			lastNode = e.TargetNode
			lastHash = w.hash(e.TargetNode)
		}
		i, d := x.find(lastHash, e.TargetNode, e.DestinationCIDR)
		switch {
		case i >= 0 && x.state[i] >= 0 && e.Name == in.Actual[x.state[i]].Name:
			// The kept route listed twice: one route.
		case i >= 0 && x.state[i] < 0 && (!in.CompareAddresses || equalAddrs(e.TargetNodeAddresses, d.Addresses)):
			x.state[i] = int32(ai)
		case inRange(e.DestinationCIDR, w.ranges):
			// Not desired, a distinct duplicate of a kept route, or a
			// changed next hop.
			del = appendCap(del, w.churnCap, *e)
		}
	}
	return del
}

// createWanted settles the CIDRs no route provides, in plan: created when
// routable (a node, and in range), skipped otherwise.
func (w *wholeDiff) createWanted(plan *Changes) {
	w.x.wanted(w.hash, func(d *NodeRoutes, cidr string) {
		if d.Node == "" || !inRange(cidr, w.ranges) {
			plan.Skipped = append(plan.Skipped, w.base.create(d, cidr))
		} else {
			plan.Create = appendCap(plan.Create, w.churnCap, w.base.create(d, cidr))
		}
	})
}

// appendCap appends v to s, giving a nil s capacity c first.
func appendCap[T any](s []T, c int, v T) []T {
	if s == nil {
		s = make([]T, 0, c)
	}
	return append(s, v)
}

func maskAll(ps []netip.Prefix) []netip.Prefix {
	out := make([]netip.Prefix, 0, len(ps))
	for _, p := range ps {
		if p.IsValid() {
			out = append(out, p.Masked())
		}
	}
	return out
}

// inRange reports whether cidr parses and its first or last address lies in
// one of ranges (route_controller.go, isResponsibleForRoute). A CIDR that
// does not parse is never in range, so it is never touched.
func inRange(cidr string, ranges []netip.Prefix) bool {
	p, err := netip.ParsePrefix(cidr)
	if err != nil {
		return false
	}
	for _, r := range ranges {
		// r holds p's first address iff it holds p.Addr() (host bits set
		// or not) when p is no wider than r; a wider p is rare: mask it
		// and test its last address too.
		if r.Contains(p.Addr()) {
			return true
		}
		if p.Bits() < r.Bits() {
			m := p.Masked()
			if r.Contains(m.Addr()) || r.Contains(netaddr.Last(m)) {
				return true
			}
		}
	}
	return false
}

// equalAddrs compares address lists as sets of equal size, like the route
// controller's equalNodeAddrs. Lists are a handful of entries long.
func equalAddrs(a, b []v1.NodeAddress) bool {
	if len(a) != len(b) {
		return false
	}
	for _, x := range a {
		if !slices.Contains(b, x) {
			return false
		}
	}
	return true
}
