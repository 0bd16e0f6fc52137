package workload

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	cloudproviderapi "k8s.io/cloud-provider/api"
)

// Taint keys set and read by the CCM (k8s.io/cloud-provider/api).
const (
	// UninitializedTaint is put on a Node by a kubelet started with
	// --cloud-provider=external and removed by the cloud node controller.
	UninitializedTaint = cloudproviderapi.TaintExternalCloudProvider
	// ShutdownTaint is put on a Node by the cloud node-lifecycle controller
	// when its instance is shut down.
	ShutdownTaint = cloudproviderapi.TaintNodeShutdown
)

// NodeOptions are the optional parts of a Node built by Node.
type NodeOptions struct {
	// PodCIDRs become spec.podCIDR/podCIDRs, as kube-controller-manager's
	// IPAM would set them (it does not run here).
	PodCIDRs []string
	// Labels are added to the kubernetes.io/hostname label.
	Labels map[string]string
	// ProvidedNodeIP sets the alpha.kubernetes.io/provided-node-ip
	// annotation, as kubelet --node-ip does with an external cloud provider.
	ProvidedNodeIP string
	// ProviderID sets spec.providerID at registration, as kubelet
	// --provider-id does: the cloud node controller then looks the
	// instance up by it rather than by the Node's name. Empty: none, until
	// the cloud node controller sets it.
	ProviderID string
}

// Node returns a Node named name as a kubelet started with
// --cloud-provider=external registers it: no providerID (unless
// opts.ProviderID), the uninitialized NoSchedule taint, the hostname label,
// and no status (no kubelet runs, so its Ready condition is Unknown).
func Node(name string, opts NodeOptions) *corev1.Node {
	n := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name:   name,
			Labels: map[string]string{corev1.LabelHostname: name},
		},
		Spec: corev1.NodeSpec{
			ProviderID: opts.ProviderID,
			Taints:     []corev1.Taint{{Key: UninitializedTaint, Value: "true", Effect: corev1.TaintEffectNoSchedule}},
		},
	}
	for k, v := range opts.Labels {
		n.Labels[k] = v
	}
	if len(opts.PodCIDRs) > 0 {
		n.Spec.PodCIDR = opts.PodCIDRs[0]
		n.Spec.PodCIDRs = slices.Clone(opts.PodCIDRs)
	}
	if opts.ProvidedNodeIP != "" {
		n.Annotations = map[string]string{cloudproviderapi.AnnotationAlphaProvidedIPAddr: opts.ProvidedNodeIP}
	}
	return n
}

// LoadBalancerService returns a TCP Service of type LoadBalancer in
// namespace ns selecting app=name, with one port per entry of ports
// (named p<port>, targetPort = port).
func LoadBalancerService(ns, name string, ports ...int32) *corev1.Service {
	s := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: corev1.ServiceSpec{
			Type:     corev1.ServiceTypeLoadBalancer,
			Selector: map[string]string{"app": name},
		},
	}
	for _, p := range ports {
		s.Spec.Ports = append(s.Spec.Ports, corev1.ServicePort{
			Name:       fmt.Sprintf("p%d", p),
			Protocol:   corev1.ProtocolTCP,
			Port:       p,
			TargetPort: intstr.FromInt32(p),
		})
	}
	return s
}

// HasTaint reports whether n carries a taint with this key.
func HasTaint(n *corev1.Node, key string) bool {
	return slices.ContainsFunc(n.Spec.Taints, func(t corev1.Taint) bool { return t.Key == key })
}

// Initialized reports whether the cloud node controller has initialized n:
// a providerID is set, the uninitialized taint is gone and the node has
// addresses. The controller (k8s.io/cloud-provider controllers/node,
// syncNode) removes the taint and sets the providerID in one update and
// patches the addresses right after, so a Node counts as initialized here
// once all three are visible.
func Initialized(n *corev1.Node) bool {
	return n.Spec.ProviderID != "" && !HasTaint(n, UninitializedTaint) && len(n.Status.Addresses) > 0
}

// IngressIPs returns the IPs (or hostnames) of a Service's load-balancer
// status, in order.
func IngressIPs(s *corev1.Service) []string {
	var out []string
	for _, in := range s.Status.LoadBalancer.Ingress {
		if in.IP != "" {
			out = append(out, in.IP)
		} else {
			out = append(out, in.Hostname)
		}
	}
	return out
}

// DescribeNode is a one-line summary of n for failure messages.
func DescribeNode(n *corev1.Node) string {
	var taints, addrs []string
	for _, t := range n.Spec.Taints {
		taints = append(taints, t.Key)
	}
	for _, a := range n.Status.Addresses {
		addrs = append(addrs, string(a.Type)+"="+a.Address)
	}
	return fmt.Sprintf("node %s providerID=%q taints=%v addresses=%v labels=%v", n.Name, n.Spec.ProviderID, taints, addrs, n.Labels)
}

// DescribeService is a one-line summary of s for failure messages.
func DescribeService(s *corev1.Service) string {
	var ports []string
	for _, p := range s.Spec.Ports {
		ports = append(ports, fmt.Sprintf("%d/%s->%d", p.Port, p.Protocol, p.NodePort))
	}
	return fmt.Sprintf("service %s/%s type=%s ports=%v ingress=%v finalizers=%v deleting=%v",
		s.Namespace, s.Name, s.Spec.Type, ports, IngressIPs(s), s.Finalizers, s.DeletionTimestamp != nil)
}

// PollInterval is how often Poll checks its condition.
const PollInterval = 200 * time.Millisecond

// Poll calls cond every PollInterval until it reports done, timeout passes
// or ctx ends. cond returns whether the wait is over and a description of
// the state it saw (errors included), which the timeout error quotes:
//
//	timed out after 1m0s waiting for <what>; last seen: <state>
//
// Poll returns nil when cond reported done.
func Poll(ctx context.Context, timeout time.Duration, what string, cond func(context.Context) (done bool, state string)) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	start := time.Now()
	var state string
	for {
		var done bool
		done, state = cond(ctx)
		if done {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("timed out after %s waiting for %s; last seen: %s", time.Since(start).Round(time.Millisecond), what, strings.TrimSpace(state))
		case <-time.After(PollInterval):
		}
	}
}
