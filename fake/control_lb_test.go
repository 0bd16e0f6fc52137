package fake_test

import (
	"errors"
	"fmt"
	"net/netip"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"github.com/ccmkit/ccmkit/fake"
	"github.com/ccmkit/ccmkit/loadbalancer"
)

// consoleLB is a load balancer a user creates in the cloud's console:
// another cluster's, as its ccmkit tags say, with one IPv4 listener and a
// backend by Node name.
func consoleLB() loadbalancer.LoadBalancer {
	return loadbalancer.LoadBalancer{
		Name: "other-web",
		Tags: map[string]string{loadbalancer.TagCluster: "other", loadbalancer.TagServiceUID: "uid-other", loadbalancer.TagService: "default/web"},
		Spec: loadbalancer.Spec{
			IPFamilies: []v1.IPFamily{v1.IPv4Protocol},
			Listeners:  []loadbalancer.Listener{{ListenerKey: loadbalancer.ListenerKey{Family: v1.IPv4Protocol, Protocol: v1.ProtocolTCP, Port: 80}, NodePort: 30080}},
			Backends:   []loadbalancer.Backend{{NodeName: "node-01", IPv4: netip.MustParseAddr("10.0.0.1")}},
		},
	}
}

// ensured runs EnsureLoadBalancer for svc on nodes and returns the load
// balancer the fake keeps for it.
func ensured(t *testing.T, c *fake.Cloud, svc *v1.Service, nodes []*v1.Node) fake.LoadBalancer {
	t.Helper()
	if _, err := lbOf(t, c).EnsureLoadBalancer(t.Context(), cluster, svc, nodes); err != nil {
		t.Fatalf("EnsureLoadBalancer(%s): %v", svc.Name, err)
	}
	lb, ok := c.LoadBalancerFor(cluster, svc)
	if !ok {
		t.Fatalf("no load balancer for %s after EnsureLoadBalancer", svc.Name)
	}
	return lb
}

// TestCreateLoadBalancer: a load balancer created through the control
// surface is stored as a create through the Driver would store it (ID,
// VIPs, ingress, canonical spec, the cloud's backend key, provisioning),
// with its tags as given, and costs no cloud call.
func TestCreateLoadBalancer(t *testing.T) {
	tests := []struct {
		name, reason string
		cfg          fake.Config
		delay        time.Duration
		edit         func(*loadbalancer.LoadBalancer)
		want         func(*fake.LoadBalancer)
	}{
		{
			name: "another cluster's", reason: "the tags are kept as given, the VIP is the pool's first free address",
			want: func(lb *fake.LoadBalancer) {},
		},
		{
			name: "no ccmkit tags, dual stack", reason: "one VIP per family, in the spec's order, a requested one taken; listeners sorted",
			edit: func(lb *loadbalancer.LoadBalancer) {
				lb.Tags = map[string]string{"team": "payments"}
				lb.Spec.IPFamilies = []v1.IPFamily{v1.IPv6Protocol, v1.IPv4Protocol}
				lb.Spec.RequestedIPs = []netip.Addr{netip.MustParseAddr("198.18.0.9")}
				lb.Spec.Listeners = append([]loadbalancer.Listener{{ListenerKey: loadbalancer.ListenerKey{Family: v1.IPv6Protocol, Protocol: v1.ProtocolTCP, Port: 80}, NodePort: 30080}}, lb.Spec.Listeners...)
			},
			want: func(lb *fake.LoadBalancer) {
				lb.Tags = map[string]string{"team": "payments"}
				lb.Spec.IPFamilies = []v1.IPFamily{v1.IPv6Protocol, v1.IPv4Protocol}
				lb.Spec.RequestedIPs = []netip.Addr{netip.MustParseAddr("198.18.0.9")}
				lb.Spec.Listeners = append(lb.Spec.Listeners, loadbalancer.Listener{ListenerKey: loadbalancer.ListenerKey{Family: v1.IPv6Protocol, Protocol: v1.ProtocolTCP, Port: 80}, NodePort: 30080})
				lb.VIPs = []string{"2001:db8:1b::1", "198.18.0.9"}
				lb.Ingress = []loadbalancer.Ingress{{IP: "2001:db8:1b::1"}, {IP: "198.18.0.9"}}
			},
		},
		{
			name: "shared node port", reason: "a TCP and a UDP port may share a node port (Kubernetes allows it: a DNS Service), and so may one port's listeners of each family",
			edit: func(lb *loadbalancer.LoadBalancer) {
				lb.Spec.IPFamilies = []v1.IPFamily{v1.IPv4Protocol, v1.IPv6Protocol}
				for _, k := range []loadbalancer.ListenerKey{{Family: v1.IPv4Protocol, Protocol: v1.ProtocolUDP, Port: 80}, {Family: v1.IPv6Protocol, Protocol: v1.ProtocolTCP, Port: 80}, {Family: v1.IPv6Protocol, Protocol: v1.ProtocolUDP, Port: 80}} {
					lb.Spec.Listeners = append(lb.Spec.Listeners, loadbalancer.Listener{ListenerKey: k, NodePort: 30080})
				}
			},
			want: func(lb *fake.LoadBalancer) {
				lb.Spec.IPFamilies = []v1.IPFamily{v1.IPv4Protocol, v1.IPv6Protocol}
				for _, k := range []loadbalancer.ListenerKey{{Family: v1.IPv4Protocol, Protocol: v1.ProtocolUDP, Port: 80}, {Family: v1.IPv6Protocol, Protocol: v1.ProtocolTCP, Port: 80}, {Family: v1.IPv6Protocol, Protocol: v1.ProtocolUDP, Port: 80}} {
					lb.Spec.Listeners = append(lb.Spec.Listeners, loadbalancer.Listener{ListenerKey: k, NodePort: 30080})
				}
				lb.VIPs = []string{"198.18.0.1", "2001:db8:1b::1"}
				lb.Ingress = []loadbalancer.Ingress{{IP: "198.18.0.1"}, {IP: "2001:db8:1b::1"}}
			},
		},
		{
			name: "no cluster tag", reason: "a load balancer of no cluster leaves the tag out",
			edit: func(lb *loadbalancer.LoadBalancer) { delete(lb.Tags, loadbalancer.TagCluster) },
			want: func(lb *fake.LoadBalancer) { delete(lb.Tags, loadbalancer.TagCluster) },
		},
		{
			name: "instance targets", reason: "with backends instanceID the cloud keeps the provider ID only, and keys backends by it",
			cfg:  fake.Config{LoadBalancers: fake.LoadBalancerSection{Backends: fake.BackendsInstanceID}},
			edit: func(lb *loadbalancer.LoadBalancer) { lb.Spec.Backends[0].ProviderID = "fake://i-1" },
			want: func(lb *fake.LoadBalancer) {
				lb.Spec.Backends = []loadbalancer.Backend{{ProviderID: "fake://i-1"}}
				lb.Spec.BackendKey = loadbalancer.BackendKeyProviderID
			},
		},
		{
			name: "provisioning", reason: "the provisioning delay applies as to a load balancer the provider creates",
			delay: 5 * time.Second,
			want: func(lb *fake.LoadBalancer) {
				lb.Ingress, lb.Provisioning, lb.ReadyAt = nil, true, epoch.Add(5*time.Second)
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, withClock := newClock()
			tt.cfg.Instances = []fake.Instance{{Name: "node-01"}}
			c := newCloud(t, tt.cfg, withClock)
			if err := c.SetProvisioningDelay(tt.delay); err != nil {
				t.Fatal(err)
			}
			in := consoleLB()
			if tt.edit != nil {
				tt.edit(&in)
			}
			got, err := c.CreateLoadBalancer(in)
			if err != nil {
				t.Fatalf("CreateLoadBalancer: %v", err)
			}
			want := fake.LoadBalancer{LoadBalancer: consoleLB(), VIPs: []string{"198.18.0.1"}}
			want.ID, want.Ingress = "lb-1", []loadbalancer.Ingress{{IP: "198.18.0.1"}}
			tt.want(&want)
			if diff := cmp.Diff(want, got, fake.CmpModel); diff != "" {
				t.Errorf("CreateLoadBalancer (-want +got), %s:\n%s", tt.reason, diff)
			}
			if diff := cmp.Diff([]fake.LoadBalancer{got}, c.Snapshot().LoadBalancers, fake.CmpModel); diff != "" {
				t.Errorf("Snapshot's load balancers (-returned +snapshot):\n%s", diff)
			}
			if calls := c.Calls(); calls.Reads+calls.Writes != 0 {
				t.Errorf("Calls() after CreateLoadBalancer = %+v; want none: it is no cloud API call", calls)
			}
		})
	}
}

// TestCreateLoadBalancerRefuses: a load balancer the cloud cannot have is
// refused with an error naming the field, the value and what was
// expected, and nothing is created (no load balancer, no VIP taken).
func TestCreateLoadBalancerRefuses(t *testing.T) {
	instanceTargets := fake.Config{LoadBalancers: fake.LoadBalancerSection{Backends: fake.BackendsInstanceID}}
	tests := []struct {
		name, reason string
		cfg          fake.Config
		edit         func(*loadbalancer.LoadBalancer)
		seed         bool  // another load balancer requested 198.18.0.9 first
		is           error // nil: not checked
		message      string
	}{
		{name: "no name", reason: "a load balancer has a name", edit: func(lb *loadbalancer.LoadBalancer) { lb.Name = "" }, message: "loadBalancer.name: Required value"},
		{name: "bad name", reason: "names are DNS-1123 subdomains", edit: func(lb *loadbalancer.LoadBalancer) { lb.Name = "Web_LB" }, message: `loadBalancer.name: Invalid value: "Web_LB": expected a DNS-1123 subdomain`},
		{name: "id", reason: "the cloud assigns IDs", edit: func(lb *loadbalancer.LoadBalancer) { lb.ID = "lb-7" }, message: `loadBalancer.id: Invalid value: "lb-7": expected none`},
		{name: "ingress", reason: "the cloud reports ingress", edit: func(lb *loadbalancer.LoadBalancer) { lb.Ingress = []loadbalancer.Ingress{{IP: "198.18.0.1"}} }, message: "loadBalancer.ingress: Forbidden"},
		{name: "empty tag key", reason: "a tag has a key", edit: func(lb *loadbalancer.LoadBalancer) { lb.Tags[""] = "x" }, message: "loadBalancer.tags[]: Invalid value: \"\": key: expected 1 to 128 bytes"},
		{name: "control character in a tag", reason: "tags are text", edit: func(lb *loadbalancer.LoadBalancer) { lb.Tags["team"] = "a\x00b" }, message: "loadBalancer.tags[team]: Invalid value: \"a\\x00b\": expected no control characters"},
		{name: "no family", reason: "the cloud allocates a VIP per family", edit: func(lb *loadbalancer.LoadBalancer) { lb.Spec.IPFamilies = nil }, message: "loadBalancer.spec.ipFamilies: Required value"},
		{name: "bad family", reason: "IPv4 or IPv6", edit: func(lb *loadbalancer.LoadBalancer) { lb.Spec.IPFamilies = []v1.IPFamily{"IPv5"} }, message: `loadBalancer.spec.ipFamilies[0]: Invalid value: "IPv5": expected IPv4 or IPv6`},
		{name: "listener of another family", reason: "a listener listens on a VIP", edit: func(lb *loadbalancer.LoadBalancer) { lb.Spec.Listeners[0].Family = v1.IPv6Protocol }, message: `loadBalancer.spec.listeners[0].family: Invalid value: "IPv6": expected one of spec.ipFamilies`},
		{name: "bad protocol", reason: "TCP, UDP or SCTP", edit: func(lb *loadbalancer.LoadBalancer) { lb.Spec.Listeners[0].Protocol = "HTTP" }, message: `loadBalancer.spec.listeners[0].protocol: Invalid value: "HTTP": expected TCP, UDP or SCTP`},
		{name: "port 0", reason: "ports start at 1", edit: func(lb *loadbalancer.LoadBalancer) { lb.Spec.Listeners[0].Port = 0 }, message: "loadBalancer.spec.listeners[0].port: Invalid value: 0: expected 1 to 65535"},
		{name: "port 65536", reason: "ports end at 65535", edit: func(lb *loadbalancer.LoadBalancer) { lb.Spec.Listeners[0].Port = 65536 }, message: "loadBalancer.spec.listeners[0].port: Invalid value: 65536: expected 1 to 65535"},
		{name: "negative node port", reason: "0 is none", edit: func(lb *loadbalancer.LoadBalancer) { lb.Spec.Listeners[0].NodePort = -1 }, message: "loadBalancer.spec.listeners[0].nodePort: Invalid value: -1"},
		{name: "listener twice", reason: "one listener per key", edit: func(lb *loadbalancer.LoadBalancer) {
			lb.Spec.Listeners = append(lb.Spec.Listeners, lb.Spec.Listeners[0])
		}, message: `loadBalancer.spec.listeners[1]: Duplicate value: "IPv4/TCP/80"`},
		{name: "node port of another port", reason: "two TCP ports cannot share a node port, as in a Service", edit: func(lb *loadbalancer.LoadBalancer) {
			lb.Spec.Listeners = append(lb.Spec.Listeners, loadbalancer.Listener{ListenerKey: loadbalancer.ListenerKey{Family: v1.IPv4Protocol, Protocol: v1.ProtocolTCP, Port: 443}, NodePort: 30080})
		}, message: `loadBalancer.spec.listeners[1].nodePort: Invalid value: 30080: listener IPv4/TCP/443 has the node port of listener IPv4/TCP/80 (loadBalancer.spec.listeners[0]): expected a node port of its own, shared only by the listeners of one port (one per IP family) or with a port of another protocol`},
		{name: "node port of another port, other family", reason: "a port of the other family is still another port", edit: func(lb *loadbalancer.LoadBalancer) {
			lb.Spec.IPFamilies = []v1.IPFamily{v1.IPv4Protocol, v1.IPv6Protocol}
			lb.Spec.Listeners = append(lb.Spec.Listeners, loadbalancer.Listener{ListenerKey: loadbalancer.ListenerKey{Family: v1.IPv6Protocol, Protocol: v1.ProtocolTCP, Port: 8080}, NodePort: 30080})
		}, message: `loadBalancer.spec.listeners[1].nodePort: Invalid value: 30080: listener IPv6/TCP/8080 has the node port of listener IPv4/TCP/80 (loadBalancer.spec.listeners[0])`},
		{name: "empty cluster tag", reason: "no cluster is named \"\": kube-controller-manager's --cluster-name defaults to \"kubernetes\"", edit: func(lb *loadbalancer.LoadBalancer) { lb.Tags[loadbalancer.TagCluster] = "" },
			message: `loadBalancer.tags[ccmkit.io/cluster]: Invalid value: "": expected a cluster identity, such as "kubernetes" (the default --cluster-name) or another cluster's Config.ClusterID; no cluster is named "" (leave the tag out for a load balancer of no cluster)`},
		{name: "backend without its key", reason: "the cloud keeps backends by Node name", edit: func(lb *loadbalancer.LoadBalancer) { lb.Spec.Backends[0].NodeName = "" }, message: "loadBalancer.spec.backends[0]: Required value: expected the backend's Node name"},
		{name: "backend twice", reason: "one backend per key", edit: func(lb *loadbalancer.LoadBalancer) { lb.Spec.Backends = append(lb.Spec.Backends, lb.Spec.Backends[0]) }, message: `loadBalancer.spec.backends[1]: Duplicate value: "node-01"`},
		{name: "backend address of the wrong family", reason: "ipv4 holds an IPv4 address", edit: func(lb *loadbalancer.LoadBalancer) { lb.Spec.Backends[0].IPv4 = netip.MustParseAddr("fd00::1") }, message: `loadBalancer.spec.backends[0].ipv4: Invalid value: "fd00::1": expected an IPv4 address`},
		{name: "another backend key", reason: "the cloud decides what it keeps of a backend", edit: func(lb *loadbalancer.LoadBalancer) { lb.Spec.BackendKey = loadbalancer.BackendKeyAddress }, message: `loadBalancer.spec.backendKey: Invalid value: "Address": expected none or ""`},
		{name: "requested IP of another family", reason: "one requested IP per family of the spec", edit: func(lb *loadbalancer.LoadBalancer) {
			lb.Spec.RequestedIPs = []netip.Addr{netip.MustParseAddr("2001:db8:1b::5")}
		}, message: `loadBalancer.spec.requestedIPs[0]: Invalid value: "2001:db8:1b::5": expected at most one address of each of spec.ipFamilies`},
		{name: "requested IP outside the pool", reason: "the cloud allocates VIPs from its pools", edit: func(lb *loadbalancer.LoadBalancer) {
			lb.Spec.RequestedIPs = []netip.Addr{netip.MustParseAddr("10.9.9.9")}
		}, message: "requested IP 10.9.9.9 is outside the IPv4 pool 198.18.0.0/15: expected an address of the pool"},
		{name: "unknown backend pool", reason: "a cloud refuses a reference to nothing", edit: func(lb *loadbalancer.LoadBalancer) { lb.Spec.BackendPool = "bp-9" }, message: `backend pool "bp-9" not found`},
		{name: "health check protocol", reason: "HTTP, TCP or none", edit: func(lb *loadbalancer.LoadBalancer) { lb.Spec.HealthCheck.Protocol = "ICMP" }, message: `loadBalancer.spec.healthCheck.protocol: Invalid value: "ICMP": expected HTTP, TCP or none`},
		{name: "affinity timeout without client IP", reason: "a timeout is ClientIP's", edit: func(lb *loadbalancer.LoadBalancer) { lb.Spec.SessionAffinity.TimeoutSeconds = 30 }, message: "loadBalancer.spec.sessionAffinity.timeoutSeconds: Invalid value: 30: expected 0 without clientIP"},
		{
			name: "backend without a provider ID", reason: "with instance targets the cloud keeps backends by provider ID", cfg: instanceTargets,
			message: "loadBalancer.spec.backends[0]: Required value: expected the backend's provider ID",
		},
		{
			name: "backend not an instance", reason: "with instance targets a backend is a live instance", cfg: instanceTargets,
			edit: func(lb *loadbalancer.LoadBalancer) { lb.Spec.Backends[0].ProviderID = "fake://i-9" }, is: fake.ErrInvalidBackend, message: `backend "fake://i-9" (node "node-01"): no instance "i-9"`,
		},
		{
			name: "requested IP taken", reason: "a VIP belongs to one load balancer", seed: true,
			edit: func(lb *loadbalancer.LoadBalancer) {
				lb.Spec.RequestedIPs = []netip.Addr{netip.MustParseAddr("198.18.0.9")}
			},
			message: "requested IP 198.18.0.9: address 198.18.0.9 of pool 198.18.0.0/15 is already allocated",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.cfg.Instances = []fake.Instance{{Name: "node-01"}}
			c := newCloud(t, tt.cfg)
			if tt.seed {
				first := consoleLB()
				first.Spec.RequestedIPs = []netip.Addr{netip.MustParseAddr("198.18.0.9")}
				if _, err := c.CreateLoadBalancer(first); err != nil {
					t.Fatal(err)
				}
			}
			before := c.Snapshot()
			in := consoleLB()
			if tt.edit != nil {
				tt.edit(&in)
			}
			_, err := c.CreateLoadBalancer(in)
			if err == nil || !strings.Contains(err.Error(), tt.message) || (tt.is != nil && !errors.Is(err, tt.is)) {
				t.Errorf("CreateLoadBalancer = %v; want an error containing %q (%s)", err, tt.message, tt.reason)
			}
			if diff := cmp.Diff(before, c.Snapshot(), fake.CmpModel); diff != "" {
				t.Errorf("a refused CreateLoadBalancer changed the cloud (-before +after):\n%s", diff)
			}
		})
	}
}

// TestCreateLoadBalancerPoolExhausted: without a free VIP the error wraps
// the pools' exhaustion, as a create through the Driver does.
func TestCreateLoadBalancerPoolExhausted(t *testing.T) {
	c := newCloud(t, fake.Config{LoadBalancers: fake.LoadBalancerSection{IPv4Pool: "192.0.2.0/30"}})
	for i, name := range []string{"a", "b", "c"} {
		lb := consoleLB()
		lb.Name = name
		_, err := c.CreateLoadBalancer(lb)
		if exhausted := errors.Is(err, fake.ErrPoolExhausted); exhausted != (i == 2) {
			t.Errorf("CreateLoadBalancer #%d = %v; want the third to wrap ErrPoolExhausted (a /30 has two addresses)", i+1, err)
		}
	}
}

// TestRemoveListener: the listeners of a protocol and port go, in every
// family, as loadbalancer.Apply removes them; nothing else changes.
func TestRemoveListener(t *testing.T) {
	dualStack := func(s *v1.Service) { s.Spec.IPFamilies = []v1.IPFamily{v1.IPv4Protocol, v1.IPv6Protocol} }
	dns := func(s *v1.Service) {
		s.Spec.Ports = append(s.Spec.Ports, v1.ServicePort{Name: "dns", Protocol: v1.ProtocolUDP, Port: 53, NodePort: 30053})
	}
	tests := []struct {
		name, reason string
		svc          func(*v1.Service)
		protocol     v1.Protocol
		port         int32
		want         []string
	}{
		{name: "one of two", reason: "the UDP listener stays", svc: dns, protocol: v1.ProtocolTCP, port: 80, want: []string{"IPv4/UDP/53"}},
		{name: "other protocol", reason: "the protocol is part of the key", svc: dns, protocol: v1.ProtocolUDP, port: 53, want: []string{"IPv4/TCP/80"}},
		{name: "dual stack", reason: "a dual-stack load balancer has one listener per family: both go", svc: dualStack, protocol: v1.ProtocolTCP, port: 80, want: []string{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, nodes := cloudWithNodes(t, fake.Config{InstanceCIDRs: []string{"10.0.0.0/16", "fd00:10::/64"}}, 2)
			svc := service("web")
			tt.svc(svc)
			before := ensured(t, c, svc, nodes)
			calls := c.Calls()
			got, err := c.RemoveListener(before.ID, tt.protocol, tt.port)
			if err != nil {
				t.Fatalf("RemoveListener: %v", err)
			}
			if diff := cmp.Diff(tt.want, listenerKeys(got)); diff != "" {
				t.Errorf("listeners after RemoveListener %s/%d (-want +got), %s:\n%s", tt.protocol, tt.port, tt.reason, diff)
			}
			want := before
			want.Spec.Listeners = got.Spec.Listeners
			if diff := cmp.Diff(want, got, fake.CmpModel); diff != "" {
				t.Errorf("RemoveListener changed more than the listeners (-before +after):\n%s", diff)
			}
			if after, _ := c.LoadBalancerFor(cluster, svc); !cmp.Equal(got, after, fake.CmpModel) {
				t.Errorf("RemoveListener returned %+v; the cloud has %+v", got, after)
			}
			if diff := cmp.Diff(calls, c.Calls()); diff != "" {
				t.Errorf("RemoveListener made cloud calls (-before +after):\n%s", diff)
			}
		})
	}
}

// listenerKeys returns the keys of lb's listeners as "IPv4/TCP/80".
func listenerKeys(lb fake.LoadBalancer) []string {
	out := []string{}
	for _, l := range lb.Spec.Listeners {
		out = append(out, fmt.Sprintf("%s/%s/%d", l.Family, l.Protocol, l.Port))
	}
	return out
}

// TestRemoveListenerRefuses: an unknown load balancer, a listener it does
// not have, a protocol or port no listener has: an error naming it, and
// nothing changes.
func TestRemoveListenerRefuses(t *testing.T) {
	c, nodes := cloudWithNodes(t, fake.Config{}, 1)
	lb := ensured(t, c, service("web"), nodes)
	tests := []struct {
		name, reason, id string
		protocol         v1.Protocol
		port             int32
		is               error // nil: not checked
		message          string
	}{
		{name: "unknown load balancer", reason: "no such ID", id: "lb-9", protocol: v1.ProtocolTCP, port: 80, is: loadbalancer.ErrNotFound, message: `load balancer not found: "lb-9"`},
		{name: "no such port", reason: "the error lists the listeners there are", id: lb.ID, protocol: v1.ProtocolTCP, port: 81, message: `listener not found: load balancer "lb-1" listener TCP/81: expected one of its listeners: IPv4/TCP/80`},
		{name: "no such protocol", reason: "the protocol is part of the key", id: lb.ID, protocol: v1.ProtocolUDP, port: 80, message: "listener UDP/80: expected one of its listeners: IPv4/TCP/80"},
		{name: "bad protocol", reason: "TCP, UDP or SCTP", id: lb.ID, protocol: "http", port: 80, message: `invalid listener: listener.protocol: Invalid value: "http": expected TCP, UDP or SCTP`},
		{name: "bad port", reason: "1 to 65535", id: lb.ID, protocol: v1.ProtocolTCP, port: -80, message: "invalid listener: listener.port: Invalid value: -80: expected 1 to 65535"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := c.RemoveListener(tt.id, tt.protocol, tt.port)
			if err == nil || !strings.Contains(err.Error(), tt.message) || (tt.is != nil && !errors.Is(err, tt.is)) {
				t.Errorf("RemoveListener(%q, %s, %d) = %v; want an error containing %q (%s)", tt.id, tt.protocol, tt.port, err, tt.message, tt.reason)
			}
		})
	}
	if diff := cmp.Diff([]fake.LoadBalancer{lb}, c.Snapshot().LoadBalancers, fake.CmpModel); diff != "" {
		t.Errorf("refused RemoveListener calls changed the cloud (-before +after):\n%s", diff)
	}
}

// TestRemoveBackend: the backend of a key goes, the key being what the
// cloud keeps of a backend: the Node name, or the provider ID of an
// instance target. Unknown keys and load balancers are refused, naming
// what there is.
func TestRemoveBackend(t *testing.T) {
	tests := []struct {
		name, reason string
		backends     fake.BackendMode
		key          string
		want         []string // keys of the backends left; nil: refused
		message      string
	}{
		{name: "by node name", reason: "the cloud keeps backends whole", key: "node-02", want: []string{"node-01"}},
		{name: "by provider ID", reason: "the cloud keeps instance targets", backends: fake.BackendsInstanceID, key: "fake://i-2", want: []string{"fake://i-1"}},
		{name: "no such node", reason: "the error lists the backends there are", key: "node-09", message: `backend not found: load balancer "lb-1" backend "node-09" (by Node name): expected one of its backends: "node-01", "node-02"`},
		{name: "node name of an instance target", reason: "with instance targets the key is the provider ID", backends: fake.BackendsInstanceID, key: "node-02", message: `backend "node-02" (by provider ID): expected one of its backends: "fake://i-1", "fake://i-2"`},
		{name: "empty key", reason: "a backend has a key", key: "", message: `key "": expected the key of a backend`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, nodes := cloudWithNodes(t, fake.Config{LoadBalancers: fake.LoadBalancerSection{Backends: tt.backends}}, 2)
			before := ensured(t, c, service("web"), nodes)
			calls := c.Calls()
			got, err := c.RemoveBackend(before.ID, tt.key)
			switch {
			case tt.want == nil && (err == nil || !strings.Contains(err.Error(), tt.message)):
				t.Errorf("RemoveBackend(%q) = %v; want an error containing %q (%s)", tt.key, err, tt.message, tt.reason)
			case tt.want != nil && err != nil:
				t.Fatalf("RemoveBackend(%q): %v", tt.key, err)
			case tt.want != nil:
				if diff := cmp.Diff(tt.want, backendKeys(got.Spec.Backends)); diff != "" {
					t.Errorf("backends after RemoveBackend(%q) (-want +got), %s:\n%s", tt.key, tt.reason, diff)
				}
				want := before
				want.Spec.Backends = got.Spec.Backends
				if diff := cmp.Diff(want, got, fake.CmpModel); diff != "" {
					t.Errorf("RemoveBackend changed more than the backends (-before +after):\n%s", diff)
				}
			}
			if after, _ := c.LoadBalancerFor(cluster, service("web")); tt.want == nil && !cmp.Equal(before, after, fake.CmpModel) {
				t.Errorf("a refused RemoveBackend changed the load balancer: %+v, now %+v", before, after)
			}
			if diff := cmp.Diff(calls, c.Calls()); diff != "" {
				t.Errorf("RemoveBackend made cloud calls (-before +after):\n%s", diff)
			}
		})
	}
	c := newCloud(t, fake.Config{})
	if _, err := c.RemoveBackend("lb-9", "node-01"); !errors.Is(err, loadbalancer.ErrNotFound) || !strings.Contains(err.Error(), `"lb-9"`) {
		t.Errorf("RemoveBackend of an unknown load balancer = %v; want an error wrapping loadbalancer.ErrNotFound naming lb-9", err)
	}
	if _, err := c.RemoveBackend("lb-9", ""); !errors.Is(err, fake.ErrInvalidBackend) {
		t.Errorf("RemoveBackend with an empty key = %v; want an error wrapping ErrInvalidBackend", err)
	}
}

// backendKeys returns the Node name, else the provider ID, of each of bs.
func backendKeys(bs []loadbalancer.Backend) []string {
	out := []string{}
	for _, b := range bs {
		key := b.NodeName
		if key == "" {
			key = b.ProviderID
		}
		out = append(out, key)
	}
	return out
}

// TestRemoveBackendPoolMember: the backends of a load balancer served from
// a shared backend pool are the pool's members: RemoveBackend says so, and
// RemoveBackendPoolMember removes one from the pool, for every load
// balancer referencing it.
func TestRemoveBackendPoolMember(t *testing.T) {
	c, nodes := cloudWithNodes(t, sharedPools(fake.BackendsNodeName), 2)
	lb := ensured(t, c, service("web"), nodes)
	pool := lb.Spec.BackendPool
	if pool == "" {
		t.Fatalf("load balancer %+v references no pool; want one, with shared pools", lb)
	}
	if _, err := c.RemoveBackend(lb.ID, "node-02"); err == nil || !strings.Contains(err.Error(), `it sends traffic to backend pool "`+pool+`"`) {
		t.Errorf("RemoveBackend of a load balancer served from a pool = %v; want an error naming the pool", err)
	}
	calls := c.Calls()
	got, err := c.RemoveBackendPoolMember(pool, "node-02")
	if err != nil {
		t.Fatalf("RemoveBackendPoolMember: %v", err)
	}
	if diff := cmp.Diff([]string{"node-01"}, backendKeys(got.Spec.Backends)); diff != "" {
		t.Errorf("pool members after RemoveBackendPoolMember (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]loadbalancer.Pool{got}, c.Snapshot().BackendPools, fake.CmpModel); diff != "" {
		t.Errorf("Snapshot's pools (-returned +snapshot):\n%s", diff)
	}
	if diff := cmp.Diff(calls, c.Calls()); diff != "" {
		t.Errorf("RemoveBackendPoolMember made cloud calls (-before +after):\n%s", diff)
	}
	for _, tt := range []struct{ name, reason, pool, key, message string }{
		{name: "unknown pool", reason: "no such ID", pool: "bp-9", key: "node-01", message: `backend pool not found: "bp-9"`},
		{name: "no such member", reason: "the error lists the members", pool: pool, key: "node-02", message: `member "node-02" (by Node name): expected one of its members: "node-01"`},
	} {
		if _, err := c.RemoveBackendPoolMember(tt.pool, tt.key); err == nil || !strings.Contains(err.Error(), tt.message) {
			t.Errorf("%s: RemoveBackendPoolMember(%q, %q) = %v; want an error containing %q (%s)", tt.name, tt.pool, tt.key, err, tt.message, tt.reason)
		}
	}
}

// TestLoadBalancerEditsAreNotCloudCalls: the edits are a user's in the
// console, not the provider's calls: they work during an outage of the
// cloud API (every call failing), are not counted, and take no token of
// the rate limit.
func TestLoadBalancerEditsAreNotCloudCalls(t *testing.T) {
	_, withClock := newClock() // the buckets do not refill
	c, nodes := cloudWithNodes(t, fake.Config{}, 2, withClock)
	lb := ensured(t, c, service("web"), nodes)
	if err := c.SetRateLimit(fake.RateLimit{WritesPerSecond: ptr.To(1.0), Burst: 1}); err != nil {
		t.Fatal(err)
	}
	c.SetInterceptor(fake.Failing(func(fake.Op) (error, bool) { return errors.New("outage"), false }))
	calls := c.Calls()
	edits := []struct {
		name string
		do   func() error
	}{
		{"CreateLoadBalancer", func() error { _, err := c.CreateLoadBalancer(consoleLB()); return err }},
		{"RemoveListener", func() error { _, err := c.RemoveListener(lb.ID, v1.ProtocolTCP, 80); return err }},
		{"RemoveBackend", func() error { _, err := c.RemoveBackend(lb.ID, "node-01"); return err }},
		{"RemoveBackend again", func() error { _, err := c.RemoveBackend(lb.ID, "node-02"); return err }},
	}
	for _, e := range edits {
		if err := e.do(); err != nil {
			t.Errorf("%s during an outage of the cloud API, with a burst of 1: %v; want no error", e.name, err)
		}
	}
	if diff := cmp.Diff(calls, c.Calls()); diff != "" {
		t.Errorf("the edits were counted as cloud calls (-before +after):\n%s", diff)
	}
	c.SetInterceptor(fake.Funcs{})
	if _, err := lbOf(t, c).EnsureLoadBalancer(t.Context(), cluster, service("api"), nodes); err != nil {
		t.Errorf("the first write after the edits: %v; want the one write token still there", err)
	}
}

// TestReconcilerRepairsDrift: a listener or backend removed behind the
// provider's back stays removed while the load-balancer cache holds what
// it listed (the cloud does not tell the provider), and the Reconciler's
// next EnsureLoadBalancer puts it back once the cache's TTL has passed or
// the cache was dropped.
func TestReconcilerRepairsDrift(t *testing.T) {
	removeListener := func(c *fake.Cloud, id string) (fake.LoadBalancer, error) {
		return c.RemoveListener(id, v1.ProtocolTCP, 80)
	}
	removeBackend := func(c *fake.Cloud, id string) (fake.LoadBalancer, error) { return c.RemoveBackend(id, "node-02") }
	ttlPasses := func(clk *clocktesting.FakeClock, _ *fake.Cloud) { clk.Step(2 * time.Minute) }
	dropCache := func(_ *clocktesting.FakeClock, c *fake.Cloud) { c.ClearFaults() }
	tests := []struct {
		name, reason string
		edit         func(*fake.Cloud, string) (fake.LoadBalancer, error)
		expire       func(*clocktesting.FakeClock, *fake.Cloud)
		writes       int64
	}{
		{name: "listener, TTL", reason: "one AddListener once the list is a minute old", edit: removeListener, expire: ttlPasses, writes: 1},
		{name: "backend, TTL", reason: "one AddBackends once the list is a minute old", edit: removeBackend, expire: ttlPasses, writes: 1},
		{name: "listener, cache dropped", reason: "DELETE /faults drops the cache", edit: removeListener, expire: dropCache, writes: 1},
		{name: "backend, cache dropped", reason: "DELETE /faults drops the cache", edit: removeBackend, expire: dropCache, writes: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clk, withClock := newClock()
			c, nodes := cloudWithNodes(t, fake.Config{}, 2, withClock)
			svc := service("web")
			want := ensured(t, c, svc, nodes)
			drifted, err := tt.edit(c, want.ID)
			if err != nil {
				t.Fatal(err)
			}
			calls := c.Calls()
			if got := ensured(t, c, svc, nodes); !cmp.Equal(drifted, got, fake.CmpModel) {
				t.Errorf("EnsureLoadBalancer before the cache expired changed the load balancer to %+v; want it left as edited: the cloud does not tell the provider", got)
			}
			if diff := cmp.Diff(calls, c.Calls()); diff != "" {
				t.Errorf("EnsureLoadBalancer answered from the cache made calls (-before +after):\n%s", diff)
			}
			tt.expire(clk, c)
			if diff := cmp.Diff(want, ensured(t, c, svc, nodes), fake.CmpModel); diff != "" {
				t.Errorf("EnsureLoadBalancer after the cache expired did not repair the drift (-want +got):\n%s", diff)
			}
			if w := c.Calls().Writes - calls.Writes; w != tt.writes {
				t.Errorf("the repair took %d writes; want %d (%s)", w, tt.writes, tt.reason)
			}
		})
	}
}

// TestLoadBalancerEditsThroughStateFile: with a shared state file an edit
// is saved at once: a second Cloud on the file (another process, such as
// an end-to-end test's view of the cloud) sees it, and the provider's
// Cloud, finding the file changed by another, drops its cache and repairs
// the drift at its next EnsureLoadBalancer.
func TestLoadBalancerEditsThroughStateFile(t *testing.T) {
	cfg := fake.Config{StateFile: filepath.Join(t.TempDir(), "cloud.json")}
	_, withClock := newClock()
	ccm, nodes := cloudWithNodes(t, cfg, 2, withClock)
	cfg.Instances = nil
	view := newCloud(t, cfg)
	svc := service("web")
	want := ensured(t, ccm, svc, nodes)

	drifted, err := view.RemoveBackend(want.ID, "node-02")
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := ccm.LoadBalancerFor(cluster, svc); !cmp.Equal(drifted, got, fake.CmpModel) {
		t.Errorf("the provider's Cloud sees %+v after the view's RemoveBackend; want %+v", got, drifted)
	}
	if diff := cmp.Diff(want, ensured(t, ccm, svc, nodes), fake.CmpModel); diff != "" {
		t.Errorf("EnsureLoadBalancer after another process's edit did not repair it at once (-want +got):\n%s", diff)
	}

	seeded, err := ccm.CreateLoadBalancer(consoleLB())
	if err != nil {
		t.Fatal(err)
	}
	later := newCloud(t, cfg) // opened after the edit: it loads the file
	for name, c := range map[string]*fake.Cloud{"the view": view, "a Cloud opened later": later} {
		lbs := c.Snapshot().LoadBalancers
		if len(lbs) != 2 || !cmp.Equal(seeded, lbs[1], fake.CmpModel) {
			t.Errorf("%s has load balancers %+v; want the provider's and %+v", name, lbs, seeded)
		}
	}
}
