package lbcheck

import (
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/ccmkit/ccmkit/loadbalancer"
)

func valid() loadbalancer.LoadBalancer {
	return loadbalancer.LoadBalancer{
		Name: "web",
		Tags: map[string]string{loadbalancer.TagCluster: "kubernetes"},
		Spec: loadbalancer.Spec{
			IPFamilies: []v1.IPFamily{v1.IPv4Protocol},
			Listeners: []loadbalancer.Listener{{
				ListenerKey: loadbalancer.ListenerKey{Family: v1.IPv4Protocol, Protocol: v1.ProtocolTCP, Port: 80},
				NodePort:    30080,
			}},
			Backends: []loadbalancer.Backend{{NodeName: "node-1"}},
		},
	}
}

// TestLoadBalancer: each kind of problem is named by its field path, and
// a valid load balancer has none.
func TestLoadBalancer(t *testing.T) {
	tests := []struct {
		name string
		edit func(lb *loadbalancer.LoadBalancer)
		want string // a field path in the one error; "" for none
	}{
		{name: "valid", edit: func(*loadbalancer.LoadBalancer) {}},
		{name: "ID set", edit: func(lb *loadbalancer.LoadBalancer) { lb.ID = "lb-1" }, want: "loadBalancer.id"},
		{name: "bad name", edit: func(lb *loadbalancer.LoadBalancer) { lb.Name = "Web_1" }, want: "loadBalancer.name"},
		{name: "empty cluster tag", edit: func(lb *loadbalancer.LoadBalancer) { lb.Tags[loadbalancer.TagCluster] = "" }, want: "loadBalancer.tags[" + loadbalancer.TagCluster + "]"},
		{name: "no family", edit: func(lb *loadbalancer.LoadBalancer) { lb.Spec.IPFamilies = nil; lb.Spec.Listeners = nil }, want: "loadBalancer.spec.ipFamilies"},
		{name: "listener of another family", edit: func(lb *loadbalancer.LoadBalancer) { lb.Spec.Listeners[0].Family = v1.IPv6Protocol }, want: "loadBalancer.spec.listeners[0].family"},
		{name: "port 0", edit: func(lb *loadbalancer.LoadBalancer) { lb.Spec.Listeners[0].Port = 0 }, want: "loadBalancer.spec.listeners[0].port"},
		{name: "node port shared by two ports", edit: func(lb *loadbalancer.LoadBalancer) {
			l := lb.Spec.Listeners[0]
			l.Port = 443
			lb.Spec.Listeners = append(lb.Spec.Listeners, l)
		}, want: "loadBalancer.spec.listeners[1].nodePort"},
		{name: "backend by another key", edit: func(lb *loadbalancer.LoadBalancer) { lb.Spec.BackendKey = loadbalancer.BackendKeyAddress }, want: "loadBalancer.spec.backendKey"},
		{name: "duplicate backend", edit: func(lb *loadbalancer.LoadBalancer) { lb.Spec.Backends = append(lb.Spec.Backends, lb.Spec.Backends[0]) }, want: "loadBalancer.spec.backends[1]"},
		{name: "affinity timeout without client IP", edit: func(lb *loadbalancer.LoadBalancer) { lb.Spec.SessionAffinity.TimeoutSeconds = 10 }, want: "loadBalancer.spec.sessionAffinity.timeoutSeconds"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			lb := valid()
			tc.edit(&lb)
			errs := LoadBalancer(field.NewPath("loadBalancer"), &lb, loadbalancer.BackendKeyNodeName)
			switch {
			case tc.want == "" && len(errs) != 0:
				t.Fatalf("LoadBalancer() = %v; want no problem", errs)
			case tc.want != "" && (len(errs) != 1 || !strings.HasPrefix(errs[0].Error(), tc.want+":")):
				t.Fatalf("LoadBalancer() = %v; want one problem at %s", errs, tc.want)
			}
		})
	}
}
