package fake_test

import (
	"errors"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	cloudprovider "k8s.io/cloud-provider"
	"k8s.io/utils/ptr"

	"github.com/ccmkit/ccmkit/fake"
	"github.com/ccmkit/ccmkit/loadbalancer"
	"github.com/ccmkit/ccmkit/provider"
)

// checkStatus enforces the status contract: non-nil, ≥1 ingress, each a
// valid IP or a hostname that is not an IP, ipMode only with an IP.
func checkStatus(t *testing.T, st *v1.LoadBalancerStatus) {
	t.Helper()
	if st == nil || len(st.Ingress) == 0 {
		t.Fatalf("status = %+v; want at least one ingress", st)
	}
	for i, in := range st.Ingress {
		_, ipErr := netip.ParseAddr(in.IP)
		_, hostIsIP := netip.ParseAddr(in.Hostname)
		switch {
		case in.IP != "" && in.Hostname != "":
			t.Errorf("ingress[%d] = %+v; want an IP or a hostname, not both", i, in)
		case in.IP != "" && ipErr != nil:
			t.Errorf("ingress[%d].ip %q is not an IP", i, in.IP)
		case in.IP == "" && (in.Hostname == "" || hostIsIP == nil):
			t.Errorf("ingress[%d] = %+v; want a valid IP or a hostname that is not an IP", i, in)
		case in.IP == "" && in.IPMode != nil:
			t.Errorf("ingress[%d] has ipMode %v without an IP", i, *in.IPMode)
		}
	}
}

func TestEnsureIdempotent(t *testing.T) {
	c, nodes := cloudWithNodes(t, fake.Config{}, 3)
	lb := lbOf(t, c)
	svc := service("web")
	st1, err := lb.EnsureLoadBalancer(t.Context(), cluster, svc, nodes)
	if err != nil {
		t.Fatalf("EnsureLoadBalancer: %v", err)
	}
	checkStatus(t, st1)

	// Every CCM restart calls Ensure again: same ingress, no cloud write.
	before := c.Calls()
	st2, err := lb.EnsureLoadBalancer(t.Context(), cluster, svc, nodes)
	if err != nil {
		t.Fatalf("second EnsureLoadBalancer: %v", err)
	}
	if diff := cmp.Diff(st1, st2, fake.CmpModel); diff != "" {
		t.Errorf("second Ensure status (-want +got):\n%s", diff)
	}
	if w := c.Calls().Writes - before.Writes; w != 0 {
		t.Errorf("second Ensure made %d cloud writes; want 0 when converged", w)
	}
	if got := len(c.Snapshot().LoadBalancers); got != 1 {
		t.Errorf("cloud has %d load balancers; want 1", got)
	}
}

func TestLoadBalancerLifecycle(t *testing.T) {
	c, nodes := cloudWithNodes(t, fake.Config{}, 2)
	lb := lbOf(t, c)
	svc := service("web")

	if _, exists, err := lb.GetLoadBalancer(t.Context(), cluster, svc); exists || err != nil {
		t.Fatalf("Get before Ensure = exists %v, %v; want false, nil", exists, err)
	}
	if err := lb.EnsureLoadBalancerDeleted(t.Context(), cluster, svc); err != nil {
		t.Errorf("Delete of an unknown load balancer = %v; want nil", err)
	}
	st, err := lb.EnsureLoadBalancer(t.Context(), cluster, svc, nodes)
	if err != nil {
		t.Fatal(err)
	}
	got, exists, err := lb.GetLoadBalancer(t.Context(), cluster, svc)
	if !exists || err != nil {
		t.Fatalf("Get after Ensure = exists %v, %v; want true, nil", exists, err)
	}
	if diff := cmp.Diff(st, got, fake.CmpModel); diff != "" {
		t.Errorf("Get status (-Ensure +Get):\n%s", diff)
	}
	if p := lbPoolUse(c); p != 1 {
		t.Errorf("IPv4 pool has %d addresses allocated; want 1", p)
	}

	// The controller deletes from a stale Service: type ClusterIP, no node ports.
	stale := svc.DeepCopy()
	stale.Spec.Type = v1.ServiceTypeClusterIP
	for i := range stale.Spec.Ports {
		stale.Spec.Ports[i].NodePort = 0
	}
	if err := lb.EnsureLoadBalancerDeleted(t.Context(), cluster, stale); err != nil {
		t.Fatalf("Delete from a stale Service: %v", err)
	}
	if _, exists, err := lb.GetLoadBalancer(t.Context(), cluster, svc); exists || err != nil {
		t.Errorf("Get after Delete = exists %v, %v; want false, nil", exists, err)
	}
	if p := lbPoolUse(c); p != 0 {
		t.Errorf("IPv4 pool has %d addresses allocated after Delete; want 0 (released)", p)
	}
	if err := lb.EnsureLoadBalancerDeleted(t.Context(), cluster, stale); err != nil {
		t.Errorf("second Delete = %v; want nil", err)
	}

	// Ensure after Delete recreates.
	if _, err := lb.EnsureLoadBalancer(t.Context(), cluster, svc, nodes); err != nil {
		t.Fatalf("Ensure after Delete: %v", err)
	}
	if _, exists, _ := lb.GetLoadBalancer(t.Context(), cluster, svc); !exists {
		t.Error("Get after re-Ensure: exists false; want true")
	}
}

func lbPoolUse(c *fake.Cloud) int {
	for _, p := range c.Snapshot().AddressPools {
		if p.Purpose == "loadBalancers" && p.CIDR == fake.DefaultIPv4Pool {
			return p.Allocated
		}
	}
	return -1
}

func TestExistsWhileAnyPieceRemains(t *testing.T) {
	c, nodes := cloudWithNodes(t, fake.Config{}, 1)
	lb := lbOf(t, c)
	svc := service("web")
	if _, err := lb.EnsureLoadBalancer(t.Context(), cluster, svc, nodes); err != nil {
		t.Fatal(err)
	}
	boom := errors.New("delete failed")
	if err := c.AddFault(fake.Fault{Op: fake.OpDeleteLoadBalancer, Times: 1, Err: boom}); err != nil {
		t.Fatal(err)
	}
	if err := lb.EnsureLoadBalancerDeleted(t.Context(), cluster, svc); !errors.Is(err, boom) {
		t.Fatalf("Delete with a failing cloud = %v; want %v", err, boom)
	}
	if _, exists, err := lb.GetLoadBalancer(t.Context(), cluster, svc); !exists || err != nil {
		t.Errorf("Get after a failed Delete = exists %v, %v; want true, nil (the finalizer must stay)", exists, err)
	}
}

func TestUpdateSetsBackendsAndNeverMutatesArguments(t *testing.T) {
	c, nodes := cloudWithNodes(t, fake.Config{}, 4)
	lb := lbOf(t, c)
	svc := service("web")
	svcCopy := svc.DeepCopy()
	nodesCopy := make([]*v1.Node, len(nodes))
	for i, n := range nodes {
		nodesCopy[i] = n.DeepCopy()
	}
	if _, err := lb.EnsureLoadBalancer(t.Context(), cluster, svc, nodes[:2]); err != nil {
		t.Fatal(err)
	}
	if err := lb.UpdateLoadBalancer(t.Context(), cluster, svc, nodes[1:]); err != nil {
		t.Fatal(err)
	}
	got, _ := c.LoadBalancerFor(cluster, svc)
	var names []string
	for _, b := range got.Spec.Backends {
		names = append(names, b.NodeName)
	}
	if diff := cmp.Diff([]string{"node-02", "node-03", "node-04"}, names, fake.CmpModel); diff != "" {
		t.Errorf("backends after Update (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(svcCopy, svc, fake.CmpModel); diff != "" {
		t.Errorf("Service argument modified (-before +after):\n%s", diff)
	}
	if diff := cmp.Diff(nodesCopy, nodes, fake.CmpModel); diff != "" {
		t.Errorf("Node arguments modified (-before +after):\n%s", diff)
	}
	// NotReady nodes and nodes without a providerID are not dropped by the
	// controller; a node without a providerID cannot be a backend.
	notReady := nodes[0].DeepCopy()
	notReady.Status.Conditions = []v1.NodeCondition{{Type: v1.NodeReady, Status: v1.ConditionFalse}}
	if err := lb.UpdateLoadBalancer(t.Context(), cluster, svc, []*v1.Node{notReady}); err != nil {
		t.Fatal(err)
	}
	got, _ = c.LoadBalancerFor(cluster, svc)
	if len(got.Spec.Backends) != 1 || got.Spec.Backends[0].NodeName != notReady.Name {
		t.Errorf("backends = %+v; want exactly the NotReady node %s", got.Spec.Backends, notReady.Name)
	}
	noID := nodes[3].DeepCopy()
	noID.Spec.ProviderID = ""
	if err := lb.UpdateLoadBalancer(t.Context(), cluster, svc, []*v1.Node{notReady, noID}); err != nil {
		t.Errorf("Update with a node without providerID: %v; want it left out, not an error", err)
	}
	got, _ = c.LoadBalancerFor(cluster, svc)
	if len(got.Spec.Backends) != 1 {
		t.Errorf("backends = %+v; want the node without providerID left out", got.Spec.Backends)
	}
}

func TestLoadBalancerFeatures(t *testing.T) {
	_, nodes := cloudWithNodes(t, fake.Config{}, 2)
	tests := []struct {
		name      string
		reason    string
		mutate    func(*v1.Service)
		listeners []loadbalancer.Listener
		health    loadbalancer.HealthCheck
		ranges    []string
		vips      int
	}{
		{
			name: "tcp cluster policy", reason: "Cluster policy probes kube-proxy :10256/healthz",
			mutate:    func(*v1.Service) {},
			listeners: []loadbalancer.Listener{{ListenerKey: loadbalancer.ListenerKey{Family: v1.IPv4Protocol, Protocol: v1.ProtocolTCP, Port: 80}, NodePort: 30080}},
			health:    loadbalancer.HealthCheck{Protocol: loadbalancer.HealthCheckHTTP, Port: 10256, Path: "/healthz"},
			ranges:    []string{"0.0.0.0/0"}, vips: 1,
		},
		{
			name: "local policy", reason: "Local policy probes spec.healthCheckNodePort /healthz",
			mutate: func(s *v1.Service) {
				s.Spec.ExternalTrafficPolicy = v1.ServiceExternalTrafficPolicyLocal
				s.Spec.HealthCheckNodePort = 31999
			},
			listeners: []loadbalancer.Listener{{ListenerKey: loadbalancer.ListenerKey{Family: v1.IPv4Protocol, Protocol: v1.ProtocolTCP, Port: 80}, NodePort: 30080}},
			health:    loadbalancer.HealthCheck{Protocol: loadbalancer.HealthCheckHTTP, Port: 31999, Path: "/healthz"},
			ranges:    []string{"0.0.0.0/0"}, vips: 1,
		},
		{
			name: "mixed tcp udp sctp", reason: "every protocol is supported, on one load balancer",
			mutate: func(s *v1.Service) {
				s.Spec.Ports = append(s.Spec.Ports,
					v1.ServicePort{Name: "dns", Protocol: v1.ProtocolUDP, Port: 53, NodePort: 30053},
					v1.ServicePort{Name: "sig", Protocol: v1.ProtocolSCTP, Port: 9, NodePort: 30009})
			},
			listeners: []loadbalancer.Listener{
				{ListenerKey: loadbalancer.ListenerKey{Family: v1.IPv4Protocol, Protocol: v1.ProtocolSCTP, Port: 9}, NodePort: 30009},
				{ListenerKey: loadbalancer.ListenerKey{Family: v1.IPv4Protocol, Protocol: v1.ProtocolTCP, Port: 80}, NodePort: 30080},
				{ListenerKey: loadbalancer.ListenerKey{Family: v1.IPv4Protocol, Protocol: v1.ProtocolUDP, Port: 53}, NodePort: 30053},
			},
			health: loadbalancer.HealthCheck{Protocol: loadbalancer.HealthCheckHTTP, Port: 10256, Path: "/healthz"},
			ranges: []string{"0.0.0.0/0"}, vips: 1,
		},
		{
			name: "no node ports", reason: "allocateLoadBalancerNodePorts=false gives listeners without node port",
			mutate: func(s *v1.Service) {
				s.Spec.AllocateLoadBalancerNodePorts = ptr.To(false)
				s.Spec.Ports[0].NodePort = 0
			},
			listeners: []loadbalancer.Listener{{ListenerKey: loadbalancer.ListenerKey{Family: v1.IPv4Protocol, Protocol: v1.ProtocolTCP, Port: 80}}},
			health:    loadbalancer.HealthCheck{Protocol: loadbalancer.HealthCheckHTTP, Port: 10256, Path: "/healthz"},
			ranges:    []string{"0.0.0.0/0"}, vips: 1,
		},
		{
			name: "source ranges from spec", reason: "spec.loadBalancerSourceRanges wins over the annotation",
			mutate: func(s *v1.Service) {
				s.Spec.LoadBalancerSourceRanges = []string{"192.0.2.0/24"}
				s.Annotations = map[string]string{v1.AnnotationLoadBalancerSourceRangesKey: "198.51.100.0/24"}
			},
			listeners: []loadbalancer.Listener{{ListenerKey: loadbalancer.ListenerKey{Family: v1.IPv4Protocol, Protocol: v1.ProtocolTCP, Port: 80}, NodePort: 30080}},
			health:    loadbalancer.HealthCheck{Protocol: loadbalancer.HealthCheckHTTP, Port: 10256, Path: "/healthz"},
			ranges:    []string{"192.0.2.0/24"}, vips: 1,
		},
		{
			name: "source ranges from annotation", reason: "the annotation applies when the spec has none",
			mutate: func(s *v1.Service) {
				s.Annotations = map[string]string{v1.AnnotationLoadBalancerSourceRangesKey: "198.51.100.0/24"}
			},
			listeners: []loadbalancer.Listener{{ListenerKey: loadbalancer.ListenerKey{Family: v1.IPv4Protocol, Protocol: v1.ProtocolTCP, Port: 80}, NodePort: 30080}},
			health:    loadbalancer.HealthCheck{Protocol: loadbalancer.HealthCheckHTTP, Port: 10256, Path: "/healthz"},
			ranges:    []string{"198.51.100.0/24"}, vips: 1,
		},
		{
			name: "dual stack", reason: "one VIP per family; allow-all for every family",
			mutate: func(s *v1.Service) {
				s.Spec.IPFamilies = []v1.IPFamily{v1.IPv6Protocol, v1.IPv4Protocol}
				s.Spec.IPFamilyPolicy = ptr.To(v1.IPFamilyPolicyRequireDualStack)
			},
			listeners: []loadbalancer.Listener{
				{ListenerKey: loadbalancer.ListenerKey{Family: v1.IPv4Protocol, Protocol: v1.ProtocolTCP, Port: 80}, NodePort: 30080},
				{ListenerKey: loadbalancer.ListenerKey{Family: v1.IPv6Protocol, Protocol: v1.ProtocolTCP, Port: 80}, NodePort: 30080},
			},
			health: loadbalancer.HealthCheck{Protocol: loadbalancer.HealthCheckHTTP, Port: 10256, Path: "/healthz"},
			ranges: []string{"0.0.0.0/0", "::/0"}, vips: 2,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newCloud(t, fake.Config{InstanceCIDRs: []string{"10.0.0.0/16"}}, fake.Options{Instances: []fake.Instance{{Name: "node-01"}, {Name: "node-02"}}})
			svc := service("web")
			tt.mutate(svc)
			st, err := lbOf(t, c).EnsureLoadBalancer(t.Context(), cluster, svc, nodes)
			if err != nil {
				t.Fatalf("EnsureLoadBalancer: %v (%s)", err, tt.reason)
			}
			checkStatus(t, st)
			got, ok := c.LoadBalancerFor(cluster, svc)
			if !ok {
				t.Fatal("no load balancer in the cloud")
			}
			for i := range tt.listeners { // the fake's per-port settings, unset on these Services
				tt.listeners[i].Settings = map[string]string{"fake.ccmkit.io/certificate": "", "fake.ccmkit.io/https-redirect": "", "fake.ccmkit.io/proxy-protocol-ports": ""}
			}
			if diff := cmp.Diff(tt.listeners, got.Spec.Listeners, fake.CmpModel); diff != "" {
				t.Errorf("listeners (-want +got), %s:\n%s", tt.reason, diff)
			}
			if diff := cmp.Diff(tt.health, got.Spec.HealthCheck, fake.CmpModel); diff != "" {
				t.Errorf("health check (-want +got), %s:\n%s", tt.reason, diff)
			}
			if diff := cmp.Diff(tt.ranges, prefixStrings(got.Spec.SourceRanges), fake.CmpModel); diff != "" {
				t.Errorf("source ranges (-want +got), %s:\n%s", tt.reason, diff)
			}
			if len(got.VIPs) != tt.vips || len(st.Ingress) != tt.vips {
				t.Errorf("VIPs %v, ingress %v; want %d of each (%s)", got.VIPs, st.Ingress, tt.vips, tt.reason)
			}
		})
	}
}

func TestUnsupportedFeaturesAreRejected(t *testing.T) {
	c, nodes := cloudWithNodes(t, fake.Config{}, 1, fake.Options{LoadBalancerCapabilities: &loadbalancer.Capabilities{}})
	tests := []struct {
		name   string
		reason string
		mutate func(*v1.Service)
	}{
		{"udp", "a TCP-only cloud must not build a TCP listener for UDP", func(s *v1.Service) { s.Spec.Ports[0].Protocol = v1.ProtocolUDP }},
		{"sctp", "no SCTP", func(s *v1.Service) { s.Spec.Ports[0].Protocol = v1.ProtocolSCTP }},
		{"mixed", "no mixed protocols", func(s *v1.Service) {
			s.Spec.Ports = append(s.Spec.Ports, v1.ServicePort{Name: "u", Protocol: v1.ProtocolUDP, Port: 53, NodePort: 30053})
		}},
		{"no node ports", "no node-portless forwarding", func(s *v1.Service) {
			s.Spec.AllocateLoadBalancerNodePorts = ptr.To(false)
			s.Spec.Ports[0].NodePort = 0
		}},
		{"dual stack", "no dual stack", func(s *v1.Service) {
			s.Spec.IPFamilies = []v1.IPFamily{v1.IPv4Protocol, v1.IPv6Protocol}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			svc := service("svc-" + tt.name[:3])
			tt.mutate(svc)
			before := c.Calls().Writes
			_, err := lbOf(t, c).EnsureLoadBalancer(t.Context(), cluster, svc, nodes)
			if !errors.Is(err, loadbalancer.ErrUnsupported) {
				t.Errorf("EnsureLoadBalancer = %v; want an ErrUnsupported error (%s)", err, tt.reason)
			}
			if w := c.Calls().Writes - before; w != 0 {
				t.Errorf("rejected Service caused %d cloud writes; want 0", w)
			}
		})
	}
}

func TestLoadBalancerClassIsNotOurs(t *testing.T) {
	c, nodes := cloudWithNodes(t, fake.Config{}, 1)
	svc := service("web")
	svc.Spec.LoadBalancerClass = ptr.To("example.com/other")
	_, err := lbOf(t, c).EnsureLoadBalancer(t.Context(), cluster, svc, nodes)
	if err != cloudprovider.ImplementedElsewhere { //nolint:errorlint // the service controller compares ImplementedElsewhere with ==: it must come back unwrapped
		t.Errorf("Ensure with loadBalancerClass = %v; want cloudprovider.ImplementedElsewhere, unwrapped", err)
	}
	if err := lbOf(t, c).UpdateLoadBalancer(t.Context(), cluster, svc, nodes); err != cloudprovider.ImplementedElsewhere { //nolint:errorlint // the service controller compares ImplementedElsewhere with ==: it must come back unwrapped
		t.Errorf("Update with loadBalancerClass = %v; want cloudprovider.ImplementedElsewhere, unwrapped", err)
	}
	if n := len(c.Snapshot().LoadBalancers); n != 0 {
		t.Errorf("cloud has %d load balancers; want 0", n)
	}
}

func TestTwoClustersNeverTouchEachOther(t *testing.T) {
	c, nodes := cloudWithNodes(t, fake.Config{}, 1)
	lb := lbOf(t, c)
	svc := service("web") // same namespace/name and even UID in both clusters
	a, err := lb.EnsureLoadBalancer(t.Context(), "cluster-a", svc, nodes)
	if err != nil {
		t.Fatal(err)
	}
	b, err := lb.EnsureLoadBalancer(t.Context(), "cluster-b", svc, nodes)
	if err != nil {
		t.Fatal(err)
	}
	if a.Ingress[0].IP == b.Ingress[0].IP {
		t.Errorf("both clusters got %s; want two load balancers", a.Ingress[0].IP)
	}
	if err := lb.EnsureLoadBalancerDeleted(t.Context(), "cluster-a", svc); err != nil {
		t.Fatal(err)
	}
	if _, exists, _ := lb.GetLoadBalancer(t.Context(), "cluster-b", svc); !exists {
		t.Error("deleting cluster-a's load balancer removed cluster-b's")
	}
	if _, ok := c.LoadBalancerFor("cluster-a", svc); ok {
		t.Error("cluster-a's load balancer still exists")
	}
}

func TestRequestedIP(t *testing.T) {
	c, nodes := cloudWithNodes(t, fake.Config{}, 1)
	lb := lbOf(t, c)
	svc := service("web")
	svc.Spec.LoadBalancerIP = "198.18.7.7"
	st, err := lb.EnsureLoadBalancer(t.Context(), cluster, svc, nodes)
	if err != nil {
		t.Fatal(err)
	}
	if st.Ingress[0].IP != "198.18.7.7" {
		t.Errorf("ingress %s; want the requested 198.18.7.7", st.Ingress[0].IP)
	}
	other := service("other")
	other.Spec.LoadBalancerIP = "198.18.7.7"
	if _, err := lb.EnsureLoadBalancer(t.Context(), cluster, other, nodes); err == nil {
		t.Error("a second Service got the same requested IP; want an error")
	}
	outside := service("outside")
	outside.Spec.LoadBalancerIP = "203.0.113.9"
	if _, err := lb.EnsureLoadBalancer(t.Context(), cluster, outside, nodes); err == nil {
		t.Error("a requested IP outside the pool was accepted; want an error")
	}
	// Changing the request moves the VIP and frees the old one.
	svc.Spec.LoadBalancerIP = "198.18.8.8"
	st, err = lb.EnsureLoadBalancer(t.Context(), cluster, svc, nodes)
	if err != nil || st.Ingress[0].IP != "198.18.8.8" {
		t.Fatalf("Ensure with a new requested IP = %v, %v; want 198.18.8.8", st, err)
	}
	other.Spec.LoadBalancerIP = "198.18.7.7"
	if _, err := lb.EnsureLoadBalancer(t.Context(), cluster, other, nodes); err != nil {
		t.Errorf("the freed address was not reusable: %v", err)
	}
}

func TestIngressModes(t *testing.T) {
	_, nodes := cloudWithNodes(t, fake.Config{}, 1)
	tests := []struct {
		name   string
		reason string
		lbs    fake.LoadBalancerSection
		want   func(v1.LoadBalancerIngress) bool
	}{
		{"default", "an IP without ipMode", fake.LoadBalancerSection{},
			func(in v1.LoadBalancerIngress) bool { return in.IP != "" && in.IPMode == nil }},
		{"proxy", "an IP with ipMode Proxy", fake.LoadBalancerSection{IPMode: v1.LoadBalancerIPModeProxy},
			func(in v1.LoadBalancerIngress) bool {
				return in.IP != "" && in.IPMode != nil && *in.IPMode == v1.LoadBalancerIPModeProxy
			}},
		{"hostname", "a hostname, no IP, no ipMode", fake.LoadBalancerSection{HostnameSuffix: "lb.example.test"},
			func(in v1.LoadBalancerIngress) bool {
				return in.IP == "" && in.IPMode == nil &&
					strings.HasPrefix(in.Hostname, "k8s-default-web-") && strings.HasSuffix(in.Hostname, ".lb.example.test")
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newCloud(t, fake.Config{LoadBalancers: tt.lbs}, fake.Options{Instances: []fake.Instance{{Name: "node-01"}}})
			st, err := lbOf(t, c).EnsureLoadBalancer(t.Context(), cluster, service("web"), nodes)
			if err != nil {
				t.Fatal(err)
			}
			checkStatus(t, st)
			if !tt.want(st.Ingress[0]) {
				t.Errorf("ingress %+v; want %s", st.Ingress[0], tt.reason)
			}
		})
	}
}

func TestPoolExhaustion(t *testing.T) {
	c, nodes := cloudWithNodes(t, fake.Config{LoadBalancers: fake.LoadBalancerSection{IPv4Pool: "198.18.0.0/30"}}, 1)
	lb := lbOf(t, c)
	var ips []string
	for _, name := range []string{"a", "b"} {
		st, err := lb.EnsureLoadBalancer(t.Context(), cluster, service(name), nodes)
		if err != nil {
			t.Fatalf("Ensure %s: %v", name, err)
		}
		ips = append(ips, st.Ingress[0].IP)
	}
	if diff := cmp.Diff([]string{"198.18.0.1", "198.18.0.2"}, ips, fake.CmpModel); diff != "" {
		t.Errorf("VIPs (-want +got):\n%s", diff)
	}
	if _, err := lb.EnsureLoadBalancer(t.Context(), cluster, service("c"), nodes); !errors.Is(err, fake.ErrPoolExhausted) {
		t.Errorf("third Ensure on a /30 = %v; want ErrPoolExhausted", err)
	}
	if err := lb.EnsureLoadBalancerDeleted(t.Context(), cluster, service("a")); err != nil {
		t.Fatal(err)
	}
	if _, err := lb.EnsureLoadBalancer(t.Context(), cluster, service("c"), nodes); err != nil {
		t.Errorf("Ensure after a release: %v", err)
	}
	if n := len(c.Snapshot().LoadBalancers); n != 2 || !slices.ContainsFunc(c.Snapshot().LoadBalancers, func(l fake.LoadBalancer) bool { return l.VIPs[0] == "198.18.0.1" }) {
		t.Errorf("load balancers %+v; want 2, one reusing 198.18.0.1", c.Snapshot().LoadBalancers)
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

// TestLoadBalancerCache: the Cloud's load balancers are looked up through
// a loadbalancer.Cache over the cloud API: a node sync of every Service
// within loadBalancerCacheTTL makes no read, one added node is one backend
// write per Service, the next List comes when the TTL has passed, and a
// peer has a cache (and counters) of its own.
func TestLoadBalancerCache(t *testing.T) {
	clk, withClock := newClock()
	c, nodes := cloudWithNodes(t, fake.Config{ClusterID: "blue", LoadBalancerCacheTTL: provider.Duration{Duration: 30 * time.Second}}, 3, withClock)
	lb := lbOf(t, c)
	services := []*v1.Service{service("a"), service("b"), service("c")}
	sync := func(nodes []*v1.Node) {
		t.Helper()
		for _, svc := range services {
			if err := lb.UpdateLoadBalancer(t.Context(), cluster, svc, nodes); err != nil {
				t.Fatalf("UpdateLoadBalancer(%s): %v", svc.Name, err)
			}
		}
	}
	for _, svc := range services {
		if _, err := lb.EnsureLoadBalancer(t.Context(), cluster, svc, nodes[:2]); err != nil {
			t.Fatal(err)
		}
	}
	steps := []struct {
		name, reason string
		do           func()
		want         map[fake.Op]int64
	}{
		{name: "sync, nothing changed", reason: "answered from the list and the creates' results", do: func() { sync(nodes[:2]) }, want: map[fake.Op]int64{}},
		{name: "sync, a node added", reason: "one backend write per Service, no read", do: func() { sync(nodes) }, want: map[fake.Op]int64{fake.OpApplyLoadBalancer: 3}},
		{name: "TTL not passed", reason: "loadBalancerCacheTTL is 30s", do: func() { clk.Step(29 * time.Second); sync(nodes) }, want: map[fake.Op]int64{}},
		{name: "TTL passed", reason: "one List serves the whole sync", do: func() { clk.Step(time.Second); sync(nodes) }, want: map[fake.Op]int64{fake.OpListLoadBalancers: 1}},
	}
	for _, step := range steps {
		c.ResetCalls()
		step.do()
		if diff := cmp.Diff(step.want, c.Calls().ByOp); diff != "" {
			t.Errorf("%s: calls by op (-want +got): %s\n%s", step.name, step.reason, diff)
		}
	}

	peer, err := fake.NewPeer(c, "blue", fake.PeerOptions{}) // a second replica
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(peer.Shutdown)
	c.ResetCalls()
	if err := lbOf(t, peer).UpdateLoadBalancer(t.Context(), cluster, services[0], nodes); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[fake.Op]int64{fake.OpListLoadBalancers: 1}, peer.Calls().ByOp); diff != "" {
		t.Errorf("the peer's calls (-want +got): it lists with a cache of its own\n%s", diff)
	}
	if got := c.Calls().ByOp; len(got) != 0 {
		t.Errorf("the first Cloud's calls = %v; want none: the peer's are its own", got)
	}
}

// TestLoadBalancerCacheNeverDuplicates: a second replica of the cluster
// (a peer with the same cluster ID), whose cache listed before the first
// replica created a Service's load balancer, finds it and creates none.
func TestLoadBalancerCacheNeverDuplicates(t *testing.T) {
	a, nodes := cloudWithNodes(t, fake.Config{ClusterID: "blue"}, 2)
	b, err := fake.NewPeer(a, "blue", fake.PeerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Shutdown)
	svc := service("web")
	if _, exists, err := lbOf(t, b).GetLoadBalancer(t.Context(), cluster, svc); exists || err != nil {
		t.Fatalf("b before anything exists: GetLoadBalancer = %v, %v; want false", exists, err)
	}
	if _, err := lbOf(t, a).EnsureLoadBalancer(t.Context(), cluster, svc, nodes); err != nil {
		t.Fatal(err)
	}
	b.ResetCalls()
	if _, err := lbOf(t, b).EnsureLoadBalancer(t.Context(), cluster, svc, nodes); err != nil {
		t.Fatal(err)
	}
	if n := len(a.Snapshot().LoadBalancers); n != 1 {
		t.Errorf("%d load balancers after both replicas ensured; want 1", n)
	}
	if diff := cmp.Diff(map[fake.Op]int64{fake.OpFindLoadBalancers: 1}, b.Calls().ByOp); diff != "" {
		t.Errorf("b's calls (-want +got): its list misses the load balancer, a Find finds it, nothing is written\n%s", diff)
	}
}

// TestLoadBalancerCacheOutage: a failed ListLoadBalancers is an error for
// every look-up, never "no load balancer", and DELETE /faults drops its
// memory at once (the cache would otherwise remember it for 5s).
func TestLoadBalancerCacheOutage(t *testing.T) {
	clk, withClock := newClock()
	c, nodes := cloudWithNodes(t, fake.Config{}, 1, withClock)
	svc := service("web")
	if _, err := lbOf(t, c).EnsureLoadBalancer(t.Context(), cluster, svc, nodes); err != nil {
		t.Fatal(err)
	}
	if err := c.AddFault(fake.Fault{Op: fake.OpListLoadBalancers, Times: -1}); err != nil {
		t.Fatal(err)
	}
	clk.Step(time.Minute) // the list has expired: the next look-up lists
	c.ResetCalls()
	for range 2 {
		if _, exists, err := lbOf(t, c).GetLoadBalancer(t.Context(), cluster, svc); !errors.Is(err, fake.ErrInjected) {
			t.Errorf("GetLoadBalancer during a List outage = %v, %v; want the injected error", exists, err)
		}
	}
	if got := c.Calls().ByOp[fake.OpListLoadBalancers]; got != 1 {
		t.Errorf("%d ListLoadBalancers calls; want 1: the failure is remembered", got)
	}
	c.ClearFaults()
	if _, exists, err := lbOf(t, c).GetLoadBalancer(t.Context(), cluster, svc); !exists || err != nil {
		t.Errorf("GetLoadBalancer after DELETE /faults = %v, %v; want true at once", exists, err)
	}
}

// TestUniqueNames: with loadBalancers.uniqueNames the cloud refuses a
// second load balancer of one name (a 409 wrapping ErrNameTaken and
// ErrRefused), and its provider declares Capabilities.UniqueNames: a
// bring-up costs no Find confirming the cache's misses, and a second
// replica whose list predates the load balancer finds it through the
// refused create, creating none.
func TestUniqueNames(t *testing.T) {
	a, nodes := cloudWithNodes(t, fake.Config{ClusterID: "blue", LoadBalancers: fake.LoadBalancerSection{UniqueNames: true}}, 2)
	b, err := fake.NewPeer(a, "blue", fake.PeerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Shutdown)
	if _, exists, err := lbOf(t, b).GetLoadBalancer(t.Context(), cluster, service("web")); exists || err != nil {
		t.Fatalf("b before anything exists: GetLoadBalancer = %v, %v; want false", exists, err)
	}
	a.ResetCalls()
	for _, name := range []string{"web", "api", "db"} {
		if _, err := lbOf(t, a).EnsureLoadBalancer(t.Context(), cluster, service(name), nodes); err != nil {
			t.Fatal(err)
		}
	}
	if got := a.Calls().ByOp[fake.OpFindLoadBalancers]; got != 0 {
		t.Errorf("bring-up of 3 Services: %d Finds; want 0 (one List; the creates confirm its misses)", got)
	}
	b.ResetCalls()
	if _, err := lbOf(t, b).EnsureLoadBalancer(t.Context(), cluster, service("web"), nodes); err != nil {
		t.Fatal(err)
	}
	if n := len(a.Snapshot().LoadBalancers); n != 3 {
		t.Errorf("%d load balancers after both replicas ensured; want 3", n)
	}
	if diff := cmp.Diff(map[fake.Op]int64{fake.OpApplyLoadBalancer: 1, fake.OpFindLoadBalancers: 1, fake.OpListInstances: 1}, b.Calls().ByOp); diff != "" {
		t.Errorf("b's calls (-want +got): its create is refused, a Find finds the load balancer, nothing else is written (its instance list checks the nodes)\n%s", diff)
	}

	lb, _ := a.LoadBalancerFor(cluster, service("web"))
	_, err = a.CreateLoadBalancer(loadbalancer.LoadBalancer{Name: lb.Name, Spec: loadbalancer.Spec{IPFamilies: []v1.IPFamily{v1.IPv4Protocol}}})
	if !errors.Is(err, loadbalancer.ErrNameTaken) || !errors.Is(err, loadbalancer.ErrRefused) || !strings.Contains(err.Error(), lb.Name) {
		t.Errorf("creating a second %q = %v; want a refusal naming it, wrapping ErrNameTaken and ErrRefused", lb.Name, err)
	}
}

// TestUniqueNamesNeedTheCloud: a narrowed capability cannot declare
// unique names on a cloud that does not enforce them.
func TestUniqueNamesNeedTheCloud(t *testing.T) {
	_, err := fake.New(fake.Config{}, fake.Options{LoadBalancerCapabilities: &loadbalancer.Capabilities{UniqueNames: true}})
	if err == nil || !strings.Contains(err.Error(), "UniqueNames true, but loadBalancers.uniqueNames is false") {
		t.Errorf("New with UniqueNames on a cloud without them = %v; want an error naming both", err)
	}
}
