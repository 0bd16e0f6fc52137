package loadbalancer

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
)

// buildStatus validates the ingress entries a Driver reported and returns
// a new status with one v1.LoadBalancerIngress per entry, in the order
// given, IPs in canonical form. It returns an error (not wrapped; several
// are joined) naming the entry and the value when: there is no entry; an
// entry has both or neither IP and Hostname; the IP does not parse or has
// a zone; the hostname is not a DNS-1123 subdomain or is an IP; ipMode is
// set without an IP or is not VIP or Proxy; a port status has a port
// outside 1-65535, a protocol other than TCP, UDP or SCTP, or an empty
// error string; or two entries are equal. Values are quoted cut to a
// bounded length, so a huge one makes no huge message.
func buildStatus(ingress []Ingress) (*v1.LoadBalancerStatus, error) {
	if len(ingress) == 0 {
		return nil, errors.New("load balancer status: no ingress: expected at least one IP or hostname")
	}
	var errs []error
	st := &v1.LoadBalancerStatus{Ingress: make([]v1.LoadBalancerIngress, 0, len(ingress))}
	seen := map[string]bool{}
	for i, in := range ingress {
		fail := func(format string, args ...any) {
			errs = append(errs, fmt.Errorf("load balancer status: ingress[%d]: "+format, append([]any{i}, args...)...))
		}
		out, ok := buildIngress(in, fail)
		if !ok {
			continue
		}
		k := out.IP + "|" + out.Hostname
		if seen[k] {
			fail("%s%s listed twice: expected unique entries", out.IP, out.Hostname)
		}
		seen[k] = true
		st.Ingress = append(st.Ingress, out)
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return st, nil
}

// failFunc reports one problem of one ingress entry; buildStatus prefixes
// the entry's index.
type failFunc func(format string, args ...any)

// buildIngress converts one entry, reporting each problem to fail. ok is
// false when its address is unusable (both or neither of IP and Hostname,
// or an invalid one): the entry is then dropped, and neither its ports nor
// its uniqueness are checked. A bad ipMode or port status is reported but
// leaves ok true.
func buildIngress(in Ingress, fail failFunc) (out v1.LoadBalancerIngress, ok bool) {
	switch {
	case in.IP != "" && in.Hostname != "":
		fail("both ip %q and hostname %q: expected exactly one", cut(in.IP), cut(in.Hostname))
		return out, false
	case in.IP != "":
		out, ok = ingressIP(in, fail)
	case in.Hostname != "":
		out, ok = ingressHostname(in, fail)
	default:
		fail("neither ip nor hostname: expected exactly one")
		return out, false
	}
	if ok {
		out.Ports = portStatuses(in.Ports, fail)
	}
	return out, ok
}

// ingressIP converts an entry with an IP, in canonical form (an IPv4-mapped
// IPv6 address becomes IPv4), with its ipMode.
func ingressIP(in Ingress, fail failFunc) (out v1.LoadBalancerIngress, ok bool) {
	ip, err := netip.ParseAddr(in.IP)
	if err != nil || ip.Zone() != "" {
		fail("ip %q: expected an IPv4 or IPv6 address without zone", cut(in.IP))
		return out, false
	}
	out.IP = ip.Unmap().String()
	switch in.IPMode {
	case "":
	case v1.LoadBalancerIPModeVIP, v1.LoadBalancerIPModeProxy:
		mode := in.IPMode
		out.IPMode = &mode
	default:
		fail("ipMode %q: expected VIP or Proxy", cut(string(in.IPMode)))
	}
	return out, true
}

// ingressHostname converts an entry with a hostname, which must be a
// DNS-1123 subdomain and not an IP, and has no ipMode.
func ingressHostname(in Ingress, fail failFunc) (out v1.LoadBalancerIngress, ok bool) {
	if _, err := netip.ParseAddr(in.Hostname); err == nil {
		fail("hostname %q is an IP: expected a DNS name (put IPs in ip)", cut(in.Hostname))
		return out, false
	}
	if len(in.Hostname) > validation.DNS1123SubdomainMaxLength {
		// Before IsDNS1123Subdomain, whose pattern match takes seconds on a 1 MiB name.
		fail("hostname %q: expected a DNS-1123 subdomain of at most %d characters", cut(in.Hostname), validation.DNS1123SubdomainMaxLength)
		return out, false
	}
	if msgs := validation.IsDNS1123Subdomain(in.Hostname); len(msgs) > 0 {
		fail("hostname %q: expected a DNS-1123 subdomain: %s", cut(in.Hostname), strings.Join(msgs, "; "))
		return out, false
	}
	out.Hostname = in.Hostname
	if in.IPMode != "" {
		fail("ipMode %q with hostname %q: expected ipMode only with an ip", cut(string(in.IPMode)), in.Hostname)
	}
	return out, true
}

// portStatuses returns a copy of ports (each Error string copied too, so
// the status shares nothing with the Driver's value), reporting each port
// status that is invalid.
func portStatuses(ports []v1.PortStatus, fail failFunc) []v1.PortStatus {
	var out []v1.PortStatus
	for j, p := range ports {
		switch {
		case p.Port < 1 || p.Port > 65535:
			fail("ports[%d].port %d: expected 1-65535", j, p.Port)
		case p.Protocol != v1.ProtocolTCP && p.Protocol != v1.ProtocolUDP && p.Protocol != v1.ProtocolSCTP:
			fail("ports[%d].protocol %q: expected TCP, UDP or SCTP", j, cut(string(p.Protocol)))
		case p.Error != nil && *p.Error == "":
			fail("ports[%d].error is empty: expected nil or a reason", j)
		}
		ps := p
		if p.Error != nil {
			e := *p.Error
			ps.Error = &e
		}
		out = append(out, ps)
	}
	return out
}
