package loadbalancer

import (
	"cmp"
	"fmt"
	"maps"
	"net/netip"
	"slices"

	v1 "k8s.io/api/core/v1"

	"github.com/ccmkit/ccmkit/internal/cidr"
)

// LoadBalancer is the provider-neutral model of one cloud load balancer.
// It marshals to JSON with lowerCamel field names (the fake serves and
// stores it in that form).
//
// It is used both for the desired state (built by Desired; ID and Ingress
// are empty) and for the actual state a Driver reports (ID, Name, Tags,
// Spec as configured in the cloud, Ingress as assigned by the cloud).
// Plan compares Tags (only the ccmkit keys) and Spec; it never compares
// Name, ID or Ingress.
//
// A LoadBalancer is a plain value: it is not safe for concurrent mutation,
// and the functions of this package never mutate one they were given.
type LoadBalancer struct {
	// ID is the cloud-assigned identifier; empty in a desired model.
	ID string `json:"id,omitempty"`
	// Name is the cloud name (see Namer). It is for people; identity is
	// in Tags.
	Name string `json:"name,omitempty"`
	// Tags are the load balancer's tags or labels. A desired model holds
	// exactly the ownership tags (Owner.Tags); a Driver reports all tags
	// it knows, and Plan only ever touches the ccmkit keys.
	Tags map[string]string `json:"tags,omitempty"`
	// Spec is what ccmkit manages on the load balancer.
	Spec Spec `json:"spec"`
	// Ingress are the addresses the cloud assigned, in a stable order.
	// Reported by the Driver; used to build the Service status.
	Ingress []Ingress `json:"ingress,omitempty"`
}

// Spec is the part of a load balancer that ccmkit manages. Slices are kept
// in canonical order (see the field docs) so that two Specs describing the
// same load balancer compare equal. A Driver may report a Spec in any
// order: Plan and Apply put a copy in canonical order first.
type Spec struct {
	// IPFamilies are the Service's IP families in the Service's order
	// (primary family first). A single-stack Service has one.
	IPFamilies []v1.IPFamily `json:"ipFamilies,omitempty"`
	// RequestedIPs are the addresses the user asked for
	// (spec.loadBalancerIP or the provider's requested-IP annotation), at
	// most one per family, sorted. Empty means "any address".
	RequestedIPs []netip.Addr `json:"requestedIPs,omitempty"`
	// Listeners are the front-end listeners, one per (IP family, protocol,
	// port), sorted by ListenerKey.
	Listeners []Listener `json:"listeners,omitempty"`
	// Backends are the nodes traffic is sent to, sorted by their key (see
	// BackendKey). Empty when the load balancer sends traffic to a shared
	// pool (BackendPool) only. Under Capabilities.ListenerPools, Desired
	// sets it to the backends every listener's pool should hold, and Plan
	// compares the pools (Listener.Pool) instead: a Driver may then report
	// it empty.
	Backends []Backend `json:"backends,omitempty"`
	// BackendPool is the ID of the shared backend pool (see Pool) the load
	// balancer also sends traffic to; empty: none. A load balancer of a
	// Service served from a pool has it set and no Backends; while it
	// moves between its own backends and a pool it briefly has both (see
	// Plan).
	BackendPool string `json:"backendPool,omitempty"`
	// BackendKey is what the cloud keeps of each backend, and so what Plan
	// matches and compares backends by. Desired copies it from
	// Capabilities.BackendKey; Plan reads it from the desired model only,
	// Apply from the load balancer it changes, so a Driver need not report
	// it.
	BackendKey BackendKey `json:"backendKey,omitempty"`
	// ListenerPools says the cloud keeps backends and a health check per
	// listener (see Capabilities.ListenerPools). Desired copies it from
	// the Capabilities and sets every listener's Pool; Plan reads it from
	// the desired model only, so a Driver need not report it.
	ListenerPools bool `json:"listenerPools,omitempty"`
	// HealthCheck is how the load balancer probes backends. Under
	// Capabilities.ListenerPools it is each pool's health check
	// (ListenerPool.HealthCheck) in a desired load balancer, and Plan
	// compares the pools' instead: a Driver may then report it zero.
	HealthCheck HealthCheck `json:"healthCheck"`
	// SourceRanges are the client CIDRs allowed to connect, masked and
	// sorted (IPv4 before IPv6). Allow-all is 0.0.0.0/0 and/or ::/0, one
	// per IP family of the Service.
	SourceRanges []netip.Prefix `json:"sourceRanges,omitempty"`
	// SessionAffinity is the Service's session affinity.
	SessionAffinity SessionAffinity `json:"sessionAffinity"`
	// Settings are provider settings taken from declared annotations with
	// Annotation.Setting set: annotation name → canonical value ("" when
	// the annotation is not set and has no default). Plan compares only
	// the keys present in the desired Spec, so a Driver must report every
	// key it was given.
	Settings map[string]string `json:"settings,omitempty"`
}

// ListenerKey identifies a listener: Plan matches desired and actual
// listeners by key.
type ListenerKey struct {
	Family   v1.IPFamily `json:"family"`
	Protocol v1.Protocol `json:"protocol"`
	Port     int32       `json:"port"`
}

// text returns "IPv4/TCP/80", for messages.
func (k ListenerKey) text() string {
	return fmt.Sprintf("%s/%s/%d", k.Family, k.Protocol, k.Port)
}

// compare orders keys by family (IPv4 first), protocol, port.
func (k ListenerKey) compare(o ListenerKey) int {
	return cmp.Or(cmp.Compare(familyRank(k.Family), familyRank(o.Family)),
		cmp.Compare(k.Family, o.Family),
		cmp.Compare(k.Protocol, o.Protocol),
		cmp.Compare(k.Port, o.Port))
}

// Listener is one front-end listener of a load balancer.
//
// Plan matches listeners by ListenerKey and compares NodePort, AppProtocol
// and, of Settings, the keys present in the desired listener; it never
// compares ID. Under Capabilities.ListenerPools it compares Pool too (see
// ListenerPool).
type Listener struct {
	ListenerKey
	// NodePort is the Service node port traffic is sent to on every
	// backend; 0 when the Service does not allocate node ports
	// (spec.allocateLoadBalancerNodePorts=false), in which case the Driver
	// routes to endpoints by its own means (Capabilities.NodePortless).
	// Under Capabilities.ListenerPools a cloud may keep the node port only
	// on the pool's members: a Driver then reports 0 for a listener without
	// a pool or whose pool has no members, and Plan takes 0 there as
	// unknown, not as a difference (the members added later carry the
	// desired port).
	NodePort int32 `json:"nodePort,omitempty"`
	// AppProtocol is the application protocol the listener serves, from
	// spec.ports[].appProtocol or Options.AppProtocolAnnotation: one of
	// Capabilities.AppProtocols, or "" for a plain Protocol listener (L4).
	// A Driver reports the value it was given.
	AppProtocol string `json:"appProtocol,omitempty"`
	// Settings are the per-port provider settings: the declared per-port
	// annotations (annotation.Annotation.PerPort) with Setting set,
	// annotation name → canonical value for this listener's port ("" when
	// the port is not listed and the annotation has no default). Plan
	// compares only the keys present in the desired listener, so a Driver
	// must report every key it was given (a certificate reference, PROXY
	// protocol, a redirect).
	Settings map[string]string `json:"settings,omitempty"`
	// Pool is the listener's own backend pool under
	// Capabilities.ListenerPools (nil otherwise). In an actual load
	// balancer, nil means the listener has no pool (yet).
	Pool *ListenerPool `json:"pool,omitempty"`
	// ID is the cloud's identifier of the listener, for a Driver that
	// needs it in later actions: Plan passes the listener as the Driver
	// reported it in every action that targets it. Plan never compares it.
	ID string `json:"id,omitempty"`
}

// ListenerPool is the backend pool of one listener, on a cloud that keeps
// backends and a health check per listener (Capabilities.ListenerPools:
// OpenStack Octavia pools, AWS target groups, OCI backend sets). Each is
// compared on its own, so a Driver reports exactly what each pool holds
// and Plan repairs exactly what one lacks (a member missing from one pool,
// a pool without its health monitor).
type ListenerPool struct {
	// ID is the cloud's identifier of the pool; Plan never compares it.
	ID string `json:"id,omitempty"`
	// Backends are the pool's members, sorted by the BackendKey, as
	// Spec.Backends are.
	Backends []Backend `json:"backends,omitempty"`
	// HealthCheck is the pool's health monitor; nil when it has none.
	HealthCheck *HealthCheck `json:"healthCheck,omitempty"`
}

// clone returns a deep copy of p (nil for nil).
func (p *ListenerPool) clone() *ListenerPool {
	if p == nil {
		return nil
	}
	c := *p
	c.Backends = slices.Clone(p.Backends)
	if p.HealthCheck != nil {
		hc := *p.HealthCheck
		c.HealthCheck = &hc
	}
	return &c
}

// clone returns a deep copy of l.
func (l Listener) clone() Listener {
	l.Settings = maps.Clone(l.Settings)
	l.Pool = l.Pool.clone()
	return l
}

// attrsEqual reports whether have matches want in what Plan compares of a
// listener itself (not its pool): key, node port (under ListenerPools,
// when want has a pool, 0 in have counts as unknown while have has no
// pool or an empty one, see Listener.NodePort), application protocol and
// the settings want names.
func (want Listener) attrsEqual(have Listener) bool { //nolint:staticcheck // ST1016: want and have name the two sides compared, as in Plan
	return want.ListenerKey == have.ListenerKey && want.nodePortMatches(have) &&
		want.AppProtocol == have.AppProtocol &&
		len(changedKeys(want.Settings, have.Settings)) == 0
}

// nodePortMatches reports whether have's node port is want's, or unknown:
// 0, under ListenerPools (want has a pool), while have has no pool or an
// empty one (see Listener.NodePort).
func (want Listener) nodePortMatches(have Listener) bool {
	unknown := have.NodePort == 0 && want.Pool != nil && (have.Pool == nil || len(have.Pool.Backends) == 0)
	return want.NodePort == have.NodePort || unknown
}

// BackendKey says what a cloud keeps of a load-balancer backend, and so
// what identifies one: Plan matches desired and actual backends by it and
// compares nothing else, and Apply adds and removes backends by it. A
// Driver reports, for each backend, at least the fields of its key. Under
// every key a desired backend carries its Node's ProviderID, and with
// Options.Instances set a backend about to be added (in ActionCreate,
// ActionAddBackends or a shared pool's members) whose instance
// InstanceExists reports gone is left out and reported.
type BackendKey string

// The backend keys.
const (
	// BackendKeyNodeName (the zero value) is a cloud that keeps each
	// Backend whole, Node name included (an in-memory cloud, a cloud whose
	// targets carry free-form names). Backends are matched by NodeName; a
	// backend whose provider ID or address changed is sent again in
	// ActionAddBackends, which replaces it. Nodes without an InternalIP of
	// one of the Service's families are left out.
	BackendKeyNodeName BackendKey = ""
	// BackendKeyProviderID is a cloud whose targets are instances (VM IDs:
	// hcloud, DigitalOcean, most IaaS). A Driver reports Backend.ProviderID
	// (the spec.providerID of the instance's Node, see provider.Codec) and
	// may leave the other fields empty; Plan compares provider IDs only, so
	// a Node whose name differs from its instance's, or whose addresses
	// change, keeps its target. Nodes need no InternalIP.
	BackendKeyProviderID BackendKey = "ProviderID"
	// BackendKeyAddress is a cloud whose targets are addresses (pool
	// members by IP: OpenStack Octavia, a plain L4 proxy). Each Backend
	// then carries exactly one address, IPv4 or IPv6: a dual-stack Node is
	// two backends, one per family of the Service. A Driver reports one
	// Backend per member with that address set and may leave the other
	// fields empty; Plan compares the address only. Nodes without an
	// InternalIP of one of the Service's families are left out.
	BackendKeyAddress BackendKey = "Address"
)

// Backend is one node behind the load balancer.
type Backend struct {
	// NodeName is the Kubernetes Node name; the key of BackendKeyNodeName.
	// A desired backend always has it; a Driver keyed otherwise may
	// report it empty.
	NodeName string `json:"nodeName,omitempty"`
	// ProviderID is the Node's spec.providerID; the key of
	// BackendKeyProviderID. A desired backend always has it.
	ProviderID string `json:"providerID,omitempty"`
	// IPv4 and IPv6 are the Node's first InternalIP of each family the
	// Service uses; the zero Addr when the family is unused or the Node has
	// no InternalIP of that family. Under BackendKeyAddress exactly one is
	// set, and it is the key.
	IPv4 netip.Addr `json:"ipv4,omitzero"`
	IPv6 netip.Addr `json:"ipv6,omitzero"`
}

// HealthCheckProtocol is the protocol of a health check.
type HealthCheckProtocol string

// The health-check protocols.
const (
	// HealthCheckHTTP is the protocol of the Service's health check: both
	// kube-proxy's health endpoint and the per-Service healthCheckNodePort
	// answer HTTP. A per-port health check (DesiredInput.HealthCheckAnnotation
	// "http:/path") is one too, of the path on the listener's node port.
	HealthCheckHTTP HealthCheckProtocol = "HTTP"
	// HealthCheckTCP is a TCP connect to Port (Path empty): the per-port
	// health check "tcp" of DesiredInput.HealthCheckAnnotation, on the
	// listener's node port.
	HealthCheckTCP HealthCheckProtocol = "TCP"
)

// kubeProxyHealthzPort is kube-proxy's health port (--healthz-bind-address
// default :10256), probed for externalTrafficPolicy=Cluster.
const kubeProxyHealthzPort = 10256

// HealthCheck describes how backends are probed: Protocol to Port, at Path.
type HealthCheck struct {
	Protocol HealthCheckProtocol `json:"protocol,omitempty"`
	Port     int32               `json:"port,omitempty"`
	Path     string              `json:"path,omitempty"`
}

// SessionAffinity is the Service's session affinity.
type SessionAffinity struct {
	// ClientIP is true for spec.sessionAffinity=ClientIP.
	ClientIP bool `json:"clientIP,omitempty"`
	// TimeoutSeconds is the ClientIP timeout (0 when ClientIP is false).
	TimeoutSeconds int32 `json:"timeoutSeconds,omitempty"`
}

// Ingress is one address of a load balancer, as the cloud reports it. The
// Reconciler validates it when it builds the Service's status.
type Ingress struct {
	// IP is the address, in any form netip.ParseAddr accepts. Exactly one
	// of IP and Hostname is set.
	IP string `json:"ip,omitempty"`
	// Hostname is a DNS-1123 subdomain that is not an IP.
	Hostname string `json:"hostname,omitempty"`
	// IPMode is VIP or Proxy, only with IP; empty leaves it unset.
	IPMode v1.LoadBalancerIPMode `json:"ipMode,omitempty"`
	// Ports are optional per-port statuses.
	Ports []v1.PortStatus `json:"ports,omitempty"`
}

// Clone returns a deep copy of lb (nil for nil).
func (lb *LoadBalancer) Clone() *LoadBalancer {
	if lb == nil {
		return nil
	}
	c := *lb
	c.Tags = maps.Clone(lb.Tags)
	c.Spec = lb.Spec.clone()
	c.Ingress = slices.Clone(lb.Ingress)
	for i := range c.Ingress {
		c.Ingress[i].Ports = slices.Clone(c.Ingress[i].Ports)
	}
	return &c
}

// clone returns a deep copy of s.
func (s Spec) clone() Spec {
	c := s
	c.IPFamilies = slices.Clone(s.IPFamilies)
	c.RequestedIPs = slices.Clone(s.RequestedIPs)
	c.Listeners = slices.Clone(s.Listeners)
	for i := range c.Listeners {
		c.Listeners[i] = c.Listeners[i].clone()
	}
	c.Backends = slices.Clone(s.Backends)
	c.SourceRanges = slices.Clone(s.SourceRanges)
	c.Settings = maps.Clone(s.Settings)
	return c
}

// setBackends sets the backends of s to bs: Spec.Backends and, under
// ListenerPools, the members of every listener's pool that exists. The
// listeners are copied, not changed in place (s may share them with the
// load balancer it was copied from), and bs is shared.
func (s *Spec) setBackends(bs []Backend) {
	s.Backends = bs
	if !s.ListenerPools {
		return
	}
	s.Listeners = slices.Clone(s.Listeners)
	for i := range s.Listeners {
		if p := s.Listeners[i].Pool; p != nil {
			c := *p
			c.Backends = bs
			s.Listeners[i].Pool = &c
		}
	}
}

// canonicalize puts s in canonical form in place: RequestedIPs sorted and
// unique, Listeners sorted by key, Backends sorted by s.BackendKey,
// SourceRanges masked, sorted and unique.
func (s *Spec) canonicalize() {
	slices.SortFunc(s.RequestedIPs, compareAddr)
	s.RequestedIPs = slices.Compact(s.RequestedIPs)
	slices.SortStableFunc(s.Listeners, compareListener)
	slices.SortStableFunc(s.Backends, s.BackendKey.compareFunc())
	for _, l := range s.Listeners {
		if l.Pool != nil {
			slices.SortStableFunc(l.Pool.Backends, s.BackendKey.compareFunc())
		}
	}
	for i, p := range s.SourceRanges {
		s.SourceRanges[i] = p.Masked()
	}
	slices.SortFunc(s.SourceRanges, cidr.Compare)
	s.SourceRanges = slices.Compact(s.SourceRanges)
}

func familyRank(f v1.IPFamily) int {
	switch f {
	case v1.IPv4Protocol:
		return 0
	case v1.IPv6Protocol:
		return 1
	}
	return 2
}

func compareAddr(a, b netip.Addr) int { return a.Compare(b) }

// compareListener orders listeners by key, the canonical order of
// Spec.Listeners.
func compareListener(a, b Listener) int { return a.ListenerKey.compare(b.ListenerKey) }

// valid reports whether k is one of the BackendKey constants.
func (k BackendKey) valid() bool {
	return k == BackendKeyNodeName || k == BackendKeyProviderID || k == BackendKeyAddress
}

// check returns an error naming field, k and the accepted values when k is
// not one of the BackendKey constants.
func (k BackendKey) check(field string) error {
	if k.valid() {
		return nil
	}
	return fmt.Errorf("%s %q: expected %q (node name, the zero value), %q or %q", field, string(k), BackendKeyNodeName, BackendKeyProviderID, BackendKeyAddress)
}

// compareFunc returns the order of backends under k, the canonical order of
// Spec.Backends: by node name, provider ID, or address. Backends with the
// same key compare equal.
func (k BackendKey) compareFunc() func(a, b Backend) int {
	switch k {
	case BackendKeyProviderID:
		return compareByProviderID
	case BackendKeyAddress:
		return compareByAddress
	}
	return compareByName
}

func compareByName(a, b Backend) int       { return cmp.Compare(a.NodeName, b.NodeName) }
func compareByProviderID(a, b Backend) int { return cmp.Compare(a.ProviderID, b.ProviderID) }
func compareByAddress(a, b Backend) int    { return a.address().Compare(b.address()) }

// id returns b's key under k as a string, for maps.
func (k BackendKey) id(b Backend) string {
	switch k {
	case BackendKeyProviderID:
		return b.ProviderID
	case BackendKeyAddress:
		return b.address().String()
	}
	return b.NodeName
}

// changed reports whether the cloud must be sent want again although it
// holds have with the same key: only a cloud that keeps the whole Backend
// (BackendKeyNodeName) sees a changed provider ID or address.
func (k BackendKey) changed(want, have Backend) bool {
	return k == BackendKeyNodeName && want != have
}

// address is a backend's address under BackendKeyAddress, where each
// Backend carries one: IPv4 when set, else IPv6.
func (b Backend) address() netip.Addr {
	if b.IPv4.IsValid() {
		return b.IPv4
	}
	return b.IPv6
}

// label names b for people: its node name, else its provider ID, else its
// address (a Driver keyed otherwise may report only those).
func (b Backend) label() string {
	switch {
	case b.NodeName != "":
		return b.NodeName
	case b.ProviderID != "":
		return b.ProviderID
	case b.address().IsValid():
		return b.address().String()
	}
	return `""`
}
