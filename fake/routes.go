package fake

import (
	"context"
	"fmt"
	"strconv"

	"k8s.io/apimachinery/pkg/types"

	"github.com/ccmkit/ccmkit/instances"
	"github.com/ccmkit/ccmkit/routes"
)

// routeDriver is the fake's routes.TableDriver: one route table for the
// whole cloud, read and replaced as a whole, with a revision that makes a
// write based on a stale read fail with routes.ErrConflict.
type routeDriver struct{ s *store }

var _ routes.TableDriver = routeDriver{}

// ReadTable returns the table and its revision. Stored entries are never
// modified (WriteTable replaces them), so the copy shares their address
// slices.
func (d routeDriver) ReadTable(ctx context.Context) (entries []routes.Entry, rev string, err error) {
	err = d.s.readCtx(ctx, func() error {
		entries, rev = append([]routes.Entry(nil), d.s.routes...), strconv.FormatUint(d.s.routeRev, 10)
		return nil
	})
	if err != nil {
		return nil, "", err
	}
	return entries, rev, nil
}

// WriteTable replaces the table if it is still at revision.
func (d routeDriver) WriteTable(ctx context.Context, revision string, entries []routes.Entry) error {
	return d.s.writeCtx(ctx, func() (bool, error) {
		if cur := strconv.FormatUint(d.s.routeRev, 10); revision != cur {
			return false, fmt.Errorf("fake: route table is at revision %s, the write is based on %q: %w", cur, revision, routes.ErrConflict)
		}
		d.s.routes = entries
		d.s.routeRev++
		return true, nil
	})
}

// goneTargets is the routes.InstanceChecker of the fake's route table: a
// target is gone when no instance of that name is left, or only terminated
// ones. It lists the instances with one call of the instrumented API, so the
// answer is never staler than the call.
type goneTargets struct{ api instanceAPI }

func (g goneTargets) GoneTargets(ctx context.Context, nodes []types.NodeName) ([]types.NodeName, error) {
	list, err := g.api.List(ctx)
	if err != nil {
		return nil, err
	}
	live := map[string]bool{}
	for _, in := range list {
		if in.State != instances.StateTerminated {
			live[in.Name] = true
		}
	}
	var gone []types.NodeName
	for _, n := range nodes {
		if !live[string(n)] {
			gone = append(gone, n)
		}
	}
	return gone, nil
}

// addRoute stores e as is (control surface: seeding routes the Table did
// not create, such as routes of no cluster).
func (s *store) addRoute(e routes.Entry) error {
	return s.write(func() (bool, error) {
		s.routes = append(append([]routes.Entry(nil), s.routes...), e)
		s.routeRev++
		return true, nil
	})
}
