package provider_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/ccmkit/ccmkit/instances"
	"github.com/ccmkit/ccmkit/loadbalancer"
	"github.com/ccmkit/ccmkit/provider"
)

// acmeInstances is the instances.ListDriver of a cloud API client: here a
// cloud without instances.
type acmeInstances struct{}

func (acmeInstances) GetByID(context.Context, provider.ProviderID) (instances.Instance, error) {
	return instances.Instance{}, instances.ErrNotFound
}

func (acmeInstances) GetByName(context.Context, string) (instances.Instance, error) {
	return instances.Instance{}, instances.ErrNotFound
}

func (acmeInstances) List(context.Context) ([]instances.Instance, error) { return nil, nil }

// acmeLoadBalancers is the loadbalancer.ListDriver of a cloud API client:
// here a cloud without load balancers, that builds none.
type acmeLoadBalancers struct{}

func (acmeLoadBalancers) Find(context.Context, loadbalancer.Query) ([]*loadbalancer.LoadBalancer, error) {
	return nil, nil
}

func (acmeLoadBalancers) Apply(context.Context, loadbalancer.Action) (*loadbalancer.LoadBalancer, error) {
	return nil, errors.New("acme: this example builds no load balancers")
}

func (acmeLoadBalancers) Delete(context.Context, *loadbalancer.LoadBalancer) error { return nil }

func (acmeLoadBalancers) List(context.Context) ([]*loadbalancer.LoadBalancer, error) { return nil, nil }

// acmeCloud composes the provider "acme" from ccmkit's blocks: instances
// and load balancers each answered from a cache, with the TTLs given (0:
// the caches' defaults).
func acmeCloud(instancesTTL, loadBalancersTTL time.Duration) (*provider.Cloud, error) {
	nodeCache, err := instances.NewCache(acmeInstances{}, instances.CacheOptions{TTL: instancesTTL})
	if err != nil {
		return nil, err
	}
	nodes, err := instances.NewAdapter(nodeCache, provider.Codec{Scheme: "acme"}, instances.Options{})
	if err != nil {
		return nil, err
	}
	lbCache, err := loadbalancer.NewCache(acmeLoadBalancers{}, loadbalancer.CacheOptions{TTL: loadBalancersTTL})
	if err != nil {
		return nil, err
	}
	lbs, err := loadbalancer.NewReconciler(lbCache, loadbalancer.Options{})
	if err != nil {
		return nil, err
	}
	return provider.New("acme", provider.Options{ClusterID: "prod-1", InstancesV2: nodes, LoadBalancer: lbs})
}

// A Cloud composed from ccmkit's caches reports how late its answers may
// be about a change made to the cloud behind its back: the longest TTL of
// its caches, forwarded by the adapters over them. The
// cloud-controller-manager never asks; testing/conformance does, and
// waits that much longer for an instance terminated or stopped by a hook
// to show.
func ExampleCloud_MaxStaleness() {
	cloud, err := acmeCloud(time.Minute, 10*time.Second)
	if err != nil {
		fmt.Println(err)
		return
	}
	nodes, _ := cloud.InstancesV2()
	lbs, _ := cloud.LoadBalancer()
	fmt.Println("instances:", nodes.(provider.Staleness).MaxStaleness())
	fmt.Println("load balancers:", lbs.(provider.Staleness).MaxStaleness())
	fmt.Println("cloud:", cloud.MaxStaleness())
	// Output:
	// instances: 1m0s
	// load balancers: 10s
	// cloud: 1m0s
}
