package loadbalancer_test

import (
	"net/netip"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/ccmkit/ccmkit/loadbalancer"
)

// cmpOpts compares netip values by value.
var cmpOpts = cmp.Options{
	cmp.Comparer(func(a, b netip.Addr) bool { return a == b }),
	cmp.Comparer(func(a, b netip.Prefix) bool { return a == b }),
}

// lbService returns a TCP LoadBalancer Service shop/web with port 80 →
// node port 30080, modified by mods.
func lbService(mods ...func(*v1.Service)) *v1.Service {
	svc := &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web", UID: types.UID("uid-web")},
		Spec: v1.ServiceSpec{
			Type:                  v1.ServiceTypeLoadBalancer,
			Ports:                 []v1.ServicePort{{Name: "http", Protocol: v1.ProtocolTCP, Port: 80, NodePort: 30080}},
			IPFamilies:            []v1.IPFamily{v1.IPv4Protocol},
			ExternalTrafficPolicy: v1.ServiceExternalTrafficPolicyCluster,
		},
	}
	for _, m := range mods {
		m(svc)
	}
	return svc
}

// node returns a Node with a provider ID and the given InternalIPs.
func node(name string, ips ...string) *v1.Node {
	n := &v1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       v1.NodeSpec{ProviderID: "test://" + name},
	}
	for _, ip := range ips {
		n.Status.Addresses = append(n.Status.Addresses, v1.NodeAddress{Type: v1.NodeInternalIP, Address: ip})
	}
	return n
}

func addr(s string) netip.Addr     { return netip.MustParseAddr(s) }
func prefix(s string) netip.Prefix { return netip.MustParsePrefix(s) }

func tcp(f v1.IPFamily, port, nodePort int32) loadbalancer.Listener {
	return loadbalancer.Listener{ListenerKey: loadbalancer.ListenerKey{Family: f, Protocol: v1.ProtocolTCP, Port: port}, NodePort: nodePort}
}
