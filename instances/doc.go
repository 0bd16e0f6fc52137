// Package instances turns a small, cloud-specific Driver into a
// cloudprovider.InstancesV2 that keeps the contract the upstream node and
// node-lifecycle controllers rely on (k8s.io/cloud-provider v0.37.2), and
// provides the node-address utilities that contract needs.
//
// It has three parts:
//
//   - BuildAddresses validates, normalises, de-duplicates and orders a
//     []v1.NodeAddress in one documented canonical order, and applies the
//     kubelet's alpha.kubernetes.io/provided-node-ip annotation exactly as the
//     node controller does (it calls the upstream
//     node/helpers.GetNodeAddressesFromNodeIP), so the controller never sees a
//     reordered or filtered list and never rewrites a Node for nothing.
//   - Adapter implements cloudprovider.InstancesV2 over a Driver (look-up by
//     instance ID and by node name). It looks a Node up by spec.providerID
//     first and by name only when there is none, reports an instance gone
//     ((false, nil) from InstanceExists, which makes the node-lifecycle
//     controller delete the Node at once) only when the Driver definitely says
//     so, and builds InstanceMetadata with the provider ID, instance type,
//     zone, region, canonical addresses and validated labels.
//   - Cache is a Driver that answers look-ups from one List call per TTL, with
//     concurrent refreshes coalesced, and confirms every "gone" answer with a
//     direct look-up on the wrapped Driver. With N nodes the node controller
//     calls InstanceMetadata N times per sync period; with a Cache that is one
//     cloud call instead of N.
//
// # Throttling
//
// A Driver says "throttled, retry after D" by returning an error that wraps
// an *api.RetryError (k8s.io/cloud-provider/api, api.NewRetryError(msg, D)),
// found with errors.As; this is ccmkit's one convention for every block
// (the loadbalancer and routes packages read it the same way). The Adapter
// never reports an instance gone on such an error, even if it also wraps
// ErrNotFound: InstanceExists is (false, err), the RetryError stays
// findable, and the node and node-lifecycle controllers try again at their
// next sync. A Cache whose List is throttled makes no List call before D
// has passed (it remembers the failure for max(CacheOptions.ErrorTTL, D));
// look-ups in that window fail at once, without a cloud call, with a
// RetryError carrying the time left.
//
// Compose them as
//
//	cache, err := instances.NewCache(myDriver, instances.CacheOptions{TTL: time.Minute})
//	...
//	v2, err := instances.NewAdapter(cache, provider.Codec{Scheme: "acme"}, instances.Options{})
//
// and return v2 from your cloudprovider.Interface's InstancesV2 method.
//
// The package is not a cloud client and keeps no state of its own beyond the
// Cache: it never starts goroutines, reads no flags, files or environment,
// and never writes to the cloud.
package instances
