// Package routes implements cloudprovider.Routes for a cloud and provides the
// pieces a provider needs to get routes right: a name codec, a pure differ
// and a Table adapter.
//
// It is for providers whose cloud keeps pod-CIDR routes for the nodes of a
// cluster, either one route at a time (RouteDriver: list, create, delete) or
// as one route table that is read and replaced as a whole (TableDriver). It is
// not a route controller: the upstream route controller
// (k8s.io/cloud-provider controllers/route/route_controller.go) decides what
// to create and delete; the Table only executes those calls correctly.
//
// The contracts come from k8s.io/cloud-provider v0.37.2:
//
//   - cloud.go, Routes: ListRoutes lists the managed routes of one cluster;
//     CreateRoute ignores Route.Name and may use nameHint; DeleteRoute
//     receives a route as ListRoutes returned it.
//   - route_controller.go, RouteController.reconcile and getRouteAction: a
//     listed route matches a node's pod CIDR only when DestinationCIDR is
//     byte-identical to the spelling in node.spec.podCIDRs, so the Table
//     stores the caller's string and never re-renders it. nameHint is the
//     node UID, shared by a dual-stack node's IPv4 and IPv6 CIDRs, so names
//     are derived from (nameHint, CIDR). Up to 200 (maxConcurrentRouteOperations)
//     CreateRoute and DeleteRoute calls run at once; the Table coalesces
//     them into one table write per batch for a TableDriver.
//   - RouteController.reconcile deletes routes inside the cluster CIDRs
//     (isResponsibleForRoute) that are Blackhole or whose node and CIDR are
//     not wanted, and never touches routes outside them. The Table lists a
//     route whose target instance is gone as Blackhole.
//   - With Route.EnableNodeAddresses, getRouteAction compares
//     TargetNodeAddresses (equalNodeAddrs) and replaces a route whose
//     addresses changed: the Table lists exactly the addresses CreateRoute
//     got.
//
// # Pieces
//
// Namer turns (nameHint, CIDR) into a deterministic cloud route name within a
// configurable length and alphabet, and Parse maps a listed name back.
//
// Diff is the route-table differ a whole-table Table (NewWholeTable) runs
// for every batch of the route controller's CreateRoute and DeleteRoute
// calls: a pure function from the table as read (Entry), the routes to
// delete as ListRoutes listed them (DiffInput.Remove), the routes to
// create (NodeRoutes) and an ownership predicate to the Changes that apply
// them, with the routes each call could not have (Changes.Skipped). This
// batch form is the one exported. The differ has a second form, a whole
// reconcile by the route controller's rules (the cluster CIDRs, changed
// next hops), which is unexported: nothing calls it, since the route
// controller reconciles and a Table only executes its calls. It is kept
// tested and measured (about 2.7 ms for 20,000 dual-stack nodes on a
// 2-core VM, BENCHMARKS.md) until a caller needs it.
//
// Table implements cloudprovider.Routes over a RouteDriver (NewTable) or a
// TableDriver (NewWholeTable). It is safe for concurrent use.
//
// # Cluster identity
//
// A route is owned by a cluster identity, stored by the driver as
// Entry.Cluster: Options.ClusterID when set, otherwise the clusterName the
// route controller passes to every call (the CCM's --cluster-name,
// "kubernetes" by default and in most clusters). ListRoutes lists, and
// CreateRoute and DeleteRoute replace or delete, only routes of that
// identity. Set Options.ClusterID, to the same value as
// loadbalancer.Options.ClusterID (same semantics), whenever two clusters
// may share a network: with the default --cluster-name they would
// otherwise list and delete each other's routes. Route names come from
// (node UID, CIDR) and are unique across clusters. Changing the identity
// of a running cluster orphans its routes.
//
// # Throttling
//
// A driver says "throttled, retry after D" by returning an error that
// wraps an *api.RetryError (k8s.io/cloud-provider/api,
// api.NewRetryError(msg, D)), found with errors.As: ccmkit's one
// convention for every block (the loadbalancer and instances packages read
// it the same way). The Table waits D and calls again, so no CreateRoute
// or DeleteRoute of the route controller fails early because the cloud is
// throttling: a throttled TableDriver call retries its whole batch (one
// read and at most one write for up to 200 calls), a throttled RouteDriver
// call is retried alone, and ListRoutes retries its read too (on an error
// the route controller abandons the whole reconcile until its next
// period). The wait ends early when the caller's context ends, and is
// bounded by Options.MaxThrottleWait (one minute by default)
// per call: past it, or past the context's deadline, or for a RetryAfter
// that is not positive, the call fails at once with the driver's error
// wrapped, RetryError included. Stats.Throttled counts throttled driver
// calls.
//
// # Reads
//
// The route controller lists the routes every
// --route-reconciliation-period (10s), converged or not. Options.ListTTL
// lets ListRoutes answer from its last answer for that long, dropped by
// every write of the Table, so a converged cluster costs one table read
// (and one Options.Instances check) per ListTTL; changes made outside the
// Table are then seen up to ListTTL late, which Table.MaxStaleness
// reports.
//
// # Metrics
//
// The Table records every call it makes to its driver and to
// Options.Instances in the cloud-controller-manager's metrics registry
// (k8s.io/component-base/metrics/legacyregistry, served on the CCM's
// /metrics), with no code from the provider:
//
//	ccmkit_cloud_requests_total{capability="routes", operation, result}
//	ccmkit_cloud_request_duration_seconds{capability="routes", operation}
//
// operation is the method called: ListRoutes, CreateRoute, DeleteRoute
// (RouteDriver), ReadTable, WriteTable (TableDriver) or GoneTargets
// (InstanceChecker); result is "ok", "throttled" (an error wrapping an
// *api.RetryError), "not-found" (an error wrapping ErrNotFound) or
// "error". A call that a layer below answered without the cloud (a
// governor's refusal) is not recorded. A call the Table turns into success (a create answered with
// ErrAlreadyExists, a write answered with ErrConflict) is still recorded
// with the driver's result, so the counts are the cloud's: each throttled
// retry and each conflict's re-read is one more call. Nothing is
// registered until the first call.
package routes
