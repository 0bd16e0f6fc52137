package fake_test

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	cloudprovider "k8s.io/cloud-provider"

	"github.com/ccmkit/ccmkit/fake"
)

const (
	benchInstances = 5000
	benchLBs       = 1000
	benchBackends  = 10 // nodes behind each load balancer
)

// benchCloud is a fake with 5,000 instances, 1,000 load balancers of 10
// backends each, and a route per node.
func benchCloud(b *testing.B) (*fake.Cloud, []*v1.Node, []*v1.Service) {
	b.Helper()
	c := newCloud(b, fake.Config{})
	for i := range benchInstances {
		if _, err := c.AddInstance(fake.Instance{Name: fmt.Sprintf("node-%04d", i)}); err != nil {
			b.Fatal(err)
		}
	}
	nodes := make([]*v1.Node, benchInstances)
	for i := range nodes {
		nodes[i] = mustNode(b, c, fmt.Sprintf("i-%d", i+1))
	}
	lb := lbOf(b, c)
	svcs := make([]*v1.Service, benchLBs)
	for i := range svcs {
		svcs[i] = service(fmt.Sprintf("svc-%04d", i))
		if _, err := lb.EnsureLoadBalancer(b.Context(), cluster, svcs[i], backendsOf(nodes, i)); err != nil {
			b.Fatal(err)
		}
	}
	// Routes are created concurrently, as the route controller does, so
	// that they are coalesced into few table writes.
	rt := routesOf(b, c)
	var wg sync.WaitGroup
	errs := make(chan error, len(nodes))
	for i, n := range nodes {
		wg.Go(func() {
			r := &cloudprovider.Route{TargetNode: types.NodeName(n.Name), DestinationCIDR: fmt.Sprintf("10.%d.%d.0/24", 100+i/256, i%256)}
			errs <- rt.CreateRoute(b.Context(), cluster, string(n.UID), r)
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			b.Fatal(err)
		}
	}
	return c, nodes, svcs
}

func backendsOf(nodes []*v1.Node, i int) []*v1.Node {
	start := (i * benchBackends) % len(nodes)
	return nodes[start : start+benchBackends]
}

// BenchmarkFake measures the fake's throughput through its
// cloudprovider.Interface with 5,000 instances and 1,000 load balancers.
func BenchmarkFake(b *testing.B) {
	c, nodes, svcs := benchCloud(b)
	lb, rt, v2 := lbOf(b, c), routesOf(b, c), instancesOf(b, c)
	ctx := b.Context()

	b.Run("InstanceMetadata", func(b *testing.B) {
		i := 0
		for b.Loop() {
			if _, err := v2.InstanceMetadata(ctx, nodes[i%len(nodes)]); err != nil {
				b.Fatal(err)
			}
			i++
		}
	})
	b.Run("InstanceExistsByName", func(b *testing.B) {
		i := 0
		for b.Loop() {
			n := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: nodes[i%len(nodes)].Name}}
			if ok, err := v2.InstanceExists(ctx, n); !ok || err != nil {
				b.Fatal(ok, err)
			}
			i++
		}
	})
	b.Run("EnsureLoadBalancerConverged", func(b *testing.B) {
		i := 0
		for b.Loop() {
			if _, err := lb.EnsureLoadBalancer(ctx, cluster, svcs[i%len(svcs)], backendsOf(nodes, i%len(svcs))); err != nil {
				b.Fatal(err)
			}
			i++
		}
	})
	b.Run("GetLoadBalancer", func(b *testing.B) {
		i := 0
		for b.Loop() {
			if _, ok, err := lb.GetLoadBalancer(ctx, cluster, svcs[i%len(svcs)]); !ok || err != nil {
				b.Fatal(ok, err)
			}
			i++
		}
	})
	b.Run("UpdateLoadBalancer", func(b *testing.B) {
		i := 0
		for b.Loop() {
			k := i % len(svcs)
			// Alternate between the 10 usual backends and 9 of them: one
			// backend write per call.
			set := backendsOf(nodes, k)
			if i/len(svcs)%2 == 0 {
				set = set[1:]
			}
			if err := lb.UpdateLoadBalancer(ctx, cluster, svcs[k], set); err != nil {
				b.Fatal(err)
			}
			i++
		}
	})
	b.Run("EnsureAndDeleteLoadBalancer", func(b *testing.B) {
		svc := service("churn")
		for b.Loop() {
			if _, err := lb.EnsureLoadBalancer(ctx, cluster, svc, nodes[:benchBackends]); err != nil {
				b.Fatal(err)
			}
			if err := lb.EnsureLoadBalancerDeleted(ctx, cluster, svc); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("ListRoutes", func(b *testing.B) {
		for b.Loop() {
			if rs, err := rt.ListRoutes(ctx, cluster); err != nil || len(rs) != benchInstances {
				b.Fatal(len(rs), err)
			}
		}
	})
	b.Run("CreateDeleteRouteParallel", func(b *testing.B) {
		// 25×GOMAXPROCS concurrent callers, like the route controller's
		// up to 200 concurrent calls; each creates a route and deletes it.
		var next atomic.Int64
		b.SetParallelism(25)
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				slot := next.Add(1) % 4096
				r := &cloudprovider.Route{TargetNode: "node-0000", DestinationCIDR: fmt.Sprintf("172.%d.%d.0/24", 16+slot/256, slot%256)}
				hint := fmt.Sprintf("bench-%d", slot)
				if err := rt.CreateRoute(ctx, cluster, hint, r); err != nil {
					b.Fatal(err)
				}
				if err := rt.DeleteRoute(ctx, cluster, r); err != nil {
					b.Fatal(err)
				}
			}
		})
	})
	b.Run("Snapshot", func(b *testing.B) {
		for b.Loop() {
			if s := c.Snapshot(); len(s.Instances) != benchInstances {
				b.Fatal(len(s.Instances))
			}
		}
	})
}
