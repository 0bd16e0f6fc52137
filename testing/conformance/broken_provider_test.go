package conformance_test

import (
	"context"
	"fmt"

	v1 "k8s.io/api/core/v1"
	cloudprovider "k8s.io/cloud-provider"
)

// brokenProvider returns the broken providers of the provider,
// every-capability and controller rules: PROVIDER-*, SENTINELS-UNWRAPPED,
// ARGS-NOT-MUTATED, CTX-CANCELLED and CTRL-*.
func brokenProvider() []brokenCase {
	type bc = brokenCase
	return []bc{
		{
			name: "accessor-nil-true", want: "PROVIDER-ACCESSORS",
			reason: "Clusters() returns (nil, true): the controllers call methods on the value",
			b:      wrapped{clusters: func() (cloudprovider.Clusters, bool) { return nil, true }},
		},
		{
			name: "accessor-typed-nil", want: "PROVIDER-ACCESSORS",
			reason: "Instances() returns a typed nil with true, the classic `return c.legacy, true`",
			b:      wrapped{instances: func() (cloudprovider.Instances, bool) { var l *legacyInstances; return l, true }},
		},
		{
			name: "untagged", want: "PROVIDER-CLUSTER-ID",
			reason: "HasClusterID() is false: the CCM exits without --allow-untagged-cloud",
			b:      wrapped{untagged: true},
		},
		{
			name: "mutates-service", want: "ARGS-NOT-MUTATED",
			reason: "Ensure defaults an annotation in the Service it was given, which lives in the informer cache",
			b: wrapped{lb: func(b wrappedLB) cloudprovider.LoadBalancer {
				b.ensure = func(next cloudprovider.LoadBalancer, ctx context.Context, c string, s *v1.Service, n []*v1.Node) (*v1.LoadBalancerStatus, error) {
					if s.Annotations == nil {
						s.Annotations = map[string]string{}
					}
					s.Annotations["example.com/lb-flavor"] = "standard"
					return next.EnsureLoadBalancer(ctx, c, s, n)
				}
				return b
			}},
		},
		{
			name: "mutates-nodes", want: "ARGS-NOT-MUTATED",
			reason: "Update stamps a label on every Node it was given, which lives in the informer cache: LB-CONCURRENT's goroutines each own their copies, so this fails ARGS-NOT-MUTATED instead of racing",
			b: wrapped{lb: func(b wrappedLB) cloudprovider.LoadBalancer {
				b.update = func(next cloudprovider.LoadBalancer, ctx context.Context, c string, s *v1.Service, n []*v1.Node) error {
					for _, node := range n {
						if node.Labels == nil {
							node.Labels = map[string]string{}
						}
						node.Labels["example.com/lb-backend"] = "true"
					}
					return next.UpdateLoadBalancer(ctx, c, s, n)
				}
				return b
			}},
		},
		{
			name: "exists-false-when-cancelled", want: "CTX-CANCELLED",
			reason: "a cancelled context is taken for \"instance gone\"",
			b: wrapped{inst: func(b wrappedInst) cloudprovider.InstancesV2 {
				b.exists = func(next cloudprovider.InstancesV2, ctx context.Context, n *v1.Node) (bool, error) {
					if ctx.Err() != nil {
						return false, nil
					}
					return next.InstanceExists(ctx, n)
				}
				return b
			}},
		},
		{
			name: "legacy-instance-id-wraps-not-found", want: "SENTINELS-UNWRAPPED",
			reason: "legacy Instances.InstanceID reports a missing node as fmt.Errorf(\"...: %w\", cloudprovider.InstanceNotFound): cloud.go GetInstanceProviderID compares it with ==",
			b:      wrapped{instances: func() (cloudprovider.Instances, bool) { return wrappingInstances{}, true }},
		},
		{
			name: "lb-delete-wraps-implemented-elsewhere", want: "SENTINELS-UNWRAPPED",
			reason: "EnsureLoadBalancerDeleted reports fmt.Errorf(\"...: %w\", cloudprovider.ImplementedElsewhere): controllers/service syncLoadBalancerIfNeeded compares it with ==",
			b: wrapped{lb: func(b wrappedLB) cloudprovider.LoadBalancer {
				b.del = func(next cloudprovider.LoadBalancer, ctx context.Context, c string, s *v1.Service) error {
					if s.Name == "sentinels" {
						return fmt.Errorf("load balancer of %s/%s: %w", s.Namespace, s.Name, cloudprovider.ImplementedElsewhere)
					}
					return next.EnsureLoadBalancerDeleted(ctx, c, s)
				}
				return b
			}},
		},
	}
}

// clausesProvider returns the clauses of the statements of the rules of this
// file, each quoted from its statement (see TestBrokenCoverage).
func clausesProvider() map[string][]string {
	return map[string][]string{}
}
