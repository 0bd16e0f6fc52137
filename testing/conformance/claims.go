package conformance

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
)

// Claims lists what the provider offers. Capabilities select whole groups of
// rules; features select the load-balancer and route variants that are
// checked to work, while the load-balancer variants of unclaimed features are
// checked to be rejected with an error (LB-UNSUPPORTED-REJECTED).
// Claim only what the provider builds as asked.
//
// A claim is never narrowed in place without notice: when part of what one
// covered becomes a claim of its own (SourceRangesAnnotation was split off
// SourceRanges), a Config claiming the old one must claim the new one or
// acknowledge it in Config.Unclaimed, or Validate rejects it naming both.
type Claims struct {
	// Capabilities: the accessors of cloudprovider.Interface that return
	// (impl, true).
	LoadBalancer bool
	InstancesV2  bool
	Routes       bool
	Zones        bool

	// UDP, SCTP: Services with ports of that protocol.
	UDP  bool
	SCTP bool
	// MixedProtocols: one Service with TCP and UDP ports.
	MixedProtocols bool
	// DualStackLoadBalancers: a RequireDualStack Service gets a load
	// balancer with an ingress of each IP family, open by default to all of
	// both. Unclaimed, LB-DUAL-STACK-REJECTED (a recommendation) expects
	// such a Service to be rejected.
	DualStackLoadBalancers bool
	// IPv6Routes: routes for IPv6 pod CIDRs, next to the IPv4 ones of the
	// same node. It adds an IPv6 cluster CIDR to Config.ClusterCIDRs' default.
	IPv6Routes bool
	// DualStackNodeAddresses: every node has addresses of both IP families,
	// among them an InternalIP of each.
	DualStackNodeAddresses bool
	// HostnameIngress: the load balancer may report a hostname instead of an
	// IP as its ingress.
	HostnameIngress bool
	// NodePortless: Services with allocateLoadBalancerNodePorts=false.
	NodePortless bool
	// PassThrough: the load balancers pass traffic through to the nodes,
	// still addressed to the load balancer's IP and the Service port,
	// where kube-proxy takes it (a pass-through network load balancer, such
	// as GCE's target pools), instead of forwarding it to a node port.
	// Hooks.Listeners then reports NodePort 0 for every listener, and the
	// rules expect 0 (see Listener).
	PassThrough bool
	// SourceRanges: load balancers restricted to the client CIDRs of
	// spec.loadBalancerSourceRanges. Unclaimed, a Service with that field
	// must be rejected, not opened to everyone (LB-UNSUPPORTED-REJECTED).
	SourceRanges bool
	// SharedBackendPools: load balancers whose backends are the same set of
	// nodes share one backend pool, so that a node joining any number of
	// Services is one cloud write (LB-SHARED-POOL-WRITES; in ccmkit,
	// loadbalancer.Capabilities.SharedBackendPools). Unclaimed, that rule
	// is skipped; LB-NODE-SYNC and LB-DELETE-SHARED run either way.
	SharedBackendPools bool
	// SourceRangesAnnotation: load balancers restricted to the client CIDRs
	// of the service.beta.kubernetes.io/load-balancer-source-ranges
	// annotation when the spec field is empty. Unclaimed, a Service with a
	// valid restricting annotation must be rejected (LB-SOURCE-RANGES).
	SourceRangesAnnotation bool
	// AppProtocols are the application protocols the load balancers serve
	// on a port, as spec.ports[].appProtocol names them (such as "http",
	// "https" or "kubernetes.io/h2c"), compared exactly: LB-PER-PORT
	// checks that ports carrying them get listeners that report them
	// (Listener.AppProtocol), that a port of any other application
	// protocol is rejected with an error, and Config.PortSetting; with
	// them, LB-MULTI-STEP's change adds a port of the first. Empty
	// (the default) skips LB-PER-PORT: appProtocol is then a hint the
	// provider may ignore.
	AppProtocols []string
}

// PortSetting is a provider setting given per port by an annotation
// (Config.PortSetting), such as a certificate reference for a TLS port.
type PortSetting struct {
	// Annotation is the annotation's name, such as
	// "lb.example.com/certificate". The suite writes its value as
	// "PORT=VALUE", PORT being the number of one of the Service's ports,
	// and expects the other ports to keep the provider's default.
	Annotation string
	// Values are two values the provider accepts for one port, such as
	// two certificate references: different, not empty, and without a
	// comma (which separates the entries of a per-port value).
	Values [2]string
}

// claimSplits are the claims split off another: from covered to until
// the suite named it apart.
var claimSplits = []struct{ from, to, what string }{
	{"SourceRanges", "SourceRangesAnnotation", "the service.beta.kubernetes.io/load-balancer-source-ranges annotation, which SourceRanges alone no longer covers (unclaimed, a restricting annotation must be rejected: LB-SOURCE-RANGES)"},
}

// checkSplits checks that every claim split off one claims makes is
// claimed or acknowledged in unclaimed, and that unclaimed names only such
// claims, not claimed ones.
func checkSplits(claims Claims, unclaimed map[string]string) error {
	v := reflect.ValueOf(claims)
	claimed := func(field string) bool { return v.FieldByName(field).Bool() }
	for key := range unclaimed {
		i := slices.IndexFunc(claimSplits, func(sp struct{ from, to, what string }) bool { return sp.to == key })
		switch {
		case i < 0:
			return fmt.Errorf("Config.Unclaimed key %q names no claim split off another: expected one of %q", key, splitNames())
		case claimed(key):
			return fmt.Errorf("Config.Unclaimed key %q is claimed in Config.Claims: expected a claim the provider does not make", key)
		}
	}
	for _, sp := range claimSplits {
		if _, ack := unclaimed[sp.to]; claimed(sp.from) && !claimed(sp.to) && !ack {
			return fmt.Errorf("Config.Claims.%s is claimed, and %s neither claimed nor in Config.Unclaimed: Claims.%s now covers %s: expected Claims.%s set, or Config.Unclaimed[%q] giving the reason the provider does not offer it", sp.from, sp.to, sp.to, sp.what, sp.to, sp.to)
		}
	}
	return nil
}

// splitNames returns the names of the claims split off another.
func splitNames() []string {
	var out []string
	for _, sp := range claimSplits {
		out = append(out, sp.to)
	}
	return out
}

// checkAppProtocols checks Config.Claims.AppProtocols: each entry a
// name, none repeated.
func checkAppProtocols(apps []string) error {
	for i, a := range apps {
		switch {
		case strings.TrimSpace(a) == "":
			return fmt.Errorf("Config.Claims.AppProtocols[%d] %q is empty: expected an application protocol as spec.ports[].appProtocol names it, such as \"http\"", i, a)
		case slices.Contains(apps[:i], a):
			return fmt.Errorf("Config.Claims.AppProtocols[%d] %q repeats an earlier entry: expected each application protocol once", i, a)
		}
	}
	return nil
}

// check checks a Config.PortSetting (nil: none): an annotation name, and
// two different values that can stand in a per-port list.
func (ps *PortSetting) check() error {
	switch {
	case ps == nil:
		return nil
	case strings.TrimSpace(ps.Annotation) == "":
		return fmt.Errorf("Config.PortSetting.Annotation %q is empty: expected the name of the per-port annotation, such as \"lb.example.com/certificate\"", ps.Annotation)
	case ps.Values[0] == ps.Values[1]:
		return fmt.Errorf("Config.PortSetting.Values %q are equal: expected two different values the provider accepts for one port", ps.Values)
	}
	for i, v := range ps.Values {
		if strings.TrimSpace(v) == "" || strings.ContainsAny(v, ",=") {
			return fmt.Errorf("Config.PortSetting.Values[%d] %q: expected a value that is not empty and has no comma or equals sign (the suite writes \"PORT=VALUE\")", i, v)
		}
	}
	return nil
}
