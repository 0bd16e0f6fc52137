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

// selfMetered marks the Cache as recording its own cloud calls, so that
// an Adapter over it (or over a provider's Driver embedding it) does not
// meter them again (meteredDriver). The alias keeps the embedded field
// unexported.
type selfMetered = cloudmetrics.SelfMetered //nolint:unused // embedded in Cache as a marker, found by cloudmetrics.MetersItself through its promoted method

// meteredDriver returns the Driver an Adapter calls for d: d itself when
// it records its own calls (a Cache, see selfMetered), else d metered.
func meteredDriver(d Driver) Driver {
	if cloudmetrics.MetersItself(d) {
		return d
	}
	return metered{d}
}

// metered is d with each cloud call recorded under its method's name
// through cloudmetrics.Metered, ErrNotFound read as not-found: the
// Driver an Adapter calls (over a Driver that is no Cache) and, with
// List, the ListDriver a Cache calls.
type metered struct{ d Driver }

func (m metered) GetByID(ctx context.Context, id provider.ProviderID) (Instance, error) {
	return cloudmetrics.Metered(ctx, capability, "GetByID", func(ctx context.Context) (Instance, error) { return m.d.GetByID(ctx, id) }, ErrNotFound)
}

func (m metered) GetByName(ctx context.Context, name string) (Instance, error) {
	return cloudmetrics.Metered(ctx, capability, "GetByName", func(ctx context.Context) (Instance, error) { return m.d.GetByName(ctx, name) }, ErrNotFound)
}

// List is called only when d is a ListDriver (a Cache's).
func (m metered) List(ctx context.Context) ([]Instance, error) {
	return cloudmetrics.Metered(ctx, capability, "List", func(ctx context.Context) ([]Instance, error) { return m.d.(ListDriver).List(ctx) }, ErrNotFound)
}
