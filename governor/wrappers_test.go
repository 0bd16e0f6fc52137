package governor_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/ccmkit/ccmkit/governor"
	"github.com/ccmkit/ccmkit/internal/cloudmetrics"
	"github.com/ccmkit/ccmkit/loadbalancer"
	"github.com/ccmkit/ccmkit/provider"
	"github.com/ccmkit/ccmkit/routes"
)

// method is one governed Driver method: its name as the cloud records it,
// its class and priority as the package doc states them, and a call of it
// through the wrappers of g over c, returning what the Driver method
// returned besides its error.
type method struct {
	name     string
	class    governor.Class
	priority governor.Priority
	call     func(ctx context.Context, g *governor.Governor, c *cloud) (any, error)
}

// results are what a call through a wrapper returned, for comparing with
// the cloud's own answer by identity.
type results struct {
	lb       *loadbalancer.LoadBalancer
	pool     *loadbalancer.Pool
	first    any    // the address of the first element of a returned slice
	instance string // the ID of a returned Instance
	revision string
}

func firstOf[T any](s []T) any {
	if len(s) == 0 {
		return nil
	}
	return &s[0]
}

var methods = []method{
	{name: "Find", class: governor.Reads, priority: governor.Normal, call: func(ctx context.Context, g *governor.Governor, c *cloud) (any, error) {
		lbs, err := g.LoadBalancer(lbAPI{c}).Find(ctx, loadbalancer.Query{Name: "a"})
		return results{first: firstOf(lbs)}, err
	}},
	{name: "List", class: governor.Reads, priority: governor.Normal, call: func(ctx context.Context, g *governor.Governor, c *cloud) (any, error) {
		lbs, err := g.LoadBalancerList(lbAPI{c}).List(ctx)
		return results{first: firstOf(lbs)}, err
	}},
	{name: "Apply CreateLoadBalancer", class: governor.Writes, priority: governor.Urgent, call: apply(loadbalancer.ActionCreate)},
	{name: "Apply UpdateListener", class: governor.Writes, priority: governor.Normal, call: apply(loadbalancer.ActionUpdateListener)},
	{name: "Apply AddBackends", class: governor.Writes, priority: governor.Background, call: apply(loadbalancer.ActionAddBackends)},
	{name: "Apply RemoveBackends", class: governor.Writes, priority: governor.Background, call: apply(loadbalancer.ActionRemoveBackends)},
	{name: "Delete", class: governor.Writes, priority: governor.Urgent, call: func(ctx context.Context, g *governor.Governor, c *cloud) (any, error) {
		return results{}, g.LoadBalancerList(lbAPI{c}).Delete(ctx, c.lb)
	}},
	{name: "FindPools", class: governor.Reads, priority: governor.Normal, call: func(ctx context.Context, g *governor.Governor, c *cloud) (any, error) {
		pools, err := g.LoadBalancerPools(lbAPI{c}).FindPools(ctx, loadbalancer.PoolQuery{ID: "pool-1"})
		return results{first: firstOf(pools)}, err
	}},
	{name: "ListPools", class: governor.Reads, priority: governor.Normal, call: func(ctx context.Context, g *governor.Governor, c *cloud) (any, error) {
		pools, err := g.LoadBalancerPools(lbAPI{c}).ListPools(ctx)
		return results{first: firstOf(pools)}, err
	}},
	{name: "ApplyPool CreatePool", class: governor.Writes, priority: governor.Urgent, call: applyPool(loadbalancer.PoolActionCreate)},
	{name: "ApplyPool AddPoolBackends", class: governor.Writes, priority: governor.Background, call: applyPool(loadbalancer.PoolActionAddBackends)},
	{name: "ApplyPool RemovePoolBackends", class: governor.Writes, priority: governor.Background, call: applyPool(loadbalancer.PoolActionRemoveBackends)},
	{name: "DeletePool", class: governor.Writes, priority: governor.Urgent, call: func(ctx context.Context, g *governor.Governor, c *cloud) (any, error) {
		return results{}, g.LoadBalancerPools(lbAPI{c}).DeletePool(ctx, c.pool)
	}},
	{name: "GetByID", class: governor.Reads, priority: governor.Urgent, call: func(ctx context.Context, g *governor.Governor, c *cloud) (any, error) {
		in, err := g.Instances(instanceAPI{c}).GetByID(ctx, provider.ProviderID{ID: "i-1"})
		return results{instance: in.ID}, err
	}},
	{name: "GetByName", class: governor.Reads, priority: governor.Urgent, call: func(ctx context.Context, g *governor.Governor, c *cloud) (any, error) {
		in, err := g.InstanceList(instanceAPI{c}).GetByName(ctx, "node-1")
		return results{instance: in.ID}, err
	}},
	{name: "List", class: governor.Reads, priority: governor.Urgent, call: func(ctx context.Context, g *governor.Governor, c *cloud) (any, error) {
		list, err := g.InstanceList(instanceAPI{c}).List(ctx)
		return results{first: firstOf(list)}, err
	}},
	{name: "ListRoutes", class: governor.Reads, priority: governor.Urgent, call: func(ctx context.Context, g *governor.Governor, c *cloud) (any, error) {
		entries, err := g.Routes(routeAPI{c}).ListRoutes(ctx, "c")
		return results{first: firstOf(entries)}, err
	}},
	{name: "CreateRoute", class: governor.Writes, priority: governor.Normal, call: func(ctx context.Context, g *governor.Governor, c *cloud) (any, error) {
		return results{}, g.Routes(routeAPI{c}).CreateRoute(ctx, c.entries[0])
	}},
	{name: "DeleteRoute", class: governor.Writes, priority: governor.Normal, call: func(ctx context.Context, g *governor.Governor, c *cloud) (any, error) {
		return results{}, g.Routes(routeAPI{c}).DeleteRoute(ctx, c.entries[0])
	}},
	{name: "ReadTable", class: governor.Reads, priority: governor.Urgent, call: func(ctx context.Context, g *governor.Governor, c *cloud) (any, error) {
		entries, revision, err := g.RouteTable(tableAPI{c}).ReadTable(ctx)
		return results{first: firstOf(entries), revision: revision}, err
	}},
	{name: "WriteTable", class: governor.Writes, priority: governor.Normal, call: func(ctx context.Context, g *governor.Governor, c *cloud) (any, error) {
		return results{}, g.RouteTable(tableAPI{c}).WriteTable(ctx, "rev-7", c.entries)
	}},
}

func apply(k loadbalancer.ActionKind) func(ctx context.Context, g *governor.Governor, c *cloud) (any, error) {
	return func(ctx context.Context, g *governor.Governor, c *cloud) (any, error) {
		lb, err := g.LoadBalancer(lbAPI{c}).Apply(ctx, loadbalancer.Action{Kind: k, LoadBalancerID: "lb-1"})
		return results{lb: lb}, err
	}
}

func applyPool(k loadbalancer.PoolActionKind) func(ctx context.Context, g *governor.Governor, c *cloud) (any, error) {
	return func(ctx context.Context, g *governor.Governor, c *cloud) (any, error) {
		p, err := g.LoadBalancerPools(lbAPI{c}).ApplyPool(ctx, loadbalancer.PoolAction{Kind: k, PoolID: "pool-1"})
		return results{pool: p}, err
	}
}

// want returns what m returns when the cloud answers it: c's values.
func (m method) want(c *cloud) results {
	switch m.name {
	case "Find":
		return results{first: &c.lbs[0]}
	case "List":
		if m.priority == governor.Urgent {
			return results{first: &c.list[0]}
		}
		return results{first: &c.lbs[0]}
	case "GetByID", "GetByName":
		return results{instance: c.instance.ID}
	case "ListRoutes":
		return results{first: &c.entries[0]}
	case "ReadTable":
		return results{first: &c.entries[0], revision: c.revision}
	case "FindPools", "ListPools":
		return results{first: &c.pools[0]}
	case "ApplyPool CreatePool", "ApplyPool AddPoolBackends", "ApplyPool RemovePoolBackends":
		return results{pool: c.pool}
	case "Delete", "DeletePool", "CreateRoute", "DeleteRoute", "WriteTable":
		return results{}
	}
	return results{lb: c.lb} // Apply
}

// TestWrappersPassThrough: an admitted call reaches the Driver once and
// returns its results and its error, unchanged.
func TestWrappersPassThrough(t *testing.T) {
	cloudErr := errors.New("cloud: 500")
	for _, m := range methods {
		t.Run(m.name+"/"+m.priority.String(), func(t *testing.T) {
			c := newCloud()
			g := newGovernor(t, newClock(), governor.Options{})
			got, err := m.call(t.Context(), g, c)
			if err != nil {
				t.Fatalf("%s = %v, want the cloud's nil", m.name, err)
			}
			if got != m.want(c) {
				t.Errorf("%s returned %+v, want the cloud's own results %+v", m.name, got, m.want(c))
			}
			c.setErr(cloudErr)
			_, err = m.call(t.Context(), g, c)
			if err != cloudErr { //nolint:errorlint // the wrapper must return the cloud's error itself, unwrapped
				t.Errorf("%s = %v, want the cloud's error itself", m.name, err)
			}
			assertCalls(t, c, []string{m.name, m.name})
		})
	}
}

// TestWrappersRefuse: a call its class cannot pay for does not reach the
// Driver, and returns at once a refusal saying when to come back.
func TestWrappersRefuse(t *testing.T) {
	for _, m := range methods {
		t.Run(m.name+"/"+m.priority.String(), func(t *testing.T) {
			c := newCloud()
			g := newGovernor(t, newClock(), governor.Options{Reads: governor.Limit{Rate: 5, Burst: 1}, Writes: governor.Limit{Rate: 2, Burst: 1}})
			spend(t, g, m.class)
			got, err := m.call(t.Context(), g, c)
			if !errors.Is(err, governor.ErrOverBudget) {
				t.Fatalf("%s on a spent budget = %v, want a refusal", m.name, err)
			}
			wait := map[governor.Class]time.Duration{governor.Reads: 200 * time.Millisecond, governor.Writes: 500 * time.Millisecond}[m.class]
			if d, _ := retryAfter(err); d != wait {
				t.Errorf("%s refusal RetryAfter = %v, want %v: one token of %v", m.name, d, wait, m.class)
			}
			if got != (results{}) {
				t.Errorf("%s refused returned %+v, want zero values", m.name, got)
			}
			assertCalls(t, c, nil)
		})
	}
}

// TestWrapperKinds checks each method's class and priority through what
// its wrapper is admitted to: a bucket of 4 tokens with reserves of 1 and
// 2 admits a background call only with 3 or more tokens left, a normal one
// with 2 or more, an urgent one with 1 or more.
func TestWrapperKinds(t *testing.T) {
	limit := governor.Limit{Rate: 1, Burst: 4, NormalReserve: 1, BackgroundReserve: 2}
	for _, m := range methods {
		t.Run(m.name+"/"+m.priority.String(), func(t *testing.T) {
			got := map[int]bool{} // tokens left before the call: admitted?
			for tokens := 0; tokens <= 4; tokens++ {
				g := newGovernor(t, newClock(), governor.Options{Reads: limit, Writes: limit})
				if n, _ := admitted(g, m.class, governor.Urgent, 4-tokens); n != 4-tokens {
					t.Fatalf("could not take %d tokens", 4-tokens)
				}
				_, err := m.call(t.Context(), g, newCloud())
				got[tokens] = err == nil
				if other, _ := admitted(g, 1-m.class, governor.Urgent, 4); other != 4 {
					t.Errorf("%s took a token of %v", m.name, 1-m.class)
				}
			}
			min := map[governor.Priority]int{governor.Urgent: 1, governor.Normal: 2, governor.Background: 3}[m.priority]
			want := map[int]bool{}
			for tokens := 0; tokens <= 4; tokens++ {
				want[tokens] = tokens >= min
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("%s admitted by tokens left (-want +got):\n%s\nwant %v %v", m.name, diff, m.class, m.priority)
			}
		})
	}
}

// TestReadsNotStarved: a flood of load-balancer reads (a node sync's
// Finds) and writes (its backend updates) on the fake clock never delays
// an instance or route read, nor a load-balancer create or delete, nor a
// route write.
func TestReadsNotStarved(t *testing.T) {
	clk := newClock()
	g := newGovernor(t, clk, governor.Options{})
	c := newCloud()
	lbs, nodes, table := g.LoadBalancer(lbAPI{c}), g.Instances(instanceAPI{c}), g.RouteTable(tableAPI{c})
	ctx := t.Context()
	var floods, floodRefused int
	var firsts []string
	for i := range 3000 { // 30s
		for range 5 {
			floods += 2
			if _, err := lbs.Find(ctx, loadbalancer.Query{Name: "a"}); err != nil {
				floodRefused++
			}
			if _, err := lbs.Apply(ctx, loadbalancer.Action{Kind: loadbalancer.ActionAddBackends}); err != nil {
				floodRefused++
			}
		}
		if i%20 == 0 { // reads: 10 a second of the 20
			firsts = append(firsts, firstError(
				func() error { _, err := nodes.GetByID(ctx, provider.ProviderID{ID: "i-1"}); return err },
				func() error { _, _, err := table.ReadTable(ctx); return err },
			))
		}
		if i%50 == 0 { // writes: 6 a second of the 10
			firsts = append(firsts, firstError(
				func() error {
					_, err := lbs.Apply(ctx, loadbalancer.Action{Kind: loadbalancer.ActionCreate})
					return err
				},
				func() error { return lbs.Delete(ctx, c.lb) },
				func() error { return table.WriteTable(ctx, "", nil) },
			))
		}
		clk.Step(10 * time.Millisecond)
	}
	for _, f := range firsts {
		if f != "" {
			t.Error(f)
		}
	}
	if floodRefused < floods/2 {
		t.Errorf("the flood had %d of %d calls refused; want most: the test must saturate the budget", floodRefused, floods)
	}
}

// firstError runs calls and returns the first error's message, or "".
func firstError(calls ...func() error) string {
	for _, call := range calls {
		if err := call(); err != nil {
			return err.Error()
		}
	}
	return ""
}

// TestWrapperPauses: a throttled answer through a wrapper pauses its
// class, and its error reaches the caller unchanged.
func TestWrapperPauses(t *testing.T) {
	c := newCloud()
	g := newGovernor(t, newClock(), governor.Options{})
	answer := throttled(7 * time.Second)
	c.setErr(answer)
	if _, err := g.LoadBalancer(lbAPI{c}).Apply(t.Context(), loadbalancer.Action{Kind: loadbalancer.ActionAddBackends}); err != answer { //nolint:errorlint // the throttled answer must reach the caller unchanged, unwrapped
		t.Fatalf("Apply = %v, want the cloud's throttled answer itself", err)
	}
	c.setErr(nil)
	err := g.Routes(routeAPI{c}).CreateRoute(t.Context(), c.entries[0])
	if d, _ := retryAfter(err); !errors.Is(err, governor.ErrOverBudget) || d != 7500*time.Millisecond {
		t.Errorf("CreateRoute after a throttled Apply = %v, want refused for 7.5s: writes are paused for 7s, then a normal call waits for the urgent reserve of 5 tokens at 10/s", err)
	}
	if _, err := g.Instances(instanceAPI{c}).GetByName(t.Context(), "node-1"); err != nil {
		t.Errorf("GetByName after a throttled Apply = %v, want admitted: reads are not paused", err)
	}
	assertCalls(t, c, []string{"Apply AddBackends", "GetByName"})
}

func TestWrapNil(t *testing.T) {
	g := newGovernor(t, newClock(), governor.Options{})
	var typedNil *tableAPINil
	for name, got := range map[string]any{
		"LoadBalancer":     g.LoadBalancer(nil),
		"LoadBalancerList": g.LoadBalancerList(nil),
		"Instances":        g.Instances(nil),
		"InstanceList":     g.InstanceList(nil),
		"Routes":           g.Routes(nil),
		"RouteTable":       g.RouteTable(typedNil),
	} {
		if got != nil {
			t.Errorf("%s(nil) = %#v, want nil, for the block's constructor to refuse", name, got)
		}
	}
	_, err := routes.NewWholeTable(g.RouteTable(typedNil), routes.Options{})
	if want := "routes.NewWholeTable: driver is nil: expected a non-nil routes.TableDriver"; err == nil || err.Error() != want {
		t.Errorf("NewWholeTable(g.RouteTable(typed nil)) = %v, want %q", err, want)
	}
}

// tableAPINil is a TableDriver whose nil pointer a careless provider could
// pass.
type tableAPINil struct{}

func (*tableAPINil) ReadTable(context.Context) ([]routes.Entry, string, error) { return nil, "", nil }
func (*tableAPINil) WriteTable(context.Context, string, []routes.Entry) error  { return nil }

// TestRefusalNotMetered: a refused call made no cloud call, so the
// metered call of the block above it is not recorded in
// ccmkit_cloud_requests_total; an admitted one is.
func TestRefusalNotMetered(t *testing.T) {
	c := newCloud()
	g := newGovernor(t, newClock(), governor.Options{Reads: governor.Limit{Burst: 1}})
	lbs := g.LoadBalancer(lbAPI{c})
	find := func() error {
		return cloudmetrics.Meter(t.Context(), "loadbalancer", "Find", func(ctx context.Context) error {
			_, err := lbs.Find(ctx, loadbalancer.Query{Name: "a"})
			return err
		})
	}
	before := requests(t)
	if err := find(); err != nil {
		t.Fatal(err)
	}
	if err := find(); !errors.Is(err, governor.ErrOverBudget) {
		t.Fatalf("second Find = %v, want refused", err)
	}
	if diff := cmp.Diff(map[string]float64{"Find ok": 1}, cloudmetrics.Since(requests(t), before)); diff != "" {
		t.Errorf("ccmkit_cloud_requests_total{capability=loadbalancer} recorded (-want +got):\n%s", diff)
	}
}

func requests(t *testing.T) map[string]float64 {
	t.Helper()
	c, err := cloudmetrics.Read()
	if err != nil {
		t.Fatal(err)
	}
	return c.Of("loadbalancer")
}
