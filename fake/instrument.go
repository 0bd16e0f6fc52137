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
	// Busy counts the writes the cloud refused because their load
	// balancer was busy (LoadBalancerSection.BusyAfterWrite), changing
	// nothing; they are in Writes and ByOp too. BusyByOp counts them per
	// operation (nil when none was).
	Busy     int64        `json:"busy,omitempty"`
	BusyByOp map[Op]int64 `json:"busyByOp,omitempty"`
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

// countBusy counts a call of op the cloud refused because its load
// balancer was busy.
func (m *meter) countBusy(op Op) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.calls.Busy++
	if m.calls.BusyByOp == nil {
		m.calls.BusyByOp = map[Op]int64{}
	}
	m.calls.BusyByOp[op]++
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
	out.ByOp, out.ThrottledByOp, out.BusyByOp = maps.Clone(out.ByOp), maps.Clone(out.ThrottledByOp), maps.Clone(out.BusyByOp)
	return out
}

// resetCalls sets every call counter back to zero.
func (c *Cloud) resetCalls() {
	c.meter.mu.Lock()
	defer c.meter.mu.Unlock()
	c.meter.calls = Calls{ByOp: map[Op]int64{}}
}

// cloudAPI is the fake's cloud API over the store: a
// loadbalancer.PoolListDriver and a routes.TableDriver, and, as
// instanceAPI, an instances.ListDriver (both have a List). Every method
// goes through gate,
// the one path of a call: counted and rate limited (meter.enter), then
// the admin endpoint's faults (meter.faults), then the user's Funcs, then
// the store. This is where a real provider has its cloud client. It is
// safe for concurrent use.
type cloudAPI struct {
	m     *meter
	s     *store
	user  *Funcs // the user's Funcs of the call, once past the gate
	stage stage  // where the call is on its path
}

// stage is where a call of cloudAPI is on its path.
type stage uint8

const (
	atGate  stage = iota // not counted yet: meter.enter, then the faults
	atUser               // the user's Funcs next
	atStore              // the store next
)

var (
	_ loadbalancer.PoolListDriver = cloudAPI{}
	_ routes.TableDriver          = cloudAPI{}
	_ instances.ListDriver        = instanceAPI{}
)

// gate takes one call of op one stage on: at the gate it counts the call
// and applies the rate limit (a refusal ends it, before any fault is
// consumed), then runs step with the admin endpoint's fault Funcs,
// counting a refusal of a busy load balancer (Calls.Busy); then
// step with the user's Funcs; then step with nil, for the store. step
// calls its Funcs' hook for the call with next, the API a stage on
// (next is not counted again), or next's method when the hook is nil.
func gate[T any](ctx context.Context, a cloudAPI, op Op, step func(f *Funcs, next cloudAPI) (T, error)) (T, error) {
	switch a.stage {
	case atGate:
		user, err := a.m.enter(ctx, op)
		if err != nil {
			var zero T
			return zero, err
		}
		a.user, a.stage = user, atUser
		out, err := step(a.m.faults, a)
		if err != nil && refusedBusy(err) {
			a.m.countBusy(op)
		}
		return out, err
	case atUser:
		next := a
		next.stage = atStore
		return step(a.user, next)
	}
	return step(nil, a)
}

func (a cloudAPI) Find(ctx context.Context, q loadbalancer.Query) ([]*loadbalancer.LoadBalancer, error) {
	return gate(ctx, a, OpFindLoadBalancers, func(f *Funcs, next cloudAPI) ([]*loadbalancer.LoadBalancer, error) {
		switch {
		case f == nil:
			return lbDriver{a.s}.Find(ctx, q)
		case f.FindLoadBalancers != nil:
			return f.FindLoadBalancers(ctx, next, q)
		}
		return next.Find(ctx, q)
	})
}

func (a cloudAPI) List(ctx context.Context) ([]*loadbalancer.LoadBalancer, error) {
	return gate(ctx, a, OpListLoadBalancers, func(f *Funcs, next cloudAPI) ([]*loadbalancer.LoadBalancer, error) {
		switch {
		case f == nil:
			return lbDriver{a.s}.List(ctx)
		case f.ListLoadBalancers != nil:
			return f.ListLoadBalancers(ctx, next)
		}
		return next.List(ctx)
	})
}

func (a cloudAPI) Apply(ctx context.Context, act loadbalancer.Action) (*loadbalancer.LoadBalancer, error) {
	return gate(ctx, a, OpApplyLoadBalancer, func(f *Funcs, next cloudAPI) (*loadbalancer.LoadBalancer, error) {
		switch {
		case f == nil:
			return lbDriver{a.s}.Apply(ctx, act)
		case f.ApplyLoadBalancer != nil:
			return f.ApplyLoadBalancer(ctx, next, act)
		}
		return next.Apply(ctx, act)
	})
}

func (a cloudAPI) Delete(ctx context.Context, lb *loadbalancer.LoadBalancer) error {
	_, err := gate(ctx, a, OpDeleteLoadBalancer, func(f *Funcs, next cloudAPI) (struct{}, error) {
		switch {
		case f == nil:
			return struct{}{}, lbDriver{a.s}.Delete(ctx, lb)
		case f.DeleteLoadBalancer != nil:
			return struct{}{}, f.DeleteLoadBalancer(ctx, next, lb)
		}
		return struct{}{}, next.Delete(ctx, lb)
	})
	return err
}

func (a cloudAPI) FindPools(ctx context.Context, q loadbalancer.PoolQuery) ([]*loadbalancer.Pool, error) {
	return gate(ctx, a, OpFindBackendPools, func(f *Funcs, next cloudAPI) ([]*loadbalancer.Pool, error) {
		switch {
		case f == nil:
			return lbDriver{a.s}.FindPools(ctx, q)
		case f.FindBackendPools != nil:
			return f.FindBackendPools(ctx, next, q)
		}
		return next.FindPools(ctx, q)
	})
}

func (a cloudAPI) ListPools(ctx context.Context) ([]*loadbalancer.Pool, error) {
	return gate(ctx, a, OpListBackendPools, func(f *Funcs, next cloudAPI) ([]*loadbalancer.Pool, error) {
		switch {
		case f == nil:
			return lbDriver{a.s}.ListPools(ctx)
		case f.ListBackendPools != nil:
			return f.ListBackendPools(ctx, next)
		}
		return next.ListPools(ctx)
	})
}

func (a cloudAPI) ApplyPool(ctx context.Context, act loadbalancer.PoolAction) (*loadbalancer.Pool, error) {
	return gate(ctx, a, OpApplyBackendPool, func(f *Funcs, next cloudAPI) (*loadbalancer.Pool, error) {
		switch {
		case f == nil:
			return lbDriver{a.s}.ApplyPool(ctx, act)
		case f.ApplyBackendPool != nil:
			return f.ApplyBackendPool(ctx, next, act)
		}
		return next.ApplyPool(ctx, act)
	})
}

func (a cloudAPI) DeletePool(ctx context.Context, p *loadbalancer.Pool) error {
	_, err := gate(ctx, a, OpDeleteBackendPool, func(f *Funcs, next cloudAPI) (struct{}, error) {
		switch {
		case f == nil:
			return struct{}{}, lbDriver{a.s}.DeletePool(ctx, p)
		case f.DeleteBackendPool != nil:
			return struct{}{}, f.DeleteBackendPool(ctx, next, p)
		}
		return struct{}{}, next.DeletePool(ctx, p)
	})
	return err
}

// table is a route table read: its entries and revision, one value for
// gate.
type table struct {
	entries  []routes.Entry
	revision string
}

func (a cloudAPI) ReadTable(ctx context.Context) ([]routes.Entry, string, error) {
	t, err := gate(ctx, a, OpReadRouteTable, func(f *Funcs, next cloudAPI) (t table, err error) {
		switch {
		case f == nil:
			t.entries, t.revision, err = routeDriver{a.s}.ReadTable(ctx)
		case f.ReadRouteTable != nil:
			t.entries, t.revision, err = f.ReadRouteTable(ctx, next)
		default:
			t.entries, t.revision, err = next.ReadTable(ctx)
		}
		return t, err
	})
	return t.entries, t.revision, err
}

func (a cloudAPI) WriteTable(ctx context.Context, revision string, entries []routes.Entry) error {
	_, err := gate(ctx, a, OpWriteRouteTable, func(f *Funcs, next cloudAPI) (struct{}, error) {
		switch {
		case f == nil:
			return struct{}{}, routeDriver{a.s}.WriteTable(ctx, revision, entries)
		case f.WriteRouteTable != nil:
			return struct{}{}, f.WriteRouteTable(ctx, next, revision, entries)
		}
		return struct{}{}, next.WriteTable(ctx, revision, entries)
	})
	return err
}

// instanceAPI is cloudAPI as an instances.ListDriver: its List is the
// instances', where cloudAPI's is the load balancers'. Its calls go through
// the same gate.
type instanceAPI cloudAPI

func (a instanceAPI) GetByID(ctx context.Context, id provider.ProviderID) (instances.Instance, error) {
	return gate(ctx, cloudAPI(a), OpGetInstance, func(f *Funcs, next cloudAPI) (instances.Instance, error) {
		switch {
		case f == nil:
			return instanceDriver{a.s}.GetByID(ctx, id)
		case f.GetInstance != nil:
			return f.GetInstance(ctx, instanceAPI(next), id)
		}
		return instanceAPI(next).GetByID(ctx, id)
	})
}

func (a instanceAPI) GetByName(ctx context.Context, name string) (instances.Instance, error) {
	return gate(ctx, cloudAPI(a), OpGetInstanceByName, func(f *Funcs, next cloudAPI) (instances.Instance, error) {
		switch {
		case f == nil:
			return instanceDriver{a.s}.GetByName(ctx, name)
		case f.GetInstanceByName != nil:
			return f.GetInstanceByName(ctx, instanceAPI(next), name)
		}
		return instanceAPI(next).GetByName(ctx, name)
	})
}

func (a instanceAPI) List(ctx context.Context) ([]instances.Instance, error) {
	return gate(ctx, cloudAPI(a), OpListInstances, func(f *Funcs, next cloudAPI) ([]instances.Instance, error) {
		switch {
		case f == nil:
			return instanceDriver{a.s}.List(ctx)
		case f.ListInstances != nil:
			return f.ListInstances(ctx, instanceAPI(next))
		}
		return instanceAPI(next).List(ctx)
	})
}
