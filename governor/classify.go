package governor

import (
	"context"

	"github.com/ccmkit/ccmkit/internal/check"
	"github.com/ccmkit/ccmkit/loadbalancer"
)

// kind is how the Governor budgets one Driver method: its class and its
// priority. The package doc (Wrappers) says why each method is what it is.
type kind struct {
	class    Class
	priority Priority
}

// The kinds of the governed Driver methods but loadbalancer.Driver.Apply,
// whose kind depends on its action (applyKind).
var (
	// loadBalancerRead: Find and List. Normal: a node sync's Find must not
	// crowd out the instance and route reads, nor the Find before a create.
	loadBalancerRead = kind{Reads, Normal}
	// loadBalancerDelete: Delete. Urgent: a Service being deleted waits on
	// it (its finalizer), and it frees cloud resources.
	loadBalancerDelete = kind{Writes, Urgent}
	// instanceRead: GetByID, GetByName, List. Urgent: Node initialization
	// and the node-lifecycle controller's decisions wait on them, and an
	// instances.Cache makes them rare.
	instanceRead = kind{Reads, Urgent}
	// routeRead: ListRoutes, ReadTable. Urgent: the route controller
	// abandons its whole reconcile on a failed ListRoutes, and makes one
	// per period.
	routeRead = kind{Reads, Urgent}
	// routeWrite: CreateRoute, DeleteRoute, WriteTable. Normal: see the
	// package doc.
	routeWrite = kind{Writes, Normal}
)

// applyKind is the kind of loadbalancer.Driver.Apply for an action of kind
// k: creating a load balancer is urgent (a new Service waits for its
// address), the backend-only actions are background (what the service
// controller's periodic node sync, UpdateLoadBalancer, emits), and every
// other change of an existing load balancer is normal.
func applyKind(k loadbalancer.ActionKind) kind {
	switch k {
	case loadbalancer.ActionCreate:
		return kind{Writes, Urgent}
	case loadbalancer.ActionAddBackends, loadbalancer.ActionRemoveBackends:
		return kind{Writes, Background}
	}
	return kind{Writes, Normal}
}

// poolApplyKind is the kind of loadbalancer.PoolDriver.ApplyPool for a
// pool action of kind k: creating a pool is urgent (a new Service waits
// for it), a change of members background (the node sync's), as for
// applyKind.
func poolApplyKind(k loadbalancer.PoolActionKind) kind {
	if k == loadbalancer.PoolActionCreate {
		return kind{Writes, Urgent}
	}
	return kind{Writes, Background}
}

// govern makes one governed call: f, if g admits a call of kind k (its
// priority lowered to the cap of ctx, AtPriority), and
// then tells g its result. A refused call is not made: its refusal is
// returned, and it wraps cloudmetrics.ErrNotCalled (refusal.Unwrap), so
// the meter of the block above does not record it as a cloud call: the
// Governor counts refusals in metrics of its own. f's results are
// returned unchanged.
func govern[T any](ctx context.Context, g *Governor, k kind, f func() (T, error)) (T, error) {
	k = capped(ctx, k)
	if err := g.Admit(k.class, k.priority); err != nil {
		var zero T
		return zero, err
	}
	v, err := f()
	g.Observe(k.class, err)
	return v, err
}

// wrap returns what a wrapper method of g returns for the driver d: nil
// when d is nil (a typed nil included), so that the constructor it is
// given to refuses it with its own message (check.Driver); d itself when g
// is nil; and otherwise governed(), d wrapped.
func wrap[D any](g *Governor, d D, governed func() D) D {
	if check.IsNil(d) {
		var none D
		return none
	}
	if g == nil {
		return d
	}
	return governed()
}
