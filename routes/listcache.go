package routes

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	cloudprovider "k8s.io/cloud-provider"
)

// listCache remembers ListRoutes answers, per cluster identity, for
// Options.ListTTL. gen counts the Table's driver writes: it is bumped
// before and after each, and an answer is remembered and served only while
// gen is what it was when its read started, so no answer read before or
// during a write of the Table is served after it. Safe for concurrent use.
type listCache struct {
	ttl time.Duration // 0: nothing is remembered
	now func() time.Time
	gen atomic.Uint64

	mu     sync.Mutex
	listed map[string]listed
}

// listed is one remembered answer.
type listed struct {
	at     time.Time // when its read started
	gen    uint64
	routes []*cloudprovider.Route
}

// get returns a copy of the answer for cluster if one is fresh.
func (c *listCache) get(cluster string) ([]*cloudprovider.Route, bool) {
	if c.ttl <= 0 {
		return nil, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	l, ok := c.listed[cluster]
	if !ok || l.gen != c.gen.Load() || c.now().Sub(l.at) >= c.ttl {
		return nil, false
	}
	return cloneRoutes(l.routes), true
}

// begin returns what put needs of a read that starts now.
func (c *listCache) begin() listed { return listed{at: c.now(), gen: c.gen.Load()} }

// put remembers a copy of routes, the answer of the read begun as l, unless
// the Table wrote since it began.
func (c *listCache) put(cluster string, l listed, routes []*cloudprovider.Route) {
	if c.ttl <= 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if l.gen != c.gen.Load() {
		return
	}
	if c.listed == nil {
		c.listed = map[string]listed{}
	}
	l.routes = cloneRoutes(routes)
	c.listed[cluster] = l
}

// drop forgets every remembered answer.
func (c *listCache) drop() { c.gen.Add(1) }

// writing runs one driver write, bumping gen before and after it.
func (c *listCache) writing(write func() error) error {
	c.gen.Add(1)
	defer c.gen.Add(1)
	return write()
}

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
