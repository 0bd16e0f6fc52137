// Package statefile keeps the fake cloud (package fake) in a file shared
// by processes: the cloud-config's stateFile (fake.Config.StateFile). File
// is a fake.Persistence over that file and its lock (Open), which
// fake.New takes as fake.Options.Persistence; the registered provider
// "fake" (package fake/register), the e2e suite and the demo use it. The fake keeps the model and decides what
// a state holds and whether it is valid; this package keeps the JSON
// format, the file and its lock.
//
// By default the cloud lives in the Cloud value: two cloud-controller-manager
// replicas each have their own, and a restarted one starts from the
// cloud-config again. A real cloud outlives the CCM and is shared by its
// replicas; with stateFile set, the fake's is too. Every process (or Cloud)
// built with the same stateFile and the same cloud-config is then one
// cloud: replicas fail over to the same load balancers, a restarted CCM
// finds what it created before it died, and a test can look at the cloud
// from its own process (fake.New over Open of the same file and cloud-config, then Snapshot).
//
// How: File implements fake.Persistence, and the fake runs every
// operation on the cloud — cloud API calls and the control surface alike —
// as one transaction: take an exclusive flock(2) on <stateFile>.lock, reload the
// file if another process replaced it since this one last read or wrote it,
// run the operation, and, if it changed anything, write the whole state to
// a temporary file in the same directory and rename it over stateFile
// before unlocking. Readers never see a partial file, a process killed
// (SIGKILL) in the middle loses nothing it reported done and never leaves
// the lock held (the kernel drops it), and no update is lost. The file is
// not fsynced: it survives any process, not a crash of the machine. flock
// makes this Unix only (developed and tested on Linux); elsewhere fake.New
// fails.
// A cloud API call waits for the lock at most until its context ends, then
// fails with an error wrapping fake.ErrStateFile and ctx.Err(), having
// changed nothing; an admin endpoint request waits at most 20s (a 503, see
// admin.Handler); the control surface, which takes no context, waits
// without a deadline.
// Without stateFile none of this runs, and the in-memory fake costs what it
// always did.
//
// When stateFile does not exist, fake.New creates it from the seeded instances
// (fake.Config.Instances, fake.Options.Instances); when it exists, fake.New loads it and the
// seeds are ignored, so a second replica or a restarted CCM never adds the
// instances again. A file that cannot be read — not JSON, another format,
// an unknown field, an invalid instance or route, a VIP outside its pool,
// pools other than the cloud-config's, or the file removed after it was
// loaded —
// is an error wrapping fake.ErrStateFile that names the file and the problem
// (for a route breaking the rules of "Routes": the route and the field):
// from fake.New, from every cloud API call and control-surface method with an
// error result, and as a 500 from the admin endpoint; Snapshot,
// InstanceByID and LoadBalancerFor log it and answer from the state last
// loaded. The fake never overwrites or recreates a file it cannot read;
// delete it to start over.
//
// A file written before hierarchical load balancers has none of their
// fields, and is read as the flat cloud it is.
//
// Each process's admin endpoint shows the shared state. Faults, interceptor
// Funcs, call counters and the instance cache stay per process: they model
// the provider's cloud API client, not the cloud. So do the rate limit,
// the provisioning delay of new load balancers and busyAfterWrite (each
// process enforces its own, from its cloud-config or admin endpoint); but
// each load balancer keeps in the file when it is ready and until when it
// is busy, so every process agrees on those. A change another process
// made to an instance drops this process's instance cache at its next
// look-up, as a change made through its own control surface does.
//
// The file is JSON, one document, written indented:
//
//	{
//	  "format": "ccmkit.io/fake-state/v2",    // the only format read
//	  "generation": 12,                        // +1 per saved change
//	  "cloud": {"instanceCIDRs": [...],        // must match the cloud-config (defaults applied):
//	            "loadBalancers": {"ipv4Pool", "ipv6Pool", "hostnameSuffix", "ipMode", "backends",
//	                              "backendPools",    // only when shared
//	                              "hierarchical"}},  // only when true
//	  "nextInstance": 2, "nextLoadBalancer": 5, "routeRevision": 3, // ID counters, route table revision
//	  "nextBackendPool": 1,                    // only with shared backend pools
//	  "nextListener": 4, "nextListenerPool": 3, // only on a hierarchical cloud
//	  "pools": [{"cidr": "198.18.0.0/15", "next": "198.18.0.6"}], // where each pool allocates next
//	  "instances": [Instance],                 // as in GET /instances
//	  "loadBalancers": [LoadBalancer],         // as in GET /loadbalancers, but with the ingress
//	                                           // it reports once ready, no "provisioning", and
//	                                           // each listener's nodePort as set (a hierarchical
//	                                           // cloud reports 0 for a pool without members);
//	                                           // "busyUntil", "listenerPools" and a listener's
//	                                           // "appProtocol", "settings", "id" and
//	                                           // "pool": {"id", "backends", "healthCheck"}
//	                                           // only when set
//	  "backendPools": [{"id", "name", "tags", "ipFamilies", "backends", "backendKey"}],
//	                                           // only with shared backend pools
//	  "routes": [{"cluster", "name", "destinationCIDR", "targetNode",
//	              "targetNodeAddresses": [{"type", "address"}], "blackhole"}]
//	}
//
// A file is only ever replaced, never written in place; to edit one by hand,
// stop every process using it, or write a new file and rename it over the
// old one. A process killed while saving leaves a temporary file
// .<name>.tmp-* beside it, which nothing reads.

package statefile
