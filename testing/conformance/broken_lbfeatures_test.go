package conformance_test

import (
	"context"
	"sync"

	v1 "k8s.io/api/core/v1"
	cloudprovider "k8s.io/cloud-provider"

	"github.com/ccmkit/ccmkit/testing/conformance"
)

// brokenLBFeatures returns the broken providers of the load-balancer feature
// rules: LB-INGRESS-VALID, LB-SOURCE-RANGES(-MALFORMED),
// LB-HEALTH-CHECK(-CLUSTER), LB-UNSUPPORTED-REJECTED, LB-DUAL-STACK-REJECTED
// and LB-CLAIMED-FEATURES.
func brokenLBFeatures() []brokenCase {
	type bc = brokenCase
	return []bc{
		{
			name: "udp-built-as-tcp", want: "LB-UNSUPPORTED-REJECTED",
			reason: "UDP is not supported, and UDP ports are silently built as TCP",
			claims: func(c *conformance.Claims) { c.UDP, c.MixedProtocols = false, false },
			b: wrapped{lb: func(b wrappedLB) cloudprovider.LoadBalancer {
				b.ensure = func(next cloudprovider.LoadBalancer, ctx context.Context, c string, s *v1.Service, n []*v1.Node) (*v1.LoadBalancerStatus, error) {
					s = s.DeepCopy()
					for i := range s.Spec.Ports {
						if s.Spec.Ports[i].Protocol == v1.ProtocolUDP {
							s.Spec.Ports[i].Protocol = v1.ProtocolTCP
						}
					}
					return next.EnsureLoadBalancer(ctx, c, s, n)
				}
				return b
			}},
		},
		{
			name: "hostname-is-ip", want: "LB-INGRESS-VALID",
			reason: "the ingress repeats its IP as hostname, which the API server rejects",
			b: wrapped{lb: func(b wrappedLB) cloudprovider.LoadBalancer {
				ipAsHostname := func(st *v1.LoadBalancerStatus) *v1.LoadBalancerStatus {
					if st == nil {
						return nil
					}
					st = st.DeepCopy()
					for i := range st.Ingress {
						st.Ingress[i].Hostname = st.Ingress[i].IP
					}
					return st
				}
				b.ensure = func(next cloudprovider.LoadBalancer, ctx context.Context, c string, s *v1.Service, n []*v1.Node) (*v1.LoadBalancerStatus, error) {
					st, err := next.EnsureLoadBalancer(ctx, c, s, n)
					return ipAsHostname(st), err
				}
				b.get = func(next cloudprovider.LoadBalancer, ctx context.Context, c string, s *v1.Service) (*v1.LoadBalancerStatus, bool, error) {
					st, ok, err := next.GetLoadBalancer(ctx, c, s)
					return ipAsHostname(st), ok, err
				}
				return b
			}},
		},
		{
			name: "ignores-local-traffic", want: "LB-HEALTH-CHECK",
			reason: "externalTrafficPolicy is ignored: Local Services are health-checked like Cluster ones",
			b: wrapped{lb: func(b wrappedLB) cloudprovider.LoadBalancer {
				b.ensure = func(next cloudprovider.LoadBalancer, ctx context.Context, c string, s *v1.Service, n []*v1.Node) (*v1.LoadBalancerStatus, error) {
					s = s.DeepCopy()
					s.Spec.ExternalTrafficPolicy, s.Spec.HealthCheckNodePort = v1.ServiceExternalTrafficPolicyCluster, 0
					return next.EnsureLoadBalancer(ctx, c, s, n)
				}
				return b
			}},
		},
		{
			name: "stale-health-check-node-port", want: "LB-HEALTH-CHECK",
			reason: "a Service switched from Local to Cluster keeps its health check on the released healthCheckNodePort",
			b: wrapped{lb: func(b wrappedLB) cloudprovider.LoadBalancer {
				var last sync.Map // lbKey → the last healthCheckNodePort
				b.ensure = func(next cloudprovider.LoadBalancer, ctx context.Context, c string, s *v1.Service, n []*v1.Node) (*v1.LoadBalancerStatus, error) {
					if s.Spec.HealthCheckNodePort != 0 {
						last.Store(lbKey(c, s), s.Spec.HealthCheckNodePort)
					} else if p, ok := last.Load(lbKey(c, s)); ok {
						s = s.DeepCopy()
						s.Spec.ExternalTrafficPolicy, s.Spec.HealthCheckNodePort = v1.ServiceExternalTrafficPolicyLocal, p.(int32)
					}
					return next.EnsureLoadBalancer(ctx, c, s, n)
				}
				return b
			}},
		},
		{
			name: "cluster-health-check-on-node-port", want: "LB-HEALTH-CHECK-CLUSTER",
			reason: "with externalTrafficPolicy Cluster, backends are checked on the Service's first node port, not on kube-proxy's health",
			b: wrapped{lb: func(b wrappedLB) cloudprovider.LoadBalancer {
				b.ensure = func(next cloudprovider.LoadBalancer, ctx context.Context, c string, s *v1.Service, n []*v1.Node) (*v1.LoadBalancerStatus, error) {
					if s.Spec.ExternalTrafficPolicy != v1.ServiceExternalTrafficPolicyLocal && len(s.Spec.Ports) > 0 && s.Spec.Ports[0].NodePort != 0 {
						s = s.DeepCopy()
						s.Spec.ExternalTrafficPolicy, s.Spec.HealthCheckNodePort = v1.ServiceExternalTrafficPolicyLocal, s.Spec.Ports[0].NodePort
					}
					return next.EnsureLoadBalancer(ctx, c, s, n)
				}
				return b
			}},
		},
		{
			name: "ignores-source-ranges-annotation", want: "LB-SOURCE-RANGES",
			reason: "only spec.loadBalancerSourceRanges is read; a valid restricting annotation is ignored, the load balancer open to all",
			b:      stripSourceRangesAnnotation(true),
		},
		{
			name: "opens-unclaimed-annotation-to-all", want: "LB-SOURCE-RANGES",
			reason: "SourceRangesAnnotation unclaimed: a valid restricting annotation is ignored instead of rejected, the load balancer open to all",
			claims: func(c *conformance.Claims) { c.SourceRangesAnnotation = false },
			b:      stripSourceRangesAnnotation(true),
		},
		{
			name: "accepts-malformed-source-ranges", want: "LB-SOURCE-RANGES-MALFORMED",
			reason: "a malformed annotation (which the kube-apiserver rejects on create and change) is ignored, the load balancer open to all",
			b:      stripSourceRangesAnnotation(false),
		},
		{
			name: "dual-stack-served-single-stack", want: "LB-DUAL-STACK-REJECTED",
			reason: "DualStackLoadBalancers unclaimed: a RequireDualStack Service gets a load balancer of its first family only, without an error",
			claims: func(c *conformance.Claims) { c.DualStackLoadBalancers = false },
			b: wrapped{lb: func(b wrappedLB) cloudprovider.LoadBalancer {
				b.ensure = func(next cloudprovider.LoadBalancer, ctx context.Context, c string, s *v1.Service, n []*v1.Node) (*v1.LoadBalancerStatus, error) {
					if p := s.Spec.IPFamilyPolicy; p != nil && *p == v1.IPFamilyPolicyRequireDualStack {
						s = s.DeepCopy()
						single := v1.IPFamilyPolicySingleStack
						s.Spec.IPFamilyPolicy = &single
						s.Spec.IPFamilies = s.Spec.IPFamilies[:1]
						s.Spec.ClusterIPs = s.Spec.ClusterIPs[:min(1, len(s.Spec.ClusterIPs))]
					}
					return next.EnsureLoadBalancer(ctx, c, s, n)
				}
				return b
			}},
		},
	}
}

// clausesLBFeatures returns the clauses of the statements of the rules of this
// file, each quoted from its statement (see TestBrokenCoverage).
func clausesLBFeatures() map[string][]string {
	return map[string][]string{}
}
