package e2e

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"

	"github.com/ccmkit/ccmkit/fake"
	"github.com/ccmkit/ccmkit/loadbalancer"
	"github.com/ccmkit/ccmkit/testing/e2e/ccm"
	"github.com/ccmkit/ccmkit/testing/e2e/fakecloud"
	"github.com/ccmkit/ccmkit/testing/e2e/workload"
)

// driftPeriod is --drift-repair-period of TestDriftRepair.
const driftPeriod = 5 * time.Second

// TestDriftRepair: the example CCM's drift-repair controller, over the
// fake in its realistic mode (load balancers provisioned asynchronously, a
// rate limit that throttles, backends kept by instance ID) with Nodes named
// unlike their instances, on a converged cluster of 50 LoadBalancer
// Services, makes no cloud write in its periods (the fake's own counters)
// and one load-balancer List per pass; then a listener deleted and a
// backend removed through the fake's admin endpoint, as a user in the
// cloud console would (the CCM is not told), are put back by the first
// pass after the change, with the minimum of writes (one per missing
// piece) and a Normal event LoadBalancerDriftRepaired on the Service.
func TestDriftRepair(t *testing.T) {
	s := newScenario(t, "drift")
	instances := fakecloud.Instances(s.name+"-vm", 3)
	c := s.startCCM("ccm", fake.Config{Realistic: true, Instances: instances}, ccm.Config{ExtraArgs: []string{"--drift-repair-period=" + driftPeriod.String()}})
	admin := s.admin(c, initTimeout)
	nodes, _ := s.createRenamedNodes(instances)
	s.waitNodesInitialized(nodes, initTimeout)
	const n = 50
	for i := range n {
		s.createService(workload.LoadBalancerService(s.ns, fmt.Sprintf("svc-%02d", i), 80, 443))
	}
	for i := range n {
		s.waitIngress(fmt.Sprintf("svc-%02d", i), initTimeout)
	}

	// Converged: count the calls of two whole periods after the upstream
	// controllers are done (every Service provisioned, a pass logged).
	s.waitLog(c.LogPath(), fmt.Sprintf("services=%d converged=%d", n, n), 2*driftPeriod+changeTimeout)
	if err := admin.ResetCalls(t.Context()); err != nil {
		t.Fatal(err)
	}
	passes := s.countLog(c.LogPath(), "Drift repair pass done")
	s.poll(2*driftPeriod+changeTimeout, "two more drift-repair passes", func(context.Context) (bool, string) {
		got := s.countLog(c.LogPath(), "Drift repair pass done") - passes
		return got >= 2, fmt.Sprintf("%d passes", got)
	})
	calls, err := admin.Calls(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	made := s.countLog(c.LogPath(), "Drift repair pass done") - passes
	t.Logf("converged: %d drift-repair passes over %d Services (period %v): %d cloud writes, %d reads %v", made, n, driftPeriod, calls.Writes, calls.Reads, calls.ByOp)
	if calls.Writes != 0 {
		t.Errorf("a converged cluster of %d Services: %d cloud writes in %d drift-repair passes %v; want 0", n, calls.Writes, made, calls.ByOp)
	}
	if lists := calls.ByOp[fake.OpListLoadBalancers]; lists > int64(made)+1 || calls.ByOp[fake.OpFindLoadBalancers] > 0 {
		t.Errorf("reads %v in %d passes: want one ListLoadBalancers per pass and no Find", calls.ByOp, made)
	}

	// Drift: a listener and a backend go behind the CCM's back.
	svc := s.service("svc-07")
	lb := s.onlyLB(admin, svc.UID)
	if len(lb.Spec.Listeners) != 2 || len(lb.Spec.Backends) != 3 {
		t.Fatalf("before the drift: %s; want 2 listeners and 3 backends", describeLBs([]fake.LoadBalancer{lb}))
	}
	if err := admin.ResetCalls(t.Context()); err != nil {
		t.Fatal(err)
	}
	passes = s.countLog(c.LogPath(), "Drift repair pass done")
	start := time.Now()
	if _, err := admin.RemoveListener(t.Context(), lb.ID, corev1.ProtocolTCP, 443); err != nil {
		t.Fatal(err)
	}
	// Backends by instance ID: the cloud keeps the provider ID only.
	if _, err := admin.RemoveBackend(t.Context(), lb.ID, lb.Spec.Backends[1].ProviderID); err != nil {
		t.Fatal(err)
	}
	s.poll(changeTimeout, fmt.Sprintf("load balancer %s repaired (2 listeners, 3 backends)", lb.ID), func(ctx context.Context) (bool, string) {
		lbs, err := admin.LoadBalancers(ctx)
		if err != nil {
			return false, err.Error()
		}
		got := lbsOf(lbs, svc.UID)
		return len(got) == 1 && len(got[0].Spec.Listeners) == 2 && len(got[0].Spec.Backends) == 3, describeLBs(got)
	})
	took, after := time.Since(start), s.countLog(c.LogPath(), "Drift repair pass done")-passes
	t.Logf("drift repaired %v after it was made (period %v), %d passes ended in between", took.Round(100*time.Millisecond), driftPeriod, after)
	// Within one period: by the first pass that started after the change
	// (a pass may have been running while it was made, and ended after).
	if after > 2 {
		t.Errorf("drift repaired after %d passes had ended (%v): want it repaired by the first pass that started after the change, within one period (%v)", after, took, driftPeriod)
	}
	// The minimum: one write per missing piece (AddListener, AddBackends).
	calls, err = admin.Calls(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("repair: %s", describeCalls(calls))
	if calls.Writes != 2 || calls.ByOp[fake.OpApplyLoadBalancer] != 2 {
		t.Errorf("repairing one listener and one backend: %s; want exactly 2 writes, 2 ApplyLoadBalancer", describeCalls(calls))
	}
	s.waitEvent(svc.Namespace, svc.UID, corev1.EventTypeNormal, "LoadBalancerDriftRepaired", "cloud writes")
}

// onlyLB returns the one load balancer the Service with uid owns.
func (s *scenario) onlyLB(admin interface {
	LoadBalancers(context.Context) ([]fake.LoadBalancer, error)
}, uid types.UID) fake.LoadBalancer {
	s.t.Helper()
	lbs, err := admin.LoadBalancers(s.t.Context())
	if err != nil {
		s.t.Fatal(err)
	}
	owned := lbsOf(lbs, uid)
	if len(owned) != 1 {
		s.t.Fatalf("service %s: %s; want exactly one", uid, describeLBs(owned))
	}
	return owned[0]
}

// Orphan collection timings of TestOrphanCollection.
const (
	orphanPeriod = 2 * time.Second
	orphanGrace  = 6 * time.Second
)

// TestOrphanCollection, over the fake in its realistic mode with Nodes
// named unlike their instances: a Service whose finalizer is removed by
// force and which is deleted while the CCM is down leaves its load
// balancer (the restarted service controller never knew it). The
// restarted CCM's orphan-collection controller, in dry-run mode, reports
// it (events on the gone Service) and deletes nothing; run again without
// dry run, it deletes it once the grace period has passed, with one cloud
// write, the minimum. In the same cloud, the load balancer another cluster
// made for a Service of the same namespace and name, and one without
// ccmkit's tags, are untouched throughout.
func TestOrphanCollection(t *testing.T) {
	s := newScenario(t, "orphans")
	instances := fakecloud.Instances(s.name+"-vm", 2)
	cloud, view := s.sharedCloud(fake.Config{Realistic: true, Instances: instances})
	args := []string{"--orphan-collection-period=" + orphanPeriod.String(), "--orphan-grace-period=" + orphanGrace.String()}

	c := s.startCCM("ccm", cloud, ccm.Config{ExtraArgs: args})
	names, _ := s.createRenamedNodes(instances)
	s.waitNodesInitialized(names, initTimeout)
	svc := s.createService(workload.LoadBalancerService(s.ns, "web", 80))
	s.waitIngress("web", initTimeout)
	orphan := s.onlyLB(view, svc.UID)
	twin := s.addTwinLB(view, svc)
	handMade, err := view.Cloud.CreateLoadBalancer(loadbalancer.LoadBalancer{Name: "hand-made-" + s.name,
		Spec: loadbalancer.Spec{IPFamilies: []corev1.IPFamily{corev1.IPv4Protocol}, Listeners: []loadbalancer.Listener{{ListenerKey: loadbalancer.ListenerKey{Family: corev1.IPv4Protocol, Protocol: corev1.ProtocolTCP, Port: 8080}, NodePort: 30808}}}})
	if err != nil {
		t.Fatal(err)
	}
	// Compared once provisioned: a provisioning one gets its ingress later.
	settled := s.provisioned(view, twin.ID, handMade.ID)
	twin, untagged := settled[0], settled[1]
	if err := c.Stop(); err != nil {
		t.Fatal(err)
	}
	s.forceDelete("web")

	// Dry run: reported when found and when due; nothing deleted.
	dry := s.startCCM("ccm-dry-run", cloud, ccm.Config{ExtraArgs: append(slices.Clone(args), "--orphan-dry-run")})
	s.waitEvent(s.ns, svc.UID, corev1.EventTypeWarning, "OrphanedLoadBalancer", "dry run: it will not be deleted")
	s.waitEvent(s.ns, svc.UID, corev1.EventTypeWarning, "OrphanedLoadBalancer", "is past the grace period; dry run: not deleting it")
	lbs, _ := view.LoadBalancers(t.Context())
	for _, want := range []fake.LoadBalancer{orphan, twin, untagged} {
		s.checkUnchanged(lbs, want)
	}
	if err := dry.Stop(); err != nil {
		t.Fatal(err)
	}

	// Collection: deleted after the grace period, and only it.
	start := time.Now()
	collector := s.startCCM("ccm-collect", cloud, ccm.Config{ExtraArgs: args})
	collectorAdmin := s.admin(collector, initTimeout)
	s.poll(changeTimeout, fmt.Sprintf("orphaned load balancer %s deleted", orphan.ID), func(ctx context.Context) (bool, string) {
		lbs, _ := view.LoadBalancers(ctx)
		return !slices.ContainsFunc(lbs, func(lb fake.LoadBalancer) bool { return lb.ID == orphan.ID }), describeLBs(lbs)
	})
	took := time.Since(start)
	t.Logf("orphan %s deleted %v after the CCM started (grace %v, period %v)", orphan.ID, took.Round(100*time.Millisecond), orphanGrace, orphanPeriod)
	if took < orphanGrace {
		t.Errorf("orphan deleted %v after the CCM started: before the grace period (%v)", took, orphanGrace)
	}
	s.waitEvent(s.ns, svc.UID, corev1.EventTypeNormal, "DeletedOrphanedLoadBalancer", orphan.ID)
	calls, err := collectorAdmin.Calls(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("the collecting CCM: %s", describeCalls(calls))
	if calls.Writes != 1 || calls.ByOp[fake.OpDeleteLoadBalancer] != 1 {
		t.Errorf("collecting one orphan: %s; want exactly 1 write, the DeleteLoadBalancer", describeCalls(calls))
	}
	lbs, _ = view.LoadBalancers(t.Context())
	for _, want := range []fake.LoadBalancer{twin, untagged} {
		s.checkUnchanged(lbs, want)
	}
}

// addTwinLB makes, in the shared cloud, the load balancer another cluster
// has for a Service of the same namespace and name as svc, with another
// UID (addOtherClusterLB).
func (s *scenario) addTwinLB(view *fakecloud.Shared, svc *corev1.Service) fake.LoadBalancer {
	s.t.Helper()
	twin := svc.DeepCopy()
	twin.UID = types.UID("twin-" + s.name)
	twin.Spec.Ports[0].NodePort = 30998
	return s.addOtherClusterLB(view, twin)
}

// provisioned waits until the shared cloud's load balancers with these IDs
// are no longer provisioning and returns them, in the order of ids.
func (s *scenario) provisioned(view *fakecloud.Shared, ids ...string) []fake.LoadBalancer {
	s.t.Helper()
	var out []fake.LoadBalancer
	s.poll(changeTimeout, fmt.Sprintf("load balancers %v provisioned", ids), func(ctx context.Context) (bool, string) {
		lbs, _ := view.LoadBalancers(ctx)
		out = out[:0]
		for _, id := range ids {
			i := slices.IndexFunc(lbs, func(lb fake.LoadBalancer) bool { return lb.ID == id })
			if i < 0 || lbs[i].Provisioning {
				return false, describeLBs(lbs)
			}
			out = append(out, lbs[i])
		}
		return true, ""
	})
	return out
}

// forceDelete removes the Service's finalizers and deletes it, as a user
// who forces it does: the load balancer is the CCM's problem now.
func (s *scenario) forceDelete(name string) {
	s.t.Helper()
	ctx := s.t.Context()
	patch := []byte(`{"metadata":{"finalizers":null}}`)
	if _, err := s.client.CoreV1().Services(s.ns).Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		s.t.Fatalf("removing the finalizers of service %s: %v", name, err)
	}
	if err := s.client.CoreV1().Services(s.ns).Delete(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		s.t.Fatalf("deleting service %s: %v", name, err)
	}
}

// waitEvent waits for an event of type and reason on the Service with uid
// in ns (which may be gone) whose message contains message.
func (s *scenario) waitEvent(ns string, uid types.UID, eventType, reason, message string) {
	s.t.Helper()
	sel := fields.Set{"involvedObject.kind": "Service", "involvedObject.uid": string(uid), "type": eventType}.AsSelector().String()
	s.poll(changeTimeout, fmt.Sprintf("a %s event %s on service %s containing %q", eventType, reason, uid, message), func(ctx context.Context) (bool, string) {
		list, err := s.client.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: sel})
		if err != nil {
			return false, err.Error()
		}
		var seen []string
		for _, e := range list.Items {
			if e.Reason == reason && strings.Contains(e.Message, message) {
				return true, ""
			}
			seen = append(seen, fmt.Sprintf("%s: %q", e.Reason, e.Message))
		}
		return false, "events: " + strings.Join(seen, "; ")
	})
}

// countLog returns how many lines of the log at path contain text.
func (s *scenario) countLog(path, text string) int {
	s.t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		s.t.Fatal(err)
	}
	return strings.Count(string(b), text)
}

// waitLog waits until the log at path has a line containing text.
func (s *scenario) waitLog(path, text string, timeout time.Duration) {
	s.t.Helper()
	s.poll(timeout, fmt.Sprintf("a line containing %q in %s", text, path), func(context.Context) (bool, string) {
		b, err := os.ReadFile(path)
		if err != nil {
			return false, err.Error()
		}
		return strings.Contains(string(b), text), ""
	})
}
