package loadbalancer_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"

	"github.com/ccmkit/ccmkit/loadbalancer"
)

var (
	poolHC  = loadbalancer.HealthCheck{Protocol: loadbalancer.HealthCheckHTTP, Port: 10256, Path: "/healthz"}
	poolN1  = loadbalancer.Backend{NodeName: "n1", ProviderID: "test://n1", IPv4: addr("10.0.0.1")}
	poolN2  = loadbalancer.Backend{NodeName: "n2", ProviderID: "test://n2", IPv4: addr("10.0.0.2")}
	poolAll = []loadbalancer.Backend{poolN1, poolN2}
)

// pooled returns a listener with a pool of members bs and health check hc
// (nil: no monitor).
func pooled(l loadbalancer.Listener, hc *loadbalancer.HealthCheck, bs ...loadbalancer.Backend) loadbalancer.Listener {
	l.Pool = &loadbalancer.ListenerPool{Backends: bs, HealthCheck: hc}
	return l
}

// poolsBase is a converged load balancer of a cloud with a pool per
// listener: ports 80 and 443, both pools holding n1 and n2.
func poolsBase() *loadbalancer.LoadBalancer {
	lb := planBase()
	v4 := v1.IPv4Protocol
	lb.Spec.ListenerPools = true
	lb.Spec.Backends = poolAll
	lb.Spec.Listeners = []loadbalancer.Listener{
		pooled(tcp(v4, 80, 30080), &poolHC, poolAll...),
		pooled(tcp(v4, 443, 30443), &poolHC, poolAll...),
	}
	return lb
}

// TestPlanListenerPools checks that Plan repairs exactly what one pool
// lacks, one cloud object per action, whatever state a half-done change
// left behind.
func TestPlanListenerPools(t *testing.T) {
	v4 := v1.IPv4Protocol
	mod := func(f func(lb *loadbalancer.LoadBalancer)) *loadbalancer.LoadBalancer {
		lb := poolsBase()
		f(lb)
		return lb
	}
	other := loadbalancer.HealthCheck{Protocol: loadbalancer.HealthCheckHTTP, Port: 32000, Path: "/healthz"}
	cases := []struct {
		name, reason    string
		desired, actual *loadbalancer.LoadBalancer
		want            []planned
	}{
		{"converged", "nothing to do", poolsBase(), poolsBase(), nil},
		{"converged without load-balancer-wide backends", "a Driver of such a cloud need not report Spec.Backends or Spec.HealthCheck",
			poolsBase(), mod(func(lb *loadbalancer.LoadBalancer) {
				lb.Spec.Backends, lb.Spec.HealthCheck = nil, loadbalancer.HealthCheck{}
			}), nil},
		{"member missing from one pool", "one write, for that pool only",
			poolsBase(), mod(func(lb *loadbalancer.LoadBalancer) {
				lb.Spec.Listeners[1].Pool.Backends = []loadbalancer.Backend{poolN1}
			}),
			[]planned{{loadbalancer.ActionAddBackends, "new or changed backends of listener IPv4/TCP/443: node n2"}}},
		{"member missing from one pool by provider ID", "the same under BackendKeyProviderID: the Driver reports provider IDs only",
			mod(func(lb *loadbalancer.LoadBalancer) { lb.Spec.BackendKey = loadbalancer.BackendKeyProviderID }),
			mod(func(lb *loadbalancer.LoadBalancer) {
				ids := []loadbalancer.Backend{{ProviderID: "test://n1"}, {ProviderID: "test://n2"}}
				lb.Spec.Listeners[0].Pool.Backends = ids
				lb.Spec.Listeners[1].Pool.Backends = ids[:1]
			}),
			[]planned{{loadbalancer.ActionAddBackends, "new or changed backends of listener IPv4/TCP/443: node n2"}}},
		{"listener without its pool", "the pool, its members and its monitor: three writes",
			poolsBase(), mod(func(lb *loadbalancer.LoadBalancer) { lb.Spec.Listeners[1].Pool = nil }),
			[]planned{
				{loadbalancer.ActionAddListenerPool, "listener IPv4/TCP/443 has no pool"},
				{loadbalancer.ActionAddBackends, "new or changed backends of listener IPv4/TCP/443: nodes n1, n2"},
				{loadbalancer.ActionUpdateHealthCheck, "health check of listener IPv4/TCP/443 is none; want HTTP :10256/healthz"},
			}},
		{"pool without its monitor", "one write",
			poolsBase(), mod(func(lb *loadbalancer.LoadBalancer) { lb.Spec.Listeners[0].Pool.HealthCheck = nil }),
			[]planned{{loadbalancer.ActionUpdateHealthCheck, "health check of listener IPv4/TCP/80 is none; want HTTP :10256/healthz"}}},
		{"health check changed", "one write per pool",
			mod(func(lb *loadbalancer.LoadBalancer) {
				for i := range lb.Spec.Listeners {
					lb.Spec.Listeners[i].Pool.HealthCheck = &other
				}
			}), poolsBase(),
			[]planned{
				{loadbalancer.ActionUpdateHealthCheck, "health check of listener IPv4/TCP/80 is HTTP :10256/healthz; want HTTP :32000/healthz"},
				{loadbalancer.ActionUpdateHealthCheck, "health check of listener IPv4/TCP/443 is HTTP :10256/healthz; want HTTP :32000/healthz"},
			}},
		{"half-done removal: the pool is gone", "only the listener is left to remove",
			mod(func(lb *loadbalancer.LoadBalancer) { lb.Spec.Listeners = lb.Spec.Listeners[:1] }),
			mod(func(lb *loadbalancer.LoadBalancer) { lb.Spec.Listeners[1].Pool = nil }),
			[]planned{{loadbalancer.ActionRemoveListener, "listener IPv4/TCP/443 is not a port of the service"}}},
		{"port changed", "six writes on a cloud whose listener ports are immutable: a new listener, pool, members, monitor; the old pool, the old listener",
			mod(func(lb *loadbalancer.LoadBalancer) {
				lb.Spec.Listeners[0] = pooled(tcp(v4, 8080, 30080), &poolHC, poolAll...)
			}), poolsBase(),
			[]planned{
				{loadbalancer.ActionRemoveListenerPool, "listener IPv4/TCP/80 is not a port of the service: its pool goes first"},
				{loadbalancer.ActionRemoveListener, "listener IPv4/TCP/80 is not a port of the service"},
				{loadbalancer.ActionAddListener, "service port IPv4/TCP/8080 (node port 30080) has no listener"},
				{loadbalancer.ActionAddListenerPool, "listener IPv4/TCP/8080 has no pool"},
				{loadbalancer.ActionAddBackends, "new or changed backends of listener IPv4/TCP/8080: nodes n1, n2"},
				{loadbalancer.ActionUpdateHealthCheck, "health check of listener IPv4/TCP/8080 is none; want HTTP :10256/healthz"},
			}},
		{"certificate changed on one port", "one write for that listener only",
			mod(func(lb *loadbalancer.LoadBalancer) {
				lb.Spec.Listeners[1].AppProtocol = "https"
				lb.Spec.Listeners[1].Settings = map[string]string{"x.io/certificate": "cert-2"}
			}),
			mod(func(lb *loadbalancer.LoadBalancer) {
				lb.Spec.Listeners[1].AppProtocol = "https"
				lb.Spec.Listeners[1].Settings = map[string]string{"x.io/certificate": "cert-1", "cloud.io/other": "z"}
			}),
			[]planned{{loadbalancer.ActionUpdateListener, "listener IPv4/TCP/443 settings x.io/certificate changed"}}},
		{"node port unknown without a pool", "a listener just created, its pool not yet: 0 is unknown, not a difference",
			poolsBase(), mod(func(lb *loadbalancer.LoadBalancer) {
				lb.Spec.Listeners[1].NodePort = 0
				lb.Spec.Listeners[1].Pool = nil
			}),
			[]planned{
				{loadbalancer.ActionAddListenerPool, "listener IPv4/TCP/443 has no pool"},
				{loadbalancer.ActionAddBackends, "new or changed backends of listener IPv4/TCP/443: nodes n1, n2"},
				{loadbalancer.ActionUpdateHealthCheck, "health check of listener IPv4/TCP/443 is none; want HTTP :10256/healthz"},
			}},
		{"node port unknown on an empty pool", "a cloud keeping the node port on members reports 0: the members carry the desired port",
			poolsBase(), mod(func(lb *loadbalancer.LoadBalancer) {
				lb.Spec.Listeners[1].NodePort = 0
				lb.Spec.Listeners[1].Pool.Backends = nil
			}),
			[]planned{{loadbalancer.ActionAddBackends, "new or changed backends of listener IPv4/TCP/443: nodes n1, n2"}}},
		{"node port changed", "one write: the listener (a Driver moves its members to the new port)",
			mod(func(lb *loadbalancer.LoadBalancer) { lb.Spec.Listeners[0].NodePort = 31080 }), poolsBase(),
			[]planned{{loadbalancer.ActionUpdateListener, "listener IPv4/TCP/80 node port is 30080; want 31080"}}},
		{"node left", "one write per pool, after every addition",
			mod(func(lb *loadbalancer.LoadBalancer) {
				for i := range lb.Spec.Listeners {
					lb.Spec.Listeners[i].Pool.Backends = []loadbalancer.Backend{poolN2}
				}
			}), poolsBase(),
			[]planned{
				{loadbalancer.ActionRemoveBackends, "no longer backends of listener IPv4/TCP/80: node n1"},
				{loadbalancer.ActionRemoveBackends, "no longer backends of listener IPv4/TCP/443: node n1"},
			}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			planApply(t, c.reason, c.desired, c.actual, c.want)
		})
	}
}

// TestPlanListenerPoolsTargets checks what the pool actions carry: the
// listener as the Driver reported it (its cloud ID, its pool's ID), the
// desired node port for the members, and the desired pool.
func TestPlanListenerPoolsTargets(t *testing.T) {
	actual := poolsBase()
	actual.Spec.Listeners[0].ID, actual.Spec.Listeners[1].ID = "lis-80", "lis-443"
	actual.Spec.Listeners[0].Pool.ID = "pool-80"
	actual.Spec.Listeners[0].Pool.Backends = nil
	actual.Spec.Listeners[0].NodePort = 0
	actual.Spec.Listeners[1].Pool = nil
	actions, err := loadbalancer.Plan(poolsBase(), actual)
	if err != nil {
		t.Fatal(err)
	}
	type target struct {
		Kind           loadbalancer.ActionKind
		Listener, Pool string
		NodePort       int32
		Members        int
	}
	var got []target
	for _, a := range actions {
		tg := target{Kind: a.Kind, Listener: a.Listener.ID, NodePort: a.Listener.NodePort, Members: len(a.Backends)}
		if a.Listener.Pool != nil {
			tg.Pool = a.Listener.Pool.ID
		}
		if a.Kind == loadbalancer.ActionAddListenerPool {
			tg.Members = len(a.Pool.Backends)
		}
		got = append(got, tg)
	}
	want := []target{
		{Kind: loadbalancer.ActionAddBackends, Listener: "lis-80", Pool: "pool-80", NodePort: 30080, Members: 2},
		{Kind: loadbalancer.ActionAddListenerPool, Listener: "lis-443", NodePort: 30443, Members: 2},
		{Kind: loadbalancer.ActionAddBackends, Listener: "lis-443", NodePort: 30443, Members: 2},
		{Kind: loadbalancer.ActionUpdateHealthCheck, Listener: "lis-443", NodePort: 30443},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("pool actions (-want +got):\n%s\nplan: %v", diff, actions)
	}
}

// randomPools gives lb's listeners random pools drawn from members, as a
// Driver might report them half-way through a change: none, empty, some
// members, with or without a monitor.
func randomPools(rng *rand.Rand, lb *loadbalancer.LoadBalancer, members []loadbalancer.Backend) {
	hcs := []*loadbalancer.HealthCheck{nil, &poolHC, {Protocol: loadbalancer.HealthCheckHTTP, Port: 32000, Path: "/healthz"}}
	for i := range lb.Spec.Listeners {
		if rng.IntN(4) == 0 {
			continue
		}
		p := &loadbalancer.ListenerPool{ID: fmt.Sprintf("pool-%d", i), HealthCheck: hcs[rng.IntN(len(hcs))]}
		for _, m := range members {
			if rng.IntN(3) > 0 {
				p.Backends = append(p.Backends, m)
			}
		}
		rng.Shuffle(len(p.Backends), func(i, j int) { p.Backends[i], p.Backends[j] = p.Backends[j], p.Backends[i] })
		lb.Spec.Listeners[i].Pool = p
		lb.Spec.Listeners[i].ID = fmt.Sprintf("lis-%d", i)
	}
}

// minimalPoolWrites counts, independently of Plan, the cloud objects
// actual lacks or holds in excess against desired (both canonical, their
// listener keys unique): per listener to remove, its pool and itself; per
// listener to add, itself, its pool, its members (when any) and its
// monitor; per listener kept, its attributes, its pool, the members to add
// and to remove, and its monitor, each one write when it differs.
func minimalPoolWrites(desired, actual *loadbalancer.LoadBalancer) int {
	key := desired.Spec.BackendKey
	have := map[loadbalancer.ListenerKey]loadbalancer.Listener{}
	for _, l := range actual.Spec.Listeners {
		have[l.ListenerKey] = l
	}
	n := 0
	wanted := map[loadbalancer.ListenerKey]bool{}
	for _, w := range desired.Spec.Listeners {
		wanted[w.ListenerKey] = true
		h, ok := have[w.ListenerKey]
		if !ok {
			n += 3 // listener, pool, monitor
			if len(w.Pool.Backends) > 0 {
				n++
			}
			continue
		}
		if h.NodePort != w.NodePort && (h.NodePort != 0 || (h.Pool != nil && len(h.Pool.Backends) > 0)) {
			n++
		}
		if h.Pool == nil {
			n += 2 // pool, monitor
			if len(w.Pool.Backends) > 0 {
				n++
			}
			continue
		}
		if h.Pool.HealthCheck == nil || *h.Pool.HealthCheck != *w.Pool.HealthCheck {
			n++
		}
		id := func(b loadbalancer.Backend) string { return loadbalancer.BackendID(key, b) }
		var add, remove bool
		for _, b := range w.Pool.Backends {
			add = add || !slices.ContainsFunc(h.Pool.Backends, func(x loadbalancer.Backend) bool { return id(x) == id(b) })
		}
		for _, b := range h.Pool.Backends {
			remove = remove || !slices.ContainsFunc(w.Pool.Backends, func(x loadbalancer.Backend) bool { return id(x) == id(b) })
		}
		n += btoi(add) + btoi(remove)
	}
	for _, h := range actual.Spec.Listeners {
		if !wanted[h.ListenerKey] {
			n += 1 + btoi(h.Pool != nil)
		}
	}
	return n
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// FuzzPlanListenerPools checks Plan under Capabilities.ListenerPools on
// random half-done states, under every BackendKey: applying the plan and
// planning again gives nothing, the plan is deterministic, and it makes
// exactly the writes an independent count of the missing and excess cloud
// objects says (minimalPoolWrites).
func FuzzPlanListenerPools(f *testing.F) {
	for i := uint64(0); i < 24; i++ {
		f.Add(i, i*7919+3)
	}
	keys := []loadbalancer.BackendKey{loadbalancer.BackendKeyNodeName, loadbalancer.BackendKeyProviderID, loadbalancer.BackendKeyAddress}
	f.Fuzz(func(t *testing.T, s1, s2 uint64) {
		rng := rand.New(rand.NewPCG(s1, s2))
		key := keys[rng.IntN(len(keys))]
		var members []loadbalancer.Backend
		for i := range 5 {
			members = append(members, loadbalancer.Backend{NodeName: fmt.Sprintf("n%d", i), ProviderID: fmt.Sprintf("test://n%d", i), IPv4: netip.AddrFrom4([4]byte{10, 0, 0, byte(i + 1)})})
		}
		desired := randomLB(rand.New(rand.NewPCG(s1, 1)), "")
		desired.Tags = copyMap(ownerTags)
		desired.Spec.ListenerPools, desired.Spec.BackendKey = true, key
		desired.Spec.Backends = nil
		for _, m := range members {
			if rng.IntN(3) > 0 {
				desired.Spec.Backends = append(desired.Spec.Backends, m)
			}
		}
		hc := poolHC
		for i := range desired.Spec.Listeners {
			desired.Spec.Listeners[i].Pool = &loadbalancer.ListenerPool{Backends: desired.Spec.Backends, HealthCheck: &hc}
		}
		loadbalancer.Canonicalize(&desired.Spec)
		actual := randomLB(rand.New(rand.NewPCG(s2, 2)), "lb-1")
		actual.Tags = copyMap(ownerTags)
		actual.Spec = loadbalancer.CloneSpec(desired.Spec)
		actual.Spec.Listeners = nil
		actual.Spec.Listeners = append(actual.Spec.Listeners, randomLB(rand.New(rand.NewPCG(s2, 3)), "").Spec.Listeners...)
		randomPools(rng, actual, members)
		actions, err := loadbalancer.Plan(desired, actual)
		if err != nil {
			t.Fatalf("Plan: %v", err)
		}
		again, _ := loadbalancer.Plan(desired, actual)
		if diff := cmp.Diff(actions, again, cmpOpts); diff != "" {
			t.Fatalf("Plan not deterministic (-first +second):\n%s", diff)
		}
		lb := actual
		for _, a := range actions {
			if lb, err = loadbalancer.Apply(lb, a); err != nil {
				t.Fatalf("Apply(%v): %v\nplan: %v", a, err, actions)
			}
		}
		if rest, err := loadbalancer.Plan(desired, lb); err != nil || len(rest) != 0 {
			t.Fatalf("after applying %v, Plan = %v, %v; want empty", actions, rest, err)
		}
		canon := actual.Clone()
		loadbalancer.Canonicalize(&canon.Spec)
		if want := minimalPoolWrites(desired, canon); len(actions) != want {
			t.Errorf("Plan made %d writes; the missing and excess objects need %d\nactual: %+v\nplan: %v", len(actions), want, actual.Spec.Listeners, actions)
		}
	})
}

// TestDesiredListenerPools checks that Desired gives every listener the
// Service's backends and health check under Capabilities.ListenerPools,
// and leaves Pool nil otherwise.
func TestDesiredListenerPools(t *testing.T) {
	svc := lbService()
	nodes := []*v1.Node{node("n1", "10.0.0.1"), node("n2", "10.0.0.2")}
	for _, pools := range []bool{false, true} {
		lb, err := loadbalancer.Desired(svc, nodes, loadbalancer.DesiredInput{Cluster: "c1", Capabilities: loadbalancer.Capabilities{ListenerPools: pools}})
		if err != nil {
			t.Fatal(err)
		}
		if lb.Spec.ListenerPools != pools {
			t.Errorf("ListenerPools %v: Spec.ListenerPools = %v", pools, lb.Spec.ListenerPools)
		}
		for _, l := range lb.Spec.Listeners {
			switch {
			case !pools && l.Pool != nil:
				t.Errorf("flat: listener %v has a pool %+v", l.ListenerKey, l.Pool)
			case pools && (l.Pool == nil || !slices.Equal(l.Pool.Backends, lb.Spec.Backends) || l.Pool.HealthCheck == nil || *l.Pool.HealthCheck != lb.Spec.HealthCheck):
				t.Errorf("pools: listener %v pool %+v; want the backends %v and health check %v", l.ListenerKey, l.Pool, lb.Spec.Backends, lb.Spec.HealthCheck)
			}
		}
	}
}

// TestDesiredAppProtocol checks spec.ports[].appProtocol: a hint ignored
// when the provider declares no AppProtocols (the default, unchanged),
// the listener's AppProtocol when declared, and refused when undeclared.
func TestDesiredAppProtocol(t *testing.T) {
	svc := lbService()
	svc.Spec.Ports[0].AppProtocol = ptr("https")
	cases := []struct {
		name    string
		caps    loadbalancer.Capabilities
		want    string
		refused bool
	}{
		{"none declared: a hint", loadbalancer.Capabilities{}, "", false},
		{"declared", loadbalancer.Capabilities{AppProtocols: []string{"http", "https"}}, "https", false},
		{"not declared", loadbalancer.Capabilities{AppProtocols: []string{"http"}}, "", true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			lb, err := loadbalancer.Desired(svc, nil, loadbalancer.DesiredInput{Cluster: "c1", Capabilities: c.caps})
			if c.refused {
				var ue *loadbalancer.UnsupportedError
				if !errors.As(err, &ue) || ue.Feature != "AppProtocols" {
					t.Fatalf("Desired = %v; want an UnsupportedError for AppProtocols", err)
				}
				if want := `spec.ports[0].appProtocol "https"`; !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not name %s", err, want)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := lb.Spec.Listeners[0].AppProtocol; got != c.want {
				t.Errorf("AppProtocol = %q; want %q", got, c.want)
			}
		})
	}
}
