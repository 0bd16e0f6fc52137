package e2e

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/ccmkit/ccmkit/fake"
	"github.com/ccmkit/ccmkit/loadbalancer"
	"github.com/ccmkit/ccmkit/provider"
	"github.com/ccmkit/ccmkit/testing/e2e/ccm"
	"github.com/ccmkit/ccmkit/testing/e2e/fakecloud"
	"github.com/ccmkit/ccmkit/testing/e2e/workload"
)

// Sizes and settings of TestRealisticCloudAtScale.
const (
	realisticNodes    = 100
	realisticServices = 50
	// realisticDelay is the cloud's provisioning delay of a load balancer
	// (the realistic default, 2s).
	realisticDelay = 2 * time.Second
	// convergeTimeout bounds bring-up and tear-down each. Generous: on 2
	// shared cores with -race each takes about 15s, bounded by the write
	// rate limit and the CCM's own 20 QPS to the API server.
	convergeTimeout = 3 * time.Minute
)

// realisticRateLimit throttles reads and writes: 10 reads/s and 5 writes/s
// after a burst of 5. 50 load balancers need at least 50 writes and, for
// each, a few reads (Find by tags and by name, the instance list), while
// the service controller asks about as fast as its 20 QPS to the API server
// lets it: bring-up and tear-down are throttled on any machine.
//
// It is tighter than the realistic mode's default. Before the Reconciler
// spread throttled Services out (a per-Service exponential, jittered
// back-off in its api.RetryError), this limit livelocked bring-up with 2 of
// the 50 load balancers made and tens of thousands of throttled Finds a
// minute: the service controller requeues after exactly the delay it is
// given, so every throttled Service came back when one token was free, and
// the herd took each token as it came, so no Service ever found the two in a
// row a creation needs.
var realisticRateLimit = fake.RateLimit{ReadsPerSecond: ptr.To(10.0), WritesPerSecond: ptr.To(5.0), Burst: 5}

// TestRealisticCloudAtScale runs the example CCM against the fake cloud
// behaving as real clouds do (the behaviours of its realistic mode, each set
// explicitly) — load balancers provisioned asynchronously, a rate limit that
// throttles (realisticRateLimit), backends kept by instance ID — with 100 Nodes
// registered as kubelet --provider-id registers them (spec.providerID set
// from the start) under names that differ from their instances' names
// (<scenario>-host-<k> on instance <scenario>-vm-<k>), and 50 LoadBalancer
// Services created at once. It converges: every Node is initialized from
// its instance, every Service's ingress is its load balancer's VIP, the
// cluster owns exactly one load balancer per Service, and every load
// balancer targets exactly the 100 instances. Deleting the Services then
// releases every load balancer and address of the cluster and lets every
// Service go (its finalizer removed). It logs the time to converge and the
// cloud calls by operation, throttled ones apart.
func TestRealisticCloudAtScale(t *testing.T) {
	s := newScenario(t, "realistic")
	instances := fakecloud.Instances(s.name+"-vm", realisticNodes)
	cloud := fake.Config{
		Realistic: true,
		Instances: instances,
		LoadBalancers: fake.LoadBalancerSection{
			ProvisioningDelay: &provider.Duration{Duration: realisticDelay},
			Backends:          fake.BackendsInstanceID,
		},
		RateLimit: realisticRateLimit,
	}
	c := s.startCCM("ccm", cloud, ccm.Config{})
	admin := s.admin(c, initTimeout)
	if err := admin.ResetCalls(t.Context()); err != nil {
		t.Fatal(err)
	}

	// Bring-up: every Node and every Service at once, as a cluster and its
	// workloads arrive.
	start := time.Now()
	nodes, providerIDs := s.createRenamedNodes(instances)
	var svcs []string
	for i := range realisticServices {
		name := fmt.Sprintf("svc-%d", i+1)
		s.createService(workload.LoadBalancerService(s.ns, name, 80))
		svcs = append(svcs, name)
	}
	wantIDs := slices.Sorted(slices.Values(providerIDs))
	s.poll(convergeTimeout, fmt.Sprintf("%d nodes initialized and %d services with the ingress of their one load balancer, which targets every instance", len(nodes), len(svcs)),
		func(ctx context.Context) (bool, string) {
			return s.realisticConverged(ctx, admin, instances, wantIDs)
		})
	converged := time.Since(start)
	calls, err := admin.Calls(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("bring-up of %d nodes and %d services converged in %s; %s", len(nodes), len(svcs), converged.Round(100*time.Millisecond), describeCalls(calls))
	if calls.Throttled == 0 {
		t.Errorf("the rate limit %s throttled no call during bring-up (%s): the scenario does not exercise throttling", describeRateLimit(realisticRateLimit), describeCalls(calls))
	}
	s.checkRealisticCloud(admin)

	// Tear-down: every Service deleted; the cloud is left with nothing of
	// the cluster.
	if err := admin.ResetCalls(t.Context()); err != nil {
		t.Fatal(err)
	}
	start = time.Now()
	s.deleteServices(admin, convergeTimeout, svcs)
	torndown := time.Since(start)
	s.checkVIPsReleased(admin, "every Service was deleted")
	calls, err = admin.Calls(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("tear-down of %d services done in %s; %s", len(svcs), torndown.Round(100*time.Millisecond), describeCalls(calls))
}

// createRenamedNodes creates one Node per instance as kubelet
// --provider-id registers it (spec.providerID set from the start), named
// <scenario>-host-<k>, unlike the instance (fakecloud.Instances names it
// <prefix>-<k>), and returns the Node names and provider IDs in instance
// order.
func (s *scenario) createRenamedNodes(instances []fake.Instance) (nodes, providerIDs []string) {
	s.t.Helper()
	for i, in := range instances {
		nodes = append(nodes, fmt.Sprintf("%s-host-%d", s.name, i+1))
		providerIDs = append(providerIDs, "fake://"+in.ID)
	}
	s.createNodes(nodes, func(i int) workload.NodeOptions { return workload.NodeOptions{ProviderID: providerIDs[i]} })
	return nodes, providerIDs
}

// realisticConverged is the condition of TestRealisticCloudAtScale's
// bring-up: every one of the scenario's Nodes (one per instance, none
// deleted) initialized, every Service of its namespace with an ingress, and
// the cloud holding exactly one load balancer of this cluster per Service
// and no other, ready, with the Service's ingress as its VIPs and exactly
// the instances wantIDs (sorted provider IDs) as backends. It returns what
// is still missing, with the cloud calls so far.
func (s *scenario) realisticConverged(ctx context.Context, admin *fakecloud.Admin, instances []fake.Instance, wantIDs []string) (bool, string) {
	nodes, err := s.client.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: scenarioLabel + "=" + s.name})
	if err != nil {
		return false, err.Error()
	}
	svcs, err := s.client.CoreV1().Services(s.ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return false, err.Error()
	}
	lbs, err := admin.LoadBalancers(ctx)
	if err != nil {
		return false, err.Error()
	}
	var problems []string
	problem := func(format string, args ...any) {
		if len(problems) < 5 { // enough to see what is wrong
			problems = append(problems, fmt.Sprintf(format, args...))
		}
	}
	initialized := 0
	for i := range nodes.Items {
		if workload.Initialized(&nodes.Items[i]) {
			initialized++
		}
	}
	withIngress, owned := 0, 0
	for i := range svcs.Items {
		svc := &svcs.Items[i]
		ingress := workload.IngressIPs(svc)
		if len(ingress) > 0 {
			withIngress++
		}
		mine := lbsOf(lbs, svc.UID)
		owned += len(mine)
		switch {
		case len(mine) != 1:
			problem("service %s: %s", svc.Name, describeLBs(mine))
		case !slices.Equal(ingress, mine[0].VIPs) || !slices.Equal(ingressOf(mine[0]), mine[0].VIPs):
			problem("service %s: ingress %v, its load balancer %s reports %v for VIPs %v (provisioning %v)", svc.Name, ingress, mine[0].ID, ingressOf(mine[0]), mine[0].VIPs, mine[0].Provisioning)
		case !slices.Equal(backendProviderIDs(mine[0]), wantIDs):
			problem("service %s: load balancer %s has %d backends, want the %d instances", svc.Name, mine[0].ID, len(mine[0].Spec.Backends), len(wantIDs))
		}
	}
	if n := len(s.ours(lbs)); n != owned || n != realisticServices {
		problem("the cloud has %d load balancers of this cluster (%d owned by the services), want %d", n, owned, realisticServices)
	}
	ok := initialized == len(instances) && len(nodes.Items) == len(instances) && withIngress == realisticServices && len(problems) == 0
	state := fmt.Sprintf("%d/%d nodes initialized, %d/%d services with ingress, %d load balancers; %s",
		initialized, len(instances), withIngress, realisticServices, len(lbs), strings.Join(problems, "; "))
	if calls, err := admin.Calls(ctx); err == nil {
		state += "; " + describeCalls(calls)
	}
	return ok, state
}

// checkRealisticCloud checks what realisticConverged does not: every Node
// got its instance's addresses although its name is not the instance's,
// and every load balancer of the cluster was provisioned asynchronously and
// keeps its backends by instance ID only.
func (s *scenario) checkRealisticCloud(admin *fakecloud.Admin) {
	s.t.Helper()
	st, err := admin.State(s.t.Context())
	if err != nil {
		s.t.Fatal(err)
	}
	byID := map[string]fake.Instance{}
	for _, in := range st.Instances {
		byID["fake://"+in.ID] = in
	}
	nodes, err := s.client.CoreV1().Nodes().List(s.t.Context(), metav1.ListOptions{LabelSelector: scenarioLabel + "=" + s.name})
	if err != nil {
		s.t.Fatal(err)
	}
	for _, n := range nodes.Items {
		in, ok := byID[n.Spec.ProviderID]
		if !ok {
			s.t.Errorf("node %s: providerID %q names no instance", n.Name, n.Spec.ProviderID)
			continue
		}
		var ips []string
		for _, a := range n.Status.Addresses {
			if a.Type == corev1.NodeInternalIP {
				ips = append(ips, a.Address)
			}
		}
		if !slices.Equal(ips, in.InternalIPs) {
			s.t.Errorf("node %s (instance %s named %s): InternalIPs %v, want the instance's %v", n.Name, in.ID, in.Name, ips, in.InternalIPs)
		}
	}
	for _, lb := range s.ours(st.LoadBalancers) {
		if lb.ReadyAt.IsZero() {
			s.t.Errorf("load balancer %s has no readyAt: it was not provisioned asynchronously", lb.ID)
		}
		for _, b := range lb.Spec.Backends {
			if b != (loadbalancer.Backend{ProviderID: b.ProviderID}) {
				s.t.Errorf("load balancer %s keeps backend %+v; with backends instanceID the cloud keeps the provider ID only", lb.ID, b)
				break
			}
		}
	}
}

// describeCalls summarizes cloud calls: totals, then per operation, the
// throttled ones in parentheses.
func describeCalls(c fake.Calls) string {
	var ops []string
	for _, op := range slices.Sorted(maps.Keys(c.ByOp)) {
		entry := fmt.Sprintf("%s %d", op, c.ByOp[op])
		if n := c.ThrottledByOp[op]; n > 0 {
			entry += fmt.Sprintf(" (%d throttled)", n)
		}
		ops = append(ops, entry)
	}
	return fmt.Sprintf("cloud calls: %d reads, %d writes, %d throttled: %s", c.Reads, c.Writes, c.Throttled, strings.Join(ops, ", "))
}

// describeRateLimit is "<reads>/s reads, <writes>/s writes, burst <n>".
func describeRateLimit(r fake.RateLimit) string {
	rate := func(p *float64) string {
		if p == nil {
			return "unlimited"
		}
		return fmt.Sprintf("%g/s", *p)
	}
	return fmt.Sprintf("%s reads, %s writes, burst %d", rate(r.ReadsPerSecond), rate(r.WritesPerSecond), r.Burst)
}
