package conformance_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	cloudprovider "k8s.io/cloud-provider"
	"k8s.io/cloud-provider/api"

	"github.com/ccmkit/ccmkit/testing/conformance"
)

// brokenLB returns the broken providers of the load-balancer lifecycle rules:
// LB-ENSURE-STATUS to LB-RECREATE, LB-BACKENDS, LB-PORTS,
// LB-CLUSTER-ISOLATION, LB-CONCURRENT and LB-OUTAGE.
func brokenLB() []brokenCase {
	type bc = brokenCase
	return []bc{
		{
			name: "ensure-never-ready-without-backends", want: "LB-ENSURE-STATUS",
			also:   []string{"CTRL-SERVICE-LB"}, // the same Ensure, through the service controller
			reason: "a load balancer without backends never gets an address: EnsureLoadBalancer answers an api.RetryError forever",
			// Only the rules concerned run: each waits Timeout for an address.
			claims:  func(c *conformance.Claims) { c.InstancesV2, c.Routes = false, false },
			timeout: 2 * time.Second,
			b: wrapped{lb: func(b wrappedLB) cloudprovider.LoadBalancer {
				b.ensure = func(next cloudprovider.LoadBalancer, ctx context.Context, c string, s *v1.Service, n []*v1.Node) (*v1.LoadBalancerStatus, error) {
					st, err := next.EnsureLoadBalancer(ctx, c, s, n)
					if err != nil || len(n) > 0 {
						return st, err
					}
					return nil, fmt.Errorf("load balancer of %s/%s: %w", s.Namespace, s.Name, api.NewRetryError("no address until a backend is attached", 100*time.Millisecond))
				}
				return b
			}},
		},
		{
			name: "ensure-new-ip", want: "LB-IDEMPOTENT",
			reason: "every Ensure after the first reports a new IP, as if it allocated an address each time",
			b: wrapped{lb: func(b wrappedLB) cloudprovider.LoadBalancer {
				var calls counter
				b.ensure = func(next cloudprovider.LoadBalancer, ctx context.Context, c string, s *v1.Service, n []*v1.Node) (*v1.LoadBalancerStatus, error) {
					st, err := next.EnsureLoadBalancer(ctx, c, s, n)
					if k := calls.add(lbKey(c, s)); err == nil && k > 1 && len(st.Ingress) > 0 {
						st = st.DeepCopy()
						st.Ingress[0].IP = fmt.Sprintf("198.19.255.%d", k%250+1)
					}
					return st, err
				}
				return b
			}},
		},
		{
			name: "ensure-rewrites-backends", want: "LB-CONVERGED",
			reason: "Ensure removes and re-adds a backend on every call: the right end state, but writes when converged",
			b: wrapped{lb: func(b wrappedLB) cloudprovider.LoadBalancer {
				b.ensure = func(next cloudprovider.LoadBalancer, ctx context.Context, c string, s *v1.Service, n []*v1.Node) (*v1.LoadBalancerStatus, error) {
					if len(n) > 0 {
						_ = next.UpdateLoadBalancer(ctx, c, s, n[:len(n)-1])
					}
					return next.EnsureLoadBalancer(ctx, c, s, n)
				}
				return b
			}},
		},
		{
			name: "get-not-exists-without-backends", want: "LB-GET-EXISTS",
			reason: "Get finds the load balancer through its backends, so one without backends is reported missing",
			b: wrapped{lb: func(b wrappedLB) cloudprovider.LoadBalancer {
				var backends counter
				b.ensure = func(next cloudprovider.LoadBalancer, ctx context.Context, c string, s *v1.Service, n []*v1.Node) (*v1.LoadBalancerStatus, error) {
					backends.set(lbKey(c, s), len(n))
					return next.EnsureLoadBalancer(ctx, c, s, n)
				}
				b.update = func(next cloudprovider.LoadBalancer, ctx context.Context, c string, s *v1.Service, n []*v1.Node) error {
					backends.set(lbKey(c, s), len(n))
					return next.UpdateLoadBalancer(ctx, c, s, n)
				}
				b.get = func(next cloudprovider.LoadBalancer, ctx context.Context, c string, s *v1.Service) (*v1.LoadBalancerStatus, bool, error) {
					if n, ok := backends.get(lbKey(c, s)); ok && n == 0 {
						return nil, false, nil
					}
					return next.GetLoadBalancer(ctx, c, s)
				}
				return b
			}},
		},
		{
			name: "delete-unknown-errors", want: "LB-DELETE-UNKNOWN",
			reason: "deleting a load balancer that is not there is an error",
			b: wrapped{lb: func(b wrappedLB) cloudprovider.LoadBalancer {
				b.del = func(next cloudprovider.LoadBalancer, ctx context.Context, c string, s *v1.Service) error {
					if _, ok, err := next.GetLoadBalancer(ctx, c, s); err == nil && !ok {
						return fmt.Errorf("load balancer of %s/%s not found", s.Namespace, s.Name)
					}
					return next.EnsureLoadBalancerDeleted(ctx, c, s)
				}
				return b
			}},
		},
		{
			name: "delete-needs-lb-type", want: "LB-DELETE-STALE",
			reason: "Delete does nothing for a Service that is no longer type LoadBalancer",
			b: wrapped{lb: func(b wrappedLB) cloudprovider.LoadBalancer {
				b.del = func(next cloudprovider.LoadBalancer, ctx context.Context, c string, s *v1.Service) error {
					if s.Spec.Type != v1.ServiceTypeLoadBalancer {
						return nil
					}
					return next.EnsureLoadBalancerDeleted(ctx, c, s)
				}
				return b
			}},
		},
		{
			name: "cross-cluster-hijack", want: "LB-CLUSTER-ISOLATION", sharesLBs: true,
			reason: "load balancers are identified by namespace/name alone, ignoring the cluster (and so the Service UID)",
			b: wrapped{lb: func(b wrappedLB) cloudprovider.LoadBalancer {
				var mu sync.Mutex
				uids := map[string]types.UID{}
				// one maps every cluster's Service ns/name to the first one seen.
				one := func(s *v1.Service) *v1.Service {
					mu.Lock()
					defer mu.Unlock()
					k := s.Namespace + "/" + s.Name
					if _, ok := uids[k]; !ok {
						uids[k] = s.UID
					}
					s = s.DeepCopy()
					s.UID = uids[k]
					return s
				}
				const c0 = "conformance"
				b.get = func(next cloudprovider.LoadBalancer, ctx context.Context, _ string, s *v1.Service) (*v1.LoadBalancerStatus, bool, error) {
					return next.GetLoadBalancer(ctx, c0, one(s))
				}
				b.ensure = func(next cloudprovider.LoadBalancer, ctx context.Context, _ string, s *v1.Service, n []*v1.Node) (*v1.LoadBalancerStatus, error) {
					return next.EnsureLoadBalancer(ctx, c0, one(s), n)
				}
				b.update = func(next cloudprovider.LoadBalancer, ctx context.Context, _ string, s *v1.Service, n []*v1.Node) error {
					return next.UpdateLoadBalancer(ctx, c0, one(s), n)
				}
				b.del = func(next cloudprovider.LoadBalancer, ctx context.Context, _ string, s *v1.Service) error {
					return next.EnsureLoadBalancerDeleted(ctx, c0, one(s))
				}
				return b
			}},
		},
		{
			name: "drops-notready-nodes", want: "LB-BACKENDS",
			reason: "NotReady nodes are filtered out, which the service controller deliberately does not do",
			b: wrapped{lb: func(b wrappedLB) cloudprovider.LoadBalancer {
				ready := func(n []*v1.Node) []*v1.Node { return slices.DeleteFunc(slices.Clone(n), readyFalse) }
				b.ensure = func(next cloudprovider.LoadBalancer, ctx context.Context, c string, s *v1.Service, n []*v1.Node) (*v1.LoadBalancerStatus, error) {
					return next.EnsureLoadBalancer(ctx, c, s, ready(n))
				}
				b.update = func(next cloudprovider.LoadBalancer, ctx context.Context, c string, s *v1.Service, n []*v1.Node) error {
					return next.UpdateLoadBalancer(ctx, c, s, ready(n))
				}
				return b
			}},
		},
		{
			name: "get-not-exists-on-error", want: "LB-OUTAGE",
			reason: "any cloud error from the look-up is taken for \"not found\"",
			b: wrapped{lb: func(b wrappedLB) cloudprovider.LoadBalancer {
				b.get = func(next cloudprovider.LoadBalancer, ctx context.Context, c string, s *v1.Service) (*v1.LoadBalancerStatus, bool, error) {
					st, ok, err := next.GetLoadBalancer(ctx, c, s)
					if err != nil && ctx.Err() == nil {
						return nil, false, nil
					}
					return st, ok, err
				}
				return b
			}},
		},
		{
			name: "lb-keyed-by-uid-across-clusters", want: "LB-CLUSTER-ISOLATION",
			reason: "with Target.OtherCluster: the other cluster's provider finds load balancers by cluster name and Service UID, both equal, not by its own cluster ID",
			target: twoClusters(true, false),
		},
	}
}

// clausesLB returns the clauses of the statements of the rules of this
// file, each quoted from its statement (see TestBrokenCoverage).
func clausesLB() map[string][]string {
	return map[string][]string{}
}
