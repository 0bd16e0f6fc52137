package housekeeping

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	servicehelper "k8s.io/cloud-provider/service/helpers"

	"github.com/ccmkit/ccmkit/fake"
	"github.com/ccmkit/ccmkit/loadbalancer"
)

// TestFindOrphans is the decision table of orphan collection.
func TestFindOrphans(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	lb := func(id, uid, svc string) *loadbalancer.LoadBalancer {
		tags := map[string]string{loadbalancer.TagCluster: "c"}
		if uid != "" {
			tags[loadbalancer.TagServiceUID] = uid
		}
		if svc != "" {
			tags[loadbalancer.TagService] = svc
		}
		return &loadbalancer.LoadBalancer{ID: id, Tags: tags}
	}
	svc := func(name, uid string, provisioned bool) *v1.Service {
		s := &v1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name}, Spec: v1.ServiceSpec{Type: v1.ServiceTypeLoadBalancer}}
		s.UID = types.UID(uid)
		if provisioned {
			s.Finalizers = []string{servicehelper.LoadBalancerCleanupFinalizer}
			s.Status.LoadBalancer.Ingress = []v1.LoadBalancerIngress{{IP: "192.0.2.1"}}
		}
		return s
	}
	clusterIP := svc("web", "new", false)
	clusterIP.Spec.Type = v1.ServiceTypeClusterIP
	for _, tc := range []struct {
		name, reason string
		owned        []*loadbalancer.LoadBalancer
		services     []*v1.Service
		claims       map[string]*v1.Service
		seen         map[string]time.Time
		grace        time.Duration
		want         map[string]orphanState // ID → state
	}{
		{name: "live", reason: "a Service has the UID", owned: []*loadbalancer.LoadBalancer{lb("lb-1", "old", "ns/web")},
			services: []*v1.Service{svc("web", "old", true)}, grace: time.Minute, want: map[string]orphanState{}},
		{name: "untagged", reason: "no Service UID tag: not ccmkit's to collect", owned: []*loadbalancer.LoadBalancer{lb("lb-1", "", "")},
			grace: time.Minute, want: map[string]orphanState{}},
		{name: "new orphan waits", reason: "first seen now: the grace period starts", owned: []*loadbalancer.LoadBalancer{lb("lb-1", "old", "ns/web")},
			grace: time.Minute, want: map[string]orphanState{"lb-1": orphanWaiting}},
		{name: "past grace", reason: "seen a grace period ago", owned: []*loadbalancer.LoadBalancer{lb("lb-1", "old", "ns/web")},
			seen: map[string]time.Time{"lb-1": t0.Add(-time.Minute)}, grace: time.Minute, want: map[string]orphanState{"lb-1": orphanDue}},
		{name: "no grace", reason: "negative grace: due at once", owned: []*loadbalancer.LoadBalancer{lb("lb-1", "old", "ns/web")},
			grace: -1, want: map[string]orphanState{"lb-1": orphanDue}},
		{name: "successor on its way", reason: "same name, new UID, not provisioned yet: held past the grace period",
			owned: []*loadbalancer.LoadBalancer{lb("lb-1", "old", "ns/web")}, services: []*v1.Service{svc("web", "new", false)},
			seen: map[string]time.Time{"lb-1": t0.Add(-time.Hour)}, grace: time.Minute, want: map[string]orphanState{"lb-1": orphanHeld}},
		{name: "successor provisioned", reason: "the new Service's lifecycle ran: the old load balancer is due",
			owned: []*loadbalancer.LoadBalancer{lb("lb-1", "old", "ns/web")}, services: []*v1.Service{svc("web", "new", true)},
			seen: map[string]time.Time{"lb-1": t0.Add(-time.Hour)}, grace: time.Minute, want: map[string]orphanState{"lb-1": orphanDue}},
		{name: "claimed", reason: "a Service names it by stored ID: held whatever the grace period",
			owned: []*loadbalancer.LoadBalancer{lb("lb-1", "old", "ns/web")}, claims: map[string]*v1.Service{"lb-1": svc("keeper", "k", false)},
			seen: map[string]time.Time{"lb-1": t0.Add(-time.Hour)}, grace: time.Minute, want: map[string]orphanState{"lb-1": orphanHeld}},
		{name: "successor not a load balancer", reason: "a ClusterIP Service without finalizer has nothing pending",
			owned: []*loadbalancer.LoadBalancer{lb("lb-1", "old", "ns/web")}, services: []*v1.Service{clusterIP},
			seen: map[string]time.Time{"lb-1": t0.Add(-time.Hour)}, grace: time.Minute, want: map[string]orphanState{"lb-1": orphanDue}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, seen := findOrphans(orphansInput{owned: tc.owned, services: tc.services, claims: tc.claims, seen: tc.seen, now: t0, grace: tc.grace})
			states := map[string]orphanState{}
			for _, o := range got {
				states[o.lb.ID] = o.state
				if _, ok := seen[o.lb.ID]; !ok {
					t.Errorf("orphan %s not in the new seen", o.lb.ID)
				}
			}
			if diff := cmp.Diff(tc.want, states); diff != "" {
				t.Errorf("orphans (-want +got), %s:\n%s", tc.reason, diff)
			}
			if len(seen) != len(got) {
				t.Errorf("seen %v: want exactly the orphans", seen)
			}
		})
	}
}

func newCollector(t *testing.T, e *env, opts OrphanCollectorOptions) *OrphanCollector {
	t.Helper()
	opts.ClusterName, opts.Clock = testCluster, e.clock
	opts.Period = time.Minute
	o, err := NewOrphanCollector(e.lb.(Owners), e.client, e.factory.Core().V1().Services(), opts)
	if err != nil {
		t.Fatal(err)
	}
	return o
}

// ids returns the IDs of the fake's load balancers.
func (e *env) ids() []string {
	var out []string
	for _, lb := range e.cloud.Snapshot().LoadBalancers {
		out = append(out, lb.ID)
	}
	return out
}

// TestOrphanCollector: a Service removed by force leaves its load
// balancer, which is deleted once it has been orphaned for the grace
// period, and only it: the load balancer of another cluster's Service of
// the same namespace and name, in the same cloud, stays.
func TestOrphanCollector(t *testing.T) {
	e := newEnv(t, 2)
	gone := e.service("shop", "web", "uid-gone")
	e.service("shop", "api", "uid-live")
	other, err := fake.NewPeer(e.cloud, "cluster-b", fake.PeerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	olb, _ := other.LoadBalancer()
	twin := gone.DeepCopy()
	twin.UID = "uid-of-cluster-b"
	if _, err := olb.EnsureLoadBalancer(t.Context(), testCluster, twin, e.nodes); err != nil {
		t.Fatal(err)
	}
	goneLB, _ := e.cloud.LoadBalancerFor(testCluster, gone)
	e.forget(gone)
	rec := record.NewFakeRecorder(10)
	o := newCollector(t, e, OrphanCollectorOptions{GracePeriod: 10 * time.Minute, Recorder: rec})
	before := e.ids()

	if err := o.pass(t.Context()); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(before, e.ids()); diff != "" {
		t.Errorf("first pass deleted something within the grace period (-before +after):\n%s", diff)
	}
	wantEvent(t, rec, "Warning OrphanedLoadBalancer Load balancer \""+goneLB.Name+"\" (id \""+goneLB.ID+"\") belongs to a Service UID that no longer exists; it will be deleted after the grace period (10m0s)")

	e.clock.Step(10 * time.Minute)
	if err := o.pass(t.Context()); err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, id := range before {
		if id != goneLB.ID {
			want = append(want, id)
		}
	}
	if diff := cmp.Diff(want, e.ids()); diff != "" {
		t.Errorf("after the grace period (-want +got): only the orphan %s goes\n%s", goneLB.ID, diff)
	}
	wantEvent(t, rec, "Normal DeletedOrphanedLoadBalancer Deleted load balancer \""+goneLB.Name+"\" (id \""+goneLB.ID+"\"): its Service UID no longer exists")
}

// TestOrphanCollectorDryRun: dry run reports the orphan when it is found
// and once when it is due, and deletes nothing.
func TestOrphanCollectorDryRun(t *testing.T) {
	e := newEnv(t, 1)
	gone := e.service("shop", "web", "uid-gone")
	e.forget(gone)
	rec := record.NewFakeRecorder(10)
	o := newCollector(t, e, OrphanCollectorOptions{GracePeriod: time.Minute, DryRun: true, Recorder: rec})
	before := e.ids()
	for range 3 {
		if err := o.pass(t.Context()); err != nil {
			t.Fatal(err)
		}
		e.clock.Step(time.Minute)
	}
	if diff := cmp.Diff(before, e.ids()); diff != "" {
		t.Errorf("dry run deleted (-before +after):\n%s", diff)
	}
	if n := len(rec.Events); n != 2 {
		t.Errorf("%d events, want 2 (found, due)", n)
	}
	wantEvent(t, rec, "dry run: it will not be deleted")
	wantEvent(t, rec, "is past the grace period; dry run: not deleting it")
}

// TestOrphanCollectorAsksTheAPIServer: an orphan the informer has no
// Service for, but the API server has (the informer is behind), is not
// deleted.
func TestOrphanCollectorAsksTheAPIServer(t *testing.T) {
	e := newEnv(t, 1)
	svc := e.service("shop", "web", "uid-web")
	if err := e.factory.Core().V1().Services().Informer().GetIndexer().Delete(svc); err != nil {
		t.Fatal(err)
	}
	o := newCollector(t, e, OrphanCollectorOptions{GracePeriod: -1})
	before := e.ids()
	if err := o.pass(t.Context()); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(before, e.ids()); diff != "" {
		t.Errorf("deleted the load balancer of a Service the API server has (-before +after):\n%s", diff)
	}
}

// TestOrphanCollectorHeldBySuccessor: a Service recreated under the same
// namespace and name holds the old UID's load balancer until it is
// provisioned, whatever the grace period; then the old one goes and the
// new one's stays.
func TestOrphanCollectorHeldBySuccessor(t *testing.T) {
	e := newEnv(t, 1)
	old := e.service("shop", "web", "uid-old")
	oldLB, _ := e.cloud.LoadBalancerFor(testCluster, old)
	e.forget(old)
	successor := old.DeepCopy()
	successor.UID, successor.Finalizers, successor.Status = "uid-new", nil, v1.ServiceStatus{}
	successor.ResourceVersion = ""
	e.add(successor)
	o := newCollector(t, e, OrphanCollectorOptions{GracePeriod: -1})
	if err := o.pass(t.Context()); err != nil {
		t.Fatal(err)
	}
	if _, ok := e.cloud.LoadBalancerFor(testCluster, old); !ok {
		t.Fatal("the old load balancer was deleted while its successor was not provisioned")
	}
	provisioned := e.service("shop", "web-2", "unused") // a provisioned shape, for its status
	successor.Finalizers, successor.Status = provisioned.Finalizers, provisioned.Status
	if _, err := e.lb.EnsureLoadBalancer(t.Context(), testCluster, successor, e.nodes); err != nil {
		t.Fatal(err)
	}
	if err := e.factory.Core().V1().Services().Informer().GetIndexer().Update(successor); err != nil {
		t.Fatal(err)
	}
	if err := o.pass(t.Context()); err != nil {
		t.Fatal(err)
	}
	if _, ok := e.cloud.LoadBalancerFor(testCluster, old); ok {
		t.Errorf("the old load balancer %s stayed after its successor was provisioned", oldLB.ID)
	}
	if _, ok := e.cloud.LoadBalancerFor(testCluster, successor); !ok {
		t.Error("the successor's load balancer was deleted")
	}
}

// wantEvent takes the next recorded event and checks that it contains
// want.
func wantEvent(t *testing.T, rec *record.FakeRecorder, want string) {
	t.Helper()
	select {
	case ev := <-rec.Events:
		if !strings.Contains(ev, want) {
			t.Errorf("event %q, want one containing %q", ev, want)
		}
	default:
		t.Errorf("no event, want one containing %q", want)
	}
}

// TestOrphanCollectorClaimed: an orphan another Service names in the
// provider's ID annotation (fake.ccmkit.io/load-balancer-id) is kept past
// the grace period: the user is keeping it, and its address.
func TestOrphanCollectorClaimed(t *testing.T) {
	e := newEnv(t, 1)
	gone := e.service("shop", "web", "uid-gone")
	goneLB, _ := e.cloud.LoadBalancerFor(testCluster, gone)
	e.forget(gone)
	keeper := &v1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "keeper", UID: "uid-keeper",
		Annotations: map[string]string{"fake.ccmkit.io/load-balancer-id": goneLB.ID}}, Spec: v1.ServiceSpec{Type: v1.ServiceTypeLoadBalancer}}
	e.add(keeper)
	o := newCollector(t, e, OrphanCollectorOptions{GracePeriod: -1})
	for range 2 {
		if err := o.pass(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	if _, ok := e.cloud.LoadBalancerFor(testCluster, gone); !ok {
		t.Errorf("orphan %s deleted while Service shop/keeper names it by stored ID", goneLB.ID)
	}
}
