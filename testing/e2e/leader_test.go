package e2e

import (
	"context"
	"fmt"
	"os"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/ccmkit/ccmkit/fake"
	"github.com/ccmkit/ccmkit/testing/e2e/ccm"
	"github.com/ccmkit/ccmkit/testing/e2e/fakecloud"
	"github.com/ccmkit/ccmkit/testing/e2e/workload"
)

// TestLeaderElectionFailover runs two CCM replicas on one Lease. Only the
// leader acts: the standby never initializes its cloud (its fake's admin
// endpoint, which starts with Initialize, stays down) while the leader
// creates the one load balancer. When the leader dies (SIGKILL, no lease
// release), the standby takes over within the lease duration, serves the
// existing Service with exactly one load balancer, and keeps reconciling
// (a port change reaches its cloud).
//
// Each replica has its own in-process fake cloud (a documented limitation
// of the fake), so "no duplicate" is checked per cloud: one load balancer
// per Service in the leader's cloud, none at all in the standby's until it
// leads.
func TestLeaderElectionFailover(t *testing.T) {
	s := newScenario(t, "leader")
	cloud := fake.Config{Instances: fakecloud.Instances("leader", 2)}
	cfg := ccm.Config{LeaderElect: true}
	a := s.startCCM("ccm-a", cloud, cfg)
	adminA := s.admin(a, initTimeout) // a leads: it is alone
	if err := a.WaitLeader(t.Context()); err != nil {
		t.Fatal(err)
	}
	b := s.startCCM("ccm-b", cloud, cfg)

	nodes := []string{"leader-1", "leader-2"}
	s.createNodes(nodes, nil)
	s.waitNodesInitialized(nodes, initTimeout)
	svc := s.createService(workload.LoadBalancerService(s.ns, "web", 80))
	svc = s.waitIngress("web", initTimeout)
	s.waitLB(adminA, svc.UID, changeTimeout, "one load balancer for service web in the leader's cloud", func(l []fake.LoadBalancer) bool { return len(l) == 1 })

	lease, err := s.client.CoordinationV1().Leases("kube-system").Get(t.Context(), "e2e-"+s.name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the leader's Lease: %v", err)
	}
	leaderA := deref(lease.Spec.HolderIdentity)

	// The standby is running but passive.
	if exited, err := b.Exited(); exited {
		t.Fatalf("standby ccm-b exited: %v\n%s", err, b.LogTail(40))
	}
	if b.IsLeader() {
		t.Fatalf("both replicas logged that they acquired the lease")
	}
	if _, err := os.Stat(b.AddressFile); !os.IsNotExist(err) {
		t.Errorf("the standby initialized its cloud (admin address file %s exists, stat err %v): it acted without the lease", b.AddressFile, err)
	}

	// The leader crashes.
	if err := a.Kill(); err != nil {
		t.Fatal(err)
	}
	adminB := s.admin(b, takeoverTimeout)
	if !b.IsLeader() {
		t.Errorf("ccm-b initialized its cloud but did not log that it acquired the lease")
	}
	s.poll(changeTimeout, "the Lease to name a new holder after the leader was killed", func(ctx context.Context) (bool, string) {
		l, err := s.client.CoordinationV1().Leases("kube-system").Get(ctx, "e2e-"+s.name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		h := deref(l.Spec.HolderIdentity)
		return h != "" && h != leaderA, fmt.Sprintf("holder %q (old leader %q)", h, leaderA)
	})

	// The new leader serves the existing Service: one load balancer, and
	// the Service's single ingress is its address.
	lbs := s.waitLB(adminB, svc.UID, takeoverTimeout, "the new leader to hold exactly one load balancer for service web, matching the Service's ingress", func(l []fake.LoadBalancer) bool {
		return len(l) == 1 && slices.Equal(ingressOf(l[0]), workload.IngressIPs(s.service("web")))
	})
	all, err := adminB.LoadBalancers(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != 1 {
		t.Errorf("the new leader's cloud has %s, want exactly 1", describeLBs(all))
	}
	if n := len(s.service("web").Status.LoadBalancer.Ingress); n != len(lbs[0].Ingress) {
		t.Errorf("service web has %d ingress entries, want %d (one load balancer's)", n, len(lbs[0].Ingress))
	}

	// And it keeps reconciling.
	svc = s.updateService("web", func(svc *corev1.Service) {
		svc.Spec.Ports[0].Port = 8080
		svc.Spec.Ports[0].Name = "p8080"
	})
	want := servicePorts(svc)
	s.waitLB(adminB, svc.UID, changeTimeout, fmt.Sprintf("the new leader to move the listeners of service web to %v", want), func(l []fake.LoadBalancer) bool {
		return len(l) == 1 && slices.Equal(listenerPorts(l[0]), want)
	})
}

func deref(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}
