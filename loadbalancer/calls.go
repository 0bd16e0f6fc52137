package loadbalancer

import (
	"context"

	"github.com/ccmkit/ccmkit/internal/cloudmetrics"
	"github.com/ccmkit/ccmkit/internal/throttle"
)

// throttleBudget is the context key of the *throttle.Budget of a method
// that waits for throttled cloud calls (see Options.MaxThrottleWait).
type throttleBudget struct{}

// waitThrottles returns ctx carrying a budget of Options.MaxThrottleWait for
// all the cloud calls of the method it is given to: each is retried after a
// throttle while the waits so far fit in it (call).
func (r *Reconciler) waitThrottles(ctx context.Context) context.Context {
	return context.WithValue(ctx, throttleBudget{}, throttle.NewBudget(r.opts.MaxThrottleWait, r.opts.Clock))
}

// call makes one cloud call (fn) and, in a method that waits for throttles
// (waitThrottles), calls again after each throttle within the method's
// budget; see throttle.Retry. In EnsureLoadBalancer it calls fn once.
func (r *Reconciler) call(ctx context.Context, fn func() error) error {
	b, _ := ctx.Value(throttleBudget{}).(*throttle.Budget)
	return throttle.Retry(ctx, b, fn)
}

// callFor is r.call for a cloud call that returns a value with its error.
func callFor[T any](ctx context.Context, r *Reconciler, fn func() (T, error)) (T, error) {
	var v T
	err := r.call(ctx, func() (err error) {
		v, err = fn()
		return err
	})
	return v, err
}

// capability is the capability label of the Reconciler's cloud calls in
// internal/cloudmetrics (see the package doc, "Metrics").
const capability = "loadbalancer"

// selfMetered marks the Cache as recording its own cloud calls, so that
// a Reconciler over it (or over a provider's Driver embedding it) does not
// meter them again (meteredDriver). The alias keeps the embedded field
// unexported.
type selfMetered = cloudmetrics.SelfMetered

// meteredDriver returns the Driver and PoolDriver (poolDriverOf d) a
// Reconciler calls for d: d itself when it records its own calls (a
// Cache, see selfMetered), else d metered.
func meteredDriver(d Driver) (Driver, PoolDriver) {
	pools := poolDriverOf(d)
	if cloudmetrics.MetersItself(d) {
		return d, pools
	}
	m := metered{d}
	if pools == nil {
		return m, nil
	}
	return m, m
}

// metered is d with each cloud call recorded under its method's name
// through cloudmetrics.Metered: the Driver a Reconciler calls (over a
// Driver that is no Cache) and the ListDriver, and PoolListDriver, a
// Cache calls. Its List and pool methods are called only when d has
// them. The Driver contract has no not-found error (Find reports none as
// an empty slice, Delete a gone load balancer as nil), so no error counts
// as not-found. An Apply or Delete answered busy and not refused (see
// Driver) took effect: it counts as "ok" (meterWrite). One refused because
// the load balancer was busy counts as "error", as the cloud answered it
// (a 409), and never as "throttled", the result of a RetryError, which
// stays the count of the cloud's rate limit.
type metered struct{ d Driver }

// meterWrite is cloudmetrics.Metered for a write (Apply, Delete) of
// metered: its busy answer that took effect (appliedBusy) is recorded as a
// success, and returned as it is.
func meterWrite[T any](ctx context.Context, operation string, f func(ctx context.Context) (T, error)) (T, error) {
	var busy error
	v, err := cloudmetrics.Metered(ctx, capability, operation, func(ctx context.Context) (T, error) {
		v, err := f(ctx)
		if appliedBusy(err) {
			busy, err = err, nil
		}
		return v, err
	})
	if busy != nil {
		return v, busy
	}
	return v, err
}

var _ PoolListDriver = metered{}

func (m metered) Find(ctx context.Context, q Query) ([]*LoadBalancer, error) {
	return cloudmetrics.Metered(ctx, capability, "Find", func(ctx context.Context) ([]*LoadBalancer, error) { return m.d.Find(ctx, q) })
}

func (m metered) Apply(ctx context.Context, a Action) (*LoadBalancer, error) {
	return meterWrite(ctx, "Apply", func(ctx context.Context) (*LoadBalancer, error) { return m.d.Apply(ctx, a) })
}

func (m metered) Delete(ctx context.Context, lb *LoadBalancer) error {
	_, err := meterWrite(ctx, "Delete", func(ctx context.Context) (struct{}, error) { return struct{}{}, m.d.Delete(ctx, lb) })
	return err
}

func (m metered) List(ctx context.Context) ([]*LoadBalancer, error) {
	return cloudmetrics.Metered(ctx, capability, "List", func(ctx context.Context) ([]*LoadBalancer, error) { return m.d.(ListDriver).List(ctx) })
}

func (m metered) FindPools(ctx context.Context, q PoolQuery) ([]*Pool, error) {
	return cloudmetrics.Metered(ctx, capability, "FindPools", func(ctx context.Context) ([]*Pool, error) { return m.d.(PoolDriver).FindPools(ctx, q) })
}

func (m metered) ApplyPool(ctx context.Context, a PoolAction) (*Pool, error) {
	return cloudmetrics.Metered(ctx, capability, "ApplyPool", func(ctx context.Context) (*Pool, error) { return m.d.(PoolDriver).ApplyPool(ctx, a) })
}

func (m metered) DeletePool(ctx context.Context, p *Pool) error {
	return cloudmetrics.Meter(ctx, capability, "DeletePool", func(ctx context.Context) error { return m.d.(PoolDriver).DeletePool(ctx, p) })
}

func (m metered) ListPools(ctx context.Context) ([]*Pool, error) {
	return cloudmetrics.Metered(ctx, capability, "ListPools", func(ctx context.Context) ([]*Pool, error) { return m.d.(PoolListDriver).ListPools(ctx) })
}
