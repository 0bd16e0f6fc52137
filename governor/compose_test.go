package governor_test

import (
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	cloudprovider "k8s.io/cloud-provider"

	"github.com/ccmkit/ccmkit/governor"
	"github.com/ccmkit/ccmkit/instances"
	"github.com/ccmkit/ccmkit/internal/throttle"
	"github.com/ccmkit/ccmkit/loadbalancer"
	"github.com/ccmkit/ccmkit/provider"
	"github.com/ccmkit/ccmkit/routes"
)

// The tests of this file check that ccmkit's blocks compose with a
// Governor under them as the package doc says: a block that waits out a
// short throttle waits out a refusal, one that fails fast passes it on
// with its RetryAfter, and a cache remembers it no longer than that.

func webService() *v1.Service {
	return &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web", UID: "6c1d1f9e-3c4b-4b8e-9d51-0f6a3f2b7a10"},
		Spec: v1.ServiceSpec{
			Type:  v1.ServiceTypeLoadBalancer,
			Ports: []v1.ServicePort{{Name: "http", Protocol: v1.ProtocolTCP, Port: 80, NodePort: 30080}},
		},
	}
}

// TestReconcilerEnsureNeverWaits: EnsureLoadBalancer returns a refusal at
// once as a RetryError for the service controller, which requeues the
// Service after it (processNextServiceItem in
// controllers/service/controller.go) and frees its worker.
func TestReconcilerEnsureNeverWaits(t *testing.T) {
	c := newCloud()
	g := newGovernor(t, newClock(), governor.Options{Reads: governor.Limit{Rate: 2, Burst: 1}}) // a clock that never moves
	r, err := loadbalancer.NewReconciler(g.LoadBalancer(lbAPI{c}), loadbalancer.Options{})
	if err != nil {
		t.Fatal(err)
	}
	spend(t, g, governor.Reads)
	_, err = r.EnsureLoadBalancer(t.Context(), "prod", webService(), nil)
	d, ok := retryAfter(err)
	if !ok || d < 500*time.Millisecond || !errors.Is(err, governor.ErrOverBudget) || !throttle.Refused(err) {
		t.Errorf("EnsureLoadBalancer on a spent read budget = %v (RetryAfter %v); want the refusal (marked refused: nothing changed), with a RetryError of at least its 500ms", err, d)
	}
	if calls := c.Calls(); len(calls) != 0 {
		t.Errorf("calls that reached the cloud: %v, want none", calls)
	}
}

// TestReconcilerWaitsOutRefusal: GetLoadBalancer waits out throttles
// within MaxThrottleWait, and so waits out the Governor's refusals of its
// Finds, on the real clock.
func TestReconcilerWaitsOutRefusal(t *testing.T) {
	c := newCloud()
	c.lbs = nil // the Service has no load balancer
	g := newGovernor(t, nil, governor.Options{Reads: governor.Limit{Rate: 10, Burst: 1}})
	r, err := loadbalancer.NewReconciler(g.LoadBalancer(lbAPI{c}), loadbalancer.Options{MaxThrottleWait: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	before := readGovernor(t)
	spend(t, g, governor.Reads)
	_, exists, err := r.GetLoadBalancer(t.Context(), "prod", webService())
	if exists || err != nil {
		t.Fatalf("GetLoadBalancer = %v, %v; want false, nil after waiting out the refusals", exists, err)
	}
	if n := since(readGovernor(t), before)["refused reads/normal"]; n < 1 {
		t.Errorf("refused normal reads: %v, want at least 1: the test must make the Reconciler wait", n)
	}
	for _, call := range c.Calls() {
		if call != "Find" {
			t.Errorf("call %q reached the cloud, want only Finds", call)
		}
	}
}

// TestTableComposes: a routes.Table that fails fast (MaxThrottleWait
// negative) returns a refusal; one that waits retries its batch after the
// refusal's RetryAfter, and the refused write never reaches the cloud.
func TestTableComposes(t *testing.T) {
	route := &cloudprovider.Route{TargetNode: "node-2", DestinationCIDR: "10.0.1.0/24"}
	t.Run("fails fast", func(t *testing.T) {
		c := newCloud()
		clk := newClock()
		g := newGovernor(t, clk, governor.Options{Writes: governor.Limit{Rate: 4, Burst: 1}})
		table, err := routes.NewWholeTable(g.RouteTable(tableAPI{c}), routes.Options{MaxThrottleWait: -1})
		if err != nil {
			t.Fatal(err)
		}
		spend(t, g, governor.Writes)
		err = table.CreateRoute(t.Context(), "c", "hint", route)
		if d, _ := retryAfter(err); !errors.Is(err, governor.ErrOverBudget) || d != 250*time.Millisecond {
			t.Fatalf("CreateRoute on a spent write budget = %v, want the refusal with RetryAfter 250ms", err)
		}
		clk.Step(250 * time.Millisecond)
		if err := table.CreateRoute(t.Context(), "c", "hint", route); err != nil {
			t.Errorf("CreateRoute after the RetryAfter = %v, want nil", err)
		}
		assertCalls(t, c, []string{"ReadTable", "ReadTable", "WriteTable"})
	})
	t.Run("waits", func(t *testing.T) {
		c := newCloud()
		g := newGovernor(t, nil, governor.Options{Writes: governor.Limit{Rate: 5, Burst: 1}})
		table, err := routes.NewWholeTable(g.RouteTable(tableAPI{c}), routes.Options{MaxThrottleWait: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		before := readGovernor(t)
		spend(t, g, governor.Writes)
		if err := table.CreateRoute(t.Context(), "c", "hint", route); err != nil {
			t.Errorf("CreateRoute = %v, want nil once the Table waited out the refusal", err)
		}
		if n := since(readGovernor(t), before)["refused writes/normal"]; n != 1 {
			t.Errorf("refused normal writes: %v, want 1: the test must make the Table wait, once", n)
		}
		assertCalls(t, c, []string{"ReadTable", "ReadTable", "WriteTable"})
	})
}

// TestInstanceCacheComposes: an instances.Cache with ErrorTTL -1 over a
// governed ListDriver remembers a refused List for its RetryAfter and no
// longer, answering at once in between, without asking the Governor.
func TestInstanceCacheComposes(t *testing.T) {
	c := newCloud()
	clk := newClock()
	g := newGovernor(t, clk, governor.Options{Reads: governor.Limit{Rate: 10, Burst: 1}})
	cache, err := instances.NewCache(g.InstanceList(instanceAPI{c}), instances.CacheOptions{ErrorTTL: -1, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	spend(t, g, governor.Reads)
	id := provider.ProviderID{ID: "i-1"}
	before := readGovernor(t)
	for _, step := range []struct {
		advance time.Duration
		wait    time.Duration // the RetryAfter of the look-up's error; 0: found
		refused float64       // refusals of the Governor so far
	}{
		{wait: 100 * time.Millisecond, refused: 1},                                // the Cache lists; the Governor refuses
		{advance: 60 * time.Millisecond, wait: 40 * time.Millisecond, refused: 1}, // remembered, the Governor not asked
		{advance: 40 * time.Millisecond, refused: 1},                              // the RetryAfter has passed: listed
	} {
		clk.Step(step.advance)
		_, err := cache.GetByID(t.Context(), id)
		if d, _ := retryAfter(err); d != step.wait || (err == nil) != (step.wait == 0) {
			t.Errorf("at +%v: GetByID = %v (RetryAfter %v), want RetryAfter %v", step.advance, err, d, step.wait)
		}
		if n := since(readGovernor(t), before)["refused reads/urgent"]; n != step.refused {
			t.Errorf("at +%v: refusals %v, want %v", step.advance, n, step.refused)
		}
	}
	assertCalls(t, c, []string{"List"})
}

func assertCalls(t *testing.T, c *cloud, want []string) {
	t.Helper()
	if diff := cmp.Diff(want, c.Calls()); diff != "" {
		t.Errorf("calls that reached the cloud (-want +got):\n%s", diff)
	}
}
