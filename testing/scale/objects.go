package scale

import (
	"fmt"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	cloudproviderapi "k8s.io/cloud-provider/api"
)

// maxNodes is how many Nodes one simulation can create: one /24 pod CIDR
// each in clusterCIDR (a /10).
const maxNodes = 1 << 14

// nodeName names the i-th Node the simulation creates.
func nodeName(i int) string { return fmt.Sprintf("node-%05d", i) }

// newNode returns the i-th Node as a kubelet run with
// --cloud-provider=external registers it: Ready, with the uninitialized
// taint the cloud node controller removes (cloud-provider/api
// TaintExternalCloudProvider), no provider ID, and the pod CIDR the node
// IPAM controller would have given it.
func newNode(i int) *v1.Node {
	return &v1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: nodeName(i), UID: types.UID(fmt.Sprintf("scale-node-%d", i))},
		Spec: v1.NodeSpec{
			PodCIDR:  podCIDR(i),
			PodCIDRs: []string{podCIDR(i)},
			Taints:   []v1.Taint{{Key: cloudproviderapi.TaintExternalCloudProvider, Value: "true", Effect: v1.TaintEffectNoSchedule}},
		},
		Status: v1.NodeStatus{Conditions: []v1.NodeCondition{{Type: v1.NodeReady, Status: v1.ConditionTrue}}},
	}
}

// podCIDR is the i-th /24 of clusterCIDR.
func podCIDR(i int) string { return fmt.Sprintf("100.%d.%d.0/24", 64+i/256, i%256) }

// newService returns the j-th LoadBalancer Service: one TCP port.
func newService(j int) *v1.Service {
	return &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: fmt.Sprintf("svc-%04d", j), UID: types.UID(fmt.Sprintf("scale-svc-%d", j))},
		Spec: v1.ServiceSpec{
			Type:  v1.ServiceTypeLoadBalancer,
			Ports: []v1.ServicePort{{Name: "http", Protocol: v1.ProtocolTCP, Port: 80, NodePort: int32(30000 + j%2768)}},
		},
	}
}

// servicePorts is the ports of each Service newService returns, which
// the cloud minimums charge a hierarchical cloud's costs for.
func servicePorts() int64 { return int64(len(newService(0).Spec.Ports)) }

// initialized reports whether the cloud node controller has initialized
// n, and, when routes is true, whether the route controller has routed
// its pod CIDR (NetworkUnavailable False: route_controller.go
// updateNetworkingCondition).
func initialized(n *v1.Node, routes bool) bool {
	if n.Spec.ProviderID == "" {
		return false
	}
	for _, t := range n.Spec.Taints {
		if t.Key == cloudproviderapi.TaintExternalCloudProvider {
			return false
		}
	}
	if !routes {
		return true
	}
	for _, c := range n.Status.Conditions {
		if c.Type == v1.NodeNetworkUnavailable {
			return c.Status == v1.ConditionFalse
		}
	}
	return false
}
