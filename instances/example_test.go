package instances_test

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/ccmkit/ccmkit/instances"
	"github.com/ccmkit/ccmkit/provider"
)

// exampleCloud is the whole cloud-specific part of a provider's
// InstancesV2: a ListDriver over a map. A real driver calls its cloud's API
// here and maps the API's "no such instance" answer to instances.ErrNotFound.
type exampleCloud struct {
	mu    sync.Mutex
	vms   map[string]instances.Instance
	lists int
}

func (c *exampleCloud) GetByID(_ context.Context, id provider.ProviderID) (instances.Instance, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	vm, ok := c.vms[id.ID]
	if !ok {
		return instances.Instance{}, instances.ErrNotFound
	}
	return vm, nil
}

func (c *exampleCloud) GetByName(_ context.Context, name string) (instances.Instance, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, vm := range c.vms {
		if vm.Name == name {
			return vm, nil
		}
	}
	return instances.Instance{}, instances.ErrNotFound
}

func (c *exampleCloud) List(context.Context) ([]instances.Instance, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.lists++
	return slices.Collect(maps.Values(c.vms)), nil
}

func newExampleCloud() *exampleCloud {
	return &exampleCloud{vms: map[string]instances.Instance{
		"vm-1": {
			ID: "vm-1", Path: []string{"fra1"}, Name: "worker-1", Type: "c2.medium", Zone: "fra1-a", Region: "fra1",
			Addresses: []v1.NodeAddress{
				{Type: v1.NodeExternalIP, Address: "198.51.100.10"},
				{Type: v1.NodeInternalIP, Address: "fd12:3456::a"},
				{Type: v1.NodeInternalIP, Address: "10.1.0.10"},
			},
			Labels: map[string]string{"example.com/rack": "r12"},
		},
		"vm-2": {
			ID: "vm-2", Name: "worker-2", State: instances.StateStopped,
			Addresses: []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: "10.1.0.11"}},
		},
	}}
}

func Example() {
	cloud := newExampleCloud()
	v2, err := instances.NewAdapter(cloud, provider.Codec{Scheme: "example"}, instances.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	ctx := context.Background()

	// A new Node has no spec.providerID yet: it is looked up by name.
	newNode := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "worker-1"}}
	m, err := v2.InstanceMetadata(ctx, newNode)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("provider ID:", m.ProviderID)
	fmt.Println("type, zone, region:", m.InstanceType, m.Zone, m.Region)
	fmt.Println("addresses:", m.NodeAddresses)
	fmt.Println("labels:", m.AdditionalLabels)

	// Running, stopped and deleted instances, by provider ID.
	for _, pid := range []string{"example://fra1/vm-1", "example://vm-2", "example://vm-3"} {
		node := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n"}, Spec: v1.NodeSpec{ProviderID: pid}}
		exists, err := v2.InstanceExists(ctx, node)
		shutdown, _ := v2.InstanceShutdown(ctx, node)
		fmt.Printf("%s: exists=%v err=%v shutdown=%v\n", pid, exists, err, shutdown)
	}

	// A Node of another provider is an error, never "gone".
	_, err = v2.InstanceExists(ctx, &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "w9"}, Spec: v1.NodeSpec{ProviderID: "other://vm-1"}})
	fmt.Println(err)
	// Output:
	// provider ID: example://fra1/vm-1
	// type, zone, region: c2.medium fra1-a fra1
	// addresses: [{InternalIP 10.1.0.10} {InternalIP fd12:3456::a} {ExternalIP 198.51.100.10}]
	// labels: map[example.com/rack:r12]
	// example://fra1/vm-1: exists=true err=<nil> shutdown=false
	// example://vm-2: exists=true err=<nil> shutdown=true
	// example://vm-3: exists=false err=<nil> shutdown=false
	// node "w9": spec.providerID: provider ID "other://vm-1": scheme "other": expected "example" (the node belongs to another provider)
}

func ExampleNewCache() {
	cloud := newExampleCloud()
	cache, err := instances.NewCache(cloud, instances.CacheOptions{TTL: time.Minute})
	if err != nil {
		fmt.Println(err)
		return
	}
	v2, err := instances.NewAdapter(cache, provider.Codec{Scheme: "example"}, instances.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	ctx := context.Background()
	for range 100 { // the node controller asks about every Node every sync period
		for _, name := range []string{"worker-1", "worker-2"} {
			if _, err := v2.InstanceMetadata(ctx, &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}); err != nil {
				fmt.Println(err)
				return
			}
		}
	}
	fmt.Println("List calls for 200 look-ups:", cloud.lists)

	// An instance missing from the list is looked up directly before it is
	// reported gone.
	exists, err := v2.InstanceExists(ctx, &v1.Node{Spec: v1.NodeSpec{ProviderID: "example://vm-9"}})
	fmt.Println("vm-9 exists:", exists, err)
	// Output:
	// List calls for 200 look-ups: 1
	// vm-9 exists: false <nil>
}

func ExampleBuildAddresses() {
	// A cloud returning addresses in a different order, spelling and with
	// duplicates on every call still yields one stable list.
	addrs, err := instances.BuildAddresses([]v1.NodeAddress{
		{Type: v1.NodeHostName, Address: "Worker-1.example.com."},
		{Type: v1.NodeExternalIP, Address: "2001:DB8:0::7"},
		{Type: v1.NodeInternalIP, Address: "fd00::1"},
		{Type: v1.NodeInternalIP, Address: "10.0.0.12"},
		{Type: v1.NodeInternalIP, Address: "10.0.0.4"},
		{Type: v1.NodeInternalIP, Address: "10.0.0.4"},
	}, instances.AddressPolicy{})
	fmt.Println(addrs, err)

	_, err = instances.BuildAddresses([]v1.NodeAddress{{Type: v1.NodeExternalIP, Address: "198.51.100.7"}}, instances.AddressPolicy{})
	fmt.Println(err)

	// An IPv4 address spelled as IPv6 is an error, not rewritten.
	_, err = instances.BuildAddresses([]v1.NodeAddress{{Type: v1.NodeInternalIP, Address: "::ffff:10.0.0.4"}}, instances.AddressPolicy{})
	fmt.Println(err)
	// Output:
	// [{InternalIP 10.0.0.4} {InternalIP 10.0.0.12} {InternalIP fd00::1} {ExternalIP 2001:db8::7} {Hostname worker-1.example.com}] <nil>
	// no InternalIP node address: addresses [{ExternalIP 198.51.100.7}]: expected at least one of type InternalIP
	// invalid node address: addresses[0] (type "InternalIP", address "::ffff:10.0.0.4"): expected an IPv4 address in dotted form (10.0.0.4), not IPv4-mapped IPv6, a spelling Kubernetes' strict IP validation refuses
}

func ExampleBuildAddresses_providedNodeIP() {
	// The kubelet ran with --node-ip=10.0.0.12, so the Node carries
	// alpha.kubernetes.io/provided-node-ip=10.0.0.12. The result is exactly
	// the list the node controller writes: that IP first and the only
	// InternalIP.
	addrs, err := instances.BuildAddresses([]v1.NodeAddress{
		{Type: v1.NodeInternalIP, Address: "10.0.0.4"},
		{Type: v1.NodeInternalIP, Address: "10.0.0.12"},
		{Type: v1.NodeExternalIP, Address: "198.51.100.7"},
	}, instances.AddressPolicy{ProvidedNodeIP: "10.0.0.12"})
	fmt.Println(addrs, err)

	_, err = instances.BuildAddresses([]v1.NodeAddress{{Type: v1.NodeInternalIP, Address: "10.0.0.4"}},
		instances.AddressPolicy{ProvidedNodeIP: "10.0.0.99"})
	fmt.Println(err)
	// Output:
	// [{InternalIP 10.0.0.12} {ExternalIP 198.51.100.7}] <nil>
	// provided node IP does not match the node addresses: annotation alpha.kubernetes.io/provided-node-ip="10.0.0.99": expected an IP address, or a dual-stack pair "a,b", each among the node's addresses: failed to get node address from cloud provider that matches ip: 10.0.0.99
}
