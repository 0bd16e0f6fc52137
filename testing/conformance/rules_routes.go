package conformance

import (
	"fmt"
	"net/netip"
	"reflect"
	"slices"
	"strings"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/uuid"
	cloudprovider "k8s.io/cloud-provider"
)

// routeSpec is one route the suite creates: what CreateRoute gets.
type routeSpec struct {
	node     *v1.Node
	nameHint string
	route    *cloudprovider.Route
}

// newRoute builds the route the route controller creates for node's cidr
// (controllers/route/route_controller.go reconcile): the node's status
// addresses (a copy of its own, so that concurrent calls share nothing), no
// Name, nameHint the node UID.
func newRoute(n *v1.Node, cidr string) routeSpec {
	hint := string(n.UID)
	if hint == "" {
		hint = string(uuid.NewUUID())
	}
	return routeSpec{node: n, nameHint: hint, route: &cloudprovider.Route{
		TargetNode:          types.NodeName(n.Name),
		TargetNodeAddresses: slices.Clone(n.Status.Addresses),
		DestinationCIDR:     cidr,
	}}
}

// withUID gives fixture nodes without a UID one, as the API server would:
// the route controller uses it as nameHint for every CIDR of the node.
func withUID(nodes []*v1.Node) []*v1.Node {
	for _, n := range nodes {
		if n.UID == "" {
			n.UID = uuid.NewUUID()
		}
	}
	return nodes
}

// podCIDRs returns the pod CIDRs of the i-th node: IPv4, then IPv6 when
// Claims.IPv6Routes.
func (r *rt) podCIDRs(i int) []string {
	var out []string
	if c, ok := r.cfg.podCIDR(i, false); ok {
		out = append(out, c)
	}
	if r.cfg.Claims.IPv6Routes {
		if c, ok := r.cfg.podCIDR(i, true); ok {
			out = append(out, c)
		}
	}
	if len(out) == 0 {
		r.Skipf("Config.ClusterCIDRs %v has no CIDR of a family the provider claims", r.cfg.ClusterCIDRs)
	}
	return out
}

func (r *rt) listRoutes(rs cloudprovider.Routes, cluster string) []*cloudprovider.Route {
	l, err := rs.ListRoutes(r.ctx, cluster)
	if err != nil {
		r.Fatalf("ListRoutes(%q): %v", cluster, err)
	}
	return l
}

func (r *rt) createRoute(rs cloudprovider.Routes, cluster string, s routeSpec) {
	if err := rs.CreateRoute(r.ctx, cluster, s.nameHint, s.route); err != nil {
		r.Fatalf("CreateRoute(%q, nameHint %q, %s → %s): %v", cluster, s.nameHint, s.route.DestinationCIDR, s.route.TargetNode, err)
	}
}

// findRoutes returns the listed routes with that destination, compared byte
// for byte as the route controller compares them.
func findRoutes(list []*cloudprovider.Route, cidr string) []*cloudprovider.Route {
	return routesBy(list, cidr, func(a, b string) bool { return a == b })
}

// routesBy returns the listed routes whose DestinationCIDR is the same as
// cidr by same.
func routesBy(list []*cloudprovider.Route, cidr string, same func(a, b string) bool) []*cloudprovider.Route {
	var out []*cloudprovider.Route
	for _, rt := range list {
		if rt != nil && same(rt.DestinationCIDR, cidr) {
			out = append(out, rt)
		}
	}
	return out
}

// sameDestination reports whether a and b spell the same network, in any
// spelling net/netip parses (an expanded or upper-case IPv6 CIDR, host bits
// set).
func sameDestination(a, b string) bool {
	if a == b {
		return true
	}
	pa, errA := netip.ParsePrefix(a)
	pb, errB := netip.ParsePrefix(b)
	return errA == nil && errB == nil && pa.Masked() == pb.Masked()
}

// routesTo returns the listed routes to cidr's network, however spelled:
// the rules whose clause is not the spelling (ROUTE-ROUNDTRIP's and
// ROUTE-CIDR-VERBATIM's) find routes this way, so that one mistake fails
// one rule.
func routesTo(list []*cloudprovider.Route, cidr string) []*cloudprovider.Route {
	return routesBy(list, cidr, sameDestination)
}

// unlisted returns the destinations of specs that no listed route has,
// however spelled.
func unlisted(list []*cloudprovider.Route, specs []routeSpec) []string {
	var out []string
	for _, s := range specs {
		if len(routesTo(list, s.route.DestinationCIDR)) == 0 {
			out = append(out, s.route.DestinationCIDR)
		}
	}
	return out
}

// listing describes list for failure messages: destination → target.
func listing(list []*cloudprovider.Route) []string {
	var out []string
	for _, rt := range list {
		if rt != nil {
			out = append(out, fmt.Sprintf("%q→%s", rt.DestinationCIDR, rt.TargetNode))
		}
	}
	return out
}

// needListed skips the rule when a route of specs, just created, is not
// listed (however spelled): its precondition, which ROUTE-ROUNDTRIP owns.
func (r *rt) needListed(what string, list []*cloudprovider.Route, specs []routeSpec) {
	if m := unlisted(list, specs); len(m) > 0 {
		r.Skipf("precondition failed: %s, routes %q are not listed (listed: %v): see ROUTE-ROUNDTRIP", what, m, listing(list))
	}
}

// spreadRoutes returns up to n routes of the fixtures (Target.Nodes: a
// Route.TargetNode is a Node name): the first family's route of each node,
// then the next family's.
func (r *rt) spreadRoutes(n int) []routeSpec {
	nodes := withUID(r.namedNodes(1))
	var out []routeSpec
	for f := range len(r.podCIDRs(0)) {
		for i, nd := range nodes {
			if len(out) == n {
				return out
			}
			out = append(out, newRoute(nd, r.podCIDRs(i)[f]))
		}
	}
	return out
}

// routePerNode returns a route of each family the provider claims, each
// to another node while there are nodes, so that no two share a nameHint
// (that two may is ROUTE-NAMES' clause); with fewer nodes than families,
// the last node takes the rest.
func (r *rt) routePerNode() []routeSpec {
	nodes := withUID(r.namedNodes(1))
	var out []routeSpec
	for f := range len(r.podCIDRs(0)) {
		i := min(f, len(nodes)-1)
		out = append(out, newRoute(nodes[i], r.podCIDRs(i)[f]))
	}
	return out
}

// ruleRouteRoundtrip checks what the route controller compares
// (controllers/route/route_controller.go reconcile groups listed routes by
// TargetNode, getRouteAction matches DestinationCIDR with spec.podCIDRs as
// strings, and a Blackhole route is deleted): a mismatch makes it delete or
// create the route on every sync. A route listed twice is not a mismatch:
// reconcile keeps both and deletes both with their node.
func ruleRouteRoundtrip(r *rt) {
	rs := r.routes()
	c := r.cfg.ClusterName
	specs := r.routePerNode()
	for _, s := range specs {
		r.createRoute(rs, c, s)
	}
	list := r.listRoutes(rs, c)
	for _, s := range specs {
		want := s.route
		found := routesTo(list, want.DestinationCIDR)
		if len(found) == 0 {
			r.Errorf("after CreateRoute(%s → %s), no listed route has that destination, in any spelling (listed: %v)", want.DestinationCIDR, want.TargetNode, listing(list))
		}
		for _, rt := range found {
			if rt.DestinationCIDR != want.DestinationCIDR {
				r.Errorf("route %q is listed with DestinationCIDR %q: the route controller compares it byte for byte with spec.podCIDRs, and creates the route again on every sync", want.DestinationCIDR, rt.DestinationCIDR)
			}
			if rt.TargetNode != want.TargetNode {
				r.Errorf("route %q lists TargetNode %q, expected %q (the Node name it was created with): the route controller deletes and re-creates it on every sync", want.DestinationCIDR, rt.TargetNode, want.TargetNode)
			}
			if rt.Blackhole {
				r.Errorf("route %q to running node %s is listed as Blackhole: the route controller deletes blackhole routes", want.DestinationCIDR, want.TargetNode)
			}
		}
	}
}

// nonCanonical spells an IPv6 CIDR validly but not in RFC 5952 form, as the
// API server accepts it in spec.podCIDRs (a legacy field: only a warning).
func nonCanonical(cidr string, upper bool) string {
	p := netip.MustParsePrefix(cidr)
	if upper {
		return strings.ToUpper(p.String())
	}
	return fmt.Sprintf("%s/%d", p.Addr().StringExpanded(), p.Bits())
}

func ruleRouteCIDRVerbatim(r *rt) {
	rs := r.routes()
	r.needFeature("IPv6Routes", r.cfg.Claims.IPv6Routes)
	nodes := withUID(r.namedNodes(1))
	c := r.cfg.ClusterName
	var specs []routeSpec
	for i, n := range nodes[:min(2, len(nodes))] {
		base, ok := r.cfg.podCIDR(i, true)
		if !ok {
			r.Skipf("Config.ClusterCIDRs %v has no IPv6 CIDR", r.cfg.ClusterCIDRs)
		}
		s := newRoute(n, nonCanonical(base, i == 1))
		r.createRoute(rs, c, s)
		specs = append(specs, s)
	}
	list := r.listRoutes(rs, c)
	for _, s := range specs {
		if len(findRoutes(list, s.route.DestinationCIDR)) > 0 {
			continue
		}
		var as []string
		for _, rt := range routesTo(list, s.route.DestinationCIDR) {
			as = append(as, rt.DestinationCIDR)
		}
		r.Errorf("after CreateRoute with the non-canonical IPv6 CIDR %q (a spec.podCIDRs spelling the API server accepts), no route is listed with it byte for byte (listed with that network: %q): the route controller compares the strings, and creates the route again on every sync", s.route.DestinationCIDR, as)
	}
}

// ruleRouteNames creates both routes of each of two dual-stack nodes, as the
// route controller does (reconcile: nameHint is the node UID for every CIDR
// of the node), with a Route.Name that CreateRoute ignores (cloud.go
// Routes.CreateRoute). Names are the provider's own business: that
// DeleteRoute removes exactly the route given is ROUTE-DELETE's clause.
func ruleRouteNames(r *rt) {
	rs := r.routes()
	r.needFeature("IPv6Routes", r.cfg.Claims.IPv6Routes)
	nodes := withUID(r.namedNodes(1))
	c := r.cfg.ClusterName
	var specs []routeSpec
	for i, n := range nodes[:min(2, len(nodes))] {
		for _, cidr := range r.podCIDRs(i) {
			s := newRoute(n, cidr)
			s.route.Name = "conformance-ignored" // CreateRoute ignores Route.Name
			r.createRoute(rs, c, s)
			specs = append(specs, s)
		}
	}
	list := r.listRoutes(rs, c)
	for _, s := range specs {
		if len(routesTo(list, s.route.DestinationCIDR)) == 0 {
			r.Errorf("after creating the IPv4 and IPv6 routes of each node with one nameHint (the node UID, %q for node %s) and Route.Name %q, route %q is not listed (listed: %v): a dual-stack node's routes must both be kept", s.nameHint, s.node.Name, s.route.Name, s.route.DestinationCIDR, listing(list))
		}
	}
}

// deleteListed deletes every listed route to the destination of each of
// specs, as listed, and fails the rule on an error.
func (r *rt) deleteListed(rs cloudprovider.Routes, cluster string, list []*cloudprovider.Route, specs []routeSpec) {
	for _, s := range specs {
		for _, rt := range routesTo(list, s.route.DestinationCIDR) {
			if err := rs.DeleteRoute(r.ctx, cluster, rt); err != nil {
				r.Fatalf("DeleteRoute(%q → %s) of a route as listed: %v", rt.DestinationCIDR, rt.TargetNode, err)
			}
		}
	}
}

// ruleRouteDelete deletes one route as listed (cloud.go Routes.DeleteRoute:
// "Route should be as returned by ListRoutes") beside a route of the same
// node (the other family, spelled non-canonically when IPv6 routes are
// claimed: the route controller deletes it as listed when its node goes)
// and a route of another node, then the rest.
func ruleRouteDelete(r *rt) {
	rs := r.routes()
	c := r.cfg.ClusterName
	before := r.owned()
	nodes := withUID(r.namedNodes(1))
	specs := []routeSpec{newRoute(nodes[0], r.podCIDRs(0)[0])}
	if r.cfg.Claims.IPv6Routes {
		if base, ok := r.cfg.podCIDR(0, true); ok && base != specs[0].route.DestinationCIDR {
			specs = append(specs, newRoute(nodes[0], nonCanonical(base, false)))
		}
	}
	if len(nodes) > 1 {
		specs = append(specs, newRoute(nodes[1], r.podCIDRs(1)[0]))
	}
	if len(specs) < 2 {
		r.Skipf("needs two fixture nodes, or one node and Claims.IPv6Routes")
	}
	for _, s := range specs {
		r.createRoute(rs, c, s)
	}
	list := r.listRoutes(rs, c)
	r.needListed("after CreateRoute", list, specs)
	victim, rest := specs[0], specs[1:]
	r.deleteListed(rs, c, list, specs[:1])
	list = r.listRoutes(rs, c)
	if len(routesTo(list, victim.route.DestinationCIDR)) != 0 {
		r.Errorf("after DeleteRoute of route %q as listed, it is still listed", victim.route.DestinationCIDR)
	}
	for _, s := range rest {
		if len(routesTo(list, s.route.DestinationCIDR)) == 0 {
			r.Errorf("DeleteRoute of route %q → %s also removed route %q → %s (listed: %v): the route controller creates it again", victim.route.DestinationCIDR, victim.route.TargetNode, s.route.DestinationCIDR, s.route.TargetNode, listing(list))
		}
	}
	r.deleteListed(rs, c, list, rest)
	list = r.listRoutes(rs, c)
	for _, s := range rest {
		if len(routesTo(list, s.route.DestinationCIDR)) != 0 {
			r.Errorf("after DeleteRoute of route %q as listed, it is still listed", s.route.DestinationCIDR)
		}
	}
	r.checkOwned("after deleting every route created", before)
}

// equalAddrs compares node addresses as sets, as the route controller does
// (controllers/route/route_controller.go equalNodeAddrs).
func equalAddrs(a, b []v1.NodeAddress) bool {
	if len(a) != len(b) {
		return false
	}
	for _, x := range a {
		found := false
		for _, y := range b {
			if reflect.DeepEqual(x, y) {
				found = true
				break
			}
		}
		if !found {
			return false
		}
	}
	return true
}

func ruleRouteTargetAddresses(r *rt) {
	rs := r.routes()
	n := withUID(r.namedNodes(1))[0]
	addrs := n.Status.Addresses
	if len(addrs) == 0 {
		if inst, ok := r.anyInst(); ok {
			if md, err := inst.InstanceMetadata(r.ctx, n); err == nil && md != nil {
				addrs = md.NodeAddresses
			}
		}
	}
	if len(addrs) == 0 {
		r.Skipf("fixture node %s has no status addresses and InstancesV2 gives none", n.Name)
	}
	n.Status.Addresses = addrs
	s := newRoute(n, r.podCIDRs(0)[0])
	r.createRoute(rs, r.cfg.ClusterName, s)
	list := r.listRoutes(rs, r.cfg.ClusterName)
	r.needListed("after CreateRoute", list, []routeSpec{s})
	for _, rt := range routesTo(list, s.route.DestinationCIDR) {
		if !rt.EnableNodeAddresses {
			r.Logf("route %q is listed with EnableNodeAddresses=false: the route controller does not compare addresses", rt.DestinationCIDR)
			continue
		}
		if !equalAddrs(addrs, rt.TargetNodeAddresses) {
			r.Errorf("route %q is listed with EnableNodeAddresses and TargetNodeAddresses %v, but was created with %v: the route controller deletes and re-creates it on every sync", rt.DestinationCIDR, rt.TargetNodeAddresses, addrs)
		}
	}
}

// checkNotBlackhole fails the rule for each route of specs to a running
// instance that is not listed, or listed as Blackhole: the route
// controller deletes blackhole routes (reconcile).
func (r *rt) checkNotBlackhole(what string, list []*cloudprovider.Route, specs []routeSpec) {
	for _, s := range specs {
		found := routesTo(list, s.route.DestinationCIDR)
		if len(found) == 0 {
			r.Errorf("%s: route %q to running instance %s is not listed (listed: %v)", what, s.route.DestinationCIDR, s.route.TargetNode, listing(list))
		}
		for _, rt := range found {
			if rt.Blackhole {
				r.Errorf("%s: route %q to running instance %s is listed as Blackhole: the route controller deletes blackhole routes", what, rt.DestinationCIDR, s.route.TargetNode)
			}
		}
	}
}

// ruleRouteBlackhole routes the named Nodes and the renamed ones (a Node
// named unlike its instance has a pod CIDR and a route like any other; a
// provider that looks the target up by instance name lists it as
// Blackhole, and the route controller deletes and recreates it on every
// sync), then terminates the first named Node's instance.
func ruleRouteBlackhole(r *rt) {
	rs := r.routes()
	c := r.cfg.ClusterName
	nodes := withUID(slices.Concat(r.namedNodes(1), copyNodes(r.target().RenamedNodes)))
	if len(r.target().RenamedNodes) == 0 {
		r.Logf("no Target.RenamedNodes: routes to Nodes named unlike their instances were not checked")
	}
	var specs []routeSpec
	for i, n := range nodes {
		s := newRoute(n, r.podCIDRs(i)[0])
		r.createRoute(rs, c, s)
		specs = append(specs, s)
	}
	list := r.listRoutes(rs, c)
	r.needListed("after CreateRoute", list, specs)
	r.checkNotBlackhole("routes to running instances", list, specs)
	term := r.target().Hooks.TerminateInstance
	if term == nil {
		r.Logf("Hooks.TerminateInstance is nil: routes to terminated instances were not checked")
		return
	}
	r.changeCloud("TerminateInstance", term, nodes[0])
	list = r.listRoutes(rs, c)
	r.checkNotBlackhole("beside the route to a terminated instance", list, specs[1:])
	dead := routesTo(list, specs[0].route.DestinationCIDR)
	if len(dead) == 0 {
		r.Logf("the route to terminated instance %s is no longer listed", nodes[0].Name)
	}
	for _, rt := range dead {
		if err := rs.DeleteRoute(r.ctx, c, rt); err != nil {
			r.Errorf("DeleteRoute(%q, as listed: Blackhole %v) to terminated instance %s: %v, expected nil: the route controller deletes such routes", rt.DestinationCIDR, rt.Blackhole, nodes[0].Name, err)
		}
	}
	list = r.listRoutes(rs, c)
	if len(routesTo(list, specs[0].route.DestinationCIDR)) != 0 {
		r.Errorf("after DeleteRoute, route %q to terminated instance %s is still listed", specs[0].route.DestinationCIDR, nodes[0].Name)
	}
	r.checkNotBlackhole("after the route to a terminated instance was deleted", list, specs[1:])
}

func ruleRouteClusterScope(r *rt) {
	rs := r.routes()
	a, b := r.cfg.ClusterName, r.cfg.CrossClusterName
	rsB, hasOther := other(r, "Routes", cloudprovider.Interface.Routes)
	var baseB, baseOther []*cloudprovider.Route
	if !hasOther {
		baseB = r.listRoutes(rs, b)
	} else {
		// Two clusters on one network, both named ClusterName.
		baseOther = r.listRoutes(retryRoutes{r, rsB}, a)
	}
	n := withUID(r.namedNodes(1))[0]
	s := newRoute(n, r.podCIDRs(0)[0])
	r.createRoute(rs, a, s)
	r.needListed(fmt.Sprintf("in cluster %q, after CreateRoute", a), r.listRoutes(rs, a), []routeSpec{s})
	if !hasOther {
		if d := cmp.Diff(baseB, r.listRoutes(rs, b), cmpOpts); d != "" {
			r.Errorf("ListRoutes(cluster %q) changed when cluster %q created a route (-before +after): cluster %q's route controller would delete it (without Target.OtherCluster the clusters are told apart by the clusterName argument only: give a provider that owns routes by a cluster ID of its own a Target.OtherCluster)\n%s", b, a, b, d)
		}
	} else if d := cmp.Diff(baseOther, r.listRoutes(retryRoutes{r, rsB}, a), cmpOpts); d != "" {
		r.Errorf("ListRoutes(%q) of Target.OtherCluster changed when Target.Cloud, another cluster of the same name on the same network, created a route (-before +after): the other cluster's route controller would delete it\n%s", a, d)
	}
	// The other direction, by name: CrossClusterName is ClusterName +
	// "-other", so a provider that selects a cluster's routes by a name
	// prefix (a "<cluster>-.*" filter) lists that cluster's routes too. The
	// route is created by OtherCluster when there is one, so that a
	// provider owning routes by a cluster ID of its own is not asked to
	// tell two names of one cluster apart.
	creator := cloudprovider.Routes(rs)
	if hasOther {
		creator = rsB
	}
	baseA := r.listRoutes(rs, a)
	sb := newRoute(n, r.podCIDRs(1)[0])
	r.createRoute(creator, b, sb)
	if d := cmp.Diff(baseA, r.listRoutes(rs, a), cmpOpts); d != "" {
		r.Errorf("ListRoutes(cluster %q) changed when cluster %q created a route (-before +after): cluster %q's route controller would delete the other cluster's route (a filter on the name prefix %q also matches %q)\n%s", a, b, a, a+"-", b, d)
	}
}

func (r *rt) concurrently(calls []func()) {
	waits := make([]func(), len(calls))
	for i, f := range calls {
		waits[i] = r.Go(f)
	}
	for _, w := range waits {
		w()
	}
}

func (r *rt) concurrentCreates(rs cloudprovider.Routes, cluster string, specs []routeSpec) []func() {
	var calls []func()
	for _, s := range specs {
		calls = append(calls, func() {
			if err := rs.CreateRoute(r.ctx, cluster, s.nameHint, s.route); err != nil {
				r.Errorf("concurrent CreateRoute(%q → %s): %v", s.route.DestinationCIDR, s.route.TargetNode, err)
			}
		})
	}
	return calls
}

func (r *rt) concurrentDeletes(rs cloudprovider.Routes, cluster string, list []*cloudprovider.Route, specs []routeSpec) []func() {
	var calls []func()
	for _, s := range specs {
		for _, rt := range routesTo(list, s.route.DestinationCIDR) {
			calls = append(calls, func() {
				if err := rs.DeleteRoute(r.ctx, cluster, rt); err != nil {
					r.Errorf("concurrent DeleteRoute(%q → %s): %v", rt.DestinationCIDR, rt.TargetNode, err)
				}
			})
		}
	}
	return calls
}

// ruleRouteConcurrent makes the calls of the route controller's reconcile
// (controllers/route/route_controller.go): it starts every DeleteRoute and
// CreateRoute of one sync in goroutines, up to
// maxConcurrentRouteOperations at once, deletes and creates together
// (unless routes are listed with EnableNodeAddresses), and lists only
// between syncs. First both routes of one node are created at once (one
// nameHint), then they are deleted while another node's routes are
// created (a node replaced), then those are deleted at once.
func ruleRouteConcurrent(r *rt) {
	rs := r.routes()
	c := r.cfg.ClusterName
	nodes := withUID(r.namedNodes(1))
	var first, second []routeSpec
	for i, n := range nodes {
		for _, cidr := range r.podCIDRs(i) {
			if i == 0 {
				first = append(first, newRoute(n, cidr))
			} else {
				second = append(second, newRoute(n, cidr))
			}
		}
	}
	if len(second) == 0 {
		first, second = first[:1], first[1:]
	}
	if len(second) == 0 {
		r.Skipf("needs two routes: two fixture nodes, or one and Claims.IPv6Routes")
	}
	r.concurrently(r.concurrentCreates(rs, c, first))
	list := r.listRoutes(rs, c)
	for _, d := range unlisted(list, first) {
		r.Errorf("after concurrent CreateRoute calls, route %q is not listed (listed: %v)", d, listing(list))
	}
	r.concurrently(append(r.concurrentDeletes(rs, c, list, first), r.concurrentCreates(rs, c, second)...))
	list = r.listRoutes(rs, c)
	for _, d := range unlisted(list, second) {
		r.Errorf("after CreateRoute calls concurrent with DeleteRoute calls of other routes, route %q is not listed (listed: %v)", d, listing(list))
	}
	for _, s := range first {
		if len(routesTo(list, s.route.DestinationCIDR)) != 0 {
			r.Errorf("after DeleteRoute calls concurrent with CreateRoute calls of other routes, route %q is still listed", s.route.DestinationCIDR)
		}
	}
	r.concurrently(r.concurrentDeletes(rs, c, list, second))
	list = r.listRoutes(rs, c)
	for _, s := range second {
		if len(routesTo(list, s.route.DestinationCIDR)) != 0 {
			r.Errorf("after concurrent DeleteRoute calls, route %q is still listed", s.route.DestinationCIDR)
		}
	}
}

// ruleRouteOutage lists the routes once, as the route controller does
// every sync, creates another, and lists them during an outage: a list
// without it, and no error, would make the controller create it again and
// mark its node NetworkUnavailable when that fails
// (controllers/route/route_controller.go reconcileNodeRoutes, reconcile).
func ruleRouteOutage(r *rt) {
	rs := r.routes()
	r.needHook("Outage", r.target().Hooks.Outage)
	c := r.cfg.ClusterName
	specs := r.spreadRoutes(2)
	r.createRoute(rs, c, specs[0])
	r.needListed("before the outage, after CreateRoute", r.listRoutes(rs, c), specs[:1])
	for _, s := range specs[1:] {
		r.createRoute(rs, c, s)
	}
	restore := r.target().Hooks.Outage()
	defer restore()
	// One answer, not retried: an api.RetryError is an error, as asked.
	list, err := rs.Routes.ListRoutes(r.ctx, c)
	if m := unlisted(list, specs); err == nil && len(m) > 0 {
		r.Errorf("ListRoutes(%q) during a cloud outage returned %d routes, without routes %q, and no error: the route controller would create routes that exist and, failing, mark their nodes NetworkUnavailable: expected an error", c, len(list), m)
	}
}
