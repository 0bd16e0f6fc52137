package loadbalancer

import (
	"fmt"
	"strings"

	"github.com/ccmkit/ccmkit/annotation"
)

// Per-port health checks: on a cloud with a health monitor per listener's
// pool (Capabilities.ListenerPools: Octavia, AWS target groups, OCI backend
// sets), DesiredInput.HealthCheckAnnotation gives a port a health check of
// its own, probing the port's node port on every backend, instead of the
// Service's (kube-proxy's health port, or spec.healthCheckNodePort with
// externalTrafficPolicy Local).

// The values of a per-port health-check annotation.
const (
	// portHealthTCP: a TCP connect to the listener's node port.
	portHealthTCP = "tcp"
	// portHealthHTTP prefixes "http:/path": an HTTP GET of the path on the
	// listener's node port, healthy on a 2xx or 3xx answer.
	portHealthHTTP = "http:"
)

// maxHealthCheckPath bounds the path of an "http:" per-port health check:
// the limit of Octavia's url_path and of AWS's HealthCheckPath.
const maxHealthCheckPath = 1024

// expectedPortHealth is what a per-port health-check value may be, for
// errors.
const expectedPortHealth = `expected "tcp" or "http:" and an absolute path such as "http:/ready"`

// parsePortHealthCheck returns the protocol and path of the per-port
// health-check value v, or an error naming v and what was expected.
func parsePortHealthCheck(v string) (HealthCheckProtocol, string, error) {
	if v == portHealthTCP {
		return HealthCheckTCP, "", nil
	}
	path, ok := strings.CutPrefix(v, portHealthHTTP)
	switch {
	case !ok:
		return "", "", fmt.Errorf("health check %q: %s", cut(v), expectedPortHealth)
	case !strings.HasPrefix(path, "/"):
		return "", "", fmt.Errorf("health check %q: path %q is not absolute: %s", cut(v), cut(path), expectedPortHealth)
	case len(path) > maxHealthCheckPath:
		return "", "", fmt.Errorf("health check %q: path of %d bytes: expected at most %d", cut(v), len(path), maxHealthCheckPath)
	case strings.ContainsFunc(path, func(r rune) bool { return r <= ' ' || r == 0x7f || r == '?' || r == '#' }):
		return "", "", fmt.Errorf("health check %q: path %q holds a space, control character, '?' or '#': expected a plain URL path", cut(v), cut(path))
	}
	return HealthCheckHTTP, path, nil
}

// checkHealthCheckAnnotation returns an error naming field when a, if set,
// cannot give a port's health check: it is not a per-port string
// annotation, or has a default that does not parse or that a flat load
// balancer (no Capabilities.ListenerPools) could never build, which would
// refuse every Service.
func checkHealthCheckAnnotation(field string, a *annotation.Annotation, caps Capabilities) error {
	switch {
	case a == nil:
		return nil
	case !a.PerPort || a.Kind != annotation.KindString:
		return fmt.Errorf("%s %q is of kind %s (per port: %v): expected a per-port string annotation", field, a.Name, a.Kind, a.PerPort)
	case a.Setting:
		return fmt.Errorf("%s %q is a Setting: expected an annotation Desired reads itself, not one copied into the listener's Settings", field, a.Name)
	case a.Default == "":
		return nil
	case !caps.ListenerPools:
		return fmt.Errorf("%s %q has default %q, but Capabilities.ListenerPools is false: expected no default (a flat load balancer has one health check)", field, a.Name, cut(a.Default))
	}
	if _, _, err := parsePortHealthCheck(a.Default); err != nil {
		return fmt.Errorf("%s %q: default: %w", field, a.Name, err)
	}
	return nil
}

// listenerHealthCheck records the health check of l's pool from the
// per-port health-check annotation a's value v for its port (listed; a
// port not listed takes a's default, and without one, or without a node
// port, the Service's). It needs Capabilities.ListenerPools (a flat load
// balancer has one health check) and a node port to probe.
func (b *specBuilder) listenerHealthCheck(a *annotation.Annotation, l *Listener, v string, listed bool) {
	if !listed {
		v = a.Default
		if l.NodePort == 0 {
			return
		}
	}
	if v == "" {
		return
	}
	if !b.caps.ListenerPools {
		b.unsupported("ListenerPools", "annotation %q: port %d/%s: a health check of its own (the load balancer has one health check for every port)", a.Name, l.Port, l.Protocol)
		return
	}
	proto, path, err := parsePortHealthCheck(v)
	if err != nil {
		b.invalid("annotation %q: port %d/%s: %v", a.Name, l.Port, l.Protocol, err)
		return
	}
	if l.NodePort == 0 {
		b.invalid("annotation %q: port %d/%s has no node port (spec.allocateLoadBalancerNodePorts=false): expected no health check of its own", a.Name, l.Port, l.Protocol)
		return
	}
	if b.portHealth == nil {
		b.portHealth = map[ListenerKey]HealthCheck{}
	}
	b.portHealth[l.ListenerKey] = HealthCheck{Protocol: proto, Port: l.NodePort, Path: path}
}

// poolHealthCheck returns the health check of l's pool: its port's own,
// else the Service's.
func (b *specBuilder) poolHealthCheck(l Listener) HealthCheck {
	if hc, ok := b.portHealth[l.ListenerKey]; ok {
		return hc
	}
	return b.spec.HealthCheck
}
