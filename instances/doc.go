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
// # Metrics
//
// The Adapter and the Cache record every call they make to a Driver in the
// cloud-controller-manager's metrics registry
// (k8s.io/component-base/metrics/legacyregistry, served on the CCM's
// /metrics), with no code from the provider:
//
//	ccmkit_cloud_requests_total{capability="instances", operation, result}
//	ccmkit_cloud_request_duration_seconds{capability="instances", operation}
//	ccmkit_cache_lookups_total{cache="instances", result}
//	ccmkit_cloud_inconsistent_answers_total{capability="instances", operation="List"}
//
// operation is the Driver method called (GetByID, GetByName, List);
// result is "ok", "throttled" (an error wrapping an *api.RetryError),
// "not-found" (an error wrapping ErrNotFound) or "error". Each call is
// metered in one place: where ccmkit hands it to a Driver that is not its
// own Cache. The Adapter meters the calls it makes to its Driver unless
// that Driver is a Cache; a Cache meters the calls it makes to the Driver
// it wraps, so a look-up the Cache answers is not a cloud call and no
// call is recorded twice. A call the governor refuses (package governor)
// is not recorded: no cloud call was made. A provider's Driver in front
// of a Cache is seen as the Cache only when it embeds the *Cache
// (struct{ *instances.Cache }, overriding the methods it changes). One
// that holds the Cache in a field hides it: the Adapter then records
// every look-up it makes through that Driver and the Cache its own calls
// below, so a call that reached the cloud is recorded twice and a look-up
// the Cache answered is recorded as a cloud call. Put such a wrapper
// below the Cache, or embed the Cache.
// Each look-up of a Cache (GetByID, GetByName, List) is also recorded as
// a cache "hit" when the list already in the Cache answered it, and a
// "miss" otherwise: it listed or waited for a List, needed a direct
// GetByID or GetByName, or got a remembered List failure. A List call
// that succeeded but whose answer the Cache found inconsistent (an ID
// listed twice, refused; a name held by two live instances; see Cache,
// Inconsistent lists) is counted "ok" as a call, and once in
// ccmkit_cloud_inconsistent_answers_total. Nothing is registered until
// the first call.
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
