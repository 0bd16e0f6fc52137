package governor

import (
	"context"

	"github.com/ccmkit/ccmkit/instances"
	"github.com/ccmkit/ccmkit/provider"
)

// Instances returns d governed by g, every call an urgent read (see the
// package doc, Wrappers): each reaches d only when g admits it; its
// results and errors are d's, unchanged, and a refused call returns g's
// refusal (ErrOverBudget, an *api.RetryError) without calling d. It
// returns nil for a nil d (a typed nil included), so that the constructor
// it is given to reports it, and d itself for a nil g. The result is safe
// for concurrent use if d is. For a d that can list, use InstanceList.
func (g *Governor) Instances(d instances.Driver) instances.Driver {
	return wrap(g, d, func() instances.Driver { return instanceDriver{g, d} })
}

// InstanceList is Instances for a ListDriver, whose List is governed like
// the look-ups; the result is an instances.ListDriver, to give to
// instances.NewCache (see the package doc for the Cache's ErrorTTL).
func (g *Governor) InstanceList(d instances.ListDriver) instances.ListDriver {
	return wrap(g, d, func() instances.ListDriver { return instanceList{instanceDriver{g, d}, d} })
}

// instanceDriver is an instances.Driver governed by g.
type instanceDriver struct {
	g *Governor
	d instances.Driver
}

var _ instances.ListDriver = instanceList{}

func (w instanceDriver) GetByID(ctx context.Context, id provider.ProviderID) (instances.Instance, error) {
	return govern(ctx, w.g, instanceRead, func() (instances.Instance, error) { return w.d.GetByID(ctx, id) })
}

func (w instanceDriver) GetByName(ctx context.Context, name string) (instances.Instance, error) {
	return govern(ctx, w.g, instanceRead, func() (instances.Instance, error) { return w.d.GetByName(ctx, name) })
}

// instanceList is an instances.ListDriver governed by g.
type instanceList struct {
	instanceDriver
	list instances.ListDriver
}

func (w instanceList) List(ctx context.Context) ([]instances.Instance, error) {
	return govern(ctx, w.g, instanceRead, func() ([]instances.Instance, error) { return w.list.List(ctx) })
}
