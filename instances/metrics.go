package instances

import (
	"context"

	"github.com/ccmkit/ccmkit/internal/cloudmetrics"
	"github.com/ccmkit/ccmkit/provider"
)

// capability and cacheName label what this package records through
// internal/cloudmetrics (see the package doc, Metrics).
const (
	capability = "instances"
	cacheName  = "instances"
)

// meter runs f, one call of operation on a Driver, through
// cloudmetrics.Meter: recorded unless a Cache below received it (a Cache
// records its own calls; see cloudmetrics.MarkAnswered).
func meter(ctx context.Context, operation string, f func(ctx context.Context) error) error {
	return cloudmetrics.Meter(ctx, capability, operation, f, ErrNotFound)
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
