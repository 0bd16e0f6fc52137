package conformance

import (
	"fmt"
	"net/netip"
	"reflect"
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
// addresses, no Name, nameHint the node UID.
func newRoute(n *v1.Node, cidr string) routeSpec {
	hint := string(n.UID)
	if hint == "" {
		hint = string(uuid.NewUUID())
	}
	return routeSpec{node: n, nameHint: hint, route: &cloudprovider.Route{
		TargetNode:          types.NodeName(n.Name),
		TargetNodeAddresses: n.Status.Addresses,
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
	var out []*cloudprovider.Route
	for _, rt := range list {
		if rt != nil && rt.DestinationCIDR == cidr {
			out = append(out, rt)
		}
	}
	return out
}

// checkListed fails unless every spec is listed exactly once, byte-identical,
// with its target node and Blackhole false.
func (r *rt) checkListed(what string, list []*cloudprovider.Route, specs []routeSpec) {
	for _, s := range specs {
		found := findRoutes(list, s.route.DestinationCIDR)
		switch {
		case len(found) == 0:
			var got []string
			for _, rt := range list {
				if rt != nil {
					got = append(got, fmt.Sprintf("%q→%s", rt.DestinationCIDR, rt.TargetNode))
				}
			}
			r.Errorf("%s: no listed route has DestinationCIDR %q (byte for byte, as the route controller compares), listed: %v", what, s.route.DestinationCIDR, got)
		case len(found) > 1:
			r.Errorf("%s: %d routes listed with DestinationCIDR %q, expected 1", what, len(found), s.route.DestinationCIDR)
		case found[0].TargetNode != s.route.TargetNode:
			r.Errorf("%s: route %q lists TargetNode %q, expected %q", what, s.route.DestinationCIDR, found[0].TargetNode, s.route.TargetNode)
		case found[0].Blackhole:
			r.Errorf("%s: route %q to running node %s is listed as Blackhole: the route controller deletes blackhole routes", what, s.route.DestinationCIDR, s.route.TargetNode)
		}
	}
}

func ruleRouteRoundtrip(r *rt) {
	rs := r.routes()
	n := withUID(r.namedNodes(1))[0]
	c := r.cfg.ClusterName
	var specs []routeSpec
	for _, cidr := range r.podCIDRs(0) {
		s := newRoute(n, cidr)
		r.createRoute(rs, c, s)
		specs = append(specs, s)
	}
	r.checkListed("after CreateRoute", r.listRoutes(rs, c), specs)
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
	r.checkListed("after CreateRoute with a non-canonical IPv6 CIDR (a spec.podCIDRs spelling the API server accepts)", list, specs)
	for _, s := range specs {
		for _, rt := range findRoutes(list, s.route.DestinationCIDR) {
			if err := rs.DeleteRoute(r.ctx, c, rt); err != nil {
				r.Errorf("DeleteRoute of route %q as listed: %v", rt.DestinationCIDR, err)
			}
		}
	}
}

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
	r.checkListed("after creating the IPv4 and IPv6 routes of each node with one nameHint (the node UID)", list, specs)
	byName := map[string]string{}
	for _, s := range specs {
		for _, rt := range findRoutes(list, s.route.DestinationCIDR) {
			if rt.Name == "" {
				r.Errorf("route %q is listed without a Name", rt.DestinationCIDR)
				continue
			}
			if other, dup := byName[rt.Name]; dup {
				r.Errorf("routes %q and %q are listed with the same Name %q, expected a name per (node, CIDR)", other, rt.DestinationCIDR, rt.Name)
			}
			byName[rt.Name] = rt.DestinationCIDR
		}
	}
}

// twoRoutes returns two routes of the fixtures: one per node when there are
// two nodes, else the two families of one node.
func (r *rt) twoRoutes() []routeSpec {
	nodes := withUID(r.namedNodes(1))
	if len(nodes) >= 2 {
		return []routeSpec{newRoute(nodes[0], r.podCIDRs(0)[0]), newRoute(nodes[1], r.podCIDRs(1)[0])}
	}
	cidrs := r.podCIDRs(0)
	if len(cidrs) < 2 {
		r.Skipf("needs two fixture nodes, or one node and Claims.IPv6Routes")
	}
	return []routeSpec{newRoute(nodes[0], cidrs[0]), newRoute(nodes[0], cidrs[1])}
}

func ruleRouteDelete(r *rt) {
	rs := r.routes()
	c := r.cfg.ClusterName
	before := r.owned()
	specs := r.twoRoutes()
	for _, s := range specs {
		r.createRoute(rs, c, s)
	}
	list := r.listRoutes(rs, c)
	victim := findRoutes(list, specs[0].route.DestinationCIDR)
	if len(victim) != 1 {
		r.Skipf("precondition failed: route %q is listed %d times: see ROUTE-ROUNDTRIP", specs[0].route.DestinationCIDR, len(victim))
	}
	if err := rs.DeleteRoute(r.ctx, c, victim[0]); err != nil {
		r.Fatalf("DeleteRoute(%q) of a route as listed: %v", victim[0].DestinationCIDR, err)
	}
	list = r.listRoutes(rs, c)
	if len(findRoutes(list, specs[0].route.DestinationCIDR)) != 0 {
		r.Errorf("after DeleteRoute, route %q is still listed", specs[0].route.DestinationCIDR)
	}
	r.checkListed("after deleting another route", list, specs[1:])
	for _, rt := range findRoutes(list, specs[1].route.DestinationCIDR) {
		if err := rs.DeleteRoute(r.ctx, c, rt); err != nil {
			r.Fatalf("DeleteRoute(%q) of a route as listed: %v", rt.DestinationCIDR, err)
		}
	}
	if left := findRoutes(r.listRoutes(rs, c), specs[1].route.DestinationCIDR); len(left) != 0 {
		r.Errorf("after DeleteRoute, route %q is still listed", specs[1].route.DestinationCIDR)
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
	for _, rt := range findRoutes(r.listRoutes(rs, r.cfg.ClusterName), s.route.DestinationCIDR) {
		if !rt.EnableNodeAddresses {
			r.Logf("route %q is listed with EnableNodeAddresses=false: the route controller does not compare addresses", rt.DestinationCIDR)
			continue
		}
		if !equalAddrs(addrs, rt.TargetNodeAddresses) {
			r.Errorf("route %q is listed with EnableNodeAddresses and TargetNodeAddresses %v, but was created with %v: the route controller deletes and re-creates it on every sync", rt.DestinationCIDR, rt.TargetNodeAddresses, addrs)
		}
	}
}

func ruleRouteBlackhole(r *rt) {
	rs := r.routes()
	c := r.cfg.ClusterName
	nodes := withUID(r.namedNodes(1))
	var specs []routeSpec
	for i, n := range nodes {
		s := newRoute(n, r.podCIDRs(i)[0])
		r.createRoute(rs, c, s)
		specs = append(specs, s)
	}
	r.checkListed("routes to running instances", r.listRoutes(rs, c), specs)
	term := r.target().Hooks.TerminateInstance
	if term == nil {
		r.Logf("Hooks.TerminateInstance is nil: routes to terminated instances were not checked")
		return
	}
	r.changeCloud("TerminateInstance", term, nodes[0])
	dead := findRoutes(r.listRoutes(rs, c), specs[0].route.DestinationCIDR)
	if len(dead) == 0 {
		r.Logf("the route to terminated instance %s is no longer listed", nodes[0].Name)
	}
	for _, rt := range dead {
		if err := rs.DeleteRoute(r.ctx, c, rt); err != nil {
			r.Errorf("DeleteRoute(%q, as listed: Blackhole %v) to terminated instance %s: %v, expected nil: the route controller deletes such routes", rt.DestinationCIDR, rt.Blackhole, nodes[0].Name, err)
		}
	}
	if left := findRoutes(r.listRoutes(rs, c), specs[0].route.DestinationCIDR); len(left) != 0 {
		r.Errorf("after DeleteRoute, route %q to terminated instance %s is still listed", specs[0].route.DestinationCIDR, nodes[0].Name)
	}
	r.checkListed("routes to running instances, after another instance was terminated", r.listRoutes(rs, c), specs[1:])
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
	r.checkListed(fmt.Sprintf("cluster %q", a), r.listRoutes(rs, a), []routeSpec{s})
	if !hasOther {
		if d := cmp.Diff(baseB, r.listRoutes(rs, b), cmpOpts); d != "" {
			r.Errorf("ListRoutes(cluster %q) changed when cluster %q created a route (-before +after): cluster %q's route controller would delete it (without Target.OtherCluster the clusters are told apart by the clusterName argument only: give a provider that owns routes by a cluster ID of its own a Target.OtherCluster)\n%s", b, a, b, d)
		}
		return
	}
	if d := cmp.Diff(baseOther, r.listRoutes(retryRoutes{r, rsB}, a), cmpOpts); d != "" {
		r.Errorf("ListRoutes(%q) of Target.OtherCluster changed when Target.Cloud, another cluster of the same name on the same network, created a route (-before +after): the other cluster's route controller would delete it\n%s", a, d)
	}
}

func ruleRouteConcurrent(r *rt) {
	rs := r.routes()
	c := r.cfg.ClusterName
	nodes := withUID(r.namedNodes(1))
	var specs []routeSpec
	for i, n := range nodes {
		for _, cidr := range r.podCIDRs(i) {
			specs = append(specs, newRoute(n, cidr))
		}
	}
	var waits []func()
	for _, s := range specs {
		waits = append(waits, r.Go(func() {
			if err := rs.CreateRoute(r.ctx, c, s.nameHint, s.route); err != nil {
				r.Errorf("concurrent CreateRoute(%q → %s): %v", s.route.DestinationCIDR, s.route.TargetNode, err)
			}
		}))
	}
	for range 2 {
		waits = append(waits, r.Go(func() {
			if _, err := rs.ListRoutes(r.ctx, c); err != nil {
				r.Errorf("ListRoutes during concurrent CreateRoute: %v", err)
			}
		}))
	}
	for _, w := range waits {
		w()
	}
	list := r.listRoutes(rs, c)
	r.checkListed("after concurrent CreateRoute calls", list, specs)
	waits = nil
	for _, s := range specs {
		for _, rt := range findRoutes(list, s.route.DestinationCIDR) {
			waits = append(waits, r.Go(func() {
				if err := rs.DeleteRoute(r.ctx, c, rt); err != nil {
					r.Errorf("concurrent DeleteRoute(%q): %v", rt.DestinationCIDR, err)
				}
			}))
		}
	}
	for _, w := range waits {
		w()
	}
	list = r.listRoutes(rs, c)
	for _, s := range specs {
		if left := findRoutes(list, s.route.DestinationCIDR); len(left) != 0 {
			r.Errorf("after concurrent DeleteRoute calls, route %q is still listed", s.route.DestinationCIDR)
		}
	}
}

func ruleRouteOutage(r *rt) {
	rs := r.routes()
	r.needHook("Outage", r.target().Hooks.Outage)
	c := r.cfg.ClusterName
	n := withUID(r.namedNodes(1))[0]
	s := newRoute(n, r.podCIDRs(0)[0])
	r.createRoute(rs, c, s)
	restore := r.target().Hooks.Outage()
	defer restore()
	// One answer, not retried: an api.RetryError is an error, as asked.
	list, err := rs.Routes.ListRoutes(r.ctx, c)
	if err == nil && len(findRoutes(list, s.route.DestinationCIDR)) == 0 {
		r.Errorf("ListRoutes(%q) during a cloud outage returned %d routes, without route %q, and no error: the route controller would re-create routes that exist; expected an error", c, len(list), s.route.DestinationCIDR)
	}
}
