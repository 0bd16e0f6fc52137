// Package fake is an in-memory, stateful fake cloud registered as the cloud
// provider "fake": instances, load balancers with addresses from pools, and
// a route table, behind the cloudprovider.Interface that ccmkit's building
// blocks make of them. Tests, the example cloud-controller-manager and the
// end-to-end demo run against it, and it is the reference for how a
// provider team composes ccmkit: three small drivers over one store
// (loadbalancer.go, routes.go, instances.go), behind a metered "cloud API"
// layer (instrument.go: call counters, the rate limit, interceptor Funcs),
// given to the blocks' adapters and composed with provider.New (cloud.go).
//
// It is not a model of any real cloud's API, and not the upstream
// k8s.io/cloud-provider/fake (a call recorder without state): what
// EnsureLoadBalancer stores, GetLoadBalancer finds; every instance has its
// own addresses; every method is safe for concurrent use. By default it is
// synchronous and unthrottled.
//
// Build it with New (tests), or through the registry with
// --cloud-provider=fake --cloud-config=<file> (a blank import of package
// fake/register registers it): the file is Config, and
// example/cloud-config.yaml is its annotated sample. NewPeer is another
// cluster over the same cloud; Config.StateFile shares one cloud between
// processes, kept by a Persistence (package fake/statefile keeps it in the
// file). Every call of the fake's cloud API takes one path (gate, in
// instrument.go): counted and rate limited, then the fault script
// (AddFault), then the user's interceptor Funcs, then the store. The
// admin endpoint (Config.Admin) lives in package fake/admin, built on the control surface
// (the Cloud methods, their …Context forms, AddFault, SetRateLimit,
// SetProvisioningDelay) and the error kinds ErrInvalid, ErrNotFound and
// ErrConflict; admin.Handler documents its API.
//
// # Realistic mode
//
// With realistic: true (Config.Realistic) the fake behaves as the clouds
// ccmkit's blocks are written for; each behaviour can also be set on its
// own, and each field set in the cloud-config overrides its realistic
// default:
//
//   - Asynchronous provisioning (loadBalancers.provisioningDelay, 2s): a
//     new load balancer has its VIPs at once but reports no ingress until
//     the delay has passed since its creation. The Reconciler then returns
//     an api.RetryError whose RetryAfter is the delay, at most 10s (the
//     default of loadbalancer.Options.RetryAfter), and the service
//     controller comes back when it is ready. LoadBalancer.Provisioning
//     and ReadyAt show it.
//   - A rate limit (rateLimit, 20 reads/s, 10 writes/s, burst 20: a
//     100-node cluster with 50 LoadBalancer Services converges within it
//     after some throttled calls): every driver call takes a token of its
//     class or fails at once, changing nothing, with an *api.RetryError
//     that says when a token is free, which is how every ccmkit block
//     expects a Driver to report throttling (HTTP 429 with Retry-After, in
//     a real cloud). Calls counts them (Throttled, ThrottledByOp).
//   - Backends kept by instance ID (loadBalancers.backends instanceID): a
//     load balancer keeps and reports only each backend's provider ID, the
//     Reconciler matches backends by it (loadbalancer.BackendKeyProviderID)
//     and leaves out Nodes whose provider ID is not the fake's, and the
//     cloud rejects a target that is not a live instance. A Node whose name
//     differs from its instance's is a backend like any other.
//
// Shared backend pools (loadBalancers.backendPools shared, off in every
// mode, realistic too: sharing is a provider's design, not a behaviour of
// the cloud) give the cloud backend pools that many load balancers
// reference, and the provider declares
// loadbalancer.Capabilities.SharedBackendPools: the load balancers of
// every Service whose backends are the same set reference one pool, so a
// Node change is one ApplyBackendPool call however many Services there
// are. The cloud refuses a load balancer referencing a pool that does not
// exist and the deletion of a pool a load balancer references
// (loadbalancer.ErrPoolInUse). Pools are in State.BackendPools and GET
// /backendpools; their calls are operations of their own, counted, rate
// limited, intercepted (Funcs) and governed like the others.
//
// # Hierarchical mode
//
// With loadBalancers.hierarchical (LoadBalancerSection.Hierarchical, off
// in every mode, realistic too; it combines with realistic, not with
// shared backend pools) the cloud keeps each load balancer as OpenStack
// Octavia does: a tree of objects, the load balancer, its listeners, a
// pool per listener, the pool's members and a health monitor per pool,
// and the provider declares loadbalancer.Capabilities.ListenerPools, so
// that Plan makes one write per object. Each Apply is one write of one
// object:
//
//   - ActionCreate creates the load balancer alone, with its tags, front
//     end, settings, source ranges and session affinity, and returns it
//     with its ID and no listeners: the listeners, pools, members and
//     monitors follow as writes of their own (a load balancer of N
//     listeners is 1+4N writes, 1+3N without Nodes). A load balancer
//     created through the control surface is made alone too.
//   - ActionAddListener adds the listener alone ("lis-<n>");
//     ActionAddListenerPool gives it an empty pool ("pool-<n>");
//     ActionAddBackends and ActionRemoveBackends change one pool's
//     members in one batch (Action.Listener names the listener; without
//     it they are refused: the load balancer has no backends of its own),
//     and so does ActionUpdateHealthCheck its monitor;
//     ActionRemoveListenerPool deletes a pool with its members and monitor.
//   - A listener's port and protocol are immutable: an ActionUpdateListener
//     that changes them is refused, naming the listener (a changed Service
//     port is six writes: the old pool and listener go, a new listener,
//     pool, members and monitor come). One that changes only the node port
//     rewrites the pool's members in one write; the listener keeps its ID
//     and pool.
//   - Delete removes the load balancer and every child in one call.
//   - After each write the load balancer is busy for
//     loadBalancers.busyAfterWrite (1s by default here, 0 elsewhere; it
//     can be set in any mode) on the cloud's clock, as Octavia's
//     PENDING_UPDATE: the write returns the load balancer as it is now
//     with an error saying the cloud is busy for about that long, and any
//     write (Apply or Delete) to it until then is refused with a 409,
//     changing nothing (it wraps throttle's ErrRefused), counted in
//     Calls.Busy and BusyByOp. LoadBalancer.BusyUntil shows it. The
//     refusals of the rules above change nothing either.
//
// Find and List report the tree exactly as it is: a listener without a
// pool has Pool nil, a pool its members (as loadBalancers.backends keeps
// them: provider IDs only with instanceID) and its monitor, and the load
// balancer's own Spec.Backends and Spec.HealthCheck are empty. The cloud
// keeps a listener's node port on its pool's members, so a listener whose
// pool has no members reports node port 0 (loadbalancer.Listener.NodePort);
// one without a pool reports the node port it was created with. Until the
// Reconciler knows the busy error it takes it for a failure: each
// EnsureLoadBalancer then makes one write, and the service controller's
// retries build the tree.
//
// A client-side budget (governor: Config.Governor, off by default in
// every mode) puts a governor.Governor below the fake's caches, as a
// provider over a real cloud would: calls over its budget are refused
// before they reach the cloud, and the cloud's throttled answers pause
// their class for the Retry-After.
//
// The admin endpoint changes the delay and the rate limit at run time
// (PUT /provisioning, PUT /ratelimit). Time, and every wait of the
// Cloud's adapters (throttle back-offs, the route table's batch window),
// comes from Options.Clock, the real clock by default.
//
// # Annotations
//
// The provider declares one Service annotation of every kind
// (annotation.Set), under fake.ccmkit.io/: load-balancer-id (adopt an
// existing load balancer by ID), requested-ip (the address to allocate),
// the settings idle-timeout, proxy-protocol, algorithm, connection-limit
// and health-check-source-ranges, which it keeps in the load balancer's
// Spec.Settings, and per port (PORT=VALUE entries): protocol (the
// application protocol), the settings certificate, proxy-protocol-ports
// and https-redirect, kept in each listener's Settings, and health-check,
// a pool's own health check on a hierarchical cloud ("tcp" or
// "http:/path" on the port's node port; refused on a flat one).
// example/deploy/admission-policy.yaml is
// the admission policy generated from them (package admission).
//
// # Identity
//
// Provider IDs are "fake://<instance ID>". Load balancers and routes are
// owned by Config.ClusterID, whatever --cluster-name the controllers pass,
// so two clusters that share one fake cloud, even both with the default
// --cluster-name=kubernetes, never see or touch each other's resources.
// Without it the --cluster-name of each call owns them. Two clusters on
// one cloud (NewPeer, or two processes with one Config.StateFile) need
// distinct pod CIDRs: the route table routes one destination to one place.
//
// # Known limitations
//
//   - Without stateFile the state lives in the Cloud: two
//     cloud-controller-manager replicas each have their own fake cloud, and
//     a restart starts from the cloud-config again. Set stateFile (see
//     Config.StateFile) to share one cloud between replicas, restarts
//     and tests; it is Unix only, every write rewrites the whole file (fine
//     for tests and demos, slow for clouds of many thousand objects), and
//     faults and counters stay per process. The admin endpoint of a standby
//     replica starts only when it becomes leader.
//   - Operations are atomic. A provisioning delay only withholds a new
//     load balancer's ingress: its VIPs, listeners and backends are there
//     at once, later changes take effect at once, and there is no partially
//     built load balancer (but in hierarchical mode, where each write
//     builds one object) and no eventual consistency, unless a test
//     injects them with interceptor Funcs.
//   - In hierarchical mode the control surface's RemoveBackend (and DELETE
//     /loadbalancers/{id}/backends/{key}) removes the member from the
//     first listener pool that has it, one pool only. Control-surface
//     edits are neither refused nor made busy by busyAfterWrite.
//   - The rate limit counts calls, not their cost (a List of 5,000
//     instances takes one token), and has no quota per operation. With
//     stateFile each process has its own buckets, so N processes may
//     together make N times the calls.
//   - The route table is one table for the whole cloud; WriteTable fails
//     with routes.ErrConflict only when the table changed since it was read
//     (which the routes.Table's serialized calls never cause by themselves).
//     A write that breaks the rules of Route fails as a whole, so the
//     other calls of its batch fail with it: CreateRoute checks each route
//     first against the table last loaded, which leaves only two
//     overlapping routes of one batch, or a route overlapping one that
//     another process wrote since, to fail that way.
//   - Instance look-ups are answered from an instances.Cache (one
//     ListInstances call per instanceCacheTTL). An instance changed through
//     the control surface or the admin endpoint is seen at the next
//     look-up: the cache is dropped when an instance changed since it
//     listed. A failed list is remembered for the cache's ErrorTTL (5s by
//     default, see Options.InstanceCache) unless DELETE /faults or
//     SetInterceptor drops it, or an instance changes.
//   - Load-balancer look-ups are answered from a loadbalancer.Cache (one
//     ListLoadBalancers call per loadBalancerCacheTTL, one minute by
//     default). A look-up the list has no match for, or whose match is
//     still provisioning, is a FindLoadBalancers call (but for the look-up
//     that made the list: the List's answer is the cloud's), so a Service
//     without a load balancer costs a Find as without a cache; a converged
//     Service's EnsureLoadBalancer or UpdateLoadBalancer makes no call, so a
//     fault or an outage injected on FindLoadBalancers does not reach it.
//     The Cloud's own writes are seen at once, another process's (stateFile)
//     at the next look-up; a change a peer (NewPeer) made to a load balancer
//     this Cloud has listed is seen at its next list, within
//     loadBalancerCacheTTL, and so is a change made as in a cloud's
//     console, through the control surface of this Cloud or a peer
//     (CreateLoadBalancer, RemoveListener, RemoveBackend,
//     RemoveBackendPoolMember) or its admin endpoint (POST /loadbalancers,
//     DELETE
//     /loadbalancers/{id}/listeners/{protocol}/{port},
//     /loadbalancers/{id}/backends/{key} and
//     /backendpools/{id}/backends/{key}): the cloud does not tell the
//     provider. DELETE /faults and SetInterceptor drop the cache, with its
//     memory of a failed list.
//   - ListRoutes costs a ListInstances call besides ReadRouteTable when
//     any listed route has a target: it marks routes whose target instance
//     is gone as Blackhole.
//   - The first CreateRoute or DeleteRoute of an idle route table waits
//     routes.Options.BatchWindow's default (2ms) for others to join its batch, so
//     sequential route calls take at least that long each.
//   - Terminated instances keep their addresses until DELETE
//     /instances/{id} frees them.
//   - Load balancers support every loadbalancer.Capabilities feature unless
//     Options.LoadBalancerCapabilities narrows them; nothing is actually
//     forwarded, and health checks are recorded, not run.
package fake
