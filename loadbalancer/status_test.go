package loadbalancer_test

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"

	"github.com/ccmkit/ccmkit/loadbalancer"
)

func TestStatus(t *testing.T) {
	vip, proxy := v1.LoadBalancerIPModeVIP, v1.LoadBalancerIPModeProxy
	cases := []struct {
		name, reason string
		in           []loadbalancer.Ingress
		want         *v1.LoadBalancerStatus
	}{
		{"ip with mode and ports", "canonical IP, mode and ports kept",
			[]loadbalancer.Ingress{{IP: "2001:DB8::1", IPMode: proxy, Ports: []v1.PortStatus{{Port: 80, Protocol: v1.ProtocolTCP}}}},
			&v1.LoadBalancerStatus{Ingress: []v1.LoadBalancerIngress{{IP: "2001:db8::1", IPMode: &proxy, Ports: []v1.PortStatus{{Port: 80, Protocol: v1.ProtocolTCP}}}}}},
		{"ip and hostname", "both kinds, in order; IPv4-mapped unmapped",
			[]loadbalancer.Ingress{{IP: "::ffff:203.0.113.1", IPMode: vip}, {Hostname: "lb-1.example.com"}},
			&v1.LoadBalancerStatus{Ingress: []v1.LoadBalancerIngress{{IP: "203.0.113.1", IPMode: &vip}, {Hostname: "lb-1.example.com"}}}},
		{"no mode", "ipMode stays unset", []loadbalancer.Ingress{{IP: "203.0.113.1"}},
			&v1.LoadBalancerStatus{Ingress: []v1.LoadBalancerIngress{{IP: "203.0.113.1"}}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := loadbalancer.BuildStatus(tc.in)
			if err != nil {
				t.Fatalf("%s: status: %v", tc.reason, err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s: (-want +got):\n%s", tc.reason, diff)
			}
		})
	}
}

func TestStatusErrors(t *testing.T) {
	cases := []struct {
		name, reason string
		in           []loadbalancer.Ingress
		wantSubstr   string
	}{
		{"empty", "a nil error needs at least one ingress", nil, "no ingress"},
		{"bad ip", "IPs must parse", []loadbalancer.Ingress{{IP: "203.0.113"}}, `ingress[0]: ip "203.0.113"`},
		{"zone", "a zone is not a load-balancer address", []loadbalancer.Ingress{{IP: "fe80::1%eth0"}}, `ip "fe80::1%eth0"`},
		{"hostname is IP", "an IP belongs in ip", []loadbalancer.Ingress{{Hostname: "203.0.113.1"}}, `hostname "203.0.113.1" is an IP`},
		{"bad hostname", "DNS-1123 subdomain", []loadbalancer.Ingress{{Hostname: "Not_A_Host"}}, `hostname "Not_A_Host": expected a DNS-1123 subdomain`},
		{"both", "one of ip and hostname", []loadbalancer.Ingress{{IP: "203.0.113.1", Hostname: "a.example.com"}}, "expected exactly one"},
		{"neither", "one of ip and hostname", []loadbalancer.Ingress{{}}, "neither ip nor hostname"},
		{"mode with hostname", "ipMode only with an IP", []loadbalancer.Ingress{{Hostname: "a.example.com", IPMode: v1.LoadBalancerIPModeVIP}}, "expected ipMode only with an ip"},
		{"unknown mode", "VIP or Proxy", []loadbalancer.Ingress{{IP: "203.0.113.1", IPMode: "Direct"}}, `ipMode "Direct"`},
		{"bad port", "1-65535", []loadbalancer.Ingress{{IP: "203.0.113.1", Ports: []v1.PortStatus{{Port: 0, Protocol: v1.ProtocolTCP}}}}, "ports[0].port 0"},
		{"bad protocol", "TCP, UDP or SCTP", []loadbalancer.Ingress{{IP: "203.0.113.1", Ports: []v1.PortStatus{{Port: 80, Protocol: "HTTP"}}}}, `ports[0].protocol "HTTP"`},
		{"empty port error", "an error string says something", []loadbalancer.Ingress{{IP: "203.0.113.1", Ports: []v1.PortStatus{{Port: 80, Protocol: v1.ProtocolTCP, Error: ptr("")}}}}, "ports[0].error is empty"},
		{"duplicate", "one entry per address", []loadbalancer.Ingress{{IP: "203.0.113.1"}, {IP: "203.0.113.1"}}, "ingress[1]: 203.0.113.1 listed twice"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := loadbalancer.BuildStatus(tc.in)
			if got != nil || err == nil || !strings.Contains(err.Error(), tc.wantSubstr) {
				t.Errorf("%s: status = %v, %v; want nil and an error containing %q", tc.reason, got, err, tc.wantSubstr)
			}
		})
	}
}
