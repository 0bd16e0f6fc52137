package fake_test

import (
	"errors"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	"k8s.io/cloud-provider/api"

	"github.com/ccmkit/ccmkit/fake"
	"github.com/ccmkit/ccmkit/loadbalancer"
)

// ensureUntilReady calls EnsureLoadBalancer as the service controller does
// (again after each RetryError's delay, exactly) until it returns a status,
// and returns how many calls that took and the longest delay asked for.
func ensureUntilReady(t *testing.T, c *fake.Cloud, svc *v1.Service, nodes []*v1.Node) (calls int, longest time.Duration) {
	t.Helper()
	lb := lbOf(t, c)
	for calls = 1; calls <= 20; calls++ {
		st, err := lb.EnsureLoadBalancer(t.Context(), "kubernetes", svc, nodes)
		if err == nil && st != nil && len(st.Ingress) > 0 {
			return calls, longest
		}
		var re *api.RetryError
		if !errors.As(err, &re) {
			t.Fatalf("EnsureLoadBalancer call %d: %v; want a status or a RetryError", calls, err)
		}
		longest = max(longest, re.RetryAfter())
		time.Sleep(re.RetryAfter()) // virtual: the bubble's clock
	}
	t.Fatalf("EnsureLoadBalancer not ready after %d calls", calls)
	return 0, 0
}

// TestHierarchicalThroughReconciler: the fake's hierarchical cloud (busy
// 1 s after every write, 409 while busy) through its own Reconciler, in
// virtual time. A bring-up of two ports and a port change converge with
// exactly one write per cloud object, no write refused (the Reconciler
// waits each busy window out before the next write, within MaxBusyWait,
// and otherwise asks to come back after exactly the window), and no
// delay ever doubled.
func TestHierarchicalThroughReconciler(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, nodes := cloudWithNodes(t, fake.Config{LoadBalancers: fake.LoadBalancerSection{Hierarchical: true}}, 2)
		svc := twoPorts("web")
		start := time.Now()
		calls, longest := ensureUntilReady(t, c, svc, nodes)
		got := c.Calls()
		if writes := got.Writes - got.Busy; writes != 9 || got.Busy != 0 {
			t.Errorf("bring-up: %d writes, %d refused as busy; want 1 + 4 per port = 9, none refused", writes, got.Busy)
		}
		if longest > time.Second {
			t.Errorf("bring-up: a RetryError asked for %v; want at most the busy window, 1s", longest)
		}
		t.Logf("bring-up: %d writes in %d EnsureLoadBalancer calls, %v virtual, reads %d", got.Writes, calls, time.Since(start), got.Reads)

		time.Sleep(2 * time.Second) // the cloud is free again
		before := c.Calls()
		svc.Spec.Ports[0].Port = 8080
		start = time.Now()
		calls, longest = ensureUntilReady(t, c, svc, nodes)
		got = c.Calls()
		if writes := got.Writes - before.Writes; writes != 6 || got.Busy != before.Busy {
			t.Errorf("port change: %d writes, %d refused; want 6 (old pool, old listener, new listener, pool, members, monitor), none refused", writes, got.Busy-before.Busy)
		}
		if took := time.Since(start); took > 6*(time.Second+time.Second) || longest > time.Second {
			t.Errorf("port change took %v (longest RetryError %v); want within 6 × (1s + 1s) and no delay over 1s", took, longest)
		}
		t.Logf("port change: %d writes in %d EnsureLoadBalancer calls, %v virtual, reads %d", got.Writes-before.Writes, calls, time.Since(start), got.Reads-before.Reads)
		lb := c.Snapshot().LoadBalancers[0]
		for _, l := range lb.Spec.Listeners {
			if l.Pool == nil || len(l.Pool.Backends) != 2 || l.Pool.HealthCheck == nil {
				t.Errorf("listener %v: pool %+v; want 2 members and a monitor", l.ListenerKey, l.Pool)
			}
		}
		if err := lbOf(t, c).EnsureLoadBalancerDeleted(t.Context(), "kubernetes", svc); err != nil {
			t.Errorf("EnsureLoadBalancerDeleted: %v", err)
		}
		if n := len(c.Snapshot().LoadBalancers); n != 0 {
			t.Errorf("%d load balancers left after the delete; want none", n)
		}
	})
}

// TestPortHealthCheck: on the hierarchical cloud, fake.ccmkit.io/health-check
// gives a listed port's pool a health monitor of its own on the port's
// node port, the other keeping the Service's; changing it is one write, of
// that pool's monitor. A flat cloud, which has one health check, refuses
// a Service that sets it and builds nothing.
func TestPortHealthCheck(t *testing.T) {
	const hc = "fake.ccmkit.io/health-check"
	synctest.Test(t, func(t *testing.T) {
		c, nodes := cloudWithNodes(t, fake.Config{LoadBalancers: fake.LoadBalancerSection{Hierarchical: true}}, 2)
		svc := twoPorts("web")
		svc.Annotations = map[string]string{hc: "https=tcp"}
		ensureUntilReady(t, c, svc, nodes)
		monitors := func() map[int32]loadbalancer.HealthCheck {
			t.Helper()
			lb, ok := c.LoadBalancerFor("kubernetes", svc)
			if !ok {
				t.Fatal("no load balancer")
			}
			out := map[int32]loadbalancer.HealthCheck{}
			for _, l := range lb.Spec.Listeners {
				if l.Pool != nil && l.Pool.HealthCheck != nil {
					out[l.Port] = *l.Pool.HealthCheck
				}
			}
			return out
		}
		service := loadbalancer.HealthCheck{Protocol: loadbalancer.HealthCheckHTTP, Port: 10256, Path: "/healthz"}
		if diff := cmp.Diff(map[int32]loadbalancer.HealthCheck{80: service, 443: {Protocol: loadbalancer.HealthCheckTCP, Port: 30443}}, monitors()); diff != "" {
			t.Errorf("health monitors (-want +got):\n%s", diff)
		}

		time.Sleep(2 * time.Second) // the cloud is free again
		c.ResetCalls()
		svc.Annotations[hc] = "https=http:/ready"
		ensureUntilReady(t, c, svc, nodes)
		if got := c.Calls(); got.ByOp[fake.OpApplyLoadBalancer] != 1 {
			t.Errorf("changing one port's health check: %d writes; want 1, that pool's monitor", got.ByOp[fake.OpApplyLoadBalancer])
		}
		if diff := cmp.Diff(map[int32]loadbalancer.HealthCheck{80: service, 443: {Protocol: loadbalancer.HealthCheckHTTP, Port: 30443, Path: "/ready"}}, monitors()); diff != "" {
			t.Errorf("health monitors after the change (-want +got):\n%s", diff)
		}
	})

	flat, nodes := cloudWithNodes(t, fake.Config{}, 2)
	svc := twoPorts("web")
	svc.Annotations = map[string]string{hc: "https=tcp"}
	_, err := lbOf(t, flat).EnsureLoadBalancer(t.Context(), "kubernetes", svc, nodes)
	if !errors.Is(err, loadbalancer.ErrUnsupported) || !strings.Contains(err.Error(), hc) {
		t.Errorf("flat cloud: EnsureLoadBalancer = %v; want ErrUnsupported naming %s", err, hc)
	}
	if n := len(flat.Snapshot().LoadBalancers); n != 0 {
		t.Errorf("flat cloud: %d load balancers; want none", n)
	}
}
