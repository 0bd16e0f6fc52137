package governor

import (
	"context"

	"github.com/ccmkit/ccmkit/loadbalancer"
)

// LoadBalancer returns d governed by g: each call is admitted by g (see
// the package doc, Wrappers, for the class and priority of each method) and
// reaches d only then; its results and errors are d's, unchanged, and a
// refused call returns g's refusal (ErrOverBudget, an *api.RetryError)
// without calling d. It returns nil for a nil d (a typed nil included), so
// that loadbalancer.NewReconciler reports it, and d itself for a nil g.
// The result is safe for concurrent use if d is. For a d that can list,
// use LoadBalancerList, whose result can list too.
func (g *Governor) LoadBalancer(d loadbalancer.Driver) loadbalancer.Driver {
	return wrap(g, d, func() loadbalancer.Driver { return loadBalancers{g, d} })
}

// LoadBalancerList is LoadBalancer for a ListDriver, whose List is
// governed like Find; the result is a loadbalancer.ListDriver, to give to
// loadbalancer.NewCache.
func (g *Governor) LoadBalancerList(d loadbalancer.ListDriver) loadbalancer.ListDriver {
	return wrap(g, d, func() loadbalancer.ListDriver { return loadBalancerList{loadBalancers{g, d}, d} })
}

// loadBalancers is a loadbalancer.Driver governed by g.
type loadBalancers struct {
	g *Governor
	d loadbalancer.Driver
}

var _ loadbalancer.ListDriver = loadBalancerList{}

func (w loadBalancers) Find(ctx context.Context, q loadbalancer.Query) ([]*loadbalancer.LoadBalancer, error) {
	return govern(ctx, w.g, loadBalancerRead, func() ([]*loadbalancer.LoadBalancer, error) { return w.d.Find(ctx, q) })
}

func (w loadBalancers) Apply(ctx context.Context, a loadbalancer.Action) (*loadbalancer.LoadBalancer, error) {
	return govern(ctx, w.g, applyKind(a.Kind), func() (*loadbalancer.LoadBalancer, error) { return w.d.Apply(ctx, a) })
}

func (w loadBalancers) Delete(ctx context.Context, lb *loadbalancer.LoadBalancer) error {
	_, err := govern(ctx, w.g, loadBalancerDelete, func() (struct{}, error) { return struct{}{}, w.d.Delete(ctx, lb) })
	return err
}

// loadBalancerList is a loadbalancer.ListDriver governed by g.
type loadBalancerList struct {
	loadBalancers
	list loadbalancer.ListDriver
}

func (w loadBalancerList) List(ctx context.Context) ([]*loadbalancer.LoadBalancer, error) {
	return govern(ctx, w.g, loadBalancerRead, func() ([]*loadbalancer.LoadBalancer, error) { return w.list.List(ctx) })
}

// LoadBalancerPools is LoadBalancerList for a loadbalancer.PoolListDriver
// (a cloud with shared backend pools, Capabilities.SharedBackendPools):
// the result is one too, so a loadbalancer.Cache over it caches the pools
// and the Reconciler still shares them. Pool reads are governed like
// Find; creating a pool is urgent, as creating a load balancer is (a new
// Service waits for it); changing a pool's members is background, as a
// load balancer's backend actions are (the service controller's node
// sync); deleting a pool is urgent, as Delete is.
func (g *Governor) LoadBalancerPools(d loadbalancer.PoolListDriver) loadbalancer.PoolListDriver {
	return wrap(g, d, func() loadbalancer.PoolListDriver {
		return loadBalancerPools{loadBalancerList{loadBalancers{g, d}, d}, d}
	})
}

// loadBalancerPools is a loadbalancer.PoolListDriver governed by g.
type loadBalancerPools struct {
	loadBalancerList
	pools loadbalancer.PoolListDriver
}

var _ loadbalancer.PoolListDriver = loadBalancerPools{}

func (w loadBalancerPools) FindPools(ctx context.Context, q loadbalancer.PoolQuery) ([]*loadbalancer.Pool, error) {
	return govern(ctx, w.g, loadBalancerRead, func() ([]*loadbalancer.Pool, error) { return w.pools.FindPools(ctx, q) })
}

func (w loadBalancerPools) ListPools(ctx context.Context) ([]*loadbalancer.Pool, error) {
	return govern(ctx, w.g, loadBalancerRead, func() ([]*loadbalancer.Pool, error) { return w.pools.ListPools(ctx) })
}

func (w loadBalancerPools) ApplyPool(ctx context.Context, a loadbalancer.PoolAction) (*loadbalancer.Pool, error) {
	return govern(ctx, w.g, poolApplyKind(a.Kind), func() (*loadbalancer.Pool, error) { return w.pools.ApplyPool(ctx, a) })
}

func (w loadBalancerPools) DeletePool(ctx context.Context, p *loadbalancer.Pool) error {
	_, err := govern(ctx, w.g, loadBalancerDelete, func() (struct{}, error) { return struct{}{}, w.pools.DeletePool(ctx, p) })
	return err
}
