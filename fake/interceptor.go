package fake

import (
	"context"

	"github.com/ccmkit/ccmkit/instances"
	"github.com/ccmkit/ccmkit/loadbalancer"
	"github.com/ccmkit/ccmkit/provider"
	"github.com/ccmkit/ccmkit/routes"
)

// Funcs intercept the calls of the fake's cloud API, in the style of
// controller-runtime's interceptor.Funcs: the fake's one fault mechanism.
// A non-nil func is called instead of the operation, with the driver that
// performs it (next), so it can return an error (a fault, an outage, a
// throttle as an *api.RetryError), sleep (latency), change arguments or
// results, or call next and then fail (a lost response). A nil func lets
// the call through. Funcs run after the call is counted and the rate limit
// let it pass; they are called concurrently and must be safe for
// concurrent use. next is not counted again.
//
// Set them with Options.Interceptor or, at run time, with SetInterceptor.
type Funcs struct {
	FindLoadBalancers  func(ctx context.Context, next loadbalancer.Driver, q loadbalancer.Query) ([]*loadbalancer.LoadBalancer, error)
	ListLoadBalancers  func(ctx context.Context, next loadbalancer.ListDriver) ([]*loadbalancer.LoadBalancer, error)
	ApplyLoadBalancer  func(ctx context.Context, next loadbalancer.Driver, a loadbalancer.Action) (*loadbalancer.LoadBalancer, error)
	DeleteLoadBalancer func(ctx context.Context, next loadbalancer.Driver, lb *loadbalancer.LoadBalancer) error
	// The backend pool operations, called only with
	// LoadBalancerSection.BackendPools shared.
	FindBackendPools  func(ctx context.Context, next loadbalancer.PoolDriver, q loadbalancer.PoolQuery) ([]*loadbalancer.Pool, error)
	ListBackendPools  func(ctx context.Context, next loadbalancer.PoolListDriver) ([]*loadbalancer.Pool, error)
	ApplyBackendPool  func(ctx context.Context, next loadbalancer.PoolDriver, a loadbalancer.PoolAction) (*loadbalancer.Pool, error)
	DeleteBackendPool func(ctx context.Context, next loadbalancer.PoolDriver, p *loadbalancer.Pool) error
	ReadRouteTable    func(ctx context.Context, next routes.TableDriver) ([]routes.Entry, string, error)
	WriteRouteTable   func(ctx context.Context, next routes.TableDriver, revision string, entries []routes.Entry) error
	GetInstance       func(ctx context.Context, next instances.ListDriver, id provider.ProviderID) (instances.Instance, error)
	GetInstanceByName func(ctx context.Context, next instances.ListDriver, name string) (instances.Instance, error)
	ListInstances     func(ctx context.Context, next instances.ListDriver) ([]instances.Instance, error)
}

// SetInterceptor replaces the interceptor Funcs (the zero Funcs removes
// them) and drops the instance and load-balancer caches, so that the
// provider sees the end of an outage, or what the Funcs did to the cloud,
// at its next look-up. Calls already running keep the Funcs they started
// with. Safe for concurrent use.
func (c *Cloud) SetInterceptor(f Funcs) {
	c.meter.mu.Lock()
	c.meter.funcs = f
	c.meter.mu.Unlock()
	c.dropCaches()
}

// DropCaches drops the provider's instance and load-balancer caches, as a
// provider does when its cloud reports a change: the next look-up asks
// the cloud. A test that changed the cloud behind the provider's back
// through the control surface (RemoveBackend, RemoveListener, …: changes
// a real cloud's console would make, which the caches see only within
// their TTL) calls it as its conformance Hooks.CloudChanged.
func (c *Cloud) DropCaches() { c.dropCaches() }

// dropCaches drops the instance and load-balancer caches, and their memory
// of a failed list.
func (c *Cloud) dropCaches() {
	c.cache.Invalidate()
	c.lbCache.Invalidate()
}

// failing returns the Funcs of an injected fault: before each call, take
// decides whether the call of op fails, with which error, and whether the
// error comes only after the call took effect (late: a lost response; for
// writes only, a read fails at once).
func failing(take func(op Op) (err error, late bool)) Funcs {
	// run is one call of op: call unless the fault comes first.
	run := func(op Op, call func() error) error {
		fault, late := take(op)
		if fault == nil {
			return call()
		}
		if late && op.Writes() {
			_ = call()
		}
		return fault
	}
	f := Funcs{
		FindLoadBalancers: func(ctx context.Context, next loadbalancer.Driver, q loadbalancer.Query) (out []*loadbalancer.LoadBalancer, err error) {
			err = run(OpFindLoadBalancers, func() (err error) { out, err = next.Find(ctx, q); return err })
			return nilOnError(out, err)
		},
		ListLoadBalancers: func(ctx context.Context, next loadbalancer.ListDriver) (out []*loadbalancer.LoadBalancer, err error) {
			err = run(OpListLoadBalancers, func() (err error) { out, err = next.List(ctx); return err })
			return nilOnError(out, err)
		},
		ApplyLoadBalancer: func(ctx context.Context, next loadbalancer.Driver, a loadbalancer.Action) (out *loadbalancer.LoadBalancer, err error) {
			err = run(OpApplyLoadBalancer, func() (err error) { out, err = next.Apply(ctx, a); return err })
			if appliedBusy(err) {
				return out, err // applied: the result stands
			}
			return nilOnError(out, err)
		},
		DeleteLoadBalancer: func(ctx context.Context, next loadbalancer.Driver, lb *loadbalancer.LoadBalancer) error {
			return run(OpDeleteLoadBalancer, func() error { return next.Delete(ctx, lb) })
		},
		ReadRouteTable: func(ctx context.Context, next routes.TableDriver) (out []routes.Entry, rev string, err error) {
			err = run(OpReadRouteTable, func() (err error) { out, rev, err = next.ReadTable(ctx); return err })
			if err != nil {
				return nil, "", err
			}
			return out, rev, nil
		},
		WriteRouteTable: func(ctx context.Context, next routes.TableDriver, revision string, entries []routes.Entry) error {
			return run(OpWriteRouteTable, func() error { return next.WriteTable(ctx, revision, entries) })
		},
		GetInstance: func(ctx context.Context, next instances.ListDriver, id provider.ProviderID) (out instances.Instance, err error) {
			err = run(OpGetInstance, func() (err error) { out, err = next.GetByID(ctx, id); return err })
			return nilOnError(out, err)
		},
		GetInstanceByName: func(ctx context.Context, next instances.ListDriver, name string) (out instances.Instance, err error) {
			err = run(OpGetInstanceByName, func() (err error) { out, err = next.GetByName(ctx, name); return err })
			return nilOnError(out, err)
		},
		ListInstances: func(ctx context.Context, next instances.ListDriver) (out []instances.Instance, err error) {
			err = run(OpListInstances, func() (err error) { out, err = next.List(ctx); return err })
			return nilOnError(out, err)
		},
	}
	failingPools(&f, run)
	return f
}

// failingPools sets the backend pool operations of f to fail as run, the
// one call of an operation in failing, decides.
func failingPools(f *Funcs, run func(op Op, call func() error) error) {
	f.FindBackendPools = func(ctx context.Context, next loadbalancer.PoolDriver, q loadbalancer.PoolQuery) (out []*loadbalancer.Pool, err error) {
		err = run(OpFindBackendPools, func() (err error) { out, err = next.FindPools(ctx, q); return err })
		return nilOnError(out, err)
	}
	f.ListBackendPools = func(ctx context.Context, next loadbalancer.PoolListDriver) (out []*loadbalancer.Pool, err error) {
		err = run(OpListBackendPools, func() (err error) { out, err = next.ListPools(ctx); return err })
		return nilOnError(out, err)
	}
	f.ApplyBackendPool = func(ctx context.Context, next loadbalancer.PoolDriver, a loadbalancer.PoolAction) (out *loadbalancer.Pool, err error) {
		err = run(OpApplyBackendPool, func() (err error) { out, err = next.ApplyPool(ctx, a); return err })
		return nilOnError(out, err)
	}
	f.DeleteBackendPool = func(ctx context.Context, next loadbalancer.PoolDriver, p *loadbalancer.Pool) error {
		return run(OpDeleteBackendPool, func() error { return next.DeletePool(ctx, p) })
	}
}

// nilOnError returns the zero T with a non-nil err, else v.
func nilOnError[T any](v T, err error) (T, error) {
	if err != nil {
		var zero T
		return zero, err
	}
	return v, nil
}
