package main

import (
	"context"
	"net"
	"sync"

	v1 "k8s.io/api/core/v1"
	cloudprovider "k8s.io/cloud-provider"
	upstream "k8s.io/cloud-provider/fake"

	"github.com/ccmkit/ccmkit/fake"
	"github.com/ccmkit/ccmkit/testing/scale"
)

// provider is one provider the bench runs.
type provider struct {
	name   string
	target func() (*scale.Target, error)
}

var providers = []provider{
	{name: "ccmkit fake", target: ccmkitFake},
	{name: "ccmkit fake, shared pools", target: ccmkitSharedPools},
	{name: "upstream fake", target: upstreamFake},
}

func ccmkitFake() (*scale.Target, error) {
	return fakeWith(fake.Config{ClusterID: "scale"})
}

// ccmkitSharedPools is ccmkit's fake with shared backend pools
// (loadBalancers.backendPools: shared): the load balancers of every
// Service reference one backend pool, so a Node change is one pool write
// however many Services there are.
func ccmkitSharedPools() (*scale.Target, error) {
	return fakeWith(fake.Config{ClusterID: "scale", LoadBalancers: fake.LoadBalancerSection{BackendPools: fake.BackendPoolsShared}})
}

// fakeWith is the target of ccmkit's fake built from cfg, as the cluster
// cfg.ClusterID.
func fakeWith(cfg fake.Config) (*scale.Target, error) {
	c, err := fake.New(cfg, fake.Options{})
	if err != nil {
		return nil, err
	}
	return scale.FakeTarget(c, cfg.ClusterID), nil
}

// upstreamFake is k8s.io/cloud-provider/fake as upstream's own controller
// tests configure it: InstancesV2 on, every instance existing, a fixed
// load-balancer address. Its InstanceMetadata reports one address list
// and a provider ID from a map for every node; OverrideInstanceMetadata
// gives each Node its own provider ID, so the cloud node controller
// initializes it, without a data race on that map.
func upstreamFake() (*scale.Target, error) {
	f := &upstream.Cloud{
		EnableInstancesV2:  true,
		ExistsByProviderID: true,
		ExternalIP:         net.ParseIP("192.0.2.1"),
		RouteMap:           map[string]*upstream.Route{},
		Provider:           "fake",
	}
	var mu sync.Mutex
	addrs := map[string]string{}
	f.OverrideInstanceMetadata = func(_ context.Context, n *v1.Node) (*cloudprovider.InstanceMetadata, error) {
		mu.Lock()
		defer mu.Unlock()
		return &cloudprovider.InstanceMetadata{ProviderID: "fake://" + n.Name,
			NodeAddresses: []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: addrs[n.Name]}}}, nil
	}
	return &scale.Target{
		Cloud: f,
		AddInstance: func(_ context.Context, name string) (string, error) {
			mu.Lock()
			defer mu.Unlock()
			i := len(addrs) + 1
			addrs[name] = net.IPv4(10, 1, byte(i>>8), byte(i)).String()
			return "", nil
		},
	}, nil
}
