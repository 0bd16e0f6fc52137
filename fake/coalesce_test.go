package fake_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/cloud-provider/api"

	"github.com/ccmkit/ccmkit/fake"
	"github.com/ccmkit/ccmkit/loadbalancer"
	"github.com/ccmkit/ccmkit/provider"
)

// writtenBackends records the provider IDs of every backend any
// ApplyLoadBalancer carried, and counts the applies after reset.
type writtenBackends struct {
	mu      sync.Mutex
	ids     map[string]bool
	applies int
}

func (w *writtenBackends) funcs() fake.Funcs {
	return fake.Funcs{ApplyLoadBalancer: func(ctx context.Context, next loadbalancer.Driver, a loadbalancer.Action) (*loadbalancer.LoadBalancer, error) {
		w.mu.Lock()
		w.applies++
		var bs []loadbalancer.Backend
		bs = append(bs, a.Backends...)
		if a.Create != nil {
			bs = append(bs, a.Create.Spec.Backends...)
		}
		for _, b := range bs {
			w.ids[b.ProviderID] = true
		}
		w.mu.Unlock()
		return next.Apply(ctx, a)
	}}
}

func (w *writtenBackends) take() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := w.applies
	w.applies = 0
	return n
}

// ensureRetrying calls EnsureLoadBalancer as the service controller does
// until it succeeds, waiting each RetryError's delay (virtual time).
func ensureRetrying(t *testing.T, c *fake.Cloud, svc *v1.Service, nodes []*v1.Node) {
	t.Helper()
	for range 50 {
		_, err := lbOf(t, c).EnsureLoadBalancer(t.Context(), "kubernetes", svc, nodes)
		var re *api.RetryError
		switch {
		case err == nil:
			return
		case errors.As(err, &re):
			time.Sleep(re.RetryAfter())
		default:
			t.Fatalf("EnsureLoadBalancer(%s): %v", svc.Name, err)
		}
	}
	t.Fatalf("EnsureLoadBalancer(%s) did not converge", svc.Name)
}

// TestCoalescedNodeChurnRealistic is issue 27's correctness test: on the
// realistic fake (instance-ID backends, rate limit, provisioning delay),
// with Nodes named unlike their instances, Nodes joining and leaving
// within one coalescing window end, in every load balancer, as exactly the
// live instances, in the fewest writes per load balancer; a Node whose instance
// is deleted within the window is never written; and the service
// controller's calls make no cloud call.
func TestCoalescedNodeChurnRealistic(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := &writtenBackends{ids: map[string]bool{}}
		cfg := fake.Config{Realistic: true, LoadBalancers: fake.LoadBalancerSection{CoalesceWindow: &provider.Duration{Duration: 2 * time.Second}}}
		c, nodes := cloudWithNodes(t, cfg, 5, fake.Options{Interceptor: w.funcs()})
		for i, n := range nodes {
			n.Name = fmt.Sprintf("k8s-worker-%c", 'a'+i) // renamed: found by provider ID only
		}
		svcs := make([]*v1.Service, 4)
		for i := range svcs {
			svcs[i] = service(fmt.Sprintf("web-%d", i))
			ensureRetrying(t, c, svcs[i], nodes[:3])
		}
		time.Sleep(3 * time.Second) // past the rate limit's refill
		w.take()
		calls := c.Calls()

		// Node sync rounds within one window: nodes[3] joins, nodes[4]
		// joins and its instance is deleted, nodes[0]'s instance is
		// deleted and it leaves.
		gone, left := nodes[4], nodes[0]
		rounds := [][]*v1.Node{
			nodes[:4],
			append(slices.Clone(nodes[:4]), gone),
			nodes[:4],
			nodes[1:4],
		}
		for i, round := range rounds {
			switch i {
			case 2:
				if err := c.RemoveInstanceContext(t.Context(), instanceID(t, gone)); err != nil {
					t.Fatal(err)
				}
			case 3:
				if err := c.RemoveInstanceContext(t.Context(), instanceID(t, left)); err != nil {
					t.Fatal(err)
				}
			}
			for _, s := range svcs {
				if err := lbOf(t, c).UpdateLoadBalancer(t.Context(), "kubernetes", s, round); err != nil {
					t.Fatalf("round %d: UpdateLoadBalancer(%s): %v", i, s.Name, err)
				}
			}
			time.Sleep(200 * time.Millisecond)
		}
		if now := c.Calls(); now.Reads+now.Writes != calls.Reads+calls.Writes {
			n := now.Reads + now.Writes - calls.Reads - calls.Writes
			t.Errorf("the node-sync calls within the window made %d cloud calls; want 0 (deferred)", n)
		}
		time.Sleep(3 * time.Second)
		synctest.Wait()

		// Per load balancer, the window's net change: one AddBackends
		// (nodes[3]) and one RemoveBackends (nodes[0]), the fewest actions
		// of the Driver model; written per round, it would be four.
		if n := w.take(); n != 2*len(svcs) {
			t.Errorf("%d ApplyLoadBalancer for %d load balancers after the window; want 2 each (one add, one remove)", n, len(svcs))
		}
		if w.ids[gone.Spec.ProviderID] {
			t.Errorf("a backend of %s (instance deleted within the window) was written", gone.Name)
		}
		var live []string // the instances left: nodes[1:4]'s
		for _, in := range c.Snapshot().Instances {
			live = append(live, "fake://"+in.ID)
		}
		slices.Sort(live)
		st := c.Snapshot()
		if len(st.LoadBalancers) != len(svcs) {
			t.Fatalf("%d load balancers; want %d", len(st.LoadBalancers), len(svcs))
		}
		for _, lb := range st.LoadBalancers {
			var got []string
			for _, b := range lb.Spec.Backends {
				got = append(got, b.ProviderID)
			}
			slices.Sort(got)
			if len(live) != 3 || !slices.Equal(got, live) {
				t.Errorf("load balancer %s: backends %v; want the live instances behind Nodes %v", lb.Name, got, names(nodes[1:4]))
			}
		}
	})
}

func instanceID(t *testing.T, n *v1.Node) string {
	t.Helper()
	id, ok := strings.CutPrefix(n.Spec.ProviderID, "fake://")
	if !ok {
		t.Fatalf("Node %s: provider ID %q is not the fake's", n.Name, n.Spec.ProviderID)
	}
	return id
}

func names(nodes []*v1.Node) []string {
	out := make([]string, len(nodes))
	for i, n := range nodes {
		out[i] = n.Name
	}
	return out
}
