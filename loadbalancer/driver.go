package loadbalancer

import "context"

// Driver is what a provider team writes for its cloud: three calls that
// the Reconciler composes into cloudprovider.LoadBalancer.
//
// Implementations must be safe for concurrent use: the Reconciler
// serializes calls for one Service, but calls for different Services run
// concurrently. Every returned *LoadBalancer belongs to the caller; the
// Reconciler treats it as read-only, and the Driver must not change it
// afterwards.
//
// What an error means: the Reconciler and the Cache read a Driver's
// answer by what its error wraps (errors.As, errors.Is), so a Driver
// wraps its cloud's error with one of these, or returns one alone:
//
//   - nil: done. Apply applied the action (see Apply for its result).
//   - A *BusyError (Busy(D, msg)), not wrapping ErrRefused: done, and the
//     cloud is now busy with this load balancer, refusing writes to it for
//     about D (OpenStack Octavia after a write to a listener, pool or
//     member: PENDING_UPDATE). From Apply, the action was applied; from
//     Delete, a step of it was made (a cascade delete in steps), and
//     Delete is called again. The Reconciler waits D before its next write
//     to the load balancer, within Options.MaxBusyWait, and else asks to
//     be called back after exactly D; it is neither throttling nor a
//     failure (metrics count it "ok").
//   - A *BusyError and ErrRefused: the cloud refused the call because the
//     load balancer was busy (409 while PENDING_UPDATE), and nothing
//     changed. The Reconciler makes the same call after D, as above.
//   - An *api.RetryError (k8s.io/cloud-provider/api, api.NewRetryError(msg,
//     D)): throttled, "not now, retry after D" (the cloud answered 429 with
//     a Retry-After), possibly after part of the call. This is ccmkit's
//     one convention for throttling in every block (the instances and
//     routes Drivers use it too). Every Reconciler method returns it
//     wrapped, findable with errors.As; from EnsureLoadBalancer the service
//     controller requeues the Service after D
//     (controllers/service/controller.go, processNextServiceItem), doubled
//     for each consecutive throttled call (see
//     Reconciler.EnsureLoadBalancer). It is never reported as a user error.
//     An error that wraps both an *api.RetryError and a *BusyError is
//     throttled, as every block reads it: do not wrap both.
//   - An *api.RetryError and ErrRefused: throttled before anything changed
//     (a 429 for the first and only cloud call). As above, and a Cache
//     keeps vouching for the load balancer without a confirming Find.
//   - Anything else: failed, possibly half-way. The Reconciler returns it
//     wrapped, and the service controller retries with its own back-off; a
//     Cache asks the cloud about the load balancer at its next look-up,
//     unless the error wraps ErrRefused (refused before any change, such
//     as a 409 "immutable" before any write).
//
// Backends: declare in Capabilities.BackendKey what the cloud keeps of a
// backend (the Node name, the instance's provider ID, or an address) and
// report at least that in Find; see BackendKey.
//
// Errors need not name the action or the load balancer: the Reconciler
// wraps every Driver error with both ("AddBackends on load balancer
// \"lb-1\": ..."). Name what only the Driver knows (the cloud's request,
// status, message).
type Driver interface {
	// Find returns the load balancers matching q, in any order, or an
	// empty slice (not an error) when none match. Exactly one field of q
	// is set. Each result has ID, Name, Tags, Spec (as configured in the
	// cloud, in any order; each backend with at least the fields of
	// Capabilities.BackendKey) and Ingress (empty while the load balancer
	// has no address yet: EnsureLoadBalancer then asks the service
	// controller to come back, see Options.RetryAfter).
	//
	// A load balancer made of several cloud objects (a front end, a target
	// pool, a firewall, ...) must be returned while any of them remains,
	// so that GetLoadBalancer keeps reporting it and the service
	// controller keeps calling EnsureLoadBalancerDeleted.
	Find(ctx context.Context, q Query) ([]*LoadBalancer, error)

	// Apply performs one Action (see ActionKind for the meaning of each,
	// and Apply for a reference implementation on the model) and returns
	// the load balancer as it is afterwards, or nil (see below). For
	// ActionCreate it creates the load balancer with a.Create's Name, Tags
	// and Spec and returns it with its new ID; a Driver that creates in
	// steps may fail half-way, the next EnsureLoadBalancer finds the
	// partial load balancer by its tags and plans the rest. Every other
	// kind targets a.LoadBalancerID.
	//
	// A nil load balancer with a nil error, or with a *BusyError not
	// wrapping ErrRefused, means "exactly the action was applied": the
	// Reconciler derives the result from the load balancer it planned the
	// action on with the package's Apply, and a Cache from its own copy, so
	// a cloud whose load balancer is a tree of objects (a listener, its
	// pool, its members) need not read the whole tree after each write.
	// Return the load balancer instead when the cloud may have done
	// something else (a partial change, defaults it filled in); after a
	// busy answer the Reconciler then plans again from it. ActionCreate
	// must return the load balancer: only the Driver knows its new ID, and
	// a nil result is an error.
	//
	// Apply must change only what the action names: never tags other than
	// the ones given, never listeners or backends other than the ones
	// given.
	Apply(ctx context.Context, a Action) (*LoadBalancer, error)

	// Delete deletes lb (as returned by Find) and every cloud object that
	// belongs to it. It returns nil when nothing is left, including when lb
	// was already gone; it is called again after any error. A Delete that
	// deletes in steps on a busy cloud (children first, each write leaving
	// the load balancer busy) may return a *BusyError after each step: the
	// Reconciler calls it again after the delay, within
	// Options.MaxBusyWait.
	Delete(ctx context.Context, lb *LoadBalancer) error
}

// Query selects load balancers in Driver.Find. Exactly one field is set.
type Query struct {
	// ID selects the load balancer with this cloud ID (at most one).
	ID string
	// Tags selects load balancers carrying all of these tags with these
	// values (the Reconciler passes Owner.Selector: cluster and Service UID).
	Tags map[string]string
	// Name selects load balancers with this exact cloud name.
	Name string
}

// ListDriver is a Driver that can also list, in one call, every load
// balancer its Find could return; it is what NewCache wraps.
// Implementations must be safe for concurrent use.
type ListDriver interface {
	Driver
	// List returns every load balancer Find could return (it may return
	// more), each as Find returns it. It returns an error, never a
	// partial list, when it cannot list everything: a load balancer
	// missing from a successful List is only a hint that there is none,
	// which the Cache confirms with Find before reporting it. The caller
	// keeps the returned slice and the load balancers in it: do not
	// modify them afterwards. When the cloud throttles the call, return
	// an error wrapping an *api.RetryError as for Driver.
	List(ctx context.Context) ([]*LoadBalancer, error)
}
