// Package fake is an in-memory, stateful fake cloud registered as the cloud
// provider "fake" (optionally kept in a state file that several processes
// share): instances, load balancers with addresses from pools, and a route
// table, behind the cloudprovider.Interface that ccmkit's building
// blocks make of them. Tests, the example cloud-controller-manager and the
// end-to-end demo run against it, and it is the reference for how a
// provider team composes ccmkit.
//
// It is not a model of any real cloud's API, and not the upstream
// k8s.io/cloud-provider/fake (a call recorder without state): what
// EnsureLoadBalancer stores, GetLoadBalancer finds; every instance has its
// own addresses; every method is safe for concurrent use. By default it is
// synchronous and unthrottled; its realistic mode (see "Realistic mode")
// behaves as real clouds do: load balancers are provisioned
// asynchronously, the API is rate-limited, and load balancers keep their
// backends by instance ID.
//
// # Composition
//
// The fake is three small drivers over one store (store.go: in memory, and
// in the shared state file when configured), one file per capability, given
// to ccmkit's adapters and composed with provider.New:
//
//	loadbalancer.go  loadbalancer.Driver (Find, Apply, Delete)  → loadbalancer.Reconciler
//	routes.go        routes.TableDriver (ReadTable, WriteTable) → routes.Table (whole table, coalesced)
//	instances.go     instances.ListDriver (GetByID, GetByName, List) → instances.Cache → instances.Adapter
//	cloud.go         provider.New("fake", provider.Options{ClusterID: …, …})
//
// Between each adapter and its driver sits the fake's "cloud API" layer
// (instrument.go): it counts every call (Calls), applies the rate limit
// (ratelimit.go, RateLimit) and injects faults (InjectFault,
// InjectRandomFaults, SetInterceptor). A real provider puts its cloud
// client where the store is.
//
// # Construction
//
//	cloud, err := fake.New(fake.Config{ClusterID: "test"},
//		fake.WithInstances(fake.Instance{Name: "node-a"}, fake.Instance{Name: "node-b"}))
//
// or, as the cloud-controller-manager does, through the registry:
// --cloud-provider=fake --cloud-config=<file>. Tests step time with
// WithClock (provisioning and the rate limit read it), and run a second
// cluster over the same cloud with Peer (see "Identity"). The package's
// init registers the provider with provider.Register; a registration error
// (the name "fake" is taken by another package) is logged and returned by
// RegisterError, and the binary then reports "fake" as not registered.
//
// # Cloud-config
//
// The --cloud-config file is Config, in YAML or JSON, decoded strictly (an
// unknown field is an error naming it). Every field is optional:
//
//	clusterID: demo                  # owns this cluster's load balancers and routes;
//	                                 # HasClusterID() is false without it
//	realistic: false                 # true: the defaults marked (R) below
//	instanceCIDRs: [10.0.0.0/16, fd00:10::/64] # default [10.0.0.0/16]; auto InternalIPs
//	instanceCacheTTL: 1m             # instances.Cache TTL; default 1m
//	instances:                       # created in order; each ID and address once, each
//	                                 # name once but for terminated instances
//	  - name: node-a                 # required: the Node name
//	    id: i-1                      # default: the next free i-<n>
//	    zone: zone-a                 # default zone-a
//	    region: region-1             # default region-1
//	    type: fake.small             # default fake.small
//	    internalIPs: [10.0.0.11]     # default: next free of each instanceCIDR
//	    externalIPs: [203.0.113.11]  # default none
//	    hostname: node-a             # default: name
//	    labels: {fake.ccmkit.io/rack: r1}
//	    state: running               # running (default), stopped or terminated
//	loadBalancers:
//	  ipv4Pool: 198.18.0.0/15        # default; VIPs come from here
//	  ipv6Pool: 2001:db8:1b::/112    # default
//	  hostnameSuffix: ""             # set: ingress is <lb name>.<suffix>
//	  ipMode: ""                     # "", VIP or Proxy
//	  provisioningDelay: 0s          # no ingress until this long after creation; (R) 2s
//	  backends: nodeName             # nodeName or instanceID; (R) instanceID
//	rateLimit:                       # token buckets; an unset rate is unlimited
//	  readsPerSecond: 20             # > 0 when set; (R) 20
//	  writesPerSecond: 10            # > 0 when set; (R) 10
//	  burst: 20                      # >= 1 with a rate, unset without; (R) 20
//	routes:
//	  ipv4Only: false
//	  enableNodeAddresses: false
//	admin:
//	  address: 127.0.0.1:8089        # loopback only; empty: no endpoint
//	  addressFile: ""                # set: the bound address is written here
//	stateFile: ""                    # set: an absolute path; the cloud lives in this
//	                                 # file, shared by every process using it
//
// # Admin endpoint
//
// With admin.address set, the fake serves a small HTTP API on that loopback
// address, from the moment the cloud-controller-manager calls Initialize
// (which it does once it leads, after leader election) until the stop
// channel closes (or Shutdown). It has no authentication, which is why only
// loopback addresses are accepted (AdminHandler serves the same API
// anywhere else). Bodies are JSON; every error is a 4xx or
// 5xx status with the body {"error": "<message>"}.
//
// A web page in a browser on the same machine must not drive it, so it
// refuses, before anything else: a Host header that is not a loopback IP
// address or localhost with the endpoint's port (421; a DNS-rebinding page
// sends its own name); an Origin header other than the endpoint's own
// (http, a loopback host, its port) or a Sec-Fetch-Site other than
// same-origin or none (403); a POST, PUT or DELETE whose Content-Type is not
// application/json (charset=utf-8 allowed), with or without a body (415:
// pages send text/plain, form and multipart bodies, or none, cross-origin
// without a CORS preflight); a path that is not canonical or holds a
// percent-encoded '/' (400). It never sends CORS headers. Bodies are
// decoded strictly: a key repeated in one object at any depth, a field
// spelled in another case, an unknown field or data after the object is a
// 400 naming it. Operations without a body (the instance actions,
// DELETE /instances/{id}, POST /calls/reset, DELETE /faults) take an empty
// body or {}. Instance IDs, in a body or a path, must not be "." or "..",
// be longer than 128 bytes, or hold '/', '\', '%', '?', '#', white space,
// control or format characters (400). A slow client is cut off: 5s to send
// the headers, 10s for the whole request, 30s to read the response, 1m idle
// between requests on a connection (a body still incomplete at 10s is a
// 408). A request's work on the cloud ends after 20s, or when its client
// goes away: with stateFile, a request that waits that long for the file's
// lock (another process holding it) is a 503 with Retry-After: 1 and
// changes nothing. So curl needs -H 'Content-Type: application/json' for
// every POST, PUT and DELETE.
//
//	GET    /state                     200 State: the whole cloud
//	GET    /instances                 200 [Instance]
//	POST   /instances                 201 Instance; body: Instance (only name required)
//	GET    /instances/{id}            200 Instance
//	DELETE /instances/{id}            204; the instance is forgotten (look-ups: not found)
//	POST   /instances/{id}/stop       200 Instance; running → stopped
//	POST   /instances/{id}/start      200 Instance; stopped → running
//	POST   /instances/{id}/terminate  200 Instance; → terminated (the Node is deleted)
//	GET    /loadbalancers             200 [LoadBalancer]
//	GET    /routes                    200 [Route]; ?cluster=NAME keeps one cluster's
//	GET    /calls                     200 Calls: cloud API calls so far, throttled ones too
//	POST   /calls/reset               204; counters back to zero
//	POST   /faults                    204; body {"op": "ApplyLoadBalancer", "times": 2,
//	                                      "error": "boom", "retryAfter": "5s",
//	                                      "lostResponse": false}
//	DELETE /faults                    204; every injected fault removed
//	GET    /ratelimit                 200 RateLimit in force
//	PUT    /ratelimit                 200 RateLimit; body: RateLimit, replacing it ({}: no limit)
//	GET    /provisioning              200 {"delay": "2s"}: delay of the next load balancers
//	PUT    /provisioning              200 {"delay"}; body {"delay": "5s"} ("0s": none)
//
// Statuses: 400 for a body that is not valid JSON, has unknown fields or
// invalid values; 404 for an unknown path or instance; 405 for a wrong
// method; 409 for starting or stopping a terminated instance, adding an
// existing ID or adding an instance when its network has no free address;
// 413 for a body over 1 MiB; 415 for a Content-Type other than
// application/json; 403 and 421 as above; 500 for a state file that cannot
// be read; 503 for a state file whose lock was not free in time. In POST
// /faults, "op" is one of the Op constants ("" means every operation),
// "times" is how many calls fail (-1: every call until DELETE /faults),
// "retryAfter" (a Go duration) makes the fault a throttle (an
// api.RetryError), "error" is the message, and "lostResponse" makes a
// failing write take effect before it fails (Fault.LostResponse).
// PUT /ratelimit and PUT /provisioning act as SetRateLimit and
// SetProvisioningDelay (400 for a value they reject, naming it): the body of
// PUT /ratelimit is the whole limit, without the realistic defaults, and
// every bucket starts full; a new delay applies to load balancers created
// afterwards.
//
// JSON shapes (field names as in the json tags of the Go types):
//
//	Instance     {"id", "name", "zone", "region", "type", "internalIPs": [], "externalIPs": [],
//	              "hostname", "labels": {}, "state": "running|stopped|terminated"}
//	LoadBalancer {"id", "name", "tags": {}, "ipFamilies": [], "requestedIPs": [],
//	              "listeners": [{"family", "protocol", "port", "nodePort"}],
//	              "backends": [{"nodeName", "providerID", "ipv4", "ipv6"}],
//	              "healthCheck": {"protocol", "port", "path"}, "sourceRanges": [],
//	              "sessionAffinity": {"clientIP", "timeoutSeconds"}, "settings": {},
//	              "backendKey": ""|"ProviderID", "vips": [], "ingress": [{"ip", "hostname", "ipMode"}],
//	              "provisioning": true (only while provisioning), "readyAt": RFC 3339 (only with a delay)}
//	Route        {"cluster", "name", "destinationCIDR", "targetNode", "targetNodeAddresses": []}
//	State        {"clusterID", "instances": [], "loadBalancers": [], "routes": [],
//	              "pools": [{"purpose", "cidr", "allocated"}]}
//	Calls        {"reads", "writes", "faults", "throttled", "byOp": {"<Op>": n},
//	              "throttledByOp": {"<Op>": n} (only once a call was throttled)}
//	RateLimit    {"readsPerSecond", "writesPerSecond", "burst"} (an absent rate: unlimited)
//
// With loadBalancers.backends instanceID a backend has only "providerID";
// the ingress of a provisioning load balancer is [].
//
// # Shared state file
//
// By default the cloud lives in the Cloud value: two cloud-controller-manager
// replicas each have their own, and a restarted one starts from the
// cloud-config again. A real cloud outlives the CCM and is shared by its
// replicas; with stateFile set, the fake's is too. Every process (or Cloud)
// built with the same stateFile and the same cloud-config is then one
// cloud: replicas fail over to the same load balancers, a restarted CCM
// finds what it created before it died, and a test can look at the cloud
// from its own process (fake.New with the same cloud-config, then Snapshot).
//
// How: the state is kept by one store (store.go), and every operation on
// it — cloud API calls and the control surface alike — runs as one
// transaction: take an exclusive flock(2) on <stateFile>.lock, reload the
// file if another process replaced it since this one last read or wrote it,
// run the operation, and, if it changed anything, write the whole state to
// a temporary file in the same directory and rename it over stateFile
// before unlocking. Readers never see a partial file, a process killed
// (SIGKILL) in the middle loses nothing it reported done and never leaves
// the lock held (the kernel drops it), and no update is lost. The file is
// not fsynced: it survives any process, not a crash of the machine. flock
// makes this Unix only (developed and tested on Linux); elsewhere New fails.
// A cloud API call waits for the lock at most until its context ends, then
// fails with an error wrapping ErrStateFile and ctx.Err(), having changed
// nothing; an admin endpoint request waits at most 20s (a 503, see "Admin
// endpoint"); the control surface, which takes no context, waits without a
// deadline.
// Without stateFile none of this runs, and the in-memory fake costs what it
// always did.
//
// When stateFile does not exist, New creates it from the seeded instances
// (Config.Instances, WithInstances); when it exists, New loads it and the
// seeds are ignored, so a second replica or a restarted CCM never adds the
// instances again. A file that cannot be read — not JSON, another format,
// an unknown field, an invalid instance or route, a VIP outside its pool,
// pools other than the cloud-config's, or the file removed after it was
// loaded —
// is an error wrapping ErrStateFile that names the file and the problem
// (for a route breaking the rules of "Routes": the route and the field):
// from New, from every cloud API call and control-surface method with an
// error result, and as a 500 from the admin endpoint; Snapshot,
// InstanceByID and LoadBalancerFor log it and answer from the state last
// loaded. The fake never overwrites or recreates a file it cannot read;
// delete it to start over.
//
// Each process's admin endpoint shows the shared state. Faults, interceptor
// Funcs, call counters and the instance cache stay per process: they model
// the provider's cloud API client, not the cloud. So do the rate limit and
// the provisioning delay of new load balancers (each process enforces its
// own, from its cloud-config or admin endpoint); but each load balancer
// keeps in the file when it is ready, so every process agrees on that. A change another process
// made to an instance drops this process's instance cache at its next
// look-up, as a change made through its own control surface does.
//
// The file is JSON, one document, written indented:
//
//	{
//	  "format": "ccmkit.io/fake-state/v2",    // StateFormat
//	  "generation": 12,                        // +1 per saved change
//	  "cloud": {"instanceCIDRs": [...],        // must match the cloud-config (defaults applied):
//	            "loadBalancers": {"ipv4Pool", "ipv6Pool", "hostnameSuffix", "ipMode", "backends"}},
//	  "nextInstance": 2, "nextLoadBalancer": 5, "routeRevision": 3, // ID counters, route table revision
//	  "pools": [{"cidr": "198.18.0.0/15", "next": "198.18.0.6"}], // where each pool allocates next
//	  "instances": [Instance],                 // as in GET /instances
//	  "loadBalancers": [LoadBalancer],         // as in GET /loadbalancers, but with the ingress
//	                                           // it reports once ready, and no "provisioning"
//	  "routes": [{"cluster", "name", "destinationCIDR", "targetNode",
//	              "targetNodeAddresses": [{"type", "address"}], "blackhole"}]
//	}
//
// A file of the previous format, StateFormatV1, is read as a cloud whose
// load balancers are ready and keep backends by Node name, and is
// rewritten as v2 at its first change; a fake older than v2 rejects a v2
// file, so upgrade every process sharing a file together.
//
// A file is only ever replaced, never written in place; to edit one by hand,
// stop every process using it, or write a new file and rename it over the
// old one. A process killed while saving leaves a temporary file
// .<name>.tmp-* beside it, which nothing reads.
//
// # Realistic mode
//
// With realistic: true (Config.Realistic) the fake behaves as the clouds
// ccmkit's blocks are written for; each behaviour can also be set on its
// own, and each field set in the cloud-config overrides its realistic
// default (the Realistic* constants):
//
//   - Asynchronous provisioning (loadBalancers.provisioningDelay, 2s): a
//     new load balancer has its VIPs at once but reports no ingress until
//     the delay has passed since its creation. The Reconciler then returns
//     an api.RetryError whose RetryAfter is the delay, at most
//     loadbalancer.DefaultRetryAfter, and the service controller comes back
//     when it is ready. GET /loadbalancers shows "provisioning" and
//     "readyAt".
//   - A rate limit (rateLimit, 20 reads/s, 10 writes/s, burst 20: a
//     100-node cluster with 50 LoadBalancer Services converges within it
//     after some throttled calls): every driver call takes a token of its
//     class (Op.IsWrite) or fails at once, changing nothing, with an error
//     wrapping ErrThrottled and an *api.RetryError that says when a token
//     is free, which is how every ccmkit block expects a Driver to report
//     throttling (HTTP 429 with Retry-After, in a real cloud). Calls counts
//     them (Throttled, ThrottledByOp).
//   - Backends kept by instance ID (loadBalancers.backends instanceID): a
//     load balancer keeps and reports only each backend's provider ID, the
//     Reconciler matches backends by it (loadbalancer.BackendKeyProviderID)
//     and leaves out Nodes whose provider ID is not the fake's
//     (loadbalancer.Config.Codec), and the cloud rejects a target that is
//     not a live instance (ErrInvalidBackend). A Node whose name differs
//     from its instance's is a backend like any other.
//
// The admin endpoint changes the delay and the rate limit at run time
// (PUT /provisioning, PUT /ratelimit; SetProvisioningDelay, SetRateLimit).
// Time comes from WithClock's clock, time.Now by default.
//
// # Identity
//
// Provider IDs are "fake://<instance ID>". Load balancers and routes are
// owned (loadbalancer.TagCluster, routes.Entry.Cluster) by clusterID
// (Config.ClusterID, given to loadbalancer.Config.ClusterID and
// routes.Config.ClusterID), whatever --cluster-name the controllers pass,
// so two clusters that share one fake cloud, even both with the default
// --cluster-name=kubernetes, never see or touch each other's resources.
// Without clusterID the --cluster-name of each call owns them. To run two
// clusters on one cloud in a test, build one with New and the other with
// Peer(clusterID): the same instances, load balancers, routes, pools, rate
// limit and clock (one cloud account), with its own counters, faults and
// instance cache; or give two processes the same stateFile and different
// clusterIDs. Their pod CIDRs must differ: the route table routes one
// destination to one place, and routes.Table refuses a destination another
// cluster holds.
//
// # Routes
//
// The route table is one table for the whole cloud, read and written as a
// whole (routes.TableDriver) under a routes.Table, which coalesces the
// route controller's concurrent calls into few writes. Like a real cloud,
// the fake refuses a route it could not route, whichever way it comes in
// (CreateRoute, a table write, AddRoute, a state file being loaded), with
// an error that names the field (route.destinationCIDR for a CreateRoute
// or AddRoute argument, routes[i].<field> in a table or state file, with
// the route's name and cluster), the value, cut to a bounded length, and
// what was expected, and changes nothing:
//
//   - destinationCIDR must be a CIDR whose address is its network address
//     (10.244.1.0/24, not 10.244.1.5/24), without zone, and IPv4 in dotted
//     form (not IPv4-mapped IPv6 such as ::ffff:10.0.0.0/120); its
//     spelling is otherwise kept byte for byte (an upper-case or expanded
//     IPv6 CIDR is fine);
//   - a route of a cluster is a pod route: not a default route (0.0.0.0/0,
//     ::/0), and its destination must not equal, contain or lie in the
//     destination of another cluster's route or of another route of its
//     own cluster (routes.ErrCIDRInUse). Routes of no cluster (Cluster "",
//     the network's own routes, which AddRoute seeds) may be default
//     routes and cover pod routes: a pod route is the more specific route;
//   - targetNode, when set, must be a Node name (a DNS-1123 subdomain);
//   - each target node address must have a node address type and fit it:
//     an IP address (as for instances: no zone, IPv4 in dotted form,
//     unicast) for InternalIP and ExternalIP, a DNS-1123 subdomain for
//     InternalDNS, ExternalDNS and Hostname;
//   - a cluster has one route of each name.
//
// CreateRoute checks its route before the routes.Table batches it, so a
// refused route fails alone, and the table write checks the routes it adds
// or changes again. (What the routes.Table refuses by itself — a
// destination that does not parse, an empty target node — it refuses with
// its own message, naming route.DestinationCIDR or route.TargetNode.)
// Re-creating an existing route (the same name and destination) is not an
// overlap: the Table leaves an equal route as it is and replaces one whose
// target changed. Refusals wrap routes.ErrInvalidRoute or
// routes.ErrCIDRInUse, never an *api.RetryError: they are not retried as
// throttles.
//
// # Known limitations
//
//   - Without stateFile the state lives in the Cloud: two
//     cloud-controller-manager replicas each have their own fake cloud, and
//     a restart starts from the cloud-config again. Set stateFile (see
//     "Shared state file") to share one cloud between replicas, restarts
//     and tests; it is Unix only, every write rewrites the whole file (fine
//     for tests and demos, slow for clouds of many thousand objects), and
//     faults and counters stay per process. The admin endpoint of a standby
//     replica starts only when it becomes leader.
//   - Operations are atomic. A provisioning delay only withholds a new
//     load balancer's ingress: its VIPs, listeners and backends are there
//     at once, later changes take effect at once, and there is no partially
//     built load balancer and no eventual consistency, unless a test
//     injects them with interceptor Funcs.
//   - The rate limit counts calls, not their cost (a List of 5,000
//     instances takes one token), and has no quota per operation. With
//     stateFile each process has its own buckets, so N processes may
//     together make N times the calls. The routes.Table waits out a
//     throttled call on real timers, not on WithClock's clock: with a fake
//     clock that does not move, a throttled route call retries (in real
//     time) until the delays it waited add up to routes.Config's
//     MaxThrottleWait (1 minute). (The instances.Cache's back-off reads
//     WithClock's clock.)
//   - The route table is one table for the whole cloud; WriteTable fails
//     with routes.ErrConflict only when the table changed since it was read
//     (which the routes.Table's serialized calls never cause by themselves).
//     A write that breaks the rules of "Routes" fails as a whole, so the
//     other calls of its batch fail with it: CreateRoute checks each route
//     first against the table last loaded, which leaves only two
//     overlapping routes of one batch, or a route overlapping one that
//     another process wrote since, to fail that way.
//   - Instance look-ups are answered from an instances.Cache (one
//     ListInstances call per instanceCacheTTL). An instance changed through
//     the control surface or the admin endpoint is seen at the next
//     look-up: the cache is dropped when an instance changed since it
//     listed. A failed list is remembered for the cache's ErrorTTL (5s by
//     default, see WithInstanceCache) unless ClearFaults is called or an
//     instance changes.
//   - ListRoutes costs a ListInstances call besides ReadRouteTable when
//     any listed route has a target: it marks routes whose target instance
//     is gone as Blackhole.
//   - The first CreateRoute or DeleteRoute of an idle route table waits
//     routes.DefaultBatchWindow (2ms) for others to join its batch, so
//     sequential route calls take at least that long each.
//   - Terminated instances keep their addresses until RemoveInstance (or
//     DELETE /instances/{id}) frees them.
//   - Random faults are deterministic for a seed in call order: with
//     concurrent callers the order, and so which call fails, can vary.
//   - Load balancers support every loadbalancer.Capabilities feature unless
//     WithLoadBalancerCapabilities narrows them; nothing is actually
//     forwarded, and health checks are recorded, not run.
package fake
