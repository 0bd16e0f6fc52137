package conformance_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/ccmkit/ccmkit/fake"
	"github.com/ccmkit/ccmkit/loadbalancer"
	"github.com/ccmkit/ccmkit/testing/conformance"
)

// fakeClaims is what ccmkit's fake offers: everything but the deprecated
// Zones, load balancers that report IPs (not hostnames).
var fakeClaims = conformance.Claims{
	LoadBalancer: true, InstancesV2: true, Routes: true,
	UDP: true, SCTP: true, MixedProtocols: true, DualStack: true, NodePortLess: true, SourceRanges: true,
}

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

// newFakeTarget builds a fresh fake cloud with three dual-stack instances
// and hooks over its control surface.
func newFakeTarget(context.Context) (*conformance.Target, error) {
	return fakeTarget(fake.Config{ClusterID: "conformance", InstanceCIDRs: []string{"10.0.0.0/16", "fd00:10::/64"}})
}

// fakeTarget builds a fresh fake cloud from cfg and opts, with three
// instances.
func fakeTarget(cfg fake.Config, opts ...fake.Option) (*conformance.Target, error) {
	opts = append(opts, fake.WithInstances(fake.Instance{Name: "node-a"}, fake.Instance{Name: "node-b", Zone: "zone-b"}, fake.Instance{Name: "node-c"}))
	cloud, err := fake.New(cfg, opts...)
	if err != nil {
		return nil, err
	}
	return fakeTargetOf(cloud)
}

// fakeTargetOf returns the Target of cloud: a Node per instance and hooks
// over the control surface.
func fakeTargetOf(cloud *fake.Cloud) (*conformance.Target, error) {
	var nodes []*v1.Node
	for _, in := range cloud.Snapshot().Instances {
		n, err := cloud.NodeFor(in.ID)
		if err != nil {
			return nil, err
		}
		nodes = append(nodes, n)
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
		Cloud: cloud,
		Nodes: nodes,
		Close: cloud.Shutdown,
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
				for _, r := range s.Routes {
					out = append(out, "route/"+r.Cluster+"/"+r.Name)
				}
				for _, p := range s.Pools {
					if p.Purpose == "loadBalancers" {
						out = append(out, fmt.Sprintf("pool/%s/allocated=%d", p.CIDR, p.Allocated))
					}
				}
				return out, nil
			},
			Writes: func() int64 { return cloud.Calls().Writes },
			Outage: func() func() {
				if err := cloud.InjectFault(fake.Fault{Times: -1}); err != nil {
					panic(err)
				}
				return cloud.ClearFaults
			},
			Backends: func(_ context.Context, cluster string, svc *v1.Service) ([]string, error) {
				lb, err := lbFor(cluster, svc)
				var out []string
				for _, b := range lb.Backends {
					out = append(out, b.NodeName)
				}
				return out, err
			},
			Listeners: func(_ context.Context, cluster string, svc *v1.Service) ([]conformance.Listener, error) {
				lb, err := lbFor(cluster, svc)
				seen := map[conformance.Listener]bool{}
				var out []conformance.Listener
				for _, l := range lb.Listeners { // one per IP family
					c := conformance.Listener{Protocol: v1.Protocol(l.Protocol), Port: l.Port, NodePort: l.NodePort}
					if !seen[c] {
						seen[c] = true
						out = append(out, c)
					}
				}
				return out, err
			},
			SourceRanges: func(_ context.Context, cluster string, svc *v1.Service) ([]string, error) {
				lb, err := lbFor(cluster, svc)
				return lb.SourceRanges, err
			},
			HealthCheck: func(_ context.Context, cluster string, svc *v1.Service) (conformance.HealthCheck, error) {
				lb, err := lbFor(cluster, svc)
				return conformance.HealthCheck{Port: lb.HealthCheck.Port, Path: lb.HealthCheck.Path}, err
			},
		},
	}, nil
}

// TestFake runs the whole suite against ccmkit's fake: every rule passes.
func TestFake(t *testing.T) {
	conformance.Run(t, fakeConfig())
}

// TestFakeVariants runs the suite against the fake configured to offer
// less, with the claims narrowed to match: the rules for what is not offered
// (rejections, IPv4 only, hostnames) pass as well.
func TestFakeVariants(t *testing.T) {
	for _, tc := range []struct {
		name, reason string
		claims       conformance.Claims
		cfg          fake.Config
		opts         []fake.Option
	}{
		{
			name:   "tcp-only",
			reason: "load balancers without any optional feature reject every Service that asks for one",
			claims: conformance.Claims{LoadBalancer: true, InstancesV2: true, Routes: true, DualStack: false},
			cfg:    fake.Config{ClusterID: "conformance", InstanceCIDRs: []string{"10.0.0.0/16"}, Routes: fake.RoutesConfig{IPv4Only: true}},
			opts:   []fake.Option{fake.WithLoadBalancerCapabilities(loadbalancer.Capabilities{})},
		},
		{
			name:   "hostnames",
			reason: "load balancers that report a hostname instead of an IP",
			claims: func() conformance.Claims { c := fakeClaims; c.HostnameIngress = true; return c }(),
			cfg: fake.Config{ClusterID: "conformance", InstanceCIDRs: []string{"10.0.0.0/16", "fd00:10::/64"},
				LoadBalancers: fake.LoadBalancerConfig{HostnameSuffix: "lb.example.com"}},
		},
		{
			name:   "node-addresses-in-routes",
			reason: "routes listed with EnableNodeAddresses, compared by the route controller",
			claims: fakeClaims,
			cfg: fake.Config{ClusterID: "conformance", InstanceCIDRs: []string{"10.0.0.0/16", "fd00:10::/64"},
				Routes: fake.RoutesConfig{EnableNodeAddresses: true}},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			cfg := fakeConfig()
			cfg.Claims = tc.claims
			cfg.NewTarget = func(context.Context) (*conformance.Target, error) { return fakeTarget(tc.cfg, tc.opts...) }
			if err := conformance.Check(t.Context(), cfg); err != nil {
				t.Errorf("%s (%s): the fake fails:\n%v", tc.name, tc.reason, err)
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
