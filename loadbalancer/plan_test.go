package loadbalancer_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"reflect"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"

	"github.com/ccmkit/ccmkit/loadbalancer"
)

var ownerTags = map[string]string{loadbalancer.TagCluster: "c1", loadbalancer.TagServiceUID: "uid-web", loadbalancer.TagService: "shop/web"}

func planBase() *loadbalancer.LoadBalancer {
	v4 := v1.IPv4Protocol
	return &loadbalancer.LoadBalancer{
		ID: "lb-1", Name: "k8s-shop-web-x",
		Tags: copyMap(ownerTags),
		Spec: loadbalancer.Spec{
			IPFamilies: []v1.IPFamily{v4},
			Listeners:  []loadbalancer.Listener{tcp(v4, 80, 30080), tcp(v4, 443, 30443)},
			Backends: []loadbalancer.Backend{
				{NodeName: "n1", ProviderID: "test://n1", IPv4: addr("10.0.0.1")},
				{NodeName: "n2", ProviderID: "test://n2", IPv4: addr("10.0.0.2")},
			},
			HealthCheck:  loadbalancer.HealthCheck{Protocol: loadbalancer.HealthCheckHTTP, Port: 10256, Path: "/healthz"},
			SourceRanges: []netip.Prefix{prefix("0.0.0.0/0")},
			Settings:     map[string]string{"x.io/a": "1"},
		},
	}
}

func copyMap(m map[string]string) map[string]string {
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

type planned struct {
	Kind   loadbalancer.ActionKind
	Reason string
}

func TestPlan(t *testing.T) {
	v4 := v1.IPv4Protocol
	mod := func(f func(lb *loadbalancer.LoadBalancer)) *loadbalancer.LoadBalancer {
		lb := planBase()
		f(lb)
		return lb
	}
	cases := []struct {
		name, reason    string
		desired, actual *loadbalancer.LoadBalancer
		want            []planned
	}{
		{"converged", "nothing to do", planBase(), planBase(), nil},
		{"converged despite foreign state", "other tags, other settings, name, ID and ingress are not ours to compare",
			planBase(), mod(func(lb *loadbalancer.LoadBalancer) {
				lb.Tags["team"] = "payments"
				lb.Spec.Settings["cloud.io/other"] = "z"
				lb.Name = "renamed-by-someone"
				lb.Ingress = []loadbalancer.Ingress{{IP: "203.0.113.1"}}
			}), nil},
		{"converged out of order", "a Driver may report in any order",
			planBase(), mod(func(lb *loadbalancer.LoadBalancer) {
				lb.Spec.Listeners[0], lb.Spec.Listeners[1] = lb.Spec.Listeners[1], lb.Spec.Listeners[0]
				lb.Spec.Backends[0], lb.Spec.Backends[1] = lb.Spec.Backends[1], lb.Spec.Backends[0]
			}), nil},
		{"create", "no load balancer yet", planBase(), nil,
			[]planned{{loadbalancer.ActionCreate, "no load balancer exists for service shop/web"}}},
		{"adopt", "an untagged load balancer gets the ownership tags",
			planBase(), mod(func(lb *loadbalancer.LoadBalancer) { lb.Tags = map[string]string{"team": "payments"} }),
			[]planned{{loadbalancer.ActionUpdateTags, "ownership tags ccmkit.io/cluster, ccmkit.io/service, ccmkit.io/service-uid missing or different (adopting or repairing)"}}},
		{"one node added", "exactly one backend write",
			mod(func(lb *loadbalancer.LoadBalancer) {
				lb.Spec.Backends = append(lb.Spec.Backends, loadbalancer.Backend{NodeName: "n3", ProviderID: "test://n3", IPv4: addr("10.0.0.3")})
			}), planBase(),
			[]planned{{loadbalancer.ActionAddBackends, "new or changed backends: node n3"}}},
		{"node changed address", "one write: AddBackends replaces by node name",
			mod(func(lb *loadbalancer.LoadBalancer) { lb.Spec.Backends[1].IPv4 = addr("10.0.0.22") }), planBase(),
			[]planned{{loadbalancer.ActionAddBackends, "new or changed backends: node n2"}}},
		{"port changed", "one listener write: same family, protocol and node port",
			mod(func(lb *loadbalancer.LoadBalancer) { lb.Spec.Listeners[0] = tcp(v4, 8080, 30080) }), planBase(),
			[]planned{{loadbalancer.ActionUpdateListener, "service port changed: listener IPv4/TCP/80 (node port 30080) becomes IPv4/TCP/8080 (node port 30080)"}}},
		{"node port changed", "one listener write",
			mod(func(lb *loadbalancer.LoadBalancer) { lb.Spec.Listeners[1].NodePort = 31443 }), planBase(),
			[]planned{{loadbalancer.ActionUpdateListener, "listener IPv4/TCP/443 node port is 30443; want 31443"}}},
		{"protocol changed", "a listener of another protocol is removed then added",
			mod(func(lb *loadbalancer.LoadBalancer) {
				lb.Spec.Listeners = []loadbalancer.Listener{tcp(v4, 443, 30443), {ListenerKey: loadbalancer.ListenerKey{Family: v4, Protocol: v1.ProtocolUDP, Port: 80}, NodePort: 30080}}
			}), planBase(),
			[]planned{{loadbalancer.ActionRemoveListener, "listener IPv4/TCP/80 is not a port of the service"}, {loadbalancer.ActionAddListener, "service port IPv4/UDP/80 (node port 30080) has no listener"}}},
		{"to a shared pool", "the pool is referenced before the own backends go, so traffic never stops",
			mod(func(lb *loadbalancer.LoadBalancer) { lb.Spec.Backends, lb.Spec.BackendPool = nil, "pool-1" }), planBase(),
			[]planned{
				{loadbalancer.ActionUpdateBackendPool, `the service's backends are the shared pool "pool-1"`},
				{loadbalancer.ActionRemoveBackends, "no longer backends: nodes n1, n2"},
			}},
		{"from a shared pool", "the own backends are added before the pool reference goes",
			planBase(), mod(func(lb *loadbalancer.LoadBalancer) { lb.Spec.Backends, lb.Spec.BackendPool = nil, "pool-1" }),
			[]planned{
				{loadbalancer.ActionAddBackends, "new or changed backends: nodes n1, n2"},
				{loadbalancer.ActionUpdateBackendPool, `the service no longer uses the shared pool "pool-1"`},
			}},
		{"to another pool", "one write: the reference",
			mod(func(lb *loadbalancer.LoadBalancer) { lb.Spec.Backends, lb.Spec.BackendPool = nil, "pool-2" }),
			mod(func(lb *loadbalancer.LoadBalancer) { lb.Spec.Backends, lb.Spec.BackendPool = nil, "pool-1" }),
			[]planned{{loadbalancer.ActionUpdateBackendPool, `backend pool is "pool-1"; want "pool-2"`}}},
		{"everything", "the documented order",
			mod(func(lb *loadbalancer.LoadBalancer) {
				lb.Spec.IPFamilies = []v1.IPFamily{v4, v1.IPv6Protocol}
				lb.Spec.Settings["x.io/a"] = "2"
				lb.Spec.HealthCheck.Port = 32000
				lb.Spec.SourceRanges = []netip.Prefix{prefix("10.0.0.0/8")}
				lb.Spec.SessionAffinity = loadbalancer.SessionAffinity{ClientIP: true, TimeoutSeconds: 60}
				lb.Spec.Listeners = append(lb.Spec.Listeners, tcp(v1.IPv6Protocol, 80, 30080))
				lb.Spec.Backends = lb.Spec.Backends[1:]
			}), planBase(),
			[]planned{
				{loadbalancer.ActionUpdateFrontend, "front end is families [IPv4], requested IPs []; want families [IPv4 IPv6], requested IPs []"},
				{loadbalancer.ActionUpdateSettings, "settings x.io/a changed"},
				{loadbalancer.ActionUpdateHealthCheck, "health check is HTTP :10256/healthz; want HTTP :32000/healthz"},
				{loadbalancer.ActionUpdateSourceRanges, "source ranges are [0.0.0.0/0]; want [10.0.0.0/8]"},
				{loadbalancer.ActionUpdateSessionAffinity, "session affinity is None; want ClientIP (60s)"},
				{loadbalancer.ActionAddListener, "service port IPv6/TCP/80 (node port 30080) has no listener"},
				{loadbalancer.ActionRemoveBackends, "no longer backends: node n1"},
			}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dBefore, aBefore := tc.desired.Clone(), tc.actual.Clone()
			actions, err := loadbalancer.Plan(tc.desired, tc.actual)
			if err != nil {
				t.Fatalf("%s: Plan: %v", tc.reason, err)
			}
			var got []planned
			for _, a := range actions {
				got = append(got, planned{a.Kind, a.Reason})
				if a.Kind != loadbalancer.ActionCreate && a.LoadBalancerID != "lb-1" {
					t.Errorf("%s: action %v targets %q; want lb-1", tc.reason, a.Kind, a.LoadBalancerID)
				}
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s: (-want +got):\n%s", tc.reason, diff)
			}
			again, _ := loadbalancer.Plan(tc.desired, tc.actual)
			if diff := cmp.Diff(actions, again, cmpOpts); diff != "" {
				t.Errorf("%s: Plan is not deterministic (-first +second):\n%s", tc.reason, diff)
			}
			if diff := cmp.Diff(dBefore, tc.desired, cmpOpts); diff != "" {
				t.Errorf("Plan modified desired (-before +after):\n%s", diff)
			}
			if diff := cmp.Diff(aBefore, tc.actual, cmpOpts); diff != "" {
				t.Errorf("Plan modified actual (-before +after):\n%s", diff)
			}
			// Applying the plan converges.
			lb := tc.actual
			for _, a := range actions {
				if lb, err = loadbalancer.Apply(lb, a); err != nil {
					t.Fatalf("Apply(%v): %v", a, err)
				}
				if a.Kind == loadbalancer.ActionCreate {
					lb.ID = "lb-1"
				}
			}
			if rest, err := loadbalancer.Plan(tc.desired, lb); err != nil || len(rest) != 0 {
				t.Errorf("%s: after applying, Plan = %v, %v; want empty", tc.reason, rest, err)
			}
		})
	}
}

func TestPlanOwnership(t *testing.T) {
	foreign := planBase()
	foreign.Tags[loadbalancer.TagCluster] = "other-cluster"
	_, err := loadbalancer.Plan(planBase(), foreign)
	var oe *loadbalancer.OwnershipError
	if !errors.As(err, &oe) || !errors.Is(err, loadbalancer.ErrNotOwned) || oe.Got.Cluster != "other-cluster" {
		t.Errorf("Plan against another cluster's load balancer: error = %v; want an *OwnershipError naming other-cluster", err)
	}
	untagged := planBase()
	untagged.Tags = nil
	if _, err := loadbalancer.Plan(untagged, planBase()); err == nil {
		t.Errorf("Plan with a desired model without ownership tags: nil error; want one")
	}
	if _, err := loadbalancer.Plan(nil, planBase()); err == nil {
		t.Errorf("Plan(nil, ...): nil error; want one")
	}
}

func TestApplyErrors(t *testing.T) {
	l := tcp(v1.IPv4Protocol, 80, 30080)
	missing := tcp(v1.IPv4Protocol, 81, 30081)
	cases := []struct {
		name, reason string
		lb           *loadbalancer.LoadBalancer
		a            loadbalancer.Action
	}{
		{"no load balancer", "only Create works without one", nil, loadbalancer.Action{Kind: loadbalancer.ActionAddListener, Listener: &l}},
		{"wrong target", "the action names another load balancer", planBase(), loadbalancer.Action{Kind: loadbalancer.ActionAddListener, LoadBalancerID: "lb-2", Listener: &missing}},
		{"add existing listener", "keys are unique", planBase(), loadbalancer.Action{Kind: loadbalancer.ActionAddListener, LoadBalancerID: "lb-1", Listener: &l}},
		{"remove missing listener", "nothing to remove", planBase(), loadbalancer.Action{Kind: loadbalancer.ActionRemoveListener, LoadBalancerID: "lb-1", Listener: &missing}},
		{"update without old", "payload missing", planBase(), loadbalancer.Action{Kind: loadbalancer.ActionUpdateListener, LoadBalancerID: "lb-1", Listener: &missing}},
		{"create without payload", "payload missing", nil, loadbalancer.Action{Kind: loadbalancer.ActionCreate}},
		{"unknown kind", "kinds are closed", planBase(), loadbalancer.Action{Kind: "Explode", LoadBalancerID: "lb-1"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got, err := loadbalancer.Apply(tc.lb, tc.a); err == nil {
				t.Errorf("%s: Apply = %v, nil; want an error", tc.reason, got)
			}
		})
	}
}

// randomLB builds a random load balancer over small universes so that two
// random ones overlap a lot.
func randomLB(rng *rand.Rand, id string) *loadbalancer.LoadBalancer {
	pick := func(n int) int { return rng.IntN(n) }
	lb := &loadbalancer.LoadBalancer{ID: id, Name: "n", Tags: map[string]string{}}
	switch pick(3) {
	case 0:
		lb.Tags = copyMap(ownerTags)
	case 1:
		lb.Tags = copyMap(ownerTags)
		lb.Tags[loadbalancer.TagService] = "old/name"
		lb.Tags["team"] = "x"
	default:
		lb.Tags["team"] = "x" // untagged: adoption
	}
	fams := [][]v1.IPFamily{{v1.IPv4Protocol}, {v1.IPv6Protocol}, {v1.IPv4Protocol, v1.IPv6Protocol}, nil}[pick(4)]
	lb.Spec.IPFamilies = fams
	if pick(2) == 0 {
		lb.Spec.RequestedIPs = []netip.Addr{addr([]string{"203.0.113.1", "2001:db8::1"}[pick(2)])}
	}
	protos := []v1.Protocol{v1.ProtocolTCP, v1.ProtocolUDP, v1.ProtocolSCTP}
	seen := map[loadbalancer.ListenerKey]bool{}
	for i := pick(6); i > 0; i-- {
		k := loadbalancer.ListenerKey{Family: []v1.IPFamily{v1.IPv4Protocol, v1.IPv6Protocol}[pick(2)], Protocol: protos[pick(3)], Port: int32(80 + pick(4))} //nolint:gosec // G115: ports 80-83
		if !seen[k] {
			seen[k] = true
			lb.Spec.Listeners = append(lb.Spec.Listeners, loadbalancer.Listener{ListenerKey: k, NodePort: int32(30000 + pick(4))}) //nolint:gosec // G115: node ports 30000-30003
		}
	}
	for i := 0; i < 8; i++ {
		if pick(2) == 0 {
			lb.Spec.Backends = append(lb.Spec.Backends, loadbalancer.Backend{NodeName: fmt.Sprintf("n%d", i), ProviderID: fmt.Sprintf("p%d", pick(2)),
				IPv4: netip.AddrFrom4([4]byte{10, 0, 0, byte(pick(3))})}) //nolint:gosec // G115: 0, 1 or 2
		}
	}
	lb.Spec.HealthCheck = []loadbalancer.HealthCheck{{}, {Protocol: loadbalancer.HealthCheckHTTP, Port: 10256, Path: "/healthz"}, {Protocol: loadbalancer.HealthCheckHTTP, Port: 32000, Path: "/healthz"}}[pick(3)]
	for _, r := range []string{"0.0.0.0/0", "::/0", "10.0.0.0/8", "10.1.2.3/8"} {
		if pick(2) == 0 {
			lb.Spec.SourceRanges = append(lb.Spec.SourceRanges, prefix(r))
		}
	}
	if pick(2) == 0 {
		lb.Spec.SessionAffinity = loadbalancer.SessionAffinity{ClientIP: true, TimeoutSeconds: int32(10 * pick(3))} //nolint:gosec // G115: 0, 10 or 20
	}
	for _, k := range []string{"x.io/a", "x.io/b", "cloud.io/c"} {
		if pick(2) == 0 {
			if lb.Spec.Settings == nil {
				lb.Spec.Settings = map[string]string{}
			}
			lb.Spec.Settings[k] = []string{"", "1", "2"}[pick(3)]
		}
	}
	// Drivers may report in any order.
	rng.Shuffle(len(lb.Spec.Listeners), func(i, j int) {
		lb.Spec.Listeners[i], lb.Spec.Listeners[j] = lb.Spec.Listeners[j], lb.Spec.Listeners[i]
	})
	rng.Shuffle(len(lb.Spec.Backends), func(i, j int) { lb.Spec.Backends[i], lb.Spec.Backends[j] = lb.Spec.Backends[j], lb.Spec.Backends[i] })
	return lb
}

// FuzzPlan checks that applying a plan and planning again gives an empty
// plan, that Plan is deterministic, and that it never touches tags or
// settings the desired model does not name.
func FuzzPlan(f *testing.F) {
	for i := uint64(0); i < 16; i++ {
		f.Add(i, i*7919+1, i%3 == 0)
	}
	f.Fuzz(func(t *testing.T, s1, s2 uint64, noActual bool) {
		desired := randomLB(rand.New(rand.NewPCG(s1, 1)), "")
		desired.Tags = copyMap(ownerTags)
		loadbalancer.Canonicalize(&desired.Spec)
		var actual *loadbalancer.LoadBalancer
		if !noActual {
			rng := rand.New(rand.NewPCG(s2, 2))
			actual = randomLB(rng, "lb-1")
			if n := len(actual.Spec.Backends); n > 0 && rng.IntN(3) == 0 {
				// A Driver reporting one node twice, maybe with another address.
				dup := actual.Spec.Backends[rng.IntN(n)]
				if rng.IntN(2) == 0 {
					dup.IPv4 = netip.AddrFrom4([4]byte{10, 9, 9, 9})
				}
				actual.Spec.Backends = append(actual.Spec.Backends, dup)
			}
			if n := len(actual.Spec.Listeners); n > 0 && rng.IntN(3) == 0 {
				// A Driver reporting two listeners with one key, maybe
				// with another node port, maybe more than once.
				for range 1 + rng.IntN(2) {
					dup := actual.Spec.Listeners[rng.IntN(n)]
					if rng.IntN(2) == 0 {
						dup.NodePort = 30009
					}
					actual.Spec.Listeners = append(actual.Spec.Listeners, dup)
				}
				rng.Shuffle(len(actual.Spec.Listeners), func(i, j int) {
					actual.Spec.Listeners[i], actual.Spec.Listeners[j] = actual.Spec.Listeners[j], actual.Spec.Listeners[i]
				})
			}
		}
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
			if a.Reason == "" {
				t.Errorf("action %v has no reason", a.Kind)
			}
			if lb, err = loadbalancer.Apply(lb, a); err != nil {
				t.Fatalf("Apply(%v): %v\nplan: %v", a, err, actions)
			}
			if a.Kind == loadbalancer.ActionCreate {
				lb.ID = "lb-1"
			}
		}
		rest, err := loadbalancer.Plan(desired, lb)
		if err != nil || len(rest) != 0 {
			t.Fatalf("after applying %v, Plan = %v, %v; want empty", actions, rest, err)
		}
		if actual != nil {
			checkListenerActions(t, desired, actual, actions)
			if actual.Tags["team"] != lb.Tags["team"] {
				t.Errorf("a foreign tag changed: %q → %q", actual.Tags["team"], lb.Tags["team"])
			}
			if _, had := actual.Spec.Settings["cloud.io/c"]; had && actual.Spec.Settings["cloud.io/c"] != lb.Spec.Settings["cloud.io/c"] {
				if _, ours := desired.Spec.Settings["cloud.io/c"]; !ours {
					t.Errorf("a setting the desired model does not name changed")
				}
			}
		}
	})
}

// planApply plans desired against actual, checks the plan's kinds and
// reasons against want, applies it with the reference Apply, checks that
// planning again gives nothing, and returns the plan and the result.
func planApply(t *testing.T, reason string, desired, actual *loadbalancer.LoadBalancer, want []planned) ([]loadbalancer.Action, *loadbalancer.LoadBalancer) {
	t.Helper()
	actions, err := loadbalancer.Plan(desired, actual)
	if err != nil {
		t.Fatalf("%s: Plan: %v", reason, err)
	}
	var got []planned
	for _, a := range actions {
		got = append(got, planned{a.Kind, a.Reason})
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("%s: Plan (-want +got):\n%s", reason, diff)
	}
	lb := actual
	for _, a := range actions {
		if lb, err = loadbalancer.Apply(lb, a); err != nil {
			t.Fatalf("%s: Apply(%v): %v", reason, a, err)
		}
	}
	if rest, err := loadbalancer.Plan(desired, lb); err != nil || len(rest) != 0 {
		t.Errorf("%s: after applying %v, Plan = %v, %v; want empty", reason, actions, rest, err)
	}
	return actions, lb
}

// TestPlanDuplicateActualBackends checks a Driver that reports one node
// twice (for example once per target entry): Plan must never remove a node
// the desired model keeps (RemoveBackends goes by node name and would take
// it out of service), and applying the plan converges.
func TestPlanDuplicateActualBackends(t *testing.T) {
	n1 := loadbalancer.Backend{NodeName: "n1", ProviderID: "test://n1", IPv4: addr("10.0.0.1")}
	n1old := loadbalancer.Backend{NodeName: "n1", ProviderID: "test://n1", IPv4: addr("10.0.0.9")}
	n2 := loadbalancer.Backend{NodeName: "n2", ProviderID: "test://n2", IPv4: addr("10.0.0.2")}
	cases := []struct {
		name, reason string
		have         []loadbalancer.Backend
		want         []planned
	}{
		{"identical twice", "the same set: nothing to write", []loadbalancer.Backend{n1, n1, n2}, nil},
		{"changed copy", "one write replaces both entries", []loadbalancer.Backend{n1, n1old, n2},
			[]planned{{loadbalancer.ActionAddBackends, "new or changed backends: node n1"}}},
		{"unwanted twice", "removed once", []loadbalancer.Backend{n1, n2, n2},
			[]planned{{loadbalancer.ActionRemoveBackends, "no longer backends: node n2"}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			desired := planBase()
			desired.Spec.Backends = []loadbalancer.Backend{n1}
			if tc.name != "unwanted twice" {
				desired.Spec.Backends = append(desired.Spec.Backends, n2)
			}
			actual := planBase()
			actual.Spec.Backends = tc.have
			actions, lb := planApply(t, tc.reason, desired, actual, tc.want)
			for _, b := range desired.Spec.Backends {
				if !slices.Contains(lb.Spec.Backends, b) {
					t.Errorf("%s: after applying %v, backend %+v is missing from %+v", tc.reason, actions, b, lb.Spec.Backends)
				}
			}
		})
	}
}

// checkListenerActions checks the listener actions of a plan from desired
// to actual: at most one per actual or desired key (RemoveListener and
// UpdateListener act on every listener of a key), and none removes or
// replaces a key the desired model keeps except to set it to its desired
// value (a wanted listener never goes out of service).
func checkListenerActions(t *testing.T, desired, actual *loadbalancer.LoadBalancer, actions []loadbalancer.Action) {
	t.Helper()
	wanted := map[loadbalancer.ListenerKey]loadbalancer.Listener{}
	for _, l := range desired.Spec.Listeners {
		wanted[l.ListenerKey] = l
	}
	touched := map[loadbalancer.ListenerKey]int{}
	for _, a := range actions {
		switch a.Kind {
		case loadbalancer.ActionRemoveListener:
			touched[a.Listener.ListenerKey]++
			if _, ok := wanted[a.Listener.ListenerKey]; ok {
				t.Errorf("%v removes listener %v, which the service keeps\nactual: %v\nplan: %v", a, a.Listener.ListenerKey, actual.Spec.Listeners, actions)
			}
		case loadbalancer.ActionUpdateListener:
			touched[a.OldListener.ListenerKey]++
			if w, ok := wanted[a.OldListener.ListenerKey]; ok && !reflect.DeepEqual(withoutID(*a.Listener), w) {
				t.Errorf("%v replaces listener %v, which the service keeps, by %v; want %v\nactual: %v\nplan: %v", a, a.OldListener.ListenerKey, *a.Listener, w, actual.Spec.Listeners, actions)
			}
		case loadbalancer.ActionAddListener:
			touched[a.Listener.ListenerKey]++
		}
	}
	for k, n := range touched {
		if n > 1 {
			t.Errorf("%d listener actions for key %v; want at most one\nactual: %v\nplan: %v", n, k, actual.Spec.Listeners, actions)
		}
	}
}

// TestPlanDuplicateActualListeners checks a Driver that reports two
// listeners with one key: Plan emits at most one action per key, never
// removes a key the Service keeps (RemoveListener goes by key), and
// applying the plan converges.
func TestPlanDuplicateActualListeners(t *testing.T) {
	v4 := v1.IPv4Protocol
	l80, l80old, l443 := tcp(v4, 80, 30080), tcp(v4, 80, 30009), tcp(v4, 443, 30443)
	l8080 := tcp(v4, 8080, 30080)
	cases := []struct {
		name, reason string
		want, have   []loadbalancer.Listener
		plan         []planned
	}{
		{"identical twice", "the same listener twice: nothing to write",
			[]loadbalancer.Listener{l80, l443}, []loadbalancer.Listener{l80, l80, l443}, nil},
		{"wanted and stale copy", "one write replaces both; the wanted listener is never removed",
			[]loadbalancer.Listener{l80, l443}, []loadbalancer.Listener{l80, l80old, l443},
			[]planned{{loadbalancer.ActionUpdateListener, "listener IPv4/TCP/80 is listed 2 times (node ports 30080, 30009); want one, with node port 30080"}}},
		{"stale copy first", "the order the Driver reports the copies in does not matter",
			[]loadbalancer.Listener{l80, l443}, []loadbalancer.Listener{l80old, l80, l443},
			[]planned{{loadbalancer.ActionUpdateListener, "listener IPv4/TCP/80 is listed 2 times (node ports 30009, 30080); want one, with node port 30080"}}},
		{"unwanted twice", "removed in one write",
			[]loadbalancer.Listener{l443}, []loadbalancer.Listener{l80, l80old, l443},
			[]planned{{loadbalancer.ActionRemoveListener, "listener IPv4/TCP/80 (listed 2 times) is not a port of the service"}}},
		{"port changed, listed twice", "one update replaces both copies",
			[]loadbalancer.Listener{l443, l8080}, []loadbalancer.Listener{l80, l80, l443},
			[]planned{{loadbalancer.ActionUpdateListener, "service port changed: listener IPv4/TCP/80 (node port 30080, listed 2 times) becomes IPv4/TCP/8080 (node port 30080)"}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			desired := planBase()
			desired.Spec.Listeners = tc.want
			actual := planBase()
			actual.Spec.Listeners = tc.have
			actions, lb := planApply(t, tc.reason, desired, actual, tc.plan)
			checkListenerActions(t, desired, actual, actions)
			if diff := cmp.Diff(tc.want, lb.Spec.Listeners); len(actions) > 0 && diff != "" {
				t.Errorf("%s: listeners after applying %v (-want +got):\n%s", tc.reason, actions, diff)
			}
		})
	}
}

// TestApplyListenerKeyCopies checks the reference semantics for a load
// balancer listing two listeners with one key: RemoveListener and
// UpdateListener act on every listener of the key.
func TestApplyListenerKeyCopies(t *testing.T) {
	v4 := v1.IPv4Protocol
	l80, l80old, l443 := tcp(v4, 80, 30080), tcp(v4, 80, 30009), tcp(v4, 443, 30443)
	l8080 := tcp(v4, 8080, 30080)
	cases := []struct {
		name, reason string
		a            loadbalancer.Action
		want         []loadbalancer.Listener
	}{
		{"remove", "every listener of the key goes", loadbalancer.Action{Kind: loadbalancer.ActionRemoveListener, Listener: &l80}, []loadbalancer.Listener{l443}},
		{"update same key", "every listener of the key is replaced by one", loadbalancer.Action{Kind: loadbalancer.ActionUpdateListener, OldListener: &l80old, Listener: &l80}, []loadbalancer.Listener{l80, l443}},
		{"update new key", "every listener of the old key is replaced by one", loadbalancer.Action{Kind: loadbalancer.ActionUpdateListener, OldListener: &l80, Listener: &l8080}, []loadbalancer.Listener{l443, l8080}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			lb := planBase()
			lb.Spec.Listeners = []loadbalancer.Listener{l80old, l80, l443}
			tc.a.LoadBalancerID = lb.ID
			got, err := loadbalancer.Apply(lb, tc.a)
			if err != nil {
				t.Fatalf("%s: Apply: %v", tc.reason, err)
			}
			if diff := cmp.Diff(tc.want, got.Spec.Listeners); diff != "" {
				t.Errorf("%s: listeners (-want +got):\n%s", tc.reason, diff)
			}
		})
	}
}

// withoutID returns l without its cloud ID, which Plan carries over from
// the listener it replaces.
func withoutID(l loadbalancer.Listener) loadbalancer.Listener {
	l.ID = ""
	return l
}
