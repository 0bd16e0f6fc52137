package conformance

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/api/validate/content"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	cloudproviderapi "k8s.io/cloud-provider/api"
	"k8s.io/utils/ptr"
)

// namespace is the namespace of every Service the suite builds.
const namespace = "conformance"

// svcOpt modifies a Service built by service.
type svcOpt func(*v1.Service)

// service returns a LoadBalancer Service as the API server stores it after
// defaulting: one TCP port 80 with node port 30080, a cluster IP,
// externalTrafficPolicy Cluster, a fresh UID.
func service(name string, opts ...svcOpt) *v1.Service {
	s := &v1.Service{
		TypeMeta:   metav1.TypeMeta{Kind: "Service", APIVersion: "v1"},
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, UID: uuid.NewUUID(), ResourceVersion: "1"},
		Spec: v1.ServiceSpec{
			Type:                          v1.ServiceTypeLoadBalancer,
			Ports:                         []v1.ServicePort{tcpPort("http", 80, 30080)},
			Selector:                      map[string]string{"app": name},
			ClusterIP:                     "10.96.0.10",
			ClusterIPs:                    []string{"10.96.0.10"},
			IPFamilies:                    []v1.IPFamily{v1.IPv4Protocol},
			IPFamilyPolicy:                ptr.To(v1.IPFamilyPolicySingleStack),
			ExternalTrafficPolicy:         v1.ServiceExternalTrafficPolicyCluster,
			InternalTrafficPolicy:         ptr.To(v1.ServiceInternalTrafficPolicyCluster),
			SessionAffinity:               v1.ServiceAffinityNone,
			AllocateLoadBalancerNodePorts: ptr.To(true),
		},
	}
	for _, o := range opts {
		o(s)
	}
	return s
}

func tcpPort(name string, port, nodePort int32) v1.ServicePort {
	return v1.ServicePort{Name: name, Protocol: v1.ProtocolTCP, Port: port, TargetPort: intstr.FromInt32(port), NodePort: nodePort}
}

func withPorts(ports ...v1.ServicePort) svcOpt {
	return func(s *v1.Service) { s.Spec.Ports = ports }
}

func withAnnotation(k, v string) svcOpt {
	return func(s *v1.Service) {
		if s.Annotations == nil {
			s.Annotations = map[string]string{}
		}
		s.Annotations[k] = v
	}
}

func withSourceRanges(cidrs ...string) svcOpt {
	return func(s *v1.Service) { s.Spec.LoadBalancerSourceRanges = cidrs }
}

// withLocalTraffic sets externalTrafficPolicy Local and the health-check node
// port the API server allocates for it.
func withLocalTraffic(hcPort int32) svcOpt {
	return func(s *v1.Service) {
		s.Spec.ExternalTrafficPolicy = v1.ServiceExternalTrafficPolicyLocal
		s.Spec.HealthCheckNodePort = hcPort
	}
}

func withDualStack() svcOpt {
	return func(s *v1.Service) {
		s.Spec.IPFamilyPolicy = ptr.To(v1.IPFamilyPolicyRequireDualStack)
		s.Spec.IPFamilies = []v1.IPFamily{v1.IPv4Protocol, v1.IPv6Protocol}
		s.Spec.ClusterIPs = []string{"10.96.0.10", "fd00:10:96::a"}
	}
}

func withoutNodePorts() svcOpt {
	return func(s *v1.Service) {
		s.Spec.AllocateLoadBalancerNodePorts = ptr.To(false)
		for i := range s.Spec.Ports {
			s.Spec.Ports[i].NodePort = 0
		}
	}
}

// stale returns svc as the service controller's cache may hold it when the
// Service stopped being a LoadBalancer: type ClusterIP, no node ports, no
// health-check node port, no load-balancer status.
func stale(svc *v1.Service) *v1.Service {
	s := svc.DeepCopy()
	s.Spec.Type = v1.ServiceTypeClusterIP
	s.Spec.AllocateLoadBalancerNodePorts = nil
	s.Spec.ExternalTrafficPolicy = ""
	s.Spec.HealthCheckNodePort = 0
	s.Spec.LoadBalancerSourceRanges = nil
	for i := range s.Spec.Ports {
		s.Spec.Ports[i].NodePort = 0
	}
	s.Status = v1.ServiceStatus{}
	return s
}

// notReady returns a copy of n whose Ready condition is False.
func notReady(n *v1.Node) *v1.Node {
	c := n.DeepCopy()
	setCondition(c, v1.NodeReady, v1.ConditionFalse)
	return c
}

// withoutAddresses returns a copy of n with no status addresses: a Node the
// cloud-node controller has given its provider ID but not yet its addresses
// (it patches them after the provider ID).
func withoutAddresses(n *v1.Node) *v1.Node {
	c := n.DeepCopy()
	c.Status.Addresses = nil
	return c
}

func setCondition(n *v1.Node, typ v1.NodeConditionType, status v1.ConditionStatus) {
	now := metav1.NewTime(time.Unix(1700000000, 0))
	for i := range n.Status.Conditions {
		if n.Status.Conditions[i].Type == typ {
			n.Status.Conditions[i].Status = status
			return
		}
	}
	n.Status.Conditions = append(n.Status.Conditions, v1.NodeCondition{Type: typ, Status: status, LastHeartbeatTime: now, LastTransitionTime: now, Reason: "Conformance"})
}

// byName returns a copy of n without a provider ID, as a kubelet registers
// a node before the cloud node controller initializes it.
func byName(n *v1.Node) *v1.Node {
	c := n.DeepCopy()
	c.Spec.ProviderID = ""
	return c
}

// missingNode returns a node whose instance has never existed: a fresh name
// and, when providerID (a real one) is not empty, that ID with its last
// segment replaced.
func missingNode(providerID string) *v1.Node {
	suffix := string(uuid.NewUUID())[:8]
	n := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "conformance-missing-" + suffix, UID: uuid.NewUUID()}}
	if providerID != "" {
		i := strings.LastIndex(providerID, "/")
		n.Spec.ProviderID = providerID[:i+1] + "conformance-missing-" + suffix
	}
	return n
}

// copyNodes returns deep copies of nodes, for a rule (or a goroutine of a
// concurrency rule) to own.
func copyNodes(nodes []*v1.Node) []*v1.Node {
	out := make([]*v1.Node, len(nodes))
	for i, n := range nodes {
		out[i] = n.DeepCopy()
	}
	return out
}

func names(nodes []*v1.Node) []string {
	out := make([]string, len(nodes))
	for i, n := range nodes {
		out[i] = n.Name
	}
	return out
}

func svcKey(s *v1.Service) string { return s.Namespace + "/" + s.Name }

// cmpOpts compares Kubernetes objects: quantities by value, empty and nil
// slices and maps alike.
var cmpOpts = cmp.Options{
	cmp.Comparer(func(a, b resource.Quantity) bool { return a.Cmp(b) == 0 }),
	cmpopts.EquateEmpty(),
}

// sortedStrings returns a sorted copy of s, for set comparisons.
func sortedStrings(s []string) []string {
	out := slices.Clone(s)
	slices.Sort(out)
	return out
}

// ingressProblems returns what is wrong with status as the service
// controller would write it to the API server (k8s.io/kubernetes
// pkg/apis/core/validation ValidateLoadBalancerStatus): every ingress has a
// valid IP or a hostname that is a DNS name and not an IP, ipMode only with
// an IP. Without hostnameOK, every ingress must have an IP.
func ingressProblems(status *v1.LoadBalancerStatus, hostnameOK bool) []string {
	var out []string
	for i, in := range status.Ingress {
		p := field.NewPath("ingress").Index(i)
		if in.IP == "" && in.Hostname == "" {
			out = append(out, fmt.Sprintf("%s has neither ip nor hostname", p))
		}
		if in.IP != "" {
			for _, e := range validation.IsValidIPForLegacyField(p.Child("ip"), in.IP, true, nil) {
				out = append(out, e.Error())
			}
		}
		if in.Hostname != "" {
			for _, m := range content.IsDNS1123Subdomain(in.Hostname) {
				out = append(out, fmt.Sprintf("%s %q: %s", p.Child("hostname"), in.Hostname, m))
			}
			if _, err := netip.ParseAddr(in.Hostname); err == nil {
				out = append(out, fmt.Sprintf("%s %q is an IP address, expected a DNS name (put IPs in ip)", p.Child("hostname"), in.Hostname))
			}
			if !hostnameOK && in.IP == "" {
				out = append(out, fmt.Sprintf("%s reports hostname %q without an ip, but Claims.HostnameIngress is false", p, in.Hostname))
			}
		}
		if in.IPMode != nil {
			if in.IP == "" {
				out = append(out, fmt.Sprintf("%s.ipMode %q is set without an ip, expected ipMode only with ip", p, *in.IPMode))
			} else if *in.IPMode != v1.LoadBalancerIPModeVIP && *in.IPMode != v1.LoadBalancerIPModeProxy {
				out = append(out, fmt.Sprintf("%s.ipMode %q is not VIP or Proxy", p, *in.IPMode))
			}
		}
	}
	return out
}

// addressProblems returns what is wrong with a node's cloud addresses: an
// unknown type, an invalid IP or DNS name, a duplicate, no InternalIP, a
// missing IP family when dualStack.
func addressProblems(addrs []v1.NodeAddress, dualStack bool) []string {
	var out []string
	seen := map[v1.NodeAddress]bool{}
	fams := map[bool]bool{}
	for i, a := range addrs {
		p := field.NewPath("addresses").Index(i)
		switch a.Type {
		case v1.NodeInternalIP, v1.NodeExternalIP:
			errs := validation.IsValidIPForLegacyField(p.Child("address"), a.Address, true, nil)
			for _, e := range errs {
				out = append(out, e.Error())
			}
			if ip, err := netip.ParseAddr(a.Address); err == nil && len(errs) == 0 {
				fams[ip.Is6()] = true
			}
		case v1.NodeHostName, v1.NodeInternalDNS, v1.NodeExternalDNS:
			for _, m := range content.IsDNS1123Subdomain(a.Address) {
				out = append(out, fmt.Sprintf("%s %s %q: %s", p, a.Type, a.Address, m))
			}
		default:
			out = append(out, fmt.Sprintf("%s has type %q, expected one of Hostname, InternalIP, ExternalIP, InternalDNS, ExternalDNS", p, a.Type))
		}
		if seen[a] {
			out = append(out, fmt.Sprintf("%s %s %q is a duplicate", p, a.Type, a.Address))
		}
		seen[a] = true
	}
	if dualStack && (!fams[false] || !fams[true]) {
		out = append(out, fmt.Sprintf("Claims.DualStackNodeAddresses, but the IP addresses %v are not of both families", addrs))
	}
	return out
}

// labelValueProblems checks a metadata value that becomes a label value.
func labelValueProblems(what, v string) []string {
	var out []string
	for _, m := range content.IsLabelValue(v) {
		out = append(out, fmt.Sprintf("%s %q is not a valid label value: %s", what, v, m))
	}
	return out
}

// firstIP returns the first InternalIP of family v6 in addrs.
func firstIP(addrs []v1.NodeAddress, v6 bool) (string, bool) {
	for _, a := range addrs {
		if a.Type != v1.NodeInternalIP {
			continue
		}
		if ip, err := netip.ParseAddr(a.Address); err == nil && ip.Is6() == v6 {
			return a.Address, true
		}
	}
	return "", false
}

// podCIDR returns the i-th pod CIDR of the cluster CIDR of family v6, as the
// node IPAM controller writes it (canonical form): /24s of an IPv4 cluster
// CIDR, /64s of an IPv6 one. ok is false when no cluster CIDR has that
// family.
func (c *Config) podCIDR(i int, v6 bool) (string, bool) {
	for _, s := range c.ClusterCIDRs {
		p := netip.MustParsePrefix(s)
		if p.Addr().Is6() != v6 {
			continue
		}
		a := p.Addr().As16()
		bits := 24
		if v6 {
			bits = 64
		}
		// Set subnet index i+1 in the bits just above the pod prefix.
		byteIdx := bits/8 - 1
		if !v6 {
			byteIdx += 12
		}
		a[byteIdx] += byte(i + 1) //nolint:gosec // G115: i numbers a fixture's few addresses
		addr := netip.AddrFrom16(a)
		if !v6 {
			addr = addr.Unmap()
		}
		return netip.PrefixFrom(addr, bits).Masked().String(), true
	}
	return "", false
}

// providedNodeIP is the annotation a kubelet with --node-ip sets.
const providedNodeIP = cloudproviderapi.AnnotationAlphaProvidedIPAddr

// within runs f and ends the rule with a failure when f has not returned
// within Config.Timeout (f's goroutine is abandoned).
func (r *rt) within(what string, f func()) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer r.recoverPanic()
		f()
	}()
	select {
	case <-done:
	case <-time.After(r.cfg.Timeout):
		r.Fatalf("%s did not return within %v (Config.Timeout)", what, r.cfg.Timeout)
	}
}

// cancelled returns a context that is already cancelled.
func cancelled() context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	return ctx
}
