package conformance_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
	cloudprovider "k8s.io/cloud-provider"
	cloudproviderapi "k8s.io/cloud-provider/api"
	servicehelpers "k8s.io/cloud-provider/service/helpers"

	"github.com/ccmkit/ccmkit/fake"
	"github.com/ccmkit/ccmkit/fake/register"
	"github.com/ccmkit/ccmkit/provider"
	"github.com/ccmkit/ccmkit/testing/conformance"
)

// brokenProvider returns the broken providers of the provider,
// every-capability and controller rules: PROVIDER-*, SENTINELS-UNWRAPPED,
// ARGS-NOT-MUTATED, CTX-CANCELLED and CTRL-*.
//
// A controller rule checks through a controller what a direct-call rule
// checks by calling the provider, so each broken provider of a CTRL rule
// answers wrongly only for what a controller passes and the direct rules
// never do: a Node with the uninitialized taint (the cloud node
// controller), a NotReady Node (the node lifecycle controller asks about no
// other), a Service with the cleanup finalizer or a deletion timestamp (the
// service controller), Nodes registered after the provider started (every
// controller rule).
func brokenProvider() []brokenCase {
	type bc = brokenCase
	return slices.Concat([]bc{
		{
			name: "accessor-nil-true", want: "PROVIDER-ACCESSORS", clause: "never (nil, true)",
			reason: "Clusters() returns (nil, true): the controllers call methods on the value",
			b:      wrapped{clusters: func() (cloudprovider.Clusters, bool) { return nil, true }},
		},
		{
			name: "accessor-typed-nil", want: "PROVIDER-ACCESSORS", clause: "nor a typed nil",
			reason: "Instances() returns a typed nil with true, the classic `return c.legacy, true`",
			b:      wrapped{instances: func() (cloudprovider.Instances, bool) { var l *legacyInstances; return l, true }},
		},
		{
			name: "accessor-claimed-routes-absent", want: "PROVIDER-ACCESSORS", clause: "every claimed capability is offered",
			reason: "Routes() returns (nil, false) although Claims.Routes (a provider whose routes are wired to a nil table, which provider.New counts as absent): every route rule is skipped instead of run",
			target: providerTarget(func(tgt *conformance.Target) cloudprovider.Interface {
				return providerWithout{wrapped: &wrapped{Interface: tgt.Cloud}, routes: true}
			}),
		},
		{
			name: "name-per-call", want: "PROVIDER-NAME", clause: "a constant",
			reason: "ProviderName() appends a call counter after its first answer (a request ID leaking into it)",
			claims: providerNothing,
			target: wrappedTarget(func(*conformance.Target, *fake.Cloud) wrapped {
				var calls int
				var mu sync.Mutex
				return wrapped{name: func(next string) string {
					mu.Lock()
					defer mu.Unlock()
					if calls++; calls > 1 {
						return fmt.Sprintf("%s-%d", next, calls)
					}
					return next
				}}
			}),
		},
		{
			name: "name-with-scheme", want: "PROVIDER-NAME", clause: "bare name",
			reason: "ProviderName() returns \"fake://\", the provider-ID prefix instead of the name (Config.ProviderName unset, so that only bareness is checked; no capability claimed: INST-METADATA would check provider IDs against it)",
			config: (func(c *conformance.Config) { c.Claims, c.ProviderName = conformance.Claims{}, "" }),
			b:      wrapped{name: func(next string) string { return next + "://" }},
		},
		{
			name: "name-unlike-registration", want: "PROVIDER-NAME", clause: "equal to Config.ProviderName when that is set",
			reason: "ProviderName() returns \"acme\" while the provider is registered as \"fake\" (no capability claimed: INST-METADATA would check provider IDs against it)",
			claims: providerNothing,
			b:      wrapped{name: func(string) string { return "acme" }},
		},
		{
			name: "untagged", want: "PROVIDER-CLUSTER-ID", clause: "HasClusterID reports true",
			reason: "HasClusterID() is false: the CCM exits without --allow-untagged-cloud",
			b:      wrapped{untagged: true},
		},
		{
			name: "mutates-service", want: "ARGS-NOT-MUTATED", clause: "No call modifies its Service",
			reason: "Ensure defaults an annotation in the Service it was given, which lives in the informer cache",
			b: lbWrap(func(b *wrappedLB) {
				b.ensure = func(next cloudprovider.LoadBalancer, ctx context.Context, c string, s *v1.Service, n []*v1.Node) (*v1.LoadBalancerStatus, error) {
					metav1.SetMetaDataAnnotation(&s.ObjectMeta, "example.com/lb-flavor", "standard")
					return next.EnsureLoadBalancer(ctx, c, s, n)
				}
			}),
		},
		{
			name: "mutates-nodes", want: "ARGS-NOT-MUTATED", clause: "Node",
			reason: "Update stamps a label on every Node it was given, which lives in the informer cache: LB-CONCURRENT's goroutines each own their copies, so this fails ARGS-NOT-MUTATED instead of racing",
			b: lbWrap(func(b *wrappedLB) {
				b.update = func(next cloudprovider.LoadBalancer, ctx context.Context, c string, s *v1.Service, n []*v1.Node) error {
					for _, node := range n {
						metav1.SetMetaDataLabel(&node.ObjectMeta, "example.com/lb-backend", "true")
					}
					return next.UpdateLoadBalancer(ctx, c, s, n)
				}
			}),
		},
		{
			name: "mutates-route-addresses", want: "ARGS-NOT-MUTATED", clause: "Route arguments",
			reason: "CreateRoute sorts route.TargetNodeAddresses IPv6 first in place: the route controller passes the Node's status.addresses from the informer cache",
			b: routesWrap(func(b *wrappedRoutes) {
				b.create = func(next cloudprovider.Routes, ctx context.Context, c, hint string, r *cloudprovider.Route) error {
					slices.SortStableFunc(r.TargetNodeAddresses, func(a, b v1.NodeAddress) int { return providerFamily(b) - providerFamily(a) })
					return next.CreateRoute(ctx, c, hint, r)
				}
			}),
		},
		{
			name: "exists-false-when-cancelled", want: "CTX-CANCELLED", clause: "no call returns a wrong answer",
			reason: "a cancelled context is taken for \"instance gone\"",
			b: instExists(func(next cloudprovider.InstancesV2, ctx context.Context, n *v1.Node) (bool, error) {
				if ctx.Err() != nil {
					return false, nil
				}
				return next.InstanceExists(ctx, n)
			}),
		},
		{
			name: "shutdown-ignores-cancel", want: "CTX-CANCELLED-PROMPT", clause: "every call returns within Config.Timeout",
			reason: "InstanceShutdown waits for its rate limiter with context.Background(), well past a cancelled context",
			claims: instOnly, timeout: brokenTimeout,
			b: instShutdown(func(next cloudprovider.InstancesV2, ctx context.Context, n *v1.Node) (bool, error) {
				if ctx.Err() != nil {
					time.Sleep(brokenTimeout + brokenTimeout/2)
				}
				return next.InstanceShutdown(ctx, n)
			}),
		},
		{
			name: "legacy-instance-id-wraps-not-found", want: "", // correct: passes every rule
			reason: "a provider without InstancesV2 whose legacy Instances.InstanceID reports a missing node as fmt.Errorf(\"...: %w\", cloudprovider.InstanceNotFound): cloud.go GetInstanceProviderID compares it with == only to decide whether to wrap it with %w, and all its callers use errors.Is, so this is correct",
			claims: func(c *conformance.Claims) { c.InstancesV2 = false },
			target: providerTarget(func(tgt *conformance.Target) cloudprovider.Interface {
				return providerWithout{wrapped: &wrapped{Interface: tgt.Cloud, instances: func() (cloudprovider.Instances, bool) { return wrappingInstances{}, true }}, instancesV2: true}
			}),
		},
		{
			name: "ensure-wraps-implemented-elsewhere", want: "SENTINELS-UNWRAPPED", clause: "ImplementedElsewhere from EnsureLoadBalancer",
			reason: "EnsureLoadBalancer of a Service another controller serves returns fmt.Errorf(\"...: %w\", cloudprovider.ImplementedElsewhere): controllers/service syncLoadBalancerIfNeeded compares it with ==, and retries the Service forever",
			b:      providerSentinel(lbEnsure),
		},
		{
			name: "update-wraps-implemented-elsewhere", want: "SENTINELS-UNWRAPPED", clause: "UpdateLoadBalancer",
			reason: "UpdateLoadBalancer of an existing load balancer another controller updates returns fmt.Errorf(\"...: %w\", cloudprovider.ImplementedElsewhere): controllers/service lockedUpdateLoadBalancerHosts compares it with == and reports a failed update",
			b:      providerSentinel(lbUpdate),
		},
		{
			name: "lb-delete-wraps-implemented-elsewhere", want: "SENTINELS-UNWRAPPED", clause: "EnsureLoadBalancerDeleted",
			reason: "EnsureLoadBalancerDeleted reports fmt.Errorf(\"...: %w\", cloudprovider.ImplementedElsewhere): controllers/service syncLoadBalancerIfNeeded compares it with ==, and the Service keeps its finalizer",
			b:      providerSentinel(lbDelete),
		},
	}, providerRegistration(), providerControllers())
}

// providerControllers returns the broken providers of the CTRL rules.
func providerControllers() []brokenCase {
	type bc = brokenCase
	return []bc{
		{
			name: "init-provider-id-respelled", want: "CTRL-NODE-INIT", clause: "gets its provider ID",
			reason: "InstanceMetadata of a Node with the uninitialized taint spells the provider ID \"fake:///…\", which the node controller writes once and for all",
			b: providerUninitialized(func(md *cloudprovider.InstanceMetadata) *cloudprovider.InstanceMetadata {
				md.ProviderID = strings.Replace(md.ProviderID, "://", ":///", 1)
				return md
			}),
		},
		{
			name: "init-addresses-later", want: "CTRL-NODE-INIT", clause: "addresses",
			reason: "InstanceMetadata of a Node with the uninitialized taint has no addresses yet (filled in on a later call): the Node goes without them until the next status update, minutes later",
			claims: instOnly, timeout: brokenTimeout,
			b: providerUninitialized(func(md *cloudprovider.InstanceMetadata) *cloudprovider.InstanceMetadata {
				md.NodeAddresses = nil
				return md
			}),
		},
		{
			name: "init-zone-later", want: "CTRL-NODE-INIT", clause: "topology labels",
			reason: "InstanceMetadata of a Node with the uninitialized taint has no zone and region yet: the node controller sets the topology labels only when it initializes the Node",
			b: providerUninitialized(func(md *cloudprovider.InstanceMetadata) *cloudprovider.InstanceMetadata {
				md.Zone, md.Region = "", ""
				return md
			}),
		},
		{
			name: "init-nil-metadata", want: "CTRL-NODE-INIT", clause: "loses the taint",
			reason: "InstanceMetadata of a Node with the uninitialized taint is (nil, nil), \"not booted yet\": the node controller skips the Node and never comes back to it",
			claims: instOnly, timeout: brokenTimeout,
			b: providerUninitialized(func(*cloudprovider.InstanceMetadata) *cloudprovider.InstanceMetadata { return nil }),
		},
		{
			name: "notready-exists-unasked", want: "CTRL-NODE-TERMINATED", clause: "the Node of a terminated instance is deleted within Config.Timeout+MaxStaleness after Hooks.CloudChanged",
			reason: "InstanceExists of a NotReady Node is true without asking the cloud (NotReady taken for \"still booting\"): the node lifecycle controller asks about no other Node, so a terminated instance's Node stays forever",
			claims: instOnly, timeout: brokenTimeout,
			b: providerNotReady(func(next cloudprovider.InstancesV2, ctx context.Context, n *v1.Node) (bool, error) {
				return true, nil
			}, nil),
		},
		{
			name: "notready-all-gone-after-one", want: "CTRL-NODE-TERMINATED", clause: "the Nodes of running instances are kept",
			reason: "once it has found one NotReady Node's instance gone, InstanceExists reports every NotReady Node gone (a \"gone\" flag kept per provider instead of per instance): the node lifecycle controller deletes the Nodes of running instances",
			claims: instOnly, timeout: brokenTimeout,
			target: wrappedTarget(func(*conformance.Target, *fake.Cloud) wrapped {
				var mu sync.Mutex
				gone := false
				return providerNotReady(func(next cloudprovider.InstancesV2, ctx context.Context, n *v1.Node) (bool, error) {
					mu.Lock()
					defer mu.Unlock()
					if gone {
						return false, nil
					}
					ok, err := next.InstanceExists(ctx, n)
					gone = err == nil && !ok
					return ok, err
				}, nil)
			}),
		},
		{
			name: "notready-shutdown-unasked", want: "CTRL-NODE-SHUTDOWN", clause: "the Node of a stopped instance gets the shutdown taint within Config.Timeout+MaxStaleness after Hooks.CloudChanged",
			reason: "InstanceShutdown of a NotReady Node is false without asking the cloud (NotReady taken for \"still booting\"): a stopped instance's Node never gets the shutdown taint",
			claims: instOnly, timeout: brokenTimeout,
			b: providerNotReady(nil, func(next cloudprovider.InstancesV2, ctx context.Context, n *v1.Node) (bool, error) {
				return false, nil
			}),
		},
		{
			name: "notready-stopped-gone", want: "CTRL-NODE-SHUTDOWN", clause: "and is kept",
			reason: "InstanceExists of a NotReady Node whose instance is stopped is false (a stopped NotReady node taken for a dead one): the node lifecycle controller deletes the Node instead of tainting it",
			claims: instOnly, timeout: brokenTimeout,
			b: providerNotReady(func(next cloudprovider.InstancesV2, ctx context.Context, n *v1.Node) (bool, error) {
				if down, err := next.InstanceShutdown(ctx, n); err == nil && down {
					return false, nil
				}
				return next.InstanceExists(ctx, n)
			}, nil),
		},
		{
			name: "ingress-from-finalized-service", want: "CTRL-SERVICE-LB", clause: "and an ingress",
			reason: "asynchronous (an api.RetryError while a new load balancer provisions), and it answers EnsureLoadBalancer of a Service with the cleanup finalizer from the Service's own status, taking the finalizer for \"already published\": the controller's retries pass the Service with the finalizer it added, and get a status without an ingress",
			claims: lbOnly, timeout: brokenTimeout,
			target: wrappedTarget(func(*conformance.Target, *fake.Cloud) wrapped {
				var mu sync.Mutex
				since := map[types.UID]time.Time{} // of the Services first ensured without nodes
				provisioning := func(s *v1.Service, nodes []*v1.Node) bool {
					mu.Lock()
					defer mu.Unlock()
					t, ok := since[s.UID]
					if !ok {
						t, ok = time.Now(), true
						since[s.UID] = t
					}
					return ok && time.Since(t) < providerProvisioning
				}
				return lbWrap(func(b *wrappedLB) {
					b.ensure = func(next cloudprovider.LoadBalancer, ctx context.Context, c string, s *v1.Service, n []*v1.Node) (*v1.LoadBalancerStatus, error) {
						switch {
						case provisioning(s, n):
							return nil, cloudproviderapi.NewRetryError("load balancer provisioning", 10*time.Millisecond)
						case servicehelpers.HasLBFinalizer(s):
							return s.Status.LoadBalancer.DeepCopy(), nil
						}
						return next.EnsureLoadBalancer(ctx, c, s, n)
					}
				})
			}),
		},
		{
			name: "stuck-after-no-nodes-refusal", want: "CTRL-SERVICE-BEFORE-NODES", clause: "once a Node is ready an ingress",
			reason: "EnsureLoadBalancer without nodes fails, and leaves the load balancer in an error state that every later Ensure of that Service reports: a Service created before its cluster's Nodes never gets an address (upstream contracts only: refusing no nodes is LB-NO-NODES')",
			config: func(c *conformance.Config) { c.UpstreamOnly = true },
			b: lbWrap(func(b *wrappedLB) {
				var failed counter
				b.ensure = func(next cloudprovider.LoadBalancer, ctx context.Context, c string, s *v1.Service, n []*v1.Node) (*v1.LoadBalancerStatus, error) {
					if _, ok := failed.get(lbKey(c, s)); ok || len(n) == 0 {
						failed.set(lbKey(c, s), 1)
						return nil, fmt.Errorf("load balancer of %s/%s is in state ERROR", s.Namespace, s.Name)
					}
					return next.EnsureLoadBalancer(ctx, c, s, n)
				}
			}),
		},
		{
			name: "no-nodes-never-updated", want: "CTRL-SERVICE-BEFORE-NODES", clause: "that Node behind its load balancer",
			reason: "UpdateLoadBalancer of a load balancer created with no nodes does nothing and succeeds, taking it for one still provisioning: a Service created before its cluster's Nodes never gets them",
			b: lbWrap(func(b *wrappedLB) {
				var empty counter
				b.ensure = func(next cloudprovider.LoadBalancer, ctx context.Context, c string, s *v1.Service, n []*v1.Node) (*v1.LoadBalancerStatus, error) {
					if len(n) == 0 {
						empty.set(lbKey(c, s), 1)
					}
					return next.EnsureLoadBalancer(ctx, c, s, n)
				}
				b.update = func(next cloudprovider.LoadBalancer, ctx context.Context, c string, s *v1.Service, n []*v1.Node) error {
					if _, ok := empty.get(lbKey(c, s)); ok {
						return nil
					}
					return next.UpdateLoadBalancer(ctx, c, s, n)
				}
			}),
		},
		{
			name: "ports-frozen-once-finalized", want: "CTRL-SERVICE-PORT", clause: "a changed Service port reaches the cloud",
			reason: "EnsureLoadBalancer of a Service with the cleanup finalizer only reads the load balancer's status back, taking the finalizer for \"already built\": a port changed later never reaches the cloud",
			claims: lbOnly, timeout: brokenTimeout,
			b: lbWrap(func(b *wrappedLB) {
				b.ensure = func(next cloudprovider.LoadBalancer, ctx context.Context, c string, s *v1.Service, n []*v1.Node) (*v1.LoadBalancerStatus, error) {
					if servicehelpers.HasLBFinalizer(s) {
						if st, ok, err := next.GetLoadBalancer(ctx, c, s); err == nil && ok {
							return st, nil
						}
					}
					return next.EnsureLoadBalancer(ctx, c, s, n)
				}
			}),
		},
		{
			name: "delete-left-to-gc", want: "CTRL-SERVICE-DELETE", clause: "a deleted Service releases its load balancer",
			reason: "EnsureLoadBalancerDeleted of a Service with a deletion timestamp returns nil at once, counting on a cloud-side garbage collection that never comes: the finalizer goes, the load balancer leaks",
			b: lbShortCircuit(lbDelete, func(_ context.Context, s *v1.Service, _ []*v1.Node) (bool, error) {
				return s.DeletionTimestamp != nil, nil
			}),
		},
		{
			name: "delete-waits-for-service", want: "CTRL-SERVICE-DELETE", clause: "then its finalizer",
			reason: "EnsureLoadBalancerDeleted returns an api.RetryError while the Service has a deletion timestamp, waiting for the Service to be gone first: the Service waits for its finalizer, which waits for the load balancer",
			claims: lbOnly, timeout: brokenTimeout,
			b: lbShortCircuit(lbDelete, func(_ context.Context, s *v1.Service, _ []*v1.Node) (bool, error) {
				if s.DeletionTimestamp == nil {
					return false, nil
				}
				return true, cloudproviderapi.NewRetryError(fmt.Sprintf("Service %s/%s is still being deleted", s.Namespace, s.Name), 10*time.Millisecond)
			}),
		},
		{
			name: "serves-every-class", want: "CTRL-SERVICE-CLASS", clause: "a Service with spec.loadBalancerClass is left alone",
			reason: "the provider watches Services itself (SetInformers) and builds a load balancer for a LoadBalancer Service of any spec.loadBalancerClass, taking the class for a flavour of its own",
			target: providerTarget(func(tgt *conformance.Target) cloudprovider.Interface {
				return &providerAnyClass{wrapped: &wrapped{Interface: tgt.Cloud}}
			}),
		},
		{
			name: "routes-to-unknown-nodes-fail", want: "CTRL-ROUTES", clause: "routes appear for the nodes' pod CIDRs",
			reason: "CreateRoute looks the target Node up in a map of Nodes listed once when the provider started, and fails for a Node registered since",
			claims: providerRouteWaits, timeout: brokenTimeout,
			target: providerNodeMapTarget(func(known func(types.NodeName) bool, b *wrappedRoutes) {
				b.create = func(next cloudprovider.Routes, ctx context.Context, c, hint string, r *cloudprovider.Route) error {
					if !known(r.TargetNode) {
						return fmt.Errorf("route %s: no instance known for node %s", r.DestinationCIDR, r.TargetNode)
					}
					return next.CreateRoute(ctx, c, hint, r)
				}
			}),
		},
		{
			name: "routes-to-unknown-nodes-blackhole", want: "CTRL-ROUTES", clause: "stay put while nothing changes",
			reason: "ListRoutes marks Blackhole every route whose target Node is not in a map of Nodes listed once when the provider started (an unknown next hop taken for a dead one): the route controller deletes and recreates the routes of Nodes registered since, every reconciliation",
			claims: providerRouteWaits, timeout: brokenTimeout,
			target: providerNodeMapTarget(func(known func(types.NodeName) bool, b *wrappedRoutes) {
				b.list = func(next cloudprovider.Routes, ctx context.Context, c string) ([]*cloudprovider.Route, error) {
					list, err := next.ListRoutes(ctx, c)
					for i, r := range list {
						if r != nil && !known(r.TargetNode) {
							cp := *r
							cp.Blackhole = true
							list[i] = &cp
						}
					}
					return list, err
				}
			}),
		},
		{
			name: "routes-of-unknown-nodes-stay", want: "CTRL-ROUTES", clause: "go away with their nodes",
			reason: "DeleteRoute finds the route table through the target Node in a map of Nodes listed once when the provider started, and fails for a Node registered since: the route of a deleted Node stays",
			claims: providerRouteWaits, timeout: brokenTimeout,
			target: providerNodeMapTarget(func(known func(types.NodeName) bool, b *wrappedRoutes) {
				b.del = func(next cloudprovider.Routes, ctx context.Context, c string, r *cloudprovider.Route) error {
					if !known(r.TargetNode) {
						return fmt.Errorf("route %s: no route table known for node %s", r.DestinationCIDR, r.TargetNode)
					}
					return next.DeleteRoute(ctx, c, r)
				}
			}),
		},
	}
}

// Names under which providerRegistration's broken factories are registered
// (and one under which nothing is).
const (
	providerUnregistered     = "conformance-broken-unregistered"
	providerOtherName        = "conformance-broken-other-name"
	providerNeedsConfig      = "conformance-broken-needs-config"
	providerJSONOnly         = "conformance-broken-json-only"
	providerPanicsOnNil      = "conformance-broken-panics-on-nil"
	providerBlocks           = "conformance-broken-blocks"
	providerLenient          = "conformance-broken-lenient"
	providerPanicsOnUnknown  = "conformance-broken-panics-on-unknown"
	providerRegistryTimeout  = 500 * time.Millisecond
	providerFactoryBlockTime = 2 * providerRegistryTimeout
)

// providerFakeNamed builds the fake from config (nil: no cloud-config) as
// its registered factory does, without the registry (whose lock the
// calling factory holds), calling itself name.
func providerFakeNamed(name string, config io.Reader) (cloudprovider.Interface, error) {
	c, err := provider.Build(fake.ProviderName, config, register.Factory)
	if err != nil {
		return nil, err
	}
	return &wrapped{Interface: c, name: func(string) string { return name }}, nil
}

func init() {
	for name, factory := range map[string]cloudprovider.Factory{
		providerOtherName: func(config io.Reader) (cloudprovider.Interface, error) {
			return providerFakeNamed("acme", config)
		},
		providerNeedsConfig: func(config io.Reader) (cloudprovider.Interface, error) {
			if config == nil {
				return nil, errors.New("no cloud-config: --cloud-config is required")
			}
			return providerFakeNamed(providerNeedsConfig, config)
		},
		providerJSONOnly: func(config io.Reader) (cloudprovider.Interface, error) {
			if config != nil {
				data, err := io.ReadAll(config)
				if err != nil {
					return nil, err
				}
				var cfg fake.Config
				if err := json.Unmarshal(data, &cfg); err != nil {
					return nil, fmt.Errorf("cloud-config: %w", err)
				}
				config = strings.NewReader(string(data))
			}
			return providerFakeNamed(providerJSONOnly, config)
		},
		providerPanicsOnNil: func(config io.Reader) (cloudprovider.Interface, error) {
			data, err := io.ReadAll(config) // panics on a nil reader
			if err != nil {
				return nil, err
			}
			return providerFakeNamed(providerPanicsOnNil, strings.NewReader(string(data)))
		},
		providerBlocks: func(config io.Reader) (cloudprovider.Interface, error) {
			if config == nil {
				time.Sleep(providerFactoryBlockTime)
			}
			return providerFakeNamed(providerBlocks, config)
		},
		providerLenient: func(io.Reader) (cloudprovider.Interface, error) {
			return providerFakeNamed(providerLenient, nil)
		},
		providerPanicsOnUnknown: func(config io.Reader) (cloudprovider.Interface, error) {
			if config != nil {
				data, err := io.ReadAll(config)
				if err != nil {
					return nil, err
				}
				if strings.Contains(string(data), "noSuchField") {
					panic("cloud-config: unknown field noSuchField")
				}
				config = strings.NewReader(string(data))
			}
			return providerFakeNamed(providerPanicsOnUnknown, config)
		},
	} {
		cloudprovider.RegisterCloudProvider(name, factory)
	}
}

// providerRegistration returns the broken providers of the registration
// rules. Those read the registry under Config.ProviderName, not the
// Target: each case points Config.ProviderName at a broken factory
// registered in init (see providerRegistered).
func providerRegistration() []brokenCase {
	type bc = brokenCase
	return []bc{
		providerRegistered(providerUnregistered, nil, bc{
			name: "not-registered", want: "PROVIDER-REGISTRATION", clause: "The provider is registered under Config.ProviderName",
			reason: "nothing is registered under the provider's name (the registration lives in a package the CCM main does not import)",
		}),
		providerRegistered(providerOtherName, nil, bc{
			name: "factory-builds-other-name", want: "PROVIDER-REGISTRATION", clause: "The provider is registered under Config.ProviderName",
			reason: "the factory registered under the name builds a provider that calls itself \"acme\"",
		}),
		providerRegistered(providerNeedsConfig, nil, bc{
			name: "factory-needs-config", want: "PROVIDER-REGISTRATION", clause: "its factory builds it from a nil reader",
			reason: "the factory fails without a --cloud-config, which the provider documents as optional",
		}),
		providerRegistered(providerJSONOnly, func(c *conformance.Config) { c.CloudConfig = "clusterID: conformance\n" }, bc{
			name: "factory-rejects-its-config", want: "PROVIDER-REGISTRATION", clause: "or Config.CloudConfig",
			reason: "the factory decodes JSON only, and rejects its documented YAML cloud-config (Config.CloudConfig)",
		}),
		providerRegistered(providerPanicsOnNil, nil, bc{
			name: "factory-panics-on-nil", want: "PROVIDER-REGISTRATION", clause: "panic",
			reason: "the factory reads its config without checking for the nil reader of a CCM run without --cloud-config, and panics",
		}),
		// Config.BadCloudConfig unset: PROVIDER-BAD-CONFIG would wait for the
		// registry lock the blocked factory holds.
		providerRegistered(providerBlocks, func(c *conformance.Config) { c.BadCloudConfig = "" }, bc{
			name: "factory-blocks", want: "PROVIDER-REGISTRATION", clause: "re-registering",
			reason:  "the factory does not return within Config.Timeout, as one that calls RegisterCloudProvider does (it waits for the registry lock GetCloudProvider holds; a real one would hold the lock of the whole test binary forever, so this one sleeps for twice the timeout, holding it that long)",
			timeout: providerRegistryTimeout,
		}),
		providerRegistered(providerLenient, nil, bc{
			name: "factory-accepts-bad-config", want: "PROVIDER-BAD-CONFIG", clause: "rejects Config.BadCloudConfig with an error",
			reason: "the factory ignores its cloud-config, so a typo runs a default cloud",
		}),
		providerRegistered(providerPanicsOnUnknown, nil, bc{
			name: "factory-panics-on-bad-config", want: "PROVIDER-BAD-CONFIG", clause: "never a panic",
			reason: "the factory panics on an unknown field of its cloud-config instead of returning an error",
		}),
	}
}

// providerRegistered returns c checked with Config.ProviderName set to name
// and then edited by edit (when not nil), its Target (still the fake)
// calling itself name, and no capability claimed: the fake's provider IDs
// are "fake://", and only the provider rules concern the registration.
func providerRegistered(name string, edit func(*conformance.Config), c brokenCase) brokenCase {
	c.config = (func(cfg *conformance.Config) {
		cfg.Claims, cfg.ProviderName = conformance.Claims{}, name
		if edit != nil {
			edit(cfg)
		}
	})
	c.b = wrapped{name: func(string) string { return name }}
	return c
}

// providerProvisioning is how long a load balancer the asynchronous broken
// provider creates without backends provisions: long enough for the
// cleanup finalizer the service controller adds before its first
// EnsureLoadBalancer to reach its informer, even on a loaded machine,
// before the retries. The direct rules wait it out only for their few
// Services without nodes.
const providerProvisioning = time.Second

// providerNothing claims no capability: only the provider rules run.
func providerNothing(c *conformance.Claims) { *c = conformance.Claims{} }

// providerRouteWaits narrows the claims to Routes, for the broken providers
// that make CTRL-ROUTES wait out brokenTimeout (instOnly and lbOnly narrow
// them for the others): unlike routesOnly, it keeps the feature claims.
func providerRouteWaits(c *conformance.Claims) { c.LoadBalancer, c.InstancesV2 = false, false }

// providerTarget returns a NewTarget: newFakeTarget whose Cloud is what wrap
// returns for it, built for each target, so that the state a broken
// provider keeps is its target's own.
func providerTarget(wrap func(tgt *conformance.Target) cloudprovider.Interface) func(context.Context) (*conformance.Target, error) {
	return targetWith(func(tgt *conformance.Target) error {
		tgt.Cloud = wrap(tgt)
		return nil
	})
}

// providerWithout is a provider that does not offer routes or InstancesV2
// (the accessor returns (nil, false)).
type providerWithout struct {
	*wrapped
	routes, instancesV2 bool
}

func (p providerWithout) Routes() (cloudprovider.Routes, bool) {
	if p.routes {
		return nil, false
	}
	return p.wrapped.Routes()
}

func (p providerWithout) InstancesV2() (cloudprovider.InstancesV2, bool) {
	if p.instancesV2 {
		return nil, false
	}
	return p.wrapped.InstancesV2()
}

// providerFamily ranks an address: 1 for an IPv6 one, 0 for an IPv4 one,
// -1 for a name.
func providerFamily(a v1.NodeAddress) int {
	ip, err := netip.ParseAddr(a.Address)
	switch {
	case err != nil:
		return -1
	case ip.Is6():
		return 1
	}
	return 0
}

// providerSentinel breaks the load-balancer call named for the Service of
// SENTINELS-UNWRAPPED, "sentinels", alone: it returns ImplementedElsewhere
// wrapped.
func providerSentinel(call lbCall) wrapped {
	return lbShortCircuit(call, func(_ context.Context, s *v1.Service, _ []*v1.Node) (bool, error) {
		if s.Name != "sentinels" {
			return false, nil
		}
		return true, fmt.Errorf("load balancer of %s/%s: %w", s.Namespace, s.Name, cloudprovider.ImplementedElsewhere)
	})
}

// providerUninitialized breaks InstanceMetadata for a Node that carries the
// uninitialized taint, as the cloud node controller passes it before
// initializing it (and no direct-call rule does): f gets a copy of the
// answer and returns the broken one.
func providerUninitialized(f func(*cloudprovider.InstanceMetadata) *cloudprovider.InstanceMetadata) wrapped {
	return answerMetadata(func(n *v1.Node, md *cloudprovider.InstanceMetadata) *cloudprovider.InstanceMetadata {
		if !slices.ContainsFunc(n.Spec.Taints, func(t v1.Taint) bool { return t.Key == cloudproviderapi.TaintExternalCloudProvider }) {
			return md
		}
		return f(md)
	})
}

// providerNotReady breaks InstanceExists (exists) and InstanceShutdown
// (shutdown), when set, for a Node whose Ready condition is False, as the
// node lifecycle controller passes it (it asks about no other, and no
// direct-call rule passes one).
func providerNotReady(exists, shutdown func(next cloudprovider.InstancesV2, ctx context.Context, n *v1.Node) (bool, error)) wrapped {
	pick := func(broken, correct func(cloudprovider.InstancesV2, context.Context, *v1.Node) (bool, error)) func(cloudprovider.InstancesV2, context.Context, *v1.Node) (bool, error) {
		if broken == nil {
			return nil
		}
		return func(next cloudprovider.InstancesV2, ctx context.Context, n *v1.Node) (bool, error) {
			if readyFalse(n) {
				return broken(next, ctx, n)
			}
			return correct(next, ctx, n)
		}
	}
	return instWrap(func(b *wrappedInst) {
		b.exists = pick(exists, cloudprovider.InstancesV2.InstanceExists)
		b.shutdown = pick(shutdown, cloudprovider.InstancesV2.InstanceShutdown)
	})
}

// providerAnyClass is a provider that watches Services itself, through the
// informers SetInformers gives it, and builds a load balancer for every
// LoadBalancer Service that has a spec.loadBalancerClass as it appears, as
// if the class were one of its own flavours.
type providerAnyClass struct{ *wrapped }

func (p *providerAnyClass) SetInformers(f informers.SharedInformerFactory) {
	p.wrapped.SetInformers(f)
	nodes := f.Core().V1().Nodes().Lister()
	_, err := f.Core().V1().Services().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: func(obj any) {
		svc, ok := obj.(*v1.Service)
		if !ok || svc.Spec.Type != v1.ServiceTypeLoadBalancer || svc.Spec.LoadBalancerClass == nil {
			return
		}
		lb, ok := p.LoadBalancer()
		if !ok {
			return
		}
		list, err := nodes.List(labels.Everything())
		if err != nil {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		mine := svc.DeepCopy()
		mine.Spec.LoadBalancerClass = nil // a flavour of its own load balancers
		_, _ = lb.EnsureLoadBalancer(ctx, "conformance", mine, list)
	}})
	if err != nil {
		panic(err)
	}
}

// providerNodeMap is a provider whose routes know the Nodes it listed once,
// when it was initialized: Nodes registered later are unknown to it.
type providerNodeMap struct {
	*wrapped
	mu    sync.Mutex
	known map[types.NodeName]bool
}

func (p *providerNodeMap) Initialize(cb cloudprovider.ControllerClientBuilder, stop <-chan struct{}) {
	p.wrapped.Initialize(cb, stop)
	list, err := cb.ClientOrDie("node-map").CoreV1().Nodes().List(context.Background(), metav1.ListOptions{})
	if err != nil {
		panic(err)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.known = map[types.NodeName]bool{}
	for _, n := range list.Items {
		p.known[types.NodeName(n.Name)] = true
	}
}

func (p *providerNodeMap) knows(name types.NodeName) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.known[name]
}

// providerNodeMapTarget returns a NewTarget whose Cloud is a providerNodeMap
// with routes broken by set (as routesWrap's), which is given the map's
// look-up.
func providerNodeMapTarget(set func(known func(types.NodeName) bool, b *wrappedRoutes)) func(context.Context) (*conformance.Target, error) {
	return providerTarget(func(tgt *conformance.Target) cloudprovider.Interface {
		p := &providerNodeMap{}
		w := routesWrap(func(b *wrappedRoutes) { set(p.knows, b) })
		w.Interface = tgt.Cloud
		p.wrapped = &w
		return p
	})
}

// clausesProvider returns the clauses of the statements of the rules of this
// file, each quoted from its statement (see TestBrokenCoverage).
func clausesProvider() map[string][]string {
	return map[string][]string{
		"PROVIDER-ACCESSORS":        {"never (nil, true)", "nor a typed nil", "every claimed capability is offered"},
		"PROVIDER-NAME":             {"a constant", "bare name", "equal to Config.ProviderName when that is set"},
		"PROVIDER-CLUSTER-ID":       {"HasClusterID reports true"},
		"PROVIDER-REGISTRATION":     {"The provider is registered under Config.ProviderName", "its factory builds it from a nil reader", "or Config.CloudConfig", "panic", "re-registering"},
		"PROVIDER-BAD-CONFIG":       {"rejects Config.BadCloudConfig with an error", "never a panic"},
		"SENTINELS-UNWRAPPED":       {"ImplementedElsewhere from EnsureLoadBalancer", "UpdateLoadBalancer", "EnsureLoadBalancerDeleted"},
		"ARGS-NOT-MUTATED":          {"No call modifies its Service", "Node", "Route arguments"},
		"CTX-CANCELLED":             {"no call returns a wrong answer"},
		"CTX-CANCELLED-PROMPT":      {"every call returns within Config.Timeout"},
		"CTRL-NODE-INIT":            {"gets its provider ID", "addresses", "topology labels", "loses the taint"},
		"CTRL-NODE-TERMINATED":      {"the Node of a terminated instance is deleted within Config.Timeout+MaxStaleness after Hooks.CloudChanged", "the Nodes of running instances are kept"},
		"CTRL-NODE-SHUTDOWN":        {"the Node of a stopped instance gets the shutdown taint within Config.Timeout+MaxStaleness after Hooks.CloudChanged", "and is kept"},
		"CTRL-SERVICE-LB":           {"and an ingress"},
		"CTRL-SERVICE-BEFORE-NODES": {"once a Node is ready an ingress", "that Node behind its load balancer"},
		"CTRL-SERVICE-PORT":         {"a changed Service port reaches the cloud"},
		"CTRL-SERVICE-DELETE":       {"a deleted Service releases its load balancer", "then its finalizer"},
		"CTRL-SERVICE-CLASS":        {"a Service with spec.loadBalancerClass is left alone"},
		"CTRL-ROUTES":               {"routes appear for the nodes' pod CIDRs", "stay put while nothing changes", "go away with their nodes"},
	}
}
