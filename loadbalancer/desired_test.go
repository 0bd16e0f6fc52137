package loadbalancer_test

import (
	"errors"
	"net/netip"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	cloudprovider "k8s.io/cloud-provider"

	"github.com/ccmkit/ccmkit/annotation"
	"github.com/ccmkit/ccmkit/loadbalancer"
)

var allCaps = loadbalancer.Capabilities{UDP: true, SCTP: true, MixedProtocols: true, DualStack: true,
	NodePortless: true, SourceRanges: true, ClientIPAffinity: true, RequestedIP: true}

func TestDesired(t *testing.T) {
	set, k := testAnnotations(t)
	ipAnn := k[annotation.KindIP]
	v4, v6 := v1.IPv4Protocol, v1.IPv6Protocol
	dual := func(s *v1.Service) { s.Spec.IPFamilies = []v1.IPFamily{v4, v6} }
	nodes := []*v1.Node{
		node("n2", "10.0.0.2", "fd00::2"),
		node("n1", "fe80::1%eth0", "10.0.0.1", "10.0.0.11", "fd00::1"),
		{Spec: v1.NodeSpec{}, Status: v1.NodeStatus{Addresses: []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: "10.0.0.9"}}}}, // no providerID
		node("n3"),                        // no InternalIP
		node("n2", "10.0.0.2", "fd00::2"), // listed twice
		nil,
	}
	nodes[3].Status.Addresses = []v1.NodeAddress{{Type: v1.NodeExternalIP, Address: "198.51.100.3"}}
	base := func(mod func(*loadbalancer.LoadBalancer)) *loadbalancer.LoadBalancer {
		lb := &loadbalancer.LoadBalancer{
			Name: mustNamer(t, loadbalancer.NamerOptions{}).NameFor("c1", "shop", "web", "uid-web"),
			Tags: map[string]string{loadbalancer.TagCluster: "c1", loadbalancer.TagServiceUID: "uid-web", loadbalancer.TagService: "shop/web"},
			Spec: loadbalancer.Spec{
				IPFamilies:   []v1.IPFamily{v4},
				Listeners:    []loadbalancer.Listener{tcp(v4, 80, 30080)},
				Backends:     []loadbalancer.Backend{{NodeName: "n1", ProviderID: "test://n1", IPv4: addr("10.0.0.1")}, {NodeName: "n2", ProviderID: "test://n2", IPv4: addr("10.0.0.2")}},
				HealthCheck:  loadbalancer.HealthCheck{Protocol: loadbalancer.HealthCheckHTTP, Port: 10256, Path: "/healthz"},
				SourceRanges: []netip.Prefix{prefix("0.0.0.0/0")},
				Settings:     map[string]string{"lb.example.com/algorithm": "round-robin", "lb.example.com/idle-timeout": "1m0s", "lb.example.com/proxy-protocol": "false"},
			},
		}
		if mod != nil {
			mod(lb)
		}
		return lb
	}
	cases := []struct {
		name, reason string
		svc          *v1.Service
		caps         loadbalancer.Capabilities
		want         *loadbalancer.LoadBalancer
	}{
		{"single stack", "backends need a providerID and an InternalIP; first InternalIP of the family wins; duplicates once",
			lbService(), loadbalancer.Capabilities{}, base(nil)},
		{"dual stack", "a listener per family, both addresses, allow-all for both families",
			lbService(dual), allCaps, base(func(lb *loadbalancer.LoadBalancer) {
				lb.Spec.IPFamilies = []v1.IPFamily{v4, v6}
				lb.Spec.Listeners = []loadbalancer.Listener{tcp(v4, 80, 30080), tcp(v6, 80, 30080)}
				lb.Spec.Backends = []loadbalancer.Backend{
					{NodeName: "n1", ProviderID: "test://n1", IPv4: addr("10.0.0.1"), IPv6: addr("fd00::1")},
					{NodeName: "n2", ProviderID: "test://n2", IPv4: addr("10.0.0.2"), IPv6: addr("fd00::2")}}
				lb.Spec.SourceRanges = []netip.Prefix{prefix("0.0.0.0/0"), prefix("::/0")}
			})},
		{"IPv6 only", "allow-all is ::/0 for an IPv6 Service",
			lbService(func(s *v1.Service) { s.Spec.IPFamilies = []v1.IPFamily{v6} }), loadbalancer.Capabilities{}, base(func(lb *loadbalancer.LoadBalancer) {
				lb.Spec.IPFamilies = []v1.IPFamily{v6}
				lb.Spec.Listeners = []loadbalancer.Listener{tcp(v6, 80, 30080)}
				lb.Spec.Backends = []loadbalancer.Backend{{NodeName: "n1", ProviderID: "test://n1", IPv6: addr("fd00::1")}, {NodeName: "n2", ProviderID: "test://n2", IPv6: addr("fd00::2")}}
				lb.Spec.SourceRanges = []netip.Prefix{prefix("::/0")}
			})},
		{"no families", "a Service not yet defaulted is IPv4", lbService(func(s *v1.Service) { s.Spec.IPFamilies = nil }), loadbalancer.Capabilities{}, base(nil)},
		{"local traffic", "externalTrafficPolicy Local probes spec.healthCheckNodePort /healthz",
			lbService(func(s *v1.Service) {
				s.Spec.ExternalTrafficPolicy = v1.ServiceExternalTrafficPolicyLocal
				s.Spec.HealthCheckNodePort = 32000
			}), loadbalancer.Capabilities{}, base(func(lb *loadbalancer.LoadBalancer) { lb.Spec.HealthCheck.Port = 32000 })},
		{"spec source ranges", "the spec wins over the annotation; host bits masked",
			lbService(func(s *v1.Service) {
				s.Spec.LoadBalancerSourceRanges = []string{"192.168.1.7/24", "10.0.0.0/8"}
				s.Annotations = map[string]string{v1.AnnotationLoadBalancerSourceRangesKey: "172.16.0.0/12"}
			}), allCaps, base(func(lb *loadbalancer.LoadBalancer) {
				lb.Spec.SourceRanges = []netip.Prefix{prefix("10.0.0.0/8"), prefix("192.168.1.0/24")}
			})},
		{"annotation source ranges", "the upstream annotation when the spec is empty",
			lbService(func(s *v1.Service) {
				s.Annotations = map[string]string{v1.AnnotationLoadBalancerSourceRangesKey: " 172.16.0.0/12 , 10.0.0.0/8"}
			}), allCaps, base(func(lb *loadbalancer.LoadBalancer) {
				lb.Spec.SourceRanges = []netip.Prefix{prefix("10.0.0.0/8"), prefix("172.16.0.0/12")}
			})},
		{"client IP affinity", "the default timeout when no config",
			lbService(func(s *v1.Service) { s.Spec.SessionAffinity = v1.ServiceAffinityClientIP }), allCaps, base(func(lb *loadbalancer.LoadBalancer) {
				lb.Spec.SessionAffinity = loadbalancer.SessionAffinity{ClientIP: true, TimeoutSeconds: v1.DefaultClientIPServiceAffinitySeconds}
			})},
		{"client IP affinity timeout", "the configured timeout",
			lbService(func(s *v1.Service) {
				s.Spec.SessionAffinity = v1.ServiceAffinityClientIP
				s.Spec.SessionAffinityConfig = &v1.SessionAffinityConfig{ClientIP: &v1.ClientIPConfig{TimeoutSeconds: ptr(int32(60))}}
			}), allCaps, base(func(lb *loadbalancer.LoadBalancer) {
				lb.Spec.SessionAffinity = loadbalancer.SessionAffinity{ClientIP: true, TimeoutSeconds: 60}
			})},
		{"requested IP spec", "spec.loadBalancerIP", lbService(func(s *v1.Service) { s.Spec.LoadBalancerIP = "203.0.113.9" }), allCaps,
			base(func(lb *loadbalancer.LoadBalancer) { lb.Spec.RequestedIPs = []netip.Addr{addr("203.0.113.9")} })},
		{"requested IP annotation", "the declared annotation agrees with the spec",
			lbService(func(s *v1.Service) {
				s.Spec.LoadBalancerIP = "203.0.113.9"
				s.Annotations = map[string]string{ipAnn.Name: "203.0.113.9"}
			}), allCaps, base(func(lb *loadbalancer.LoadBalancer) { lb.Spec.RequestedIPs = []netip.Addr{addr("203.0.113.9")} })},
		{"node-portless", "allocateLoadBalancerNodePorts=false: node port 0 is fine",
			lbService(func(s *v1.Service) {
				s.Spec.AllocateLoadBalancerNodePorts = ptr(false)
				s.Spec.Ports[0].NodePort = 0
			}), allCaps, base(func(lb *loadbalancer.LoadBalancer) { lb.Spec.Listeners[0].NodePort = 0 })},
		{"mixed protocols", "UDP and TCP on one load balancer, sorted by key",
			lbService(func(s *v1.Service) {
				s.Spec.Ports = append(s.Spec.Ports, v1.ServicePort{Name: "dns", Protocol: v1.ProtocolUDP, Port: 53, NodePort: 30053})
			}), allCaps, base(func(lb *loadbalancer.LoadBalancer) {
				lb.Spec.Listeners = []loadbalancer.Listener{tcp(v4, 80, 30080),
					{ListenerKey: loadbalancer.ListenerKey{Family: v4, Protocol: v1.ProtocolUDP, Port: 53}, NodePort: 30053}}
			})},
		{"settings", "set annotations override defaults; non-setting annotations are not copied",
			lbService(func(s *v1.Service) {
				s.Annotations = map[string]string{"lb.example.com/algorithm": "least-connections", "lb.example.com/max-connections": "5"}
			}), loadbalancer.Capabilities{}, base(func(lb *loadbalancer.LoadBalancer) {
				lb.Spec.Settings["lb.example.com/algorithm"] = "least-connections"
			})},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			svcBefore, nodesBefore := tc.svc.DeepCopy(), deepCopyNodes(nodes)
			got, err := loadbalancer.Desired(tc.svc, nodes, loadbalancer.DesiredInput{Cluster: "c1", Capabilities: tc.caps, Annotations: set, RequestedIPAnnotation: ipAnn})
			if err != nil {
				t.Fatalf("%s: Desired: %v", tc.reason, err)
			}
			if diff := cmp.Diff(tc.want, got, cmpOpts); diff != "" {
				t.Errorf("%s: (-want +got):\n%s", tc.reason, diff)
			}
			if diff := cmp.Diff(svcBefore, tc.svc); diff != "" {
				t.Errorf("Desired modified the Service (-before +after):\n%s", diff)
			}
			if diff := cmp.Diff(nodesBefore, nodes); diff != "" {
				t.Errorf("Desired modified the Nodes (-before +after):\n%s", diff)
			}
		})
	}
}

func deepCopyNodes(ns []*v1.Node) []*v1.Node {
	out := make([]*v1.Node, len(ns))
	for i, n := range ns {
		if n != nil {
			out[i] = n.DeepCopy()
		}
	}
	return out
}

func TestDesiredErrors(t *testing.T) {
	set, k := testAnnotations(t)
	ipAnn := k[annotation.KindIP]
	cases := []struct {
		name, reason string
		svc          *v1.Service
		caps         loadbalancer.Capabilities
		wantIs       error
		wantSubstr   []string
	}{
		{"class", "a Service with a loadBalancerClass is not ours",
			lbService(func(s *v1.Service) { s.Spec.LoadBalancerClass = ptr("example.com/other") }), allCaps, cloudprovider.ImplementedElsewhere, nil},
		{"not a load balancer", "Desired only models LoadBalancer Services",
			lbService(func(s *v1.Service) { s.Spec.Type = v1.ServiceTypeClusterIP }), allCaps, loadbalancer.ErrInvalidService, []string{`spec.type is "ClusterIP"`}},
		{"UDP unsupported", "never build TCP instead",
			lbService(func(s *v1.Service) { s.Spec.Ports[0].Protocol = v1.ProtocolUDP }), loadbalancer.Capabilities{}, loadbalancer.ErrUnsupported, []string{"spec.ports[0].protocol UDP", "Capabilities.UDP"}},
		{"SCTP unsupported", "never build TCP instead",
			lbService(func(s *v1.Service) { s.Spec.Ports[0].Protocol = v1.ProtocolSCTP }), loadbalancer.Capabilities{}, loadbalancer.ErrUnsupported, []string{"SCTP"}},
		{"mixed unsupported", "UDP alone is fine but not with TCP",
			lbService(func(s *v1.Service) {
				s.Spec.Ports = append(s.Spec.Ports, v1.ServicePort{Protocol: v1.ProtocolUDP, Port: 53, NodePort: 30053})
			}), loadbalancer.Capabilities{UDP: true}, loadbalancer.ErrUnsupported, []string{"MixedProtocols", "TCP and UDP"}},
		{"dual-stack unsupported", "never build single-stack instead",
			lbService(func(s *v1.Service) { s.Spec.IPFamilies = []v1.IPFamily{v1.IPv6Protocol, v1.IPv4Protocol} }), loadbalancer.Capabilities{}, loadbalancer.ErrUnsupported, []string{"DualStack"}},
		{"node-portless unsupported", "never build with node ports instead",
			lbService(func(s *v1.Service) { s.Spec.AllocateLoadBalancerNodePorts = ptr(false) }), loadbalancer.Capabilities{}, loadbalancer.ErrUnsupported, []string{"allocateLoadBalancerNodePorts=false"}},
		{"source ranges unsupported", "never open to all instead",
			lbService(func(s *v1.Service) { s.Spec.LoadBalancerSourceRanges = []string{"10.0.0.0/8"} }), loadbalancer.Capabilities{}, loadbalancer.ErrUnsupported, []string{"SourceRanges", "10.0.0.0/8"}},
		{"dual-stack source ranges of one family unsupported", "0.0.0.0/0 alone shuts IPv6 clients out of a dual-stack Service: a restriction, never open to all instead",
			lbService(func(s *v1.Service) {
				s.Spec.IPFamilies = []v1.IPFamily{v1.IPv4Protocol, v1.IPv6Protocol}
				s.Spec.LoadBalancerSourceRanges = []string{"0.0.0.0/0"}
			}), loadbalancer.Capabilities{DualStack: true}, loadbalancer.ErrUnsupported, []string{"SourceRanges", "0.0.0.0/0"}},
		{"source ranges of the other family unsupported", "::/0 alone shuts IPv4 clients out of an IPv4 Service",
			lbService(func(s *v1.Service) { s.Spec.LoadBalancerSourceRanges = []string{"::/0"} }), loadbalancer.Capabilities{}, loadbalancer.ErrUnsupported, []string{"SourceRanges", "::/0"}},
		{"affinity unsupported", "never drop affinity silently",
			lbService(func(s *v1.Service) { s.Spec.SessionAffinity = v1.ServiceAffinityClientIP }), loadbalancer.Capabilities{}, loadbalancer.ErrUnsupported, []string{"ClientIPAffinity"}},
		{"requested IP unsupported", "never pick another address silently",
			lbService(func(s *v1.Service) { s.Spec.LoadBalancerIP = "203.0.113.9" }), loadbalancer.Capabilities{}, loadbalancer.ErrUnsupported, []string{"RequestedIP"}},
		{"affinity timeout 0", "the kube-apiserver's bounds are 1-86400 s (validateAffinityTimeout); never build a timeout the API would refuse",
			lbService(func(s *v1.Service) {
				s.Spec.SessionAffinity = v1.ServiceAffinityClientIP
				s.Spec.SessionAffinityConfig = &v1.SessionAffinityConfig{ClientIP: &v1.ClientIPConfig{TimeoutSeconds: ptr(int32(0))}}
			}), allCaps, loadbalancer.ErrInvalidService, []string{"spec.sessionAffinityConfig.clientIP.timeoutSeconds 0", "expected 1-86400"}},
		{"affinity timeout negative", "a negative timeout is not a timeout",
			lbService(func(s *v1.Service) {
				s.Spec.SessionAffinity = v1.ServiceAffinityClientIP
				s.Spec.SessionAffinityConfig = &v1.SessionAffinityConfig{ClientIP: &v1.ClientIPConfig{TimeoutSeconds: ptr(int32(-5))}}
			}), allCaps, loadbalancer.ErrInvalidService, []string{"timeoutSeconds -5"}},
		{"affinity timeout too long", "over a day is over the API's bound",
			lbService(func(s *v1.Service) {
				s.Spec.SessionAffinity = v1.ServiceAffinityClientIP
				s.Spec.SessionAffinityConfig = &v1.SessionAffinityConfig{ClientIP: &v1.ClientIPConfig{TimeoutSeconds: ptr(int32(999999))}}
			}), allCaps, loadbalancer.ErrInvalidService, []string{"timeoutSeconds 999999"}},
		{"unknown traffic policy", "Bogus is neither Cluster nor Local: never guess which health check it means",
			lbService(func(s *v1.Service) { s.Spec.ExternalTrafficPolicy = "Bogus" }), allCaps, loadbalancer.ErrInvalidService, []string{`spec.externalTrafficPolicy "Bogus"`, "expected Cluster or Local"}},
		{"node port 0", "node ports are needed unless allocateLoadBalancerNodePorts=false",
			lbService(func(s *v1.Service) { s.Spec.Ports[0].NodePort = 0 }), allCaps, loadbalancer.ErrInvalidService, []string{"spec.ports[0].nodePort 0"}},
		{"no ports", "nothing to listen on",
			lbService(func(s *v1.Service) { s.Spec.Ports = nil }), allCaps, loadbalancer.ErrInvalidService, []string{"spec.ports is empty"}},
		{"local without health port", "Local needs spec.healthCheckNodePort",
			lbService(func(s *v1.Service) { s.Spec.ExternalTrafficPolicy = v1.ServiceExternalTrafficPolicyLocal }), allCaps, loadbalancer.ErrInvalidService, []string{"spec.healthCheckNodePort 0"}},
		{"bad spec source range", "names the field, the entry and the expectation",
			lbService(func(s *v1.Service) { s.Spec.LoadBalancerSourceRanges = []string{"10.0.0.0/33"} }), allCaps, loadbalancer.ErrInvalidService, []string{`spec.loadBalancerSourceRanges[0] "10.0.0.0/33"`, "expected a list of CIDRs"}},
		{"bad annotation source range", "names the annotation, the entry and the expectation",
			lbService(func(s *v1.Service) {
				s.Annotations = map[string]string{v1.AnnotationLoadBalancerSourceRangesKey: "everyone"}
			}), allCaps, loadbalancer.ErrInvalidService, []string{v1.AnnotationLoadBalancerSourceRangesKey, "everyone"}},
		{"bad loadBalancerIP", "names the field and value",
			lbService(func(s *v1.Service) { s.Spec.LoadBalancerIP = "203.0.113" }), allCaps, loadbalancer.ErrInvalidService, []string{`spec.loadBalancerIP "203.0.113"`}},
		{"requested IPs differ", "spec and annotation must agree",
			lbService(func(s *v1.Service) {
				s.Spec.LoadBalancerIP = "203.0.113.9"
				s.Annotations = map[string]string{ipAnn.Name: "203.0.113.10"}
			}), allCaps, loadbalancer.ErrInvalidService, []string{"differ"}},
		{"requested IP family", "an IPv6 address for an IPv4 Service",
			lbService(func(s *v1.Service) { s.Annotations = map[string]string{ipAnn.Name: "2001:db8::1"} }), allCaps, loadbalancer.ErrInvalidService, []string{"requested IP 2001:db8::1 is IPv6"}},
		{"malformed annotation", "names the annotation, the value and the expectation",
			lbService(func(s *v1.Service) { s.Annotations = map[string]string{"lb.example.com/idle-timeout": "forever"} }), allCaps, annotation.ErrInvalid,
			[]string{`annotation "lb.example.com/idle-timeout": invalid value "forever": expected a non-negative duration`}},
		{"bad families", "a repeated family",
			lbService(func(s *v1.Service) { s.Spec.IPFamilies = []v1.IPFamily{v1.IPv4Protocol, v1.IPv4Protocol} }), allCaps, loadbalancer.ErrInvalidService, []string{"spec.ipFamilies"}},
		{"bad affinity", "unknown affinity",
			lbService(func(s *v1.Service) { s.Spec.SessionAffinity = "Cookie" }), allCaps, loadbalancer.ErrInvalidService, []string{`spec.sessionAffinity "Cookie"`}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := loadbalancer.Desired(tc.svc, []*v1.Node{node("n1", "10.0.0.1")}, loadbalancer.DesiredInput{Cluster: "c1", Capabilities: tc.caps, Annotations: set, RequestedIPAnnotation: ipAnn})
			if got != nil || !errors.Is(err, tc.wantIs) {
				t.Fatalf("%s: Desired = %v, %v; want nil and an error that is %v", tc.reason, got, err, tc.wantIs)
			}
			if tc.wantIs == cloudprovider.ImplementedElsewhere && err != cloudprovider.ImplementedElsewhere { //nolint:errorlint // wantIs is the table's sentinel itself; the service controller compares ImplementedElsewhere with ==
				t.Errorf("%s: ImplementedElsewhere is wrapped: %v", tc.reason, err)
			}
			for _, s := range tc.wantSubstr {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("%s: error %q does not contain %q", tc.reason, err, s)
				}
			}
		})
	}
}

func TestDesiredReportsMalformedRequestedIPOnce(t *testing.T) {
	set, k := testAnnotations(t)
	svc := lbService(func(s *v1.Service) { s.Annotations = map[string]string{k[annotation.KindIP].Name: "nope"} })
	_, err := loadbalancer.Desired(svc, nil, loadbalancer.DesiredInput{Cluster: "c1", Capabilities: allCaps, Annotations: set, RequestedIPAnnotation: k[annotation.KindIP]})
	if n := strings.Count(err.Error(), `"nope"`); n != 1 {
		t.Errorf("error %q mentions the value %d times; want once", err, n)
	}
}

func TestDesiredNeedsCluster(t *testing.T) {
	if _, err := loadbalancer.Desired(lbService(), nil, loadbalancer.DesiredInput{}); err == nil || !strings.Contains(err.Error(), "loadbalancer.Desired: DesiredInput.Cluster") {
		t.Errorf("Desired without a cluster: error = %v; want one naming DesiredInput.Cluster", err)
	}
}

// TestDesiredAllowAllWithoutSourceRanges checks which explicit source
// ranges still count as allow-all for a provider without
// Capabilities.SourceRanges: every family of the Service open to all.
func TestDesiredAllowAllWithoutSourceRanges(t *testing.T) {
	cases := []struct {
		name, reason string
		families     []v1.IPFamily
		ranges       []string
	}{
		{"IPv4 /0", "the explicit default", []v1.IPFamily{v1.IPv4Protocol}, []string{"0.0.0.0/0"}},
		{"both /0 on IPv4", "the extra IPv6 range restricts nothing", []v1.IPFamily{v1.IPv4Protocol}, []string{"0.0.0.0/0", "::/0"}},
		{"dual-stack both /0", "every family open", []v1.IPFamily{v1.IPv6Protocol, v1.IPv4Protocol}, []string{"::/0", "0.0.0.0/0"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			svc := lbService(func(s *v1.Service) {
				s.Spec.IPFamilies = tc.families
				s.Spec.LoadBalancerSourceRanges = tc.ranges
			})
			if _, err := loadbalancer.Desired(svc, nil, loadbalancer.DesiredInput{Cluster: "c1", Capabilities: loadbalancer.Capabilities{DualStack: true}}); err != nil {
				t.Errorf("%s: Desired with source ranges %v: %v; want no error", tc.reason, tc.ranges, err)
			}
		})
	}
}
