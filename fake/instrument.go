package fake

import (
	"context"
	"maps"
	"sync"

	"github.com/ccmkit/ccmkit/instances"
	"github.com/ccmkit/ccmkit/loadbalancer"
	"github.com/ccmkit/ccmkit/routes"
)

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
// limit, keeps the admin endpoint's fault script and hands each call the
// user's interceptor Funcs it runs with. It is safe for concurrent use.
type meter struct {
	limits *limiter // shared by every Cloud of the store; never changes
	script faultScript

	mu    sync.Mutex
	calls Calls
	funcs Funcs
}

func newMeter(limits *limiter, funcs Funcs) *meter {
	return &meter{limits: limits, calls: Calls{ByOp: map[Op]int64{}}, funcs: funcs}
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
// goes through gate, the one path of a call: counted and rate limited
// (meter.enter), then the admin endpoint's fault script, then the user's
// Funcs, then the store. This is where a real provider has its cloud
// client. Each method sits beside the store's (loadbalancer.go, routes.go,
// instances.go). It is safe for concurrent use.
type cloudAPI struct {
	m    *meter
	s    *store
	past bool // past the gate: the call was counted; the store is next
}

var (
	_ loadbalancer.PoolListDriver = cloudAPI{}
	_ routes.TableDriver          = cloudAPI{}
)

var (
	_ loadbalancer.PoolListDriver = cloudAPI{}
	_ routes.TableDriver          = cloudAPI{}
	_ instances.ListDriver        = instanceAPI{}
)

// gate runs one call of op. At the gate it counts the call and applies the
// rate limit (a refusal ends it, before any fault is consumed), then takes
// the fault script's next fault for op: a fault fails the call at once, or,
// for a write with LostResponse, after the call took effect. The call
// itself is step with the user's Funcs and next, the API past the gate (so
// next is not counted again). Past the gate, step runs with nil Funcs: the
// store. step calls its Funcs' hook for the call with next, or the store
// when there is none. A failed call returns
// the zero T, except a busy answer that took effect (appliedBusy), whose
// result stands; a write refused because its load balancer was busy counts
// as Calls.Busy.
func gate[T any](ctx context.Context, a cloudAPI, op Op, step func(f *Funcs, next cloudAPI) (T, error)) (T, error) {
	var zero T
	if a.past {
		return step(nil, a)
	}
	user, err := a.m.enter(ctx, op)
	if err != nil {
		return zero, err
	}
	next := a
	next.past = true
	out := zero
	fault, late := a.m.scripted(op)
	if fault == nil || late && op.Writes() {
		out, err = step(user, next)
	}
	if fault != nil {
		err = fault
	}
	if err != nil && refusedBusy(err) {
		a.m.countBusy(op)
	}
	if err != nil && !appliedBusy(err) {
		return zero, err
	}
	return out, err
}

// gateErr is gate for an operation that returns only an error.
func gateErr(ctx context.Context, a cloudAPI, op Op, step func(f *Funcs, next cloudAPI) error) error {
	_, err := gate(ctx, a, op, func(f *Funcs, next cloudAPI) (struct{}, error) { return struct{}{}, step(f, next) })
	return err
}
