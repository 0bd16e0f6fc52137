package admission_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/ccmkit/ccmkit/loadbalancer"
)

// Service modifiers for the tables.
var (
	dualStack = func(s *v1.Service) {
		s.Spec.IPFamilies = []v1.IPFamily{v1.IPv4Protocol, v1.IPv6Protocol}
		s.Spec.IPFamilyPolicy = ptr.To(v1.IPFamilyPolicyRequireDualStack)
	}
	ipv6Only = func(s *v1.Service) { s.Spec.IPFamilies = []v1.IPFamily{v1.IPv6Protocol} }
	labelled = func(s *v1.Service) { s.Labels = map[string]string{"edited": "yes"} }
)

func ports(ps ...v1.ServicePort) func(*v1.Service) {
	return func(s *v1.Service) { s.Spec.Ports = ps }
}

func port(name string, proto v1.Protocol, p int32) v1.ServicePort {
	return v1.ServicePort{Name: name, Protocol: proto, Port: p, NodePort: 30000 + p}
}

func sourceRanges(rs ...string) func(*v1.Service) {
	return func(s *v1.Service) { s.Spec.LoadBalancerSourceRanges = rs }
}

func loadBalancerIP(ip string) func(*v1.Service) {
	return func(s *v1.Service) { s.Spec.LoadBalancerIP = ip }
}

const sourceRangesKey = v1.AnnotationLoadBalancerSourceRangesKey

// TestFieldsAgree: a new Service asking for a feature the provider does
// not declare, or with a requested address the Reconciler cannot use, is
// refused with the Reconciler's message; one the Reconciler takes is
// admitted. want is the policy's messages, in order; the Reconciler's are
// the same unless wantReconciler says otherwise (the policy names only the
// first port whose protocol is refused).
func TestFieldsAgree(t *testing.T) {
	set, _ := declarations(t)
	ps := newPolicies(set)
	for _, tc := range []struct {
		name, reason   string
		caps           loadbalancer.Capabilities
		mods           []func(*v1.Service)
		want           []string
		wantReconciler []string
	}{
		{name: "plain", reason: "single-stack TCP needs no capability", mods: nil},
		{name: "dual stack", reason: "two families need DualStack", mods: []func(*v1.Service){dualStack},
			want: []string{"service shop/web: spec.ipFamilies [IPv4 IPv6]: DualStack is not supported by this provider (Capabilities.DualStack is false)"}},
		{name: "dual stack supported", reason: "declared", caps: loadbalancer.Capabilities{DualStack: true}, mods: []func(*v1.Service){dualStack}},
		{name: "node-portless", reason: "allocateLoadBalancerNodePorts=false needs NodePortless",
			mods: []func(*v1.Service){func(s *v1.Service) {
				s.Spec.AllocateLoadBalancerNodePorts = ptr.To(false)
				s.Spec.Ports[0].NodePort = 0
			}},
			want: []string{"service shop/web: spec.allocateLoadBalancerNodePorts=false: NodePortless is not supported by this provider (Capabilities.NodePortless is false)"}},
		{name: "UDP", reason: "a UDP port needs UDP", mods: []func(*v1.Service){ports(port("dns", v1.ProtocolUDP, 53))},
			want: []string{"service shop/web: spec.ports[0].protocol UDP: UDP is not supported by this provider (Capabilities.UDP is false)"}},
		{name: "SCTP", reason: "an SCTP port needs SCTP", caps: loadbalancer.Capabilities{UDP: true}, mods: []func(*v1.Service){ports(port("s", v1.ProtocolSCTP, 9))},
			want: []string{"service shop/web: spec.ports[0].protocol SCTP: SCTP is not supported by this provider (Capabilities.SCTP is false)"}},
		{name: "mixed", reason: "two protocols need MixedProtocols", caps: loadbalancer.Capabilities{UDP: true},
			mods: []func(*v1.Service){ports(port("http", v1.ProtocolTCP, 80), port("dns", v1.ProtocolUDP, 53))},
			want: []string{"service shop/web: spec.ports mixes TCP and UDP: MixedProtocols is not supported by this provider (Capabilities.MixedProtocols is false)"}},
		{name: "three protocols", reason: "the first refused port is named, then the mix, sorted",
			mods: []func(*v1.Service){ports(port("http", v1.ProtocolTCP, 80), port("dns", v1.ProtocolUDP, 53), port("s", v1.ProtocolSCTP, 9))},
			want: []string{
				"service shop/web: spec.ports[1].protocol UDP: UDP is not supported by this provider (Capabilities.UDP is false)",
				"service shop/web: spec.ports mixes SCTP and TCP and UDP: MixedProtocols is not supported by this provider (Capabilities.MixedProtocols is false)",
			},
			wantReconciler: []string{
				"service shop/web: spec.ports[1].protocol UDP: UDP is not supported by this provider (Capabilities.UDP is false)",
				"service shop/web: spec.ports[2].protocol SCTP: SCTP is not supported by this provider (Capabilities.SCTP is false)",
				"service shop/web: spec.ports mixes SCTP and TCP and UDP: MixedProtocols is not supported by this provider (Capabilities.MixedProtocols is false)",
			}},
		{name: "declared features", reason: "each is taken when declared", caps: allCaps, mods: []func(*v1.Service){dualStack,
			ports(port("http", v1.ProtocolTCP, 80), port("dns", v1.ProtocolUDP, 53), port("s", v1.ProtocolSCTP, 9)), sourceRanges("10.0.0.0/8"),
			func(s *v1.Service) {
				s.Spec.AllocateLoadBalancerNodePorts = ptr.To(false)
				s.Spec.SessionAffinity = v1.ServiceAffinityClientIP
			}, loadBalancerIP("2001:db8::5")}},
		{name: "source range", reason: "restricting clients needs SourceRanges", mods: []func(*v1.Service){sourceRanges("10.0.0.0/8")},
			want: []string{"service shop/web: source ranges 10.0.0.0/8: SourceRanges is not supported by this provider (Capabilities.SourceRanges is false)"}},
		{name: "source range annotation", reason: "the annotation when the field is empty, masked and sorted",
			mods: []func(*v1.Service){annotated(sourceRangesKey, " 192.168.7.1/16 , 10.0.0.0/8 ")},
			want: []string{"service shop/web: source ranges 10.0.0.0/8,192.168.0.0/16: SourceRanges is not supported by this provider (Capabilities.SourceRanges is false)"}},
		{name: "blank annotation", reason: "a blank annotation is allow-all", mods: []func(*v1.Service){annotated(sourceRangesKey, "  ")}},
		{name: "allow-all", reason: "0.0.0.0/0 restricts no IPv4 Service", mods: []func(*v1.Service){sourceRanges("0.0.0.0/0")}},
		{name: "field wins", reason: "the annotation is ignored when the field is set", mods: []func(*v1.Service){sourceRanges(" 0.0.0.0/0 "), annotated(sourceRangesKey, "10.0.0.0/8")}},
		{name: "allow-all of one family", reason: "0.0.0.0/0 shuts out a dual-stack Service's IPv6 clients", caps: loadbalancer.Capabilities{DualStack: true},
			mods: []func(*v1.Service){dualStack, sourceRanges("0.0.0.0/0")},
			want: []string{"service shop/web: source ranges 0.0.0.0/0: SourceRanges is not supported by this provider (Capabilities.SourceRanges is false)"}},
		{name: "allow-all of both", reason: "one /0 per family", caps: loadbalancer.Capabilities{DualStack: true},
			mods: []func(*v1.Service){dualStack, sourceRanges("::/0", "0.0.0.0/0")}},
		{name: "sorted", reason: "IPv4 first, by address then length, duplicates once",
			caps: loadbalancer.Capabilities{DualStack: true},
			mods: []func(*v1.Service){dualStack, sourceRanges("2001:db8::/32", "10.0.0.0/16", "9.0.0.0/8", "10.0.0.0/8", "fe80::/10", "::1/128",
				"10.0.0.1/8", "2001:db8:1::/48", "::/0", "2001:DB8:0:0::/32", "255.255.255.255/32", "0.0.0.0/0", "100.64.0.0/10")},
			want: []string{"service shop/web: source ranges 0.0.0.0/0,9.0.0.0/8,10.0.0.0/8,10.0.0.0/16,100.64.0.0/10,255.255.255.255/32,::/0,::1/128,2001:db8::/32,2001:db8:1::/48,fe80::/10: SourceRanges is not supported by this provider (Capabilities.SourceRanges is false)"}},
		{name: "client IP", reason: "ClientIP affinity needs ClientIPAffinity",
			mods: []func(*v1.Service){func(s *v1.Service) { s.Spec.SessionAffinity = v1.ServiceAffinityClientIP }},
			want: []string{"service shop/web: spec.sessionAffinity ClientIP: ClientIPAffinity is not supported by this provider (Capabilities.ClientIPAffinity is false)"}},
		{name: "bad loadBalancerIP", reason: "not an address, whatever the capabilities", caps: allCaps, mods: []func(*v1.Service){loadBalancerIP("not-an-ip")},
			want: []string{`invalid service: service shop/web: spec.loadBalancerIP "not-an-ip": expected an IPv4 or IPv6 address`}},
		{name: "padded loadBalancerIP", reason: "spec.loadBalancerIP is not trimmed", caps: allCaps, mods: []func(*v1.Service){loadBalancerIP(" 10.0.0.5")},
			want: []string{`invalid service: service shop/web: spec.loadBalancerIP " 10.0.0.5": expected an IPv4 or IPv6 address`}},
		{name: "zoned loadBalancerIP", reason: "no zone", caps: allCaps, mods: []func(*v1.Service){loadBalancerIP("fe80::1%eth0")},
			want: []string{`invalid service: service shop/web: spec.loadBalancerIP "fe80::1%eth0": expected an IPv4 or IPv6 address`}},
		{name: "loadBalancerIP of another family", reason: "an IPv6 address for an IPv4 Service", caps: allCaps, mods: []func(*v1.Service){loadBalancerIP("2001:DB8::5")},
			want: []string{"invalid service: service shop/web: requested IP 2001:db8::5 is IPv6: expected a family of spec.ipFamilies [IPv4]"}},
		{name: "mapped loadBalancerIP of another family", reason: "an IPv4-mapped address is IPv4", caps: allCaps, mods: []func(*v1.Service){ipv6Only, loadBalancerIP("::ffff:10.0.0.5")},
			want: []string{"invalid service: service shop/web: requested IP 10.0.0.5 is IPv4: expected a family of spec.ipFamilies [IPv6]"}},
		{name: "loadBalancerIP", reason: "a requested address needs RequestedIP", mods: []func(*v1.Service){loadBalancerIP("10.0.0.5")},
			want: []string{"service shop/web: requested IP 10.0.0.5: RequestedIP is not supported by this provider (Capabilities.RequestedIP is false)"}},
		{name: "loadBalancerIP supported", reason: "declared", caps: loadbalancer.Capabilities{RequestedIP: true}, mods: []func(*v1.Service){loadBalancerIP("10.0.0.5")}},
		{name: "mapped loadBalancerIP", reason: "unmapped in the message", mods: []func(*v1.Service){loadBalancerIP("::ffff:10.0.0.5")},
			want: []string{"service shop/web: requested IP 10.0.0.5: RequestedIP is not supported by this provider (Capabilities.RequestedIP is false)"}},
		{name: "mapped hex loadBalancerIP", reason: "its 32 low bits, dotted", mods: []func(*v1.Service){loadBalancerIP("0:0::FFFF:A00:5")},
			want: []string{"service shop/web: requested IP 10.0.0.5: RequestedIP is not supported by this provider (Capabilities.RequestedIP is false)"}},
		{name: "mapped hex loadBalancerIP, all ones", reason: "ffff groups after the mapping one", mods: []func(*v1.Service){loadBalancerIP("::ffff:ffff:ffff")},
			want: []string{"service shop/web: requested IP 255.255.255.255: RequestedIP is not supported by this provider (Capabilities.RequestedIP is false)"}},
		{name: "mapped loadBalancerIP, elided tail", reason: "the :: after ffff", mods: []func(*v1.Service){loadBalancerIP("0:0:0:0:0:ffff:102::")},
			want: []string{"service shop/web: requested IP 1.2.0.0: RequestedIP is not supported by this provider (Capabilities.RequestedIP is false)"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			svc := lbService(tc.mods...)
			wantReconciler := tc.want
			if tc.wantReconciler != nil {
				wantReconciler = tc.wantReconciler
			}
			checkCreate(t, tc.reason, ps.of(t, tc.caps), svc, tc.want, wantReconciler, reconciler(svc, set, tc.caps))
		})
	}
}

// checkCreate fails t unless the policy's verdict on creating svc is
// wantPolicy and the Reconciler's messages (got) are wantReconciler.
func checkCreate(t *testing.T, reason string, p *compiled, svc *v1.Service, wantPolicy, wantReconciler, got []string) {
	t.Helper()
	if diff := cmp.Diff(verdict{Denied: wantPolicy}, p.evaluate(t, svc, nil)); diff != "" {
		t.Errorf("%s: the policy's verdict (-want +got):\n%s", reason, diff)
	}
	if diff := cmp.Diff(wantReconciler, got); diff != "" {
		t.Errorf("%s: the Reconciler's messages (-want +got):\n%s", reason, diff)
	}
}

// TestEverythingAtOnce: a Service with every problem gets them in the
// Reconciler's order, so that the one the apiserver shows (the first) is
// the first of the Reconciler's Warning event.
func TestEverythingAtOnce(t *testing.T) {
	set, _ := perPortDeclarations(t)
	ps := newPolicies(set)
	p := ps.of(t, loadbalancer.Capabilities{})
	svc := lbService(dualStack, annotated("lb.example.com/proxy-protocol", "yes", "lb.example.com/algorithm", "random", "lb.example.com/idle-timeout-ports", "x=1s"),
		func(s *v1.Service) {
			s.Spec.AllocateLoadBalancerNodePorts = ptr.To(false)
			s.Spec.SessionAffinity = v1.ServiceAffinityClientIP
		},
		ports(port("http", v1.ProtocolTCP, 80), port("dns", v1.ProtocolUDP, 53)), sourceRanges("10.0.0.0/8"), loadBalancerIP("10.0.0.5"))
	want := reconciler(svc, set, loadbalancer.Capabilities{})
	if len(want) != 10 {
		t.Fatalf("the Reconciler reports %d problems, want 10: %q", len(want), want)
	}
	if diff := cmp.Diff(verdict{Denied: want}, p.evaluate(t, svc, nil)); diff != "" {
		t.Errorf("(-Reconciler +policy):\n%s", diff)
	}
}

// TestUpdate: on UPDATE only what changed is checked. A Service made
// before the policy with a value the Reconciler refuses can still be
// edited and have its finalizer removed; a change that asks for
// something new is checked; a Service that enters the policy's scope
// (becomes a LoadBalancer Service, loses its class) is checked whole.
func TestUpdate(t *testing.T) {
	set, _ := declarations(t)
	ps := newPolicies(set)
	const bad = "lb.example.com/proxy-protocol"
	badMsg := func(v string) string {
		return `annotation "lb.example.com/proxy-protocol": invalid value "` + v + `": expected "true" or "false"`
	}
	clusterIP := func(s *v1.Service) {
		s.Spec.Type = v1.ServiceTypeClusterIP
		s.Spec.Ports[0].NodePort = 0
		s.Spec.AllocateLoadBalancerNodePorts = nil
	}
	classed := func(s *v1.Service) { s.Spec.LoadBalancerClass = ptr.To("example.com/other") }
	deleting := func(s *v1.Service) {
		s.DeletionTimestamp = &metav1.Time{}
		s.Finalizers = []string{"service.kubernetes.io/load-balancer-cleanup"}
	}
	udp := ports(port("dns", v1.ProtocolUDP, 53))
	for _, tc := range []struct {
		name, reason string
		caps         loadbalancer.Capabilities
		old, new     []func(*v1.Service)
		want         []string
		// grandfathered: the new Service is one the Reconciler refuses,
		// admitted because the problem was already there.
		grandfathered bool
	}{
		{name: "label edit", reason: "the bad value is the old one", caps: allCaps,
			old: []func(*v1.Service){annotated(bad, "yes")}, new: []func(*v1.Service){annotated(bad, "yes"), labelled}, grandfathered: true},
		{name: "finalizer removal", reason: "the CCM must be able to let a Service go", caps: allCaps,
			old: []func(*v1.Service){annotated(bad, "yes"), deleting}, new: []func(*v1.Service){annotated(bad, "yes"), func(s *v1.Service) { s.DeletionTimestamp = &metav1.Time{} }},
			grandfathered: true},
		{name: "another bad value", reason: "a changed value is checked", caps: allCaps,
			old: []func(*v1.Service){annotated(bad, "yes")}, new: []func(*v1.Service){annotated(bad, "no")}, want: []string{badMsg("no")}},
		{name: "fixed", reason: "a good value is good", caps: allCaps,
			old: []func(*v1.Service){annotated(bad, "yes")}, new: []func(*v1.Service){annotated(bad, "true")}},
		{name: "broken", reason: "a good value made bad", caps: allCaps,
			old: []func(*v1.Service){annotated(bad, "true")}, new: []func(*v1.Service){annotated(bad, "yes")}, want: []string{badMsg("yes")}},
		{name: "becomes a LoadBalancer", reason: "a ClusterIP Service's annotations were nobody's business", caps: allCaps,
			old: []func(*v1.Service){annotated(bad, "yes"), clusterIP}, new: []func(*v1.Service){annotated(bad, "yes")}, want: []string{badMsg("yes")}},
		{name: "loses its class", reason: "another controller's Service becomes this one's", caps: allCaps,
			old: []func(*v1.Service){annotated(bad, "yes"), classed}, new: []func(*v1.Service){annotated(bad, "yes")}, want: []string{badMsg("yes")}},
		{name: "UDP port kept", reason: "a port the old Service had", caps: loadbalancer.Capabilities{MixedProtocols: true},
			old: []func(*v1.Service){udp}, new: []func(*v1.Service){ports(port("dns", v1.ProtocolUDP, 53), port("http", v1.ProtocolTCP, 80))}, grandfathered: true},
		{name: "UDP port moved", reason: "a new UDP port", caps: loadbalancer.Capabilities{MixedProtocols: true},
			old: []func(*v1.Service){udp}, new: []func(*v1.Service){ports(port("http", v1.ProtocolTCP, 80), port("dns", v1.ProtocolUDP, 54))},
			want: []string{"service shop/web: spec.ports[1].protocol UDP: UDP is not supported by this provider (Capabilities.UDP is false)"}},
		{name: "mix kept", reason: "the same protocols", caps: loadbalancer.Capabilities{UDP: true},
			old: []func(*v1.Service){ports(port("http", v1.ProtocolTCP, 80), port("dns", v1.ProtocolUDP, 53))},
			new: []func(*v1.Service){ports(port("http", v1.ProtocolTCP, 8080), port("dns", v1.ProtocolUDP, 53))}, grandfathered: true},
		{name: "dual stack kept", old: []func(*v1.Service){dualStack}, new: []func(*v1.Service){dualStack, labelled}, reason: "the same families", grandfathered: true},
		{name: "node-portless kept", reason: "the same field",
			old: []func(*v1.Service){func(s *v1.Service) { s.Spec.AllocateLoadBalancerNodePorts = ptr.To(false) }},
			new: []func(*v1.Service){func(s *v1.Service) { s.Spec.AllocateLoadBalancerNodePorts = ptr.To(false) }, labelled}, grandfathered: true},
		{name: "client IP kept", reason: "the same affinity",
			old: []func(*v1.Service){func(s *v1.Service) { s.Spec.SessionAffinity = v1.ServiceAffinityClientIP }},
			new: []func(*v1.Service){func(s *v1.Service) { s.Spec.SessionAffinity = v1.ServiceAffinityClientIP }, labelled}, grandfathered: true},
		{name: "client IP turned on", reason: "a new feature",
			new:  []func(*v1.Service){func(s *v1.Service) { s.Spec.SessionAffinity = v1.ServiceAffinityClientIP }},
			want: []string{"service shop/web: spec.sessionAffinity ClientIP: ClientIPAffinity is not supported by this provider (Capabilities.ClientIPAffinity is false)"}},
		{name: "source ranges kept", reason: "the same ranges", old: []func(*v1.Service){sourceRanges("10.0.0.0/8")},
			new: []func(*v1.Service){sourceRanges("10.0.0.0/8"), labelled}, grandfathered: true},
		{name: "source range added", reason: "new ranges, all of them listed", old: []func(*v1.Service){sourceRanges("10.0.0.0/8")},
			new:  []func(*v1.Service){sourceRanges("192.168.0.0/16", "10.0.0.0/8")},
			want: []string{"service shop/web: source ranges 10.0.0.0/8,192.168.0.0/16: SourceRanges is not supported by this provider (Capabilities.SourceRanges is false)"}},
		{name: "annotation ranges kept", reason: "the same annotation", old: []func(*v1.Service){annotated(sourceRangesKey, "10.0.0.0/8")},
			new: []func(*v1.Service){annotated(sourceRangesKey, "10.0.0.0/8"), labelled}, grandfathered: true},
		{name: "bad loadBalancerIP kept", reason: "the same field", caps: allCaps,
			old: []func(*v1.Service){loadBalancerIP("not-an-ip")}, new: []func(*v1.Service){loadBalancerIP("not-an-ip"), labelled}, grandfathered: true},
		{name: "requested IP kept", reason: "the same field",
			old: []func(*v1.Service){loadBalancerIP("10.0.0.5")}, new: []func(*v1.Service){loadBalancerIP("10.0.0.5"), labelled}, grandfathered: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := ps.of(t, tc.caps)
			old, svc := lbService(tc.old...), lbService(tc.new...)
			if diff := cmp.Diff(verdict{Denied: tc.want}, p.evaluate(t, svc, old)); diff != "" {
				t.Errorf("%s: UPDATE (-want +got):\n%s", tc.reason, diff)
			}
			if refused := len(reconciler(svc, set, tc.caps)) > 0; refused != (tc.grandfathered || len(tc.want) > 0) {
				t.Errorf("%s: the Reconciler refuses the new Service: %v; want %v (the case is not what it says)", tc.reason, refused, !refused)
			}
		})
	}
}

// TestScope: the policy leaves alone what the Reconciler does not serve:
// Services of another type, and those with a class (upstream's service
// controller ignores them, the Reconciler returns ImplementedElsewhere).
func TestScope(t *testing.T) {
	set, _ := declarations(t)
	ps := newPolicies(set)
	p := ps.of(t, loadbalancer.Capabilities{})
	bad := annotated("lb.example.com/proxy-protocol", "yes")
	for _, tc := range []struct {
		name, reason string
		mods         []func(*v1.Service)
	}{
		{name: "ClusterIP", reason: "not a LoadBalancer Service", mods: []func(*v1.Service){bad, func(s *v1.Service) {
			s.Spec.Type = v1.ServiceTypeClusterIP
			s.Spec.AllocateLoadBalancerNodePorts = nil
			s.Spec.SessionAffinity = v1.ServiceAffinityClientIP
		}}},
		{name: "NodePort", reason: "not a LoadBalancer Service", mods: []func(*v1.Service){bad, ports(port("dns", v1.ProtocolUDP, 53)),
			func(s *v1.Service) { s.Spec.Type = v1.ServiceTypeNodePort; s.Spec.AllocateLoadBalancerNodePorts = nil }}},
		{name: "class", reason: "another controller's", mods: []func(*v1.Service){bad, dualStack, func(s *v1.Service) { s.Spec.LoadBalancerClass = ptr.To("example.com/other") }}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(verdict{}, p.evaluate(t, lbService(tc.mods...), nil)); diff != "" {
				t.Errorf("%s: (-want +got):\n%s", tc.reason, diff)
			}
		})
	}
}
