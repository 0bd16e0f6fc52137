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
// Throttling and provisioning: a Driver says "not now, retry after D" by
// returning an error wrapping an *api.RetryError (k8s.io/cloud-provider/api,
// api.NewRetryError(msg, D)) from any method: when its cloud answers 429
// with a Retry-After, or a load balancer is still provisioning. This is
// ccmkit's one convention for throttling in every block (the instances and
// routes Drivers use it too). Every Reconciler method returns it wrapped,
// findable with errors.As; from EnsureLoadBalancer the service controller
// requeues the Service after D (controllers/service/controller.go,
// processServiceCreateOrUpdate). It is never reported as a user error.
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
	// the load balancer as it is afterwards. For ActionCreate it creates
	// the load balancer with a.Create's Name, Tags and Spec and returns it
	// with its new ID; a Driver that creates in steps may fail half-way,
	// the next EnsureLoadBalancer finds the partial load balancer by its
	// tags and plans the rest. Every other kind targets a.LoadBalancerID.
	//
	// Apply must change only what the action names: never tags other than
	// the ones given, never listeners or backends other than the ones
	// given.
	Apply(ctx context.Context, a Action) (*LoadBalancer, error)

	// Delete deletes lb (as returned by Find) and every cloud object that
	// belongs to it. It returns nil when nothing is left, including when lb
	// was already gone; it is called again after any error.
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
