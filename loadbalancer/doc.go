// Package loadbalancer is the building block for the LoadBalancer part of a
// cloud provider: it turns a Service and its Nodes into a provider-neutral
// model of a cloud load balancer, plans the minimal set of cloud calls that
// bring an existing load balancer to that model, and implements
// k8s.io/cloud-provider's cloudprovider.LoadBalancer on top of a small
// Driver that a provider team writes for its own cloud.
//
// The pieces, each usable on its own:
//
//   - Naming (Namer, NamerOptions): a deterministic, length- and
//     charset-bounded cloud name with a readable namespace/name part and a
//     hash of the cluster and Service UID.
//   - Ownership (Owner, OwnerFromTags, the Tag* keys): the tags that make a
//     cloud load balancer "ours"; names are for people, tags are identity.
//   - Desired state (Desired, DesiredInput, Capabilities): Service + Nodes
//     → *LoadBalancer, rejecting what the provider cannot build. A
//     provider's typed annotations are declared in the annotation package
//     and validated here.
//   - Plan (Plan, Action, Apply): desired vs actual → ordered, typed,
//     deterministic actions, empty when converged.
//   - Reconciler (NewReconciler, Options, Driver): cloudprovider.LoadBalancer
//     with the guarantees the upstream service controller relies on,
//     reporting a validated v1.LoadBalancerStatus.
//   - Shared backend pools (Pool, PoolDriver, ApplyPool): one group of
//     backends referenced by every load balancer whose backends are the
//     same set, so a Node change is one write whatever the number of
//     Services.
//   - Cache (NewCache, CacheOptions, ListDriver): a Driver that answers
//     the Reconciler's look-ups from one List per TTL, for a Driver that
//     can list.
//
// # Cluster identity
//
// Ownership is keyed by a cluster identity and the Service UID. The cluster
// identity is the clusterName argument the service controller passes to
// every LoadBalancer method (the CCM's --cluster-name flag, "kubernetes" by
// default), unless Options.ClusterID is set, in which case Options.ClusterID
// wins. Two clusters sharing one cloud account must have distinct identities.
// Changing the identity of a running cluster orphans its load balancers:
// keep Options.ClusterID at the old value to keep managing them.
//
// # Lookup order, rename and adoption
//
// The Reconciler finds "the load balancer of this Service" in this order
// (every Reconciler method uses it):
//
//  1. A stored ID: when Options.IDAnnotation is set and the Service carries
//     that annotation, the load balancer with that cloud ID. If it carries no
//     ccmkit ownership tags, EnsureLoadBalancer adopts it (adds the tags, and
//     from then on manages it); if it is owned by another cluster or Service,
//     every method refuses to touch it (ErrNotOwned). Adoption needs the
//     Service to own no load balancer yet: when step 2 finds one, the
//     annotation and the tags disagree, and rather than ignore either,
//     EnsureLoadBalancer changes nothing and fails with an *OwnershipError
//     (ErrNotOwned, reported to Hooks.UserError) naming the annotation, its
//     value and the owned load balancer's ID (OwnershipError.Owned). The
//     other methods act on the owned load balancer and never touch the
//     untagged one. To resolve it, set the annotation to the owned ID, or
//     remove it, or delete the owned load balancer so that the next
//     EnsureLoadBalancer adopts the annotated one.
//  2. The ownership tags (TagCluster, TagServiceUID) of this cluster and
//     this Service UID.
//  3. The name (Namer.Name), and only if the load balancer found under that
//     name carries this cluster's and this Service's ownership tags. A name
//     match without ownership is a conflict (ErrNotOwned), never an adoption.
//
// Rename: names are derived from the Service (whose namespace and name are
// immutable) and the naming configuration. Changing NamerOptions never
// orphans or duplicates a load balancer, because step 2 finds it by tag; the
// existing load balancer keeps its old name (Plan never renames). A Service
// deleted and re-created under the same name has a new UID and therefore a
// new load balancer; the service controller deletes the old one.
//
// Adoption: to hand an existing cloud load balancer (created by hand or by
// another controller) to ccmkit, set the provider's ID annotation on the
// Service to its cloud ID. EnsureLoadBalancer adds the ownership tags and
// converges the rest of it to the Service. Load balancers are never adopted
// by name.
//
// # Backends, bad Nodes, asynchronous and throttled clouds
//
// Real clouds differ from an in-memory one in three ways the Reconciler is
// built for:
//
//   - Targets are kept by instance ID (or address), not by Node name.
//     Declare it in Capabilities.BackendKey: Plan then matches backends by
//     what the cloud keeps, so Nodes whose names differ from their
//     instances' (kubelet --hostname-override, renamed Nodes) keep their
//     targets, and a converged load balancer costs no write.
//   - One bad Node must not block every load balancer. A Node whose
//     spec.providerID is another provider's or malformed (Options.Codec), or
//     whose instance does not exist (Options.Instances), is left out of the
//     backends and reported once through Hooks.NodeSkipped; the other
//     Nodes are served. A cloud error is never blamed on a Node: the call
//     fails and the controller retries.
//   - Load balancers provision asynchronously and APIs throttle. A Driver
//     reports a load balancer without Ingress while it provisions, and
//     returns an error wrapping *api.RetryError when throttled; either way
//     EnsureLoadBalancer returns an api.RetryError and the service
//     controller comes back after its delay (see Driver).
//
// # Hierarchical clouds: listener pools, busy load balancers, per-port features
//
// Many clouds build a load balancer from separate objects (OpenStack
// Octavia: listeners, a pool per listener, members, a health monitor),
// and leave it busy for a moment after each write, refusing writes
// meanwhile. Declare Capabilities.ListenerPools: Desired then gives each
// listener its Pool, a Driver reports each pool as it is (a listener
// without its pool, a member missing from one pool), and Plan emits one
// action per cloud object, repairing exactly what is missing; a port
// change is a new listener and a removal, six writes. A Driver answers a
// write with Busy(d) ("applied, busy for d"), or with Busy joined with
// ErrRefused ("refused, busy"): the Reconciler waits the window out before
// its next write within Options.MaxBusyWait, and otherwise returns a
// RetryError of exactly d, never doubled as a throttle's is. Apply may
// return nil (the Reconciler derives the result from Action.Current), so a
// Driver need not read the whole tree after each write.
//
// Per-port features: Capabilities.AppProtocols lists the application
// protocols the load balancer serves (spec.ports[].appProtocol, or
// Options.AppProtocolAnnotation) into Listener.AppProtocol; annotations
// declared PerPort with Setting go into each Listener.Settings (a
// certificate reference, PROXY protocol), so a change on one port is one
// UpdateListener of that listener. A PORT naming no port of the Service
// is an error listing the ports.
//
// # Shared backend pools
//
// With the upstream service controller every Node change calls
// UpdateLoadBalancer for every LoadBalancer Service, with the same Nodes
// (controllers/service/controller.go, nodeSyncService and
// updateLoadBalancerHosts), so backend writes grow as Nodes × Services.
// Many clouds let many load balancers reference one group of backends (GCE
// instance groups, Azure backend pools, hcloud label-selector targets).
// A provider whose Driver implements PoolDriver and declares
// Capabilities.SharedBackendPools gets:
//
//   - One pool per set of backends. Every Service whose backends are the
//     same set references one Pool: a pool's identity (TagCluster and
//     TagPool) is a pure function of what decides its members, the node
//     predicate (every Node the controller passes), the Service's IP
//     families as a set and Capabilities.BackendKey, so every replica and
//     every restart finds the same pool, and a pool of another cluster is
//     never used. Its name comes from the Reconciler's Namer:
//     "<prefix>-pool-<key>-<hash>".
//   - The load balancer references the pool (Spec.BackendPool) instead of
//     carrying Backends. EnsureLoadBalancer ensures the pool first, with the
//     eligible Nodes as members, then the load balancer referencing it.
//     A Cache over a PoolListDriver answers the pool look-ups from one
//     ListPools per TTL.
//   - One write per Node change. UpdateLoadBalancer converges the pool's
//     members, planned with the load balancers' own backend diff, under a
//     lock per pool: the first Service's call writes, and every other
//     Service's call finds the pool converged and writes nothing (with a
//     Cache, it reads nothing either).
//   - Backends of its own where the set differs: a Service with
//     externalTrafficPolicy Local, whose Nodes are checked on its own
//     healthCheckNodePort (where a cloud keeps the health check on the
//     backend group, its group cannot be shared). Switching a Service
//     between the two is done without a gap: Plan adds the new backends
//     or reference before removing the old ones.
//   - No pool deleted while referenced, none leaked. A pool is deleted when
//     a load balancer stops referencing it and when a Service is deleted,
//     and only with the cloud's consent: PoolDriver.DeletePool refuses a pool
//     any load balancer references (ErrPoolInUse), which the Reconciler
//     reads as "someone else still uses it". EnsureLoadBalancerDeleted also
//     deletes every unreferenced pool of the cluster, so a pool left by a
//     crash between the two deletes, or by a load balancer whose creation
//     failed, goes with the next Service deleted. Over a Cache, only the
//     pools no load balancer of its list references are asked for, so
//     deleting one of many Services sharing a pool costs no refused write.
//     A Driver that implements
//     PoolDriver is asked for them even when SharedBackendPools is off, so
//     that turning it off lets the pools go.
//
// When two replicas race and create two pools of one key, both pick the
// one with the lowest ID, and the other goes unreferenced. A call made with
// a stale list of Nodes (a slow Ensure overtaken by a node sync) writes
// that list to the shared pool, as it would to the Service's own backends
// without pools; the service controller's next node sync corrects it.
//
// # Coalesced node sync
//
// The service controller runs a node-sync round for each Node change it
// sees and calls UpdateLoadBalancer for every LoadBalancer Service in it
// (k8s.io/cloud-provider@v0.37.2 controllers/service/controller.go,
// nodeSyncLoop, updateLoadBalancerHosts): while 50 Nodes join, 50 load
// balancers that keep their own backends take a write each per round,
// about a thousand in all. Options.CoalesceWindow (off by default;
// RecommendedCoalesceWindow, 2s, is the measured choice) makes
// UpdateLoadBalancer write behind: it checks its arguments and returns,
// and the latest node set of each Service is written once at the end of
// its window, pool writes included with shared backend pools. Nothing is
// lost: a failed write is retried with back-off and returned by the
// Service's next UpdateLoadBalancer, which the service controller retries
// and reports as it does any failure; EnsureLoadBalancer supersedes what
// arrived before it; EnsureLoadBalancerDeleted drops it; Flush writes at
// once. See Options.CoalesceWindow.
//
// A bring-up pays one more read per Service over a Cache: the Find that
// confirms the list's "none" before a create, so that a load balancer a
// second creator made since the list is never duplicated. On a cloud that
// refuses a second load balancer of one name, the create itself confirms
// it: declare Capabilities.UniqueNames, return ErrNameTaken from such a
// create, and the Reconciler creates from the list's miss, looking up
// again only when the name is taken.
//
// # Load balancer classes
//
// A Service with spec.loadBalancerClass set is not ours, as in the upstream
// service controller (controllers/service/controller.go, wantsLoadBalancer):
// EnsureLoadBalancer and UpdateLoadBalancer return
// cloudprovider.ImplementedElsewhere, unwrapped, and change nothing.
// GetLoadBalancer and EnsureLoadBalancerDeleted still act on what this
// cluster owns for that Service UID (normally nothing), so a load balancer
// that ccmkit did create is never leaked.
//
// # Events
//
// A Reconciler tells the user what they can fix where they look: once the
// cloud-controller-manager has called Initialize (provider.Cloud does, with
// the CCM's client builder), it records Warning events through an event
// broadcaster of its own, as the service controller's component, so that
// `kubectl describe service` shows them beside the controller's
// SyncLoadBalancerFailed. Each class of error the user can fix has its
// reason; the message is the error text, which names the field, the value
// and what was expected:
//
//	InvalidAnnotation           a malformed declared annotation (annotation.ErrInvalid)
//	InvalidService              a Service field Desired cannot use (ErrInvalidService)
//	UnsupportedFeature          a feature the Capabilities do not declare (ErrUnsupported)
//	LoadBalancerNotOwned        a load balancer owned by someone else (ErrNotOwned)
//	LoadBalancerNotFound        a stored ID that names no load balancer (ErrNotFound)
//	LoadBalancerBackendSkipped  a Node left out of the backends, on the Node and the Service
//
// A failing call records its event each time it fails (the event
// correlator of client-go counts repeats as one event); a Node left out is
// reported once per Node, provider ID and reason, on the Service of the
// call that saw it first. Hooks.UserError and Hooks.NodeSkipped, when set,
// replace these events. A throttled or failing cloud is never reported as
// the user's fault. Nothing else is needed: the fake and the example main
// get these events by composing the Reconciler, so there is no separate
// helper to call. Before Initialize (a Reconciler used outside a CCM) the
// Reconciler records nothing and logs skipped Nodes only.
//
// # Cache
//
// With the upstream service controller every Node change costs a call of
// UpdateLoadBalancer per LoadBalancer Service
// (controllers/service/controller.go, syncNodes and
// lockedUpdateLoadBalancerHosts), and each call looks the Service's load
// balancer up: N Services, N Finds per node sync. A Driver that can list
// every load balancer in one call implements ListDriver; wrap it in a
// Cache and give the Cache to NewReconciler:
//
//	cache, err := loadbalancer.NewCache(myDriver, loadbalancer.CacheOptions{TTL: time.Minute})
//	...
//	r, err := loadbalancer.NewReconciler(cache, loadbalancer.Options{...})
//
// The look-ups within a TTL then cost one List in all, and a node sync that
// changes no load balancer reads nothing. What the Reconciler must never
// get wrong stays exact (Cache states what may show late, and for how
// long):
//
//   - A load balancer the list does not have is looked up in the cloud
//     before the Reconciler creates one, so a second replica, a failover
//     or a concurrent creator never causes a duplicate.
//   - Its own Apply and Delete keep it current, and a failed one sends the
//     next look-up of that load balancer to the cloud.
//   - A failed List is an error, never "no load balancer"; a throttled
//     List is not repeated before the cloud's Retry-After.
//   - A load balancer still provisioning is looked up in the cloud until it
//     has an address.
//
// What changes in the cloud other than through the Cache (another
// replica's writes, the cloud console) shows at the next List, at most a
// TTL later; call Cache.Invalidate when the cloud tells you of a change.
// Do not use a Cache when something else writes this cluster's load
// balancers all the time.
//
// # Metrics
//
// Every cloud call the Reconciler makes is recorded in the CCM's /metrics
// (k8s.io/component-base's legacyregistry) with no code from the provider:
// ccmkit_cloud_requests_total and ccmkit_cloud_request_duration_seconds
// with capability "loadbalancer" and operation "Find", "Apply" or
// "Delete" (and "FindPools", "ApplyPool" and "DeletePool" for shared
// backend pools), one count per call, each retry after a throttle
// included. The
// result is "ok", "throttled" (an error wrapping an api.RetryError) or
// "error"; the Driver contract has no not-found error (Find reports none as
// an empty slice, Delete a gone load balancer as nil), so "not-found" does
// not occur. A Find that returns a nil load balancer is counted "ok": the
// call succeeded, the Reconciler rejects its result.
//
// Each call is metered in one place: where ccmkit hands it to a Driver
// that is not its own Cache. The Reconciler meters the calls it makes to
// its Driver unless that Driver is a Cache; a Cache meters the calls it
// makes to the Driver it wraps (operations "List" and "ListPools" too),
// so a look-up the Cache answers from its list is not a cloud call, and
// no call is recorded twice. A call the governor refuses (package
// governor) is not recorded: no cloud call was made. A provider's Driver
// in front of a Cache is seen as the Cache only when it embeds the
// *Cache (struct{ *loadbalancer.Cache }, overriding the methods it
// changes). One that holds the Cache in a field hides it: the Reconciler
// then records every call it makes to that Driver and the Cache the calls
// it makes below, so a call that reached the cloud is recorded twice and
// a look-up the Cache answered is recorded as a cloud call. Put such a
// wrapper below the Cache (between it and the cloud), or embed the Cache.
// Each Find and List of a Cache is also recorded as
// ccmkit_cache_lookups_total{cache="loadbalancers"}, and each FindPools and
// ListPools as cache="backendpools": "hit" when the list already in the
// Cache answered it, and "miss" otherwise: it listed or waited for a List,
// needed a direct Find, or got a remembered List
// failure. With Options.CoalesceWindow, each deferred backend change is
// counted in ccmkit_loadbalancer_coalesced_updates_total by result:
// "deferred" (an UpdateLoadBalancer call kept for its window), "written"
// (a window's write that succeeded, or found no load balancer),
// "failed" (a window's write that failed, retried) and "superseded"
// (dropped by an EnsureLoadBalancer or EnsureLoadBalancerDeleted).
// Nothing is registered until the first call.
//
// This package is not a controller: it starts no goroutines (but the
// timers of coalescing windows), keeps no state beyond the Cache (and the
// changes a window holds) and never reads flags, files or environment
// variables. Drift repair is the provider's business: the service
// controller calls EnsureLoadBalancer on Service changes and CCM restarts,
// not periodically.
package loadbalancer
