package admission_test

import (
	"fmt"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"

	"github.com/ccmkit/ccmkit/annotation"
	"github.com/ccmkit/ccmkit/internal/clip"
	"github.com/ccmkit/ccmkit/loadbalancer"
)

// TestKnownDifferences pins where the policy and the Reconciler part, as
// the package doc lists them: each row says what each of them does.
func TestKnownDifferences(t *testing.T) {
	set, byName := perPortDeclarations(t)
	ps := newPolicies(set)
	ipAnn := byName["IP"]
	duration := byName["duration"].Name
	durationMsg := func(v string) string {
		return `annotation "lb.example.com/idle-timeout": invalid value "` + v + `": expected a non-negative duration such as "30s" or "1m30s"`
	}
	var many []string // in the Reconciler's order
	for i := range 65 {
		many = append(many, fmt.Sprintf("10.%d.0.0/16", i))
	}
	perPort := byName["bool per port"].Name
	entries64 := strings.Join(manyEntries(64, "true"), ",")
	portList := func(n int) string {
		var l []string
		for i := range n {
			l = append(l, fmt.Sprintf("p%d/%d", i+1, 1000+i))
		}
		return strings.Join(l, ", ")
	}
	unknownMsg := func(port, list string) string {
		return `annotation "lb.example.com/proxy-protocol-ports": port "` + port + `" is not a port of the service: expected a port name or number of spec.ports (` + list + `)`
	}
	invalidMsg := func(value, detail string) string {
		return fmt.Sprintf(`annotation "lb.example.com/proxy-protocol-ports": invalid value %q: expected %s: %s`, clip.Quoted(value), byName["bool per port"].Expected(), detail)
	}
	for _, tc := range []struct {
		name, reason string
		caps         loadbalancer.Capabilities
		mods         []func(*v1.Service)
		// requestedIP is the Reconciler's RequestedIPAnnotation.
		requestedIP    *annotation.Annotation
		policy, reconc []string
	}{
		{name: "duration near the largest", reason: "within 1.8ms of 2^63-1 ns the sum in float64 cannot tell an overflow: refused",
			caps: allCaps, mods: []func(*v1.Service){annotated(duration, "2562047h47m16.854775807s")},
			policy: []string{durationMsg("2562047h47m16.854775807s")}},
		{name: "duration of 65 components", reason: "the CEL cost of summing components is bounded",
			caps: allCaps, mods: []func(*v1.Service){annotated(duration, strings.Repeat("1s", 65))},
			policy: []string{durationMsg(strings.Repeat("1s", 65))}},
		{name: "private-use character", reason: "the policy escapes the assigned non-printable characters only",
			caps: allCaps, mods: []func(*v1.Service){annotated(duration, "\ue000")},
			policy: []string{durationMsg("\ue000")}, reconc: []string{durationMsg(`\ue000`)}},
		{name: "65 source ranges", reason: "a message sorts at most 64: then the static message",
			mods:   []func(*v1.Service){sourceRanges(many...)},
			policy: []string{"spec.loadBalancerSourceRanges or the annotation service.beta.kubernetes.io/load-balancer-source-ranges restricts clients: SourceRanges is not supported by this provider (Capabilities.SourceRanges is false)"},
			reconc: []string{"service shop/web: source ranges " + strings.Join(many, ",") + ": SourceRanges is not supported by this provider (Capabilities.SourceRanges is false)"}},
		{name: "legacy source range", reason: "a form only clusters without StrictIPCIDRValidation take is quoted as written, sorted last",
			mods:   []func(*v1.Service){sourceRanges("010.0.0.0/8", "192.168.0.0/16")},
			policy: []string{"service shop/web: source ranges 192.168.0.0/16,010.0.0.0/8: SourceRanges is not supported by this provider (Capabilities.SourceRanges is false)"},
			reconc: []string{"service shop/web: source ranges 10.0.0.0/8,192.168.0.0/16: SourceRanges is not supported by this provider (Capabilities.SourceRanges is false)"}},
		{name: "requested-IP annotation", reason: "PolicyInput does not say which annotation requests an address: its family is not checked",
			caps: allCaps, mods: []func(*v1.Service){annotated(ipAnn.Name, "2001:db8::5")}, requestedIP: ipAnn,
			reconc: []string{"invalid service: service shop/web: requested IP 2001:db8::5 is IPv6: expected a family of spec.ipFamilies [IPv4]"}},
		{name: "per port, 65 entries, a PORT twice", reason: "entries are compared with each other only in a value of at most 64",
			caps: allCaps, mods: []func(*v1.Service){namedPorts(64), annotated(perPort, entries64+",p1=false")},
			reconc: []string{invalidMsg(entries64+",p1=false", `entries 1 and 65 have PORT "p1"`)}},
		{name: "per port, 65 entries, one not a port", reason: "and with spec.ports",
			caps: allCaps, mods: []func(*v1.Service){namedPorts(64), annotated(perPort, entries64+",x=true")},
			reconc: []string{unknownMsg("x", portList(64))}},
		{name: "per port, 65 entries, the last malformed", reason: "only the first 64 entries are parsed",
			caps: allCaps, mods: []func(*v1.Service){namedPorts(64), annotated(perPort, entries64+",p65=maybe")},
			reconc: []string{invalidMsg(entries64+",p65=maybe", `entry 65 has VALUE "maybe"`)}},
		{name: "per port, one port by number and by name", reason: "PORTs are resolved to spec.ports only by the Reconciler, which refuses one port listed twice",
			caps: allCaps, mods: []func(*v1.Service){namedPorts(2), annotated(perPort, "1000=true,p1=false")},
			reconc: []string{`annotation "` + perPort + `": port "p1" is the port "1000" names too: expected each port of spec.ports listed once (` + portList(2) + `)`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			svc := lbService(tc.mods...)
			_, err := loadbalancer.Desired(svc, nil, loadbalancer.DesiredInput{Cluster: "c1", Capabilities: tc.caps, Annotations: set, RequestedIPAnnotation: tc.requestedIP})
			checkCreate(t, tc.reason, ps.of(t, tc.caps), svc, tc.policy, tc.reconc, lines(err))
		})
	}
}
