// Package governor is a client-side budget of cloud calls, shared by all of
// a provider's Drivers, so that a cloud-controller-manager lives within
// its cloud account's API rate limit: a token bucket per class of call
// (reads, writes), priorities that let the calls a user waits for go
// before the periodic ones, pauses when the cloud answers "retry after D",
// and, when the budget is spent, an immediate error that the controllers
// retry, instead of a blocked worker.
//
// It is for the calls ccmkit's blocks make through a provider's Drivers
// (loadbalancer, instances, routes), and for any other cloud call of the
// provider's that should share the budget (Admit, Observe). It is not a
// retry loop: it never waits, sleeps or calls again; the blocks above it
// and the upstream controllers do that. It is not a cache either: put
// instances.Cache and loadbalancer.Cache above it, so that the calls they
// save are never counted. One Governor serves a whole provider: its
// budget is the account's.
//
// # Where it goes
//
// Under the caches, above the cloud client: wrap each Driver once, with
// the Governor's method for it, and give the result to the block (or to
// its cache):
//
//	g, err := governor.New(governor.Options{Writes: governor.Limit{Rate: 5}})
//	lbs, err := loadbalancer.NewCache(g.LoadBalancerList(myLBDriver), loadbalancer.CacheOptions{ErrorTTL: -1})
//	rec, err := loadbalancer.NewReconciler(lbs, loadbalancer.Options{...})
//	nodes, err := instances.NewCache(g.InstanceList(myInstanceDriver), instances.CacheOptions{ErrorTTL: -1})
//	table, err := routes.NewWholeTable(g.RouteTable(myTableDriver), routes.Options{...})
//
// # Budget
//
// Each Class has a token bucket (Options.Reads, Options.Writes, each a
// Limit): it holds up to Limit.Burst tokens and refills continuously at
// Limit.Rate tokens per second; every admitted call takes one token. The
// bucket is kept in the form of the generic cell rate algorithm, exact in
// integer nanoseconds.
//
// # Priorities
//
// Each call has a Priority, and each priority a reserve: Urgent 0,
// Normal Limit.NormalReserve, Background Limit.BackgroundReserve (0 ≤
// NormalReserve ≤ BackgroundReserve < Burst). The rule is:
//
//	a call of priority p takes a token only if, once it has taken it,
//	the bucket still holds at least p's reserve.
//
// So, in each class and whatever the traffic:
//
//   - Background calls never leave fewer than BackgroundReserve tokens,
//     normal ones never fewer than NormalReserve. So with NormalReserve at
//     least 1 and BackgroundReserve above NormalReserve (the defaults: a
//     Burst of 20, reserves of 5 and 10) an urgent call is admitted at
//     once under any flood of normal or background calls, and a normal
//     call at once under any flood of background calls.
//   - A lower priority gets only what the higher ones leave: while normal
//     and urgent calls keep the bucket below BackgroundReserve+1 tokens,
//     no background call goes.
//   - Outside a pause, a refused call of priority p is told to come back
//     after at most (reserve(p)+1)/Rate, rounded up to the millisecond: an
//     urgent call after at most one token's time, 1/Rate.
//
// # Retry-After
//
// The Governor mirrors the cloud's limit but cannot know it exactly; the
// cloud has the last word. When a governed call fails throttled
// (Options.Throttled; by default an error wrapping an *api.RetryError
// from k8s.io/cloud-provider/api with a positive RetryAfter D, the
// convention of every ccmkit Driver), its class pauses: no call of that
// class, of any priority, is admitted before D (at most Options.MaxPause)
// has passed. At the end of the pause the bucket holds one token and
// refills at its rate, so calls resume one by one, urgent first, normal
// ones NormalReserve tokens later and background ones BackgroundReserve
// tokens later, instead of in a burst that the cloud would throttle
// again. A later Retry-After extends a pause, never shortens it; a
// Governor's own refusals (ErrOverBudget) never pause anything.
//
// # Refusals
//
// A call that may not go now is not made: the wrapper returns at once an
// error wrapping ErrOverBudget and an *api.RetryError whose RetryAfter is
// the time until a token is free for its priority (the rest of the pause
// included), rounded up to the millisecond, with a message naming the
// priority, the class, why and the wait:
//
//	governor: background writes call refused: the budget is spent; retry after 1.2s
//	governor: urgent reads call refused: the cloud's Retry-After pauses reads; retry after 30s
//
// Every ccmkit block reads it as any throttled answer (rule E5 of
// CONTRIBUTING.md, internal/throttle) and the refused call is not recorded
// in ccmkit_cloud_requests_total: no cloud call was made. The refusal
// itself says so (it wraps an internal mark the blocks' one meter reads),
// so this holds wherever the Governor sits, with nothing carried in the
// call's context.
//
// # Wrappers
//
// LoadBalancer, LoadBalancerList, LoadBalancerPools, Instances,
// InstanceList, Routes and RouteTable govern a ccmkit Driver with no code
// from the provider; LoadBalancerPools keeps a PoolListDriver's shared
// backend pools. Each method is classed and prioritised by what the call
// is:
//
//	loadbalancer  Find, List, FindPools, ListPools   reads   normal
//	              Apply ActionCreate                 writes  urgent
//	              ApplyPool PoolActionCreate         writes  urgent
//	              Apply ActionAddBackends,
//	                    ActionRemoveBackends,
//	              ApplyPool (member changes)         writes  background
//	              Apply (any other action)           writes  normal
//	              Delete, DeletePool                 writes  urgent
//	instances     GetByID, GetByName, List           reads   urgent
//	routes        ListRoutes, ReadTable              reads   urgent
//	              CreateRoute, DeleteRoute,
//	              WriteTable                         writes  normal
//
// Why: a new Service waits for its load balancer, and a deleted one for
// its Delete (its finalizer holds it), while the backend-only updates are
// what the service controller's periodic node sync sends, for every
// Service, on every Node change (UpdateLoadBalancer,
// controllers/service/controller.go: nodeSyncService), and what falls
// behind without harm: the next sync sends the same change. Node
// initialization and the node-lifecycle controller wait on the instance
// reads, and the route controller abandons a whole reconcile on a failed
// ListRoutes; with an instances.Cache and one route read per reconcile
// they are few, so being urgent costs others little. Route writes are
// normal: a new Node's pods need its route, so they go before the node
// sync, but they come in numbers with Nodes (one per Node with a
// RouteDriver) and the routes.Table retries them, so they leave
// NormalReserve tokens to the creates and deletes of load balancers.
// Load-balancer reads are normal, so that no flood of node-sync Finds
// starves the urgent reads of the same class.
//
// A provider's own cloud calls, such as a routes.InstanceChecker's, share
// the budget when they go through a governed Driver (an InstanceChecker
// that lists through the governed instances.ListDriver) or through Admit
// and Observe.
//
// # With ccmkit's blocks
//
// The blocks wait out a short throttle themselves, and so wait out a
// refusal too: the loadbalancer.Reconciler's GetLoadBalancer,
// UpdateLoadBalancer and EnsureLoadBalancerDeleted, and a routes.Table,
// call again after the refusal's RetryAfter, within their
// MaxThrottleWait. EnsureLoadBalancer returns it at once, with a RetryError
// of its own first, at least the refusal's RetryAfter and spread at random
// (see loadbalancer.Reconciler.EnsureLoadBalancer), and the service
// controller requeues the Service after that delay
// (controllers/service/controller.go: processNextServiceItem reads the
// *api.RetryError with errors.As and calls AddAfter), which frees its
// worker for another Service. The instances and load-balancer caches
// remember a throttled List for max(ErrorTTL, RetryAfter): give them
// CacheOptions.ErrorTTL -1 under a Governor, so that a refusal is
// remembered for its RetryAfter and no longer (a failed List still costs
// at most one call per look-up, within the Governor's budget).
//
// # Metrics
//
// A Governor records its state in the cloud-controller-manager's metrics
// registry (k8s.io/component-base/metrics/legacyregistry, served on the
// CCM's /metrics):
//
//	ccmkit_governor_tokens{class}                      tokens left, as of the class's last decision
//	ccmkit_governor_admitted_total{class, priority}   calls let through
//	ccmkit_governor_refused_total{class, priority}    calls refused
//	ccmkit_governor_pauses_total{class}               throttled answers that paused the class
//	ccmkit_governor_paused_seconds_total{class}       time they paused it
//
// class is "reads" or "writes", priority "urgent", "normal" or
// "background". They are registered by the first New.
package governor
