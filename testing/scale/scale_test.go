package scale_test

import (
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/klog/v2"

	"github.com/ccmkit/ccmkit/fake"
	"github.com/ccmkit/ccmkit/instances"
	"github.com/ccmkit/ccmkit/testing/scale"
)

// runFake runs every scenario against a new fake cloud at a small size.
func runFake(t *testing.T) *scale.Report {
	t.Helper()
	cfg := fake.Config{ClusterID: "scale"}
	c, err := fake.New(cfg, fake.Options{})
	if err != nil {
		t.Fatal(err)
	}
	r, err := scale.Run(t.Context(), scale.FakeTarget(c, cfg), scale.Config{Nodes: 10, Services: 5, Spread: 100 * time.Millisecond, Compression: 300, NodesFirst: raceBuild, Skip: raceSkips})
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	return r
}

func TestMain(m *testing.M) {
	klog.LogToStderr(false)
	klog.SetOutput(io.Discard)
	os.Exit(m.Run())
}

// TestFake runs the scenarios once against the fake and checks the
// report.
func TestFake(t *testing.T) {
	r := runFake(t)
	t.Run("scenarios", func(t *testing.T) { checkScenarios(t, r) })
	t.Run("figures", func(t *testing.T) { checkFakeFigures(t, r) })
	t.Run("cloud minimum", func(t *testing.T) {
		// Backends per Service (the fake's default): 5 creates, a write
		// to each load balancer existing as a Node joins (35 when
		// interleaved, none with NodesFirst) and 10 routes; churn, one
		// Node replaced: 2 changes × 5 load balancers + 2 routes; 5
		// deletes and no pool.
		bringUp := int64(50)
		if raceBuild {
			bringUp = 15
		}
		checkCloudMinimum(t, r, scale.CloudCosts{CreateWrites: 1, NodeWrites: 1, DeleteWrites: 1, BackendPools: scale.BackendPoolsPerService, RouteTable: true},
			map[string]int64{scale.BringUp: bringUp, scale.Churn: 12, scale.Deletion: 5})
		// The floor the fake reaches: one Delete per load balancer. The
		// shared-pool figure it had before, 6, counted a pool this
		// composition does not have.
		s, _ := r.Scenario(scale.Deletion)
		if got := scale.Sum(s.Driver); got.Writes < s.CloudMinimum.Writes {
			t.Errorf("deletion: %d cloud writes, below the cloud minimum %d (%s)", got.Writes, s.CloudMinimum.Writes, s.CloudMinimum.Why)
		}
	})
}

// checkCloudMinimum checks that r was computed with costs (FakeTarget's,
// defaults filled in) and that each scenario of writes has its cloud
// minimum's writes.
func checkCloudMinimum(t *testing.T, r *scale.Report, costs scale.CloudCosts, writes map[string]int64) {
	t.Helper()
	if diff := cmp.Diff(costs, r.CloudCosts); diff != "" {
		t.Errorf("Report.CloudCosts (-want +got):\n%s", diff)
	}
	for name, want := range writes {
		if s, _ := r.Scenario(name); s.CloudMinimum.Writes != want {
			t.Errorf("%s: cloud minimum of %d writes (%s); want %d", name, s.CloudMinimum.Writes, s.CloudMinimum.Why, want)
		}
	}
}

// TestFakeRealistic runs the scenarios but the deletion against the fake
// in its realistic mode (asynchronous provisioning, rate limits with
// Retry-After, backends kept by instance ID), where every second Node is
// named unlike its instance, and checks that every load balancer ends
// with exactly the live instances as its backends: none lost to a Node
// whose name is not its instance's. Periods are compressed 20 times, not
// 300: each route controller period costs two reads (the route table and
// the instance list that decides Blackhole), and at 300 times that alone
// is 60 reads a second, three times the realistic budget of 20.
func TestFakeRealistic(t *testing.T) {
	cfg := fake.Config{ClusterID: "scale", Realistic: true}
	c, err := fake.New(cfg, fake.Options{})
	if err != nil {
		t.Fatal(err)
	}
	r, err := scale.Run(t.Context(), scale.FakeTarget(c, cfg), scale.Config{Nodes: 10, Services: 5, Spread: 100 * time.Millisecond,
		Compression: 20, Steady: 5 * time.Minute, NodesFirst: raceBuild, Skip: append([]string{scale.Deletion}, raceSkips...)})
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	checkScenarios(t, r)
	st := c.Snapshot()
	var live []string
	renamed := 0
	for _, in := range st.Instances {
		if in.State == instances.StateRunning {
			live = append(live, "fake://"+in.ID)
		}
		if strings.HasPrefix(in.Name, "vm-") {
			renamed++
		}
	}
	if renamed == 0 {
		t.Errorf("no instance named unlike its Node; FakeTarget should rename every second one")
	}
	if len(st.LoadBalancers) != 5 {
		t.Errorf("%d load balancers, want 5, one per Service", len(st.LoadBalancers))
	}
	slices.Sort(live)
	for _, lb := range st.LoadBalancers {
		var got []string
		for _, b := range lb.Spec.Backends {
			got = append(got, b.ProviderID)
		}
		slices.Sort(got)
		if diff := cmp.Diff(live, got); diff != "" {
			t.Errorf("load balancer %s: backends (-live instances +got):\n%s", lb.Name, diff)
		}
	}
}

func checkScenarios(t *testing.T, r *scale.Report) {
	var names []string
	for _, s := range r.Scenarios {
		names = append(names, s.Name)
	}
	want := []string{scale.BringUp, scale.Steady, scale.Churn, scale.Restart, scale.Deletion}
	if diff := cmp.Diff(want, names); diff != "" {
		t.Fatalf("scenarios (-want +got):\n%s", diff)
	}
	for _, s := range r.Scenarios {
		t.Run(s.Name, func(t *testing.T) {
			if s.Skipped != "" {
				t.Skipf("skipped: %s", s.Skipped)
			}
			for _, m := range s.Minimum {
				if got := scale.Count(s.Calls, m.Operation); got < m.Calls {
					t.Errorf("%s: %d calls, below the minimum %d (%s)", m.Operation, got, m.Calls, m.Why)
				}
			}
			checkBoundaries(t, s)
		})
	}
}

// checkBoundaries checks that the fake's Driver-boundary counts agree with
// the interface-boundary ones: a Driver write happens only inside an
// interface call that may write, and ccmkit's blocks make few per call
// (the Reconciler at most two Applies per Ensure or Update of these
// one-port Services: loadbalancer.Plan emits one ActionAddBackends and
// one ActionRemoveBackends for a change of Nodes, and a create is one
// action; one Delete per EnsureDeleted of a Service that owns one load
// balancer; the whole Table one WriteTable per batch of creates and
// deletes).
func checkBoundaries(t *testing.T, s scale.ScenarioReport) {
	t.Helper()
	c, d := s.Calls, s.Driver
	rows := []struct {
		name   string
		driver int64
		bound  int64
		reason string
	}{
		{name: "ApplyLoadBalancer", driver: scale.Count(d, string(fake.OpApplyLoadBalancer)),
			bound: 2 * (scale.Count(c, "EnsureLoadBalancer") + scale.Count(c, "UpdateLoadBalancer")), reason: "two Applies at most per Ensure or Update"},
		{name: "DeleteLoadBalancer", driver: scale.Count(d, string(fake.OpDeleteLoadBalancer)),
			bound: scale.Count(c, "EnsureLoadBalancerDeleted"), reason: "one owned load balancer per Service"},
		{name: "WriteRouteTable", driver: scale.Count(d, string(fake.OpWriteRouteTable)),
			bound: scale.Count(c, "CreateRoute") + scale.Count(c, "DeleteRoute"), reason: "one table write per batch of route calls"},
	}
	for _, row := range rows {
		if row.driver > row.bound {
			t.Errorf("%s: %d Driver calls, more than the %d interface calls that may cause them (%s)", row.name, row.driver, row.bound, row.reason)
		}
	}
}

// checkFakeFigures pins what ccmkit's fake promises at the Driver
// boundary: one load balancer created per Service, none rewritten after a
// restart (a converged Ensure makes no write), one deleted per Service.
func checkFakeFigures(t *testing.T, r *scale.Report) {
	tests := []struct {
		name     string
		scenario string
		op       fake.Op
		want     func(int64) bool
		reason   string
	}{
		{name: "bring-up creates", scenario: scale.BringUp, op: fake.OpApplyLoadBalancer, want: func(n int64) bool { return n >= 5 }, reason: "at least one Apply per Service"},
		{name: "restart writes no load balancer", scenario: scale.Restart, op: fake.OpApplyLoadBalancer, want: func(n int64) bool { return n == 0 }, reason: "a converged EnsureLoadBalancer makes zero cloud writes"},
		{name: "restart writes no route", scenario: scale.Restart, op: fake.OpWriteRouteTable, want: func(n int64) bool { return n == 0 }, reason: "every route exists"},
		{name: "steady writes nothing", scenario: scale.Steady, op: fake.OpApplyLoadBalancer, want: func(n int64) bool { return n == 0 }, reason: "nothing changed"},
		{name: "deletion deletes each", scenario: scale.Deletion, op: fake.OpDeleteLoadBalancer, want: func(n int64) bool { return n == 5 }, reason: "one Delete per load balancer"},
		{name: "churn rewrites routes", scenario: scale.Churn, op: fake.OpWriteRouteTable, want: func(n int64) bool { return n >= 1 }, reason: "a replaced Node's route moves"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, ok := r.Scenario(tc.scenario)
			if !ok {
				t.Fatalf("no scenario %s", tc.scenario)
			}
			if s.Skipped != "" {
				t.Skipf("skipped: %s", s.Skipped)
			}
			if got := scale.Count(s.Driver, string(tc.op)); !tc.want(got) {
				t.Errorf("%s %s: %d Driver calls (%s)", tc.scenario, tc.op, got, tc.reason)
			}
		})
	}
}

func TestConfigValidate(t *testing.T) {
	tests := []struct {
		name   string
		cfg    scale.Config
		want   string
		reason string
	}{
		{name: "no nodes", cfg: scale.Config{}, want: "Config.Nodes 0: expected at least 1", reason: "a cluster needs a Node"},
		{name: "negative services", cfg: scale.Config{Nodes: 1, Services: -1}, want: "Config.Services -1: expected 0 or more", reason: "a count"},
		{name: "churn over 100", cfg: scale.Config{Nodes: 1, ChurnPercent: 101}, want: "Config.ChurnPercent 101: expected 0 (the default, 10) to 100", reason: "a percentage"},
		{name: "negative compression", cfg: scale.Config{Nodes: 1, Compression: -1}, want: "Config.Compression -1: expected 0 (the default, 100) or more", reason: "a divisor"},
		{name: "negative route period", cfg: scale.Config{Nodes: 1, RoutePeriod: -time.Second}, want: "Config.RoutePeriod -1s: expected 0 (the default, 10s) or more", reason: "a period"},
		{name: "negative node monitor period", cfg: scale.Config{Nodes: 1, NodeMonitorPeriod: -time.Second}, want: "Config.NodeMonitorPeriod -1s: expected 0 (the default, 5s) or more", reason: "a period"},
		{name: "negative drift repair period", cfg: scale.Config{Nodes: 1, DriftRepairPeriod: -time.Second}, want: "Config.DriftRepairPeriod -1s: expected 0 (off) or more", reason: "a period"},
		{name: "negative steady", cfg: scale.Config{Nodes: 1, Steady: -time.Minute}, want: "Config.Steady -1m0s: expected 0 (the default, 1h) or more", reason: "a duration"},
		{name: "negative timeout", cfg: scale.Config{Nodes: 1, Timeout: -time.Second}, want: "Config.Timeout -1s: expected 0 (the default, 2m) or more", reason: "a bound"},
		{name: "skip bring-up", cfg: scale.Config{Nodes: 1, Skip: []string{scale.BringUp}}, want: `Config.Skip ["bring-up"]: expected only steady, churn, restart or deletion (every scenario needs the bring-up)`, reason: "the others run over its cluster"},
		{name: "MaxInt nodes", cfg: scale.Config{Nodes: math.MaxInt}, want: "Config.Nodes 9223372036854775807: expected at most 8192 (a /24 pod CIDR per Node in 100.64.0.0/10, with room for the churn's)", reason: "a size that cannot run (issue 29)"},
		{name: "nodes over the bound", cfg: scale.Config{Nodes: 8193}, want: "Config.Nodes 8193: expected at most 8192 (a /24 pod CIDR per Node in 100.64.0.0/10, with room for the churn's)", reason: "the bound is exact"},
		{name: "nodes at the bound", cfg: scale.Config{Nodes: 8192, Services: 16384}, want: "<nil>", reason: "both bounds are sizes that run"},
		{name: "MaxInt services", cfg: scale.Config{Nodes: 1, Services: math.MaxInt}, want: "Config.Services 9223372036854775807: expected at most 16384", reason: "a size that cannot run"},
		{name: "unknown scenario in Skip", cfg: scale.Config{Nodes: 1, Skip: []string{scale.Steady, "stedy"}}, want: `Config.Skip[1] "stedy": expected steady, churn, restart or deletion`, reason: "a misspelt scenario would run unnoticed"},
		{name: "scenario in another case", cfg: scale.Config{Nodes: 1, Skip: []string{"Churn"}}, want: `Config.Skip[0] "Churn": expected steady, churn, restart or deletion`, reason: "names are exact"},
		{name: "cluster name with a space", cfg: scale.Config{Nodes: 1, ClusterName: "my cluster"}, want: `Config.ClusterName "my cluster": expected printable characters without spaces, as a --cluster-name (the upstream default is "kubernetes")`, reason: "no CCM runs with it"},
		{name: "cluster name with NUL", cfg: scale.Config{Nodes: 1, ClusterName: "c\x00"}, want: `Config.ClusterName "c\x00": expected printable characters without spaces, as a --cluster-name (the upstream default is "kubernetes")`, reason: "a control character"},
		{name: "valid", cfg: scale.Config{Nodes: 1}, want: "<nil>", reason: "defaults fill the rest"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, fmt.Sprint(tc.cfg.Validate())); diff != "" {
				t.Errorf("%s (-want +got):\n%s", tc.reason, diff)
			}
		})
	}
}

func TestCloudCostsValidate(t *testing.T) {
	tests := []struct {
		name   string
		costs  scale.CloudCosts
		want   string
		reason string
	}{
		{name: "negative create writes", costs: scale.CloudCosts{CreateWrites: -1}, want: "CloudCosts.CreateWrites -1: expected 0 (the default, 1) or more", reason: "a create is at least one write"},
		{name: "negative create writes per port", costs: scale.CloudCosts{CreateWritesPerPort: -4}, want: "CloudCosts.CreateWritesPerPort -4: expected 0 (the default, none) or more", reason: "a count"},
		{name: "negative node writes", costs: scale.CloudCosts{NodeWrites: -1}, want: "CloudCosts.NodeWrites -1: expected 0 (the default, 1) or more", reason: "a count"},
		{name: "negative delete writes", costs: scale.CloudCosts{DeleteWrites: -2}, want: "CloudCosts.DeleteWrites -2: expected 0 (the default, 1) or more", reason: "a delete is at least one write"},
		{name: "negative delete writes per port", costs: scale.CloudCosts{DeleteWritesPerPort: -3}, want: "CloudCosts.DeleteWritesPerPort -3: expected 0 (the default, none) or more", reason: "a count"},
		{name: "unknown backend pools", costs: scale.CloudCosts{BackendPools: "perNode"}, want: `CloudCosts.BackendPools "perNode": expected "" (the default, shared), "shared", "perService" or "perPort"`, reason: "one of the modes"},
		{name: "zero value", costs: scale.CloudCosts{}, want: "<nil>", reason: "a flat cloud with shared pools"},
		{name: "hierarchical", costs: scale.CloudCosts{CreateWrites: 1, CreateWritesPerPort: 4, BackendPools: scale.BackendPoolsPerPort, NodeWrites: 1, DeleteWrites: 1}, want: "<nil>", reason: "OpenStack Octavia"},
		{name: "shared spelt out", costs: scale.CloudCosts{BackendPools: scale.BackendPoolsShared}, want: "<nil>", reason: "the default named"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, fmt.Sprint(tc.costs.Validate())); diff != "" {
				t.Errorf("%s (-want +got):\n%s", tc.reason, diff)
			}
		})
	}
}

// TestCloudCostsString: a report names the costs its minimums used.
func TestCloudCostsString(t *testing.T) {
	tests := []struct {
		name   string
		costs  scale.CloudCosts
		want   string
		reason string
	}{
		{name: "zero value", costs: scale.CloudCosts{}, reason: "the defaults filled in",
			want: "a load balancer of P ports created in 1 write, deleted in 1 write; one backend pool shared by every load balancer, 1 write to each per Node change"},
		{name: "per Service", costs: scale.CloudCosts{BackendPools: scale.BackendPoolsPerService, NodeWrites: 2}, reason: "a pool per load balancer",
			want: "a load balancer of P ports created in 1 write, deleted in 1 write; a backend pool per load balancer, 2 writes to each per Node change"},
		{name: "hierarchical", costs: scale.CloudCosts{CreateWritesPerPort: 4, DeleteWritesPerPort: 3, BackendPools: scale.BackendPoolsPerPort}, reason: "per-port costs as formulas of P",
			want: "a load balancer of P ports created in 1 + 4×P writes, deleted in 1 + 3×P writes; a backend pool per port of each load balancer, 1 write to each per Node change"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, tc.costs.String()); diff != "" {
				t.Errorf("%s (-want +got):\n%s", tc.reason, diff)
			}
		})
	}
}

func TestRunRejects(t *testing.T) {
	cfg := fake.Config{}
	c, err := fake.New(cfg, fake.Options{})
	if err != nil {
		t.Fatal(err)
	}
	noAdd := scale.FakeTarget(c, cfg)
	noAdd.AddInstance = nil
	badCosts := scale.FakeTarget(c, cfg)
	badCosts.CloudCosts.NodeWrites = -1
	tests := []struct {
		name   string
		target *scale.Target
		cfg    scale.Config
		want   string
		reason string
	}{
		{name: "nil target", target: nil, cfg: scale.Config{Nodes: 1}, want: "scale.Run: Target.Cloud is nil: expected a cloudprovider.Interface", reason: "nothing to run against"},
		{name: "no AddInstance", target: noAdd, cfg: scale.Config{Nodes: 1}, want: "scale.Run: Target.AddInstance is nil: expected a function that creates an instance", reason: "Nodes need instances"},
		{name: "invalid costs", target: badCosts, cfg: scale.Config{Nodes: 1}, want: "scale.Run: Target.CloudCosts.NodeWrites -1: expected 0 (the default, 1) or more", reason: "the minimums need valid costs"},
		{name: "too many nodes", target: scale.FakeTarget(c, cfg), cfg: scale.Config{Nodes: 9000}, want: "scale.Run: Config.Nodes 9000: expected at most 8192 (a /24 pod CIDR per Node in 100.64.0.0/10, with room for the churn's)", reason: "one /24 pod CIDR per Node in a /10, churn included"},
		{name: "invalid config", target: scale.FakeTarget(c, cfg), cfg: scale.Config{}, want: "scale.Run: Config.Nodes 0: expected at least 1", reason: "Validate runs first"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := scale.Run(t.Context(), tc.target, tc.cfg)
			if diff := cmp.Diff(tc.want, fmt.Sprint(err)); diff != "" {
				t.Errorf("%s (-want +got):\n%s", tc.reason, diff)
			}
		})
	}
}

// TestNotConverged: a scenario that cannot reach its goal in time is an
// error wrapping ErrNotConverged that names it.
func TestNotConverged(t *testing.T) {
	cfg := fake.Config{}
	c, err := fake.New(cfg, fake.Options{})
	if err != nil {
		t.Fatal(err)
	}
	r, err := scale.Run(t.Context(), scale.FakeTarget(c, cfg), scale.Config{Nodes: 1, Spread: -1, Timeout: time.Nanosecond})
	if !errors.Is(err, scale.ErrNotConverged) || !strings.Contains(fmt.Sprint(err), "scale.Run: bring-up: not converged") {
		t.Errorf("Run: %v, want an error wrapping scale.ErrNotConverged for the bring-up", err)
	}
	if r == nil || len(r.Scenarios) != 0 {
		t.Errorf("Run's report: %+v, want one with no scenario", r)
	}
}
