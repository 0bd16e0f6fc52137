package conformance_test

import (
	"context"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	cloudprovider "k8s.io/cloud-provider"
)

// notImplementedZones is a Zones whose look-ups by provider ID (byID) or
// by node name (!byID) answer cloudprovider.NotImplemented.
type notImplementedZones struct {
	cloudprovider.Zones
	byID bool
}

func (z notImplementedZones) GetZoneByProviderID(ctx context.Context, id string) (cloudprovider.Zone, error) {
	if z.byID {
		return cloudprovider.Zone{}, cloudprovider.NotImplemented
	}
	return z.Zones.GetZoneByProviderID(ctx, id)
}

func (z notImplementedZones) GetZoneByNodeName(ctx context.Context, name types.NodeName) (cloudprovider.Zone, error) {
	if !z.byID {
		return cloudprovider.Zone{}, cloudprovider.NotImplemented
	}
	return z.Zones.GetZoneByNodeName(ctx, name)
}

// brokenNotImplemented are providers whose one method answers
// cloudprovider.NotImplemented to every call: each fails the rule that owns
// the method (methodOwners) and no other, every other rule that needs the
// method being skipped, naming the owner. Upstream takes NotImplemented from
// these methods for an error like any other (see methodOwners).
func brokenNotImplemented() []brokenCase {
	type bc = brokenCase
	unimpl := cloudprovider.NotImplemented
	return []bc{
		{
			name: "lb-get-not-implemented", want: "LB-GET-EXISTS", clause: "exists=false before the first Ensure",
			reason: "GetLoadBalancer answers NotImplemented: the service controller can neither see nor clean up a load balancer",
			b: lbWrap(func(b *wrappedLB) {
				b.get = func(cloudprovider.LoadBalancer, context.Context, string, *v1.Service) (*v1.LoadBalancerStatus, bool, error) {
					return nil, false, unimpl
				}
			}),
		},
		{
			name: "lb-ensure-not-implemented", want: "LB-ENSURE-STATUS", clause: "succeeds for a plain TCP Service",
			reason: "EnsureLoadBalancer answers NotImplemented: no Service ever gets a load balancer",
			b: lbWrap(func(b *wrappedLB) {
				b.ensure = func(cloudprovider.LoadBalancer, context.Context, string, *v1.Service, []*v1.Node) (*v1.LoadBalancerStatus, error) {
					return nil, unimpl
				}
			}),
		},
		{
			name: "lb-update-not-implemented", want: "LB-BACKENDS", clause: "the last Ensure or Update",
			reason: "UpdateLoadBalancer answers NotImplemented: node changes never reach the load balancers",
			b: lbWrap(func(b *wrappedLB) {
				b.update = func(cloudprovider.LoadBalancer, context.Context, string, *v1.Service, []*v1.Node) error {
					return unimpl
				}
			}),
		},
		{
			name: "lb-delete-not-implemented", want: "LB-DELETE", clause: "nothing the provider created remains",
			reason: "EnsureLoadBalancerDeleted answers NotImplemented: a deleted Service keeps its finalizer and its load balancer",
			b: lbWrap(func(b *wrappedLB) {
				b.del = func(cloudprovider.LoadBalancer, context.Context, string, *v1.Service) error { return unimpl }
			}),
		},
		{
			name: "inst-exists-not-implemented", want: "INST-EXISTS", clause: "(true, nil) for running instances, by provider ID",
			reason: "InstanceExists answers NotImplemented: the node lifecycle controller never deletes the Node of a terminated instance",
			b: instWrap(func(b *wrappedInst) {
				b.exists = func(cloudprovider.InstancesV2, context.Context, *v1.Node) (bool, error) { return false, unimpl }
			}),
		},
		{
			name: "inst-shutdown-not-implemented", want: "INST-SHUTDOWN", clause: "InstanceShutdown of a running instance is (false, nil)",
			reason: "InstanceShutdown answers NotImplemented, as GCE's provider does: MonitorNodes logs an error for every NotReady Node on every pass and a stopped instance never gets the shutdown taint",
			b: instWrap(func(b *wrappedInst) {
				b.shutdown = func(cloudprovider.InstancesV2, context.Context, *v1.Node) (bool, error) { return false, unimpl }
			}),
		},
		{
			name: "inst-metadata-not-implemented", want: "INST-METADATA", clause: "is non-nil",
			reason: "InstanceMetadata answers NotImplemented: no Node is ever initialized",
			b: instWrap(func(b *wrappedInst) {
				b.metadata = func(cloudprovider.InstancesV2, context.Context, *v1.Node) (*cloudprovider.InstanceMetadata, error) {
					return nil, unimpl
				}
			}),
		},
		{
			name: "route-list-not-implemented", want: "ROUTE-ROUNDTRIP", clause: "ListRoutes returns each created route",
			reason: "ListRoutes answers NotImplemented: the route controller can reconcile nothing",
			b: routesWrap(func(b *wrappedRoutes) {
				b.list = func(cloudprovider.Routes, context.Context, string) ([]*cloudprovider.Route, error) {
					return nil, unimpl
				}
			}),
		},
		{
			name: "route-create-not-implemented", want: "ROUTE-ROUNDTRIP", clause: "ListRoutes returns each created route",
			reason: "CreateRoute answers NotImplemented: no pod CIDR is ever routed",
			b: routesWrap(func(b *wrappedRoutes) {
				b.create = func(cloudprovider.Routes, context.Context, string, string, *cloudprovider.Route) error { return unimpl }
			}),
		},
		{
			name: "route-delete-not-implemented", want: "ROUTE-DELETE", clause: "DeleteRoute of a route as listed removes",
			reason: "DeleteRoute answers NotImplemented: routes of deleted Nodes stay forever",
			b: routesWrap(func(b *wrappedRoutes) {
				b.del = func(cloudprovider.Routes, context.Context, string, *cloudprovider.Route) error { return unimpl }
			}),
		},
		{
			name: "zone-by-provider-id-not-implemented", want: "ZONES-LOOKUP", clause: "GetZoneByProviderID and GetZoneByNodeName agree with each other",
			reason: "GetZoneByProviderID answers NotImplemented: a node controller without InstancesV2 cannot label Nodes with their zone",
			claims: zonesClaimed, target: zonesTarget(false),
			b: wrapped{zones: func(z cloudprovider.Zones) cloudprovider.Zones { return notImplementedZones{z, true} }},
		},
		{
			name: "zone-by-node-name-not-implemented", want: "ZONES-LOOKUP", clause: "GetZoneByProviderID and GetZoneByNodeName agree with each other",
			reason: "GetZoneByNodeName answers NotImplemented",
			claims: zonesClaimed, target: zonesTarget(false),
			b: wrapped{zones: func(z cloudprovider.Zones) cloudprovider.Zones { return notImplementedZones{z, false} }},
		},
	}
}
