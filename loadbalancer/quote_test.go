package loadbalancer_test

import (
	"errors"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"

	"github.com/ccmkit/ccmkit/loadbalancer"
)

// huge is the size of the values too big to quote whole.
const huge = 1 << 20

// maxMessage bounds the messages of TestErrorsQuoteValuesCut: a value is
// quoted cut, so a 1 MiB field never makes a message near that size.
const maxMessage = 2048

// quotedStart is how a message must show the start of s: Go-quoted, its
// first 32 bytes, without the closing quote.
func quotedStart(s string) string {
	return strings.TrimSuffix(strconv.Quote(s[:min(len(s), 32)]), `"`)
}

// TestErrorsQuoteValuesCut gives Desired Services with a huge value in
// each field it quotes: the error names the field, shows the value's start
// quoted and says what was expected, and stays short.
func TestErrorsQuoteValuesCut(t *testing.T) {
	big := strings.Repeat("x", huge)
	ranges := v1.AnnotationLoadBalancerSourceRangesKey
	cases := []struct {
		name, reason string
		mod          func(*v1.Service)
		// field, value and expect are what the message must hold; value
		// is shown by quotedStart unless raw.
		field, value, expect string
		raw                  bool
	}{
		{name: "spec.type", reason: "a huge type was quoted whole",
			mod:   func(s *v1.Service) { s.Spec.Type = v1.ServiceType(big) },
			field: "spec.type", value: big, expect: `expected "LoadBalancer"`},
		{name: "sessionAffinity", reason: "a huge affinity was quoted whole",
			mod:   func(s *v1.Service) { s.Spec.SessionAffinity = v1.ServiceAffinity(big) },
			field: "spec.sessionAffinity", value: big, expect: "expected None or ClientIP"},
		{name: "protocol", reason: "a huge protocol was quoted whole",
			mod:   func(s *v1.Service) { s.Spec.Ports[0].Protocol = v1.Protocol(big) },
			field: "spec.ports[0].protocol", value: big, expect: "expected TCP, UDP or SCTP"},
		{name: "protocol twice", reason: "two ports of one huge protocol: the duplicate and the mixed-protocols messages quote it too",
			mod: func(s *v1.Service) {
				s.Spec.Ports[0].Protocol = v1.Protocol(big)
				s.Spec.Ports = append(s.Spec.Ports, s.Spec.Ports[0], v1.ServicePort{Protocol: v1.ProtocolTCP, Port: 81, NodePort: 30081})
			},
			field: "spec.ports has port 80/", value: big, expect: "expected unique (protocol, port)"},
		{name: "loadBalancerIP", reason: "a huge address was quoted whole",
			mod:   func(s *v1.Service) { s.Spec.LoadBalancerIP = big },
			field: "spec.loadBalancerIP", value: big, expect: "expected an IPv4 or IPv6 address"},
		{name: "ipFamilies entry", reason: "a huge family was quoted whole",
			mod:   func(s *v1.Service) { s.Spec.IPFamilies = []v1.IPFamily{v1.IPFamily(big)} },
			field: "spec.ipFamilies", value: big, expect: "expected IPv4 or IPv6"},
		{name: "ipFamilies list", reason: "a repeated huge family: the list was printed whole",
			mod:   func(s *v1.Service) { s.Spec.IPFamilies = []v1.IPFamily{v1.IPFamily(big), v1.IPFamily(big)} },
			field: "spec.ipFamilies [", value: big, expect: "expected one family or IPv4 and IPv6"},
		{name: "ipFamilies many", reason: "a thousand families are shown as four and a count",
			mod: func(s *v1.Service) {
				for range 1000 {
					s.Spec.IPFamilies = append(s.Spec.IPFamilies, v1.IPv6Protocol)
				}
			},
			field: `spec.ipFamilies ["IPv4" "IPv6" "IPv6" "IPv6" "… (1001 entries)"]`, expect: "expected one family or IPv4 and IPv6"},
		{name: "source range spec", reason: "the upstream helper named service.Spec.LoadBalancerSourceRanges and printed the whole list",
			mod:   func(s *v1.Service) { s.Spec.LoadBalancerSourceRanges = []string{"10.0.0.0/8", "nope" + big} },
			field: "spec.loadBalancerSourceRanges[1]", value: "nope" + big, expect: "expected a list of CIDRs such as 10.0.0.0/24"},
		{name: "source range spec prefix length", reason: "a /33 is no CIDR: named by its index",
			mod:   func(s *v1.Service) { s.Spec.LoadBalancerSourceRanges = []string{"10.0.0.0/33"} },
			field: "spec.loadBalancerSourceRanges[0]", value: "10.0.0.0/33", expect: "expected a list of CIDRs"},
		{name: "source range annotation", reason: "the helper's error held the whole annotation: 1 MiB",
			mod:   func(s *v1.Service) { s.Annotations = map[string]string{ranges: "nope" + big} },
			field: strconv.Quote(ranges), value: "nope" + big, expect: "expected a comma-separated list of CIDRs such as 10.0.0.0/24,192.168.2.0/24"},
		{name: "source range annotation entry", reason: "the entry that is no CIDR is named, not only the list",
			mod:   func(s *v1.Service) { s.Annotations = map[string]string{ranges: "10.0.0.0/8, nope"} },
			field: "entry 1", value: `"nope"`, raw: true, expect: "expected a comma-separated list of CIDRs"},
		{name: "source range annotation empty entry", reason: "an empty entry between commas",
			mod:   func(s *v1.Service) { s.Annotations = map[string]string{ranges: "10.0.0.0/8,,"} },
			field: "entry 1", value: `""`, raw: true, expect: "expected a comma-separated list of CIDRs"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := loadbalancer.Desired(lbService(tc.mod), nil, loadbalancer.DesiredInput{Cluster: "c1"})
			if !errors.Is(err, loadbalancer.ErrInvalidService) {
				t.Fatalf("%s: Desired: %v; want an error wrapping ErrInvalidService", tc.reason, err)
			}
			msg := err.Error()
			shown := msg[:min(len(msg), 400)]
			value := tc.value
			if !tc.raw && value != "" {
				value = quotedStart(value)
			}
			for _, want := range []string{tc.field, value, tc.expect} {
				if !strings.Contains(msg, want) {
					t.Errorf("%s: error %q does not contain %q", tc.reason, shown, want)
				}
			}
			if len(msg) > maxMessage {
				t.Errorf("%s: error of %d bytes; want at most %d: %q", tc.reason, len(msg), maxMessage, shown)
			}
		})
	}
}

// TestSourceRangesOwnError checks SourceRanges' error for each field it
// parses, called directly: it wraps ErrInvalidService and carries none of
// the upstream helper's words (which repeat the value whole).
func TestSourceRangesOwnError(t *testing.T) {
	cases := []struct {
		name, reason string
		mod          func(*v1.Service)
		want         string
	}{
		{"spec", "the spec field is named as the API spells it, with the index of the bad entry",
			func(s *v1.Service) {
				s.Spec.LoadBalancerSourceRanges = []string{"10.0.0.0/8", " 10.1.0.0/16 ", "everyone"}
			},
			`invalid service: service shop/web: spec.loadBalancerSourceRanges[2] "everyone" is not a CIDR: expected a list of CIDRs such as 10.0.0.0/24 and 192.168.2.0/24`},
		{"annotation", "the annotation is named and quoted with the bad entry",
			func(s *v1.Service) {
				s.Annotations = map[string]string{v1.AnnotationLoadBalancerSourceRangesKey: " everyone,10.0.0.0/8 "}
			},
			`invalid service: service shop/web: annotation "service.beta.kubernetes.io/load-balancer-source-ranges" "everyone,10.0.0.0/8": entry 0 "everyone" is not a CIDR: expected a comma-separated list of CIDRs such as 10.0.0.0/24,192.168.2.0/24`},
		{"spec first", "with both set the spec is parsed, as upstream does, and the annotation is not looked at",
			func(s *v1.Service) {
				s.Spec.LoadBalancerSourceRanges = []string{"10.0.0.0/33"}
				s.Annotations = map[string]string{v1.AnnotationLoadBalancerSourceRangesKey: "everyone"}
			},
			`invalid service: service shop/web: spec.loadBalancerSourceRanges[0] "10.0.0.0/33" is not a CIDR: expected a list of CIDRs such as 10.0.0.0/24 and 192.168.2.0/24`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := loadbalancer.SourceRanges(lbService(tc.mod))
			if !errors.Is(err, loadbalancer.ErrInvalidService) {
				t.Fatalf("%s: SourceRanges: %v; want an error wrapping ErrInvalidService", tc.reason, err)
			}
			if diff := cmp.Diff(tc.want, err.Error()); diff != "" {
				t.Errorf("%s: error (-want +got):\n%s", tc.reason, diff)
			}
		})
	}
}

// TestNilService checks that every entry point given a nil Service
// returns an error wrapping ErrInvalidService that says what was expected,
// rather than a panic or a bare "is nil".
func TestNilService(t *testing.T) {
	r, d := newReconciler(t, loadbalancer.Options{})
	cases := []struct {
		name, reason string
		call         func() error
	}{
		{"Desired", "the pure builder", func() error {
			_, err := loadbalancer.Desired(nil, nil, loadbalancer.DesiredInput{Cluster: "c1"})
			return err
		}},
		{"SourceRanges", "a public helper of Desired", func() error { _, err := loadbalancer.SourceRanges(nil); return err }},
		{"ServiceFamilies", "a public helper of Desired", func() error { _, err := loadbalancer.ServiceFamilies(nil); return err }},
		{"EnsureLoadBalancer", "the Reconciler's owner check", func() error {
			_, err := r.EnsureLoadBalancer(t.Context(), "c1", nil, threeNodes())
			return err
		}},
		{"UpdateLoadBalancer", "the Reconciler's owner check", func() error { return r.UpdateLoadBalancer(t.Context(), "c1", nil, threeNodes()) }},
		{"GetLoadBalancer", "the Reconciler's owner check", func() error {
			_, _, err := r.GetLoadBalancer(t.Context(), "c1", nil)
			return err
		}},
		{"EnsureLoadBalancerDeleted", "the Reconciler's owner check", func() error { return r.EnsureLoadBalancerDeleted(t.Context(), "c1", nil) }},
	}
	const want = "invalid service: service is nil: expected a Service of type LoadBalancer"
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.call()
			if !errors.Is(err, loadbalancer.ErrInvalidService) || err.Error() != want {
				t.Errorf("%s: error %v; want %q, wrapping ErrInvalidService", tc.reason, err, want)
			}
		})
	}
	if applied, deleted := d.writes(); len(applied)+len(deleted) > 0 {
		t.Errorf("a nil Service caused writes: applied %v, deleted %v", applied, deleted)
	}
}

// TestStatusQuotesValuesCut gives the status builder huge values a Driver might
// report: the error names the field and quotes the value cut.
func TestStatusQuotesValuesCut(t *testing.T) {
	big := strings.Repeat("1", huge)
	cases := []struct {
		name, reason string
		in           loadbalancer.Ingress
		field, value string
	}{
		{"ip", "an address that does not parse", loadbalancer.Ingress{IP: big}, "ip", big},
		{"hostname", "a name longer than a DNS name may be", loadbalancer.Ingress{Hostname: "a" + big}, "hostname", "a" + big},
		{"ip and hostname", "both set", loadbalancer.Ingress{IP: big, Hostname: big}, "both ip", big},
		{"ipMode", "a mode that is neither VIP nor Proxy", loadbalancer.Ingress{IP: "203.0.113.1", IPMode: v1.LoadBalancerIPMode(big)}, "ipMode", big},
		{"port protocol", "a port status of no protocol",
			loadbalancer.Ingress{IP: "203.0.113.1", Ports: []v1.PortStatus{{Port: 80, Protocol: v1.Protocol(big)}}}, "ports[0].protocol", big},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := loadbalancer.BuildStatus([]loadbalancer.Ingress{tc.in})
			if err == nil {
				t.Fatalf("%s: the status accepted it", tc.reason)
			}
			msg := err.Error()
			if want := "ingress[0]: " + tc.field + " " + quotedStart(tc.value); !strings.Contains(msg, want) {
				t.Errorf("%s: error %q does not contain %q", tc.reason, msg[:min(len(msg), 400)], want)
			}
			if len(msg) > maxMessage {
				t.Errorf("%s: error of %d bytes; want at most %d", tc.reason, len(msg), maxMessage)
			}
		})
	}
}
