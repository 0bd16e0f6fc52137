package conformance_test

import (
	"context"
	"sync"

	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/informers"
	cloudprovider "k8s.io/cloud-provider"
)

// wrapped wraps a provider (ccmkit's fake) and replaces parts of it: the
// broken providers break one contract each this way, and the realistic
// cloud adds throttling and caches.
type wrapped struct {
	cloudprovider.Interface
	lb        func(wrappedLB) cloudprovider.LoadBalancer
	inst      func(wrappedInst) cloudprovider.InstancesV2
	routes    func(wrappedRoutes) cloudprovider.Routes
	zones     func(cloudprovider.Zones) cloudprovider.Zones
	clusters  func() (cloudprovider.Clusters, bool)
	instances func() (cloudprovider.Instances, bool)
	// name, if set, replaces ProviderName.
	name     func(next string) string
	untagged bool
}

func (b *wrapped) ProviderName() string {
	if b.name != nil {
		return b.name(b.Interface.ProviderName())
	}
	return b.Interface.ProviderName()
}

// Zones: when b.zones is set, it is given the wrapped provider's Zones (nil
// when not offered) and its result is offered when not nil.
func (b *wrapped) Zones() (cloudprovider.Zones, bool) {
	v, ok := b.Interface.Zones()
	if b.zones != nil {
		if !ok {
			v = nil
		}
		z := b.zones(v)
		return z, z != nil
	}
	return v, ok
}

func (b *wrapped) LoadBalancer() (cloudprovider.LoadBalancer, bool) {
	v, ok := b.Interface.LoadBalancer()
	if ok && b.lb != nil {
		return b.lb(wrappedLB{LoadBalancer: v}), true
	}
	return v, ok
}

func (b *wrapped) InstancesV2() (cloudprovider.InstancesV2, bool) {
	v, ok := b.Interface.InstancesV2()
	if ok && b.inst != nil {
		return b.inst(wrappedInst{InstancesV2: v}), true
	}
	return v, ok
}

func (b *wrapped) Routes() (cloudprovider.Routes, bool) {
	v, ok := b.Interface.Routes()
	if ok && b.routes != nil {
		return b.routes(wrappedRoutes{Routes: v}), true
	}
	return v, ok
}

func (b *wrapped) Clusters() (cloudprovider.Clusters, bool) {
	if b.clusters != nil {
		return b.clusters()
	}
	return b.Interface.Clusters()
}

func (b *wrapped) Instances() (cloudprovider.Instances, bool) {
	if b.instances != nil {
		return b.instances()
	}
	return b.Interface.Instances()
}

func (b *wrapped) HasClusterID() bool { return !b.untagged && b.Interface.HasClusterID() }

func (b *wrapped) SetInformers(f informers.SharedInformerFactory) {
	if iu, ok := b.Interface.(cloudprovider.InformerUser); ok {
		iu.SetInformers(f)
	}
}

// lbWrap breaks the target's LoadBalancer: set replaces methods of each
// LoadBalancer the provider hands out (wrapped.lb), and state it declares
// belongs to that one.
func lbWrap(set func(b *wrappedLB)) wrapped {
	return wrapped{lb: func(b wrappedLB) cloudprovider.LoadBalancer {
		set(&b)
		return b
	}}
}

// instWrap is lbWrap for InstancesV2.
func instWrap(set func(b *wrappedInst)) wrapped {
	return wrapped{inst: func(b wrappedInst) cloudprovider.InstancesV2 {
		set(&b)
		return b
	}}
}

// routesWrap is lbWrap for Routes.
func routesWrap(set func(b *wrappedRoutes)) wrapped {
	return wrapped{routes: func(b wrappedRoutes) cloudprovider.Routes {
		set(&b)
		return b
	}}
}

// wrappedLB replaces the methods whose func is set; next is the correct one.
type wrappedLB struct {
	cloudprovider.LoadBalancer
	get    func(next cloudprovider.LoadBalancer, ctx context.Context, cluster string, svc *v1.Service) (*v1.LoadBalancerStatus, bool, error)
	ensure func(next cloudprovider.LoadBalancer, ctx context.Context, cluster string, svc *v1.Service, nodes []*v1.Node) (*v1.LoadBalancerStatus, error)
	update func(next cloudprovider.LoadBalancer, ctx context.Context, cluster string, svc *v1.Service, nodes []*v1.Node) error
	del    func(next cloudprovider.LoadBalancer, ctx context.Context, cluster string, svc *v1.Service) error
}

func (b wrappedLB) GetLoadBalancer(ctx context.Context, c string, s *v1.Service) (*v1.LoadBalancerStatus, bool, error) {
	if b.get != nil {
		return b.get(b.LoadBalancer, ctx, c, s)
	}
	return b.LoadBalancer.GetLoadBalancer(ctx, c, s)
}

func (b wrappedLB) EnsureLoadBalancer(ctx context.Context, c string, s *v1.Service, n []*v1.Node) (*v1.LoadBalancerStatus, error) {
	if b.ensure != nil {
		return b.ensure(b.LoadBalancer, ctx, c, s, n)
	}
	return b.LoadBalancer.EnsureLoadBalancer(ctx, c, s, n)
}

func (b wrappedLB) UpdateLoadBalancer(ctx context.Context, c string, s *v1.Service, n []*v1.Node) error {
	if b.update != nil {
		return b.update(b.LoadBalancer, ctx, c, s, n)
	}
	return b.LoadBalancer.UpdateLoadBalancer(ctx, c, s, n)
}

func (b wrappedLB) EnsureLoadBalancerDeleted(ctx context.Context, c string, s *v1.Service) error {
	if b.del != nil {
		return b.del(b.LoadBalancer, ctx, c, s)
	}
	return b.LoadBalancer.EnsureLoadBalancerDeleted(ctx, c, s)
}

// wrappedInst replaces the methods whose func is set; next is the correct
// one.
type wrappedInst struct {
	cloudprovider.InstancesV2
	exists   func(next cloudprovider.InstancesV2, ctx context.Context, n *v1.Node) (bool, error)
	shutdown func(next cloudprovider.InstancesV2, ctx context.Context, n *v1.Node) (bool, error)
	metadata func(next cloudprovider.InstancesV2, ctx context.Context, n *v1.Node) (*cloudprovider.InstanceMetadata, error)
}

func (b wrappedInst) InstanceShutdown(ctx context.Context, n *v1.Node) (bool, error) {
	if b.shutdown != nil {
		return b.shutdown(b.InstancesV2, ctx, n)
	}
	return b.InstancesV2.InstanceShutdown(ctx, n)
}

func (b wrappedInst) InstanceExists(ctx context.Context, n *v1.Node) (bool, error) {
	if b.exists != nil {
		return b.exists(b.InstancesV2, ctx, n)
	}
	return b.InstancesV2.InstanceExists(ctx, n)
}

func (b wrappedInst) InstanceMetadata(ctx context.Context, n *v1.Node) (*cloudprovider.InstanceMetadata, error) {
	if b.metadata != nil {
		return b.metadata(b.InstancesV2, ctx, n)
	}
	return b.InstancesV2.InstanceMetadata(ctx, n)
}

// wrappedRoutes replaces the methods whose func is set; next is the
// correct one.
type wrappedRoutes struct {
	cloudprovider.Routes
	list   func(next cloudprovider.Routes, ctx context.Context, cluster string) ([]*cloudprovider.Route, error)
	create func(next cloudprovider.Routes, ctx context.Context, cluster, nameHint string, r *cloudprovider.Route) error
	del    func(next cloudprovider.Routes, ctx context.Context, cluster string, r *cloudprovider.Route) error
}

func (b wrappedRoutes) CreateRoute(ctx context.Context, c, nameHint string, r *cloudprovider.Route) error {
	if b.create != nil {
		return b.create(b.Routes, ctx, c, nameHint, r)
	}
	return b.Routes.CreateRoute(ctx, c, nameHint, r)
}

func (b wrappedRoutes) ListRoutes(ctx context.Context, c string) ([]*cloudprovider.Route, error) {
	if b.list != nil {
		return b.list(b.Routes, ctx, c)
	}
	return b.Routes.ListRoutes(ctx, c)
}

func (b wrappedRoutes) DeleteRoute(ctx context.Context, c string, r *cloudprovider.Route) error {
	if b.del != nil {
		return b.del(b.Routes, ctx, c, r)
	}
	return b.Routes.DeleteRoute(ctx, c, r)
}

// counter counts per key, safely for concurrent use.
type counter struct {
	mu sync.Mutex
	n  map[string]int
}

func (c *counter) set(k string, v int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n == nil {
		c.n = map[string]int{}
	}
	c.n[k] = v
}

func (c *counter) add(k string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n == nil {
		c.n = map[string]int{}
	}
	c.n[k]++
	return c.n[k]
}

func (c *counter) get(k string) (int, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	v, ok := c.n[k]
	return v, ok
}

func lbKey(cluster string, svc *v1.Service) string { return cluster + "/" + string(svc.UID) }
