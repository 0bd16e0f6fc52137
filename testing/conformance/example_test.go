package conformance_test

import (
	"context"
	"fmt"

	v1 "k8s.io/api/core/v1"

	"github.com/ccmkit/ccmkit/fake"
	"github.com/ccmkit/ccmkit/testing/conformance"
)

// Check the fake against every rule, with no hooks: the rules that need a
// hook, or more than one node, are skipped, the others pass.
func ExampleCheck() {
	err := conformance.Check(context.Background(), conformance.Config{
		NewTarget: func(context.Context) (*conformance.Target, error) {
			cloud, err := fake.New(fake.Config{ClusterID: "example", InstanceCIDRs: []string{"10.0.0.0/16", "fd00:10::/64"}},
				fake.Options{Instances: []fake.Instance{{Name: "node-a"}}})
			if err != nil {
				return nil, err
			}
			node, err := cloud.NodeFor(cloud.Snapshot().Instances[0].ID)
			if err != nil {
				return nil, err
			}
			// The same cloud, as another cluster: the fake owns load
			// balancers and routes by its cluster ID, whatever
			// --cluster-name the controllers pass.
			other, err := fake.NewPeer(cloud, "example-other", fake.PeerOptions{})
			if err != nil {
				cloud.Shutdown()
				return nil, err
			}
			return &conformance.Target{Cloud: cloud, OtherCluster: other, Nodes: []*v1.Node{node},
				Close: func() { other.Shutdown(); cloud.Shutdown() }}, nil
		},
		Claims: conformance.Claims{
			LoadBalancer: true, InstancesV2: true, Routes: true,
			UDP: true, SCTP: true, MixedProtocols: true, DualStackLoadBalancers: true, IPv6Routes: true, DualStackNodeAddresses: true, NodePortless: true, SourceRanges: true, SourceRangesAnnotation: true,
		},
	})
	fmt.Println("failures:", err)
	// Output: failures: <nil>
}

// List the rules, as Config.Skip and go test -run name them.
func ExampleRules() {
	for _, r := range conformance.Rules()[:3] {
		fmt.Printf("%s: %s\n", r.ID, r.Statement)
	}
	// Output:
	// PROVIDER-ACCESSORS: No accessor returns true without a usable value: never (nil, true) nor a typed nil with true, and every claimed capability is offered.
	// PROVIDER-NAME: ProviderName is a constant bare name, equal to Config.ProviderName when that is set.
	// PROVIDER-CLUSTER-ID: HasClusterID reports true, unless the CCM runs with --allow-untagged-cloud.
}
