package fake_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cloud-provider/api"

	"github.com/ccmkit/ccmkit/fake"
	"github.com/ccmkit/ccmkit/loadbalancer"
)

// A cloud with two instances and one load balancer.
func ExampleNew() {
	ctx := context.Background()
	cloud, err := fake.New(fake.Config{ClusterID: "demo"},
		fake.Options{Instances: []fake.Instance{{Name: "node-a"}, {Name: "node-b", Zone: "zone-b"}}})
	if err != nil {
		fmt.Println(err)
		return
	}
	a, _ := cloud.NodeFor("i-1")
	b, _ := cloud.NodeFor("i-2")

	// The node controller asks InstancesV2 about a new Node.
	nodes, _ := cloud.InstancesV2()
	meta, _ := nodes.InstanceMetadata(ctx, &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-b"}})
	fmt.Println(meta.ProviderID, meta.Zone, meta.NodeAddresses)

	// The service controller ensures a load balancer.
	svc := &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web", UID: "5b8f0d3e-9b1a-4c55-8d1e-2f7d1c3a9e01"},
		Spec: v1.ServiceSpec{
			Type:  v1.ServiceTypeLoadBalancer,
			Ports: []v1.ServicePort{{Protocol: v1.ProtocolTCP, Port: 80, NodePort: 30080}},
		},
	}
	lbs, _ := cloud.LoadBalancer()
	status, err := lbs.EnsureLoadBalancer(ctx, "kubernetes", svc, []*v1.Node{a, b})
	fmt.Println(status.Ingress[0].IP, err)

	lb, _ := cloud.LoadBalancerFor("kubernetes", svc)
	l := lb.Spec.Listeners[0]
	fmt.Println(lb.ID, l.Family, l.Protocol, l.Port, l.NodePort, len(lb.Spec.Backends), lb.Spec.HealthCheck)
	// Output:
	// fake://i-2 zone-b [{InternalIP 10.0.0.2} {Hostname node-b}]
	// 198.18.0.1 <nil>
	// lb-1 IPv4 TCP 80 30080 2 {HTTP 10256 /healthz}
}

// Fault injection with interceptor Funcs: an error on the first create, a
// throttle, and latency.
func ExampleFuncs() {
	ctx := context.Background()
	cloud, _ := fake.New(fake.Config{}, fake.Options{Instances: []fake.Instance{{Name: "node-a"}}})
	node, _ := cloud.NodeFor("i-1")
	svc := &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web", UID: "5b8f0d3e-9b1a-4c55-8d1e-2f7d1c3a9e01"},
		Spec:       v1.ServiceSpec{Type: v1.ServiceTypeLoadBalancer, Ports: []v1.ServicePort{{Protocol: v1.ProtocolTCP, Port: 80, NodePort: 30080}}},
	}
	lbs, _ := cloud.LoadBalancer()

	outage := errors.New("cloud API unavailable")
	cloud.SetInterceptor(fake.Funcs{ApplyLoadBalancer: func(context.Context, loadbalancer.Driver, loadbalancer.Action) (*loadbalancer.LoadBalancer, error) {
		return nil, outage
	}})
	_, err := lbs.EnsureLoadBalancer(ctx, "kubernetes", svc, []*v1.Node{node})
	fmt.Println(errors.Is(err, outage))

	cloud.SetInterceptor(fake.Funcs{ApplyLoadBalancer: func(context.Context, loadbalancer.Driver, loadbalancer.Action) (*loadbalancer.LoadBalancer, error) {
		return nil, api.NewRetryError("rate limited", 30*time.Second)
	}})
	_, err = lbs.EnsureLoadBalancer(ctx, "kubernetes", svc, []*v1.Node{node})
	// The Reconciler spreads throttled Services out: the cloud's 30s plus
	// up to as much again at random.
	var retry *api.RetryError
	fmt.Println(errors.As(err, &retry), retry.RetryAfter() >= 30*time.Second && retry.RetryAfter() < time.Minute)

	cloud.SetInterceptor(fake.Funcs{FindLoadBalancers: func(ctx context.Context, next loadbalancer.Driver, q loadbalancer.Query) ([]*loadbalancer.LoadBalancer, error) {
		select { // a slow cloud; a latency Func gives up when the call's context does
		case <-time.After(time.Millisecond):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		return next.Find(ctx, q)
	}})
	_, err = lbs.EnsureLoadBalancer(ctx, "kubernetes", svc, []*v1.Node{node})
	fmt.Println(err)
	// Output:
	// true
	// true true
	// <nil>
}

// Call counters: what a scenario costs in cloud API calls.
func ExampleCloud_Calls() {
	ctx := context.Background()
	cloud, _ := fake.New(fake.Config{}, fake.Options{Instances: []fake.Instance{{Name: "node-a"}, {Name: "node-b"}}})
	nodes, _ := cloud.InstancesV2()
	for _, name := range []string{"node-a", "node-b", "node-a"} {
		_, _ = nodes.InstanceMetadata(ctx, &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}})
	}
	calls := cloud.Calls()
	fmt.Println(calls.Reads, calls.Writes, calls.ByOp)
	// Output:
	// 1 0 map[ListInstances:1]
}

// The realistic mode: a new load balancer is provisioning (the service
// controller is told to come back), the API is rate-limited, and backends
// are kept by instance ID, here of a Node whose name is not its instance's.
func ExampleConfig_realistic() {
	ctx := context.Background()
	clk := clocktesting.NewFakeClock(time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC))
	cloud, _ := fake.New(fake.Config{ClusterID: "demo", Realistic: true},
		fake.Options{Instances: []fake.Instance{{Name: "vm-a"}},
			Clock: clk}) // a clock the example moves
	node, _ := cloud.NodeFor("i-1")
	node.Name = "worker-1" // kubelet --hostname-override
	svc := &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web", UID: "5b8f0d3e-9b1a-4c55-8d1e-2f7d1c3a9e01"},
		Spec:       v1.ServiceSpec{Type: v1.ServiceTypeLoadBalancer, Ports: []v1.ServicePort{{Protocol: v1.ProtocolTCP, Port: 80, NodePort: 30080}}},
	}
	lbs, _ := cloud.LoadBalancer()

	_, err := lbs.EnsureLoadBalancer(ctx, "kubernetes", svc, []*v1.Node{node})
	var retry *api.RetryError
	fmt.Println(errors.As(err, &retry), retry.RetryAfter())

	clk.Step(2 * time.Second) // the realistic provisioning delay
	status, err := lbs.EnsureLoadBalancer(ctx, "kubernetes", svc, []*v1.Node{node})
	fmt.Println(status.Ingress[0].IP, err)

	lb, _ := cloud.LoadBalancerFor("kubernetes", svc)
	for _, b := range lb.Spec.Backends { // the instance only
		fmt.Printf("%q %q %v\n", b.NodeName, b.ProviderID, b.IPv4.IsValid())
	}
	limit := cloud.RateLimit()
	fmt.Println(*limit.ReadsPerSecond, *limit.WritesPerSecond, limit.Burst)
	// Output:
	// true 2s
	// 198.18.0.1 <nil>
	// "" "fake://i-1" false
	// 20 10 20
}

// Two clusters, both run with --cluster-name=kubernetes, on one cloud: each
// owns its load balancers by its cluster ID, so the same Service in both
// gets two load balancers, and neither sees the other's.
func ExampleNewPeer() {
	ctx := context.Background()
	blue, _ := fake.New(fake.Config{ClusterID: "blue"}, fake.Options{Instances: []fake.Instance{{Name: "node-a"}}})
	green, _ := fake.NewPeer(blue, "green", fake.PeerOptions{})
	node, _ := blue.NodeFor("i-1")
	svc := &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web", UID: "5b8f0d3e-9b1a-4c55-8d1e-2f7d1c3a9e01"},
		Spec:       v1.ServiceSpec{Type: v1.ServiceTypeLoadBalancer, Ports: []v1.ServicePort{{Protocol: v1.ProtocolTCP, Port: 80, NodePort: 30080}}},
	}
	for _, c := range []*fake.Cloud{blue, green} {
		lbs, _ := c.LoadBalancer()
		status, err := lbs.EnsureLoadBalancer(ctx, "kubernetes", svc, []*v1.Node{node})
		lb, _ := c.LoadBalancerFor("kubernetes", svc)
		fmt.Println(lb.ID, lb.Tags[loadbalancer.TagCluster], status.Ingress[0].IP, err)
	}
	greenLBs, _ := green.LoadBalancer()
	_ = greenLBs.EnsureLoadBalancerDeleted(ctx, "kubernetes", svc)
	fmt.Println(len(blue.Snapshot().LoadBalancers))
	// Output:
	// lb-1 blue 198.18.0.1 <nil>
	// lb-2 green 198.18.0.2 <nil>
	// 1
}
