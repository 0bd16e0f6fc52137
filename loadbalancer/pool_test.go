package loadbalancer_test

import (
	"regexp"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"

	"github.com/ccmkit/ccmkit/loadbalancer"
)

func TestPoolKey(t *testing.T) {
	v4, v6 := v1.IPv4Protocol, v1.IPv6Protocol
	cases := []struct {
		name, reason string
		key          loadbalancer.BackendKey
		families     []v1.IPFamily
		want         string
	}{
		{"node name, IPv4", "the zero BackendKey is named", loadbalancer.BackendKeyNodeName, []v1.IPFamily{v4}, "all-ipv4-nodename"},
		{"provider ID, IPv6", "the key and the family are part of the identity", loadbalancer.BackendKeyProviderID, []v1.IPFamily{v6}, "all-ipv6-providerid"},
		{"dual stack", "IPv4 first", loadbalancer.BackendKeyAddress, []v1.IPFamily{v4, v6}, "all-ipv4-ipv6-address"},
		{"dual stack, IPv6 primary", "a Service's order of families does not change its backends, so not its pool", loadbalancer.BackendKeyAddress, []v1.IPFamily{v6, v4}, "all-ipv4-ipv6-address"},
	}
	valid := regexp.MustCompile(`^[a-z0-9-]+$`)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := loadbalancer.PoolKey(tc.key, tc.families)
			if got != tc.want {
				t.Errorf("%s: PoolKey(%q, %v) = %q; want %q", tc.reason, tc.key, tc.families, got, tc.want)
			}
			if !valid.MatchString(got) {
				t.Errorf("PoolKey = %q: want [a-z0-9-] only, a valid tag value everywhere", got)
			}
		})
	}
}

func TestDesiredPool(t *testing.T) {
	namer, err := loadbalancer.NewNamer(loadbalancer.NamerOptions{MaxLength: 30})
	if err != nil {
		t.Fatal(err)
	}
	v4, v6 := v1.IPv4Protocol, v1.IPv6Protocol
	families := []v1.IPFamily{v6, v4}
	backends := []loadbalancer.Backend{{NodeName: "n1", ProviderID: "test://n1"}}
	got := loadbalancer.DesiredPool("c1", namer, loadbalancer.BackendKeyProviderID, families, backends)
	want := &loadbalancer.Pool{
		Name: got.Name,
		Tags: map[string]string{loadbalancer.TagCluster: "c1", loadbalancer.TagPool: "all-ipv4-ipv6-providerid"},
		Spec: loadbalancer.PoolSpec{
			IPFamilies: []v1.IPFamily{v4, v6},
			BackendKey: loadbalancer.BackendKeyProviderID,
			Backends:   []loadbalancer.Backend{{NodeName: "n1", ProviderID: "test://n1"}},
		},
	}
	if diff := cmp.Diff(want, got, cmpOpts); diff != "" {
		t.Errorf("DesiredPool (-want +got):\n%s", diff)
	}
	if !loadbalancer.NameFits(namer, got.Name) {
		t.Errorf("pool name %q: want within the Namer's MaxLength and Charset", got.Name)
	}
	if again := loadbalancer.DesiredPool("c1", namer, loadbalancer.BackendKeyProviderID, families, backends); again.Name != got.Name {
		t.Errorf("pool name %q then %q: want one name for one cluster and key (every replica finds the same pool)", got.Name, again.Name)
	}
	if other := loadbalancer.DesiredPool("c2", namer, loadbalancer.BackendKeyProviderID, families, backends); other.Name == got.Name {
		t.Errorf("clusters c1 and c2 both name their pool %q: want a name per cluster", got.Name)
	}
	got.Spec.Backends[0].NodeName = "changed"
	if backends[0].NodeName != "n1" {
		t.Errorf("DesiredPool shares the backends it was given: want a copy")
	}
}

// poolBase is a pool of two members, as a cloud reports it.
func poolBase() *loadbalancer.Pool {
	return &loadbalancer.Pool{
		ID: "pool-1", Name: "k8s-pool-x",
		Tags: map[string]string{loadbalancer.TagCluster: "c1", loadbalancer.TagPool: "all-ipv4-nodename"},
		Spec: loadbalancer.PoolSpec{
			IPFamilies: []v1.IPFamily{v1.IPv4Protocol},
			Backends: []loadbalancer.Backend{
				{NodeName: "n1", ProviderID: "test://n1", IPv4: addr("10.0.0.1")},
				{NodeName: "n2", ProviderID: "test://n2", IPv4: addr("10.0.0.2")},
			},
		},
	}
}

type plannedPool struct {
	Kind   loadbalancer.PoolActionKind
	Reason string
}

func TestPlanPool(t *testing.T) {
	mod := func(f func(p *loadbalancer.Pool)) *loadbalancer.Pool {
		p := poolBase()
		f(p)
		return p
	}
	n3 := loadbalancer.Backend{NodeName: "n3", ProviderID: "test://n3", IPv4: addr("10.0.0.3")}
	cases := []struct {
		name, reason    string
		desired, actual *loadbalancer.Pool
		want            []plannedPool
	}{
		{"converged", "no write: what every Service but the first sees after a node change", poolBase(), poolBase(), nil},
		{"converged out of order, with foreign tags", "a Driver may report in any order, and other tags are not ours",
			poolBase(), mod(func(p *loadbalancer.Pool) {
				p.Spec.Backends[0], p.Spec.Backends[1] = p.Spec.Backends[1], p.Spec.Backends[0]
				p.Tags["team"] = "payments"
			}), nil},
		{"create", "no pool yet: one write with its members", poolBase(), nil,
			[]plannedPool{{loadbalancer.PoolActionCreate, "no backend pool all-ipv4-nodename exists"}}},
		{"node joined", "one write", mod(func(p *loadbalancer.Pool) { p.Spec.Backends = append(p.Spec.Backends, n3) }), poolBase(),
			[]plannedPool{{loadbalancer.PoolActionAddBackends, "new or changed backends: node n3"}}},
		{"node left and another joined", "additions before removals, as for a load balancer",
			mod(func(p *loadbalancer.Pool) { p.Spec.Backends = []loadbalancer.Backend{p.Spec.Backends[1], n3} }), poolBase(),
			[]plannedPool{{loadbalancer.PoolActionAddBackends, "new or changed backends: node n3"}, {loadbalancer.PoolActionRemoveBackends, "no longer backends: node n1"}}},
		{"member listed twice", "the copies are one member, removed once",
			mod(func(p *loadbalancer.Pool) { p.Spec.Backends = p.Spec.Backends[1:] }),
			mod(func(p *loadbalancer.Pool) { p.Spec.Backends = append(p.Spec.Backends, p.Spec.Backends[0]) }),
			[]plannedPool{{loadbalancer.PoolActionRemoveBackends, "no longer backends: node n1"}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before := tc.actual.Clone()
			actions, err := loadbalancer.PlanPool(tc.desired, tc.actual)
			if err != nil {
				t.Fatalf("%s: PlanPool: %v", tc.reason, err)
			}
			var got []plannedPool
			for _, a := range actions {
				got = append(got, plannedPool{a.Kind, a.Reason})
				if a.Kind != loadbalancer.PoolActionCreate && a.PoolID != "pool-1" {
					t.Errorf("action %v targets %q; want pool-1", a.Kind, a.PoolID)
				}
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s: (-want +got):\n%s", tc.reason, diff)
			}
			if diff := cmp.Diff(before, tc.actual, cmpOpts); diff != "" {
				t.Errorf("PlanPool modified actual (-before +after):\n%s", diff)
			}
			p := tc.actual
			for _, a := range actions {
				if p, err = loadbalancer.ApplyPool(p, a); err != nil {
					t.Fatalf("ApplyPool(%v): %v", a, err)
				}
				p.ID = "pool-1"
			}
			if rest, err := loadbalancer.PlanPool(tc.desired, p); err != nil || len(rest) != 0 {
				t.Errorf("%s: after applying, PlanPool = %v, %v; want empty", tc.reason, rest, err)
			}
		})
	}
}

func TestPlanPoolErrors(t *testing.T) {
	other := poolBase()
	other.Tags[loadbalancer.TagCluster] = "c2"
	otherKey := poolBase()
	otherKey.Tags[loadbalancer.TagPool] = "all-ipv6-nodename"
	untagged := poolBase()
	untagged.Tags = nil
	cases := []struct {
		name, reason    string
		desired, actual *loadbalancer.Pool
	}{
		{"nil desired", "nothing to plan for", nil, poolBase()},
		{"untagged desired", "a pool without identity would be found by nobody", untagged, poolBase()},
		{"another cluster's pool", "never adopt another cluster's pool", poolBase(), other},
		{"another key's pool", "its members are another set", poolBase(), otherKey},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got, err := loadbalancer.PlanPool(tc.desired, tc.actual); err == nil {
				t.Errorf("%s: PlanPool = %v, nil; want an error", tc.reason, got)
			}
		})
	}
}

func TestApplyPool(t *testing.T) {
	n3 := loadbalancer.Backend{NodeName: "n3", ProviderID: "test://n3", IPv4: addr("10.0.0.3")}
	moved := loadbalancer.Backend{NodeName: "n1", ProviderID: "test://n1", IPv4: addr("10.0.0.11")}
	cases := []struct {
		name, reason string
		pool         *loadbalancer.Pool
		a            loadbalancer.PoolAction
		want         []string // members' node name and address
		wantErr      bool
	}{
		{"create", "a copy of Create, members sorted", nil,
			loadbalancer.PoolAction{Kind: loadbalancer.PoolActionCreate, Create: &loadbalancer.Pool{Spec: loadbalancer.PoolSpec{Backends: []loadbalancer.Backend{n3, moved}}}},
			[]string{"n1 10.0.0.11", "n3 10.0.0.3"}, false},
		{"add", "appended in order", poolBase(), loadbalancer.PoolAction{Kind: loadbalancer.PoolActionAddBackends, PoolID: "pool-1", Backends: []loadbalancer.Backend{n3}},
			[]string{"n1 10.0.0.1", "n2 10.0.0.2", "n3 10.0.0.3"}, false},
		{"add replaces by key", "a member whose address changed is sent again and replaced", poolBase(), loadbalancer.PoolAction{Kind: loadbalancer.PoolActionAddBackends, PoolID: "pool-1", Backends: []loadbalancer.Backend{moved}},
			[]string{"n1 10.0.0.11", "n2 10.0.0.2"}, false},
		{"remove by key", "as reported, by node name", poolBase(), loadbalancer.PoolAction{Kind: loadbalancer.PoolActionRemoveBackends, PoolID: "pool-1", Backends: []loadbalancer.Backend{{NodeName: "n2"}}},
			[]string{"n1 10.0.0.1"}, false},
		{"no pool", "only Create works without one", nil, loadbalancer.PoolAction{Kind: loadbalancer.PoolActionAddBackends, PoolID: "pool-1"}, nil, true},
		{"wrong target", "the action names another pool", poolBase(), loadbalancer.PoolAction{Kind: loadbalancer.PoolActionAddBackends, PoolID: "pool-2"}, nil, true},
		{"create without payload", "payload missing", nil, loadbalancer.PoolAction{Kind: loadbalancer.PoolActionCreate}, nil, true},
		{"unknown kind", "kinds are closed", poolBase(), loadbalancer.PoolAction{Kind: "Explode", PoolID: "pool-1"}, nil, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before := tc.pool.Clone()
			got, err := loadbalancer.ApplyPool(tc.pool, tc.a)
			if tc.wantErr {
				if err == nil {
					t.Errorf("%s: ApplyPool = %v, nil; want an error", tc.reason, got)
				}
				return
			}
			if err != nil {
				t.Fatalf("%s: ApplyPool: %v", tc.reason, err)
			}
			var members []string
			for _, b := range got.Spec.Backends {
				members = append(members, b.NodeName+" "+b.IPv4.String())
			}
			if diff := cmp.Diff(tc.want, members); diff != "" {
				t.Errorf("%s: members (-want +got):\n%s", tc.reason, diff)
			}
			if diff := cmp.Diff(before, tc.pool, cmpOpts); diff != "" {
				t.Errorf("ApplyPool modified its pool (-before +after):\n%s", diff)
			}
		})
	}
}

func TestApplyBackendPool(t *testing.T) {
	lb := planBase()
	got, err := loadbalancer.Apply(lb, loadbalancer.Action{Kind: loadbalancer.ActionUpdateBackendPool, LoadBalancerID: "lb-1", BackendPool: "pool-1"})
	if err != nil {
		t.Fatal(err)
	}
	if got.Spec.BackendPool != "pool-1" || len(got.Spec.Backends) != 2 {
		t.Errorf("after UpdateBackendPool pool-1: pool %q, %d backends; want pool-1 and the 2 backends left as they are", got.Spec.BackendPool, len(got.Spec.Backends))
	}
	if lb.Spec.BackendPool != "" {
		t.Errorf("Apply modified its load balancer")
	}
	if got, err = loadbalancer.Apply(got, loadbalancer.Action{Kind: loadbalancer.ActionUpdateBackendPool, LoadBalancerID: "lb-1"}); err != nil || got.Spec.BackendPool != "" {
		t.Errorf("UpdateBackendPool with no pool: pool %q, %v; want none", got.Spec.BackendPool, err)
	}
}
