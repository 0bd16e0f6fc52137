package governor

import (
	"context"

	"github.com/ccmkit/ccmkit/routes"
)

// Routes returns d governed by g: ListRoutes an urgent read, CreateRoute
// and DeleteRoute normal writes (see the package doc, Wrappers). Each call
// reaches d only when g admits it; its results and errors are d's,
// unchanged, and a refused call returns g's refusal (ErrOverBudget, an
// *api.RetryError) without calling d. It returns nil for a nil d (a typed
// nil included), so that routes.NewTable reports it, and d itself for a
// nil g. The result is safe for concurrent use if d is.
func (g *Governor) Routes(d routes.RouteDriver) routes.RouteDriver {
	return wrap(g, d, func() routes.RouteDriver { return routeDriver{g, d} })
}

// RouteTable returns d governed by g: ReadTable an urgent read, WriteTable
// a normal write; otherwise as Routes, for routes.NewWholeTable.
func (g *Governor) RouteTable(d routes.TableDriver) routes.TableDriver {
	return wrap(g, d, func() routes.TableDriver { return tableDriver{g, d} })
}

var (
	_ routes.RouteDriver = routeDriver{}
	_ routes.TableDriver = tableDriver{}
)

// routeDriver is a routes.RouteDriver governed by g.
type routeDriver struct {
	g *Governor
	d routes.RouteDriver
}

func (w routeDriver) ListRoutes(ctx context.Context, cluster string) ([]routes.Entry, error) {
	return govern(ctx, w.g, routeRead, func() ([]routes.Entry, error) { return w.d.ListRoutes(ctx, cluster) })
}

func (w routeDriver) CreateRoute(ctx context.Context, e routes.Entry) error {
	_, err := govern(ctx, w.g, routeWrite, func() (struct{}, error) { return struct{}{}, w.d.CreateRoute(ctx, e) })
	return err
}

func (w routeDriver) DeleteRoute(ctx context.Context, e routes.Entry) error {
	_, err := govern(ctx, w.g, routeWrite, func() (struct{}, error) { return struct{}{}, w.d.DeleteRoute(ctx, e) })
	return err
}

// tableDriver is a routes.TableDriver governed by g.
type tableDriver struct {
	g *Governor
	d routes.TableDriver
}

// table is what ReadTable returns besides its error.
type table struct {
	entries  []routes.Entry
	revision string
}

func (w tableDriver) ReadTable(ctx context.Context) ([]routes.Entry, string, error) {
	t, err := govern(ctx, w.g, routeRead, func() (table, error) {
		entries, revision, err := w.d.ReadTable(ctx)
		return table{entries, revision}, err
	})
	return t.entries, t.revision, err
}

func (w tableDriver) WriteTable(ctx context.Context, revision string, entries []routes.Entry) error {
	_, err := govern(ctx, w.g, routeWrite, func() (struct{}, error) { return struct{}{}, w.d.WriteTable(ctx, revision, entries) })
	return err
}
