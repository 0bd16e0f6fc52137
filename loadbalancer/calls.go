package loadbalancer

import (
	"context"

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
