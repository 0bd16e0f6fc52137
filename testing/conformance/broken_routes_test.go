package conformance_test

import (
	"context"
	"net/netip"

	cloudprovider "k8s.io/cloud-provider"
)

// brokenRoutes returns the broken providers of the route rules: ROUTE-*.
func brokenRoutes() []brokenCase {
	type bc = brokenCase
	return []bc{
		{
			name: "route-cidr-rerendered", want: "ROUTE-CIDR-VERBATIM",
			reason: "listed destinations are parsed and printed again, so a non-canonical pod CIDR comes back changed",
			b: wrapped{routes: func(b wrappedRoutes) cloudprovider.Routes {
				b.list = func(next cloudprovider.Routes, ctx context.Context, c string) ([]*cloudprovider.Route, error) {
					list, err := next.ListRoutes(ctx, c)
					for i, r := range list {
						if p, perr := netip.ParsePrefix(r.DestinationCIDR); perr == nil {
							cp := *r
							cp.DestinationCIDR = p.String()
							list[i] = &cp
						}
					}
					return list, err
				}
				return b
			}},
		},
		{
			name: "route-names-per-node", want: "ROUTE-NAMES",
			reason: "routes are named after the node only, so a node's IPv4 and IPv6 routes share a name",
			b: wrapped{routes: func(b wrappedRoutes) cloudprovider.Routes {
				b.list = func(next cloudprovider.Routes, ctx context.Context, c string) ([]*cloudprovider.Route, error) {
					list, err := next.ListRoutes(ctx, c)
					for i, r := range list {
						cp := *r
						cp.Name = "route-" + string(r.TargetNode)
						list[i] = &cp
					}
					return list, err
				}
				b.del = func(next cloudprovider.Routes, ctx context.Context, c string, r *cloudprovider.Route) error {
					list, err := next.ListRoutes(ctx, c)
					if err != nil {
						return err
					}
					for _, l := range list {
						if l.DestinationCIDR == r.DestinationCIDR && l.TargetNode == r.TargetNode {
							return next.DeleteRoute(ctx, c, l)
						}
					}
					return next.DeleteRoute(ctx, c, r)
				}
				return b
			}},
		},
		{
			name: "routes-empty-on-error", want: "ROUTE-OUTAGE",
			reason: "a failed route-table read is reported as an empty table",
			b: wrapped{routes: func(b wrappedRoutes) cloudprovider.Routes {
				b.list = func(next cloudprovider.Routes, ctx context.Context, c string) ([]*cloudprovider.Route, error) {
					list, err := next.ListRoutes(ctx, c)
					if err != nil && ctx.Err() == nil {
						return nil, nil
					}
					return list, err
				}
				return b
			}},
		},
		{
			name: "routes-shared-across-clusters", want: "ROUTE-CLUSTER-SCOPE",
			reason: "with Target.OtherCluster: the other cluster's provider lists routes by cluster name, equal in both clusters, not by its own cluster ID",
			target: twoClusters(false, true),
		},
	}
}

// clausesRoutes returns the clauses of the statements of the rules of this
// file, each quoted from its statement (see TestBrokenCoverage).
func clausesRoutes() map[string][]string {
	return map[string][]string{}
}
