package fake

import (
	"context"
	"maps"
	"slices"
	"sync"

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

// Calls counts the calls this Cloud made to the fake's cloud API since it
// was built or the admin endpoint's POST /calls/reset: every call that
// reached the API, including those a fault failed or the rate limit
// throttled. Calls rejected because their context was already done are not
// counted. Each Cloud (New's and each NewPeer's) counts its own calls.
type Calls struct {
	Reads  int64 `json:"reads"`
	Writes int64 `json:"writes"`
	// Faults counts the calls failed by a fault injected through the admin
	// endpoint (POST /faults), not errors returned by interceptor Funcs.
	Faults int64 `json:"faults"`
	// Throttled counts the calls the rate limit refused (RateLimit); they
	// are in Reads or Writes and ByOp too.
	Throttled int64 `json:"throttled"`
	// ByOp counts the calls per operation; operations not called are
	// absent.
	ByOp map[Op]int64 `json:"byOp"`
	// ThrottledByOp counts the throttled calls per operation; operations
	// never throttled are absent (nil when none was).
	ThrottledByOp map[Op]int64 `json:"throttledByOp,omitempty"`
}

// meter is the fake's cloud API gate: it counts calls, applies the rate
// limit and hands each call the interceptor Funcs it runs with: the admin
// endpoint's faults (faults, fixed) in front of the user's (funcs). It is
// safe for concurrent use.
type meter struct {
	limits *limiter // shared by every Cloud of the store; never changes
	faults *Funcs   // the admin endpoint's fault script; never changes
	script faultScript

	mu    sync.Mutex
	calls Calls
	funcs Funcs
}

func newMeter(limits *limiter, funcs Funcs) *meter {
	m := &meter{limits: limits, calls: Calls{ByOp: map[Op]int64{}}, funcs: funcs}
	m.faults = new(failing(m.scripted))
	return m
}

// enter counts a call of op and returns the user's interceptor Funcs the
// call runs with. A call whose ctx is done is not counted and returns
// ctx.Err(). A call the rate limit refuses returns its error, before any
// fault is consumed: a real cloud throttles at its front door.
func (m *meter) enter(ctx context.Context, op Op) (*Funcs, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.calls.ByOp[op]++
	if op.Writes() {
		m.calls.Writes++
	} else {
		m.calls.Reads++
	}
	if err := m.limits.take(op); err != nil {
		m.calls.Throttled++
		if m.calls.ThrottledByOp == nil {
			m.calls.ThrottledByOp = map[Op]int64{}
		}
		m.calls.ThrottledByOp[op]++
		return nil, err
	}
	funcs := m.funcs
	return &funcs, nil
}

// scripted takes the admin endpoint's next fault for op, counting it.
func (m *meter) scripted(op Op) (error, bool) {
	err, late := m.script.take(op)
	if err != nil {
		m.mu.Lock()
		m.calls.Faults++
		m.mu.Unlock()
	}
	return err, late
}

// Calls returns a copy of the call counters. Safe for concurrent use.
func (c *Cloud) Calls() Calls {
	c.meter.mu.Lock()
	defer c.meter.mu.Unlock()
	out := c.meter.calls
	out.ByOp, out.ThrottledByOp = maps.Clone(out.ByOp), maps.Clone(out.ThrottledByOp)
	return out
}

// resetCalls sets every call counter back to zero.
func (c *Cloud) resetCalls() {
	c.meter.mu.Lock()
	defer c.meter.mu.Unlock()
	c.meter.calls = Calls{ByOp: map[Op]int64{}}
}

// The fake's cloud API: each driver wrapped so that every call is counted
// and rate limited, then goes through the admin endpoint's faults and the
// interceptor Funcs. This is where a real provider has its cloud client.

type lbAPI struct {
	m    *meter
	next lbDriver
}

func (d lbAPI) driver(ctx context.Context, op Op) (loadbalancer.ListDriver, error) {
	funcs, err := d.m.enter(ctx, op)
	if err != nil {
		return nil, err
	}
	return lbFuncs{d.m.faults, lbFuncs{funcs, d.next}}, nil
}

func (d lbAPI) Find(ctx context.Context, q loadbalancer.Query) ([]*loadbalancer.LoadBalancer, error) {
	next, err := d.driver(ctx, OpFindLoadBalancers)
	if err != nil {
		return nil, err
	}
	return next.Find(ctx, q)
}

func (d lbAPI) List(ctx context.Context) ([]*loadbalancer.LoadBalancer, error) {
	next, err := d.driver(ctx, OpListLoadBalancers)
	if err != nil {
		return nil, err
	}
	return next.List(ctx)
}

func (d lbAPI) Apply(ctx context.Context, a loadbalancer.Action) (*loadbalancer.LoadBalancer, error) {
	next, err := d.driver(ctx, OpApplyLoadBalancer)
	if err != nil {
		return nil, err
	}
	return next.Apply(ctx, a)
}

func (d lbAPI) Delete(ctx context.Context, lb *loadbalancer.LoadBalancer) error {
	next, err := d.driver(ctx, OpDeleteLoadBalancer)
	if err != nil {
		return err
	}
	return next.Delete(ctx, lb)
}

// poolAPI is lbAPI with the backend pool operations: the cloud API of a
// cloud with shared backend pools (BackendPoolsShared).
type poolAPI struct{ lbAPI }

var _ loadbalancer.PoolListDriver = poolAPI{}

func (d poolAPI) poolDriver(ctx context.Context, op Op) (loadbalancer.PoolListDriver, error) {
	funcs, err := d.m.enter(ctx, op)
	if err != nil {
		return nil, err
	}
	return newPoolFuncs(d.m.faults, newPoolFuncs(funcs, d.next)), nil
}

func (d poolAPI) FindPools(ctx context.Context, q loadbalancer.PoolQuery) ([]*loadbalancer.Pool, error) {
	next, err := d.poolDriver(ctx, OpFindBackendPools)
	if err != nil {
		return nil, err
	}
	return next.FindPools(ctx, q)
}

func (d poolAPI) ListPools(ctx context.Context) ([]*loadbalancer.Pool, error) {
	next, err := d.poolDriver(ctx, OpListBackendPools)
	if err != nil {
		return nil, err
	}
	return next.ListPools(ctx)
}

func (d poolAPI) ApplyPool(ctx context.Context, a loadbalancer.PoolAction) (*loadbalancer.Pool, error) {
	next, err := d.poolDriver(ctx, OpApplyBackendPool)
	if err != nil {
		return nil, err
	}
	return next.ApplyPool(ctx, a)
}

func (d poolAPI) DeletePool(ctx context.Context, p *loadbalancer.Pool) error {
	next, err := d.poolDriver(ctx, OpDeleteBackendPool)
	if err != nil {
		return err
	}
	return next.DeletePool(ctx, p)
}

type routeAPI struct {
	m    *meter
	next routeDriver
}

func (d routeAPI) driver(ctx context.Context, op Op) (routes.TableDriver, error) {
	funcs, err := d.m.enter(ctx, op)
	if err != nil {
		return nil, err
	}
	return routeFuncs{d.m.faults, routeFuncs{funcs, d.next}}, nil
}

func (d routeAPI) ReadTable(ctx context.Context) ([]routes.Entry, string, error) {
	next, err := d.driver(ctx, OpReadRouteTable)
	if err != nil {
		return nil, "", err
	}
	return next.ReadTable(ctx)
}

func (d routeAPI) WriteTable(ctx context.Context, revision string, entries []routes.Entry) error {
	next, err := d.driver(ctx, OpWriteRouteTable)
	if err != nil {
		return err
	}
	return next.WriteTable(ctx, revision, entries)
}

type instanceAPI struct {
	m    *meter
	next instanceDriver
}

func (d instanceAPI) driver(ctx context.Context, op Op) (instances.ListDriver, error) {
	funcs, err := d.m.enter(ctx, op)
	if err != nil {
		return nil, err
	}
	return instanceFuncs{d.m.faults, instanceFuncs{funcs, d.next}}, nil
}

func (d instanceAPI) GetByID(ctx context.Context, id provider.ProviderID) (instances.Instance, error) {
	next, err := d.driver(ctx, OpGetInstance)
	if err != nil {
		return instances.Instance{}, err
	}
	return next.GetByID(ctx, id)
}

func (d instanceAPI) GetByName(ctx context.Context, name string) (instances.Instance, error) {
	next, err := d.driver(ctx, OpGetInstanceByName)
	if err != nil {
		return instances.Instance{}, err
	}
	return next.GetByName(ctx, name)
}

func (d instanceAPI) List(ctx context.Context) ([]instances.Instance, error) {
	next, err := d.driver(ctx, OpListInstances)
	if err != nil {
		return nil, err
	}
	return next.List(ctx)
}
