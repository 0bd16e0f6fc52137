package fake_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	cloudprovider "k8s.io/cloud-provider"
	"k8s.io/cloud-provider/api"

	"github.com/ccmkit/ccmkit/fake"
	"github.com/ccmkit/ccmkit/instances"
	"github.com/ccmkit/ccmkit/loadbalancer"
	"github.com/ccmkit/ccmkit/routes"
)

// TestInjectedErrorSurfacesUnchanged: the error a test injects is the error
// (errors.Is) each capability returns.
func TestInjectedErrorSurfacesUnchanged(t *testing.T) {
	boom := errors.New("boom")
	tests := []struct {
		name   string
		op     fake.Op
		call   func(t *testing.T, c *fake.Cloud, nodes []*v1.Node) error
		reason string
	}{
		{"ensure", fake.OpFindLoadBalancers, func(t *testing.T, c *fake.Cloud, nodes []*v1.Node) error {
			_, err := lbOf(t, c).EnsureLoadBalancer(t.Context(), cluster, service("web"), nodes)
			return err
		}, "a failed Find fails Ensure"},
		{"ensure write", fake.OpApplyLoadBalancer, func(t *testing.T, c *fake.Cloud, nodes []*v1.Node) error {
			_, err := lbOf(t, c).EnsureLoadBalancer(t.Context(), cluster, service("web"), nodes)
			return err
		}, "a failed create fails Ensure"},
		{"route create", fake.OpWriteRouteTable, func(t *testing.T, c *fake.Cloud, nodes []*v1.Node) error {
			return routesOf(t, c).CreateRoute(t.Context(), cluster, "uid", &cloudprovider.Route{TargetNode: "node-01", DestinationCIDR: "10.244.0.0/24"})
		}, "a failed table write fails CreateRoute"},
		{"route list", fake.OpReadRouteTable, func(t *testing.T, c *fake.Cloud, nodes []*v1.Node) error {
			_, err := routesOf(t, c).ListRoutes(t.Context(), cluster)
			return err
		}, "a failed table read fails ListRoutes"},
		{"instance", fake.OpListInstances, func(t *testing.T, c *fake.Cloud, nodes []*v1.Node) error {
			_, err := instancesOf(t, c).InstanceMetadata(t.Context(), nodes[0])
			return err
		}, "a failed list fails InstanceMetadata"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// ErrorTTL -1: the instance cache does not remember the failure.
			c, nodes := cloudWithNodes(t, fake.Config{}, 1, fake.Options{InstanceCache: &instances.CacheOptions{ErrorTTL: -1}})
			// A first Service gives the load-balancer cache its list, so
			// the next Service's miss is confirmed by a Find (the List a
			// look-up makes itself answers its miss). It has no backends,
			// so it does not fill the instance cache (no instance to check).
			if _, err := lbOf(t, c).EnsureLoadBalancer(t.Context(), cluster, service("first"), nil); err != nil {
				t.Fatal(err)
			}
			if err := c.AddFault(fake.Fault{Op: tt.op, Times: 1, Err: boom}); err != nil {
				t.Fatal(err)
			}
			if err := tt.call(t, c, nodes); !errors.Is(err, boom) {
				t.Errorf("%s: err = %v; want the injected error (%s)", tt.op, err, tt.reason)
			}
			if got := c.Calls().Faults; got != 1 {
				t.Errorf("Calls().Faults = %d; want 1", got)
			}
			if err := tt.call(t, c, nodes); err != nil {
				t.Errorf("after the one injected fault: %v; want success", err)
			}
		})
	}
}

func TestThrottleIsARetryErrorFromEnsure(t *testing.T) {
	c, nodes := cloudWithNodes(t, fake.Config{}, 1)
	// A first Service gives the load-balancer cache its list: a new
	// Service's miss is then confirmed by a Find.
	if _, err := lbOf(t, c).EnsureLoadBalancer(t.Context(), cluster, service("first"), nodes); err != nil {
		t.Fatal(err)
	}
	for _, op := range []fake.Op{fake.OpFindLoadBalancers, fake.OpApplyLoadBalancer} {
		if err := c.AddFault(fake.Fault{Op: op, Times: 1, RetryAfter: 42 * time.Second}); err != nil {
			t.Fatal(err)
		}
		_, err := lbOf(t, c).EnsureLoadBalancer(t.Context(), cluster, service("web-"+string(op)[:4]), nodes)
		// The fake's delay, first spread by the Reconciler's back-off:
		// 42s plus up to as much again.
		var re *api.RetryError
		if !errors.As(err, &re) || re.RetryAfter() < 42*time.Second || re.RetryAfter() >= 84*time.Second || retryAfter(t, string(op), err) != 42*time.Second {
			t.Errorf("Ensure with %s throttled = %v; want an api.RetryError after 42s, spread to [42s, 84s)", op, err)
		}
	}
}

// TestLostResponse: a write failed with LostResponse takes effect although
// its caller gets the error: the next EnsureLoadBalancer finds the load
// balancer, creates no second one and writes nothing. A read failed with
// LostResponse just fails.
func TestLostResponse(t *testing.T) {
	c, nodes := cloudWithNodes(t, fake.Config{}, 1)
	lb := lbOf(t, c)
	svc := service("web")
	lost := errors.New("connection reset after the request was sent")
	if err := c.AddFault(fake.Fault{Op: fake.OpApplyLoadBalancer, Times: 1, Err: lost, LostResponse: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := lb.EnsureLoadBalancer(t.Context(), cluster, svc, nodes); !errors.Is(err, lost) {
		t.Fatalf("EnsureLoadBalancer with a lost response = %v; want the injected error", err)
	}
	created, ok := c.LoadBalancerFor(cluster, svc)
	if !ok {
		t.Fatal("no load balancer after a create whose response was lost; want it created")
	}
	before := c.Calls()
	st, err := lb.EnsureLoadBalancer(t.Context(), cluster, svc, nodes)
	if err != nil {
		t.Fatal(err)
	}
	if got := c.Calls().Writes - before.Writes; got != 0 {
		t.Errorf("the retry wrote %d times; want none: the load balancer exists", got)
	}
	if n := len(c.Snapshot().LoadBalancers); n != 1 || st.Ingress[0].IP != created.VIPs[0] {
		t.Errorf("after the retry: %d load balancers, ingress %v; want 1, %s", n, st.Ingress, created.VIPs[0])
	}
	if err := c.AddFault(fake.Fault{Op: fake.OpReadRouteTable, Times: 1, LostResponse: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := routesOf(t, c).ListRoutes(t.Context(), cluster); !errors.Is(err, fake.ErrInjected) {
		t.Errorf("ListRoutes with a lost response on the read = %v; want the injected error", err)
	}
}

func TestScriptedFaults(t *testing.T) {
	c := newCloud(t, fake.Config{})
	rt := routesOf(t, c)
	list := func() error { _, err := rt.ListRoutes(t.Context(), cluster); return err }
	if err := c.AddFault(fake.Fault{Op: fake.OpReadRouteTable, Times: 2}); err != nil {
		t.Fatal(err)
	}
	var got []bool
	for range 4 {
		got = append(got, errors.Is(list(), fake.ErrInjected))
	}
	if diff := cmp.Diff([]bool{true, true, false, false}, got, fake.CmpModel); diff != "" {
		t.Errorf("failures of successive calls with Times 2 (-want +got):\n%s", diff)
	}
	if err := c.AddFault(fake.Fault{Times: -1}); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if !errors.Is(list(), fake.ErrInjected) {
			t.Error("a call during an outage (Times -1) succeeded")
		}
	}
	c.ClearFaults()
	if err := list(); err != nil {
		t.Errorf("after ClearFaults: %v", err)
	}
	for _, bad := range []fake.Fault{{Op: "Nope", Times: 1}, {Times: 0}, {Times: -2}, {Times: 1, RetryAfter: -time.Second}} {
		if err := c.AddFault(bad); err == nil {
			t.Errorf("InjectFault(%+v) = nil; want an error", bad)
		}
	}
}

// TestRandomFaultsAreDeterministic: random faults of interceptor Funcs
// are reproducible: each call of the operation reaches the interceptor
// once, in call order, so the same seed fails the same calls.
func TestRandomFaultsAreDeterministic(t *testing.T) {
	injected := errors.New("random fault")
	pattern := func(seed uint64) string {
		c := newCloud(t, fake.Config{})
		c.SetInterceptor(failRandomly(seed, 0.3, injected, fake.OpReadRouteTable))
		out := make([]byte, 64)
		for i := range out {
			out[i] = '.'
			if _, err := routesOf(t, c).ListRoutes(t.Context(), cluster); errors.Is(err, injected) {
				out[i] = 'x'
			} else if err != nil {
				t.Fatal(err)
			}
		}
		return string(out)
	}
	a, b, other := pattern(7), pattern(7), pattern(8)
	if a != b {
		t.Errorf("seed 7 gave two fault patterns:\n%s\n%s", a, b)
	}
	if a == other {
		t.Errorf("seeds 7 and 8 gave the same pattern %s; want different", a)
	}
	if n := strings.Count(a, "x"); n < 5 || n > 40 {
		t.Errorf("pattern %s has %d faults in 64 calls at p=0.3; want a plausible number", a, n)
	}
}

func TestInterceptor(t *testing.T) {
	c, nodes := cloudWithNodes(t, fake.Config{}, 1)
	conflicts := 0
	c.SetInterceptor(fake.Funcs{
		// The first write conflicts: the routes.Table rereads and retries.
		WriteRouteTable: func(ctx context.Context, next routes.TableDriver, rev string, entries []routes.Entry) error {
			if conflicts == 0 {
				conflicts++
				return fmt.Errorf("simulated concurrent writer: %w", routes.ErrConflict)
			}
			return next.WriteTable(ctx, rev, entries)
		},
		// Latency on every find.
		FindLoadBalancers: func(ctx context.Context, next loadbalancer.Driver, q loadbalancer.Query) ([]*loadbalancer.LoadBalancer, error) {
			select {
			case <-time.After(time.Millisecond):
			case <-ctx.Done():
				return nil, ctx.Err()
			}
			return next.Find(ctx, q)
		},
	})
	if err := routesOf(t, c).CreateRoute(t.Context(), cluster, "uid", &cloudprovider.Route{TargetNode: types.NodeName(nodes[0].Name), DestinationCIDR: "10.244.0.0/24"}); err != nil {
		t.Fatalf("CreateRoute with one conflict: %v", err)
	}
	if s := fake.RouteStats(c); s.Conflicts != 1 || len(c.Snapshot().Routes) != 1 {
		t.Errorf("RouteStats %+v, routes %v; want 1 conflict and the route written", s, c.Snapshot().Routes)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := lbOf(t, c).EnsureLoadBalancer(ctx, cluster, service("web"), nodes); !errors.Is(err, context.Canceled) {
		t.Errorf("Ensure with a cancelled context = %v; want context.Canceled", err)
	}
	c.SetInterceptor(fake.Funcs{})
	if _, err := lbOf(t, c).EnsureLoadBalancer(t.Context(), cluster, service("web"), nodes); err != nil {
		t.Errorf("Ensure without interceptors: %v", err)
	}
}

func TestCallCounters(t *testing.T) {
	c, nodes := cloudWithNodes(t, fake.Config{}, 2)
	lb := lbOf(t, c)
	svc := service("web")
	if _, err := lb.EnsureLoadBalancer(t.Context(), cluster, svc, nodes); err != nil {
		t.Fatal(err)
	}
	// A first Ensure: the load-balancer cache lists, and that List, made
	// by the look-up by tags, answers its miss as the cloud (the name step
	// trusts it too); the instance cache lists once, to check that the new
	// backends' instances exist (loadbalancer.Options.Instances); then one
	// create.
	want := fake.Calls{Reads: 2, Writes: 1, ByOp: map[fake.Op]int64{fake.OpListLoadBalancers: 1, fake.OpListInstances: 1, fake.OpApplyLoadBalancer: 1}}
	if diff := cmp.Diff(want, c.Calls(), fake.CmpModel); diff != "" {
		t.Errorf("calls of a first Ensure (-want +got):\n%s", diff)
	}
	c.ResetCalls()
	// A converged Ensure and an Update with the same nodes: answered from
	// the cache's list and the create's result, no call at all.
	if _, err := lb.EnsureLoadBalancer(t.Context(), cluster, svc, nodes); err != nil {
		t.Fatal(err)
	}
	if err := lb.UpdateLoadBalancer(t.Context(), cluster, svc, nodes); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(fake.Calls{ByOp: map[fake.Op]int64{}}, c.Calls(), fake.CmpModel); diff != "" {
		t.Errorf("calls of a converged Ensure and Update (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(fake.Calls{ByOp: map[fake.Op]int64{}}, c.Calls(), fake.CmpModel); diff != "" {
		t.Errorf("calls after ResetCalls (-want +got):\n%s", diff)
	}
	if err := lb.EnsureLoadBalancerDeleted(t.Context(), cluster, svc); err != nil {
		t.Fatal(err)
	}
	if got := c.Calls(); got.Writes != 1 || got.ByOp[fake.OpDeleteLoadBalancer] != 1 {
		t.Errorf("calls of a Delete = %+v; want one DeleteLoadBalancer write", got)
	}
	if !fake.OpWriteRouteTable.Writes() || fake.OpListInstances.Writes() {
		t.Error("Op.IsWrite misclassifies")
	}
}
