package statefile_test

import (
	"context"
	"net/netip"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"

	"github.com/ccmkit/ccmkit/fake"
	"github.com/ccmkit/ccmkit/fake/statefile"
	"github.com/ccmkit/ccmkit/loadbalancer"
)

// TestStateFileKeepsListenerTrees: a saved state with every field of a
// hierarchical cloud (listener app protocols, settings and IDs, pools with
// IDs, members and monitors, listenerPools, busy-until, the listener and
// pool ID counters, the hierarchical cloud-config) loads back as it was
// saved, through the file.
func TestStateFileKeepsListenerTrees(t *testing.T) {
	hc := loadbalancer.HealthCheck{Protocol: loadbalancer.HealthCheckHTTP, Port: 10256, Path: "/healthz"}
	lb := &loadbalancer.LoadBalancer{ID: "lb-1", Name: "a-web", Tags: map[string]string{"k": "v"},
		Spec: loadbalancer.Spec{
			IPFamilies: []v1.IPFamily{v1.IPv4Protocol}, ListenerPools: true, BackendKey: loadbalancer.BackendKeyProviderID,
			Listeners: []loadbalancer.Listener{
				{ListenerKey: loadbalancer.ListenerKey{Family: v1.IPv4Protocol, Protocol: v1.ProtocolTCP, Port: 80}, NodePort: 30080, ID: "lis-1",
					AppProtocol: "http", Settings: map[string]string{"fake.ccmkit.io/x": "1"},
					Pool: &loadbalancer.ListenerPool{ID: "pool-1", Backends: []loadbalancer.Backend{{ProviderID: "fake://i-1"}}, HealthCheck: &hc}},
				{ListenerKey: loadbalancer.ListenerKey{Family: v1.IPv4Protocol, Protocol: v1.ProtocolTCP, Port: 443}, NodePort: 30443, ID: "lis-2",
					Pool: &loadbalancer.ListenerPool{ID: "pool-2"}},
				{ListenerKey: loadbalancer.ListenerKey{Family: v1.IPv4Protocol, Protocol: v1.ProtocolTCP, Port: 8080}, NodePort: 30880, ID: "lis-3"},
			},
		},
		Ingress: []loadbalancer.Ingress{{IP: "198.18.0.1"}},
	}
	want := &fake.SavedState{
		Cloud: fake.SavedCloud{InstanceCIDRs: []string{"10.0.0.0/16"}, LoadBalancers: fake.LoadBalancerSection{
			IPv4Pool: "198.18.0.0/15", IPv6Pool: "2001:db8:1b::/112", Backends: fake.BackendsInstanceID, BackendPools: fake.BackendPoolsPerService, Hierarchical: true}},
		NextLoadBalancer: 1, NextListener: 3, NextListenerPool: 2,
		LoadBalancers: []fake.SavedLoadBalancer{{LoadBalancer: lb, VIPs: []netip.Addr{netip.MustParseAddr("198.18.0.1")},
			ReadyAt: epoch.Add(2 * time.Second), BusyUntil: epoch.Add(time.Second)}},
	}
	path := filepath.Join(t.TempDir(), "cloud.json")
	save, err := statefile.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	unlock, err := save.Lock(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if err := save.Save(want); err != nil {
		t.Fatal(err)
	}
	unlock()
	load, err := statefile.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	unlock, err = load.Lock(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer unlock()
	var got *fake.SavedState
	if ok, err := load.Load(func(st *fake.SavedState) error { got = st; return nil }); !ok || err != nil {
		t.Fatalf("Load = %v, %v; want the saved state", ok, err)
	}
	if diff := cmp.Diff(want, got, cmpModel); diff != "" {
		t.Errorf("state through the file (-saved +loaded):\n%s", diff)
	}
}

// TestStateFileHierarchical: two processes on one state file share a
// hierarchical cloud: the tree, its IDs and the moment each load balancer
// stops being busy, so a write through one to a load balancer the other
// just wrote is refused; the listener and pool ID counters go on from the
// file. A flat cloud's file has none of these fields, as files written
// before them.
//
// Each EnsureLoadBalancer runs with a deadline shorter than the busy
// window, so the Reconciler does not wait for the cloud (it would wait on
// the fake clock, which only the test steps): it makes one write and
// returns the busy answer; the clock is stepped past the window between
// calls.
func TestStateFileHierarchical(t *testing.T) {
	clk, withClock := newClock()
	cfg := fake.Config{LoadBalancers: fake.LoadBalancerSection{Hierarchical: true}, Instances: []fake.Instance{{Name: "node-01"}}}
	clouds, path := sharedClouds(t, cfg, 2, withClock)
	a, b := clouds[0], clouds[1]
	nodes := []*v1.Node{mustNode(t, a, "i-1")}
	if _, err := lbOf(t, a).EnsureLoadBalancer(noWait(t), cluster, service("web"), nodes); err == nil {
		t.Fatal("EnsureLoadBalancer on a hierarchical cloud = nil after one write; want the busy error")
	}
	if _, err := lbOf(t, b).EnsureLoadBalancer(noWait(t), cluster, service("web"), nodes); err == nil || b.Calls().Busy != 1 {
		t.Errorf("EnsureLoadBalancer through the other process while busy = %v, calls %+v; want the write refused as busy", err, b.Calls())
	}
	var err error
	for range 10 {
		clk.Step(time.Second)
		if _, err = lbOf(t, a).EnsureLoadBalancer(noWait(t), cluster, service("web"), nodes); err == nil {
			break
		}
	}
	if err != nil {
		t.Fatalf("EnsureLoadBalancer did not converge: %v", err)
	}
	if diff := cmp.Diff(a.Snapshot(), b.Snapshot(), cmpModel); diff != "" {
		t.Errorf("the other process's snapshot (-this +other):\n%s", diff)
	}
	doc := readDoc(t, path)
	lb := doc["loadBalancers"].([]any)[0].(map[string]any)
	l := lb["listeners"].([]any)[0].(map[string]any)
	pool, _ := l["pool"].(map[string]any)
	if doc["cloud"].(map[string]any)["loadBalancers"].(map[string]any)["hierarchical"] != true || doc["nextListener"] != 1.0 || doc["nextListenerPool"] != 1.0 ||
		lb["listenerPools"] != true || lb["busyUntil"] == nil || l["id"] != "lis-1" || pool["id"] != "pool-1" || pool["healthCheck"] == nil || len(pool["backends"].([]any)) != 1 {
		t.Errorf("state file load balancer %v, counters %v, %v; want the tree, its IDs, counters and busyUntil", lb, doc["nextListener"], doc["nextListenerPool"])
	}

	svc := service("web")
	svc.Spec.Ports = append(svc.Spec.Ports, v1.ServicePort{Name: "https", Protocol: v1.ProtocolTCP, Port: 443, NodePort: 30443})
	for range 5 {
		clk.Step(time.Second)
		_, _ = lbOf(t, b).EnsureLoadBalancer(noWait(t), cluster, svc, nodes)
	}
	got := a.Snapshot().LoadBalancers[0].Spec.Listeners
	if len(got) != 2 || got[1].ID != "lis-2" || got[1].Pool == nil || got[1].Pool.ID != "pool-2" {
		t.Errorf("listeners added by the other process %+v; want lis-2 with pool-2, the next IDs", got)
	}

	flat, flatPath := sharedClouds(t, fake.Config{Instances: []fake.Instance{{Name: "node-01"}}}, 1)
	if _, err := lbOf(t, flat[0]).EnsureLoadBalancer(t.Context(), cluster, service("web"), []*v1.Node{mustNode(t, flat[0], "i-1")}); err != nil {
		t.Fatal(err)
	}
	doc = readDoc(t, flatPath)
	lb = doc["loadBalancers"].([]any)[0].(map[string]any)
	l = lb["listeners"].([]any)[0].(map[string]any)
	for what, v := range map[string]any{"hierarchical": doc["cloud"].(map[string]any)["loadBalancers"].(map[string]any)["hierarchical"],
		"nextListener": doc["nextListener"], "nextListenerPool": doc["nextListenerPool"], "listenerPools": lb["listenerPools"],
		"busyUntil": lb["busyUntil"], "listener id": l["id"], "pool": l["pool"]} {
		if v != nil {
			t.Errorf("flat state file has %s %v; want it absent, as in files written before it", what, v)
		}
	}
}

// noWait returns a context whose deadline comes before any busy window
// ends, so that the Reconciler returns a busy answer instead of waiting
// it out (see loadbalancer.Options.MaxBusyWait).
func noWait(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 500*time.Millisecond)
	t.Cleanup(cancel)
	return ctx
}
