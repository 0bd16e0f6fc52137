package housekeeping

import (
	"context"
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	"k8s.io/cloud-provider/api"
	"k8s.io/utils/clock"

	"github.com/ccmkit/ccmkit/fake"
	"github.com/ccmkit/ccmkit/loadbalancer"
)

func newDrift(t *testing.T, e *env, rec record.EventRecorder) *DriftRepair {
	t.Helper()
	informers := e.factory.Core().V1()
	d, err := NewDriftRepair(e.repairer, e.client, informers.Services(), informers.Nodes(),
		DriftRepairOptions{ClusterName: testCluster, Period: time.Minute, Recorder: rec, Clock: e.clock})
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// TestDriftRepairConverged: a pass over provisioned Services whose load
// balancers match them makes no cloud write, and one List serves every
// Service (the Reconciler over the fake's Cache, invalidated once).
func TestDriftRepairConverged(t *testing.T) {
	e := newEnv(t, 3)
	for _, name := range []string{"a", "b", "c"} {
		e.service("shop", name, types.UID("uid-"+name))
	}
	d := newDrift(t, e, nil)
	var r passReport
	got := e.callsDuring(func() { e.run(func() { r = d.pass(t.Context()) }) })
	if diff := cmp.Diff(map[fake.Op]int64{fake.OpListLoadBalancers: 1}, got); diff != "" {
		t.Errorf("cloud calls of a converged pass (-want +got):\n%s", diff)
	}
	if r[driftConverged] != 3 || r.total() != 3 {
		t.Errorf("pass report %v: want 3 converged of 3", r)
	}
}

// TestDriftRepairRepairs: a listener removed and the backends changed
// behind the CCM's back (by a peer, through the same cloud, which the
// CCM's cache does not hear of) are put back by the next pass, with the
// fewest writes, an event on the Service, and the pass after that makes
// no write.
func TestDriftRepairRepairs(t *testing.T) {
	e := newEnv(t, 3)
	svc := e.service("shop", "web", "uid-web")
	svc.Spec.Ports = append(svc.Spec.Ports, v1.ServicePort{Name: "https", Protocol: v1.ProtocolTCP, Port: 443, NodePort: 30443})
	if _, err := e.lb.EnsureLoadBalancer(t.Context(), testCluster, svc, e.nodes); err != nil {
		t.Fatal(err)
	}
	if err := e.factory.Core().V1().Services().Informer().GetIndexer().Update(svc); err != nil {
		t.Fatal(err)
	}
	// The drift: a peer of the cloud (another client of the same account)
	// drops the https listener and one backend.
	peer, err := fake.NewPeer(e.cloud, testClusterID, fake.PeerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	plb, _ := peer.LoadBalancer()
	drifted := svc.DeepCopy()
	drifted.Spec.Ports = drifted.Spec.Ports[:1]
	if _, err := plb.EnsureLoadBalancer(t.Context(), testCluster, drifted, e.nodes[:2]); err != nil {
		t.Fatal(err)
	}
	rec := record.NewFakeRecorder(10)
	d := newDrift(t, e, rec)
	var r passReport
	got := e.callsDuring(func() { e.run(func() { r = d.pass(t.Context()) }) })
	want := map[fake.Op]int64{fake.OpListLoadBalancers: 1, fake.OpApplyLoadBalancer: 2} // AddListener, AddBackends
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("cloud calls of the repairing pass (-want +got):\n%s", diff)
	}
	if r[driftRepaired] != 1 {
		t.Errorf("pass report %v: want 1 repaired", r)
	}
	lb, _ := e.cloud.LoadBalancerFor(testCluster, svc)
	if len(lb.Spec.Listeners) != 2 || len(lb.Spec.Backends) != 3 {
		t.Errorf("after the pass: %d listeners, %d backends; want 2 and 3", len(lb.Spec.Listeners), len(lb.Spec.Backends))
	}
	select {
	case ev := <-rec.Events:
		if want := "Normal LoadBalancerDriftRepaired Repaired the load balancer, which differed from the Service in the cloud: 2 cloud writes"; ev != want {
			t.Errorf("event %q, want %q", ev, want)
		}
	default:
		t.Error("no event recorded for the repair")
	}
	got = e.callsDuring(func() { e.run(func() { r = d.pass(t.Context()) }) })
	if diff := cmp.Diff(map[fake.Op]int64{fake.OpListLoadBalancers: 1}, got); diff != "" {
		t.Errorf("cloud calls of the pass after the repair (-want +got):\n%s", diff)
	}
}

// TestDriftRepairTargets: only the Services the service controller has
// provisioned are checked; the others are its to handle.
func TestDriftRepairTargets(t *testing.T) {
	e := newEnv(t, 1)
	e.service("shop", "ready", "uid-ready")
	class := "example.com/other"
	now := metav1.Now()
	for _, s := range []*v1.Service{
		{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "cluster-ip", UID: "u1"}, Spec: v1.ServiceSpec{Type: v1.ServiceTypeClusterIP}},
		{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "classed", UID: "u2"}, Spec: v1.ServiceSpec{Type: v1.ServiceTypeLoadBalancer, LoadBalancerClass: &class}},
		{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "new", UID: "u3"}, Spec: v1.ServiceSpec{Type: v1.ServiceTypeLoadBalancer}},
		{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "deleting", UID: "u4", DeletionTimestamp: &now, Finalizers: []string{"service.kubernetes.io/load-balancer-cleanup"}},
			Spec: v1.ServiceSpec{Type: v1.ServiceTypeLoadBalancer}, Status: v1.ServiceStatus{LoadBalancer: v1.LoadBalancerStatus{Ingress: []v1.LoadBalancerIngress{{IP: "192.0.2.1"}}}}},
	} {
		if err := e.factory.Core().V1().Services().Informer().GetIndexer().Add(s); err != nil {
			t.Fatal(err)
		}
	}
	d := newDrift(t, e, nil)
	keys, err := d.targets()
	if err != nil {
		t.Fatal(err)
	}
	if len(keys) != 1 || keys[0].String() != "shop/ready" {
		t.Errorf("targets %v, want [shop/ready]", keys)
	}
}

// TestDriftRepairPatchesStatus: when the load balancer's address differs
// from the Service's status (it was recreated behind the CCM's back), the
// pass patches the status, as the service controller would.
func TestDriftRepairPatchesStatus(t *testing.T) {
	e := newEnv(t, 1)
	svc := e.service("shop", "web", "uid-web")
	stale := svc.DeepCopy()
	stale.Status.LoadBalancer.Ingress = []v1.LoadBalancerIngress{{IP: "192.0.2.99"}}
	if err := e.factory.Core().V1().Services().Informer().GetIndexer().Update(stale); err != nil {
		t.Fatal(err)
	}
	d := newDrift(t, e, nil)
	e.run(func() { d.pass(t.Context()) })
	got, err := e.client.CoreV1().Services("shop").Get(t.Context(), "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(svc.Status.LoadBalancer, got.Status.LoadBalancer); diff != "" {
		t.Errorf("status after the pass (-want +got):\n%s", diff)
	}
}

// TestNewDriftRepairErrors: each bad argument is named.
func TestNewDriftRepairErrors(t *testing.T) {
	e := newEnv(t, 0)
	informers := e.factory.Core().V1()
	for _, tc := range []struct {
		name, reason, want string
		opts               DriftRepairOptions
		nilLB              bool
	}{
		{name: "nil lb", reason: "the provider is required", nilLB: true, opts: DriftRepairOptions{ClusterName: "c"},
			want: "housekeeping.NewDriftRepair: driver is nil: expected a non-nil housekeeping.Repairer"},
		{name: "no cluster", reason: "every call needs the cluster name", opts: DriftRepairOptions{},
			want: "housekeeping.NewDriftRepair: Options.ClusterName is empty: expected the CCM's --cluster-name"},
		{name: "negative period", reason: "a period of none is meaningless", opts: DriftRepairOptions{ClusterName: "c", Period: -time.Second},
			want: "housekeeping.NewDriftRepair: Options.Period -1s: expected 0 (the default, 10m0s) or at least 1s (MinPeriod: a shorter period is a busy loop against the cloud)"},
		{name: "nanosecond period", reason: "a pass lists the cloud: 1ns is a busy loop (issue 29)", opts: DriftRepairOptions{ClusterName: "c", Period: time.Nanosecond},
			want: "housekeeping.NewDriftRepair: Options.Period 1ns: expected 0 (the default, 10m0s) or at least 1s (MinPeriod: a shorter period is a busy loop against the cloud)"},
		{name: "just under the minimum", reason: "the bound is MinPeriod", opts: DriftRepairOptions{ClusterName: "c", Period: MinPeriod - 1},
			want: "housekeeping.NewDriftRepair: Options.Period 999.999999ms: expected 0 (the default, 10m0s) or at least 1s (MinPeriod: a shorter period is a busy loop against the cloud)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lb := e.lb.(Repairer)
			if tc.nilLB {
				lb = nil
			}
			_, err := NewDriftRepair(lb, e.client, informers.Services(), informers.Nodes(), tc.opts)
			if err == nil || err.Error() != tc.want {
				t.Errorf("error %v, want %q (%s)", err, tc.want, tc.reason)
			}
		})
	}
}

// racingLB is a Repairer during whose call the Service changes (the
// informer gets a newer version), as when the service controller ensures
// an update, or deletes the load balancer, while drift repair holds the
// older Service.
type racingLB struct {
	Repairer
	before func()
}

func (r *racingLB) RepairLoadBalancer(ctx context.Context, cluster string, svc *v1.Service, nodes []*v1.Node, current func() bool) (*v1.LoadBalancerStatus, error) {
	r.before()
	return r.Repairer.RepairLoadBalancer(ctx, cluster, svc, nodes, current)
}

// TestDriftRepairNeverUndoesNewerWork: when the Service or the Nodes
// change between drift repair's read and its turn on the Service, the
// call changes nothing (loadbalancer.ErrStale): the newer Service, a
// Service being deleted, a Node the service controller has since synced
// are the service controller's, and the load balancer stays as it left it.
func TestDriftRepairNeverUndoesNewerWork(t *testing.T) {
	for _, tc := range []struct {
		name, reason string
		change       func(e *env, svc *v1.Service)
	}{
		{name: "newer spec", reason: "a port added since the read", change: func(e *env, svc *v1.Service) {
			newer := svc.DeepCopy()
			newer.ResourceVersion = "2"
			newer.Spec.Ports = append(newer.Spec.Ports, v1.ServicePort{Name: "https", Protocol: v1.ProtocolTCP, Port: 443, NodePort: 30443})
			e.update(newer)
		}},
		{name: "being deleted", reason: "the service controller is deleting its load balancer", change: func(e *env, svc *v1.Service) {
			gone := svc.DeepCopy()
			gone.ResourceVersion, gone.DeletionTimestamp = "2", &metav1.Time{Time: e.clock.Now()}
			e.update(gone)
		}},
		{name: "node excluded", reason: "a Node labelled out of the backends since the read", change: func(e *env, svc *v1.Service) {
			n := e.nodes[0].DeepCopy()
			n.Labels = map[string]string{v1.LabelNodeExcludeBalancers: "true"}
			if err := e.factory.Core().V1().Nodes().Informer().GetIndexer().Update(n); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, 2)
			svc := e.service("shop", "web", "uid-web")
			svc.ResourceVersion = "1"
			e.update(svc)
			// Drift, so that a stale call would write: one backend gone.
			e.drift(svc, svc.Spec.Ports, e.nodes[:1])
			before, _ := e.cloud.LoadBalancerFor(testCluster, svc)
			e.repairer = &racingLB{Repairer: e.repairer, before: func() { tc.change(e, svc) }}
			d := newDrift(t, e, nil)
			var r passReport
			got := e.callsDuring(func() { e.run(func() { r = d.pass(t.Context()) }) })
			if r[driftSkipped] != 1 {
				t.Errorf("pass report %v: want the Service skipped (%s)", r, tc.reason)
			}
			if n := writes(got); n != 0 {
				t.Errorf("%d cloud writes %v: want none (%s)", n, got, tc.reason)
			}
			after, _ := e.cloud.LoadBalancerFor(testCluster, svc)
			if diff := cmp.Diff(before.Spec, after.Spec, cmpopts.EquateComparable(netip.Addr{}, netip.Prefix{})); diff != "" {
				t.Errorf("load balancer changed (-before +after), %s:\n%s", tc.reason, diff)
			}
		})
	}
}

// TestDriftRepairPacing: a pass waits, after each Service, its share of
// the period (Period / Services) per cloud call the Service's check made,
// and at least a share after a throttled one; nothing after the last.
func TestDriftRepairPacing(t *testing.T) {
	e := newEnv(t, 1)
	for _, name := range []string{"a", "b", "c", "d"} {
		e.service("shop", name, types.UID("uid-"+name))
	}
	d := newDrift(t, e, nil)
	var waits []time.Duration
	d.sleep = func(_ context.Context, _ clock.Clock, w time.Duration) bool {
		waits = append(waits, w)
		return true
	}
	d.pass(t.Context())
	// a: the List of the pass, which serves every Service and holds none
	// back; b, c: answered from it.
	if diff := cmp.Diff([]time.Duration{0, 0, 0}, waits); diff != "" {
		t.Errorf("waits of a converged pass (-want +got):\n%s", diff)
	}
	// A repair's own writes are paced: a share of the period per write.
	a, err := e.factory.Core().V1().Services().Lister().Services("shop").Get("a")
	if err != nil {
		t.Fatal(err)
	}
	e.drift(a, []v1.ServicePort{{Name: "http", Protocol: v1.ProtocolTCP, Port: 8080, NodePort: 30081}}, e.nodes)
	waits = nil
	d.pass(t.Context())
	share := time.Minute / 4
	if diff := cmp.Diff([]time.Duration{share, 0, 0}, waits); diff != "" {
		t.Errorf("waits of a pass whose first Service is repaired with one write (-want +got):\n%s", diff)
	}
}

// TestDriftRepairThrottled: a repair the cloud throttles (429 with
// Retry-After) is deferred to the next pass, and the pass waits at least
// the delay the cloud asked for before its next Service; once the cloud
// takes writes again, the next pass repairs.
func TestDriftRepairThrottled(t *testing.T) {
	e := newEnv(t, 2)
	svc := e.service("shop", "a", "uid-a")
	e.service("shop", "b", "uid-b")
	e.drift(svc, svc.Spec.Ports, e.nodes[:1]) // one backend gone
	e.cloud.SetInterceptor(fake.Funcs{ApplyLoadBalancer: func(context.Context, loadbalancer.Driver, loadbalancer.Action) (*loadbalancer.LoadBalancer, error) {
		return nil, fmt.Errorf("cloud: 429 Too Many Requests: %w", api.NewRetryError("slow down", 40*time.Second))
	}})
	d := newDrift(t, e, nil)
	var waits []time.Duration
	d.sleep = func(_ context.Context, _ clock.Clock, w time.Duration) bool {
		waits = append(waits, w)
		return true
	}
	r := d.pass(t.Context())
	if r[driftRetry] != 1 || r[driftConverged] != 1 {
		t.Errorf("throttled pass report %v: want shop/a deferred (retry), shop/b converged", r)
	}
	if len(waits) != 1 || waits[0] < 40*time.Second {
		t.Errorf("waits %v: want at least the 40s the cloud asked for after the throttled Service", waits)
	}
	e.cloud.SetInterceptor(fake.Funcs{})
	if r := d.pass(t.Context()); r[driftRepaired] != 1 {
		t.Errorf("pass after the throttling %v: want shop/a repaired", r)
	}
	lb, _ := e.cloud.LoadBalancerFor(testCluster, svc)
	if len(lb.Spec.Backends) != 2 {
		t.Errorf("%d backends after the repair; want 2", len(lb.Spec.Backends))
	}
}
