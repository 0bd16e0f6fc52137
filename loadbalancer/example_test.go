package loadbalancer_test

import (
	"context"
	"fmt"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/ccmkit/ccmkit/loadbalancer"
)

// ExampleReconciler runs a Reconciler over an in-memory Driver: Ensure
// creates, a second Ensure writes nothing, Update changes backends, Delete
// removes everything.
func ExampleReconciler() {
	ctx := context.Background()
	driver := newMemDriver() // helpers_test.go: stores the model, records the writes
	r, err := loadbalancer.NewReconciler(driver, loadbalancer.Options{})
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
	fmt.Println("ensure:", status.Ingress[0].IP, err, "writes:", driver.takeApplied())

	_, err = r.EnsureLoadBalancer(ctx, "prod", svc, nodes)
	fmt.Println("ensure again:", err, "writes:", driver.takeApplied())

	err = r.UpdateLoadBalancer(ctx, "prod", svc, append(nodes, exampleNode("node-c", "10.0.0.3")))
	fmt.Println("update:", err, "writes:", driver.takeApplied())

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
	def, _ := loadbalancer.NewNamer(loadbalancer.NamerOptions{})
	short, _ := loadbalancer.NewNamer(loadbalancer.NamerOptions{
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
	_, err := loadbalancer.NewNamer(loadbalancer.NamerOptions{MaxLength: 10})
	fmt.Println(err)
	// Output:
	// k8s-payments-checkout-api-bouf4nbb9mnrp
	// k8s-payments-checkout-api-4il3v0jssa4hc
	// K8s-payments-check-bouf4nbb9mnrp
	// loadbalancer.NewNamer: NamerOptions.MaxLength 10: expected 0 (the default, 63) or at least 17 (prefix "k8s", a separator and a 13-character hash)
}
