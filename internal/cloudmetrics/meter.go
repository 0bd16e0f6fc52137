package cloudmetrics

import (
	"context"
	"errors"
	"time"
)

// Where a call is metered: once, at the innermost layer ccmkit controls,
// where a block hands the call to a Driver that is not one of ccmkit's
// own caches. A cache (instances.Cache, loadbalancer.Cache) meters the
// calls it makes to the Driver it wraps; the block above it (an
// instances.Adapter, a loadbalancer.Reconciler) meters the calls it makes
// to its Driver unless that Driver is a cache (it embeds SelfMetered), so
// no call is recorded twice and a look-up a cache answers from its list is
// not recorded at all. A layer that answers a call without the cloud (the
// governor's refusal) says so in its error (ErrNotCalled), not in the
// context.

// ErrNotCalled is wrapped by the error of a call that a layer below the
// meter answered without calling the cloud: the governor's refusal of a
// call over its budget. Meter does not record such a call (the governor
// counts its refusals in metrics of its own).
var ErrNotCalled = errors.New("answered without a cloud call")

// SelfMetered marks a Driver of ccmkit's that embeds it as recording
// the cloud calls made on its behalf itself (a cache: the calls it makes
// to the Driver it wraps), so that the block it is given to does not
// meter it again (MetersItself). A struct that embeds such a Driver (a
// provider's wrapper embedding a *loadbalancer.Cache) is marked too. It is
// a zero-size value with no behaviour.
type SelfMetered struct{}

func (SelfMetered) metersItself() {}

// MetersItself reports whether d records its own cloud calls (it embeds
// SelfMetered): a block calling d must not meter the calls it makes to d.
func MetersItself(d any) bool {
	_, ok := d.(interface{ metersItself() })
	return ok
}

// Meter runs f, one call of capability's Driver method operation, with
// ctx, and records it as Call does, with its duration and ResultOf(its
// error, notFound...), unless its error wraps ErrNotCalled (no cloud call
// was made). It returns f's error unchanged. A call it records is also
// counted in the Tally of ctx, if any (StartTally). Safe for concurrent
// use.
func Meter(ctx context.Context, capability, operation string, f func(ctx context.Context) error, notFound ...error) error {
	start := time.Now()
	err := f(ctx)
	if err != nil && errors.Is(err, ErrNotCalled) {
		return err
	}
	Observe(capability, operation, time.Since(start), ResultOf(err, notFound...))
	count(ctx, operation)
	return err
}

// Metered is Meter for a Driver method that returns a value with its
// error: the one metering step every block's metered Driver goes through.
func Metered[T any](ctx context.Context, capability, operation string, f func(ctx context.Context) (T, error), notFound ...error) (T, error) {
	var v T
	err := Meter(ctx, capability, operation, func(ctx context.Context) (err error) {
		v, err = f(ctx)
		return err
	}, notFound...)
	return v, err
}
