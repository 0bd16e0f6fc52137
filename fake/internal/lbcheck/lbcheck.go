// Package lbcheck holds the checks the fake cloud makes of a load balancer
// created through its control surface (fake.Cloud.CreateLoadBalancer, the
// admin endpoint's POST /loadbalancers): pure functions of the
// loadbalancer model that name each problem by its field path, what was
// found and what was expected. The cloud's own checks of its state (free
// addresses, backend pools, live instances) stay with the store, in
// package fake. It is internal to the fake.
package lbcheck

import (
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/ccmkit/ccmkit/internal/check"
	"github.com/ccmkit/ccmkit/internal/clip"
	"github.com/ccmkit/ccmkit/internal/netaddr"
	"github.com/ccmkit/ccmkit/loadbalancer"
)

// KeyNames are the backend keys in words, for messages.
var KeyNames = map[loadbalancer.BackendKey]string{
	loadbalancer.BackendKeyNodeName:   "Node name",
	loadbalancer.BackendKeyProviderID: "provider ID",
	loadbalancer.BackendKeyAddress:    "address",
}

// BackendID returns b's key under k as text: what RemoveBackend's key is
// compared with ("" when b lacks it).
func BackendID(k loadbalancer.BackendKey, b loadbalancer.Backend) string {
	switch {
	case k == loadbalancer.BackendKeyProviderID:
		return b.ProviderID
	case k != loadbalancer.BackendKeyAddress:
		return b.NodeName
	case b.IPv4.IsValid():
		return b.IPv4.String()
	case b.IPv6.IsValid():
		return b.IPv6.String()
	}
	return ""
}

// Bounds of the tags of a load balancer created through the control
// surface, in bytes (those of the larger clouds' tags).
const (
	maxTagKey   = 128
	maxTagValue = 256
)

// LoadBalancer checks a load balancer to create under the cloud's backend
// key (field by field, each problem named by its path); the cloud's own
// checks (addresses of the pools, backend pools, live instances) follow in
// applyLB.
func LoadBalancer(path *field.Path, lb *loadbalancer.LoadBalancer, key loadbalancer.BackendKey) field.ErrorList {
	var errs field.ErrorList
	if lb.ID != "" {
		errs = append(errs, field.Invalid(path.Child("id"), clip.Quoted(lb.ID), "expected none: the cloud assigns the ID"))
	}
	if len(lb.Ingress) > 0 {
		errs = append(errs, field.Forbidden(path.Child("ingress"), "expected none: the cloud reports a load balancer's ingress"))
	}
	if lb.Name == "" {
		errs = append(errs, field.Required(path.Child("name"), "expected the load balancer's name, a DNS-1123 subdomain"))
	} else {
		errs = append(errs, check.Field(path.Child("name"), lb.Name, validation.IsDNS1123Subdomain, "expected a DNS-1123 subdomain")...)
	}
	for _, k := range slices.Sorted(maps.Keys(lb.Tags)) {
		p := path.Child("tags").Key(clip.Quoted(k))
		if problem := tagProblem(k, 1, maxTagKey); problem != "" {
			errs = append(errs, field.Invalid(p, clip.Quoted(k), "key: "+problem))
		}
		if problem := tagProblem(lb.Tags[k], 0, maxTagValue); problem != "" {
			errs = append(errs, field.Invalid(p, clip.Quoted(lb.Tags[k]), problem))
		}
	}
	if cluster, tagged := lb.Tags[loadbalancer.TagCluster]; tagged && cluster == "" {
		errs = append(errs, field.Invalid(path.Child("tags").Key(loadbalancer.TagCluster), cluster, emptyClusterTag))
	}
	spec := path.Child("spec")
	families, ferrs := checkFamilies(spec, &lb.Spec)
	errs = append(errs, ferrs...)
	errs = append(errs, checkListeners(spec.Child("listeners"), lb.Spec.Listeners, families)...)
	errs = append(errs, checkBackends(spec, &lb.Spec, key)...)
	errs = append(errs, checkPolicies(spec, &lb.Spec)...)
	return errs
}

// emptyClusterTag is why loadbalancer.TagCluster cannot be empty: the
// Reconciler owns load balancers in a non-empty cluster identity only
// (it refuses an empty clusterName with no Config.ClusterID, and
// kube-controller-manager's --cluster-name defaults to "kubernetes"), so
// a load balancer tagged with the empty cluster would be no cluster's,
// though it looks owned: a misconfigured seed.
const emptyClusterTag = `expected a cluster identity, such as "kubernetes" (the default --cluster-name) or another cluster's Config.ClusterID; no cluster is named "" (leave the tag out for a load balancer of no cluster)`

// tagProblem says why s cannot be a tag key or value of min to max bytes,
// or returns "".
func tagProblem(s string, minLen, maxLen int) string {
	switch {
	case len(s) < minLen || len(s) > maxLen:
		return fmt.Sprintf("expected %d to %d bytes, got %d", minLen, maxLen, len(s))
	case !utf8.ValidString(s):
		return "expected valid UTF-8"
	case strings.IndexFunc(s, unicode.IsControl) >= 0:
		return "expected no control characters"
	}
	return ""
}

// checkFamilies checks spec's IP families and requested IPs, and returns
// the valid families and the problems found.
func checkFamilies(path *field.Path, s *loadbalancer.Spec) (map[v1.IPFamily]bool, field.ErrorList) {
	var errs field.ErrorList
	families := map[v1.IPFamily]bool{}
	if len(s.IPFamilies) == 0 {
		errs = append(errs, field.Required(path.Child("ipFamilies"), "expected IPv4 and/or IPv6: the cloud allocates a VIP of each"))
	}
	for i, f := range s.IPFamilies {
		p := path.Child("ipFamilies").Index(i)
		switch {
		case f != v1.IPv4Protocol && f != v1.IPv6Protocol:
			errs = append(errs, field.Invalid(p, clip.Quoted(string(f)), "expected IPv4 or IPv6"))
		case families[f]:
			errs = append(errs, field.Duplicate(p, string(f)))
		}
		families[f] = true
	}
	requested := map[v1.IPFamily]bool{}
	for i, ip := range s.RequestedIPs {
		p := path.Child("requestedIPs").Index(i)
		if _, problem := netaddr.NodeIP(ip.String()); problem != "" {
			errs = append(errs, field.Invalid(p, ip.String(), problem))
			continue
		}
		if f := familyOf(ip); !families[f] || requested[f] {
			errs = append(errs, field.Invalid(p, ip.String(), "expected at most one address of each of spec.ipFamilies"))
		}
		requested[familyOf(ip)] = true
	}
	return families, errs
}

// familyOf returns the IP family of ip.
func familyOf(ip netip.Addr) v1.IPFamily {
	if ip.Is4() {
		return v1.IPv4Protocol
	}
	return v1.IPv6Protocol
}

// checkListeners checks listeners: of one of families, a protocol and
// port a listener can have (checkListenerKey), a node port, distinct
// keys, and node ports shared only as a Service's can be
// (checkNodePortShared).
func checkListeners(path *field.Path, ls []loadbalancer.Listener, families map[v1.IPFamily]bool) field.ErrorList {
	errs := checkNodePortShared(path, ls)
	seen := map[loadbalancer.ListenerKey]bool{}
	for i, l := range ls {
		p := path.Index(i)
		if !families[l.Family] {
			errs = append(errs, field.Invalid(p.Child("family"), clip.Quoted(string(l.Family)), "expected one of spec.ipFamilies"))
		}
		errs = append(errs, ListenerKey(p, l.Protocol, l.Port)...)
		if l.NodePort < 0 || l.NodePort > 65535 {
			errs = append(errs, field.Invalid(p.Child("nodePort"), l.NodePort, "expected 0 (none) to 65535"))
		}
		if seen[l.ListenerKey] {
			errs = append(errs, field.Duplicate(p, ListenerText(l.ListenerKey)))
		}
		seen[l.ListenerKey] = true
	}
	return errs
}

// checkNodePortShared refuses two listeners of one protocol but of
// different ports on the same node port: the node's kube-proxy sends a
// node port's traffic of a protocol to one Service port, so Kubernetes
// refuses two ports of a Service that share a nodePort unless their
// protocols differ (ValidateService in k8s.io/kubernetes
// pkg/apis/core/validation keys its duplicate check by nodePort and
// protocol). Sharing stays fine between a TCP and a UDP port (a DNS
// Service's 53/TCP and 53/UDP) and between the listeners of one port in
// each IP family (a dual-stack Service). Node port 0 is none.
func checkNodePortShared(path *field.Path, ls []loadbalancer.Listener) field.ErrorList {
	type key struct {
		protocol v1.Protocol
		nodePort int32
	}
	var errs field.ErrorList
	first := map[key]int{}
	for i, l := range ls {
		if l.NodePort <= 0 {
			continue
		}
		k := key{l.Protocol, l.NodePort}
		j, seen := first[k]
		if !seen {
			first[k] = i
			continue
		}
		if other := ls[j]; other.Port != l.Port {
			errs = append(errs, field.Invalid(path.Index(i).Child("nodePort"), l.NodePort,
				fmt.Sprintf("listener %s has the node port of listener %s (%s): expected a node port of its own, shared only by the listeners of one port (one per IP family) or with a port of another protocol",
					ListenerText(l.ListenerKey), ListenerText(other.ListenerKey), path.Index(j))))
		}
	}
	return errs
}

// ListenerKey checks a listener's protocol and port.
func ListenerKey(path *field.Path, protocol v1.Protocol, port int32) field.ErrorList {
	var errs field.ErrorList
	switch protocol {
	case v1.ProtocolTCP, v1.ProtocolUDP, v1.ProtocolSCTP:
	default:
		errs = append(errs, field.Invalid(path.Child("protocol"), clip.Quoted(string(protocol)), "expected TCP, UDP or SCTP"))
	}
	if port < 1 || port > 65535 {
		errs = append(errs, field.Invalid(path.Child("port"), port, "expected 1 to 65535"))
	}
	return errs
}

// checkBackends checks spec's backend key (empty or key, the cloud's) and
// backends: each with a distinct key under key, a Node name when set, and
// addresses that fit their fields (checkBackendIPs).
func checkBackends(path *field.Path, s *loadbalancer.Spec, key loadbalancer.BackendKey) field.ErrorList {
	var errs field.ErrorList
	if s.BackendKey != "" && s.BackendKey != key {
		errs = append(errs, field.Invalid(path.Child("backendKey"), clip.Quoted(string(s.BackendKey)), fmt.Sprintf("expected none or %q: the cloud keeps backends by %s (loadBalancers.backends)", key, KeyNames[key])))
	}
	seen := map[string]bool{}
	for i, b := range s.Backends {
		p := path.Child("backends").Index(i)
		switch id := BackendID(key, b); {
		case id == "":
			errs = append(errs, field.Required(p, fmt.Sprintf("expected the backend's %s: the cloud keeps backends by it", KeyNames[key])))
		case seen[id]:
			errs = append(errs, field.Duplicate(p, clip.Quoted(id)))
		default:
			seen[id] = true
		}
		if b.NodeName != "" {
			errs = append(errs, check.Field(p.Child("nodeName"), b.NodeName, validation.IsDNS1123Subdomain, "expected a Node name (a DNS-1123 subdomain)")...)
		}
		errs = append(errs, checkBackendIPs(p, b)...)
	}
	return errs
}

// checkBackendIPs checks the addresses b has: each a node address
// (netaddr.NodeIP) of its field's family.
func checkBackendIPs(path *field.Path, b loadbalancer.Backend) field.ErrorList {
	var errs field.ErrorList
	for _, f := range []struct {
		name string
		ip   netip.Addr
		want v1.IPFamily
	}{{"ipv4", b.IPv4, v1.IPv4Protocol}, {"ipv6", b.IPv6, v1.IPv6Protocol}} {
		if !f.ip.IsValid() {
			continue
		}
		if _, problem := netaddr.NodeIP(f.ip.String()); problem != "" {
			errs = append(errs, field.Invalid(path.Child(f.name), f.ip.String(), problem))
		} else if familyOf(f.ip) != f.want {
			errs = append(errs, field.Invalid(path.Child(f.name), f.ip.String(), "expected an "+string(f.want)+" address"))
		}
	}
	return errs
}

// Bounds of a session affinity's timeout, in seconds (those of a
// Service's spec.sessionAffinityConfig.clientIP.timeoutSeconds).
const maxAffinityTimeout = 86400

// checkPolicies checks spec's health check, source ranges and session
// affinity.
func checkPolicies(path *field.Path, s *loadbalancer.Spec) field.ErrorList {
	var errs field.ErrorList
	hc := path.Child("healthCheck")
	if p := s.HealthCheck.Protocol; p != "" && p != loadbalancer.HealthCheckHTTP && p != loadbalancer.HealthCheckTCP {
		errs = append(errs, field.Invalid(hc.Child("protocol"), clip.Quoted(string(p)), "expected HTTP, TCP or none"))
	}
	if port := s.HealthCheck.Port; port < 0 || port > 65535 {
		errs = append(errs, field.Invalid(hc.Child("port"), port, "expected 0 (none) to 65535"))
	}
	for i, r := range s.SourceRanges {
		if !r.IsValid() {
			errs = append(errs, field.Invalid(path.Child("sourceRanges").Index(i), r.String(), "expected a CIDR"))
		}
	}
	sa, timeout := s.SessionAffinity, path.Child("sessionAffinity", "timeoutSeconds")
	switch {
	case sa.ClientIP && (sa.TimeoutSeconds < 1 || sa.TimeoutSeconds > maxAffinityTimeout):
		errs = append(errs, field.Invalid(timeout, sa.TimeoutSeconds, fmt.Sprintf("expected 1 to %d with clientIP", maxAffinityTimeout)))
	case !sa.ClientIP && sa.TimeoutSeconds != 0:
		errs = append(errs, field.Invalid(timeout, sa.TimeoutSeconds, "expected 0 without clientIP"))
	}
	return errs
}

// ListenerText is a listener's key as "IPv4/TCP/80", for messages.
func ListenerText(k loadbalancer.ListenerKey) string {
	return fmt.Sprintf("%s/%s/%d", k.Family, k.Protocol, k.Port)
}
