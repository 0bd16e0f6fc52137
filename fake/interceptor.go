package fake

import (
	"context"
	"slices"

	"github.com/ccmkit/ccmkit/instances"
	"github.com/ccmkit/ccmkit/loadbalancer"
	"github.com/ccmkit/ccmkit/provider"
	"github.com/ccmkit/ccmkit/routes"
)

// Op names one operation of the fake's cloud API: one driver method.
type Op string

// The operations, each a read or a write of the cloud.
const (
	OpFindLoadBalancers  Op = "FindLoadBalancers"  // read: loadbalancer.Driver.Find
	OpListLoadBalancers  Op = "ListLoadBalancers"  // read: loadbalancer.ListDriver.List
	OpApplyLoadBalancer  Op = "ApplyLoadBalancer"  // write: loadbalancer.Driver.Apply
	OpDeleteLoadBalancer Op = "DeleteLoadBalancer" // write: loadbalancer.Driver.Delete
	OpFindBackendPools   Op = "FindBackendPools"   // read: loadbalancer.PoolDriver.FindPools
	OpListBackendPools   Op = "ListBackendPools"   // read: loadbalancer.PoolListDriver.ListPools
	OpApplyBackendPool   Op = "ApplyBackendPool"   // write: loadbalancer.PoolDriver.ApplyPool
	OpDeleteBackendPool  Op = "DeleteBackendPool"  // write: loadbalancer.PoolDriver.DeletePool
	OpReadRouteTable     Op = "ReadRouteTable"     // read: routes.TableDriver.ReadTable
	OpWriteRouteTable    Op = "WriteRouteTable"    // write: routes.TableDriver.WriteTable
	OpGetInstance        Op = "GetInstance"        // read: instances.Driver.GetByID
	OpGetInstanceByName  Op = "GetInstanceByName"  // read: instances.Driver.GetByName
	OpListInstances      Op = "ListInstances"      // read: instances.ListDriver.List
)

// ops is every operation, in the order of the constants.
var ops = []Op{OpFindLoadBalancers, OpListLoadBalancers, OpApplyLoadBalancer, OpDeleteLoadBalancer,
	OpFindBackendPools, OpListBackendPools, OpApplyBackendPool, OpDeleteBackendPool,
	OpReadRouteTable, OpWriteRouteTable, OpGetInstance, OpGetInstanceByName, OpListInstances}

// Writes reports whether op changes the cloud: its calls count as
// Calls.Writes and take from the rate limit's write budget.
func (op Op) Writes() bool {
	switch op {
	case OpApplyLoadBalancer, OpDeleteLoadBalancer, OpApplyBackendPool, OpDeleteBackendPool, OpWriteRouteTable:
		return true
	}
	return false
}

func (op Op) valid() bool { return slices.Contains(ops, op) }

// Funcs intercept the calls of the fake's cloud API, in the style of
// controller-runtime's interceptor.Funcs: the test's hooks on every call.
// A non-nil func is called instead of the operation, with the driver that
// performs it (next), so it can return an error (a fault, an outage, a
// throttle as an *api.RetryError), sleep (latency), change arguments or
// results, or call next and then fail (a lost response). A nil func lets
// the call through. Funcs run after the call is counted, the rate limit
// let it pass and the fault script (AddFault) did not fail it; they are
// called concurrently and must be safe for concurrent use. next is not
// counted again.
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
