package conformance_test

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	cloudprovider "k8s.io/cloud-provider"
	"k8s.io/utils/ptr"

	"github.com/ccmkit/ccmkit/fake"
	"github.com/ccmkit/ccmkit/instances"
	"github.com/ccmkit/ccmkit/loadbalancer"
	"github.com/ccmkit/ccmkit/provider"
	"github.com/ccmkit/ccmkit/routes"
	"github.com/ccmkit/ccmkit/testing/conformance"
)

// fakeClaims is what ccmkit's fake offers: everything but the deprecated
// Zones, load balancers that report IPs (not hostnames).
var fakeClaims = conformance.Claims{
	LoadBalancer: true, InstancesV2: true, Routes: true,
	UDP: true, SCTP: true, MixedProtocols: true, DualStackLoadBalancers: true, IPv6Routes: true, DualStackNodeAddresses: true, NodePortless: true, SourceRanges: true, SourceRangesAnnotation: true,
}

// fakeAppProtocols are the application protocols the fake serves
// (fake/cloud.go), claimed by the runs of the whole fake (withEverything).
var fakeAppProtocols = []string{"http", "https", "kubernetes.io/h2c"}

// fakePortSetting is the fake's per-port certificate reference
// (fake/annotations.go), for LB-PER-PORT.
var fakePortSetting = &conformance.PortSetting{Annotation: "fake.ccmkit.io/certificate", Values: [2]string{"cert-1", "cert-2"}}

// fakeConfig is the suite's configuration for ccmkit's fake, registered as
// "fake" by its package's init.
func fakeConfig() conformance.Config {
	return conformance.Config{
		NewTarget:      newFakeTarget,
		Claims:         fakeClaims,
		ProviderName:   "fake",
		BadCloudConfig: "clusterID: a\nnoSuchField: 1\n",
		Timeout:        10 * time.Second,
	}
}

// newFakeTarget builds a fresh fake cloud with three dual-stack instances,
// hooks over its control surface, and the cloud of another cluster over the
// same cloud (Target.OtherCluster).
func newFakeTarget(context.Context) (*conformance.Target, error) {
	return fakeTarget(fakeCloudConfig(), fake.Options{})
}

// sharedPoolsConfig is fakeCloudConfig with shared backend pools.
func sharedPoolsConfig() fake.Config {
	cfg := fakeCloudConfig()
	cfg.LoadBalancers.BackendPools = fake.BackendPoolsShared
	return cfg
}

// fakeCloudConfig is the configuration of newFakeTarget's cloud.
func fakeCloudConfig() fake.Config {
	return fake.Config{ClusterID: "conformance", InstanceCIDRs: []string{"10.0.0.0/16", "fd00:10::/64"}}
}

// fakeTarget builds fakeCloudTarget(cfg, opts) and, as
// Target.OtherCluster, a peer of its cloud configured as the cluster
// cfg.ClusterID+"-other": the fake owns load balancers and routes by its
// Config.ClusterID, not by the clusterName argument, so the isolation rules
// need the other cluster's provider.
func fakeTarget(cfg fake.Config, opts fake.Options) (*conformance.Target, error) {
	tgt, err := fakeCloudTarget(cfg, opts)
	if err != nil {
		return nil, err
	}
	other, err := fake.NewPeer(tgt.Cloud.(*fake.Cloud), cfg.ClusterID+"-other", fake.PeerOptions{})
	if err != nil {
		tgt.Close()
		return nil, err
	}
	return withOther(tgt, other, other.Shutdown), nil
}

// withOther sets tgt.OtherCluster to other, and makes tgt.Close call
// release before closing tgt's own cloud.
func withOther(tgt *conformance.Target, other cloudprovider.Interface, release func()) *conformance.Target {
	tgt.OtherCluster = other
	closeCloud := tgt.Close
	tgt.Close = func() {
		release()
		closeCloud()
	}
	return tgt
}

// fakeCloudTarget builds a fresh fake cloud from cfg and opts, with three
// instances, and no OtherCluster.
func fakeCloudTarget(cfg fake.Config, opts fake.Options) (*conformance.Target, error) {
	opts.Instances = append(opts.Instances, fake.Instance{Name: "node-a"}, fake.Instance{Name: "node-b", Zone: "zone-b"}, fake.Instance{Name: "node-c"})
	cloud, err := fake.New(cfg, opts)
	if err != nil {
		return nil, err
	}
	return fakeTargetOf(cloud, opts.Interceptor)
}

// outage returns interceptor Funcs under which every call of the cloud
// API fails with err.
func outage(err error) fake.Funcs {
	return fake.Funcs{
		FindLoadBalancers: func(context.Context, loadbalancer.Driver, loadbalancer.Query) ([]*loadbalancer.LoadBalancer, error) {
			return nil, err
		},
		ApplyLoadBalancer: func(context.Context, loadbalancer.Driver, loadbalancer.Action) (*loadbalancer.LoadBalancer, error) {
			return nil, err
		},
		ListLoadBalancers: func(context.Context, loadbalancer.ListDriver) ([]*loadbalancer.LoadBalancer, error) {
			return nil, err
		},
		DeleteLoadBalancer: func(context.Context, loadbalancer.Driver, *loadbalancer.LoadBalancer) error { return err },
		ReadRouteTable:     func(context.Context, routes.TableDriver) ([]routes.Entry, string, error) { return nil, "", err },
		WriteRouteTable:    func(context.Context, routes.TableDriver, string, []routes.Entry) error { return err },
		GetInstance: func(context.Context, instances.ListDriver, provider.ProviderID) (instances.Instance, error) {
			return instances.Instance{}, err
		},
		GetInstanceByName: func(context.Context, instances.ListDriver, string) (instances.Instance, error) {
			return instances.Instance{}, err
		},
		ListInstances: func(context.Context, instances.ListDriver) ([]instances.Instance, error) { return nil, err },
	}
}

// prefixStrings returns the CIDRs of ps in canonical form.
func prefixStrings(ps []netip.Prefix) []string {
	var out []string
	for _, p := range ps {
		out = append(out, p.String())
	}
	return out
}

// renamedInstance is the fixture instance whose Node is named unlike it, as
// a kubelet run with --hostname-override and --provider-id names it: its
// Node is one of Target.RenamedNodes, named renamedNode.
const renamedInstance, renamedNode = "node-c", "worker-7f3a"

// fakeTargetOf returns the Target of cloud: a Node per instance, that of
// renamedInstance renamed, and hooks over the control surface; funcs are
// the interceptor Funcs cloud was built with, which the end of an outage
// restores.
func fakeTargetOf(cloud *fake.Cloud, funcs fake.Funcs) (*conformance.Target, error) {
	var nodes, renamed []*v1.Node
	nodeName := map[string]string{} // by instance ID
	for _, in := range cloud.Snapshot().Instances {
		n, err := cloud.NodeFor(in.ID)
		if err != nil {
			return nil, err
		}
		if in.Name != renamedInstance {
			nodes = append(nodes, n)
		} else {
			n.Name = renamedNode
			renamed = append(renamed, n)
		}
		nodeName[in.ID] = n.Name
	}
	id := func(n *v1.Node) (string, error) {
		if n.Spec.ProviderID != "" {
			return strings.TrimPrefix(n.Spec.ProviderID, "fake://"), nil
		}
		for _, in := range cloud.Snapshot().Instances {
			if in.Name == n.Name {
				return in.ID, nil
			}
		}
		return "", fmt.Errorf("no instance for node %s", n.Name)
	}
	lbFor := func(cluster string, svc *v1.Service) (fake.LoadBalancer, error) {
		lb, ok := cloud.LoadBalancerFor(cluster, svc)
		if !ok {
			return lb, fmt.Errorf("no load balancer for %s/%s in cluster %q", svc.Namespace, svc.Name, cluster)
		}
		return lb, nil
	}
	state := func(f func(string) (fake.Instance, error)) func(context.Context, *v1.Node) error {
		return func(_ context.Context, n *v1.Node) error {
			i, err := id(n)
			if err != nil {
				return err
			}
			_, err = f(i)
			return err
		}
	}
	return &conformance.Target{
		Cloud:        cloud,
		Nodes:        nodes,
		RenamedNodes: renamed,
		Close:        cloud.Shutdown,
		Hooks: conformance.Hooks{
			CreateInstance: func(_ context.Context, name string) (*v1.Node, error) {
				in, err := cloud.AddInstance(fake.Instance{Name: name})
				if err != nil {
					return nil, err
				}
				return cloud.NodeFor(in.ID)
			},
			StopInstance:      state(cloud.StopInstance),
			StartInstance:     state(cloud.StartInstance),
			TerminateInstance: state(cloud.TerminateInstance),
			Owned: func(context.Context) ([]string, error) {
				s := cloud.Snapshot()
				var out []string
				for _, lb := range s.LoadBalancers {
					out = append(out, "loadbalancer/"+lb.ID)
				}
				for _, p := range s.BackendPools {
					out = append(out, "backendpool/"+p.ID)
				}
				for _, r := range s.Routes {
					out = append(out, "route/"+r.Cluster+"/"+r.Name)
				}
				for _, p := range s.AddressPools {
					if p.Purpose == "loadBalancers" {
						out = append(out, fmt.Sprintf("pool/%s/allocated=%d", p.CIDR, p.Allocated))
					}
				}
				return out, nil
			},
			Writes: func() int64 { c := cloud.Calls(); return c.Writes - c.Busy }, // a write refused as busy changed nothing
			Outage: func() func() {
				cloud.SetInterceptor(outage(errors.New("fake: injected outage")))
				return func() { cloud.SetInterceptor(funcs) }
			},
			Backends: func(_ context.Context, cluster string, svc *v1.Service) ([]string, error) {
				lb, err := lbFor(cluster, svc)
				members, perr := listenerPoolMembers(lb)
				if perr != nil {
					return nil, perr
				}
				var out []string
				for _, b := range append(append(lb.Spec.Backends, members...), poolMembers(cloud, lb.Spec.BackendPool)...) {
					name := b.NodeName
					if name == "" { // the cloud keeps instance IDs only
						in, ok := cloud.InstanceByID(strings.TrimPrefix(b.ProviderID, "fake://"))
						if !ok {
							return nil, fmt.Errorf("load balancer %s has backend %q, which is no instance", lb.ID, b.ProviderID)
						}
						name = cmp.Or(nodeName[in.ID], in.Name)
					}
					out = append(out, name)
				}
				return out, err
			},
			Listeners: func(_ context.Context, cluster string, svc *v1.Service) ([]conformance.Listener, error) {
				lb, err := lbFor(cluster, svc)
				seen := map[conformance.Listener]bool{}
				var out []conformance.Listener
				for _, l := range lb.Spec.Listeners { // one per IP family
					c := conformance.Listener{Protocol: l.Protocol, Port: l.Port, NodePort: l.NodePort, AppProtocol: l.AppProtocol}
					if !seen[c] {
						seen[c] = true
						out = append(out, c)
					}
				}
				return out, err
			},
			SourceRanges: func(_ context.Context, cluster string, svc *v1.Service) ([]string, error) {
				lb, err := lbFor(cluster, svc)
				return prefixStrings(lb.Spec.SourceRanges), err
			},
			HealthCheck: func(_ context.Context, cluster string, svc *v1.Service) (conformance.HealthCheck, error) {
				lb, err := lbFor(cluster, svc)
				hc, herr := listenerPoolsHealthCheck(lb)
				if herr != nil {
					return conformance.HealthCheck{}, herr
				}
				return conformance.HealthCheck{Port: hc.Port, Path: hc.Path}, err
			},
		},
	}, nil
}

// withEverything is cfg, for a run of the whole fake (TestFake and its
// variants), with what the fake offers beyond the base target the broken
// providers are built on: its application protocols and per-port
// certificate (LB-PER-PORT), and Hooks.CloudChanged dropping its caches
// with Hooks.Damage removing one backend behind its back
// (LB-PARTIAL-REPAIR). The broken providers keep the base: several of
// them would fail those rules too, for the cause of the rule they break.
//
// apps says whether the fake serves its application protocols (not when a
// variant narrows its capabilities).
func withEverything(cfg conformance.Config, apps bool) conformance.Config {
	if apps {
		cfg.Claims.AppProtocols = fakeAppProtocols
		cfg.PortSetting = fakePortSetting
	}
	newTarget := cfg.NewTarget
	cfg.NewTarget = func(ctx context.Context) (*conformance.Target, error) {
		tgt, err := newTarget(ctx)
		if err != nil {
			return nil, err
		}
		cloud := tgt.Cloud.(*fake.Cloud)
		lbFor := func(cluster string, svc *v1.Service) (fake.LoadBalancer, error) {
			lb, ok := cloud.LoadBalancerFor(cluster, svc)
			if !ok {
				return lb, fmt.Errorf("no load balancer for %s/%s in cluster %q", svc.Namespace, svc.Name, cluster)
			}
			return lb, nil
		}
		tgt.Hooks.CloudChanged = func(context.Context) error {
			cloud.DropCaches()
			return nil
		}
		tgt.Hooks.Damage = func(_ context.Context, cluster string, svc *v1.Service) (int, error) {
			lb, err := lbFor(cluster, svc)
			if err != nil {
				return 0, err
			}
			if lb.Spec.BackendPool != "" { // a shared pool: one of its members
				members := poolMembers(cloud, lb.Spec.BackendPool)
				if len(members) == 0 {
					return 0, fmt.Errorf("load balancer %s: its pool %s has no member to remove", lb.ID, lb.Spec.BackendPool)
				}
				_, err := cloud.RemoveBackendPoolMember(lb.Spec.BackendPool, backendKey(members[0]))
				return 1, err
			}
			bs := lb.Spec.Backends
			for _, l := range lb.Spec.Listeners { // hierarchical: a member of the first pool
				if len(bs) == 0 && l.Pool != nil {
					bs = l.Pool.Backends
				}
			}
			if len(bs) == 0 {
				return 0, fmt.Errorf("load balancer %s has no backend to remove", lb.ID)
			}
			_, err = cloud.RemoveBackend(lb.ID, backendKey(bs[0]))
			return 1, err
		}
		return tgt, nil
	}
	return cfg
}

// backendKey is the key the fake's control surface removes b by: its Node
// name, or, on a cloud keeping instance IDs, its provider ID.
func backendKey(b loadbalancer.Backend) string { return cmp.Or(b.NodeName, b.ProviderID) }

// listenerPoolMembers returns the members of lb's listener pools, on a
// hierarchical cloud (loadbalancer.Spec.ListenerPools), where each
// listener has its own: every pool must hold the same members, else the
// load balancer is not converged and the hook says so. None for a flat
// load balancer.
func listenerPoolMembers(lb fake.LoadBalancer) ([]loadbalancer.Backend, error) {
	if !lb.Spec.ListenerPools {
		return nil, nil
	}
	var first []loadbalancer.Backend
	for i, l := range lb.Spec.Listeners {
		if l.Pool == nil {
			return nil, fmt.Errorf("load balancer %s: listener %s/%d has no pool", lb.ID, l.Protocol, l.Port)
		}
		ids := func(bs []loadbalancer.Backend) []string {
			var out []string
			for _, b := range bs {
				out = append(out, b.ProviderID+b.NodeName+b.IPv4.String()+b.IPv6.String())
			}
			slices.Sort(out)
			return out
		}
		if i == 0 {
			first = l.Pool.Backends
		} else if !slices.Equal(ids(first), ids(l.Pool.Backends)) {
			return nil, fmt.Errorf("load balancer %s: the pools of its listeners hold different members: %v and %v", lb.ID, ids(first), ids(l.Pool.Backends))
		}
	}
	return first, nil
}

// listenerPoolsHealthCheck returns lb's health check: its own on a flat
// load balancer, the one every listener pool has on a hierarchical one
// (an error when they differ or one has none).
func listenerPoolsHealthCheck(lb fake.LoadBalancer) (loadbalancer.HealthCheck, error) {
	if !lb.Spec.ListenerPools {
		return lb.Spec.HealthCheck, nil
	}
	var hc *loadbalancer.HealthCheck
	for _, l := range lb.Spec.Listeners {
		switch {
		case l.Pool == nil || l.Pool.HealthCheck == nil:
			return loadbalancer.HealthCheck{}, fmt.Errorf("load balancer %s: listener %s/%d has no health monitor", lb.ID, l.Protocol, l.Port)
		case hc != nil && *hc != *l.Pool.HealthCheck:
			return loadbalancer.HealthCheck{}, fmt.Errorf("load balancer %s: its listeners' health monitors differ: %+v and %+v", lb.ID, *hc, *l.Pool.HealthCheck)
		}
		hc = l.Pool.HealthCheck
	}
	if hc == nil {
		return loadbalancer.HealthCheck{}, nil
	}
	return *hc, nil
}

// poolMembers returns the members of cloud's backend pool id (none for
// "", or for a pool that does not exist: a load balancer referencing a
// missing pool serves no node).
func poolMembers(cloud *fake.Cloud, id string) []loadbalancer.Backend {
	if id == "" {
		return nil
	}
	for _, p := range cloud.Snapshot().BackendPools {
		if p.ID == id {
			return p.Spec.Backends
		}
	}
	return nil
}

// TestFake runs the whole suite against ccmkit's fake: every rule passes.
func TestFake(t *testing.T) {
	checkREADMERun(t, "ccmkit's fake", conformance.Run(t, withEverything(fakeConfig(), true)))
}

// TestFakeVariants runs the suite against the fake configured to offer
// less, with the claims narrowed to match: the rules for what is not offered
// (rejections, IPv4 only, hostnames) pass as well.
func TestFakeVariants(t *testing.T) {
	for _, tc := range []struct {
		name, reason string
		claims       conformance.Claims
		cfg          fake.Config
		opts         fake.Options
		throttles    bool // some cloud calls must have been throttled
	}{
		{
			name:   "tcp-only",
			reason: "load balancers without any optional feature reject every Service that asks for one",
			claims: conformance.Claims{LoadBalancer: true, InstancesV2: true, Routes: true},
			cfg:    fake.Config{ClusterID: "conformance", InstanceCIDRs: []string{"10.0.0.0/16"}, Routes: fake.RoutesSection{IPv4Only: true}},
			opts:   fake.Options{LoadBalancerCapabilities: &loadbalancer.Capabilities{}},
		},
		{
			name:   "hostnames",
			reason: "load balancers that report a hostname instead of an IP",
			claims: func() conformance.Claims { c := fakeClaims; c.HostnameIngress = true; return c }(),
			cfg: fake.Config{ClusterID: "conformance", InstanceCIDRs: []string{"10.0.0.0/16", "fd00:10::/64"},
				LoadBalancers: fake.LoadBalancerSection{HostnameSuffix: "lb.example.com"}},
		},
		{
			name:   "realistic",
			reason: "the fake's realistic mode: load balancers provision for a while (an api.RetryError), calls are rate limited (api.RetryErrors), backends are kept by instance ID",
			claims: fakeClaims,
			// Short provisioning, and a rate limit for the suite's controller
			// periods (tens of milliseconds, where a cluster's are seconds):
			// bursts are throttled, the controllers are not starved. With
			// the realistic 20 reads/s, the route controller alone (every
			// 50ms, two reads per ListRoutes) asks for 40: CTRL-ROUTES
			// starves.
			cfg: fake.Config{ClusterID: "conformance", InstanceCIDRs: []string{"10.0.0.0/16", "fd00:10::/64"}, Realistic: true,
				LoadBalancers: fake.LoadBalancerSection{ProvisioningDelay: &provider.Duration{Duration: 100 * time.Millisecond}},
				RateLimit:     fake.RateLimit{ReadsPerSecond: ptr.To(200.0), WritesPerSecond: ptr.To(100.0), Burst: 5}},
			throttles: true,
		},
		{
			name:   "shared-pools",
			reason: "load balancers whose backends are the same nodes share one backend pool: a node joining is one write however many Services, a pool is never deleted while referenced nor leaked",
			claims: func() conformance.Claims { c := fakeClaims; c.SharedBackendPools = true; return c }(),
			cfg:    sharedPoolsConfig(),
		},
		{
			name:   "coalesced",
			reason: "UpdateLoadBalancer writes behind (loadbalancer.Options.CoalesceWindow, at the recommended 2s): the rules flush it (Flusher), the controller rules wait for its window",
			claims: fakeClaims,
			cfg: fake.Config{ClusterID: "conformance", InstanceCIDRs: []string{"10.0.0.0/16", "fd00:10::/64"},
				LoadBalancers: fake.LoadBalancerSection{CoalesceWindow: &provider.Duration{Duration: loadbalancer.RecommendedCoalesceWindow}}},
		},
		{
			name:   "coalesced-shared-pools",
			reason: "coalesced pool writes: a write-behind provider over shared backend pools",
			claims: func() conformance.Claims { c := fakeClaims; c.SharedBackendPools = true; return c }(),
			cfg: func() fake.Config {
				c := sharedPoolsConfig()
				c.LoadBalancers.CoalesceWindow = &provider.Duration{Duration: loadbalancer.RecommendedCoalesceWindow}
				return c
			}(),
		},
		{
			name:   "unique-names",
			reason: "a cloud that refuses a second load balancer of one name, whose provider creates without confirming its cache's miss (Capabilities.UniqueNames), realistic and over shared pools",
			claims: func() conformance.Claims { c := fakeClaims; c.SharedBackendPools = true; return c }(),
			cfg: func() fake.Config {
				c := sharedPoolsConfig()
				c.LoadBalancers.UniqueNames = true
				return c
			}(),
		},
		{
			name:   "hierarchical",
			reason: "load balancers built from separate listener, pool, member and monitor objects, busy after each write and refusing writes meanwhile (409), listener ports immutable",
			claims: fakeClaims,
			// 200ms busy after each write, where Octavia's is about a second:
			// the suite builds hundreds of load balancers, each of nine or
			// more writes. TestHierarchicalThroughReconciler (package fake)
			// and LB-MULTI-STEP cover a busy time of 1s.
			cfg: fake.Config{ClusterID: "conformance", InstanceCIDRs: []string{"10.0.0.0/16", "fd00:10::/64"},
				LoadBalancers: fake.LoadBalancerSection{Hierarchical: true, BusyAfterWrite: &provider.Duration{Duration: 200 * time.Millisecond}}},
		},
		{
			name:   "hierarchical-realistic",
			reason: "the hierarchical mode with the realistic one: provisioning, rate limits, instance-ID members",
			claims: fakeClaims,
			cfg: fake.Config{ClusterID: "conformance", InstanceCIDRs: []string{"10.0.0.0/16", "fd00:10::/64"}, Realistic: true,
				LoadBalancers: fake.LoadBalancerSection{Hierarchical: true, BusyAfterWrite: &provider.Duration{Duration: 200 * time.Millisecond},
					ProvisioningDelay: &provider.Duration{Duration: 100 * time.Millisecond}},
				RateLimit: fake.RateLimit{ReadsPerSecond: ptr.To(200.0), WritesPerSecond: ptr.To(100.0), Burst: 5}},
			throttles: true,
		},
		{
			name:   "node-addresses-in-routes",
			reason: "routes listed with EnableNodeAddresses, compared by the route controller",
			claims: fakeClaims,
			cfg: fake.Config{ClusterID: "conformance", InstanceCIDRs: []string{"10.0.0.0/16", "fd00:10::/64"},
				Routes: fake.RoutesSection{EnableNodeAddresses: true}},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			cfg := fakeConfig()
			cfg.Claims = tc.claims
			var throttled atomic.Int64
			cfg.NewTarget = func(context.Context) (*conformance.Target, error) {
				tgt, err := fakeTarget(tc.cfg, tc.opts)
				if err != nil {
					return nil, err
				}
				cloud, closeAll := tgt.Cloud.(*fake.Cloud), tgt.Close
				tgt.Close = func() {
					throttled.Add(cloud.Calls().Throttled)
					closeAll()
				}
				return tgt, nil
			}
			if err := conformance.Check(t.Context(), withEverything(cfg, tc.opts.LoadBalancerCapabilities == nil)); err != nil {
				t.Errorf("%s (%s): the fake fails:\n%v", tc.name, tc.reason, err)
			}
			if n := throttled.Load(); tc.throttles != (n > 0) {
				t.Errorf("%s (%s): %d cloud calls were throttled, expected throttling: %v", tc.name, tc.reason, n, tc.throttles)
			}
		})
	}
}

// BenchmarkCheckFake measures one run of the whole suite (every rule, the
// controller scenarios included) against ccmkit's fake.
func BenchmarkCheckFake(b *testing.B) {
	cfg := fakeConfig()
	for b.Loop() {
		if err := conformance.Check(b.Context(), cfg); err != nil {
			b.Fatal(err)
		}
	}
}

// twoClusters returns a NewTarget giving a fresh fake cloud
// (fakeCloudTarget) and, as Target.OtherCluster, another fresh fake cloud
// whose provider uses the first cloud's load balancers (shareLB) or routes
// (shareRoutes) instead of its own: a provider that ignores its cluster
// identity there. What is not shared is isolated by construction.
func twoClusters(shareLB, shareRoutes bool) func(context.Context) (*conformance.Target, error) {
	return func(context.Context) (*conformance.Target, error) {
		cfg := fakeCloudConfig()
		tgt, err := fakeCloudTarget(cfg, fake.Options{})
		if err != nil {
			return nil, err
		}
		cfg.ClusterID = "conformance-other"
		other, err := fakeCloudTarget(cfg, fake.Options{})
		if err != nil {
			tgt.Close()
			return nil, err
		}
		o := &wrapped{Interface: other.Cloud}
		if lb, ok := tgt.Cloud.LoadBalancer(); ok && shareLB {
			o.lb = func(wrappedLB) cloudprovider.LoadBalancer { return lb }
		}
		if rs, ok := tgt.Cloud.Routes(); ok && shareRoutes {
			o.routes = func(wrappedRoutes) cloudprovider.Routes { return rs }
		}
		return withOther(tgt, o, other.Close), nil
	}
}
