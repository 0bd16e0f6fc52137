package fake_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"

	"github.com/ccmkit/ccmkit/fake"
	"github.com/ccmkit/ccmkit/governor"
	"github.com/ccmkit/ccmkit/loadbalancer"
)

// sharedPools is a cloud-config with shared backend pools.
func sharedPools(backends fake.BackendMode) fake.Config {
	return fake.Config{ClusterID: cluster, LoadBalancers: fake.LoadBalancerSection{BackendPools: fake.BackendPoolsShared, Backends: backends}}
}

// poolMembers returns the provider IDs of the members of every backend
// pool of st, by pool ID.
func poolMembers(st fake.State) map[string][]string {
	out := map[string][]string{}
	for _, p := range st.BackendPools {
		ids := []string{}
		for _, b := range p.Spec.Backends {
			ids = append(ids, b.ProviderID)
		}
		slices.Sort(ids)
		out[p.ID] = ids
	}
	return out
}

func providerIDs(nodes []*v1.Node) []string {
	var out []string
	for _, n := range nodes {
		out = append(out, n.Spec.ProviderID)
	}
	slices.Sort(out)
	return out
}

// TestSharedBackendPools brings up Services on a cloud with shared backend
// pools, in both backend modes: one pool for all, a Node joining is one
// ApplyBackendPool call and no ApplyLoadBalancer call, and the pool goes
// with the last Service.
func TestSharedBackendPools(t *testing.T) {
	for _, mode := range []fake.BackendMode{fake.BackendsNodeName, fake.BackendsInstanceID} {
		t.Run(string(mode), func(t *testing.T) {
			const n = 4
			c, nodes := cloudWithNodes(t, sharedPools(mode), 3)
			lb, ctx := lbOf(t, c), t.Context()
			var svcs []*v1.Service
			for i := range n {
				svcs = append(svcs, service(fmt.Sprintf("web-%d", i)))
				if _, err := lb.EnsureLoadBalancer(ctx, cluster, svcs[i], nodes[:2]); err != nil {
					t.Fatal(err)
				}
			}
			st := c.Snapshot()
			if len(st.BackendPools) != 1 {
				t.Fatalf("%d Services: %d backend pools; want 1", n, len(st.BackendPools))
			}
			pool := st.BackendPools[0]
			for _, l := range st.LoadBalancers {
				if l.Spec.BackendPool != pool.ID || len(l.Spec.Backends) != 0 {
					t.Errorf("load balancer %s: pool %q, %d backends; want pool %q and none of its own", l.ID, l.Spec.BackendPool, len(l.Spec.Backends), pool.ID)
				}
			}
			before := c.Calls()
			for _, s := range svcs {
				if err := lb.UpdateLoadBalancer(ctx, cluster, s, nodes); err != nil {
					t.Fatal(err)
				}
			}
			after := c.Calls()
			got := map[fake.Op]int64{}
			for _, op := range []fake.Op{fake.OpApplyBackendPool, fake.OpApplyLoadBalancer, fake.OpFindBackendPools, fake.OpFindLoadBalancers} {
				got[op] = after.ByOp[op] - before.ByOp[op]
			}
			want := map[fake.Op]int64{fake.OpApplyBackendPool: 1, fake.OpApplyLoadBalancer: 0, fake.OpFindBackendPools: 0, fake.OpFindLoadBalancers: 0}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("a Node joining %d Services: calls (-want +got):\n%s", n, diff)
			}
			if diff := cmp.Diff(map[string][]string{pool.ID: providerIDs(nodes)}, poolMembers(c.Snapshot())); diff != "" {
				t.Errorf("pool members (-want +got):\n%s", diff)
			}
			if mode == fake.BackendsInstanceID {
				if b := c.Snapshot().BackendPools[0].Spec.Backends[0]; b.NodeName != "" {
					t.Errorf("instanceID mode: a member keeps %+v; want its provider ID only", b)
				}
			}
			for _, s := range svcs {
				if err := lb.EnsureLoadBalancerDeleted(ctx, cluster, s); err != nil {
					t.Fatal(err)
				}
			}
			if st := c.Snapshot(); len(st.BackendPools)+len(st.LoadBalancers) != 0 {
				t.Errorf("after every Service is deleted: pools %v, load balancers %d; want nothing", poolMembers(st), len(st.LoadBalancers))
			}
		})
	}
}

// TestBackendPoolRefusals checks what the cloud refuses: a load balancer
// referencing a pool that does not exist, and deleting a pool a load
// balancer references. The refused calls change nothing. It also checks
// that a Reconciler over the fake's Cache never makes the second refused
// call: deleting one of two users of a pool leaves the pool alone.
func TestBackendPoolRefusals(t *testing.T) {
	var (
		missing error
		pools   loadbalancer.PoolDriver
		deletes int
	)
	funcs := fake.Funcs{
		ApplyBackendPool: func(ctx context.Context, next loadbalancer.PoolDriver, a loadbalancer.PoolAction) (*loadbalancer.Pool, error) {
			pools = next
			return next.ApplyPool(ctx, a)
		},
		DeleteBackendPool: func(ctx context.Context, next loadbalancer.PoolDriver, p *loadbalancer.Pool) error {
			deletes++
			return next.DeletePool(ctx, p)
		},
		ApplyLoadBalancer: func(ctx context.Context, next loadbalancer.Driver, a loadbalancer.Action) (*loadbalancer.LoadBalancer, error) {
			if a.Kind == loadbalancer.ActionCreate && a.Create.Spec.BackendPool != "" {
				bad := a
				bad.Create = a.Create.Clone()
				bad.Create.Spec.BackendPool = "bp-404"
				_, missing = next.Apply(ctx, bad)
			}
			return next.Apply(ctx, a)
		},
	}
	c, nodes := cloudWithNodes(t, sharedPools(""), 2, fake.Options{Interceptor: funcs})
	lb, ctx := lbOf(t, c), t.Context()
	a, b := service("a"), service("b")
	for _, s := range []*v1.Service{a, b} {
		if _, err := lb.EnsureLoadBalancer(ctx, cluster, s, nodes); err != nil {
			t.Fatal(err)
		}
	}
	if missing == nil || !strings.Contains(missing.Error(), `backend pool "bp-404" not found`) {
		t.Errorf("creating a load balancer referencing a missing pool: %v; want the cloud's refusal", missing)
	}
	if got := len(c.Snapshot().LoadBalancers); got != 2 {
		t.Errorf("%d load balancers; want 2: the refused create made none", got)
	}
	st := c.Snapshot()
	if len(st.BackendPools) != 1 || pools == nil {
		t.Fatalf("%d pools after two Services (pool driver seen: %t); want one shared pool", len(st.BackendPools), pools != nil)
	}
	shared := st.BackendPools[0]
	if err := pools.DeletePool(ctx, &shared); !errors.Is(err, loadbalancer.ErrPoolInUse) {
		t.Errorf("deleting a pool two load balancers reference: %v; want ErrPoolInUse", err)
	}
	if got := len(c.Snapshot().BackendPools); got != 1 {
		t.Errorf("after the refused delete: %d pools; want the pool kept", got)
	}
	if err := lb.EnsureLoadBalancerDeleted(ctx, cluster, a); err != nil {
		t.Fatalf("EnsureLoadBalancerDeleted of one of two users: %v", err)
	}
	if deletes != 0 {
		t.Errorf("%d DeletePool calls after deleting one of two users; want none: the Reconciler knows b still references the pool", deletes)
	}
	if got := len(c.Snapshot().BackendPools); got != 1 {
		t.Errorf("after deleting one of two users: %d pools; want the pool kept for b", got)
	}
}

// TestBackendPoolsConfig checks the switch: its validation, the
// capabilities it implies, and the other mode's refusal of pool
// references.
func TestBackendPoolsConfig(t *testing.T) {
	bad := fake.Config{LoadBalancers: fake.LoadBalancerSection{BackendPools: "sometimes"}}
	if err := bad.Validate(); err == nil || !strings.Contains(err.Error(), "loadBalancers.backendPools") {
		t.Errorf("backendPools %q: %v; want an error naming loadBalancers.backendPools", bad.LoadBalancers.BackendPools, err)
	}
	_, err := fake.New(fake.Config{}, fake.Options{LoadBalancerCapabilities: &loadbalancer.Capabilities{SharedBackendPools: true}})
	if err == nil || !strings.Contains(err.Error(), "SharedBackendPools") {
		t.Errorf("SharedBackendPools without shared pools: %v; want an error naming it", err)
	}
	realistic, nodes := cloudWithNodes(t, fake.Config{ClusterID: cluster, Realistic: true}, 1)
	if _, err := lbOf(t, realistic).EnsureLoadBalancer(t.Context(), cluster, service("web"), nodes); err != nil && !isRetry(err) {
		t.Fatal(err)
	}
	if st := realistic.Snapshot(); len(st.BackendPools) != 0 || len(st.LoadBalancers[0].Spec.Backends) != 1 {
		t.Errorf("realistic mode: %d pools, %d own backends; want backends per Service (pools are opt-in)", len(st.BackendPools), len(st.LoadBalancers[0].Spec.Backends))
	}
}

// isRetry reports whether err asks to come back later (a provisioning
// load balancer in realistic mode).
func isRetry(err error) bool { return err != nil && strings.Contains(err.Error(), "no address yet") }

// TestBackendPoolsStateFile shares a cloud with shared pools between two
// Clouds through a state file: the second finds the first's pool and
// converges without a write, and a cloud-config without shared pools is
// refused.
func TestBackendPoolsStateFile(t *testing.T) {
	cfg := sharedPools("")
	cfg.StateFile = filepath.Join(t.TempDir(), "cloud.json")
	first, nodes := cloudWithNodes(t, cfg, 2)
	ctx := t.Context()
	if _, err := lbOf(t, first).EnsureLoadBalancer(ctx, cluster, service("a"), nodes); err != nil {
		t.Fatal(err)
	}
	cfg.Instances = nil
	second := newCloud(t, cfg)
	if _, err := lbOf(t, second).EnsureLoadBalancer(ctx, cluster, service("b"), nodes); err != nil {
		t.Fatal(err)
	}
	if got := second.Calls().ByOp[fake.OpApplyBackendPool]; got != 0 {
		t.Errorf("the second process wrote the pool %d times; want 0: it finds the first's", got)
	}
	if st := first.Snapshot(); len(st.BackendPools) != 1 || len(st.LoadBalancers) != 2 {
		t.Errorf("the shared cloud: %d pools, %d load balancers; want 1 and 2", len(st.BackendPools), len(st.LoadBalancers))
	}
	perService := cfg
	perService.LoadBalancers.BackendPools = ""
	if _, err := openCloud(perService, fake.Options{}); err == nil || !errors.Is(err, fake.ErrStateFile) {
		t.Errorf("a cloud-config without shared pools over the file: %v; want a state-file error", err)
	}
}

// TestBackendPoolCallsGoverned: under Config.Governor the pool calls take
// the writes budget too, a member change as a background call (the node
// sync's): with the budget spent by the bring-up, it is refused before it
// reaches the cloud.
func TestBackendPoolCallsGoverned(t *testing.T) {
	// A clock a second later at every reading: the reads budget (20/s, a
	// burst of 4) is always full, the writes budget (a write in 1000s)
	// only what its burst gave.
	clock := tickingClock{clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))}
	cfg := sharedPools("")
	cfg.Governor = &fake.GovernorSection{WritesPerSecond: 0.001, Burst: 4}
	c, nodes := cloudWithNodes(t, cfg, 2, fake.Options{Clock: clock})
	lb, ctx := lbOf(t, c), t.Context()
	if _, err := lb.EnsureLoadBalancer(ctx, cluster, service("web"), nodes[:1]); err != nil {
		t.Fatalf("EnsureLoadBalancer within the budget (a pool and a load balancer created, both urgent): %v", err)
	}
	err := lb.UpdateLoadBalancer(ctx, cluster, service("web"), nodes)
	if !errors.Is(err, governor.ErrOverBudget) {
		t.Errorf("UpdateLoadBalancer with the budget spent: %v; want the governor's refusal", err)
	}
	if got := c.Calls().ByOp[fake.OpApplyBackendPool]; got != 1 {
		t.Errorf("ApplyBackendPool calls: %d; want 1, the create: the refused member change never reaches the cloud", got)
	}
}

// TestBackendPoolFaults: the fault mechanism (the admin endpoint's POST
// /faults, through Funcs) reaches the pool operations like the others.
func TestBackendPoolFaults(t *testing.T) {
	boom := errors.New("boom")
	faults := fake.Failing(func(op fake.Op) (error, bool) {
		if op == fake.OpApplyBackendPool {
			return boom, false
		}
		return nil, false
	})
	c, nodes := cloudWithNodes(t, sharedPools(""), 1, fake.Options{Interceptor: faults})
	if _, err := lbOf(t, c).EnsureLoadBalancer(t.Context(), cluster, service("web"), nodes); !errors.Is(err, boom) {
		t.Errorf("EnsureLoadBalancer with ApplyBackendPool failing: %v; want the fault", err)
	}
	if st := c.Snapshot(); len(st.BackendPools)+len(st.LoadBalancers) != 0 {
		t.Errorf("after the failed pool create: %d pools, %d load balancers; want none", len(st.BackendPools), len(st.LoadBalancers))
	}
}
