package loadbalancer_test

import (
	"context"
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/ccmkit/ccmkit/loadbalancer"
)

// ExampleNewCache gives a Reconciler a Cache over a Driver that can list.
// Creating three load balancers costs one List (made by the first
// Service's look-up, whose "none" it answers) and, for each later Service,
// the Find that confirms it has none yet; after that, a node sync (the
// service controller's UpdateLoadBalancer for every Service) reads
// nothing, and one new node is one backend write per Service.
func ExampleNewCache() {
	ctx := context.Background()
	driver := newListingDriver() // cache_test.go: the in-memory Driver of helpers_test.go, with a List
	cache, err := loadbalancer.NewCache(driver, loadbalancer.CacheOptions{TTL: time.Minute})
	if err != nil {
		fmt.Println(err)
		return
	}
	r, err := loadbalancer.NewReconciler(cache, loadbalancer.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	var services []*v1.Service
	for _, name := range []string{"web", "api", "admin"} {
		services = append(services, &v1.Service{
			ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: name, UID: types.UID("uid-" + name)},
			Spec: v1.ServiceSpec{
				Type:  v1.ServiceTypeLoadBalancer,
				Ports: []v1.ServicePort{{Name: "http", Protocol: v1.ProtocolTCP, Port: 80, NodePort: 30080}},
			},
		})
	}
	nodes := []*v1.Node{exampleNode("node-a", "10.0.0.1"), exampleNode("node-b", "10.0.0.2")}
	var last lbCalls
	calls := func() lbCalls { // the driver's calls since the last time
		now := driver.calls()
		d := lbCalls{List: now.List - last.List, Find: now.Find - last.Find, Apply: now.Apply - last.Apply, Delete: now.Delete - last.Delete}
		last = now
		return d
	}

	for _, svc := range services {
		if _, err := r.EnsureLoadBalancer(ctx, "prod", svc, nodes); err != nil {
			fmt.Println(err)
		}
	}
	fmt.Printf("create: %+v\n", calls())
	for _, svc := range services {
		if err := r.UpdateLoadBalancer(ctx, "prod", svc, nodes); err != nil {
			fmt.Println(err)
		}
	}
	fmt.Printf("node sync, nothing changed: %+v\n", calls())
	nodes = append(nodes, exampleNode("node-c", "10.0.0.3"))
	for _, svc := range services {
		if err := r.UpdateLoadBalancer(ctx, "prod", svc, nodes); err != nil {
			fmt.Println(err)
		}
	}
	fmt.Printf("node sync, a node added: %+v\n", calls())
	// Output:
	// create: {List:1 Find:2 Apply:3 Delete:0}
	// node sync, nothing changed: {List:0 Find:0 Apply:0 Delete:0}
	// node sync, a node added: {List:0 Find:0 Apply:3 Delete:0}
}
