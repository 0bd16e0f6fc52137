package governor_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/cloud-provider/api"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/ccmkit/ccmkit/governor"
	"github.com/ccmkit/ccmkit/instances"
	"github.com/ccmkit/ccmkit/internal/cloudmetrics"
	"github.com/ccmkit/ccmkit/loadbalancer"
	"github.com/ccmkit/ccmkit/provider"
	"github.com/ccmkit/ccmkit/routes"
)

// clock is the tests' fake clock (Options.Clock): it moves only when a
// test steps it.
type clock = clocktesting.FakeClock

func newClock() *clock {
	return clocktesting.NewFakeClock(time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC))
}

// newGovernor returns a Governor with opts on clk, failing the test on an
// error.
func newGovernor(t testing.TB, clk *clock, opts governor.Options) *governor.Governor {
	t.Helper()
	if clk != nil {
		opts.Clock = clk
	}
	g, err := governor.New(opts)
	if err != nil {
		t.Fatalf("governor.New: %v", err)
	}
	return g
}

// spend takes the one token of class c of a Governor whose Limit for c
// has a Burst of 1, failing the test when it cannot.
func spend(t testing.TB, g *governor.Governor, c governor.Class) {
	t.Helper()
	if err := g.Admit(c, governor.Urgent); err != nil {
		t.Fatalf("taking the token of %v: %v", c, err)
	}
}

// throttled is a cloud's answer "429, retry after d", as a Driver returns
// it.
func throttled(d time.Duration) error {
	return fmt.Errorf("cloud: 429 Too Many Requests: %w", api.NewRetryError("slow down", d))
}

// retryAfter returns the RetryAfter of err's first *api.RetryError, and
// whether it has one.
func retryAfter(err error) (time.Duration, bool) {
	var re *api.RetryError
	if errors.As(err, &re) {
		return re.RetryAfter(), true
	}
	return 0, false
}

// cloud is the one hand-written cloud of this package's tests (rule T3):
// the fake composes ccmkit's blocks over drivers of its own that cannot be
// governed from outside it, and these tests need to see each call reach
// the Driver, or not, and to choose its answer. Its Drivers (lbs,
// instanceAPI, routeAPI, tableAPI) record the calls that reach them and
// answer every call with the same results: err and the values below, which
// the tests compare by identity.
type cloud struct {
	mu    sync.Mutex
	calls []string
	err   error

	lb       *loadbalancer.LoadBalancer
	lbs      []*loadbalancer.LoadBalancer
	pool     *loadbalancer.Pool
	pools    []*loadbalancer.Pool
	instance instances.Instance
	list     []instances.Instance
	entries  []routes.Entry
	revision string
}

func newCloud() *cloud {
	lb := &loadbalancer.LoadBalancer{ID: "lb-1", Name: "a"}
	pool := &loadbalancer.Pool{ID: "pool-1", Name: "p"}
	return &cloud{
		lb:       lb,
		lbs:      []*loadbalancer.LoadBalancer{lb},
		pool:     pool,
		pools:    []*loadbalancer.Pool{pool},
		instance: instances.Instance{ID: "i-1", Name: "node-1"},
		list:     []instances.Instance{{ID: "i-1", Name: "node-1"}},
		entries:  []routes.Entry{{Name: "r-1", Cluster: "c", DestinationCIDR: "10.0.0.0/24", TargetNode: "node-1"}},
		revision: "rev-7",
	}
}

// record notes a call that reached the cloud and returns its error.
func (c *cloud) record(op string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.calls = append(c.calls, op)
	return c.err
}

// Calls returns the calls that reached the cloud, in order, and forgets
// them.
func (c *cloud) Calls() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	calls := c.calls
	c.calls = nil
	return calls
}

// setErr makes every later call fail with err (nil: succeed).
func (c *cloud) setErr(err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.err = err
}

type lbAPI struct{ *cloud }

func (c lbAPI) Find(ctx context.Context, q loadbalancer.Query) ([]*loadbalancer.LoadBalancer, error) {
	return c.lbs, c.record("Find")
}

func (c lbAPI) Apply(ctx context.Context, a loadbalancer.Action) (*loadbalancer.LoadBalancer, error) {
	return c.lb, c.record("Apply " + string(a.Kind))
}

func (c lbAPI) Delete(ctx context.Context, lb *loadbalancer.LoadBalancer) error {
	return c.record("Delete")
}

func (c lbAPI) List(ctx context.Context) ([]*loadbalancer.LoadBalancer, error) {
	return c.lbs, c.record("List")
}

func (c lbAPI) FindPools(ctx context.Context, q loadbalancer.PoolQuery) ([]*loadbalancer.Pool, error) {
	return c.pools, c.record("FindPools")
}

func (c lbAPI) ListPools(ctx context.Context) ([]*loadbalancer.Pool, error) {
	return c.pools, c.record("ListPools")
}

func (c lbAPI) ApplyPool(ctx context.Context, a loadbalancer.PoolAction) (*loadbalancer.Pool, error) {
	return c.pool, c.record("ApplyPool " + string(a.Kind))
}

func (c lbAPI) DeletePool(ctx context.Context, p *loadbalancer.Pool) error {
	return c.record("DeletePool")
}

type instanceAPI struct{ *cloud }

func (c instanceAPI) GetByID(ctx context.Context, id provider.ProviderID) (instances.Instance, error) {
	return c.instance, c.record("GetByID")
}

func (c instanceAPI) GetByName(ctx context.Context, name string) (instances.Instance, error) {
	return c.instance, c.record("GetByName")
}

func (c instanceAPI) List(ctx context.Context) ([]instances.Instance, error) {
	return c.list, c.record("List")
}

type routeAPI struct{ *cloud }

func (c routeAPI) ListRoutes(ctx context.Context, cluster string) ([]routes.Entry, error) {
	return c.entries, c.record("ListRoutes")
}

func (c routeAPI) CreateRoute(ctx context.Context, e routes.Entry) error {
	return c.record("CreateRoute")
}

func (c routeAPI) DeleteRoute(ctx context.Context, e routes.Entry) error {
	return c.record("DeleteRoute")
}

type tableAPI struct{ *cloud }

func (c tableAPI) ReadTable(ctx context.Context) ([]routes.Entry, string, error) {
	return c.entries, c.revision, c.record("ReadTable")
}

func (c tableAPI) WriteTable(ctx context.Context, revision string, entries []routes.Entry) error {
	return c.record("WriteTable")
}

// readGovernor returns the governor metrics in the registry, keyed
// "<metric> <labels>": "admitted writes/urgent", "tokens reads", ….
func readGovernor(t *testing.T) map[string]float64 {
	t.Helper()
	c, err := cloudmetrics.ReadGovernor()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for name, m := range map[string]map[string]float64{"tokens": c.Tokens, "admitted": c.Admitted, "refused": c.Refused, "pauses": c.Pauses, "paused_seconds": c.PausedSeconds} {
		for k, v := range m {
			out[name+" "+k] = v
		}
	}
	return out
}

// since returns the counters of now that changed since before, by how
// much; the tokens gauges are left out.
func since(now, before map[string]float64) map[string]float64 {
	out := cloudmetrics.Since(now, before)
	for k := range out {
		if strings.HasPrefix(k, "tokens ") {
			delete(out, k)
		}
	}
	return out
}
