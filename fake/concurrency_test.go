package fake_test

import (
	"errors"
	"fmt"
	"net/http"
	"sync"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	cloudprovider "k8s.io/cloud-provider"

	"github.com/ccmkit/ccmkit/fake"
	"github.com/ccmkit/ccmkit/instances"
	"github.com/ccmkit/ccmkit/loadbalancer"
)

// TestConcurrentMix runs 8 goroutines that mix every operation (load
// balancers, routes, instance look-ups, the control surface, faults,
// counters, snapshots and the admin endpoint) on one cloud, with random
// faults on, then checks that the cloud is consistent: run it with -race.
func TestConcurrentMix(t *testing.T) {
	const workers, rounds = 8, 40
	c, base := startAdmin(t, fake.Config{}, fake.Options{InstanceCache: &instances.CacheOptions{ErrorTTL: -1}})
	for i := range 4 {
		if _, err := c.AddInstance(fake.Instance{Name: fmt.Sprintf("base-%d", i)}); err != nil {
			t.Fatal(err)
		}
	}
	var nodes []*v1.Node
	for _, in := range c.Snapshot().Instances {
		nodes = append(nodes, mustNode(t, c, in.ID))
	}
	chaos := errors.New("chaos")
	c.SetInterceptor(failRandomly(1, 0.05, chaos))
	lb, rt, v2 := lbOf(t, c), routesOf(t, c), instancesOf(t, c)
	shared := service("shared")

	// expected reports whether err is one this mix may produce.
	expected := func(err error) bool {
		return err == nil || errors.Is(err, chaos) || errors.Is(err, loadbalancer.ErrNotFound)
	}
	var wg sync.WaitGroup
	errs := make(chan error, workers*rounds)
	for w := range workers {
		wg.Go(func() {
			ctx := t.Context()
			svc := service(fmt.Sprintf("svc-%d", w))
			var mine []string
			for i := range rounds {
				var err error
				switch (w + i) % 12 {
				case 0:
					_, err = lb.EnsureLoadBalancer(ctx, cluster, svc, nodes[:1+i%len(nodes)])
				case 1:
					err = lb.UpdateLoadBalancer(ctx, cluster, shared, nodes[i%len(nodes):])
				case 2:
					_, err = lb.EnsureLoadBalancer(ctx, cluster, shared, nodes)
				case 3:
					_, _, err = lb.GetLoadBalancer(ctx, cluster, svc)
				case 4:
					err = lb.EnsureLoadBalancerDeleted(ctx, cluster, svc)
				case 5:
					err = rt.CreateRoute(ctx, cluster, fmt.Sprintf("uid-%d", w), &cloudprovider.Route{
						TargetNode: types.NodeName(nodes[w%len(nodes)].Name), DestinationCIDR: fmt.Sprintf("10.%d.%d.0/24", 100+w, i)})
				case 6:
					var listed []*cloudprovider.Route
					if listed, err = rt.ListRoutes(ctx, cluster); err == nil && len(listed) > 0 {
						err = rt.DeleteRoute(ctx, cluster, listed[i%len(listed)])
					}
				case 7:
					n := nodes[i%len(nodes)]
					if _, err = v2.InstanceExists(ctx, n); err == nil {
						_, err = v2.InstanceMetadata(ctx, n)
					}
				case 8:
					var in fake.Instance
					if in, err = c.AddInstance(fake.Instance{Name: fmt.Sprintf("w%d-%d", w, i)}); err == nil {
						mine = append(mine, in.ID)
					}
				case 9:
					if len(mine) > 0 {
						id := mine[i%len(mine)]
						if _, err = c.StopInstance(id); err == nil {
							_, err = c.StartInstance(id)
						}
						if errors.Is(err, fake.ErrInstanceTerminated) {
							err = nil
						}
					}
					_, err2 := v2.InstanceShutdown(ctx, &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("w%d-%d", w, i-1)}})
					if err == nil && err2 != nil && err2 != cloudprovider.InstanceNotFound { //nolint:errorlint // controllers compare InstanceNotFound with ==: a wrapped one is a failure
						err = err2
					}
				case 10:
					if len(mine) > 0 {
						_, err = c.TerminateInstance(mine[0])
					}
					_ = c.Snapshot()
					_ = c.Calls()
				case 11:
					resp, herr := http.Get(base + "/state")
					if herr == nil {
						resp.Body.Close()
						if resp.StatusCode != http.StatusOK {
							herr = fmt.Errorf("GET /state: %s", resp.Status)
						}
					}
					err = herr
					if i%3 == 0 {
						c.ResetCalls()
					}
				}
				if !expected(err) {
					errs <- fmt.Errorf("worker %d round %d: %w", w, i, err)
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}

	// Clean up without faults; nothing may leak.
	c.SetInterceptor(fake.Funcs{})
	ctx := t.Context()
	for w := range workers {
		if err := lb.EnsureLoadBalancerDeleted(ctx, cluster, service(fmt.Sprintf("svc-%d", w))); err != nil {
			t.Fatal(err)
		}
	}
	if err := lb.EnsureLoadBalancerDeleted(ctx, cluster, shared); err != nil {
		t.Fatal(err)
	}
	listed, err := rt.ListRoutes(ctx, cluster)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range listed {
		if err := rt.DeleteRoute(ctx, cluster, r); err != nil {
			t.Fatal(err)
		}
	}
	st := c.Snapshot()
	if len(st.LoadBalancers) != 0 || len(st.Routes) != 0 {
		t.Errorf("left over: %d load balancers, %d routes; want none", len(st.LoadBalancers), len(st.Routes))
	}
	for _, p := range st.AddressPools {
		if p.Purpose == "loadBalancers" && p.Allocated != 0 {
			t.Errorf("pool %s has %d VIPs allocated after every delete; want 0", p.CIDR, p.Allocated)
		}
	}
	checkDistinctIPs(t, st)
}
