package instances

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/ccmkit/ccmkit/internal/cloudmetrics"
	"github.com/ccmkit/ccmkit/provider"
)

// capability and cacheName label what this package records through
// internal/cloudmetrics (see the package doc, Metrics).
const (
	capability = "instances"
	cacheName  = "instances"
)

// answeredKey is the context key of the *atomic.Bool that a Cache sets
// when it answers a look-up: the Cache records its own cloud calls, so the
// metered Driver above it (an Adapter's, or another Cache's) must not
// record the look-up as one. It passes through any Driver that forwards
// its ctx, such as a provider's wrapper in front of its Cache.
type answeredKey struct{}

// answeredCtx is the ctx of one metered call: its parent, with the flag
// under answeredKey (one allocation per call instead of a flag and a
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

// markAnswered tells the metered Driver that made this call, if any, that
// a Cache answered it.
func markAnswered(ctx context.Context) {
	if flag, ok := ctx.Value(answeredKey{}).(*atomic.Bool); ok {
		flag.Store(true)
	}
}

// meter runs f, one call of operation on a Driver, with a ctx in which a
// Cache can say it answered, and records the call unless one did.
func meter(ctx context.Context, operation string, f func(ctx context.Context) error) error {
	c := &answeredCtx{Context: ctx}
	start := time.Now()
	err := f(c)
	if !c.answered.Load() {
		cloudmetrics.Observe(capability, operation, time.Since(start), cloudmetrics.ResultOf(err, ErrNotFound))
	}
	return err
}

// metered is the Driver an Adapter calls: d, with each cloud call
// recorded under its method's name.
type metered struct{ d Driver }

func (m metered) GetByID(ctx context.Context, id provider.ProviderID) (inst Instance, err error) {
	err = meter(ctx, "GetByID", func(ctx context.Context) error {
		inst, err = m.d.GetByID(ctx, id)
		return err
	})
	return inst, err
}

func (m metered) GetByName(ctx context.Context, name string) (inst Instance, err error) {
	err = meter(ctx, "GetByName", func(ctx context.Context) error {
		inst, err = m.d.GetByName(ctx, name)
		return err
	})
	return inst, err
}

// meteredList is the ListDriver a Cache calls: d, with each cloud call
// recorded under its method's name.
type meteredList struct {
	metered
	l ListDriver
}

func newMeteredList(d ListDriver) meteredList { return meteredList{metered{d}, d} }

func (m meteredList) List(ctx context.Context) (items []Instance, err error) {
	err = meter(ctx, "List", func(ctx context.Context) error {
		items, err = m.l.List(ctx)
		return err
	})
	return items, err
}
