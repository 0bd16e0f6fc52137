package loadbalancer

import (
	"cmp"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	v1 "k8s.io/api/core/v1"
	cloudprovider "k8s.io/cloud-provider"
	servicehelpers "k8s.io/cloud-provider/service/helpers"
	utilnet "k8s.io/utils/net"

	"github.com/ccmkit/ccmkit/annotation"
	"github.com/ccmkit/ccmkit/internal/cidr"
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
	// SharedBackendPools: several load balancers can reference one backend
	// pool, and the Driver is a PoolDriver. Load balancers whose backends
	// are the same set then reference one pool, so a Node change is one
	// pool write however many Services there are (see the package doc,
	// "Shared backend pools"). It is not a feature a Service asks for:
	// Desired ignores it, and the Reconciler acts on it.
	SharedBackendPools bool
	// ListenerPools: the cloud keeps backends and a health check per
	// listener, each listener with a pool of its own (OpenStack Octavia
	// pools, AWS target groups, OCI backend sets). Desired then gives every
	// listener its Pool (the Service's backends and health check), and Plan
	// compares and repairs each pool on its own, one cloud object per
	// action (see ListenerPool and the ActionKind docs). It is not a
	// feature a Service asks for, and it excludes SharedBackendPools.
	ListenerPools bool
	// UniqueNames: the cloud refuses to create a load balancer whose name
	// another one has, with an error wrapping ErrNameTaken, and creates
	// nothing (AWS, GCE, Azure within a resource group, Hetzner do;
	// OpenStack Octavia and DigitalOcean do not). Over a Cache, the
	// Reconciler then creates a Service's first load balancer when the
	// list holds none of its, without the Find that otherwise confirms
	// the list's miss before every create (see Cache): the create itself
	// is the confirmation, as a second creator's load balancer has the
	// same name (Namer.Name). A Service whose load balancer was created
	// since the list under another name (another Namer) is then not seen
	// until the next List; declare it only for a cloud that enforces it.
	// It is not a feature a Service asks for: Desired ignores it.
	UniqueNames bool
	// AppProtocols are the application protocols the load balancer can
	// serve on a listener (Listener.AppProtocol), as Services write them
	// in spec.ports[].appProtocol: IANA service names such as "http" and
	// "https", or domain-prefixed names such as "kubernetes.io/h2c";
	// compared exactly. Empty (the default): the provider builds every
	// port as its Protocol, and appProtocol stays what Kubernetes calls
	// it, a hint, ignored (Listener.AppProtocol is ""). Otherwise a port
	// whose appProtocol is not listed is refused (ErrUnsupported), never
	// silently built as plain TCP.
	AppProtocols []string
}

// DesiredInput is the input of Desired besides the Service and its Nodes.
// Every field but Cluster is optional: the zero value uses the default
// Namer, no declared annotations and the zero Capabilities.
type DesiredInput struct {
	// Cluster is the cluster identity (see the package doc); required.
	Cluster string
	// Namer names the load balancer; nil means NewNamer(NamerOptions{}).
	Namer *Namer
	// Capabilities are what the provider supports.
	Capabilities Capabilities
	// Annotations are the provider's declared annotations: every one
	// present on the Service is validated, and those with Setting go into
	// Spec.Settings. nil means none.
	Annotations *annotation.Set
	// RequestedIPAnnotation, if set, is a declared annotation.KindIP
	// annotation whose value is a requested load-balancer address, as an
	// alternative to the deprecated spec.loadBalancerIP. When both are set
	// they must agree.
	RequestedIPAnnotation *annotation.Annotation
	// AppProtocolAnnotation, if set, is a declared per-port annotation
	// (annotation.Annotation.PerPort, of kind enum or string) whose value
	// for a port is its application protocol, as an alternative to
	// spec.ports[].appProtocol (for users whose tooling cannot set that
	// field). Each value must be one of Capabilities.AppProtocols. When a
	// port has both they must agree.
	AppProtocolAnnotation *annotation.Annotation
	// HealthCheckAnnotation, if set, is a declared per-port string
	// annotation (annotation.Annotation.PerPort, not a Setting) whose value
	// for a port is the health check of that listener's pool, probing the
	// port's node port on each backend instead of the Service's health
	// check: "tcp" (a TCP connect) or "http:/path" (an HTTP GET of the
	// path). A port not listed keeps the Service's. It needs
	// Capabilities.ListenerPools, a health monitor per pool: on a flat
	// load balancer, which has one health check, a Service that sets it is
	// refused (ErrUnsupported, Feature "ListenerPools").
	HealthCheckAnnotation *annotation.Annotation
}

// maxClientIPAffinitySeconds is the longest ClientIP affinity timeout the
// kube-apiserver accepts (k8s.io/kubernetes pkg/apis/core, types.go
// MaxClientIPServiceAffinitySeconds; not exported by k8s.io/api).
const maxClientIPAffinitySeconds = 86400

var defaultNamer = func() *Namer {
	n, err := NewNamer(NamerOptions{})
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
//     field, or that is nil; values are quoted cut to a bounded length, so
//     a huge field makes no huge message;
//   - *annotation.Error (errors.Is annotation.ErrInvalid; several are
//     joined) for malformed declared annotations;
//   - *UnsupportedError (errors.Is ErrUnsupported) for features missing
//     from in.Capabilities;
//   - an error starting "loadbalancer.Desired: " for an unusable in (no
//     Cluster, an unknown Capabilities.BackendKey).
//
// Every problem of the Service is reported at once (joined), not only the
// first.
//
// Model: one listener per (IP family, Service port); backends are the nodes
// with a spec.providerID, as in.Capabilities.BackendKey keeps them (see
// BackendKey; by default those with an InternalIP of at least one of the
// Service's families, with their first InternalIP per family); health
// check per externalTrafficPolicy (Local: spec.healthCheckNodePort, HTTP
// /healthz, after servicehelpers.GetServiceHealthCheckPathPort; Cluster:
// kube-proxy's port 10256, HTTP /healthz); source ranges from the spec,
// else the service.beta.kubernetes.io/load-balancer-source-ranges
// annotation, else allow-all for every IP family of the Service.
func Desired(svc *v1.Service, nodes []*v1.Node, in DesiredInput) (*LoadBalancer, error) {
	if err := checkDesired(svc, in); err != nil {
		return nil, err
	}
	families, err := serviceFamilies(svc)
	if err != nil {
		return nil, err
	}
	namer := cmp.Or(in.Namer, defaultNamer)
	lb := &LoadBalancer{
		Name: namer.Name(in.Cluster, svc),
		Tags: OwnerOf(in.Cluster, svc).tags(),
	}
	b := specBuilder{svc: svc, key: svc.Namespace + "/" + svc.Name, caps: in.Capabilities, spec: &lb.Spec}
	b.families(families)
	b.settings(in.Annotations) // first: a malformed annotation is reported even if the spec is also wrong
	annotationErrs := len(b.errs)
	b.listeners()
	b.perPort(in.AppProtocolAnnotation, in.HealthCheckAnnotation, annotationErrs)
	b.healthCheck()
	b.sourceRanges()
	b.sessionAffinity()
	b.requestedIPs(in.Annotations, in.RequestedIPAnnotation)
	if len(b.errs) > 0 {
		return nil, errors.Join(b.errs...)
	}
	lb.Spec.BackendKey = in.Capabilities.BackendKey
	if in.Capabilities.ListenerPools {
		lb.Spec.ListenerPools = true
		for i, l := range lb.Spec.Listeners {
			hc := b.poolHealthCheck(l)
			lb.Spec.Listeners[i].Pool = &ListenerPool{HealthCheck: &hc}
		}
	}
	lb.Spec.setBackends(in.Capabilities.BackendKey.backends(nodes, families))
	return lb, nil
}

// checkDesired returns the errors that stop Desired before it looks at the
// Service's spec: a nil or foreign Service (loadBalancerClass), one that is
// not of type LoadBalancer, and an unusable in.
func checkDesired(svc *v1.Service, in DesiredInput) error {
	if svc == nil {
		return errNilService
	}
	if svc.Spec.LoadBalancerClass != nil {
		return cloudprovider.ImplementedElsewhere
	}
	if svc.Spec.Type != v1.ServiceTypeLoadBalancer {
		return invalidService("service %s/%s: spec.type is %q: expected %q", svc.Namespace, svc.Name, cut(string(svc.Spec.Type)), v1.ServiceTypeLoadBalancer)
	}
	if in.Cluster == "" {
		return errors.New("loadbalancer.Desired: DesiredInput.Cluster is empty: expected the cluster identity")
	}
	if err := checkAppProtocolAnnotation("loadbalancer.Desired: DesiredInput.AppProtocolAnnotation", in.AppProtocolAnnotation, in.Capabilities); err != nil {
		return err
	}
	if err := checkHealthCheckAnnotation("loadbalancer.Desired: DesiredInput.HealthCheckAnnotation", in.HealthCheckAnnotation, in.Capabilities); err != nil {
		return err
	}
	if in.Capabilities.ListenerPools && in.Capabilities.SharedBackendPools {
		return errors.New("loadbalancer.Desired: DesiredInput.Capabilities: ListenerPools and SharedBackendPools are both true: expected at most one (a listener's pool is its own)")
	}
	return in.Capabilities.BackendKey.check("loadbalancer.Desired: DesiredInput.Capabilities.BackendKey")
}

// specBuilder builds the Spec of Desired in named steps, one per part of
// the Service, collecting every error so that the user sees all of them
// at once.
type specBuilder struct {
	perPortAnns []*annotation.Annotation    // the declared per-port annotations (settings)
	portHealth  map[ListenerKey]HealthCheck // per-port health checks (listenerHealthCheck)
	svc         *v1.Service
	key         string // namespace/name, for messages
	caps        Capabilities
	spec        *Spec
	errs        []error
}

func (b *specBuilder) fail(err error) { b.errs = append(b.errs, err) }

// unsupported records that the Service asks for feature, which the
// provider did not declare; detail names the Service field and value.
func (b *specBuilder) unsupported(feature, format string, args ...any) {
	b.fail(&UnsupportedError{Feature: feature, Detail: fmt.Sprintf("service %s: "+format, append([]any{b.key}, args...)...)})
}

// invalid records an unusable field of the Service.
func (b *specBuilder) invalid(format string, args ...any) {
	b.fail(invalidService("service %s: "+format, append([]any{b.key}, args...)...))
}

// families sets the IP families; two need Capabilities.DualStack.
func (b *specBuilder) families(families []v1.IPFamily) {
	b.spec.IPFamilies = families
	if len(families) == 2 && !b.caps.DualStack {
		b.unsupported("DualStack", "spec.ipFamilies %v", families)
	}
}

// settings validates every declared annotation present on the Service and
// copies those declared with Setting into Spec.Settings.
func (b *specBuilder) settings(set *annotation.Set) {
	if set == nil {
		return
	}
	if err := set.Validate(b.svc.Annotations); err != nil {
		b.fail(err)
	}
	for _, a := range set.All() {
		if a.PerPort { // checked and applied to each listener (perPort)
			b.perPortAnns = append(b.perPortAnns, a)
			continue
		}
		if !a.Setting {
			continue
		}
		if v, _, err := a.Canonical(b.svc.Annotations); err == nil {
			if b.spec.Settings == nil {
				b.spec.Settings = map[string]string{}
			}
			b.spec.Settings[a.Name] = v
		}
	}
}

// listeners builds one listener per (IP family, Service port), sorted,
// checking protocols, ports and node ports against the Capabilities.
func (b *specBuilder) listeners() {
	svc, families := b.svc, b.spec.IPFamilies
	nodePortless := svc.Spec.AllocateLoadBalancerNodePorts != nil && !*svc.Spec.AllocateLoadBalancerNodePorts
	if nodePortless && !b.caps.NodePortless {
		b.unsupported("NodePortless", "spec.allocateLoadBalancerNodePorts=false")
	}
	if len(svc.Spec.Ports) == 0 {
		b.invalid("spec.ports is empty: expected at least one port")
	}
	protocols := map[v1.Protocol]bool{}
	listeners := make([]Listener, 0, len(svc.Spec.Ports)*len(families))
	for i, p := range svc.Spec.Ports {
		proto := cmp.Or(p.Protocol, v1.ProtocolTCP)
		b.protocol(i, proto)
		protocols[proto] = true
		if p.Port < 1 || p.Port > 65535 {
			b.invalid("spec.ports[%d].port %d: expected 1-65535", i, p.Port)
		}
		if p.NodePort < 0 || p.NodePort > 65535 || (p.NodePort == 0 && !nodePortless) {
			b.invalid("spec.ports[%d].nodePort %d: expected an allocated node port (1-65535)", i, p.NodePort)
		}
		app := b.appProtocol(i, p)
		for _, f := range families {
			listeners = append(listeners, Listener{ListenerKey: ListenerKey{Family: f, Protocol: proto, Port: p.Port}, NodePort: p.NodePort, AppProtocol: app})
		}
	}
	if len(protocols) > 1 && !b.caps.MixedProtocols {
		b.unsupported("MixedProtocols", "spec.ports mixes %s", joinProtocols(protocols))
	}
	slices.SortFunc(listeners, compareListener)
	for i := 1; i < len(listeners); i++ {
		if listeners[i].ListenerKey == listeners[i-1].ListenerKey {
			b.invalid("spec.ports has port %d/%s twice: expected unique (protocol, port)", listeners[i].Port, cut(string(listeners[i].Protocol)))
		}
	}
	b.spec.Listeners = listeners
}

// appProtocol returns the application protocol of spec.ports[i] (p), as
// Capabilities.AppProtocols says: "" when the provider declares none (the
// field is a hint), else p's appProtocol, which must be one of them.
func (b *specBuilder) appProtocol(i int, p v1.ServicePort) string {
	if len(b.caps.AppProtocols) == 0 || p.AppProtocol == nil || *p.AppProtocol == "" {
		return ""
	}
	app := *p.AppProtocol
	if !slices.Contains(b.caps.AppProtocols, app) {
		b.unsupported("AppProtocols", "spec.ports[%d].appProtocol %q (expected one of %q)", i, cut(app), b.caps.AppProtocols)
		return ""
	}
	return app
}

// protocol checks the protocol of spec.ports[i] against the Capabilities.
func (b *specBuilder) protocol(i int, proto v1.Protocol) {
	switch proto {
	case v1.ProtocolTCP:
	case v1.ProtocolUDP:
		if !b.caps.UDP {
			b.unsupported("UDP", "spec.ports[%d].protocol UDP", i)
		}
	case v1.ProtocolSCTP:
		if !b.caps.SCTP {
			b.unsupported("SCTP", "spec.ports[%d].protocol SCTP", i)
		}
	default:
		b.invalid("spec.ports[%d].protocol %q: expected TCP, UDP or SCTP", i, cut(string(proto)))
	}
}

// healthCheck probes the Service's health check node port for
// externalTrafficPolicy Local, else kube-proxy's health port.
func (b *specBuilder) healthCheck() {
	svc := b.svc
	switch svc.Spec.ExternalTrafficPolicy {
	case "", v1.ServiceExternalTrafficPolicyCluster, v1.ServiceExternalTrafficPolicyLocal:
	default:
		b.invalid("spec.externalTrafficPolicy %q: expected Cluster or Local", cut(string(svc.Spec.ExternalTrafficPolicy)))
	}
	if !servicehelpers.RequestsOnlyLocalTraffic(svc) {
		b.spec.HealthCheck = HealthCheck{Protocol: HealthCheckHTTP, Port: kubeProxyHealthzPort, Path: "/healthz"}
		return
	}
	path, port := servicehelpers.GetServiceHealthCheckPathPort(svc)
	if port <= 0 || port > 65535 {
		b.invalid("spec.healthCheckNodePort %d with externalTrafficPolicy Local: expected an allocated port (1-65535)", svc.Spec.HealthCheckNodePort)
	}
	b.spec.HealthCheck = HealthCheck{Protocol: HealthCheckHTTP, Port: port, Path: path}
}

// sourceRanges sets the allowed client CIDRs; anything but allow-all needs
// Capabilities.SourceRanges.
func (b *specBuilder) sourceRanges() {
	ranges, err := sourceRanges(b.svc)
	if err != nil {
		b.fail(err)
		return
	}
	b.spec.SourceRanges = ranges
	if !b.caps.SourceRanges && !isAllowAll(ranges, b.spec.IPFamilies) {
		b.unsupported("SourceRanges", "source ranges %s", cidr.Join(ranges))
	}
}

// sessionAffinity sets ClientIP affinity and its timeout, within the
// kube-apiserver's bounds; it needs Capabilities.ClientIPAffinity.
func (b *specBuilder) sessionAffinity() {
	svc := b.svc
	switch svc.Spec.SessionAffinity {
	case v1.ServiceAffinityNone, "":
	case v1.ServiceAffinityClientIP:
		if !b.caps.ClientIPAffinity {
			b.unsupported("ClientIPAffinity", "spec.sessionAffinity ClientIP")
		}
		b.spec.SessionAffinity = SessionAffinity{ClientIP: true, TimeoutSeconds: v1.DefaultClientIPServiceAffinitySeconds}
		if c := svc.Spec.SessionAffinityConfig; c != nil && c.ClientIP != nil && c.ClientIP.TimeoutSeconds != nil {
			// The kube-apiserver's own bounds (k8s.io/kubernetes v1.37.2
			// pkg/apis/core/validation/validation.go, validateAffinityTimeout).
			if t := *c.ClientIP.TimeoutSeconds; t < 1 || t > maxClientIPAffinitySeconds {
				b.invalid("spec.sessionAffinityConfig.clientIP.timeoutSeconds %d: expected 1-%d", t, maxClientIPAffinitySeconds)
			}
			b.spec.SessionAffinity.TimeoutSeconds = *c.ClientIP.TimeoutSeconds
		}
	default:
		b.invalid("spec.sessionAffinity %q: expected None or ClientIP", cut(string(svc.Spec.SessionAffinity)))
	}
}

// requestedIPs sets the requested address (spec.loadBalancerIP or the
// requested-IP annotation ann); it needs Capabilities.RequestedIP. A
// malformed annotation declared in set was already reported by settings.
func (b *specBuilder) requestedIPs(set *annotation.Set, ann *annotation.Annotation) {
	ips, err := requestedIPs(b.svc, b.key, b.spec.IPFamilies, ann)
	if err != nil {
		if ae, ok := errors.AsType[*annotation.Error](err); !ok || !declared(set, ae.Name) {
			b.fail(err)
		}
		return
	}
	if len(ips) > 0 {
		if !b.caps.RequestedIP {
			b.unsupported("RequestedIP", "requested IP %s", ips[0])
		}
		b.spec.RequestedIPs = ips
	}
}

// declared reports whether set declares an annotation of this name.
func declared(set *annotation.Set, name string) bool {
	_, ok := set.Lookup(name)
	return ok
}

// serviceFamilies returns svc's IP families: spec.ipFamilies, or [IPv4]
// when the list is empty (a Service the API server has not defaulted). An
// unknown family or a repeated one, or a nil svc, is an ErrInvalidService
// error (wrapped) quoting the families cut to a bounded length.
func serviceFamilies(svc *v1.Service) ([]v1.IPFamily, error) {
	if svc == nil {
		return nil, errNilService
	}
	fs := svc.Spec.IPFamilies
	if len(fs) == 0 {
		return []v1.IPFamily{v1.IPv4Protocol}, nil
	}
	if len(fs) > 2 || (len(fs) == 2 && fs[0] == fs[1]) {
		return nil, invalidService("service %s/%s: spec.ipFamilies %q: expected one family or IPv4 and IPv6", svc.Namespace, svc.Name, cutFamilies(fs))
	}
	for _, f := range fs {
		if f != v1.IPv4Protocol && f != v1.IPv6Protocol {
			return nil, invalidService("service %s/%s: spec.ipFamilies contains %q: expected IPv4 or IPv6", svc.Namespace, svc.Name, cut(string(f)))
		}
	}
	return slices.Clone(fs), nil
}

// backends returns the backends for nodes and the Service's families, as a
// cloud keyed by k keeps them, in canonical order (see Spec.Backends): one
// per node with a spec.providerID, carrying its name, provider ID and first
// InternalIP of each of the families (IPv4-mapped addresses unmapped, zoned
// ones ignored). Under BackendKeyNodeName a node needs an InternalIP of one
// of the families (others cannot receive traffic and are left out); under
// BackendKeyProviderID it needs none; under BackendKeyAddress each address is
// its own backend. Nodes with the same key (the same name, provider ID or
// address) count once, the first listed. nodes and the Nodes are only read;
// nil entries are skipped.
func (k BackendKey) backends(nodes []*v1.Node, families []v1.IPFamily) []Backend {
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

// sourceRanges returns the client CIDRs svc allows, in the order of
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
func sourceRanges(svc *v1.Service) ([]netip.Prefix, error) {
	if svc == nil {
		return nil, errNilService
	}
	if len(svc.Spec.LoadBalancerSourceRanges) == 0 && strings.TrimSpace(svc.Annotations[v1.AnnotationLoadBalancerSourceRangesKey]) == "" {
		families, err := serviceFamilies(svc)
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
	slices.SortFunc(out, cidr.Compare)
	return slices.Compact(out), nil
}

// sourceRangeError is sourceRanges' error for a Service whose source
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
				return invalidService("service %s: spec.loadBalancerSourceRanges[%d] %q is not a CIDR: expected a list of CIDRs such as 10.0.0.0/24 and 192.168.2.0/24",
					key, i, cut(e))
			}
		}
	} else {
		v := strings.TrimSpace(svc.Annotations[v1.AnnotationLoadBalancerSourceRangesKey])
		for i, e := range strings.Split(v, ",") {
			if _, err := utilnet.ParseIPNets(e); err != nil {
				return invalidService("service %s: annotation %q %q: entry %d %q is not a CIDR: expected a comma-separated list of CIDRs such as 10.0.0.0/24,192.168.2.0/24",
					key, v1.AnnotationLoadBalancerSourceRangesKey, cut(v), i, cut(strings.TrimSpace(e)))
			}
		}
	}
	// Not reached while the helper and ParseIPNets agree.
	return invalidService("service %s: source ranges: not a list of CIDRs: expected a list of CIDRs such as 10.0.0.0/24 and 192.168.2.0/24", key)
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

func requestedIPs(svc *v1.Service, key string, families []v1.IPFamily, ann *annotation.Annotation) ([]netip.Addr, error) {
	var ip netip.Addr
	if s := svc.Spec.LoadBalancerIP; s != "" {
		a, err := netip.ParseAddr(s)
		if err != nil || a.Zone() != "" {
			return nil, invalidService("service %s: spec.loadBalancerIP %q: expected an IPv4 or IPv6 address", key, cut(s))
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
				return nil, invalidService("service %s: spec.loadBalancerIP %q and annotation %q %q differ: expected one address", key, cut(svc.Spec.LoadBalancerIP), ann.Name, cut(svc.Annotations[ann.Name]))
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
		return nil, invalidService("service %s: requested IP %s is %s: expected a family of spec.ipFamilies %v", key, ip, f, families)
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
