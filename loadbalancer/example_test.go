package loadbalancer_test

import (
	"context"
	"fmt"
	"os"
	"slices"
	"sync"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/ccmkit/ccmkit/loadbalancer"
)

// memDriver is a minimal in-memory Driver: it stores load balancers as the
// model and applies actions with loadbalancer.Apply. A real Driver maps
// each ActionKind to its cloud's API.
type memDriver struct {
	mu   sync.Mutex
	lbs  map[string]*loadbalancer.LoadBalancer
	next int
}

func newMemDriver() *memDriver { return &memDriver{lbs: map[string]*loadbalancer.LoadBalancer{}} }

func (d *memDriver) Find(_ context.Context, q loadbalancer.Query) ([]*loadbalancer.LoadBalancer, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	var out []*loadbalancer.LoadBalancer
	for _, lb := range d.lbs {
		if matches(lb, q) {
			out = append(out, lb.Clone())
		}
	}
	return out, nil
}

func matches(lb *loadbalancer.LoadBalancer, q loadbalancer.Query) bool {
	switch {
	case q.ID != "":
		return lb.ID == q.ID
	case q.Name != "":
		return lb.Name == q.Name
	case len(q.Tags) > 0:
		for k, v := range q.Tags {
			if got, ok := lb.Tags[k]; !ok || got != v {
				return false
			}
		}
		return true
	}
	return false
}

func (d *memDriver) Apply(_ context.Context, a loadbalancer.Action) (*loadbalancer.LoadBalancer, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	lb, err := loadbalancer.Apply(d.lbs[a.LoadBalancerID], a)
	if err != nil {
		return nil, err
	}
	if a.Kind == loadbalancer.ActionCreate {
		d.next++
		lb.ID = fmt.Sprintf("lb-%d", d.next)
		lb.Ingress = []loadbalancer.Ingress{{IP: fmt.Sprintf("203.0.113.%d", d.next), IPMode: v1.LoadBalancerIPModeVIP}}
	}
	d.lbs[lb.ID] = lb
	return lb.Clone(), nil
}

func (d *memDriver) Delete(_ context.Context, lb *loadbalancer.LoadBalancer) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	delete(d.lbs, lb.ID)
	return nil
}

// ExampleReconciler runs a Reconciler over an in-memory Driver: Ensure
// creates, a second Ensure writes nothing, Update changes backends, Delete
// removes everything.
func ExampleReconciler() {
	ctx := context.Background()
	driver := newMemDriver()
	counting := &countWrites{Driver: driver}
	r, err := loadbalancer.NewReconciler(loadbalancer.Config{Driver: counting})
	if err != nil {
		fmt.Println(err)
		return
	}
	svc := &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web", UID: "6c1d1f9e-3c4b-4b8e-9d51-0f6a3f2b7a10"},
		Spec: v1.ServiceSpec{
			Type:  v1.ServiceTypeLoadBalancer,
			Ports: []v1.ServicePort{{Name: "http", Protocol: v1.ProtocolTCP, Port: 80, NodePort: 30080}},
		},
	}
	nodes := []*v1.Node{exampleNode("node-a", "10.0.0.1"), exampleNode("node-b", "10.0.0.2")}

	status, err := r.EnsureLoadBalancer(ctx, "prod", svc, nodes)
	fmt.Println("ensure:", status.Ingress[0].IP, err, "writes:", counting.take())

	_, err = r.EnsureLoadBalancer(ctx, "prod", svc, nodes)
	fmt.Println("ensure again:", err, "writes:", counting.take())

	err = r.UpdateLoadBalancer(ctx, "prod", svc, append(nodes, exampleNode("node-c", "10.0.0.3")))
	fmt.Println("update:", err, "writes:", counting.take())

	fmt.Println("name:", r.GetLoadBalancerName(ctx, "prod", svc))
	fmt.Println("delete:", r.EnsureLoadBalancerDeleted(ctx, "prod", svc))
	_, exists, err := r.GetLoadBalancer(ctx, "prod", svc)
	fmt.Println("exists:", exists, err)
	// Output:
	// ensure: 203.0.113.1 <nil> writes: [CreateLoadBalancer]
	// ensure again: <nil> writes: []
	// update: <nil> writes: [AddBackends]
	// name: k8s-shop-web-cqs8k2cj5600i
	// delete: <nil>
	// exists: false <nil>
}

// countWrites wraps a Driver and records the kinds of applied actions.
type countWrites struct {
	loadbalancer.Driver
	mu    sync.Mutex
	kinds []loadbalancer.ActionKind
}

func (c *countWrites) Apply(ctx context.Context, a loadbalancer.Action) (*loadbalancer.LoadBalancer, error) {
	c.mu.Lock()
	c.kinds = append(c.kinds, a.Kind)
	c.mu.Unlock()
	return c.Driver.Apply(ctx, a)
}

func (c *countWrites) take() []loadbalancer.ActionKind {
	c.mu.Lock()
	defer c.mu.Unlock()
	k := slices.Clone(c.kinds)
	c.kinds = nil
	if k == nil {
		k = []loadbalancer.ActionKind{}
	}
	return k
}

func exampleNode(name, ip string) *v1.Node {
	return &v1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       v1.NodeSpec{ProviderID: "example://" + name},
		Status:     v1.NodeStatus{Addresses: []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: ip}}},
	}
}

// ExampleNamer shows names for the default configuration and for a cloud
// that allows 32 characters of [A-Za-z0-9-].
func ExampleNamer() {
	def, _ := loadbalancer.NewNamer(loadbalancer.NamingConfig{})
	short, _ := loadbalancer.NewNamer(loadbalancer.NamingConfig{
		Prefix:    "K8s",
		MaxLength: 32,
		Charset:   "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-",
	})
	const uid = "0b5e4c8e-2f0e-4d7a-9a51-5cf1e8e0d6a1"
	fmt.Println(def.NameFor("prod", "payments", "checkout-api", uid))
	// The same Service in another cluster: another hash.
	fmt.Println(def.NameFor("staging", "payments", "checkout-api", uid))
	// Truncated to 32 characters; '.' is not allowed and becomes '-'.
	fmt.Println(short.NameFor("prod", "payments", "checkout-api.v2", uid))
	_, err := loadbalancer.NewNamer(loadbalancer.NamingConfig{MaxLength: 10})
	fmt.Println(err)
	// Output:
	// k8s-payments-checkout-api-bouf4nbb9mnrp
	// k8s-payments-checkout-api-4il3v0jssa4hc
	// K8s-payments-check-bouf4nbb9mnrp
	// NamingConfig.MaxLength 10: expected at least 17 (prefix "k8s", a separator and a 13-character hash)
}
