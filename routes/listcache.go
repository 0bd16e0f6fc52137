package routes

import (
	"context"
	"slices"
	"sync"
	"time"

	cloudprovider "k8s.io/cloud-provider"

	"github.com/ccmkit/ccmkit/internal/listcache"
)

// listCache remembers ListRoutes answers, per cluster identity, for
// Options.ListTTL, each in an internal/listcache.List. gen counts the
// Table's driver writes: it is invalidated before and after each, and an
// answer is remembered and served only while no write began or ended
// since its read started, so no answer read before or during a write of
// the Table is served after it. Safe for concurrent use.
type listCache struct {
	ttl time.Duration // 0: nothing is remembered
	now func() time.Time
	gen listcache.Generation // shared by the Lists of listed

	mu     sync.Mutex
	listed map[string]*listcache.List[[]*cloudprovider.Route] // by cluster
}

// get returns a copy of the answer for cluster if one is fresh.
func (c *listCache) get(cluster string) ([]*cloudprovider.Route, bool) {
	if c.ttl <= 0 {
		return nil, false
	}
	c.mu.Lock()
	l := c.listed[cluster]
	c.mu.Unlock()
	if l == nil {
		return nil, false
	}
	routes, ok := l.Fresh()
	if !ok {
		return nil, false
	}
	return cloneRoutes(routes), true
}

// begin returns what put needs of a read that starts now.
func (c *listCache) begin() listcache.Stamp { return c.gen.Stamp(c.now()) }

// put remembers a copy of routes, the answer of the read begun at s, unless
// the Table wrote since it began.
func (c *listCache) put(cluster string, s listcache.Stamp, routes []*cloudprovider.Route) {
	if c.ttl <= 0 {
		return
	}
	c.mu.Lock()
	l := c.listed[cluster]
	if l == nil {
		if c.listed == nil {
			c.listed = map[string]*listcache.List[[]*cloudprovider.Route]{}
		}
		l = listcache.New[[]*cloudprovider.Route](listcache.Options{TTL: c.ttl, Clock: nowFunc(c.now), Generation: &c.gen})
		c.listed[cluster] = l
	}
	c.mu.Unlock()
	l.Put(s, cloneRoutes(routes))
}

// drop forgets every remembered answer.
func (c *listCache) drop() { c.gen.Invalidate() }

// writing runs one driver write, invalidating gen before and after it.
func (c *listCache) writing(write func() error) error {
	c.gen.Invalidate()
	defer c.gen.Invalidate()
	return write()
}

// nowFunc is a Table's clock reading as the clock.PassiveClock of its
// Lists.
type nowFunc func() time.Time

func (f nowFunc) Now() time.Time                  { return f() }
func (f nowFunc) Since(t time.Time) time.Duration { return f().Sub(t) }

func cloneRoutes(rs []*cloudprovider.Route) []*cloudprovider.Route {
	out := make([]*cloudprovider.Route, len(rs))
	for i, r := range rs {
		cp := *r
		cp.TargetNodeAddresses = slices.Clone(r.TargetNodeAddresses)
		out[i] = &cp
	}
	return out
}

// listedTable is the TableDriver a Table with a ListTTL calls: its writes
// drop the remembered ListRoutes answers.
type listedTable struct {
	TableDriver
	lists *listCache
}

func (t listedTable) WriteTable(ctx context.Context, revision string, entries []Entry) error {
	return t.lists.writing(func() error { return t.TableDriver.WriteTable(ctx, revision, entries) })
}

// listedRoutes is the RouteDriver a Table with a ListTTL calls: its writes
// drop the remembered ListRoutes answers.
type listedRoutes struct {
	RouteDriver
	lists *listCache
}

func (r listedRoutes) CreateRoute(ctx context.Context, e Entry) error {
	return r.lists.writing(func() error { return r.RouteDriver.CreateRoute(ctx, e) })
}

func (r listedRoutes) DeleteRoute(ctx context.Context, e Entry) error {
	return r.lists.writing(func() error { return r.RouteDriver.DeleteRoute(ctx, e) })
}
