package scale_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/ccmkit/ccmkit/fake"
	"github.com/ccmkit/ccmkit/instances"
	"github.com/ccmkit/ccmkit/provider"
	"github.com/ccmkit/ccmkit/testing/scale"
)

// TestFakeSharedPools runs the scenarios against the fake composed as the
// README's "Running at scale" recommends (shared backend pools, a route
// list TTL, the caches' TTLs a simulated minute) and checks the cloud-call
// budget of issue 16 at a small size: bring-up and deletion writing at
// most twice their cloud minimum's writes (not churn: at 10 Nodes it
// replaces one, and the periodic lists while it runs outweigh that one
// change's six calls), a restart that writes nothing and reads each
// capability at most three times, a steady state that writes nothing and
// reads no more than its TTLs allow, and no load balancer or pool left
// after the deletion.
func TestFakeSharedPools(t *testing.T) {
	const compression = 300
	ttl := time.Minute / compression
	cfg := fake.Config{ClusterID: "scale", LoadBalancers: fake.LoadBalancerSection{BackendPools: fake.BackendPoolsShared}}
	cfg.InstanceCacheTTL.Duration, cfg.LoadBalancerCacheTTL.Duration, cfg.Routes.ListTTL.Duration = ttl, ttl, ttl
	c, err := fake.New(cfg, fake.Options{})
	if err != nil {
		t.Fatal(err)
	}
	steady := 20 * time.Minute
	r, err := scale.Run(t.Context(), scale.FakeTarget(c, cfg), scale.Config{Nodes: 10, Services: 5, Spread: 100 * time.Millisecond,
		Compression: compression, Steady: steady, NodesFirst: raceBuild, Skip: raceSkips})
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	checkScenarios(t, r)
	// Shared pools: the zero CloudCosts, the figures as before they could
	// be stated. 5 creates, the pool's creation, a pool write per Node
	// joining after the first Service (9 when interleaved, none with
	// NodesFirst) and 10 routes; churn: 2 pool writes + 2 routes; 5
	// deletes and the pool.
	bringUp := int64(25)
	if raceBuild {
		bringUp = 16
	}
	checkCloudMinimum(t, r, scale.CloudCosts{CreateWrites: 1, NodeWrites: 1, DeleteWrites: 1, BackendPools: scale.BackendPoolsShared, RouteTable: true},
		map[string]int64{scale.BringUp: bringUp, scale.Churn: 4, scale.Deletion: 6})
	// Writes only: at this size the reads are mostly the caches' periodic
	// lists, as many as the scenario lasts TTLs, and a loaded machine
	// stretches a scenario (BENCHMARKS.md has the totals at 1,000 Nodes).
	for _, name := range []string{scale.BringUp, scale.Deletion} {
		s, _ := r.Scenario(name)
		if got := scale.Sum(s.Driver); got.Writes > 2*s.CloudMinimum.Writes {
			t.Errorf("%s: %d cloud writes, more than twice the cloud minimum's %d (%s)", name, got.Writes, s.CloudMinimum.Writes, s.CloudMinimum.Why)
		}
	}
	// Steady: a simulated 20 minutes; each cache lists at most once per
	// TTL (a simulated minute), and the route table's list also lists the
	// instances (the Blackhole check): three list sources, each at most
	// steady/TTL + 1 times.
	s, _ := r.Scenario(scale.Steady)
	perCache := int64(steady/time.Minute) + 1
	if got := scale.Sum(s.Driver); got.Writes != 0 || got.Reads > 3*perCache {
		t.Errorf("steady: %d reads, %d writes; want no write and at most %d reads (3 lists, each at most once per TTL)", got.Reads, got.Writes, 3*perCache)
	}
	if s, _ := r.Scenario(scale.Restart); s.Skipped == "" {
		if got := scale.Sum(s.Driver); got.Writes != 0 {
			t.Errorf("restart: %d writes; want none (everything converged)", got.Writes)
		}
		for capability, got := range scale.ByCapability(s.Driver) {
			if got.Reads > 3 {
				t.Errorf("restart: %d reads of %s; want at most 3", got.Reads, capability)
			}
		}
	}
	if st := c.Snapshot(); len(st.LoadBalancers)+len(st.BackendPools) != 0 {
		t.Errorf("after the deletion: %d load balancers, %d pools; want none", len(st.LoadBalancers), len(st.BackendPools))
	}
}

// TestLoadBalancerCount: a provider whose cloud holds other than one load
// balancer per Service (a duplicate here) fails the run with an error
// wrapping ErrLoadBalancerCount that names the scenario and both counts.
func TestLoadBalancerCount(t *testing.T) {
	cfg := fake.Config{ClusterID: "scale"}
	c, err := fake.New(cfg, fake.Options{})
	if err != nil {
		t.Fatal(err)
	}
	target := scale.FakeTarget(c, cfg)
	count := target.LoadBalancers
	target.LoadBalancers = func(ctx context.Context) (int, error) {
		n, err := count(ctx)
		return n + 1, err // a duplicate the provider made
	}
	_, err = scale.Run(t.Context(), target, scale.Config{Nodes: 2, Services: 1, Spread: -1, NodesFirst: true,
		Skip: []string{scale.Steady, scale.Churn, scale.Restart, scale.Deletion}})
	want := "scale.Run: bring-up: wrong number of load balancers: the cloud holds 2 for the cluster, expected 1 (one per Service)"
	if !errors.Is(err, scale.ErrLoadBalancerCount) || fmt.Sprint(err) != want {
		t.Errorf("Run = %v; want %q, wrapping ErrLoadBalancerCount", err, want)
	}
}

// TestFakeCoalesced runs the fake's default composition (backends per
// load balancer) with a coalescing window (issue 27) through bring-up and
// churn: each converges with every load balancer's backends exactly the
// live Nodes (Target.Backends). Bring-up's writes stay within twice the
// coalesced minimum; churn writes each load balancer at most twice, once
// for the Node joining and once for the one leaving, which come a
// node-monitor grace period apart (the minimum's floor of one write per
// load balancer needs both in one window).
func TestFakeCoalesced(t *testing.T) {
	cfg := fake.Config{ClusterID: "scale", LoadBalancers: fake.LoadBalancerSection{CoalesceWindow: &provider.Duration{Duration: 200 * time.Millisecond}}}
	c, err := fake.New(cfg, fake.Options{})
	if err != nil {
		t.Fatal(err)
	}
	r, err := scale.Run(t.Context(), scale.FakeTarget(c, cfg), scale.Config{Nodes: 10, Services: 5, Spread: 100 * time.Millisecond,
		NodesFirst: raceBuild, Skip: []string{scale.Steady, scale.Restart}})
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	for _, name := range []string{scale.BringUp, scale.Churn} {
		s, _ := r.Scenario(name)
		got, min := scale.Sum(s.Driver), s.CoalescedMinimum
		t.Logf("%s: %d writes; coalesced minimum %d (%s), per change %d; %v", name, got.Writes, min.Writes, min.Why, s.CloudMinimum.Writes, s.Driver)
		if name == scale.BringUp && got.Writes > 2*min.Writes {
			t.Errorf("%s: %d writes; want at most twice the coalesced minimum's %d (%s)", name, got.Writes, min.Writes, min.Why)
		}
		if lb := scale.ByCapability(s.Driver)["loadbalancer"].Writes; name == scale.Churn && lb > 2*5 {
			t.Errorf("%s: %d load-balancer writes; want at most 2 per load balancer, 10", name, lb)
		}
	}
}

// TestBackendsChecked: a provider whose load balancer lacks a live Node
// (a backend change it lost) does not converge: the bring-up fails with
// ErrNotConverged naming the load balancer and the Node. Against the
// real Backends the same run converges.
func TestBackendsChecked(t *testing.T) {
	run := func(lose bool) error {
		cfg := fake.Config{ClusterID: "scale"}
		c, err := fake.New(cfg, fake.Options{})
		if err != nil {
			t.Fatal(err)
		}
		target := scale.FakeTarget(c, cfg)
		if lose {
			backends := target.Backends
			target.Backends = func(ctx context.Context) (map[string][]string, error) {
				got, err := backends(ctx)
				for lb, nodes := range got {
					got[lb] = slices.DeleteFunc(nodes, func(n string) bool { return n == "node-00001" })
				}
				return got, err
			}
		}
		_, err = scale.Run(t.Context(), target, scale.Config{Nodes: 2, Services: 1, Spread: -1, Timeout: 5 * time.Second, NodesFirst: raceBuild,
			Skip: []string{scale.Steady, scale.Churn, scale.Restart, scale.Deletion}})
		return err
	}
	if err := run(false); err != nil {
		t.Fatalf("Run with the fake's backends: %v", err)
	}
	err := run(true)
	want := "1 load balancers without exactly the live Nodes as backends, first "
	if !errors.Is(err, scale.ErrNotConverged) || !strings.Contains(fmt.Sprint(err), want) || !strings.Contains(fmt.Sprint(err), "1 Nodes missing [node-00001]") {
		t.Errorf("Run = %v; want ErrNotConverged with %q naming node-00001 missing", err, want)
	}
}

// TestByCapability sums a report's counts per capability.
func TestByCapability(t *testing.T) {
	got := scale.ByCapability([]scale.OpCount{
		{Capability: "loadbalancer", Operation: "ListLoadBalancers", Calls: 2, Throttled: 1},
		{Capability: "loadbalancer", Operation: "ApplyLoadBalancer", Write: true, Calls: 3},
		{Capability: "routes", Operation: "ReadRouteTable", Calls: 1},
	})
	if s := fmt.Sprint(got); !strings.Contains(s, "loadbalancer:{2 3 1}") || !strings.Contains(s, "routes:{1 0 0}") {
		t.Errorf("ByCapability = %s; want loadbalancer 2 reads, 3 writes, 1 throttled; routes 1 read", s)
	}
}

// TestFakeRealisticSharedPools runs the scenarios, deletion included, on
// the fake's realistic mode (load balancers provisioning asynchronously,
// 20 reads/s and 10 writes/s with Retry-After, backends kept by instance
// ID) with shared backend pools, where every second Node is named unlike
// its instance, and checks that every load balancer ends up referencing
// the one pool whose members are exactly the live instances, and that the
// deletion leaves no load balancer and no pool. Periods are compressed 20
// times, as in TestFakeRealistic, to keep the controllers' periodic reads
// within the realistic read budget.
func TestFakeRealisticSharedPools(t *testing.T) {
	cfg := fake.Config{ClusterID: "scale", Realistic: true, LoadBalancers: fake.LoadBalancerSection{BackendPools: fake.BackendPoolsShared}}
	c, err := fake.New(cfg, fake.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var st fake.State
	target := scale.FakeTarget(c, cfg)
	count := target.LoadBalancers
	target.LoadBalancers = func(ctx context.Context) (int, error) {
		if s := c.Snapshot(); len(s.LoadBalancers) > 0 {
			st = s // the last state with load balancers: after restart
		}
		return count(ctx)
	}
	r, err := scale.Run(t.Context(), target, scale.Config{Nodes: 10, Services: 5, Spread: 100 * time.Millisecond,
		Compression: 20, Steady: 5 * time.Minute, NodesFirst: raceBuild, Skip: raceSkips})
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	checkScenarios(t, r)
	var live []string
	for _, in := range st.Instances {
		if in.State == instances.StateRunning {
			live = append(live, "fake://"+in.ID)
		}
	}
	slices.Sort(live)
	if len(st.BackendPools) != 1 {
		t.Fatalf("%d backend pools before the deletion; want one, shared by every load balancer", len(st.BackendPools))
	}
	pool := st.BackendPools[0]
	var members []string
	for _, b := range pool.Spec.Backends {
		members = append(members, b.ProviderID)
	}
	slices.Sort(members)
	if diff := cmp.Diff(live, members); diff != "" {
		t.Errorf("pool %s: members (-live instances +got):\n%s", pool.ID, diff)
	}
	for _, lb := range st.LoadBalancers {
		if lb.Spec.BackendPool != pool.ID {
			t.Errorf("load balancer %s references pool %q; want %q", lb.Name, lb.Spec.BackendPool, pool.ID)
		}
	}
	if end := c.Snapshot(); len(end.LoadBalancers)+len(end.BackendPools) != 0 {
		t.Errorf("after the deletion: %d load balancers, %d pools; want none", len(end.LoadBalancers), len(end.BackendPools))
	}
}

// TestFakeDriftRepair runs the steady state with ccmkit's drift-repair
// controller (Config.DriftRepairPeriod) next to the upstream ones, over
// the fake in its realistic mode (load balancers provisioning
// asynchronously, a rate limit, backends kept by instance ID) with shared
// backend pools, every second Node named unlike its instance: a simulated
// 5 minutes with a 1-minute period make about five passes, each at the
// minimum of one load-balancer List and one pool List (nothing else lists
// them in a steady state: the service controller's node sync runs every
// 100s of wall time, and the caches' TTLs are a minute of wall time) and no
// write. Periods are compressed 20 times, as in
// TestFakeRealisticSharedPools.
func TestFakeDriftRepair(t *testing.T) {
	cfg := fake.Config{ClusterID: "scale", Realistic: true, LoadBalancers: fake.LoadBalancerSection{BackendPools: fake.BackendPoolsShared}}
	c, err := fake.New(cfg, fake.Options{})
	if err != nil {
		t.Fatal(err)
	}
	steady, period := 5*time.Minute, time.Minute
	r, err := scale.Run(t.Context(), scale.FakeTarget(c, cfg), scale.Config{Nodes: 10, Services: 5, Spread: 100 * time.Millisecond,
		Compression: 20, Steady: steady, DriftRepairPeriod: period, NodesFirst: true,
		Skip: []string{scale.Churn, scale.Restart, scale.Deletion}})
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	s, _ := r.Scenario(scale.Steady)
	lists := map[string]int64{}
	for _, op := range s.Driver {
		lists[op.Operation] = op.Calls
	}
	passes := int64(steady / period)
	for _, op := range []fake.Op{fake.OpListLoadBalancers, fake.OpListBackendPools} {
		if n := lists[string(op)]; n < passes/2 || n > passes+2 {
			t.Errorf("steady with drift repair every %v for %v: %d %s %v; want about %d, one per pass", period, steady, n, op, s.Driver, passes)
		}
	}
	if got := scale.Sum(s.Driver); got.Writes != 0 {
		t.Errorf("steady with drift repair: %d writes %v; want none", got.Writes, s.Driver)
	}
}

// TestFakeHierarchical runs bring-up and deletion against the fake's
// hierarchical mode (issue 25: a load balancer, then per port a listener,
// a pool, its members and a monitor, each its own write, the load balancer
// busy after each write and refusing writes meanwhile) and checks that
// both stay within twice the coalesced cloud minimum the fake states for
// such a cloud (Target.CloudCosts; the floor, as the service controller's
// node syncs in effect coalesce Node changes), writes and load-balancer
// reads each, with no load balancer duplicated or left over and every
// pool's members exactly the live Nodes (Target.Backends). Busy is 50ms after each write, a twentieth of
// Octavia's, as the simulator compresses time.
func TestFakeHierarchical(t *testing.T) {
	const compression = 300
	ttl := time.Hour / compression // longer than the scenarios: the reads are the work's, not the caches' periodic lists
	cfg := fake.Config{ClusterID: "scale", LoadBalancers: fake.LoadBalancerSection{Hierarchical: true, BusyAfterWrite: &provider.Duration{Duration: 50 * time.Millisecond}}}
	cfg.InstanceCacheTTL.Duration, cfg.LoadBalancerCacheTTL.Duration, cfg.Routes.ListTTL.Duration = ttl, ttl, ttl
	c, err := fake.New(cfg, fake.Options{})
	if err != nil {
		t.Fatal(err)
	}
	r, err := scale.Run(t.Context(), scale.FakeTarget(c, cfg), scale.Config{Nodes: 10, Services: 5, Spread: 100 * time.Millisecond,
		Compression: compression, NodesFirst: raceBuild, Skip: []string{scale.Steady, scale.Churn, scale.Restart}})
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	for _, name := range []string{scale.BringUp, scale.Deletion} {
		s, _ := r.Scenario(name)
		got, min := scale.Sum(s.Driver), s.CoalescedMinimum
		t.Logf("%s: %d reads, %d writes; coalesced minimum %d reads, %d writes (%s), per change %d writes; by operation %v",
			name, got.Reads, got.Writes, min.Reads, min.Writes, min.Why, s.CloudMinimum.Writes, s.Driver)
		// Reads: the load balancers' (the tree this test is about) against
		// their minimum, a confirming read per new Service; the instance
		// and route-table reads are the route controller's and the
		// cloud node controller's, which a -race build (Nodes first,
		// stretched) makes more of: TestFakeSharedPools bounds those.
		lbReads, lbMin := scale.ByCapability(s.Driver)["loadbalancer"].Reads, int64(0)
		if name == scale.BringUp {
			lbMin = 5 // one per Service
		}
		if got.Writes > 2*min.Writes || lbReads > 2*max(lbMin, 1) {
			t.Errorf("%s: %d writes, %d load-balancer reads; want within twice the coalesced minimum's %d writes (%s) and %d reads", name, got.Writes, lbReads, min.Writes, min.Why, lbMin)
		}
	}
	t.Logf("writes refused as busy, in all: %d", c.Calls().Busy)
}
