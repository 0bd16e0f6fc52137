package e2e

import (
	"context"
	"fmt"
	"os"
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

// waitLB polls the cloud until the load balancers owned by the Service with
// uid satisfy ok, and returns them.
func (s *scenario) waitLB(admin *fakecloud.Admin, uid types.UID, timeout time.Duration, what string, ok func([]fake.LoadBalancer) bool) []fake.LoadBalancer {
	s.t.Helper()
	var owned []fake.LoadBalancer
	s.poll(timeout, what, func(ctx context.Context) (bool, string) {
		lbs, err := admin.LoadBalancers(ctx)
		if err != nil {
			return false, err.Error()
		}
		owned = lbsOf(lbs, uid)
		return ok(owned), "owned by the service: " + describeLBs(owned) + "; whole cloud: " + describeLBs(lbs)
	})
	return owned
}

// listenerPorts returns "port/protocol->nodePort" for each listener, sorted.
func listenerPorts(lb fake.LoadBalancer) []string {
	var out []string
	for _, l := range lb.Listeners {
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
	svc := s.createService(workload.LoadBalancerService(s.ns, "web", 80))
	svc = s.waitIngress("web", initTimeout)
	lbs := s.waitLB(admin, svc.UID, changeTimeout, "one load balancer for service web", func(l []fake.LoadBalancer) bool { return len(l) == 1 })
	lb := lbs[0]
	if diff := cmp.Diff(ingressOf(lb), workload.IngressIPs(svc)); diff != "" {
		t.Errorf("service ingress differs from the cloud load balancer's (-cloud +service):\n%s", diff)
	}
	if diff := cmp.Diff(servicePorts(svc), listenerPorts(lb)); diff != "" {
		t.Errorf("cloud listeners differ from the service ports (-service +cloud):\n%s", diff)
	}
	var backends []string
	for _, b := range lb.Backends {
		backends = append(backends, b.NodeName)
	}
	slices.Sort(backends)
	if diff := cmp.Diff(nodes, backends); diff != "" {
		t.Errorf("cloud backends (-nodes +backends):\n%s", diff)
	}
	if !slices.Contains(svc.Finalizers, servicehelpers.LoadBalancerCleanupFinalizer) {
		t.Errorf("service web has finalizers %v, want %s", svc.Finalizers, servicehelpers.LoadBalancerCleanupFinalizer)
	}
	if lb.HealthCheck.Port != 10256 || lb.HealthCheck.Path != "/healthz" {
		t.Errorf("externalTrafficPolicy Cluster: health check %+v, want kube-proxy's port 10256 /healthz", lb.HealthCheck)
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
		return len(l) == 1 && l[0].HealthCheck.Port == hc && l[0].HealthCheck.Path == "/healthz"
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
	if st, err := admin.State(t.Context()); err != nil {
		t.Fatal(err)
	} else {
		for _, p := range st.Pools {
			if p.Purpose == "loadBalancers" && p.Allocated != 0 {
				t.Errorf("pool %s still has %d addresses allocated after the only load balancer was released", p.CIDR, p.Allocated)
			}
		}
	}

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

// TestRestartMidProvisioning stops (SIGKILL) the CCM while load balancers
// are being provisioned — one done, two failing in the cloud — and starts a
// new one: every Service ends with exactly one load balancer and an ingress
// that matches it, no load balancer is left without a Service, and deleting
// the Services releases everything.
//
// The fake keeps its state in the CCM process (a documented limitation), so
// the restarted CCM starts from an empty cloud: what this checks is that the
// restarted controllers adopt the half-done Services (finalizers already
// set, a stale ingress on one) without duplicating or leaking load
// balancers in the cloud they run against.
func TestRestartMidProvisioning(t *testing.T) {
	s := newScenario(t, "restart")
	cloud := fake.Config{Instances: fakecloud.Instances("restart", 2)}
	first := s.startCCM("ccm-1", cloud, ccm.Config{})
	nodes := []string{"restart-1", "restart-2"}
	s.createNodes(nodes, nil)
	s.waitNodesInitialized(nodes, initTimeout)
	admin := s.admin(first, initTimeout)

	s.createService(workload.LoadBalancerService(s.ns, "done", 80))
	s.waitIngress("done", initTimeout)

	// From now on every ApplyLoadBalancer fails: provisioning is stuck
	// half-way, the service controller retrying with back-off.
	if err := admin.InjectFault(t.Context(), fakecloud.FaultRequest{Op: fake.OpApplyLoadBalancer, Times: -1, Error: "provisioning interrupted"}); err != nil {
		t.Fatal(err)
	}
	pending := []string{"pending-a", "pending-b"}
	for _, name := range pending {
		s.createService(workload.LoadBalancerService(s.ns, name, 443))
	}
	s.poll(changeTimeout, "the CCM to start provisioning pending-a and pending-b (finalizer set, cloud writes failing)", func(ctx context.Context) (bool, string) {
		calls, err := admin.Calls(ctx)
		if err != nil {
			return false, err.Error()
		}
		var state []string
		done := calls.Faults >= int64(len(pending))
		for _, name := range pending {
			svc, err := s.client.CoreV1().Services(s.ns).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, err.Error()
			}
			done = done && slices.Contains(svc.Finalizers, servicehelpers.LoadBalancerCleanupFinalizer)
			state = append(state, workload.DescribeService(svc))
		}
		return done, fmt.Sprintf("calls %+v; %s", calls, strings.Join(state, "; "))
	})
	if err := first.Kill(); err != nil {
		t.Fatal(err)
	}

	second := s.startCCM("ccm-2", cloud, ccm.Config{})
	admin2 := s.admin(second, initTimeout)
	all := append([]string{"done"}, pending...)
	for _, name := range all {
		s.waitIngress(name, initTimeout)
	}
	var uids []types.UID
	for _, name := range all {
		svc := s.service(name)
		uids = append(uids, svc.UID)
		s.waitLB(admin2, svc.UID, changeTimeout, "exactly one load balancer for service "+name+" with the service's ingress", func(l []fake.LoadBalancer) bool {
			return len(l) == 1 && slices.Equal(ingressOf(l[0]), workload.IngressIPs(s.service(name)))
		})
	}
	lbs, err := admin2.LoadBalancers(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	for _, lb := range lbs {
		if !slices.Contains(uids, types.UID(lb.Tags[loadbalancer.TagServiceUID])) {
			t.Errorf("orphaned load balancer (no Service owns it): %s", describeLBs([]fake.LoadBalancer{lb}))
		}
	}
	if len(lbs) != len(all) {
		t.Errorf("the cloud has %s, want exactly %d (one per Service)", describeLBs(lbs), len(all))
	}

	for _, name := range all {
		if err := s.client.CoreV1().Services(s.ns).Delete(t.Context(), name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	s.poll(changeTimeout, "every load balancer to be deleted and every Service to disappear", func(ctx context.Context) (bool, string) {
		lbs, err := admin2.LoadBalancers(ctx)
		if err != nil {
			return false, err.Error()
		}
		svcs, err := s.client.CoreV1().Services(s.ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err.Error()
		}
		return len(lbs) == 0 && len(svcs.Items) == 0, fmt.Sprintf("%s; %d services left", describeLBs(lbs), len(svcs.Items))
	})
}

// TestBackendsOfNodesInitializedAfterTheService: a Service created before
// its Nodes are initialized ends up with every Node as a backend. The cloud
// node controller sets spec.providerID (which makes the service controller
// sync the node set) before it patches the Node's addresses, and an address
// change alone triggers no further sync (service controller,
// shouldSyncUpdatedNode): a provider that needs node addresses for backends
// must not lose a node in that window.
//
// Known to fail with ccmkit at the time of writing: the loadbalancer
// package leaves out nodes without an InternalIP, and the late node stays
// out until some other change syncs the Service. Skipped unless
// CCMKIT_E2E_KNOWN_BUGS=1, so that the suite stays green while the fix is
// pending; remove the skip once it lands.
func TestBackendsOfNodesInitializedAfterTheService(t *testing.T) {
	if os.Getenv("CCMKIT_E2E_KNOWN_BUGS") != "1" {
		t.Skip("known bug: a node whose addresses arrive after its providerID is left out of load-balancer backends (loadbalancer: backends need an InternalIP; the service controller does not resync on address changes); set CCMKIT_E2E_KNOWN_BUGS=1 to run")
	}
	s := newScenario(t, "late-nodes")
	c := s.startCCM("ccm", fake.Config{Instances: fakecloud.Instances("late", 4)}, ccm.Config{})
	admin := s.admin(c, initTimeout)
	svc := s.createService(workload.LoadBalancerService(s.ns, "web", 80))
	nodes := []string{"late-1", "late-2", "late-3", "late-4"}
	s.createNodes(nodes, nil)
	s.waitNodesInitialized(nodes, initTimeout)
	s.waitIngress("web", initTimeout)
	s.waitLB(admin, svc.UID, changeTimeout, fmt.Sprintf("the load balancer of service web to have every node %v as a backend", nodes), func(l []fake.LoadBalancer) bool {
		if len(l) != 1 {
			return false
		}
		var got []string
		for _, b := range l[0].Backends {
			got = append(got, b.NodeName)
		}
		slices.Sort(got)
		return slices.Equal(got, nodes)
	})
}
