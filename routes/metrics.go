package routes

import (
	"context"

	"k8s.io/apimachinery/pkg/types"

	"github.com/ccmkit/ccmkit/internal/cloudmetrics"
)

// capability is the capability label of every cloud call the Table
// records through internal/cloudmetrics (see the package doc, Metrics).
const capability = "routes"

// meteredRoutes is the RouteDriver the Table calls: d, with each call
// recorded under its method's name, ErrNotFound read as not-found, through
// cloudmetrics.Meter, so a call a layer below answered without the cloud
// (a governor's refusal, wrapping cloudmetrics.ErrNotCalled) is not
// recorded.
type meteredRoutes struct{ d RouteDriver }

func (m meteredRoutes) ListRoutes(ctx context.Context, cluster string) (entries []Entry, err error) {
	err = cloudmetrics.Meter(ctx, capability, "ListRoutes", func(ctx context.Context) error {
		entries, err = m.d.ListRoutes(ctx, cluster)
		return err
	}, ErrNotFound)
	return entries, err
}

func (m meteredRoutes) CreateRoute(ctx context.Context, e Entry) error {
	return cloudmetrics.Meter(ctx, capability, "CreateRoute", func(ctx context.Context) error { return m.d.CreateRoute(ctx, e) }, ErrNotFound)
}

func (m meteredRoutes) DeleteRoute(ctx context.Context, e Entry) error {
	return cloudmetrics.Meter(ctx, capability, "DeleteRoute", func(ctx context.Context) error { return m.d.DeleteRoute(ctx, e) }, ErrNotFound)
}

// meteredTable is the TableDriver the Table calls: d, with each call
// recorded under its method's name, as meteredRoutes does.
type meteredTable struct{ d TableDriver }

func (m meteredTable) ReadTable(ctx context.Context) (entries []Entry, revision string, err error) {
	err = cloudmetrics.Meter(ctx, capability, "ReadTable", func(ctx context.Context) error {
		entries, revision, err = m.d.ReadTable(ctx)
		return err
	}, ErrNotFound)
	return entries, revision, err
}

func (m meteredTable) WriteTable(ctx context.Context, revision string, entries []Entry) error {
	return cloudmetrics.Meter(ctx, capability, "WriteTable", func(ctx context.Context) error { return m.d.WriteTable(ctx, revision, entries) }, ErrNotFound)
}

// meteredChecker is the InstanceChecker the Table calls: c, with each
// call recorded as operation "GoneTargets" (a cloud call of the
// provider's, made on the route controller's behalf).
type meteredChecker struct{ c InstanceChecker }

func (m meteredChecker) GoneTargets(ctx context.Context, nodes []types.NodeName) (gone []types.NodeName, err error) {
	err = cloudmetrics.Meter(ctx, capability, "GoneTargets", func(ctx context.Context) error {
		gone, err = m.c.GoneTargets(ctx, nodes)
		return err
	})
	return gone, err
}
