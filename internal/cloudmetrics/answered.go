package cloudmetrics

import (
	"context"
	"sync/atomic"
	"time"
)

// A cache in front of a Driver (instances.Cache, loadbalancer.Cache)
// records the cloud calls it makes itself, and answers many look-ups with
// none. The block above it (an instances.Adapter, a loadbalancer.Reconciler)
// meters every Driver call it makes, not knowing whether a cache is below:
// Meter gives each such call a context carrying an "answered" flag, and a
// cache that receives the call sets it (MarkAnswered), so the call is not
// recorded twice, nor recorded at all when the cache answered it from its
// list. The flag passes through any Driver that forwards its context, such
// as a provider's wrapper in front of its cache.

// answeredKey is the context key of the *atomic.Bool of the innermost
// metered call.
type answeredKey struct{}

// answeredCtx is the context of one metered call: its parent, with the
// flag under answeredKey (one allocation per call instead of a flag and a
// context.WithValue).
type answeredCtx struct {
	context.Context
	answered atomic.Bool
}

func (c *answeredCtx) Value(key any) any {
	if key == (answeredKey{}) {
		return &c.answered
	}
	return c.Context.Value(key)
}

// MarkAnswered tells the innermost metered call ctx belongs to (Meter), if
// any, that a cache received it: the cache records the cloud calls it makes
// for it, so Meter must not. It does nothing for a ctx that no Meter made.
// A cache calls it at the start of every method it records itself. Safe
// for concurrent use.
func MarkAnswered(ctx context.Context) {
	if flag, ok := ctx.Value(answeredKey{}).(*atomic.Bool); ok {
		flag.Store(true)
	}
}

// Meter runs f, one call of capability's Driver method operation, with a
// context derived from ctx in which a cache can say it received the call
// (MarkAnswered), and records the call as Call does, with its duration
// and ResultOf(its error, notFound...), unless a cache did. f must make
// its call with the context it is given. Meter returns f's error
// unchanged. A call it records is also counted in the Tally of ctx, if
// any (StartTally). Safe for concurrent use; calls may nest (a cache meters the
// calls it makes to the Driver it wraps with Meter too), and each
// MarkAnswered marks the innermost.
func Meter(ctx context.Context, capability, operation string, f func(ctx context.Context) error, notFound ...error) error {
	c := &answeredCtx{Context: ctx}
	start := time.Now()
	err := f(c)
	if !c.answered.Load() {
		Observe(capability, operation, time.Since(start), ResultOf(err, notFound...))
		count(ctx, operation)
	}
	return err
}
