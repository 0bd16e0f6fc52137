package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	servicehelpers "k8s.io/cloud-provider/service/helpers"

	"github.com/ccmkit/ccmkit/fake"
	"github.com/ccmkit/ccmkit/loadbalancer"
	"github.com/ccmkit/ccmkit/testing/e2e/ccm"
	"github.com/ccmkit/ccmkit/testing/e2e/fakecloud"
	"github.com/ccmkit/ccmkit/testing/e2e/workload"
)

// lbSource is where a scenario reads the cloud's load balancers: a CCM's
// admin endpoint (*fakecloud.Admin) or a shared state file
// (*fakecloud.Shared).
type lbSource interface {
	LoadBalancers(context.Context) ([]fake.LoadBalancer, error)
}

// waitLB polls the cloud until the load balancers owned by the Service with
// uid satisfy ok, and returns them.
func (s *scenario) waitLB(cloud lbSource, uid types.UID, timeout time.Duration, what string, ok func([]fake.LoadBalancer) bool) []fake.LoadBalancer {
	s.t.Helper()
	var owned []fake.LoadBalancer
	s.poll(timeout, what, func(ctx context.Context) (bool, string) {
		lbs, err := cloud.LoadBalancers(ctx)
		if err != nil {
			return false, err.Error()
		}
		owned = lbsOf(lbs, uid)
		return ok(owned), "owned by the service: " + describeLBs(owned) + "; whole cloud: " + describeLBs(lbs)
	})
	return owned
}

// checkVIPsReleased fails the test unless every load-balancer address pool
// of the cloud has nothing allocated; after says what released them.
func (s *scenario) checkVIPsReleased(cloud interface {
	State(context.Context) (fake.State, error)
}, after string) {
	s.t.Helper()
	st, err := cloud.State(s.t.Context())
	if err != nil {
		s.t.Fatal(err)
	}
	for _, p := range st.AddressPools {
		if p.Purpose == "loadBalancers" && p.Allocated != 0 {
			s.t.Errorf("pool %s still has %d addresses allocated after %s; want none", p.CIDR, p.Allocated, after)
		}
	}
}

// deleteServices deletes the named Services and waits until every Service
// of the scenario's namespace is gone (the service controller removed its
// finalizer) and the cloud holds no load balancer of this cluster.
func (s *scenario) deleteServices(cloud lbSource, timeout time.Duration, names []string) {
	s.t.Helper()
	for _, name := range names {
		if err := s.client.CoreV1().Services(s.ns).Delete(s.t.Context(), name, metav1.DeleteOptions{}); err != nil {
			s.t.Fatalf("deleting service %s: %v", name, err)
		}
	}
	s.poll(timeout, "every load balancer of this cluster to be deleted and every Service to disappear (its finalizer removed)", func(ctx context.Context) (bool, string) {
		lbs, err := cloud.LoadBalancers(ctx)
		if err != nil {
			return false, err.Error()
		}
		svcs, err := s.client.CoreV1().Services(s.ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err.Error()
		}
		mine := s.ours(lbs)
		return len(mine) == 0 && len(svcs.Items) == 0, fmt.Sprintf("%d services left; this cluster's %s", len(svcs.Items), describeLBs(mine))
	})
}

// listenerPorts returns "port/protocol->nodePort" for each listener, sorted.
func listenerPorts(lb fake.LoadBalancer) []string {
	var out []string
	for _, l := range lb.Spec.Listeners {
		out = append(out, fmt.Sprintf("%d/%s->%d", l.Port, l.Protocol, l.NodePort))
	}
	slices.Sort(out)
	return slices.Compact(out) // one per IP family
}

func servicePorts(svc *corev1.Service) []string {
	var out []string
	for _, p := range svc.Spec.Ports {
		out = append(out, fmt.Sprintf("%d/%s->%d", p.Port, p.Protocol, p.NodePort))
	}
	slices.Sort(out)
	return out
}

// backendNodes returns the node names of the backends, sorted.
func backendNodes(lb fake.LoadBalancer) []string {
	return sortedBackends(lb, func(b loadbalancer.Backend) string { return b.NodeName })
}

// backendProviderIDs returns the provider IDs of the backends, sorted.
func backendProviderIDs(lb fake.LoadBalancer) []string {
	return sortedBackends(lb, func(b loadbalancer.Backend) string { return b.ProviderID })
}

// sortedBackends returns field of each backend, sorted.
func sortedBackends(lb fake.LoadBalancer, field func(loadbalancer.Backend) string) []string {
	var out []string
	for _, b := range lb.Spec.Backends {
		out = append(out, field(b))
	}
	slices.Sort(out)
	return out
}

func ingressOf(lb fake.LoadBalancer) []string {
	var out []string
	for _, in := range lb.Ingress {
		if in.IP != "" {
			out = append(out, in.IP)
		} else {
			out = append(out, in.Hostname)
		}
	}
	return out
}

// TestLoadBalancerLifecycle follows one LoadBalancer Service through its
// life: created → the cloud has a load balancer and the Service its
// ingress; a port change → the cloud's listeners change; externalTraffic-
// Policy Local → the health check moves to spec.healthCheckNodePort
// /healthz; type ClusterIP → the load balancer is released and the
// finalizer removed; type LoadBalancer again → a new one; deleted → gone
// from the cloud and the Service object gone (finalizer removed).
func TestLoadBalancerLifecycle(t *testing.T) {
	s := newScenario(t, "lb")
	_, admin, nodes := s.startWithNodes("lb", 2, ccm.Config{})

	// Create → ingress.
	s.createService(workload.LoadBalancerService(s.ns, "web", 80))
	svc := s.waitIngress("web", initTimeout)
	lbs := s.waitLB(admin, svc.UID, changeTimeout, "one load balancer for service web", func(l []fake.LoadBalancer) bool { return len(l) == 1 })
	lb := lbs[0]
	if diff := cmp.Diff(ingressOf(lb), workload.IngressIPs(svc)); diff != "" {
		t.Errorf("service ingress differs from the cloud load balancer's (-cloud +service):\n%s", diff)
	}
	if diff := cmp.Diff(servicePorts(svc), listenerPorts(lb)); diff != "" {
		t.Errorf("cloud listeners differ from the service ports (-service +cloud):\n%s", diff)
	}
	if diff := cmp.Diff(nodes, backendNodes(lb)); diff != "" {
		t.Errorf("cloud backends (-nodes +backends):\n%s", diff)
	}
	if !slices.Contains(svc.Finalizers, servicehelpers.LoadBalancerCleanupFinalizer) {
		t.Errorf("service web has finalizers %v, want %s", svc.Finalizers, servicehelpers.LoadBalancerCleanupFinalizer)
	}
	if lb.Spec.HealthCheck.Port != 10256 || lb.Spec.HealthCheck.Path != "/healthz" {
		t.Errorf("externalTrafficPolicy Cluster: health check %+v, want kube-proxy's port 10256 /healthz", lb.Spec.HealthCheck)
	}
	firstIngress := workload.IngressIPs(svc)

	// Port change → cloud updated.
	svc = s.updateService("web", func(svc *corev1.Service) {
		svc.Spec.Ports[0].Port = 8080
		svc.Spec.Ports[0].Name = "p8080"
	})
	want := servicePorts(svc)
	lbs = s.waitLB(admin, svc.UID, changeTimeout, fmt.Sprintf("the cloud listeners of service web to become %v", want), func(l []fake.LoadBalancer) bool {
		return len(l) == 1 && slices.Equal(listenerPorts(l[0]), want)
	})
	if got := ingressOf(lbs[0]); !slices.Equal(got, firstIngress) {
		t.Errorf("a port change moved the load balancer's address from %v to %v", firstIngress, got)
	}

	// externalTrafficPolicy Local → health check on healthCheckNodePort.
	svc = s.updateService("web", func(svc *corev1.Service) {
		svc.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal
	})
	if svc.Spec.HealthCheckNodePort == 0 {
		t.Fatalf("the API server allocated no healthCheckNodePort: %s", workload.DescribeService(svc))
	}
	hc := svc.Spec.HealthCheckNodePort
	s.waitLB(admin, svc.UID, changeTimeout, fmt.Sprintf("the health check of service web to move to healthCheckNodePort %d /healthz", hc), func(l []fake.LoadBalancer) bool {
		return len(l) == 1 && l[0].Spec.HealthCheck.Port == hc && l[0].Spec.HealthCheck.Path == "/healthz"
	})

	// Type ClusterIP → load balancer released, ingress cleared, finalizer
	// removed.
	s.updateService("web", func(svc *corev1.Service) {
		svc.Spec.Type = corev1.ServiceTypeClusterIP
		svc.Spec.ExternalTrafficPolicy = ""
		svc.Spec.HealthCheckNodePort = 0
		for i := range svc.Spec.Ports {
			svc.Spec.Ports[i].NodePort = 0
		}
	})
	s.waitLB(admin, svc.UID, changeTimeout, "the load balancer of service web to be deleted after type ClusterIP", func(l []fake.LoadBalancer) bool { return len(l) == 0 })
	s.poll(changeTimeout, "service web (type ClusterIP) to lose its ingress and finalizer", func(ctx context.Context) (bool, string) {
		got, err := s.client.CoreV1().Services(s.ns).Get(ctx, "web", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return len(got.Status.LoadBalancer.Ingress) == 0 && !slices.Contains(got.Finalizers, servicehelpers.LoadBalancerCleanupFinalizer), workload.DescribeService(got)
	})
	s.checkVIPsReleased(admin, "the only load balancer was released")

	// Type LoadBalancer again → a load balancer again.
	s.updateService("web", func(svc *corev1.Service) { svc.Spec.Type = corev1.ServiceTypeLoadBalancer })
	svc = s.waitIngress("web", changeTimeout)
	s.waitLB(admin, svc.UID, changeTimeout, "one load balancer for service web after type LoadBalancer again", func(l []fake.LoadBalancer) bool { return len(l) == 1 })

	// Delete → load balancer gone and the finalizer removed (the object
	// disappears only once the service controller removed it).
	if err := s.client.CoreV1().Services(s.ns).Delete(t.Context(), "web", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	s.poll(changeTimeout, "deleted service web to disappear (its finalizer removed by the CCM)", func(ctx context.Context) (bool, string) {
		got, err := s.client.CoreV1().Services(s.ns).Get(ctx, "web", metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return true, ""
		}
		if err != nil {
			return false, err.Error()
		}
		return false, workload.DescribeService(got)
	})
	lbsAll, err := admin.LoadBalancers(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if len(lbsAll) != 0 {
		t.Errorf("after the service was deleted the cloud still has %s", describeLBs(lbsAll))
	}
}

// TestRestartMidProvisioning kills (SIGKILL) the CCM in the middle of
// provisioning, on a cloud that outlives it as a real cloud does (the fake's
// shared state file): one Service is done; for three more the cloud created
// load balancers but the CCM never heard back (lost responses), so those
// Services have their finalizer and no ingress; and one of them is deleted
// while no CCM runs. A new CCM on the same cloud adopts the half-provisioned
// load balancers (the same IDs and addresses: no duplicate), deletes the
// deleted Service's, leaves the done Service's ingress as it was, and
// leaves no load balancer of the cluster without a Service. Deleting the
// Services then releases everything of the cluster; another cluster's load
// balancer in the same cloud is never touched.
func TestRestartMidProvisioning(t *testing.T) {
	s := newScenario(t, "restart")
	cloud, view := s.sharedCloud(fake.Config{Instances: fakecloud.Instances("restart", 2)})
	foreign := s.addForeignLB(view)
	first := s.startCCM("ccm-1", cloud, ccm.Config{})
	nodes := []string{"restart-1", "restart-2"}
	s.createNodes(nodes, nil)
	s.waitNodesInitialized(nodes, initTimeout)
	admin := s.admin(first, initTimeout)

	s.createService(workload.LoadBalancerService(s.ns, "done", 80))
	done := s.waitIngress("done", initTimeout)
	doneIngress := workload.IngressIPs(done)
	doneLB := s.waitLB(view, done.UID, changeTimeout, "one load balancer for service done, matching its ingress", func(l []fake.LoadBalancer) bool {
		return len(l) == 1 && slices.Equal(ingressOf(l[0]), doneIngress)
	})[0]

	// From now on every load-balancer write reaches the cloud, but its
	// answer is lost: the CCM sees an error and retries later (5s at the
	// earliest, the service controller's back-off).
	if err := admin.InjectFault(t.Context(), fakecloud.FaultRequest{Op: fake.OpApplyLoadBalancer, Times: -1, LostResponse: true, Error: "connection reset after the request was sent"}); err != nil {
		t.Fatal(err)
	}
	half := []string{"pending-a", "pending-b", "doomed"}
	for _, name := range half {
		s.createService(workload.LoadBalancerService(s.ns, name, 443))
	}
	halfLBs := map[string]fake.LoadBalancer{}
	s.poll(changeTimeout, fmt.Sprintf("the cloud to hold a load balancer for each of %v although their creation failed for the CCM (services with finalizer)", half), func(ctx context.Context) (bool, string) {
		lbs, err := view.LoadBalancers(ctx)
		if err != nil {
			return false, err.Error()
		}
		ok := true
		var state []string
		for _, name := range half {
			svc, err := s.client.CoreV1().Services(s.ns).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, err.Error()
			}
			owned := lbsOf(lbs, svc.UID)
			if len(owned) == 1 {
				halfLBs[name] = owned[0]
			}
			ok = ok && len(owned) == 1 && slices.Contains(svc.Finalizers, servicehelpers.LoadBalancerCleanupFinalizer)
			state = append(state, fmt.Sprintf("%s: %d load balancers, %s", name, len(owned), workload.DescribeService(svc)))
		}
		return ok, strings.Join(state, "; ")
	})
	// Keep them half-provisioned until the kill: a retry would find its
	// load balancer and finish, so every look-up fails from now on.
	if err := admin.InjectFault(t.Context(), fakecloud.FaultRequest{Op: fake.OpFindLoadBalancers, Times: -1, Error: "cloud API unreachable"}); err != nil {
		t.Fatal(err)
	}
	for _, name := range half {
		if svc := s.service(name); len(svc.Status.LoadBalancer.Ingress) > 0 {
			t.Fatalf("service %s got its ingress before the kill (a retry finished within the back-off?); the scenario needs it half-provisioned: %s", name, workload.DescribeService(svc))
		}
	}
	if err := first.Kill(); err != nil {
		t.Fatal(err)
	}

	// While no CCM runs, doomed is deleted: its finalizer keeps the object
	// until a CCM has deleted its load balancer.
	if err := s.client.CoreV1().Services(s.ns).Delete(t.Context(), "doomed", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if svc := s.service("doomed"); svc.DeletionTimestamp == nil {
		t.Fatalf("deleted service doomed has no deletionTimestamp: %s", workload.DescribeService(svc))
	}

	second := s.startCCM("ccm-2", cloud, ccm.Config{})
	admin2 := s.admin(second, initTimeout)
	live := []string{"done", "pending-a", "pending-b"}
	want := map[string]fake.LoadBalancer{"done": doneLB, "pending-a": halfLBs["pending-a"], "pending-b": halfLBs["pending-b"]}
	var uids []types.UID
	for _, name := range live {
		svc := s.waitIngress(name, initTimeout)
		uids = append(uids, svc.UID)
		prev := want[name]
		s.waitLB(admin2, svc.UID, changeTimeout, fmt.Sprintf("exactly one load balancer for service %s: %s (%v) from before the restart, with the service's ingress", name, prev.ID, prev.VIPs), func(l []fake.LoadBalancer) bool {
			return len(l) == 1 && l[0].ID == prev.ID && slices.Equal(l[0].VIPs, prev.VIPs) && slices.Equal(ingressOf(l[0]), workload.IngressIPs(s.service(name)))
		})
	}
	if got := workload.IngressIPs(s.service("done")); !slices.Equal(got, doneIngress) {
		t.Errorf("service done's ingress went from %v to %v across the restart; want it unchanged", doneIngress, got)
	}
	s.poll(changeTimeout, fmt.Sprintf("service doomed, deleted while no CCM ran, to disappear and its load balancer %s to be deleted", halfLBs["doomed"].ID), func(ctx context.Context) (bool, string) {
		lbs, err := view.LoadBalancers(ctx)
		if err != nil {
			return false, err.Error()
		}
		gone := !slices.ContainsFunc(lbs, func(lb fake.LoadBalancer) bool { return lb.ID == halfLBs["doomed"].ID })
		svc, err := s.client.CoreV1().Services(s.ns).Get(ctx, "doomed", metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return gone, describeLBs(lbs)
		}
		if err != nil {
			return false, err.Error()
		}
		return false, workload.DescribeService(svc) + "; " + describeLBs(lbs)
	})

	// No orphan, no duplicate: the cluster's load balancers are exactly one
	// per live Service; the other cluster's is as it was.
	lbs, err := view.LoadBalancers(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	mine := s.ours(lbs)
	for _, lb := range mine {
		if !slices.Contains(uids, types.UID(lb.Tags[loadbalancer.TagServiceUID])) {
			t.Errorf("orphaned load balancer (no Service owns it): %s", describeLBs([]fake.LoadBalancer{lb}))
		}
	}
	if len(mine) != len(live) {
		t.Errorf("the cloud has %s of this cluster, want exactly %d (one per Service)", describeLBs(mine), len(live))
	}
	s.checkUnchanged(lbs, foreign)

	s.deleteServices(view, changeTimeout, live)
	st, err := view.State(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	s.checkUnchanged(st.LoadBalancers, foreign)
	for _, p := range st.AddressPools {
		if p.Purpose == "loadBalancers" && strings.Contains(p.CIDR, ".") && p.Allocated != len(foreign.VIPs) {
			t.Errorf("pool %s has %d addresses allocated; want %d, the other cluster's only", p.CIDR, p.Allocated, len(foreign.VIPs))
		}
	}
}

// TestBackendsOfNodesInitializedAfterTheService: a Service created before
// its Nodes are initialized ends up with every Node as a backend. The cloud
// node controller sets spec.providerID (which makes the service controller
// sync the node set) before it patches the Node's addresses, and an address
// change alone triggers no further sync (service controller,
// shouldSyncUpdatedNode): a provider that needs node addresses for backends
// must not lose a node in that window. ccmkit's Reconciler asks its
// Config.Instances for the addresses of such a node (the fake wires its
// instances adapter there).
func TestBackendsOfNodesInitializedAfterTheService(t *testing.T) {
	s := newScenario(t, "late-nodes")
	c := s.startCCM("ccm", fake.Config{Instances: fakecloud.Instances("late", 4)}, ccm.Config{})
	admin := s.admin(c, initTimeout)
	svc := s.createService(workload.LoadBalancerService(s.ns, "web", 80))
	nodes := []string{"late-1", "late-2", "late-3", "late-4"}
	s.createNodes(nodes, nil)
	s.waitNodesInitialized(nodes, initTimeout)
	s.waitIngress("web", initTimeout)
	s.waitLB(admin, svc.UID, changeTimeout, fmt.Sprintf("the load balancer of service web to have every node %v as a backend", nodes), func(l []fake.LoadBalancer) bool {
		return len(l) == 1 && slices.Equal(backendNodes(l[0]), nodes)
	})
}
