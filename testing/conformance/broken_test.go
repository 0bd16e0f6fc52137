package conformance_test

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	cloudprovider "k8s.io/cloud-provider"
	"k8s.io/cloud-provider/api"
	servicehelpers "k8s.io/cloud-provider/service/helpers"

	"github.com/ccmkit/ccmkit/fake"
	"github.com/ccmkit/ccmkit/instances"
	"github.com/ccmkit/ccmkit/provider"
	"github.com/ccmkit/ccmkit/testing/conformance"
)

// legacyInstances is a legacy Instances implementation; a nil
// *legacyInstances is the typed nil of one broken provider.
type legacyInstances struct{ cloudprovider.Instances }

func readyFalse(n *v1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == v1.NodeReady {
			return c.Status == v1.ConditionFalse
		}
	}
	return false
}

// rewriteMetadata breaks InstanceMetadata by applying f to a copy of every
// successful answer.
func rewriteMetadata(f func(n *v1.Node, md *cloudprovider.InstanceMetadata)) wrapped {
	return wrapped{inst: func(b wrappedInst) cloudprovider.InstancesV2 {
		b.metadata = func(next cloudprovider.InstancesV2, ctx context.Context, n *v1.Node) (*cloudprovider.InstanceMetadata, error) {
			md, err := next.InstanceMetadata(ctx, n)
			if err == nil && md != nil {
				c := *md
				f(n, &c)
				md = &c
			}
			return md, err
		}
		return b
	}}
}

// stripSourceRangesAnnotation ignores the source-range annotation of a
// Service without spec.loadBalancerSourceRanges: a valid one when valid, a
// malformed one otherwise; rejectSpec also rejects spec source ranges, as a
// provider that does not claim SourceRanges must.
func stripSourceRangesAnnotation(valid, rejectSpec bool) wrapped {
	return wrapped{lb: func(b wrappedLB) cloudprovider.LoadBalancer {
		b.ensure = func(next cloudprovider.LoadBalancer, ctx context.Context, c string, s *v1.Service, n []*v1.Node) (*v1.LoadBalancerStatus, error) {
			if rejectSpec && len(s.Spec.LoadBalancerSourceRanges) > 0 {
				return nil, errors.New("spec.loadBalancerSourceRanges is not supported")
			}
			_, err := servicehelpers.GetLoadBalancerSourceRanges(s)
			if _, ok := s.Annotations[v1.AnnotationLoadBalancerSourceRangesKey]; ok && len(s.Spec.LoadBalancerSourceRanges) == 0 && (err == nil) == valid {
				s = s.DeepCopy()
				delete(s.Annotations, v1.AnnotationLoadBalancerSourceRangesKey)
			}
			return next.EnsureLoadBalancer(ctx, c, s, n)
		}
		return b
	}}
}

// wrappingInstances is a legacy Instances whose InstanceID reports every
// node missing with a wrapped cloudprovider.InstanceNotFound; its other
// methods are not called by the suite.
type wrappingInstances struct{ cloudprovider.Instances }

func (wrappingInstances) InstanceID(_ context.Context, name types.NodeName) (string, error) {
	return "", fmt.Errorf("node %s: %w", name, cloudprovider.InstanceNotFound)
}

// brokenCase is one deliberately broken provider: b wraps the target's
// providers and breaks one clause of the rule want.
type brokenCase struct {
	name, reason, want string
	// also lists the rules that unavoidably fail with want: a controller
	// rule that checks the same clause through the controller.
	also []string
	// claims, if set, narrows the fake's claims.
	claims func(*conformance.Claims)
	// timeout, if set, is Config.Timeout: for providers that make rules
	// wait it out, on claims narrowed to the rules concerned.
	timeout time.Duration
	// target, if set, builds the target instead of newFakeTarget.
	target func(context.Context) (*conformance.Target, error)
	// sharesLBs: when the target has an OtherCluster, the broken provider
	// of that cluster works on Target.Cloud's load balancers, so that what
	// it breaks is the isolation between the two clusters.
	sharesLBs bool
	b         wrapped
}

// wrap applies tc.b to tgt's providers: Cloud, and OtherCluster if any,
// each wrapper with state of its own.
func (tc brokenCase) wrap(tgt *conformance.Target) {
	if tgt.OtherCluster != nil {
		o := tc.b
		o.Interface = tgt.OtherCluster
		if lb, ok := tgt.Cloud.LoadBalancer(); ok && tc.sharesLBs {
			o.Interface = &wrapped{Interface: tgt.OtherCluster, lb: func(wrappedLB) cloudprovider.LoadBalancer { return lb }}
		}
		tgt.OtherCluster = &o
	}
	b := tc.b
	b.Interface = tgt.Cloud
	tgt.Cloud = &b
}

// brokenCases are deliberately broken providers: each breaks one contract
// and must fail exactly the rule named (and the rules it also names).
func brokenCases() []brokenCase {
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
			name: "ignores-source-ranges-annotation", want: "LB-SOURCE-RANGES",
			reason: "only spec.loadBalancerSourceRanges is read; a valid restricting annotation is ignored, the load balancer open to all",
			b:      stripSourceRangesAnnotation(true, false),
		},
		{
			name: "opens-unclaimed-annotation-to-all", want: "LB-SOURCE-RANGES",
			reason: "SourceRanges unclaimed: spec.loadBalancerSourceRanges is rejected, but a valid annotation is ignored, the load balancer open to all",
			claims: func(c *conformance.Claims) { c.SourceRanges = false },
			b:      stripSourceRangesAnnotation(true, true),
		},
		{
			name: "accepts-malformed-source-ranges", want: "LB-SOURCE-RANGES-MALFORMED",
			reason: "a malformed annotation (which the kube-apiserver rejects on create and change) is ignored, the load balancer open to all",
			b:      stripSourceRangesAnnotation(false, false),
		},
		{
			name: "dual-stack-served-single-stack", want: "LB-DUAL-STACK-REJECTED",
			reason: "DualStack unclaimed: a RequireDualStack Service gets a load balancer of its first family only, without an error",
			claims: func(c *conformance.Claims) { c.DualStack = false },
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
			name: "exists-false-on-error", want: "INST-OUTAGE",
			reason: "any cloud error from the look-up is taken for \"instance gone\"",
			b: wrapped{inst: func(b wrappedInst) cloudprovider.InstancesV2 {
				b.exists = func(next cloudprovider.InstancesV2, ctx context.Context, n *v1.Node) (bool, error) {
					ok, err := next.InstanceExists(ctx, n)
					if err != nil && ctx.Err() == nil {
						return false, nil
					}
					return ok, err
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
		{
			name: "metadata-wraps-instance-not-found", want: "", // correct: passes every rule
			reason: "InstanceMetadata of a missing instance returns fmt.Errorf(\"...: %w\", cloudprovider.InstanceNotFound): no upstream caller compares InstancesV2 errors with ==, so this is correct",
			b: wrapped{inst: func(b wrappedInst) cloudprovider.InstancesV2 {
				b.metadata = func(next cloudprovider.InstancesV2, ctx context.Context, n *v1.Node) (*cloudprovider.InstanceMetadata, error) {
					md, err := next.InstanceMetadata(ctx, n)
					if err != nil && ctx.Err() == nil {
						return nil, fmt.Errorf("instance of node %s: %w", n.Name, cloudprovider.InstanceNotFound)
					}
					return md, err
				}
				return b
			}},
		},
		{
			name: "addresses-reordered-by-name", want: "INST-ADDRESSES-STABLE",
			reason: "a look-up by name returns the addresses in another order than a look-up by provider ID",
			b: rewriteMetadata(func(n *v1.Node, md *cloudprovider.InstanceMetadata) {
				if n.Spec.ProviderID == "" {
					md.NodeAddresses = slices.Clone(md.NodeAddresses)
					slices.Reverse(md.NodeAddresses)
				}
			}),
		},
		{
			name: "provider-id-rerendered", want: "INST-METADATA",
			reason: "metadata spells the provider ID differently from the node's spec.providerID",
			b: rewriteMetadata(func(_ *v1.Node, md *cloudprovider.InstanceMetadata) {
				md.ProviderID = strings.Replace(md.ProviderID, "fake://", "fake:///", 1)
			}),
		},
		{
			name: "kubernetes-io-labels", want: "INST-LABELS",
			reason: "an additional label under node.kubernetes.io, which the node controller discards",
			b: rewriteMetadata(func(_ *v1.Node, md *cloudprovider.InstanceMetadata) {
				labels := map[string]string{"node.kubernetes.io/pool": "general"}
				for k, v := range md.AdditionalLabels {
					labels[k] = v
				}
				md.AdditionalLabels = labels
			}),
		},
		{
			name: "route-cidr-rerendered", want: "ROUTE-CIDR-VERBATIM",
			reason: "listed destinations are parsed and printed again, so a non-canonical pod CIDR comes back changed",
			b: wrapped{routes: func(b wrappedRoutes) cloudprovider.Routes {
				b.list = func(next cloudprovider.Routes, ctx context.Context, c string) ([]*cloudprovider.Route, error) {
					list, err := next.ListRoutes(ctx, c)
					for i, r := range list {
						if p, perr := netip.ParsePrefix(r.DestinationCIDR); perr == nil {
							cp := *r
							cp.DestinationCIDR = p.String()
							list[i] = &cp
						}
					}
					return list, err
				}
				return b
			}},
		},
		{
			name: "route-names-per-node", want: "ROUTE-NAMES",
			reason: "routes are named after the node only, so a node's IPv4 and IPv6 routes share a name",
			b: wrapped{routes: func(b wrappedRoutes) cloudprovider.Routes {
				b.list = func(next cloudprovider.Routes, ctx context.Context, c string) ([]*cloudprovider.Route, error) {
					list, err := next.ListRoutes(ctx, c)
					for i, r := range list {
						cp := *r
						cp.Name = "route-" + string(r.TargetNode)
						list[i] = &cp
					}
					return list, err
				}
				b.del = func(next cloudprovider.Routes, ctx context.Context, c string, r *cloudprovider.Route) error {
					list, err := next.ListRoutes(ctx, c)
					if err != nil {
						return err
					}
					for _, l := range list {
						if l.DestinationCIDR == r.DestinationCIDR && l.TargetNode == r.TargetNode {
							return next.DeleteRoute(ctx, c, l)
						}
					}
					return next.DeleteRoute(ctx, c, r)
				}
				return b
			}},
		},
		{
			name: "routes-empty-on-error", want: "ROUTE-OUTAGE",
			reason: "a failed route-table read is reported as an empty table",
			b: wrapped{routes: func(b wrappedRoutes) cloudprovider.Routes {
				b.list = func(next cloudprovider.Routes, ctx context.Context, c string) ([]*cloudprovider.Route, error) {
					list, err := next.ListRoutes(ctx, c)
					if err != nil && ctx.Err() == nil {
						return nil, nil
					}
					return list, err
				}
				return b
			}},
		},
		{
			name: "new-instance-gone-from-stale-list", want: "INST-NEW-INSTANCE",
			reason: "an instance missing from the provider's cached list is taken for gone without asking the cloud, so a new Node is deleted before the cache learns of it",
			target: staleListTarget,
		},
		{
			name: "lb-keyed-by-uid-across-clusters", want: "LB-CLUSTER-ISOLATION",
			reason: "with Target.OtherCluster: the other cluster's provider finds load balancers by cluster name and Service UID, both equal, not by its own cluster ID",
			target: twoClusters(true, false),
		},
		{
			name: "routes-shared-across-clusters", want: "ROUTE-CLUSTER-SCOPE",
			reason: "with Target.OtherCluster: the other cluster's provider lists routes by cluster name, equal in both clusters, not by its own cluster ID",
			target: twoClusters(false, true),
		},
	}
}

// TestBrokenProviders feeds deliberately broken providers to Check: each
// must fail exactly the rule it breaks, and no other. The checks run
// concurrently (they mostly wait for controllers), then each case reports as
// a subtest.
func TestBrokenProviders(t *testing.T) {
	t.Parallel()
	cases := brokenCases()
	if len(cases) < 12 {
		t.Fatalf("only %d broken providers, expected at least 12", len(cases))
	}
	results := make([]error, len(cases))
	var wg sync.WaitGroup
	sem := make(chan struct{}, 8)
	for i, tc := range cases {
		cfg := fakeConfig()
		if tc.claims != nil {
			tc.claims(&cfg.Claims)
		}
		if tc.timeout != 0 {
			cfg.Timeout = tc.timeout
		}
		newTarget := tc.target
		if newTarget == nil {
			newTarget = newFakeTarget
		}
		cfg.NewTarget = func(ctx context.Context) (*conformance.Target, error) {
			tgt, err := newTarget(ctx)
			if err != nil {
				return nil, err
			}
			tc.wrap(tgt)
			return tgt, nil
		}
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			results[i] = conformance.Check(t.Context(), cfg)
		})
	}
	wg.Wait()
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := results[i]
			want := slices.DeleteFunc(append([]string{tc.want}, tc.also...), func(s string) bool { return s == "" })
			slices.Sort(want)
			if d := cmp.Diff(want, failedRules(t, err)); d != "" {
				t.Errorf("%s (%s): failing rules differ (-want +got):\n%s\nreport:\n%v", tc.name, tc.reason, d, err)
			}
			var f *conformance.Failure
			if errors.As(err, &f) {
				t.Logf("caught: %v", f)
			}
		})
	}
}

// listOnly is an instances.Driver that answers from a list alone: an
// instance missing from it is "not found". Over an instances.Cache it is a
// provider whose cache takes "not in my list" for "gone" without asking the
// cloud.
type listOnly struct{ l instances.Lister }

func (d listOnly) find(ctx context.Context, match func(instances.Instance) bool) (instances.Instance, error) {
	list, err := d.l.List(ctx)
	if err != nil {
		return instances.Instance{}, err
	}
	for _, in := range list {
		if match(in) {
			return in, nil
		}
	}
	return instances.Instance{}, instances.ErrNotFound
}

func (d listOnly) GetByID(ctx context.Context, id provider.ProviderID) (instances.Instance, error) {
	return d.find(ctx, func(in instances.Instance) bool { return in.ID == id.ID })
}

func (d listOnly) GetByName(ctx context.Context, name string) (instances.Instance, error) {
	return d.find(ctx, func(in instances.Instance) bool { return in.Name == name })
}

// staleListTarget is newFakeTarget whose instances answer from a one-hour
// cache of the fake's instance list through listOnly, dropped by
// Hooks.CloudChanged: correct after every announced change, wrong about an
// instance created since the cache was filled.
func staleListTarget(ctx context.Context) (*conformance.Target, error) {
	tgt, err := newFakeTarget(ctx)
	if err != nil {
		return nil, err
	}
	cloud := tgt.Cloud.(*fake.Cloud)
	cache, err := instances.NewCache(cloud.InstanceAPI(), instances.CacheOptions{TTL: time.Hour})
	if err != nil {
		tgt.Close()
		return nil, err
	}
	adapter, err := instances.NewAdapter(listOnly{cache}, instances.Options{Codec: provider.Codec{Scheme: fake.ProviderName}})
	if err != nil {
		tgt.Close()
		return nil, err
	}
	tgt.Cloud = &wrapped{Interface: cloud, inst: func(wrappedInst) cloudprovider.InstancesV2 { return adapter }}
	tgt.Hooks.CloudChanged = func(context.Context) error {
		cache.Invalidate()
		return nil
	}
	return tgt, nil
}
