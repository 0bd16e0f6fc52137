package fake

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"k8s.io/cloud-provider/api"

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
	OpApplyLoadBalancer  Op = "ApplyLoadBalancer"  // write: loadbalancer.Driver.Apply
	OpDeleteLoadBalancer Op = "DeleteLoadBalancer" // write: loadbalancer.Driver.Delete
	OpReadRouteTable     Op = "ReadRouteTable"     // read: routes.TableDriver.ReadTable
	OpWriteRouteTable    Op = "WriteRouteTable"    // write: routes.TableDriver.WriteTable
	OpGetInstance        Op = "GetInstance"        // read: instances.Driver.GetByID
	OpGetInstanceByName  Op = "GetInstanceByName"  // read: instances.Driver.GetByName
	OpListInstances      Op = "ListInstances"      // read: instances.ListDriver.List
)

// Ops returns every operation, in the order of the constants.
func Ops() []Op {
	return []Op{OpFindLoadBalancers, OpApplyLoadBalancer, OpDeleteLoadBalancer, OpReadRouteTable,
		OpWriteRouteTable, OpGetInstance, OpGetInstanceByName, OpListInstances}
}

// IsWrite reports whether op changes the cloud.
func (op Op) IsWrite() bool {
	return op == OpApplyLoadBalancer || op == OpDeleteLoadBalancer || op == OpWriteRouteTable
}

func (op Op) valid() bool { return slices.Contains(Ops(), op) }

// ErrInjected is the error of an injected fault that names no error of its
// own. It is wrapped with the operation.
var ErrInjected = errors.New("fake: injected fault")

// Calls counts the calls this Cloud made to the fake's cloud API since it
// was built or ResetCalls: every call that reached the API, including those
// an injected fault failed or the rate limit throttled. Calls rejected
// because their context was already done are not counted. Each Cloud (New's
// and each Peer) counts its own calls.
type Calls struct {
	Reads  int64 `json:"reads"`
	Writes int64 `json:"writes"`
	// Faults counts the calls failed by InjectFault or InjectRandomFaults
	// (not errors returned by interceptor Funcs).
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

// Fault is a scripted fault: the next Times calls of Op fail.
type Fault struct {
	// Op is the operation to fail; "" means every operation.
	Op Op
	// Times is how many matching calls fail: a positive number, or -1 for
	// every call until ClearFaults (an outage).
	Times int
	// Err is returned, unchanged, by each failing call; nil means an error
	// wrapping ErrInjected. Ignored when RetryAfter is set.
	Err error
	// RetryAfter, when positive, makes the fault a throttle: each failing
	// call returns an *api.RetryError (k8s.io/cloud-provider/api) with this
	// delay, which EnsureLoadBalancer passes to the service controller.
	RetryAfter time.Duration
	// LostResponse makes a failing write (ApplyLoadBalancer,
	// DeleteLoadBalancer, WriteRouteTable) take effect before it fails, as
	// when the cloud did the work but its answer never reached the caller:
	// the caller sees the error, the cloud the change. A failing read fails
	// as without it.
	LostResponse bool
}

// RandomFaults fail calls at random, reproducibly: the same Seed gives the
// same sequence of decisions, one per matching call in call order.
type RandomFaults struct {
	// Seed seeds the generator (a PCG).
	Seed uint64
	// Probability that a matching call fails, in (0, 1].
	Probability float64
	// Ops are the operations that may fail; empty means every operation.
	Ops []Op
	// Err is returned by each failing call; nil means an error wrapping
	// ErrInjected.
	Err error
}

// Funcs intercept the calls of the fake's cloud API, in the style of
// controller-runtime's interceptor.Funcs: a non-nil func is called instead
// of the operation, with the driver that performs it (next), so it can
// return an error, sleep (latency), change arguments or results, or call
// next. Funcs run after counting and after scripted and random faults; they
// are called concurrently and must be safe for concurrent use. next is not
// counted and not faulted again.
type Funcs struct {
	FindLoadBalancers  func(ctx context.Context, next loadbalancer.Driver, q loadbalancer.Query) ([]*loadbalancer.LoadBalancer, error)
	ApplyLoadBalancer  func(ctx context.Context, next loadbalancer.Driver, a loadbalancer.Action) (*loadbalancer.LoadBalancer, error)
	DeleteLoadBalancer func(ctx context.Context, next loadbalancer.Driver, lb *loadbalancer.LoadBalancer) error
	ReadRouteTable     func(ctx context.Context, next routes.TableDriver) ([]routes.Entry, string, error)
	WriteRouteTable    func(ctx context.Context, next routes.TableDriver, revision string, entries []routes.Entry) error
	GetInstance        func(ctx context.Context, next instances.ListDriver, id provider.ProviderID) (instances.Instance, error)
	GetInstanceByName  func(ctx context.Context, next instances.ListDriver, name string) (instances.Instance, error)
	ListInstances      func(ctx context.Context, next instances.ListDriver) ([]instances.Instance, error)
}

// meter is the fake's cloud API gate: it counts calls, applies the rate
// limit and decides injected faults. It is safe for concurrent use.
type meter struct {
	limits *limiter // shared by every Cloud of the store; never changes

	mu     sync.Mutex
	calls  Calls
	script []*Fault // Times > 0 or -1; consumed in order
	random *randomState
	funcs  Funcs
}

type randomState struct {
	RandomFaults
	rng *rand.Rand
}

func newMeter(limits *limiter) *meter {
	return &meter{limits: limits, calls: Calls{ByOp: map[Op]int64{}}}
}

// enter counts a call of op and returns, under one lock, the interceptor
// Funcs the call runs with, the injected fault, if any, and whether the
// fault fails the call only after it took effect (late: a scripted
// Fault.LostResponse on a write). A call whose ctx is done is not counted
// and returns ctx.Err(). A call the rate limit refuses returns its error
// (never late), before any fault is consumed: a real cloud throttles at
// its front door.
func (m *meter) enter(ctx context.Context, op Op) (funcs Funcs, late bool, err error) {
	if err := ctx.Err(); err != nil {
		return Funcs{}, false, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.calls.ByOp[op]++
	if op.IsWrite() {
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
		return Funcs{}, false, err
	}
	late, err = m.scripted(op)
	if err == nil {
		err = m.randomFault(op)
	}
	if err != nil {
		m.calls.Faults++
	}
	return m.funcs, late && op.IsWrite(), err
}

func (m *meter) scripted(op Op) (late bool, err error) {
	for i, f := range m.script {
		if f.Op != "" && f.Op != op {
			continue
		}
		if f.Times > 0 {
			if f.Times--; f.Times == 0 {
				m.script = slices.Delete(m.script, i, i+1)
			}
		}
		switch {
		case f.RetryAfter > 0:
			return f.LostResponse, api.NewRetryError(fmt.Sprintf("fake: %s throttled, retry after %v", op, f.RetryAfter), f.RetryAfter)
		case f.Err != nil:
			return f.LostResponse, f.Err
		default:
			return f.LostResponse, fmt.Errorf("%w: %s", ErrInjected, op)
		}
	}
	return false, nil
}

func (m *meter) randomFault(op Op) error {
	r := m.random
	if r == nil || (len(r.Ops) > 0 && !slices.Contains(r.Ops, op)) {
		return nil
	}
	if r.rng.Float64() >= r.Probability {
		return nil
	}
	if r.Err != nil {
		return r.Err
	}
	return fmt.Errorf("%w: %s (random)", ErrInjected, op)
}

// InjectFault adds a scripted fault. Faults are matched in the order they
// were added; each failing call consumes one use of the first matching
// fault. It returns an error naming the field for an unknown Op, a Times
// that is neither positive nor -1, or a negative RetryAfter. Safe for
// concurrent use.
func (c *Cloud) InjectFault(f Fault) error {
	switch {
	case f.Op != "" && !f.Op.valid():
		return fmt.Errorf("fake: Fault.Op %q: expected \"\" or one of %v", f.Op, Ops())
	case f.Times == 0 || f.Times < -1:
		return fmt.Errorf("fake: Fault.Times %d: expected a positive count, or -1 for every call", f.Times)
	case f.RetryAfter < 0:
		return fmt.Errorf("fake: Fault.RetryAfter %v: expected zero or positive", f.RetryAfter)
	}
	c.meter.mu.Lock()
	defer c.meter.mu.Unlock()
	c.meter.script = append(c.meter.script, &f)
	return nil
}

// InjectRandomFaults makes calls fail at random from now on, replacing any
// previous random faults. It returns an error naming the field for a
// Probability outside (0, 1] or an unknown Op. Safe for concurrent use.
func (c *Cloud) InjectRandomFaults(r RandomFaults) error {
	if !(r.Probability > 0 && r.Probability <= 1) {
		return fmt.Errorf("fake: RandomFaults.Probability %v: expected a number in (0, 1]", r.Probability)
	}
	for _, op := range r.Ops {
		if !op.valid() {
			return fmt.Errorf("fake: RandomFaults.Ops: %q: expected one of %v", op, Ops())
		}
	}
	r.Ops = slices.Clone(r.Ops)
	c.meter.mu.Lock()
	defer c.meter.mu.Unlock()
	c.meter.random = &randomState{RandomFaults: r, rng: rand.New(rand.NewPCG(r.Seed, r.Seed^0x9e3779b97f4a7c15))}
	return nil
}

// ClearFaults removes every scripted and random fault, and drops the
// instance cache's memory of a failed list, so the provider sees the end of
// an outage at once. Interceptor Funcs stay. Safe for concurrent use.
func (c *Cloud) ClearFaults() {
	c.meter.mu.Lock()
	c.meter.script, c.meter.random = nil, nil
	c.meter.mu.Unlock()
	c.cache.Invalidate()
}

// SetInterceptor replaces the interceptor Funcs (the zero Funcs removes
// them). Calls already running keep the Funcs they started with. Safe for
// concurrent use.
func (c *Cloud) SetInterceptor(f Funcs) {
	c.meter.mu.Lock()
	defer c.meter.mu.Unlock()
	c.meter.funcs = f
}

// Calls returns a copy of the call counters. Safe for concurrent use.
func (c *Cloud) Calls() Calls {
	c.meter.mu.Lock()
	defer c.meter.mu.Unlock()
	out := c.meter.calls
	out.ByOp, out.ThrottledByOp = maps.Clone(out.ByOp), maps.Clone(out.ThrottledByOp)
	return out
}

// ResetCalls sets every call counter back to zero. Safe for concurrent
// use.
func (c *Cloud) ResetCalls() {
	c.meter.mu.Lock()
	defer c.meter.mu.Unlock()
	c.meter.calls = Calls{ByOp: map[Op]int64{}}
}
