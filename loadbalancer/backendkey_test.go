package loadbalancer_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	k8sfake "k8s.io/client-go/kubernetes/fake"
	cloudprovider "k8s.io/cloud-provider"
	"k8s.io/cloud-provider/api"

	"github.com/ccmkit/ccmkit/loadbalancer"
	"github.com/ccmkit/ccmkit/provider"
)

// renamed returns a Node named name whose instance is id: kubelet's
// --hostname-override, or a Node renamed after its VM was created.
func renamed(name, id string, ips ...string) *v1.Node {
	n := node(name, ips...)
	n.Spec.ProviderID = "test://" + id
	return n
}

// vmCloud is a Driver over a cloud whose targets are instance IDs: it
// keeps only each backend's provider ID and reports only that, as hcloud,
// DigitalOcean or OpenStack servers do.
type vmCloud struct{ *memDriver }

func (d vmCloud) Apply(ctx context.Context, a loadbalancer.Action) (*loadbalancer.LoadBalancer, error) {
	a.Backends = idsOnly(a.Backends)
	if a.Create != nil {
		a.Create = a.Create.Clone()
		a.Create.Spec.Backends = idsOnly(a.Create.Spec.Backends)
	}
	return d.memDriver.Apply(ctx, a)
}

func idsOnly(bs []loadbalancer.Backend) []loadbalancer.Backend {
	var out []loadbalancer.Backend
	for _, b := range bs {
		out = append(out, loadbalancer.Backend{ProviderID: b.ProviderID})
	}
	return out
}

func providerIDs(lb *loadbalancer.LoadBalancer) []string {
	var out []string
	for _, b := range lb.Spec.Backends {
		out = append(out, b.ProviderID)
	}
	return out
}

// TestRenamedNodesKeepTheirTargets is the finding of issue 11: with Node
// names that differ from their instances' and a cloud that keeps instance
// IDs, matching by node name added and removed the same instance in one
// plan, and the instance dropped out. Keyed by provider ID, every instance
// is a backend once and a converged load balancer costs no write.
func TestRenamedNodesKeepTheirTargets(t *testing.T) {
	nodes := []*v1.Node{renamed("web-a", "i-1", "10.0.0.1"), renamed("web-b", "i-2", "10.0.0.2")}
	want := []string{"test://i-1", "test://i-2"}

	t.Run("by node name against a VM-ID cloud loses targets", func(t *testing.T) {
		base := newMemDriver()
		r := newReconcilerOver(t, vmCloud{base}, loadbalancer.Options{})
		mustEnsure(t, r, "c1", lbService(), nodes)
		base.writes()
		mustEnsure(t, r, "c1", lbService(), nodes)
		if applied, _ := base.writes(); len(applied) == 0 {
			t.Errorf("a second Ensure wrote nothing; the default key was expected to fight a cloud that keeps only IDs (this test pins why BackendKeyProviderID exists)")
		}
	})

	caps := allCaps
	caps.BackendKey = loadbalancer.BackendKeyProviderID
	base := newMemDriver()
	r := newReconcilerOver(t, vmCloud{base}, loadbalancer.Options{Capabilities: caps})
	mustEnsure(t, r, "c1", lbService(), nodes)
	if diff := cmp.Diff(want, providerIDs(onlyLB(t, base))); diff != "" {
		t.Errorf("targets after the first Ensure (-want +got):\n%s", diff)
	}
	base.writes()
	mustEnsure(t, r, "c1", lbService(), nodes)
	if applied, _ := base.writes(); len(applied) != 0 {
		t.Errorf("a converged Ensure wrote %v; want nothing", applied)
	}

	// A changed address is not the cloud's business; a new node is one add.
	moved := []*v1.Node{renamed("web-a", "i-1", "10.0.9.9"), nodes[1], renamed("web-c", "i-3", "10.0.0.3")}
	if err := r.UpdateLoadBalancer(t.Context(), "c1", lbService(), moved); err != nil {
		t.Fatalf("UpdateLoadBalancer: %v", err)
	}
	if applied, _ := base.writes(); !slices.Equal(applied, kinds(loadbalancer.ActionAddBackends)) {
		t.Errorf("Update with a moved node and a new one wrote %v; want one AddBackends", applied)
	}
	if diff := cmp.Diff([]string{"test://i-1", "test://i-2", "test://i-3"}, providerIDs(onlyLB(t, base))); diff != "" {
		t.Errorf("targets after Update (-want +got):\n%s", diff)
	}

	// Under this key a node needs no InternalIP: the cloud targets the VM.
	if err := r.UpdateLoadBalancer(t.Context(), "c1", lbService(), append(moved, renamed("web-d", "i-4"))); err != nil {
		t.Fatalf("UpdateLoadBalancer: %v", err)
	}
	if got := providerIDs(onlyLB(t, base)); !slices.Contains(got, "test://i-4") {
		t.Errorf("targets %v; want test://i-4, a node without addresses yet", got)
	}
}

func TestPlanBackendKeys(t *testing.T) {
	tags := loadbalancer.OwnerTags(loadbalancer.OwnerOf("c1", lbService()))
	lb := func(key loadbalancer.BackendKey, bs ...loadbalancer.Backend) *loadbalancer.LoadBalancer {
		return &loadbalancer.LoadBalancer{ID: "lb-1", Tags: tags, Spec: loadbalancer.Spec{BackendKey: key, Backends: bs}}
	}
	full := func(name, id, ip string) loadbalancer.Backend {
		return loadbalancer.Backend{NodeName: name, ProviderID: "test://" + id, IPv4: addr(ip)}
	}
	byID := func(id string) loadbalancer.Backend { return loadbalancer.Backend{ProviderID: "test://" + id} }
	byAddr := func(ip string) loadbalancer.Backend { return loadbalancer.Backend{IPv4: addr(ip)} }
	for _, tc := range []struct {
		name            string
		desired, actual *loadbalancer.LoadBalancer
		add, remove     []string // Backend labels
		reason          string
	}{
		{
			name:    "provider ID: reported IDs only, converged",
			desired: lb(loadbalancer.BackendKeyProviderID, full("web-a", "i-1", "10.0.0.1"), full("web-b", "i-2", "10.0.0.2")),
			actual:  lb("", byID("i-2"), byID("i-1")),
			reason:  "names and addresses are not what the cloud keeps; order is not either",
		},
		{
			name:    "provider ID: one replaced",
			desired: lb(loadbalancer.BackendKeyProviderID, full("web-a", "i-1", "10.0.0.1"), full("web-b", "i-3", "10.0.0.2")),
			actual:  lb("", byID("i-1"), byID("i-2")),
			add:     []string{"web-b"}, remove: []string{"test://i-2"},
			reason: "a node that now points at another instance: add the new, remove the old",
		},
		{
			name:    "provider ID: a target listed twice is not removed",
			desired: lb(loadbalancer.BackendKeyProviderID, full("web-a", "i-1", "10.0.0.1")),
			actual:  lb("", byID("i-1"), byID("i-1")),
			reason:  "the copy has the wanted key; RemoveBackends would remove the wanted target",
		},
		{
			name:    "address: one backend per address",
			desired: lb(loadbalancer.BackendKeyAddress, loadbalancer.Backend{NodeName: "a", IPv4: addr("10.0.0.1")}, loadbalancer.Backend{NodeName: "b", IPv4: addr("10.0.0.2")}),
			actual:  lb("", byAddr("10.0.0.2"), byAddr("10.0.0.9")),
			add:     []string{"a"}, remove: []string{"10.0.0.9"},
			reason: "members are matched by address only",
		},
		{
			name:    "node name: a changed provider ID is sent again, not removed",
			desired: lb("", full("web-a", "i-9", "10.0.0.1")),
			actual:  lb("", full("web-a", "i-1", "10.0.0.1")),
			add:     []string{"web-a"},
			reason:  "the default key keeps today's behaviour: AddBackends replaces by name",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			actions, err := loadbalancer.Plan(tc.desired, tc.actual)
			if err != nil {
				t.Fatalf("Plan: %v", err)
			}
			var add, remove []string
			for _, a := range actions {
				for _, b := range a.Backends {
					label := cmpLabel(b)
					switch a.Kind {
					case loadbalancer.ActionAddBackends:
						add = append(add, label)
					case loadbalancer.ActionRemoveBackends:
						remove = append(remove, label)
					}
				}
			}
			if diff := cmp.Diff(tc.add, add); diff != "" {
				t.Errorf("added (-want +got):\n%s\n(%s)", diff, tc.reason)
			}
			if diff := cmp.Diff(tc.remove, remove); diff != "" {
				t.Errorf("removed (-want +got):\n%s\n(%s)", diff, tc.reason)
			}
			// Applying the plan converges, under the desired key.
			cur := tc.actual.Clone()
			cur.Spec.BackendKey = tc.desired.Spec.BackendKey
			for _, a := range actions {
				if cur, err = loadbalancer.Apply(cur, a); err != nil {
					t.Fatalf("Apply(%v): %v", a, err)
				}
			}
			if again, err := loadbalancer.Plan(tc.desired, cur); err != nil || len(again) != 0 {
				t.Errorf("Plan after applying the plan = %v, %v; want nothing to do", again, err)
			}
		})
	}
}

// cmpLabel names a backend as the table rows do.
func cmpLabel(b loadbalancer.Backend) string {
	switch {
	case b.NodeName != "":
		return b.NodeName
	case b.ProviderID != "":
		return b.ProviderID
	case b.IPv4.IsValid():
		return b.IPv4.String()
	}
	return b.IPv6.String()
}

// TestPlanNeverAddsAndRemovesOneBackend checks, on random desired and
// actual backend lists under every key, that no backend key is both added
// and removed by one plan, and that applying the plan converges.
func TestPlanNeverAddsAndRemovesOneBackend(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 11))
	tags := loadbalancer.OwnerTags(loadbalancer.OwnerOf("c1", lbService()))
	keyOf := map[loadbalancer.BackendKey]func(b loadbalancer.Backend) string{
		loadbalancer.BackendKeyNodeName:   func(b loadbalancer.Backend) string { return b.NodeName },
		loadbalancer.BackendKeyProviderID: func(b loadbalancer.Backend) string { return b.ProviderID },
		loadbalancer.BackendKeyAddress:    func(b loadbalancer.Backend) string { return b.IPv4.String() },
	}
	random := func() loadbalancer.Backend {
		// Small pools so that names, IDs and addresses collide in every
		// combination.
		return loadbalancer.Backend{
			NodeName:   fmt.Sprintf("n%d", rng.IntN(4)),
			ProviderID: fmt.Sprintf("test://i-%d", rng.IntN(4)),
			IPv4:       addr(fmt.Sprintf("10.0.0.%d", rng.IntN(4))),
		}
	}
	for key, id := range keyOf {
		for i := range 2000 {
			var want, have []loadbalancer.Backend
			for range rng.IntN(5) {
				want = append(want, random())
			}
			for range rng.IntN(5) {
				have = append(have, random())
			}
			// Desired never holds one key twice (Backends compacts).
			slices.SortStableFunc(want, func(a, b loadbalancer.Backend) int { return strings.Compare(id(a), id(b)) })
			want = slices.CompactFunc(want, func(a, b loadbalancer.Backend) bool { return id(a) == id(b) })
			desired := &loadbalancer.LoadBalancer{Tags: tags, Spec: loadbalancer.Spec{BackendKey: key, Backends: want}}
			actual := &loadbalancer.LoadBalancer{ID: "lb-1", Tags: tags, Spec: loadbalancer.Spec{Backends: have}}
			actions, err := loadbalancer.Plan(desired, actual)
			if err != nil {
				t.Fatalf("key %q case %d: Plan: %v", key, i, err)
			}
			added := map[string]bool{}
			for _, a := range actions {
				if a.Kind == loadbalancer.ActionAddBackends {
					for _, b := range a.Backends {
						added[id(b)] = true
					}
				}
			}
			cur := actual.Clone()
			cur.Spec.BackendKey = key
			for _, a := range actions {
				if a.Kind == loadbalancer.ActionRemoveBackends {
					for _, b := range a.Backends {
						if added[id(b)] {
							t.Fatalf("key %q case %d: %s both added and removed\nwant %v\nhave %v\nactions %v", key, i, id(b), want, have, actions)
						}
					}
				}
				if cur, err = loadbalancer.Apply(cur, a); err != nil {
					t.Fatalf("key %q case %d: Apply(%v): %v", key, i, a, err)
				}
			}
			if again, err := loadbalancer.Plan(desired, cur); err != nil || len(again) != 0 {
				t.Fatalf("key %q case %d: not converged: %v, %v\nwant %v\nhave %v", key, i, again, err, want, have)
			}
		}
	}
}

func TestBackendsByKey(t *testing.T) {
	dual := renamed("web-a", "i-1", "10.0.0.1", "fd00::1")
	bare := renamed("web-b", "i-2")
	twin := renamed("web-c", "i-1", "10.0.0.3") // the same instance as web-a
	nodes := []*v1.Node{dual, bare, twin, nil}
	fams := []v1.IPFamily{v1.IPv4Protocol, v1.IPv6Protocol}
	for _, tc := range []struct {
		key    loadbalancer.BackendKey
		want   []string
		reason string
	}{
		{loadbalancer.BackendKeyNodeName, []string{"web-a", "web-c"}, "web-b has no address; one backend per node"},
		{loadbalancer.BackendKeyProviderID, []string{"web-a", "web-b"}, "web-b needs no address; web-c's instance (i-1) counts once, the first listed"},
		{loadbalancer.BackendKeyAddress, []string{"web-a:10.0.0.1", "web-c:10.0.0.3", "web-a:fd00::1"}, "one backend per address, sorted by address"},
	} {
		t.Run("key="+string(tc.key), func(t *testing.T) {
			var got []string
			for _, b := range loadbalancer.Backends(tc.key, nodes, fams) {
				s := b.NodeName
				if tc.key == loadbalancer.BackendKeyAddress {
					s += ":" + cmpLabel(loadbalancer.Backend{IPv4: b.IPv4, IPv6: b.IPv6})
				}
				got = append(got, s)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Backends (-want +got):\n%s\n(%s)", diff, tc.reason)
			}
		})
	}
}

// instanceBook is a cloudprovider.InstancesV2 for the bad-node tests:
// addresses and existence by provider ID, a foreign or malformed provider ID
// rejected like instances.Adapter does, and a switch for a cloud outage.
type instanceBook struct {
	cloudprovider.InstancesV2
	mu     sync.Mutex
	addrs  map[string][]v1.NodeAddress // present: the instance exists
	down   error                       // every call fails with it
	calls  int
	exists int
}

func (b *instanceBook) parse(n *v1.Node) error {
	_, err := provider.Codec{Scheme: "test"}.Parse(n.Spec.ProviderID)
	return err
}

func (b *instanceBook) InstanceMetadata(_ context.Context, n *v1.Node) (*cloudprovider.InstanceMetadata, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.calls++
	if b.down != nil {
		return nil, b.down
	}
	if err := b.parse(n); err != nil {
		return nil, fmt.Errorf("node %q: spec.providerID: %w", n.Name, err)
	}
	addrs, ok := b.addrs[n.Spec.ProviderID]
	if !ok {
		return nil, cloudprovider.InstanceNotFound
	}
	return &cloudprovider.InstanceMetadata{ProviderID: n.Spec.ProviderID, NodeAddresses: addrs}, nil
}

func (b *instanceBook) InstanceExists(_ context.Context, n *v1.Node) (bool, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.exists++
	if b.down != nil {
		return false, b.down
	}
	if err := b.parse(n); err != nil {
		return false, err
	}
	_, ok := b.addrs[n.Spec.ProviderID]
	return ok, nil
}

// skipLog records Hooks.NodeSkipped calls.
type skipLog struct {
	mu  sync.Mutex
	got []string
}

func (s *skipLog) hook(_ context.Context, n *v1.Node, reason error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.got = append(s.got, n.Name)
	if reason == nil || reason.Error() == "" {
		s.got = append(s.got, "(no reason)")
	}
}

func (s *skipLog) take() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := s.got
	s.got = nil
	slices.Sort(out)
	return out
}

// TestOneBadNodeAmongGood is the second finding of issue 11: a Node that
// cannot be a target (another provider's or a malformed provider ID, or an
// instance that does not exist) is left out, the good Nodes are served, and
// it is reported once, not on every call.
func TestOneBadNodeAmongGood(t *testing.T) {
	good := []*v1.Node{node("n1", "10.0.0.1"), node("n2", "10.0.0.2")}
	foreign := node("aws-node")
	foreign.Spec.ProviderID = "aws:///eu-west-1a/i-0abc"
	malformed := node("typo")
	malformed.Spec.ProviderID = "test:/n9"
	ghost := node("ghost") // no InternalIP, no instance
	book := &instanceBook{addrs: map[string][]v1.NodeAddress{}}
	for _, n := range good {
		book.addrs[n.Spec.ProviderID] = n.Status.Addresses
	}
	all := append(slices.Clone(good), foreign, malformed, ghost)

	for _, tc := range []struct {
		name   string
		cfg    loadbalancer.Options
		want   []string // backends
		skip   []string // reported nodes
		reason string
	}{
		{
			name: "instances only", cfg: loadbalancer.Options{Instances: book},
			want: []string{"n1", "n2"}, skip: []string{"aws-node", "ghost", "typo"},
			reason: "the provider ID errors come from the address look-up of nodes without an InternalIP",
		},
		{
			name: "codec only", cfg: loadbalancer.Options{Codec: provider.Codec{Scheme: "test"}},
			want: []string{"n1", "n2"}, skip: []string{"aws-node", "typo"},
			reason: "without Instances the ghost is left out as a node without address, silently (documented)",
		},
		{
			name: "provider ID key", cfg: loadbalancer.Options{Instances: book, Codec: provider.Codec{Scheme: "test"}, Capabilities: withKey(loadbalancer.BackendKeyProviderID)},
			want: []string{"n1", "n2"}, skip: []string{"aws-node", "ghost", "typo"},
			reason: "a cloud keyed by instance rejects an unknown instance: the ghost is checked before it is added",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var log skipLog
			tc.cfg.Hooks.NodeSkipped = log.hook
			r, d := newReconciler(t, tc.cfg)
			mustEnsure(t, r, "c1", lbService(), all)
			var got []string
			for _, b := range onlyLB(t, d).Spec.Backends {
				got = append(got, b.NodeName)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("backends (-want +got):\n%s\n(%s)", diff, tc.reason)
			}
			if diff := cmp.Diff(tc.skip, log.take()); diff != "" {
				t.Errorf("reported (-want +got):\n%s\n(%s)", diff, tc.reason)
			}
			// Again, and through Update: nothing new to say, nothing to write.
			d.writes()
			mustEnsure(t, r, "c1", lbService(), all)
			if err := r.UpdateLoadBalancer(t.Context(), "c1", lbService(), all); err != nil {
				t.Fatalf("UpdateLoadBalancer: %v", err)
			}
			if applied, _ := d.writes(); len(applied) != 0 {
				t.Errorf("converged calls wrote %v", applied)
			}
			if got := log.take(); len(got) != 0 {
				t.Errorf("reported again: %v; want each node reported once", got)
			}
		})
	}

	// A node that was reported and is then fixed, then breaks again, is
	// reported again.
	var log skipLog
	r, _ := newReconciler(t, loadbalancer.Options{Codec: provider.Codec{Scheme: "test"}, Hooks: loadbalancer.Hooks{NodeSkipped: log.hook}})
	mustEnsure(t, r, "c1", lbService(), append(slices.Clone(good), malformed))
	fixed := node("typo", "10.0.0.9")
	mustEnsure(t, r, "c1", lbService(), append(slices.Clone(good), fixed))
	mustEnsure(t, r, "c1", lbService(), append(slices.Clone(good), malformed))
	if diff := cmp.Diff([]string{"typo", "typo"}, log.take()); diff != "" {
		t.Errorf("reports of a node that broke, was fixed and broke again (-want +got):\n%s", diff)
	}
}

func withKey(k loadbalancer.BackendKey) loadbalancer.Capabilities {
	c := allCaps
	c.BackendKey = k
	return c
}

// TestCloudErrorIsNotABadNode: when the cloud itself fails, a Node is not
// blamed (no report) and the call fails, so the controller retries; a
// throttled cloud's RetryError reaches the controller.
func TestCloudErrorIsNotABadNode(t *testing.T) {
	late := node("late") // no InternalIP yet
	throttled := fmt.Errorf("instances API: %w", api.NewRetryError("429 Too Many Requests", 3*time.Second))
	book := &instanceBook{addrs: map[string][]v1.NodeAddress{late.Spec.ProviderID: {{Type: v1.NodeInternalIP, Address: "10.0.0.4"}}}, down: throttled}
	for _, key := range []loadbalancer.BackendKey{loadbalancer.BackendKeyNodeName, loadbalancer.BackendKeyProviderID} {
		t.Run("key="+string(key), func(t *testing.T) {
			var log skipLog
			r, d := newReconciler(t, loadbalancer.Options{Instances: book, Capabilities: withKey(key), Hooks: loadbalancer.Hooks{NodeSkipped: log.hook}})
			_, err := r.EnsureLoadBalancer(t.Context(), "c1", lbService(), []*v1.Node{node("n1", "10.0.0.1"), late})
			var re *api.RetryError
			if !errors.As(err, &re) || re.RetryAfter() < 3*time.Second || re.RetryAfter() >= 6*time.Second {
				t.Errorf("Ensure with a throttled instances API: %v; want a RetryError findable with errors.As, after 3s plus up to as much at random", err)
			}
			if applied, _ := d.writes(); len(applied) != 0 {
				t.Errorf("wrote %v while the instances API was throttled; want nothing", applied)
			}
			if got := log.take(); len(got) != 0 {
				t.Errorf("reported %v as bad nodes; a cloud error is not the node's fault", got)
			}
		})
	}
}

// TestThrottledDriver: a Driver says "throttled, retry after D" with a
// wrapped *api.RetryError from any method. GetLoadBalancer,
// UpdateLoadBalancer and EnsureLoadBalancerDeleted, whose RetryErrors the
// service controller does not honour, wait short throttles out within
// Config.MaxThrottleWait; past it, or with waiting off, they return the
// RetryError, findable; it is never a user error.
func TestThrottledDriver(t *testing.T) {
	var userErrors int
	hooks := loadbalancer.Hooks{UserError: func(context.Context, string, *v1.Service, error) { userErrors++ }}
	throttles := func(d *memDriver, n int, delay time.Duration) *int {
		left := n
		err := func() error {
			if left == 0 {
				return nil
			}
			left--
			return fmt.Errorf("POST /load_balancers: %w", api.NewRetryError("429", delay))
		}
		d.onApply = func(loadbalancer.Action) error { return err() }
		d.onDelete = func(*loadbalancer.LoadBalancer) error { return err() }
		return &left
	}

	t.Run("waited out", func(t *testing.T) {
		r, d := newReconciler(t, loadbalancer.Options{Hooks: hooks, MaxThrottleWait: time.Second})
		mustEnsure(t, r, "c1", lbService(), threeNodes())
		left := throttles(d, 2, time.Millisecond)
		if err := r.UpdateLoadBalancer(t.Context(), "c1", lbService(), append(threeNodes(), node("n4", "10.0.0.4"))); err != nil || *left != 0 {
			t.Errorf("Update throttled twice for 1ms: %v (%d throttles left); want it to wait them out", err, *left)
		}
		left = throttles(d, 2, time.Millisecond)
		if err := r.EnsureLoadBalancerDeleted(t.Context(), "c1", lbService()); err != nil || *left != 0 || len(d.stored()) != 0 {
			t.Errorf("Delete throttled twice for 1ms: %v (%d throttles left, %d stored); want it waited out and the load balancer gone", err, *left, len(d.stored()))
		}
	})

	for _, tc := range []struct {
		name   string
		wait   time.Duration
		delay  time.Duration
		reason string
	}{
		{name: "over the budget", wait: 3 * time.Millisecond, delay: 2 * time.Millisecond, reason: "2ms+2ms > 3ms: the second throttle is returned"},
		{name: "waiting off", wait: -1, delay: time.Millisecond, reason: "a negative MaxThrottleWait never waits"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, d := newReconciler(t, loadbalancer.Options{Hooks: hooks, MaxThrottleWait: tc.wait})
			mustEnsure(t, r, "c1", lbService(), threeNodes())
			check := func(op string, err error) {
				t.Helper()
				var re *api.RetryError
				if !errors.As(err, &re) || re.RetryAfter() != tc.delay {
					t.Errorf("%s with a throttled driver: %v; want the Driver's RetryError, findable with errors.As (%s)", op, err, tc.reason)
				}
				if err != nil && strings.Count(err.Error(), string(loadbalancer.ActionAddBackends)) > 1 {
					t.Errorf("%s: the action is named more than once: %v", op, err)
				}
			}
			throttles(d, 1000, tc.delay)
			check("Update", r.UpdateLoadBalancer(t.Context(), "c1", lbService(), append(threeNodes(), node("n4", "10.0.0.4"))))
			check("Delete", r.EnsureLoadBalancerDeleted(t.Context(), "c1", lbService()))
		})
	}
	if userErrors != 0 {
		t.Errorf("UserError called %d times; throttling is not the user's to fix", userErrors)
	}
}

// clientsOf is a cloudprovider.ControllerClientBuilder over one clientset.
type clientsOf struct {
	cloudprovider.ControllerClientBuilder // only Client is used
	cs                                    *k8sfake.Clientset
}

func (c clientsOf) Client(string) (kubernetes.Interface, error) { return c.cs, nil }

// TestSkippedNodeEvent: without Hooks.NodeSkipped, a Node left out gets one
// Warning event on itself and one on the Service once the
// cloud-controller-manager has initialized the provider, so that `kubectl
// describe node` and `kubectl describe service` say why. The events go
// through the broadcaster Initialize starts, to the clientset.
func TestSkippedNodeEvent(t *testing.T) {
	synctest.Test(t, testSkippedNodeEvent)
}

// testSkippedNodeEvent runs in a bubble: synctest.Wait returns once the
// broadcaster's goroutines have written the events and wait for more.
func testSkippedNodeEvent(t *testing.T) {
	cs := k8sfake.NewClientset()
	r, _ := newReconciler(t, loadbalancer.Options{Codec: provider.Codec{Scheme: "test"}})
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	r.Initialize(ctx, clientsOf{cs: cs})
	bad := node("aws-node", "10.0.0.9")
	bad.Namespace, bad.UID = "", "uid-aws-node"
	bad.Spec.ProviderID = "aws:///eu-west-1a/i-0abc"
	for range 3 {
		mustEnsure(t, r, "c1", lbService(), append(threeNodes(), bad))
	}
	synctest.Wait()
	list, err := cs.CoreV1().Events("").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	events := list.Items
	type summary struct{ Type, Reason, Kind, Name string }
	var got []summary
	for _, e := range events {
		got = append(got, summary{e.Type, e.Reason, e.InvolvedObject.Kind, e.InvolvedObject.Name})
		if !strings.Contains(e.Message, "aws:///eu-west-1a/i-0abc") || e.Count > 1 {
			t.Errorf("event on %s (count %d): %q; want it recorded once, naming the provider ID", e.InvolvedObject.Name, e.Count, e.Message)
		}
	}
	slices.SortFunc(got, func(a, b summary) int { return strings.Compare(a.Kind, b.Kind) })
	want := []summary{
		{v1.EventTypeWarning, loadbalancer.EventReasonBackendSkipped, "Node", "aws-node"},
		{v1.EventTypeWarning, loadbalancer.EventReasonBackendSkipped, "Service", "web"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("events (-want +got): the node is reported once, on itself and on the Service:\n%s", diff)
	}
}

// TestThrottledEnsuresSpread: the service controller requeues a Service
// after exactly the delay of the RetryError it gets, so the Reconciler
// spreads throttled Services out: the cloud's delay (at least 1s), doubled
// per consecutive throttled Ensure of the Service, plus up to as much
// again at random; a success resets it, and a load balancer that is only
// provisioning keeps its fixed RetryAfter.
func TestThrottledEnsuresSpread(t *testing.T) {
	throttled := true
	base := newMemDriver()
	r := newReconcilerOver(t, &stripIngress{base}, loadbalancer.Options{RetryAfter: 7 * time.Second})
	base.onApply = func(loadbalancer.Action) error {
		if throttled {
			return fmt.Errorf("POST: %w", api.NewRetryError("429", 200*time.Millisecond))
		}
		return nil
	}
	nodes := threeNodes()
	delay := func(svc *v1.Service) time.Duration {
		t.Helper()
		_, err := r.EnsureLoadBalancer(t.Context(), "c1", svc, nodes)
		var re *api.RetryError
		if !errors.As(err, &re) {
			t.Fatalf("Ensure: %v; want a RetryError", err)
		}
		return re.RetryAfter()
	}
	web, api2 := lbService(), lbService(func(s *v1.Service) { s.Name, s.UID = "api", "uid-api" })
	seen := map[time.Duration]bool{}
	for n, lo := range []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second} {
		d := delay(web)
		if d < lo || d >= 2*lo {
			t.Errorf("throttled Ensure #%d asks to come back after %v; want [%v, %v)", n+1, d, lo, 2*lo)
		}
		seen[d] = true
	}
	if d := delay(api2); d < time.Second || d >= 2*time.Second {
		t.Errorf("another Service's first throttled Ensure asks for %v; want [1s, 2s): counts are per Service", d)
	}
	// Provisioning is not throttling: the fixed RetryAfter, and the count
	// of web starts again.
	throttled = false
	if d := delay(web); d != 7*time.Second {
		t.Errorf("Ensure of a provisioning load balancer asks for %v; want RetryAfter 7s exactly", d)
	}
	throttled = true
	nodes = append(nodes, node("n4", "10.0.0.4")) // a backend to add: a write
	if d := delay(web); d < time.Second || d >= 2*time.Second {
		t.Errorf("first throttled Ensure after a provisioning one asks for %v; want [1s, 2s): the count was reset", d)
	}
	// 20 Services throttled at once do not come back at once.
	for i := range 20 {
		svc := lbService(func(s *v1.Service) { s.Name, s.UID = fmt.Sprint("s", i), types.UID(fmt.Sprint("uid-s", i)) })
		seen[delay(svc)] = true
	}
	if len(seen) < 20 {
		t.Errorf("%d distinct delays among 24 throttled Ensures; want them spread", len(seen))
	}
}
