package e2e

import (
	"context"
	"fmt"
	"os"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/ccmkit/ccmkit/fake"
	"github.com/ccmkit/ccmkit/testing/e2e/ccm"
	"github.com/ccmkit/ccmkit/testing/e2e/fakecloud"
	"github.com/ccmkit/ccmkit/testing/e2e/workload"
)

// TestLeaderElectionFailover runs two CCM replicas on one Lease and one
// cloud (the fake's shared state file, as a real cloud is shared by the
// replicas). Only the leader acts: the standby never initializes its cloud
// (its fake's admin endpoint, which starts with Initialize, stays down)
// while the leader creates the one load balancer. When the leader dies
// (SIGKILL, no lease release), the standby takes over within the lease
// duration and finds the leader's load balancer: afterwards the cloud holds
// exactly that one load balancer for the Service (same ID, same address, the
// Service's ingress unchanged), and the new leader applies a port change to
// it. Another cluster's load balancer in the same cloud is never touched.
func TestLeaderElectionFailover(t *testing.T) {
	s := newScenario(t, "leader")
	cloud, view := s.sharedCloud(fake.Config{Instances: fakecloud.Instances("leader", 2)})
	foreign := s.addForeignLB(view)
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
	s.createService(workload.LoadBalancerService(s.ns, "web", 80))
	svc := s.waitIngress("web", initTimeout)
	lbs := s.waitLB(adminA, svc.UID, changeTimeout, "one load balancer for service web, matching its ingress, in the shared cloud", func(l []fake.LoadBalancer) bool {
		return len(l) == 1 && slices.Equal(ingressOf(l[0]), workload.IngressIPs(svc))
	})
	before := lbs[0]
	ingressBefore := workload.IngressIPs(svc)

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

	// The new leader's admin endpoint shows the shared cloud, with the old
	// leader's load balancer, and the new leader keeps it: exactly one, the
	// same, and the Service's ingress unchanged.
	s.waitLB(adminB, svc.UID, takeoverTimeout, fmt.Sprintf("the new leader to see the old leader's load balancer %s (%v) as the only one of service web", before.ID, before.VIPs), func(l []fake.LoadBalancer) bool {
		return len(l) == 1 && l[0].ID == before.ID && slices.Equal(l[0].VIPs, before.VIPs)
	})
	if got := workload.IngressIPs(s.service("web")); !slices.Equal(got, ingressBefore) {
		t.Errorf("service web's ingress went from %v to %v across the failover; want it unchanged", ingressBefore, got)
	}

	// And it keeps reconciling: the port change reaches that same load
	// balancer.
	svc = s.updateService("web", func(svc *corev1.Service) {
		svc.Spec.Ports[0].Port = 8080
		svc.Spec.Ports[0].Name = "p8080"
	})
	want := servicePorts(svc)
	s.waitLB(view, svc.UID, changeTimeout, fmt.Sprintf("the new leader to move the listeners of load balancer %s (service web) to %v", before.ID, want), func(l []fake.LoadBalancer) bool {
		return len(l) == 1 && l[0].ID == before.ID && slices.Equal(listenerPorts(l[0]), want) && slices.Equal(ingressOf(l[0]), ingressBefore)
	})
	if got := workload.IngressIPs(s.service("web")); !slices.Equal(got, ingressBefore) {
		t.Errorf("service web's ingress went from %v to %v after the port change; want it unchanged", ingressBefore, got)
	}

	// The whole shared cloud: this cluster's one load balancer, and the
	// other cluster's as it was.
	all, err := view.LoadBalancers(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if mine := s.ours(all); len(mine) != 1 {
		t.Errorf("the shared cloud has %s of this cluster; want exactly 1", describeLBs(mine))
	}
	s.checkUnchanged(all, foreign)
	if st, err := adminB.State(t.Context()); err != nil {
		t.Fatal(err)
	} else if diff := cmp.Diff(all, st.LoadBalancers, equateAddrs); diff != "" {
		t.Errorf("the new leader's admin endpoint and the state file disagree (-file +admin):\n%s", diff)
	}
}

func deref(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}
