package loadbalancer_test

// This file is a whole, self-contained example of what a provider team
// writes: a loadbalancer.Driver, here over an in-memory "cloud" so that it
// runs anywhere. Copy it and replace each map operation with the call to
// your cloud's API; the shape of each method, and what it must and must not
// do, stays the same.
//
// The contract is the doc of loadbalancer.Driver (driver.go). In short:
//
//   - Find(ctx, q) returns every load balancer matching q, in any order;
//     exactly one field of q (ID, Tags or Name) is set. None is an empty
//     slice, never an error (and never loadbalancer.ErrNotFound: that is
//     the Reconciler's error, not the Driver's). Each result carries ID,
//     Name, Tags (all the tags the cloud holds), Spec as configured in the
//     cloud (each backend with at least the fields of
//     Capabilities.BackendKey), and Ingress, empty while the cloud has not
//     assigned an address yet. A load balancer made of several cloud
//     objects is reported while any of them remains.
//   - Apply(ctx, a) performs one write, a.Kind, and returns the load
//     balancer as it is afterwards. ActionCreate creates a.Create (Name,
//     Tags, Spec) and returns it with the ID the cloud assigned; every other
//     kind targets a.LoadBalancerID and changes only what it names (see the
//     ActionKind constants, and loadbalancer.Apply for the reference
//     semantics on the model).
//   - Delete(ctx, lb) deletes lb and every cloud object of it, and returns
//     nil when nothing is left, including when it was already gone: it is
//     called again after any error.
//
// Around the three methods:
//
//   - Concurrency: the Reconciler serializes the calls for one Service, but
//     calls for different Services run at once, so the Driver must be safe
//     for concurrent use (here, one mutex over the cloud's state).
//   - Ownership of memory: a Driver never keeps or modifies what it is given
//     (the Action, its Create, the *LoadBalancer passed to Delete), and
//     every *LoadBalancer it returns is the caller's (a fresh copy, which
//     the Driver does not touch afterwards).
//   - Throttling and provisioning: to say "not now, retry after D" (the
//     cloud answered 429 with a Retry-After, or a load balancer is still
//     being provisioned), return an error wrapping
//     api.NewRetryError(msg, D) from k8s.io/cloud-provider/api, from any
//     method. The Reconciler hands it to the service controller, which
//     requeues the Service.
//   - Errors need not name the action or the load balancer: the Reconciler
//     wraps each with both. Name what only the Driver knows: the cloud's
//     request, status and message.

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/ccmkit/ccmkit/loadbalancer"
)

// inMemoryDriver is a loadbalancer.Driver whose cloud is a map. The cloud
// assigns each new load balancer its ID ("lb-1", "lb-2", ...) and an
// address from 203.0.113.0/24 (TEST-NET-3), at once: a cloud that
// provisions asynchronously would report the load balancer with no
// Ingress until the address is ready.
//
// It keeps every backend whole (Node name, provider ID and addresses), so
// it is used with the default Capabilities.BackendKey,
// loadbalancer.BackendKeyNodeName.
type inMemoryDriver struct {
	mu      sync.Mutex                            // guards every field below
	lbs     map[string]*loadbalancer.LoadBalancer // the cloud, by ID; the Driver's own copies
	lastID  int                                   // the last ID number the cloud assigned
	applies int                                   // Apply calls: the writes, for the example's output
}

var _ loadbalancer.Driver = (*inMemoryDriver)(nil)

func newInMemoryDriver() *inMemoryDriver {
	return &inMemoryDriver{lbs: map[string]*loadbalancer.LoadBalancer{}}
}

// Find returns a copy of every load balancer matching q, or an empty slice
// when none does. The Reconciler asks by the ownership tags (q.Tags), by a
// stored ID (q.ID, with Options.IDAnnotation) and by name (q.Name); a real
// cloud's API filters by each, and the Driver translates what it returns
// into the model.
func (d *inMemoryDriver) Find(_ context.Context, q loadbalancer.Query) ([]*loadbalancer.LoadBalancer, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := []*loadbalancer.LoadBalancer{}
	for _, lb := range d.lbs {
		if matchesQuery(lb, q) {
			out = append(out, lb.Clone()) // copy out: the caller keeps it
		}
	}
	return out, nil
}

// matchesQuery reports whether lb is selected by q, whose one set field
// decides.
func matchesQuery(lb *loadbalancer.LoadBalancer, q loadbalancer.Query) bool {
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

// Apply performs one action and returns a copy of the load balancer as it
// is afterwards.
//
// Here loadbalancer.Apply computes the new state on the model. A real
// Driver switches on a.Kind and makes the matching cloud call (for
// ActionAddBackends, register a.Backends as targets; for
// ActionUpdateHealthCheck, set *a.HealthCheck; ...), changing only what
// the action names, then reads the load balancer back as Find would
// report it.
func (d *inMemoryDriver) Apply(_ context.Context, a loadbalancer.Action) (*loadbalancer.LoadBalancer, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.applies++
	if a.Kind == loadbalancer.ActionCreate {
		lb, err := loadbalancer.Apply(nil, a) // a copy of a.Create: never keep what you are given
		if err != nil {
			return nil, err
		}
		// The cloud, not the Reconciler, names its objects: the ID and
		// the address are the cloud's.
		d.lastID++
		lb.ID = fmt.Sprintf("lb-%d", d.lastID)
		lb.Ingress = []loadbalancer.Ingress{{IP: fmt.Sprintf("203.0.113.%d", d.lastID), IPMode: v1.LoadBalancerIPModeVIP}}
		d.lbs[lb.ID] = lb
		return lb.Clone(), nil
	}
	current, ok := d.lbs[a.LoadBalancerID]
	if !ok {
		// The Reconciler adds the action and the load balancer's name.
		return nil, fmt.Errorf("memcloud: 404 no load balancer with ID %q", a.LoadBalancerID)
	}
	next, err := loadbalancer.Apply(current, a) // reads current, returns a new value
	if err != nil {
		return nil, err
	}
	d.lbs[next.ID] = next
	return next.Clone(), nil
}

// Delete deletes lb, by its ID, and returns nil when it is gone, including
// when it already was: a real Driver treats its cloud's "404 not found" as
// success, deletes every cloud object of the load balancer (listeners,
// target groups, firewall rules, ...) and returns an error while any
// remains, so that the Reconciler calls it again.
func (d *inMemoryDriver) Delete(_ context.Context, lb *loadbalancer.LoadBalancer) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	delete(d.lbs, lb.ID)
	return nil
}

// applyCount returns the number of Apply calls so far.
func (d *inMemoryDriver) applyCount() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.applies
}

// state describes the cloud's load balancers, by ID: name, listeners and
// backends.
func (d *inMemoryDriver) state() string {
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(d.lbs) == 0 {
		return "no load balancers"
	}
	var out []string
	for _, id := range slices.Sorted(maps.Keys(d.lbs)) {
		lb := d.lbs[id]
		var listeners, backends []string
		for _, l := range lb.Spec.Listeners {
			listeners = append(listeners, fmt.Sprintf("%s/%d->%d", l.Protocol, l.Port, l.NodePort))
		}
		for _, b := range lb.Spec.Backends {
			backends = append(backends, b.NodeName+"="+b.IPv4.String())
		}
		out = append(out, fmt.Sprintf("%s %s listeners %v backends %v", lb.ID, lb.Name, listeners, backends))
	}
	return strings.Join(out, "; ")
}

// ExampleDriver writes a complete Driver (inMemoryDriver, above) and runs a
// Reconciler over it: the first EnsureLoadBalancer creates the load
// balancer with one Apply, the second finds it converged and writes
// nothing, and EnsureLoadBalancerDeleted removes it.
func ExampleDriver() {
	ctx := context.Background()
	driver := newInMemoryDriver()
	r, err := loadbalancer.NewReconciler(driver, loadbalancer.Options{
		// The cluster identity in the ownership tags; without it, the
		// clusterName argument of each call (--cluster-name).
		ClusterID: "prod",
		// What this cloud's load balancers support: TCP, single-stack,
		// backends kept whole (the zero BackendKey, BackendKeyNodeName).
		Capabilities: loadbalancer.Capabilities{BackendKey: loadbalancer.BackendKeyNodeName},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	svc := &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web", UID: "0d7c2a8e-5b1f-4c3e-9a6d-2f8b4e1c7a90"},
		Spec: v1.ServiceSpec{
			Type:  v1.ServiceTypeLoadBalancer,
			Ports: []v1.ServicePort{{Name: "http", Protocol: v1.ProtocolTCP, Port: 80, NodePort: 30080}},
		},
	}
	var nodes []*v1.Node
	for i, name := range []string{"node-a", "node-b"} {
		nodes = append(nodes, &v1.Node{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec:       v1.NodeSpec{ProviderID: "memcloud://" + name},
			Status:     v1.NodeStatus{Addresses: []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: fmt.Sprintf("10.0.0.%d", i+1)}}},
		})
	}

	status, err := r.EnsureLoadBalancer(ctx, "kubernetes", svc, nodes)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("ensure:", status.Ingress[0].IP, "applies:", driver.applyCount())
	fmt.Println("state:", driver.state())

	status, err = r.EnsureLoadBalancer(ctx, "kubernetes", svc, nodes)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("ensure again:", status.Ingress[0].IP, "applies:", driver.applyCount())

	err = r.EnsureLoadBalancerDeleted(ctx, "kubernetes", svc)
	fmt.Println("delete:", err, "applies:", driver.applyCount())
	fmt.Println("state:", driver.state())
	// Output:
	// ensure: 203.0.113.1 applies: 1
	// state: lb-1 k8s-shop-web-4siejvcpgkn6c listeners [TCP/80->30080] backends [node-a=10.0.0.1 node-b=10.0.0.2]
	// ensure again: 203.0.113.1 applies: 1
	// delete: <nil> applies: 1
	// state: no load balancers
}
