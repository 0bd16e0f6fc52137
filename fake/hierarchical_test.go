package fake_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http/httptest"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	v1 "k8s.io/api/core/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/ccmkit/ccmkit/fake"
	"github.com/ccmkit/ccmkit/fake/admin"
	"github.com/ccmkit/ccmkit/internal/throttle"
	"github.com/ccmkit/ccmkit/loadbalancer"
	"github.com/ccmkit/ccmkit/provider"
)

// tree is a hierarchical fake cloud (loadBalancers.hierarchical) on a fake
// clock, driven as the Reconciler will drive it once it knows the busy
// error: Find, loadbalancer.Plan, one write through the fake's metered
// load-balancer API, the clock stepped past the busy window, again. Until
// then the Reconciler takes the busy error for a failure, so these tests
// call the Driver themselves.
type tree struct {
	t     *testing.T
	c     *fake.Cloud
	clk   *clocktesting.FakeClock
	api   loadbalancer.ListDriver
	nodes []*v1.Node

	mu      sync.Mutex
	applied []loadbalancer.ActionKind // the writes the cloud performed, in order
}

// newTree builds a hierarchical cloud from cfg with n nodes. An
// interceptor records the kind of every write the cloud performed (applied,
// busy or not), which the call counters cannot tell apart.
func newTree(t *testing.T, cfg fake.Config, n int) *tree {
	t.Helper()
	cfg.LoadBalancers.Hierarchical = true
	tr := &tree{t: t, clk: clocktesting.NewFakeClock(epoch)}
	record := fake.Funcs{ApplyLoadBalancer: func(ctx context.Context, next loadbalancer.Driver, a loadbalancer.Action) (*loadbalancer.LoadBalancer, error) {
		out, err := next.Apply(ctx, a)
		if _, refused, busy := fake.BusyOf(err); err == nil || busy && !refused {
			tr.mu.Lock()
			tr.applied = append(tr.applied, a.Kind)
			tr.mu.Unlock()
		}
		return out, err
	}}
	tr.c, tr.nodes = cloudWithNodes(t, cfg, n, fake.Options{Clock: tr.clk, Interceptor: record})
	tr.api = fake.LoadBalancerAPI(tr.c)
	return tr
}

// writes returns the kinds of the writes performed since the last call.
func (tr *tree) writes() []loadbalancer.ActionKind {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	out := tr.applied
	tr.applied = nil
	return out
}

// desired is the load balancer svc should have on tr's nodes, as the
// fake's provider computes it.
func (tr *tree) desired(svc *v1.Service) *loadbalancer.LoadBalancer {
	tr.t.Helper()
	want, err := loadbalancer.Desired(svc, tr.nodes, loadbalancer.DesiredInput{Cluster: cluster, Capabilities: fake.LoadBalancerCapabilities(tr.c)})
	if err != nil {
		tr.t.Fatalf("Desired: %v", err)
	}
	return want
}

// find returns the load balancer named name as the cloud reports it, or
// nil.
func (tr *tree) find(name string) *loadbalancer.LoadBalancer {
	tr.t.Helper()
	got, err := tr.api.Find(tr.t.Context(), loadbalancer.Query{Name: name})
	if err != nil {
		tr.t.Fatalf("Find(%q): %v", name, err)
	}
	switch len(got) {
	case 0:
		return nil
	case 1:
		return got[0]
	}
	tr.t.Fatalf("Find(%q) = %d load balancers; want at most one", name, len(got))
	return nil
}

// plan is Plan from what the cloud reports now to svc's desired load
// balancer, each action with Current set as the Reconciler sets it.
func (tr *tree) plan(svc *v1.Service) []loadbalancer.Action {
	tr.t.Helper()
	want := tr.desired(svc)
	have := tr.find(want.Name)
	actions, err := loadbalancer.Plan(want, have)
	if err != nil {
		tr.t.Fatalf("Plan: %v", err)
	}
	for i := range actions {
		if actions[i].Kind != loadbalancer.ActionCreate {
			actions[i].Current = have
		}
	}
	return actions
}

// write applies a, which the cloud must perform and answer with the busy
// error of BusyAfterWrite (busy), and returns what it reported.
func (tr *tree) write(a loadbalancer.Action, busy time.Duration) *loadbalancer.LoadBalancer {
	tr.t.Helper()
	out, err := tr.api.Apply(tr.t.Context(), a)
	after, refused, isBusy := fake.BusyOf(err)
	if !isBusy || refused || after != busy || out == nil {
		tr.t.Fatalf("Apply(%v) = %v, %v; want the load balancer and a busy error of %v, applied", a, out, err, busy)
	}
	return out
}

// converge brings svc's load balancer to what it should be, one write at a
// time (at most max; 0: no bound), each followed at once by the next
// planned write, which the busy cloud must refuse without changing
// anything, then stepping the clock past the busy window. It returns the
// writes performed, in order, and how many were refused.
func (tr *tree) converge(svc *v1.Service, max int) (writes []loadbalancer.ActionKind, refused int) {
	tr.t.Helper()
	busy := fake.HierarchicalBusyAfterWrite
	for max == 0 || len(writes) < max {
		actions := tr.plan(svc)
		if len(actions) == 0 {
			return writes, refused
		}
		tr.write(actions[0], busy)
		if next := tr.plan(svc); len(next) > 0 {
			tr.refusedBusy(next[0], busy)
			refused++
		}
		tr.clk.Step(busy)
		writes = append(writes, tr.writes()...)
		if len(writes) > 50 {
			tr.t.Fatalf("no convergence after %v", writes)
		}
	}
	return writes, refused
}

// refusedBusy applies a, which the cloud must refuse because its load
// balancer is busy for left more, changing nothing.
func (tr *tree) refusedBusy(a loadbalancer.Action, left time.Duration) {
	tr.t.Helper()
	before := tr.c.Snapshot()
	out, err := tr.api.Apply(tr.t.Context(), a)
	tr.checkRefusedBusy("Apply("+a.String()+")", err, left)
	if out != nil {
		tr.t.Errorf("refused Apply(%v) returned %v; want nil", a, out)
	}
	if diff := cmp.Diff(before, tr.c.Snapshot(), fake.CmpModel); diff != "" {
		tr.t.Errorf("refused Apply(%v) changed the cloud (-before +after):\n%s", a, diff)
	}
}

// checkRefusedBusy fails the test unless err, what's error, says the load
// balancer is busy for left more and nothing changed.
func (tr *tree) checkRefusedBusy(what string, err error, left time.Duration) {
	tr.t.Helper()
	after, refused, busy := fake.BusyOf(err)
	if !busy || !refused || after != left || !errors.Is(err, throttle.ErrRefused) || !strings.Contains(err.Error(), "409") {
		tr.t.Errorf("%s = %v; want a 409 wrapping throttle.ErrRefused and a busy error of %v", what, err, left)
	}
}

// byName are the backends of nodes node-01..node-<n> as a cloud keeping
// whole backends holds them.
func byName(n int) []loadbalancer.Backend {
	var out []loadbalancer.Backend
	for i := 1; i <= n; i++ {
		out = append(out, loadbalancer.Backend{NodeName: nodeName(i), ProviderID: "fake://i-" + strconv.Itoa(i), IPv4: netip.MustParseAddr("10.0.0." + strconv.Itoa(i))})
	}
	return out
}

// kindCount counts writes by kind.
func kindCount(writes []loadbalancer.ActionKind) map[loadbalancer.ActionKind]int {
	out := map[loadbalancer.ActionKind]int{}
	for _, k := range writes {
		out[k]++
	}
	return out
}

// twoPorts is a Service with two TCP ports.
func twoPorts(name string) *v1.Service {
	svc := service(name)
	svc.Spec.Ports = append(svc.Spec.Ports, v1.ServicePort{Name: "https", Protocol: v1.ProtocolTCP, Port: 443, NodePort: 30443})
	return svc
}

// TestHierarchicalBringUp: a Service's load balancer is built one cloud
// object per write: the load balancer alone, then per listener the
// listener, its pool, the pool's members (none without Nodes) and its
// health monitor; every write leaves it busy and the next write at once is
// refused; the call counters count both. The tree it ends with is
// reported whole, with the cloud's IDs, and in realistic mode the members
// are instance IDs.
func TestHierarchicalBringUp(t *testing.T) {
	tests := []struct {
		name, reason string
		cfg          fake.Config
		nodes        int
		svc          *v1.Service
		want         map[loadbalancer.ActionKind]int
		members      []loadbalancer.Backend // of every pool
	}{
		{name: "two ports, two nodes", reason: "1 load balancer + 4 objects per listener", nodes: 2, svc: twoPorts("web"),
			want: map[loadbalancer.ActionKind]int{loadbalancer.ActionCreate: 1, loadbalancer.ActionAddListener: 2, loadbalancer.ActionAddListenerPool: 2,
				loadbalancer.ActionAddBackends: 2, loadbalancer.ActionUpdateHealthCheck: 2},
			members: byName(2)},
		{name: "two ports, no nodes", reason: "no members write: 1 + 3 per listener", svc: twoPorts("web"),
			want: map[loadbalancer.ActionKind]int{loadbalancer.ActionCreate: 1, loadbalancer.ActionAddListener: 2, loadbalancer.ActionAddListenerPool: 2,
				loadbalancer.ActionUpdateHealthCheck: 2}},
		{name: "realistic, one port", reason: "combines with provisioning delay, rate limit and instance-ID members", cfg: fake.Config{Realistic: true}, nodes: 2, svc: service("web"),
			want: map[loadbalancer.ActionKind]int{loadbalancer.ActionCreate: 1, loadbalancer.ActionAddListener: 1, loadbalancer.ActionAddListenerPool: 1,
				loadbalancer.ActionAddBackends: 1, loadbalancer.ActionUpdateHealthCheck: 1},
			members: []loadbalancer.Backend{{ProviderID: "fake://i-1"}, {ProviderID: "fake://i-2"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tr := newTree(t, tt.cfg, tt.nodes)
			if caps := fake.LoadBalancerCapabilities(tr.c); !caps.ListenerPools || caps.SharedBackendPools {
				t.Fatalf("capabilities %+v; want ListenerPools and no SharedBackendPools", caps)
			}
			tr.c.ResetCalls()
			writes, refused := tr.converge(tt.svc, 0)
			if diff := cmp.Diff(tt.want, kindCount(writes)); diff != "" {
				t.Errorf("writes by kind (-want +got) (%s):\n%s", tt.reason, diff)
			}
			if writes[0] != loadbalancer.ActionCreate {
				t.Errorf("first write %s; want %s", writes[0], loadbalancer.ActionCreate)
			}
			calls := tr.c.Calls()
			if calls.Writes != int64(len(writes)+refused) || calls.Busy != int64(refused) || calls.BusyByOp[fake.OpApplyLoadBalancer] != int64(refused) || refused != len(writes)-1 {
				t.Errorf("Calls = %+v; want %d writes performed and %d refused while busy, counted", calls, len(writes), len(writes)-1)
			}
			lb := tr.find(tr.desired(tt.svc).Name)
			checkTree(t, lb, len(tt.svc.Spec.Ports), tt.members)
		})
	}
}

// checkTree fails the test unless lb is a whole hierarchical tree of n
// listeners, each with a cloud ID and a pool with an ID, members, the
// Service's node port when it has members, and a health monitor; and
// nothing load-balancer-wide.
func checkTree(t *testing.T, lb *loadbalancer.LoadBalancer, n int, members []loadbalancer.Backend) {
	t.Helper()
	if lb == nil || len(lb.Spec.Listeners) != n {
		t.Fatalf("load balancer %+v; want %d listeners", lb, n)
	}
	if len(lb.Spec.Backends) != 0 || lb.Spec.HealthCheck != (loadbalancer.HealthCheck{}) || !lb.Spec.ListenerPools {
		t.Errorf("load balancer backends %v, health check %+v, listenerPools %v; want none, none, true: the truth is per pool", lb.Spec.Backends, lb.Spec.HealthCheck, lb.Spec.ListenerPools)
	}
	ids := map[string]bool{}
	for _, l := range lb.Spec.Listeners {
		p := l.Pool
		if !strings.HasPrefix(l.ID, "lis-") || p == nil || !strings.HasPrefix(p.ID, "pool-") || ids[l.ID] || ids[p.ID] {
			t.Errorf("listener %+v: want a distinct lis-<n> ID and a pool with a distinct pool-<n> ID", l)
			continue
		}
		ids[l.ID], ids[p.ID] = true, true
		if diff := cmp.Diff(members, p.Backends, fake.CmpModel, cmpopts.EquateEmpty()); diff != "" {
			t.Errorf("members of %s (-want +got):\n%s", p.ID, diff)
		}
		if p.HealthCheck == nil || p.HealthCheck.Protocol != loadbalancer.HealthCheckHTTP {
			t.Errorf("pool %s health monitor %+v; want the Service's", p.ID, p.HealthCheck)
		}
		if want := map[bool]int32{true: 0, false: l.Port + 30000}[len(members) == 0]; l.NodePort != want {
			t.Errorf("listener %s node port %d; want %d (0: the cloud keeps it on the members)", l.ID, l.NodePort, want)
		}
	}
}

// TestHierarchicalChanges: after bring-up, a changed Service port is six
// writes (the old pool, the old listener, the new listener, its pool,
// members and monitor: the port is immutable); a Node joining is one
// member write per pool; a changed node port is one write of the
// listener, whose pool keeps its ID and members.
func TestHierarchicalChanges(t *testing.T) {
	tr := newTree(t, fake.Config{}, 2)
	svc := twoPorts("web")
	tr.converge(svc, 0)
	name := tr.desired(svc).Name

	svc.Spec.Ports[0].Port = 8080
	writes, _ := tr.converge(svc, 0)
	want := []loadbalancer.ActionKind{loadbalancer.ActionRemoveListenerPool, loadbalancer.ActionRemoveListener, loadbalancer.ActionAddListener,
		loadbalancer.ActionAddListenerPool, loadbalancer.ActionAddBackends, loadbalancer.ActionUpdateHealthCheck}
	if diff := cmp.Diff(want, writes); diff != "" {
		t.Errorf("port change: writes (-want +got):\n%s", diff)
	}

	in, err := tr.c.AddInstance(fake.Instance{Name: "node-03"})
	if err != nil {
		t.Fatal(err)
	}
	tr.nodes = append(tr.nodes, mustNode(t, tr.c, in.ID))
	writes, _ = tr.converge(svc, 0)
	if diff := cmp.Diff([]loadbalancer.ActionKind{loadbalancer.ActionAddBackends, loadbalancer.ActionAddBackends}, writes); diff != "" {
		t.Errorf("node join: writes (-want +got), one member write per pool:\n%s", diff)
	}

	before := tr.find(name)
	svc.Spec.Ports[1].NodePort = 31443
	writes, _ = tr.converge(svc, 0)
	if diff := cmp.Diff([]loadbalancer.ActionKind{loadbalancer.ActionUpdateListener}, writes); diff != "" {
		t.Errorf("node port change: writes (-want +got):\n%s", diff)
	}
	after := tr.find(name)
	b, a := before.Spec.Listeners[0], after.Spec.Listeners[0] // 443 sorts before 8080
	if a.Port != 443 || a.NodePort != 31443 || a.ID != b.ID || a.Pool.ID != b.Pool.ID || len(a.Pool.Backends) != 3 {
		t.Errorf("listener after a node port change %+v (pool %+v); want port 443, node port 31443, the same IDs %s, %s and 3 members", a, a.Pool, b.ID, b.Pool.ID)
	}
}

// TestHierarchicalBusy: a write leaves the load balancer busy for
// BusyAfterWrite on the cloud's clock; until then every write, Apply or
// Delete, is refused with the time left and changes nothing, and is
// counted; then writes pass again.
func TestHierarchicalBusy(t *testing.T) {
	tr := newTree(t, fake.Config{}, 1)
	svc := service("web")
	tr.converge(svc, 0)
	lb := tr.find(tr.desired(svc).Name)
	tags := loadbalancer.Action{Kind: loadbalancer.ActionUpdateTags, LoadBalancerID: lb.ID, Tags: map[string]string{"team": "a"}}
	tr.c.ResetCalls()

	tr.write(tags, time.Second)
	if got := tr.c.Snapshot().LoadBalancers[0].BusyUntil; !got.Equal(tr.clk.Now().Add(time.Second)) {
		t.Errorf("Snapshot BusyUntil %v; want %v", got, tr.clk.Now().Add(time.Second))
	}
	tr.refusedBusy(tags, time.Second)
	tr.clk.Step(400 * time.Millisecond)
	tr.refusedBusy(tags, 600*time.Millisecond)
	before := tr.c.Snapshot()
	tr.checkRefusedBusy("Delete", tr.api.Delete(t.Context(), lb), 600*time.Millisecond)
	if diff := cmp.Diff(before, tr.c.Snapshot(), fake.CmpModel); diff != "" {
		t.Errorf("refused Delete changed the cloud (-before +after):\n%s", diff)
	}
	want := fake.Calls{Writes: 4, Busy: 3, ByOp: map[fake.Op]int64{fake.OpApplyLoadBalancer: 3, fake.OpDeleteLoadBalancer: 1},
		BusyByOp: map[fake.Op]int64{fake.OpApplyLoadBalancer: 2, fake.OpDeleteLoadBalancer: 1}}
	if diff := cmp.Diff(want, tr.c.Calls()); diff != "" {
		t.Errorf("Calls (-want +got):\n%s", diff)
	}
	tr.clk.Step(600 * time.Millisecond)
	tr.write(tags, time.Second)
}

// TestBusyAfterWriteDefaults: busyAfterWrite defaults to 1s on a
// hierarchical cloud and to never on a flat one; "0s" turns it off; set
// on a flat cloud it makes that one busy too.
func TestBusyAfterWriteDefaults(t *testing.T) {
	tests := []struct {
		name, reason string
		cfg          fake.LoadBalancerSection
		want         time.Duration // 0: never busy
	}{
		{name: "hierarchical", reason: "Octavia's PENDING_UPDATE", cfg: fake.LoadBalancerSection{Hierarchical: true}, want: fake.HierarchicalBusyAfterWrite},
		{name: "hierarchical, 0s", reason: "0s: never busy", cfg: fake.LoadBalancerSection{Hierarchical: true, BusyAfterWrite: &provider.Duration{}}},
		{name: "flat", reason: "today's fake is never busy", cfg: fake.LoadBalancerSection{}},
		{name: "flat, 2s", reason: "the behaviour on its own", cfg: fake.LoadBalancerSection{BusyAfterWrite: &provider.Duration{Duration: 2 * time.Second}}, want: 2 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newCloud(t, fake.Config{LoadBalancers: tt.cfg})
			want, err := loadbalancer.Desired(service("web"), nil, loadbalancer.DesiredInput{Cluster: cluster, Capabilities: fake.LoadBalancerCapabilities(c)})
			if err != nil {
				t.Fatal(err)
			}
			out, err := fake.LoadBalancerAPI(c).Apply(t.Context(), loadbalancer.Action{Kind: loadbalancer.ActionCreate, Create: want})
			after, refused, busy := fake.BusyOf(err)
			switch {
			case out == nil || refused || (err != nil) != (tt.want > 0):
				t.Errorf("create = %v, %v; want the load balancer, busy for %v (%s)", out, err, tt.want, tt.reason)
			case busy && after != tt.want:
				t.Errorf("create busy for %v; want %v (%s)", after, tt.want, tt.reason)
			}
		})
	}
}

// TestHierarchicalRules: what the hierarchical cloud refuses, each
// changing nothing: a listener's new port (immutable: a plain error
// naming the listener, not busy), backends or a health check without the
// listener whose pool they change, a second pool; and the pool removal,
// which takes the members and the monitor with it and leaves the
// listener.
func TestHierarchicalRules(t *testing.T) {
	tr := newTree(t, fake.Config{}, 1)
	svc := service("web")
	tr.converge(svc, 0)
	lb := tr.find(tr.desired(svc).Name)
	l := lb.Spec.Listeners[0]
	moved := l
	moved.Port = 81
	backend := loadbalancer.Backend{NodeName: "node-01", ProviderID: "fake://i-1"}
	hc := loadbalancer.HealthCheck{Protocol: loadbalancer.HealthCheckHTTP, Port: 10256, Path: "/healthz"}
	tests := []struct {
		name, reason string
		action       loadbalancer.Action
		want         []string
		refused      bool // wraps throttle.ErrRefused
	}{
		{name: "port change", reason: "a listener's port is immutable", refused: true,
			action: loadbalancer.Action{Kind: loadbalancer.ActionUpdateListener, OldListener: &l, Listener: &moved},
			want:   []string{"listener IPv4/TCP/80", `"` + l.ID + `"`, "IPv4/TCP/81", "immutable", "expected a RemoveListener and an AddListener"}},
		{name: "backends without listener", reason: "no load-balancer-wide backends", refused: true,
			action: loadbalancer.Action{Kind: loadbalancer.ActionAddBackends, Backends: []loadbalancer.Backend{backend}},
			want:   []string{"AddBackends", "without a listener", "expected the listener whose pool it changes"}},
		{name: "removal without listener", reason: "no load-balancer-wide backends", refused: true,
			action: loadbalancer.Action{Kind: loadbalancer.ActionRemoveBackends, Backends: []loadbalancer.Backend{backend}},
			want:   []string{"RemoveBackends", "without a listener"}},
		{name: "health check without listener", reason: "one monitor per pool", refused: true,
			action: loadbalancer.Action{Kind: loadbalancer.ActionUpdateHealthCheck, HealthCheck: &hc},
			want:   []string{"UpdateHealthCheck", "without a listener"}},
		{name: "second pool", reason: "loadbalancer.Apply's rule: one pool per listener",
			action: loadbalancer.Action{Kind: loadbalancer.ActionAddListenerPool, Listener: &l},
			want:   []string{"listener IPv4/TCP/80 already has a pool"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.action.LoadBalancerID, tt.action.Current = lb.ID, lb
			before := tr.c.Snapshot()
			out, err := tr.api.Apply(t.Context(), tt.action)
			if _, _, busy := fake.BusyOf(err); err == nil || out != nil || busy || throttle.Refused(err) != tt.refused {
				t.Fatalf("Apply = %v, %v; want a plain error, refused %v (%s)", out, err, tt.refused, tt.reason)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("Apply = %q; want it to contain %q (%s)", err, w, tt.reason)
				}
			}
			if diff := cmp.Diff(before, tr.c.Snapshot(), fake.CmpModel); diff != "" {
				t.Errorf("refused Apply changed the cloud (-before +after):\n%s", diff)
			}
		})
	}

	pl := l
	out := tr.write(loadbalancer.Action{Kind: loadbalancer.ActionRemoveListenerPool, LoadBalancerID: lb.ID, Listener: &pl, Current: lb}, time.Second)
	got := out.Spec.Listeners
	if len(got) != 1 || got[0].ID != l.ID || got[0].Pool != nil || got[0].NodePort != l.NodePort {
		t.Errorf("after RemoveListenerPool: listeners %+v; want %s alone, node port %d, no pool (members and monitor gone with it)", got, l.ID, l.NodePort)
	}
}

// TestHierarchicalDelete: deleting a load balancer deletes its whole tree
// in one call and frees its VIP, but not while it is busy.
func TestHierarchicalDelete(t *testing.T) {
	tr := newTree(t, fake.Config{}, 2)
	svc := twoPorts("web")
	tr.converge(svc, 3)                          // the load balancer and its listeners
	lb := tr.write(tr.plan(svc)[0], time.Second) // a pool: busy
	half := fake.HierarchicalBusyAfterWrite / 2
	tr.clk.Step(half)
	tr.checkRefusedBusy("Delete", tr.api.Delete(t.Context(), lb), half)
	tr.clk.Step(half)
	tr.c.ResetCalls()
	if err := tr.api.Delete(t.Context(), lb); err != nil {
		t.Fatalf("Delete = %v; want nil", err)
	}
	if got := tr.find(lb.Name); got != nil {
		t.Errorf("after Delete, Find = %+v; want nothing", got)
	}
	st := tr.c.Snapshot()
	if len(st.LoadBalancers) != 0 || st.AddressPools[len(st.AddressPools)-2].Allocated != 0 {
		t.Errorf("after Delete: load balancers %v, pools %+v; want none and the VIP freed", st.LoadBalancers, st.AddressPools)
	}
	if calls := tr.c.Calls(); calls.Writes != 1 {
		t.Errorf("Delete made %d writes; want 1 (the cloud deletes the children)", calls.Writes)
	}
}

// TestHierarchicalHalfDone: a load balancer stopped half-way through its
// bring-up is reported as it is, a listener with an empty pool (node port
// 0: unknown, the cloud keeps it on the members) and no sign of the other
// listener, and Plan from there makes exactly the writes it lacks.
func TestHierarchicalHalfDone(t *testing.T) {
	tr := newTree(t, fake.Config{}, 2)
	svc := twoPorts("web")
	writes, _ := tr.converge(svc, 3)
	if diff := cmp.Diff([]loadbalancer.ActionKind{loadbalancer.ActionCreate, loadbalancer.ActionAddListener, loadbalancer.ActionAddListener}, writes); diff != "" {
		t.Fatalf("the first writes (-want +got):\n%s", diff)
	}
	tr.converge(svc, 1) // the pool of the first listener
	lb := tr.find(tr.desired(svc).Name)
	want := []loadbalancer.Listener{
		{ListenerKey: loadbalancer.ListenerKey{Family: v1.IPv4Protocol, Protocol: v1.ProtocolTCP, Port: 80}, ID: "lis-1", Pool: &loadbalancer.ListenerPool{ID: "pool-1"}},
		{ListenerKey: loadbalancer.ListenerKey{Family: v1.IPv4Protocol, Protocol: v1.ProtocolTCP, Port: 443}, NodePort: 30443, ID: "lis-2"},
	}
	if diff := cmp.Diff(want, lb.Spec.Listeners, cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("half-done listeners (-want +got):\n%s", diff)
	}
	rest := tr.plan(svc)
	var kinds []loadbalancer.ActionKind
	for _, a := range rest {
		kinds = append(kinds, a.Kind)
	}
	// Left: the second listener's pool, both pools' members and monitors.
	wantKinds := map[loadbalancer.ActionKind]int{loadbalancer.ActionAddListenerPool: 1, loadbalancer.ActionAddBackends: 2, loadbalancer.ActionUpdateHealthCheck: 2}
	if diff := cmp.Diff(wantKinds, kindCount(kinds)); diff != "" {
		t.Errorf("Plan from the half-done tree (-want +got):\n%s", diff)
	}
	writes, _ = tr.converge(svc, 0)
	if len(writes) != len(rest) {
		t.Errorf("finishing took %v; want the %d planned writes", writes, len(rest))
	}
	checkTree(t, tr.find(lb.Name), 2, byName(2))
}

// TestFlatModesUnchanged: without loadBalancers.hierarchical, in the
// default and the realistic mode, the provider declares no listener
// pools, a load balancer is created whole in one write, listeners get no
// cloud IDs and nothing is ever busy.
func TestFlatModesUnchanged(t *testing.T) {
	for _, cfg := range []fake.Config{{}, {Realistic: true}} {
		_, withClock := newClock()
		c, nodes := cloudWithNodes(t, cfg, 2, withClock)
		if caps := fake.LoadBalancerCapabilities(c); caps.ListenerPools {
			t.Errorf("realistic %v: ListenerPools declared", cfg.Realistic)
		}
		c.ResetCalls()
		_, _ = lbOf(t, c).EnsureLoadBalancer(t.Context(), cluster, twoPorts("web"), nodes) // realistic: provisioning
		calls := c.Calls()
		lb := c.Snapshot().LoadBalancers[0]
		if calls.ByOp[fake.OpApplyLoadBalancer] != 1 || calls.Busy != 0 || !lb.BusyUntil.IsZero() || lb.Spec.ListenerPools || len(lb.Spec.Listeners) != 2 || len(lb.Spec.Backends) != 2 {
			t.Errorf("realistic %v: calls %+v, load balancer %+v; want one write, never busy, two listeners and two backends on the load balancer", cfg.Realistic, calls, lb)
		}
		for _, l := range lb.Spec.Listeners {
			if l.ID != "" || l.Pool != nil {
				t.Errorf("realistic %v: listener %+v; want no ID and no pool", cfg.Realistic, l)
			}
		}
	}
}

// TestListenerPoolsNeedHierarchical: a narrowed capability cannot declare
// listener pools on a flat cloud (TestConfigValidate checks the
// cloud-config's fields).
func TestListenerPoolsNeedHierarchical(t *testing.T) {
	_, err := fake.New(fake.Config{}, fake.Options{LoadBalancerCapabilities: &loadbalancer.Capabilities{ListenerPools: true}})
	if err == nil || !strings.Contains(err.Error(), "ListenerPools true, but loadBalancers.hierarchical is false") {
		t.Errorf("New with ListenerPools on a flat cloud = %v; want an error naming both", err)
	}
}

// TestHierarchicalAdmin: GET /loadbalancers serves the tree as Snapshot
// has it, through its JSON form: listener and pool IDs, members, monitors,
// listenerPools and the moment the load balancer stops being busy.
func TestHierarchicalAdmin(t *testing.T) {
	tr := newTree(t, fake.Config{}, 1)
	svc := service("web")
	tr.converge(svc, 0)
	srv := httptest.NewServer(admin.Handler(tr.c))
	t.Cleanup(srv.Close)
	code, body := get(t, srv.URL+"/loadbalancers")
	if code != 200 {
		t.Fatalf("GET /loadbalancers = %d %s", code, body)
	}
	var got []fake.LoadBalancer
	if err := json.Unmarshal(body, &got); err != nil {
		t.Fatalf("GET /loadbalancers = %s: %v", body, err)
	}
	want := tr.c.Snapshot().LoadBalancers
	if diff := cmp.Diff(want, got, fake.CmpModel); diff != "" {
		t.Errorf("GET /loadbalancers (-Snapshot +served):\n%s", diff)
	}
	if l := want[0].Spec.Listeners[0]; !want[0].Spec.ListenerPools || want[0].BusyUntil.IsZero() || l.ID == "" || l.Pool == nil || l.Pool.ID == "" || l.Pool.HealthCheck == nil || len(l.Pool.Backends) != 1 {
		t.Errorf("served load balancer %+v; want a whole tree and its busyUntil", want[0])
	}
}
