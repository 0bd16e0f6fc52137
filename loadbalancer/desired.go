package loadbalancer

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	v1 "k8s.io/api/core/v1"
	cloudprovider "k8s.io/cloud-provider"
	servicehelpers "k8s.io/cloud-provider/service/helpers"
	utilnet "k8s.io/utils/net"
)

// Capabilities declares what a provider's load balancers can do beyond a
// single-stack TCP load balancer with node ports, allow-all source ranges,
// no session affinity and a cloud-chosen address. The zero value declares
// nothing more. Desired rejects a Service asking for an undeclared feature
// with an *UnsupportedError (errors.Is(err, ErrUnsupported)) instead of
// building something else.
type Capabilities struct {
	// UDP listeners.
	UDP bool
	// SCTP listeners.
	SCTP bool
	// MixedProtocols: more than one protocol on one load balancer.
	MixedProtocols bool
	// DualStack: two IP families (spec.ipFamilies of length 2).
	DualStack bool
	// NodePortless: spec.allocateLoadBalancerNodePorts=false; the Driver
	// reaches endpoints without node ports (Listener.NodePort may be 0).
	NodePortless bool
	// SourceRanges: restricting client CIDRs (anything but allow-all for
	// every IP family of the Service, see Spec.SourceRanges).
	SourceRanges bool
	// ClientIPAffinity: spec.sessionAffinity=ClientIP.
	ClientIPAffinity bool
	// RequestedIP: a requested address (spec.loadBalancerIP or the
	// Options.RequestedIPAnnotation).
	RequestedIP bool
	// BackendKey is what the cloud keeps of each backend (zero: the whole
	// Backend, matched by Node name). It is not a feature a Service asks
	// for: it decides how Plan matches backends, see BackendKey.
	BackendKey BackendKey
}

// Options parameterize Desired. The zero value uses the default Namer, no
// declared annotations and the zero Capabilities; Cluster must be set.
type Options struct {
	// Cluster is the cluster identity (see the package doc); required.
	Cluster string
	// Namer names the load balancer; nil means NewNamer(NamingConfig{}).
	Namer *Namer
	// Capabilities are what the provider supports.
	Capabilities Capabilities
	// Annotations are the provider's declared annotations: every one
	// present on the Service is validated, and those with Setting go into
	// Spec.Settings. nil means none.
	Annotations *AnnotationSet
	// RequestedIPAnnotation, if set, is a declared KindIP annotation whose
	// value is a requested load-balancer address, as an alternative to the
	// deprecated spec.loadBalancerIP. When both are set they must agree.
	RequestedIPAnnotation *Annotation
}

// maxClientIPAffinitySeconds is the longest ClientIP affinity timeout the
// kube-apiserver accepts (k8s.io/kubernetes pkg/apis/core, types.go
// MaxClientIPServiceAffinitySeconds; not exported by k8s.io/api).
const maxClientIPAffinitySeconds = 86400

var defaultNamer = func() *Namer {
	n, err := NewNamer(NamingConfig{})
	if err != nil {
		panic(err) // the defaults are constants
	}
	return n
}()

// Desired computes the load balancer svc should have, from svc and the
// nodes the service controller passes (it has already dropped excluded and
// deleted nodes). svc and nodes are only read.
//
// Errors:
//   - cloudprovider.ImplementedElsewhere, unwrapped, when
//     spec.loadBalancerClass is set;
//   - ErrInvalidService (wrapped, naming the field, value and expectation)
//     for a Service that is not of type LoadBalancer or has an unusable
//     field (see SourceRanges), or that is nil; values are quoted cut
//     to a bounded length, so a huge field makes no huge message;
//   - *AnnotationError (errors.Is ErrInvalidAnnotation; several are joined)
//     for malformed declared annotations;
//   - *UnsupportedError (errors.Is ErrUnsupported) for features missing
//     from opts.Capabilities.
//
// Model: one listener per (IP family, Service port); backends are the nodes
// with a spec.providerID, as opts.Capabilities.BackendKey keeps them (see
// BackendKey.Backends; by default those with an InternalIP of at least one
// of the Service's families, with their first InternalIP per family); health check per externalTrafficPolicy
// (Local: spec.healthCheckNodePort, HTTP /healthz, after
// servicehelpers.GetServiceHealthCheckPathPort; Cluster: kube-proxy
// KubeProxyHealthzPort, HTTP /healthz); source ranges from the spec, else
// the service.beta.kubernetes.io/load-balancer-source-ranges annotation,
// else allow-all for every IP family of the Service.
func Desired(svc *v1.Service, nodes []*v1.Node, opts Options) (*LoadBalancer, error) {
	if svc == nil {
		return nil, errNilService
	}
	if svc.Spec.LoadBalancerClass != nil {
		return nil, cloudprovider.ImplementedElsewhere
	}
	key := svc.Namespace + "/" + svc.Name
	if svc.Spec.Type != v1.ServiceTypeLoadBalancer {
		return nil, invalidService("service %s: spec.type is %q; expected %q", key, cut(string(svc.Spec.Type)), v1.ServiceTypeLoadBalancer)
	}
	if opts.Cluster == "" {
		return nil, errors.New("loadbalancer: Options.Cluster is empty; expected the cluster identity")
	}
	if err := opts.Capabilities.BackendKey.check("loadbalancer: Options.Capabilities.BackendKey"); err != nil {
		return nil, err
	}
	namer := opts.Namer
	if namer == nil {
		namer = defaultNamer
	}
	caps := opts.Capabilities
	var errs []error
	fail := func(err error) { errs = append(errs, err) }

	lb := &LoadBalancer{
		Name: namer.Name(opts.Cluster, svc),
		Tags: OwnerOf(opts.Cluster, svc).Tags(),
	}
	spec := &lb.Spec

	families, err := ServiceFamilies(svc)
	if err != nil {
		return nil, err
	}
	spec.IPFamilies = families
	if len(families) == 2 && !caps.DualStack {
		fail(&UnsupportedError{Feature: "DualStack", Detail: fmt.Sprintf("service %s: spec.ipFamilies %v", key, families)})
	}

	// Annotations first: a malformed one is reported even if the spec is
	// also wrong.
	if opts.Annotations != nil {
		if err := opts.Annotations.Validate(svc.Annotations); err != nil {
			fail(err)
		}
		for _, a := range opts.Annotations.list {
			if !a.Setting {
				continue
			}
			if v, _, err := a.Canonical(svc.Annotations); err == nil {
				if spec.Settings == nil {
					spec.Settings = map[string]string{}
				}
				spec.Settings[a.Name] = v
			}
		}
	}

	// Listeners.
	nodePortless := svc.Spec.AllocateLoadBalancerNodePorts != nil && !*svc.Spec.AllocateLoadBalancerNodePorts
	if nodePortless && !caps.NodePortless {
		fail(&UnsupportedError{Feature: "NodePortless", Detail: fmt.Sprintf("service %s: spec.allocateLoadBalancerNodePorts=false", key)})
	}
	if len(svc.Spec.Ports) == 0 {
		fail(invalidService("service %s: spec.ports is empty; expected at least one port", key))
	}
	protocols := map[v1.Protocol]bool{}
	spec.Listeners = make([]Listener, 0, len(svc.Spec.Ports)*len(families))
	for i, p := range svc.Spec.Ports {
		switch p.Protocol {
		case v1.ProtocolTCP, "":
		case v1.ProtocolUDP:
			if !caps.UDP {
				fail(&UnsupportedError{Feature: "UDP", Detail: fmt.Sprintf("service %s: spec.ports[%d].protocol UDP", key, i)})
			}
		case v1.ProtocolSCTP:
			if !caps.SCTP {
				fail(&UnsupportedError{Feature: "SCTP", Detail: fmt.Sprintf("service %s: spec.ports[%d].protocol SCTP", key, i)})
			}
		default:
			fail(invalidService("service %s: spec.ports[%d].protocol %q; expected TCP, UDP or SCTP", key, i, cut(string(p.Protocol))))
		}
		proto := p.Protocol
		if proto == "" {
			proto = v1.ProtocolTCP
		}
		protocols[proto] = true
		if p.Port < 1 || p.Port > 65535 {
			fail(invalidService("service %s: spec.ports[%d].port %d; expected 1-65535", key, i, p.Port))
		}
		if p.NodePort < 0 || p.NodePort > 65535 || (p.NodePort == 0 && !nodePortless) {
			fail(invalidService("service %s: spec.ports[%d].nodePort %d; expected an allocated node port (1-65535)", key, i, p.NodePort))
		}
		for _, f := range families {
			spec.Listeners = append(spec.Listeners, Listener{ListenerKey: ListenerKey{Family: f, Protocol: proto, Port: p.Port}, NodePort: p.NodePort})
		}
	}
	if len(protocols) > 1 && !caps.MixedProtocols {
		fail(&UnsupportedError{Feature: "MixedProtocols", Detail: fmt.Sprintf("service %s: spec.ports mixes %s", key, joinProtocols(protocols))})
	}
	slices.SortFunc(spec.Listeners, compareListener)
	for i := 1; i < len(spec.Listeners); i++ {
		if spec.Listeners[i].ListenerKey == spec.Listeners[i-1].ListenerKey {
			fail(invalidService("service %s: spec.ports has port %d/%s twice; expected unique (protocol, port)", key, spec.Listeners[i].Port, cut(string(spec.Listeners[i].Protocol))))
		}
	}

	// Health check.
	switch svc.Spec.ExternalTrafficPolicy {
	case "", v1.ServiceExternalTrafficPolicyCluster, v1.ServiceExternalTrafficPolicyLocal:
	default:
		fail(invalidService("service %s: spec.externalTrafficPolicy %q; expected Cluster or Local", key, cut(string(svc.Spec.ExternalTrafficPolicy))))
	}
	if servicehelpers.RequestsOnlyLocalTraffic(svc) {
		path, port := servicehelpers.GetServiceHealthCheckPathPort(svc)
		if port <= 0 || port > 65535 {
			fail(invalidService("service %s: spec.healthCheckNodePort %d with externalTrafficPolicy Local; expected an allocated port (1-65535)", key, svc.Spec.HealthCheckNodePort))
		}
		spec.HealthCheck = HealthCheck{Protocol: HealthCheckHTTP, Port: port, Path: path}
	} else {
		spec.HealthCheck = HealthCheck{Protocol: HealthCheckHTTP, Port: KubeProxyHealthzPort, Path: "/healthz"}
	}

	// Source ranges.
	ranges, err := SourceRanges(svc)
	if err != nil {
		fail(err)
	} else {
		spec.SourceRanges = ranges
		if !caps.SourceRanges && !isAllowAll(ranges, families) {
			fail(&UnsupportedError{Feature: "SourceRanges", Detail: fmt.Sprintf("service %s: source ranges %s", key, formatCIDRList(ranges))})
		}
	}

	// Session affinity.
	switch svc.Spec.SessionAffinity {
	case v1.ServiceAffinityNone, "":
	case v1.ServiceAffinityClientIP:
		if !caps.ClientIPAffinity {
			fail(&UnsupportedError{Feature: "ClientIPAffinity", Detail: fmt.Sprintf("service %s: spec.sessionAffinity ClientIP", key)})
		}
		spec.SessionAffinity = SessionAffinity{ClientIP: true, TimeoutSeconds: v1.DefaultClientIPServiceAffinitySeconds}
		if c := svc.Spec.SessionAffinityConfig; c != nil && c.ClientIP != nil && c.ClientIP.TimeoutSeconds != nil {
			// The kube-apiserver's own bounds (k8s.io/kubernetes v1.37.2
			// pkg/apis/core/validation/validation.go, validateAffinityTimeout).
			if t := *c.ClientIP.TimeoutSeconds; t < 1 || t > maxClientIPAffinitySeconds {
				fail(invalidService("service %s: spec.sessionAffinityConfig.clientIP.timeoutSeconds %d; expected 1-%d", key, t, maxClientIPAffinitySeconds))
			}
			spec.SessionAffinity.TimeoutSeconds = *c.ClientIP.TimeoutSeconds
		}
	default:
		fail(invalidService("service %s: spec.sessionAffinity %q; expected None or ClientIP", key, cut(string(svc.Spec.SessionAffinity))))
	}

	// Requested IP.
	if ips, err := requestedIPs(svc, key, families, opts.RequestedIPAnnotation); err != nil {
		var ae *AnnotationError
		if !errors.As(err, &ae) || opts.Annotations == nil || !opts.Annotations.declared(ae.Name) {
			fail(err) // else already reported by Validate
		}
	} else if len(ips) > 0 {
		if !caps.RequestedIP {
			fail(&UnsupportedError{Feature: "RequestedIP", Detail: fmt.Sprintf("service %s: requested IP %s", key, ips[0])})
		}
		spec.RequestedIPs = ips
	}

	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	spec.BackendKey = caps.BackendKey
	spec.Backends = caps.BackendKey.Backends(nodes, families)
	return lb, nil
}

// ServiceFamilies returns svc's IP families: spec.ipFamilies, or [IPv4]
// when the list is empty (a Service the API server has not defaulted). An
// unknown family or a repeated one, or a nil svc, is an ErrInvalidService
// error (wrapped) quoting the families cut to a bounded length.
func ServiceFamilies(svc *v1.Service) ([]v1.IPFamily, error) {
	if svc == nil {
		return nil, errNilService
	}
	fs := svc.Spec.IPFamilies
	if len(fs) == 0 {
		return []v1.IPFamily{v1.IPv4Protocol}, nil
	}
	if len(fs) > 2 || (len(fs) == 2 && fs[0] == fs[1]) {
		return nil, invalidService("service %s/%s: spec.ipFamilies %q; expected one family or IPv4 and IPv6", svc.Namespace, svc.Name, cutFamilies(fs))
	}
	for _, f := range fs {
		if f != v1.IPv4Protocol && f != v1.IPv6Protocol {
			return nil, invalidService("service %s/%s: spec.ipFamilies contains %q; expected IPv4 or IPv6", svc.Namespace, svc.Name, cut(string(f)))
		}
	}
	return slices.Clone(fs), nil
}

// Backends returns the backends for nodes and the Service's families, as a
// cloud keyed by k keeps them, in canonical order (see Spec.Backends): one
// per node with a spec.providerID, carrying its name, provider ID and first
// InternalIP of each of the families (IPv4-mapped addresses unmapped, zoned
// ones ignored). Under BackendKeyNodeName a node needs an InternalIP of one
// of the families (others cannot receive traffic and are left out); under
// BackendKeyProviderID it needs none; under BackendKeyAddress each address is
// its own backend. Nodes with the same key (the same name, provider ID or
// address) count once, the first listed. nodes and the Nodes are only read;
// nil entries are skipped.
func (k BackendKey) Backends(nodes []*v1.Node, families []v1.IPFamily) []Backend {
	want4, want6 := slices.Contains(families, v1.IPv4Protocol), slices.Contains(families, v1.IPv6Protocol)
	out := make([]Backend, 0, len(nodes))
	for _, n := range nodes {
		if n == nil || n.Spec.ProviderID == "" {
			continue
		}
		b := Backend{NodeName: n.Name, ProviderID: n.Spec.ProviderID}
		for _, a := range n.Status.Addresses {
			if a.Type != v1.NodeInternalIP {
				continue
			}
			ip, err := netip.ParseAddr(a.Address)
			if err != nil || ip.Zone() != "" {
				continue
			}
			ip = ip.Unmap()
			if ip.Is4() && want4 && !b.IPv4.IsValid() {
				b.IPv4 = ip
			} else if ip.Is6() && want6 && !b.IPv6.IsValid() {
				b.IPv6 = ip
			}
		}
		switch {
		case k == BackendKeyAddress:
			if b.IPv4.IsValid() {
				out = append(out, Backend{NodeName: b.NodeName, ProviderID: b.ProviderID, IPv4: b.IPv4})
			}
			if b.IPv6.IsValid() {
				out = append(out, Backend{NodeName: b.NodeName, ProviderID: b.ProviderID, IPv6: b.IPv6})
			}
		case k == BackendKeyProviderID || b.IPv4.IsValid() || b.IPv6.IsValid():
			out = append(out, b)
		}
	}
	compare := k.compareFunc()
	slices.SortStableFunc(out, compare)
	return slices.CompactFunc(out, func(a, b Backend) bool { return compare(a, b) == 0 })
}

// SourceRanges returns the client CIDRs svc allows, in the order of
// precedence of the upstream service controller: spec.loadBalancerSourceRanges,
// else the service.beta.kubernetes.io/load-balancer-source-ranges
// annotation (both parsed by servicehelpers.GetLoadBalancerSourceRanges),
// else allow-all for every IP family of the Service (0.0.0.0/0 and/or ::/0;
// the upstream helper would return only 0.0.0.0/0). The result is masked,
// sorted and unique. A malformed value, or a nil svc, is an error wrapping
// ErrInvalidService that names the field or annotation, the first entry
// that is not a CIDR and the annotation's value (both cut to a bounded
// length), and what was expected; it does not carry the helper's error,
// which repeats the whole value however big.
func SourceRanges(svc *v1.Service) ([]netip.Prefix, error) {
	if svc == nil {
		return nil, errNilService
	}
	if len(svc.Spec.LoadBalancerSourceRanges) == 0 && strings.TrimSpace(svc.Annotations[v1.AnnotationLoadBalancerSourceRangesKey]) == "" {
		families, err := ServiceFamilies(svc)
		if err != nil {
			return nil, err
		}
		out := make([]netip.Prefix, 0, 2)
		if slices.Contains(families, v1.IPv4Protocol) {
			out = append(out, netip.PrefixFrom(netip.IPv4Unspecified(), 0))
		}
		if slices.Contains(families, v1.IPv6Protocol) {
			out = append(out, netip.PrefixFrom(netip.IPv6Unspecified(), 0))
		}
		return out, nil
	}
	set, err := servicehelpers.GetLoadBalancerSourceRanges(svc)
	if err != nil {
		// The helper's error holds the whole field or annotation, however
		// big: say which entry is wrong, cut, instead.
		return nil, sourceRangeError(svc)
	}
	out := make([]netip.Prefix, 0, len(set))
	for s := range set {
		p, err := netip.ParsePrefix(s)
		if err != nil { // the helper formats with net.IPNet.String: cannot happen
			return nil, fmt.Errorf("%w: service %s/%s: source range %q: %w", ErrInvalidService, svc.Namespace, svc.Name, s, err)
		}
		out = append(out, p.Masked())
	}
	slices.SortFunc(out, comparePrefix)
	return slices.Compact(out), nil
}

// sourceRangeError is SourceRanges' error for a Service whose source
// ranges servicehelpers.GetLoadBalancerSourceRanges refused: it names
// the field the helper parsed (spec.loadBalancerSourceRanges when it is not
// empty, else the annotation, split at commas), the first entry the
// helper's parser (utilnet.ParseIPNets, which trims each entry) refuses,
// cut, and what was expected.
func sourceRangeError(svc *v1.Service) error {
	key := svc.Namespace + "/" + svc.Name
	if specs := svc.Spec.LoadBalancerSourceRanges; len(specs) > 0 {
		for i, e := range specs {
			if _, err := utilnet.ParseIPNets(e); err != nil {
				return invalidService("service %s: spec.loadBalancerSourceRanges[%d] %q is not a CIDR; expected a list of CIDRs such as 10.0.0.0/24 and 192.168.2.0/24",
					key, i, cut(e))
			}
		}
	} else {
		v := strings.TrimSpace(svc.Annotations[v1.AnnotationLoadBalancerSourceRangesKey])
		for i, e := range strings.Split(v, ",") {
			if _, err := utilnet.ParseIPNets(e); err != nil {
				return invalidService("service %s: annotation %q %q: entry %d %q is not a CIDR; expected a comma-separated list of CIDRs such as 10.0.0.0/24,192.168.2.0/24",
					key, v1.AnnotationLoadBalancerSourceRangesKey, cut(v), i, cut(strings.TrimSpace(e)))
			}
		}
	}
	// Not reached while the helper and ParseIPNets agree.
	return invalidService("service %s: source ranges: not a list of CIDRs; expected a list of CIDRs such as 10.0.0.0/24 and 192.168.2.0/24", key)
}

// isAllowAll reports whether ps restricts nothing for a Service of the
// given families: only /0 ranges, and one for every family (0.0.0.0/0
// alone would shut out the IPv6 clients of a dual-stack Service).
func isAllowAll(ps []netip.Prefix, families []v1.IPFamily) bool {
	var has4, has6 bool
	for _, p := range ps {
		if p.Bits() != 0 {
			return false
		}
		has4 = has4 || p.Addr().Is4()
		has6 = has6 || p.Addr().Is6()
	}
	return (has4 || !slices.Contains(families, v1.IPv4Protocol)) && (has6 || !slices.Contains(families, v1.IPv6Protocol))
}

func requestedIPs(svc *v1.Service, key string, families []v1.IPFamily, ann *Annotation) ([]netip.Addr, error) {
	var ip netip.Addr
	if s := svc.Spec.LoadBalancerIP; s != "" {
		a, err := netip.ParseAddr(s)
		if err != nil || a.Zone() != "" {
			return nil, invalidService("service %s: spec.loadBalancerIP %q; expected an IPv4 or IPv6 address", key, cut(s))
		}
		ip = a.Unmap()
	}
	if ann != nil {
		a, set, err := ann.IP(svc.Annotations)
		if err != nil {
			return nil, err
		}
		if set {
			a = a.Unmap()
			if ip.IsValid() && ip != a {
				return nil, invalidService("service %s: spec.loadBalancerIP %q and annotation %q %q differ; expected one address", key, cut(svc.Spec.LoadBalancerIP), ann.Name, cut(svc.Annotations[ann.Name]))
			}
			ip = a
		}
	}
	if !ip.IsValid() {
		return nil, nil
	}
	f := v1.IPv4Protocol
	if ip.Is6() {
		f = v1.IPv6Protocol
	}
	if !slices.Contains(families, f) {
		return nil, invalidService("service %s: requested IP %s is %s; expected a family of spec.ipFamilies %v", key, ip, f, families)
	}
	return []netip.Addr{ip}, nil
}

// cutFamilies returns spec.ipFamilies for quoting with %q: each entry cut,
// and at most four of them, then a count.
func cutFamilies(fs []v1.IPFamily) []string {
	const most = 4
	s := make([]string, 0, most+1)
	for i, f := range fs {
		if i == most {
			s = append(s, fmt.Sprintf("… (%d entries)", len(fs)))
			break
		}
		s = append(s, cut(string(f)))
	}
	return s
}

func joinProtocols(ps map[v1.Protocol]bool) string {
	var s []string
	for p := range ps {
		s = append(s, cut(string(p)))
	}
	slices.Sort(s)
	return strings.Join(s, " and ")
}
