package conformance_test

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	v1 "k8s.io/api/core/v1"
	cloudprovider "k8s.io/cloud-provider"

	"github.com/ccmkit/ccmkit/testing/conformance"
)

// brokenRoutes returns the broken providers of the route rules: ROUTE-*.
// Route.TargetNode is a Node name; ROUTE-BLACKHOLE also routes
// Target.RenamedNodes, whose Nodes are named unlike their instances. A
// broken Routes can only fail rules that
// call Routes, so each case claims routes alone (routesOnly, see narrowed):
// the other capabilities' rules are skipped, not run in vain.
func brokenRoutes() []brokenCase {
	type bc = brokenCase
	return narrowed(routesOnly, []bc{
		// ROUTE-ROUNDTRIP
		{
			name: "route-ipv6-create-dropped", want: "ROUTE-ROUNDTRIP", clause: "ListRoutes returns each created route",
			also:   []string{"ROUTE-NAMES", "ROUTE-CIDR-VERBATIM", "ROUTE-CONCURRENT"},
			reason: "CreateRoute of an IPv6 route returns nil without creating it; ROUTE-NAMES, ROUTE-CIDR-VERBATIM and ROUTE-CONCURRENT create IPv6 routes too, and that they are listed is each one's own clause",
			b: routesWrap(func(b *wrappedRoutes) {
				b.create = func(next cloudprovider.Routes, ctx context.Context, c, hint string, r *cloudprovider.Route) error {
					if err := ctx.Err(); err != nil {
						return err
					}
					if p, err := netip.ParsePrefix(r.DestinationCIDR); err == nil && p.Addr().Is6() {
						return nil
					}
					return next.CreateRoute(ctx, c, hint, r)
				}
			}),
		},
		{
			name: "route-cidr-expanded", want: "ROUTE-ROUNDTRIP", clause: "DestinationCIDR byte-identical",
			also:   []string{"ROUTE-CIDR-VERBATIM"},
			reason: "IPv6 destinations are listed in expanded form (as the cloud API returns them), and DeleteRoute finds a route by its network; ROUTE-CIDR-VERBATIM's upper-case spelling comes back expanded too",
			b: routesRewritten(func(r *cloudprovider.Route) {
				if p, err := netip.ParsePrefix(r.DestinationCIDR); err == nil && p.Addr().Is6() {
					r.DestinationCIDR = fmt.Sprintf("%s/%d", p.Addr().StringExpanded(), p.Bits())
				}
			}, routesSameNetwork),
		},
		{
			name: "route-target-fqdn", want: "ROUTE-ROUNDTRIP", clause: "with its TargetNode",
			also:    []string{"CTRL-ROUTES"}, // the route controller compares TargetNode too
			reason:  "TargetNode is listed as the next hop's DNS name (node.internal), not the Node name CreateRoute got; CTRL-ROUTES waits in vain for routes to the Nodes",
			timeout: brokenTimeout, // CTRL-ROUTES waits it out

			b: routesRewritten(func(r *cloudprovider.Route) {
				r.TargetNode += ".internal"
			}, func(stored, listed *cloudprovider.Route) bool {
				return stored.DestinationCIDR == listed.DestinationCIDR && stored.TargetNode+".internal" == listed.TargetNode
			}),
		},
		{
			name: "route-ipv6-blackhole", want: "ROUTE-ROUNDTRIP", clause: "Blackhole false",
			reason: "IPv6 routes are listed as Blackhole: the provider checks the next hop's IPv4 address only",
			b: routesRewritten(func(r *cloudprovider.Route) {
				if p, err := netip.ParsePrefix(r.DestinationCIDR); err == nil && p.Addr().Is6() {
					r.Blackhole = true
				}
			}, nil),
		},

		// ROUTE-CIDR-VERBATIM
		{
			name: "route-cidr-rerendered", want: "ROUTE-CIDR-VERBATIM", clause: "is listed exactly as given",
			reason: "listed destinations are parsed and printed again, so a non-canonical pod CIDR comes back changed (DeleteRoute finds a route by its network)",
			b: routesRewritten(func(r *cloudprovider.Route) {
				if p, err := netip.ParsePrefix(r.DestinationCIDR); err == nil {
					r.DestinationCIDR = p.String()
				}
			}, routesSameNetwork),
		},

		// ROUTE-NAMES
		{
			name: "route-one-per-namehint", want: "ROUTE-NAMES", clause: "are both kept",
			also:   []string{"ROUTE-CONCURRENT"}, // it creates both routes of a node at once, as the route controller does
			reason: "routes are named after nameHint alone, so a node's second route replaces its first; ROUTE-CONCURRENT creates both routes of one node too",
			target: routesTarget(func() wrapped {
				var mu sync.Mutex
				return routesWrap(func(b *wrappedRoutes) {
					b.create = func(next cloudprovider.Routes, ctx context.Context, c, hint string, r *cloudprovider.Route) error {
						mu.Lock()
						defer mu.Unlock()
						return routesReplace(next, ctx, c, hint, r, func(l *cloudprovider.Route) bool { return l.TargetNode == r.TargetNode })
					}
				})
			}),
		},
		{
			name: "route-named-by-route-name", want: "ROUTE-NAMES", clause: "any Route.Name",
			reason: "a Route.Name given to CreateRoute names the cloud route, so routes created with one Route.Name replace each other",
			target: routesTarget(func() wrapped {
				var mu sync.Mutex
				named := map[string]string{} // Route.Name → destination
				return routesWrap(func(b *wrappedRoutes) {
					b.create = func(next cloudprovider.Routes, ctx context.Context, c, hint string, r *cloudprovider.Route) error {
						if r.Name == "" {
							return next.CreateRoute(ctx, c, hint, r)
						}
						mu.Lock()
						defer mu.Unlock()
						prev, used := named[r.Name]
						named[r.Name] = r.DestinationCIDR
						return routesReplace(next, ctx, c, hint, r, func(l *cloudprovider.Route) bool { return used && l.DestinationCIDR == prev })
					}
				})
			}),
		},
		{
			name: "route-names-per-node", want: "", // correct: passes every rule
			reason: "routes are listed under a name per node, shared by a node's IPv4 and IPv6 routes, and DeleteRoute finds a route by destination and node: the route controller reads no names, so this is correct",
			b: routesRewritten(func(r *cloudprovider.Route) {
				r.Name = "route-" + string(r.TargetNode)
			}, func(stored, listed *cloudprovider.Route) bool {
				return stored.DestinationCIDR == listed.DestinationCIDR && stored.TargetNode == listed.TargetNode
			}),
		},

		// ROUTE-DELETE
		{
			name: "route-delete-canonicalizes", want: "ROUTE-DELETE", clause: "DeleteRoute of a route as listed removes",
			reason: "DeleteRoute parses and prints the listed destination again before looking the route up, so a route spelled non-canonically is not found, and not deleted",
			b: routesListRewritten(func([]*cloudprovider.Route) {}, func(stored, listed *cloudprovider.Route) bool {
				p, err := netip.ParsePrefix(listed.DestinationCIDR)
				return err == nil && stored.DestinationCIDR == p.String() && stored.TargetNode == listed.TargetNode
			}),
		},
		{
			name: "route-delete-node-routes", want: "ROUTE-DELETE", clause: "exactly that route",
			reason: "DeleteRoute deletes every route to the route's target node (its nameHint prefix), not only the route given",
			b: routesListRewritten(func([]*cloudprovider.Route) {}, func(stored, listed *cloudprovider.Route) bool {
				return stored.TargetNode == listed.TargetNode
			}),
		},
		{
			name: "route-delete-hides", want: "ROUTE-DELETE", clause: "deleting every route leaves nothing behind",
			reason: "DeleteRoute marks the route deleted in the provider's memory and no longer lists it, but leaves it in the cloud",
			target: routesTarget(func() wrapped {
				var mu sync.Mutex
				hidden := map[string]bool{} // destinations
				return routesWrap(func(b *wrappedRoutes) {
					b.del = func(_ cloudprovider.Routes, ctx context.Context, _ string, r *cloudprovider.Route) error {
						mu.Lock()
						defer mu.Unlock()
						hidden[r.DestinationCIDR] = true
						return ctx.Err()
					}
					b.create = func(next cloudprovider.Routes, ctx context.Context, c, hint string, r *cloudprovider.Route) error {
						mu.Lock()
						delete(hidden, r.DestinationCIDR)
						mu.Unlock()
						return next.CreateRoute(ctx, c, hint, r)
					}
					b.list = func(next cloudprovider.Routes, ctx context.Context, c string) ([]*cloudprovider.Route, error) {
						list, err := next.ListRoutes(ctx, c)
						mu.Lock()
						defer mu.Unlock()
						var out []*cloudprovider.Route
						for _, r := range list {
							if !hidden[r.DestinationCIDR] {
								out = append(out, r)
							}
						}
						return out, err
					}
				})
			}),
		},

		// ROUTE-TARGET-ADDRESSES
		{
			name: "route-addresses-ips-only", want: "ROUTE-TARGET-ADDRESSES", clause: "carries the TargetNodeAddresses it was created with",
			also:   []string{"CTRL-ROUTES"}, // the route controller compares the addresses (equalNodeAddrs) and replaces the routes
			reason: "routes are listed with EnableNodeAddresses but only the target's IP addresses (the cloud keeps no host names); CTRL-ROUTES sees the route controller replace the routes on every sync",
			b: routesRewritten(func(r *cloudprovider.Route) {
				r.EnableNodeAddresses = true
				var ips []v1.NodeAddress
				for _, a := range r.TargetNodeAddresses {
					if a.Type == v1.NodeInternalIP || a.Type == v1.NodeExternalIP {
						ips = append(ips, a)
					}
				}
				r.TargetNodeAddresses = ips
			}, nil),
		},

		// ROUTE-BLACKHOLE
		{
			name: "route-blackhole-table-state", want: "ROUTE-BLACKHOLE", clause: "Routes to running instances are not Blackhole",
			reason: "the blackhole state is read once per route table: when one route's target is gone, every route is listed as Blackhole",
			b: routesListRewritten(func(list []*cloudprovider.Route) {
				dead := false
				for _, r := range list {
					dead = dead || r.Blackhole
				}
				for _, r := range list {
					r.Blackhole = dead
				}
			}, nil),
		},
		{
			name: "route-blackhole-by-instance-name", want: "ROUTE-BLACKHOLE", clause: "also for Nodes named unlike their instances",
			reason: "ListRoutes decides Blackhole by looking the target up as an instance name, so the route of a Node named unlike its instance (kubelet --hostname-override) is listed as Blackhole: the route controller deletes it and creates it again on every sync",
			b: routesListRewritten(func(list []*cloudprovider.Route) {
				for _, r := range list {
					if string(r.TargetNode) == renamedNode {
						r.Blackhole = true
					}
				}
			}, nil),
		},
		{
			name: "route-blackhole-undeletable", want: "ROUTE-BLACKHOLE", clause: "a route to a terminated instance can be deleted as listed",
			reason: "DeleteRoute looks the target instance up to find its route table, and fails for a route whose instance is gone",
			b: routesWrap(func(b *wrappedRoutes) {
				b.del = func(next cloudprovider.Routes, ctx context.Context, c string, r *cloudprovider.Route) error {
					if r.Blackhole {
						return fmt.Errorf("route %s: instance of node %s: %w", r.DestinationCIDR, r.TargetNode, cloudprovider.InstanceNotFound)
					}
					return next.DeleteRoute(ctx, c, r)
				}
			}),
		},

		// ROUTE-CLUSTER-SCOPE
		{
			name: "routes-by-cluster-id-alone", want: "ROUTE-CLUSTER-SCOPE", clause: "ListRoutes for one cluster never returns another cluster's routes",
			reason: "without Target.OtherCluster: ListRoutes ignores its clusterName argument (routes are owned by a cluster ID of the provider's own), so another cluster of the account lists this one's routes",
			// routesOnly: the fake's load balancers ignore clusterName as well.
			target: oneClusterTarget,
		},
		{
			name: "routes-listed-by-name-prefix", want: "ROUTE-CLUSTER-SCOPE", clause: "ListRoutes for one cluster never returns another cluster's routes",
			reason: "ListRoutes selects a cluster's routes by a name prefix (GCE's gce_routes.go ListRoutes filters on \"<cluster>-.*\"), so it also lists those of a cluster whose name starts with this one's and a dash",
			// Without OtherCluster, as GCE's target has none: the fake's
			// OtherCluster owns its routes by a cluster ID of its own,
			// which no name filter crosses.
			target: oneClusterTarget,
			b: routesWrap(func(b *wrappedRoutes) {
				b.list = func(next cloudprovider.Routes, ctx context.Context, c string) ([]*cloudprovider.Route, error) {
					own, err := next.ListRoutes(ctx, c)
					if err != nil {
						return nil, err
					}
					prefixed, err := next.ListRoutes(ctx, c+"-other")
					return append(own, prefixed...), err
				}
			}),
		},
		{
			name: "routes-shared-across-clusters", want: "ROUTE-CLUSTER-SCOPE", clause: "nor (with Target.OtherCluster) those of another cluster of the same name on the same network",
			reason: "with Target.OtherCluster: the other cluster's provider lists routes by cluster name, equal in both clusters, not by its own cluster ID",
			target: twoClusters(false, true),
		},

		// ROUTE-CONCURRENT
		{
			name: "route-delete-conflicts", want: "ROUTE-CONCURRENT", clause: "Concurrent CreateRoute and DeleteRoute calls all succeed",
			reason: "DeleteRoute fails, instead of trying again, when another route write is in flight (an optimistic lock on the route table)",
			target: routesTarget(func() wrapped {
				var writes atomic.Int32
				return routesWrap(func(b *wrappedRoutes) {
					b.create = func(next cloudprovider.Routes, ctx context.Context, c, hint string, r *cloudprovider.Route) error {
						writes.Add(1)
						defer writes.Add(-1)
						time.Sleep(routesWriteTime)
						return next.CreateRoute(ctx, c, hint, r)
					}
					b.del = func(next cloudprovider.Routes, ctx context.Context, c string, r *cloudprovider.Route) error {
						defer writes.Add(-1)
						if writes.Add(1) > 1 {
							return errors.New("route table changed during the write: conflict")
						}
						time.Sleep(routesWriteTime)
						return next.DeleteRoute(ctx, c, r)
					}
				})
			}),
		},
		{
			name: "route-delete-writes-stale-table", want: "ROUTE-CONCURRENT", clause: "leave exactly the expected routes",
			reason: "CreateRoute and DeleteRoute each hold a lock of their own, and DeleteRoute writes back the route table it read before its change: routes created meanwhile are lost",
			target: routesTarget(func() wrapped {
				var creating, deleting sync.Mutex
				return routesWrap(func(b *wrappedRoutes) {
					b.create = func(next cloudprovider.Routes, ctx context.Context, c, hint string, r *cloudprovider.Route) error {
						creating.Lock()
						defer creating.Unlock()
						return next.CreateRoute(ctx, c, hint, r)
					}
					b.del = func(next cloudprovider.Routes, ctx context.Context, c string, r *cloudprovider.Route) error {
						deleting.Lock()
						defer deleting.Unlock()
						read, err := next.ListRoutes(ctx, c)
						if err != nil {
							return err
						}
						time.Sleep(routesWriteTime)
						if err := next.DeleteRoute(ctx, c, r); err != nil {
							return err
						}
						return routesWriteBack(next, ctx, c, read)
					}
				})
			}),
		},

		// ROUTE-OUTAGE
		{
			name: "routes-empty-on-error", want: "ROUTE-OUTAGE", clause: "ListRoutes returns an error",
			reason: "a failed route-table read is reported as an empty table",
			b: routesWrap(func(b *wrappedRoutes) {
				b.list = func(next cloudprovider.Routes, ctx context.Context, c string) ([]*cloudprovider.Route, error) {
					list, err := next.ListRoutes(ctx, c)
					if err != nil && ctx.Err() == nil {
						return nil, nil
					}
					return list, err
				}
			}),
		},
		{
			name: "routes-stale-on-error", want: "ROUTE-OUTAGE", clause: "never a partial list",
			reason: "a failed route-table read is answered with the last list read, which lacks the routes created since",
			target: routesTarget(func() wrapped {
				var mu sync.Mutex
				var last []*cloudprovider.Route
				return routesWrap(func(b *wrappedRoutes) {
					b.list = func(next cloudprovider.Routes, ctx context.Context, c string) ([]*cloudprovider.Route, error) {
						list, err := next.ListRoutes(ctx, c)
						mu.Lock()
						defer mu.Unlock()
						switch {
						case err == nil:
							last = list
						case ctx.Err() == nil && last != nil:
							return last, nil
						}
						return list, err
					}
				})
			}),
		},
	})
}

// routesOnly narrows the claims to Routes: the route rules, CTRL-ROUTES
// and the rules of every capability run.
func routesOnly(c *conformance.Claims) {
	*c = conformance.Claims{Routes: true, IPv6Routes: c.IPv6Routes}
}

// routesWriteTime is how long the broken route writes that race take, so
// that concurrent calls overlap.
const routesWriteTime = 20 * time.Millisecond

// routesTarget returns a NewTarget giving newFakeTarget whose providers
// (Cloud, and OtherCluster) are each wrapped by mk(): a broken provider with
// state of its own, fresh for each target and each provider.
func routesTarget(mk func() wrapped) func(context.Context) (*conformance.Target, error) {
	wrap := func(p cloudprovider.Interface) cloudprovider.Interface {
		w := mk()
		w.Interface = p
		return &w
	}
	return targetWith(func(tgt *conformance.Target) error {
		tgt.Cloud = wrap(tgt.Cloud)
		if tgt.OtherCluster != nil {
			tgt.OtherCluster = wrap(tgt.OtherCluster)
		}
		return nil
	})
}

// routesRewritten is routesListRewritten applying rewrite to each route.
func routesRewritten(rewrite func(*cloudprovider.Route), stored func(stored, listed *cloudprovider.Route) bool) wrapped {
	return routesListRewritten(func(list []*cloudprovider.Route) {
		for _, r := range list {
			rewrite(r)
		}
	}, stored)
}

// routesListRewritten lists copies of the routes, rewritten by rewrite,
// and, when stored is not nil, deletes a route given as listed by deleting
// the routes stored (as listed before rewrite) that stored matches with it:
// how the provider finds a route it listed.
func routesListRewritten(rewrite func([]*cloudprovider.Route), stored func(stored, listed *cloudprovider.Route) bool) wrapped {
	return routesWrap(func(b *wrappedRoutes) {
		b.list = func(next cloudprovider.Routes, ctx context.Context, c string) ([]*cloudprovider.Route, error) {
			list, err := next.ListRoutes(ctx, c)
			for i, r := range list {
				cp := *r
				list[i] = &cp
			}
			rewrite(list)
			return list, err
		}
		if stored != nil {
			b.del = func(next cloudprovider.Routes, ctx context.Context, c string, r *cloudprovider.Route) error {
				list, err := next.ListRoutes(ctx, c)
				if err != nil {
					return err
				}
				for _, l := range list {
					if stored(l, r) {
						if err := next.DeleteRoute(ctx, c, l); err != nil {
							return err
						}
					}
				}
				return nil
			}
		}
	})
}

// routesSameNetwork matches a stored route with a listed one of the same
// target and network, however spelled.
func routesSameNetwork(stored, listed *cloudprovider.Route) bool {
	a, errA := netip.ParsePrefix(stored.DestinationCIDR)
	b, errB := netip.ParsePrefix(listed.DestinationCIDR)
	return errA == nil && errB == nil && a.Masked() == b.Masked() && stored.TargetNode == listed.TargetNode
}

// routesReplace creates r after deleting the listed routes that clash
// with it: what a cloud that keys routes by a name two routes share does.
func routesReplace(next cloudprovider.Routes, ctx context.Context, c, hint string, r *cloudprovider.Route, clash func(*cloudprovider.Route) bool) error {
	list, err := next.ListRoutes(ctx, c)
	if err != nil {
		return err
	}
	for _, l := range list {
		if l.DestinationCIDR != r.DestinationCIDR && clash(l) {
			if err := next.DeleteRoute(ctx, c, l); err != nil {
				return err
			}
		}
	}
	return next.CreateRoute(ctx, c, hint, r)
}

// routesWriteBack makes the route table read again, after a change made
// from it: routes listed now but not then are deleted (lost).
func routesWriteBack(next cloudprovider.Routes, ctx context.Context, c string, read []*cloudprovider.Route) error {
	was := map[string]bool{}
	for _, r := range read {
		was[r.DestinationCIDR] = true
	}
	now, err := next.ListRoutes(ctx, c)
	if err != nil {
		return err
	}
	for _, r := range now {
		if !was[r.DestinationCIDR] {
			if err := next.DeleteRoute(ctx, c, r); err != nil {
				return err
			}
		}
	}
	return nil
}

// clausesRoutes returns the clauses of the statements of the rules of this
// file, each quoted from its statement (see TestBrokenCoverage).
func clausesRoutes() map[string][]string {
	return map[string][]string{
		"ROUTE-ROUNDTRIP":        {"ListRoutes returns each created route", "DestinationCIDR byte-identical", "with its TargetNode", "Blackhole false"},
		"ROUTE-CIDR-VERBATIM":    {"is listed exactly as given"},
		"ROUTE-NAMES":            {"are both kept", "any Route.Name"},
		"ROUTE-DELETE":           {"DeleteRoute of a route as listed removes", "exactly that route", "deleting every route leaves nothing behind"},
		"ROUTE-TARGET-ADDRESSES": {"carries the TargetNodeAddresses it was created with"},
		"ROUTE-BLACKHOLE":        {"Routes to running instances are not Blackhole", "also for Nodes named unlike their instances", "a route to a terminated instance can be deleted as listed"},
		"ROUTE-CLUSTER-SCOPE":    {"ListRoutes for one cluster never returns another cluster's routes", "nor (with Target.OtherCluster) those of another cluster of the same name on the same network"},
		"ROUTE-CONCURRENT":       {"Concurrent CreateRoute and DeleteRoute calls all succeed", "leave exactly the expected routes"},
		"ROUTE-OUTAGE":           {"ListRoutes returns an error", "never a partial list"},
	}
}
