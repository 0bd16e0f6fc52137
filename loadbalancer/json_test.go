package loadbalancer_test

import (
	"encoding/json"
	"net/netip"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"

	"github.com/ccmkit/ccmkit/loadbalancer"
)

// TestModelJSON checks the model round-trips through JSON (the fake stores
// and serves it so) and keeps its lowerCamel names.
func TestModelJSON(t *testing.T) {
	lb := loadbalancer.LoadBalancer{
		ID: "lb-1", Name: "k8s-abc", Tags: map[string]string{loadbalancer.TagCluster: "c1"},
		Spec: loadbalancer.Spec{
			IPFamilies:   []v1.IPFamily{v1.IPv4Protocol},
			Listeners:    []loadbalancer.Listener{{ListenerKey: loadbalancer.ListenerKey{Family: v1.IPv4Protocol, Protocol: v1.ProtocolTCP, Port: 80}, NodePort: 30080}},
			Backends:     []loadbalancer.Backend{{NodeName: "n1", ProviderID: "fake://i-1", IPv4: netip.MustParseAddr("10.0.0.1")}},
			HealthCheck:  loadbalancer.HealthCheck{Protocol: loadbalancer.HealthCheckHTTP, Port: 10256, Path: "/healthz"},
			SourceRanges: []netip.Prefix{netip.MustParsePrefix("0.0.0.0/0")},
		},
		Ingress: []loadbalancer.Ingress{{IP: "192.0.2.1"}},
	}
	data, err := json.Marshal(lb)
	if err != nil {
		t.Fatal(err)
	}
	const want = `{"id":"lb-1","name":"k8s-abc","tags":{"ccmkit.io/cluster":"c1"},"spec":{"ipFamilies":["IPv4"],"listeners":[{"family":"IPv4","protocol":"TCP","port":80,"nodePort":30080}],"backends":[{"nodeName":"n1","providerID":"fake://i-1","ipv4":"10.0.0.1"}],"healthCheck":{"protocol":"HTTP","port":10256,"path":"/healthz"},"sourceRanges":["0.0.0.0/0"],"sessionAffinity":{}},"ingress":[{"ip":"192.0.2.1"}]}`
	if diff := cmp.Diff(want, string(data)); diff != "" {
		t.Errorf("JSON (-want +got):\n%s", diff)
	}
	var back loadbalancer.LoadBalancer
	if err := json.Unmarshal(data, &back); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(lb, back, cmp.Comparer(func(a, b netip.Addr) bool { return a == b }), cmp.Comparer(func(a, b netip.Prefix) bool { return a == b })); diff != "" {
		t.Errorf("round trip (-want +got):\n%s", diff)
	}
}
