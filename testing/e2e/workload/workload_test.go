package workload

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

func TestNode(t *testing.T) {
	tests := []struct {
		name   string
		reason string
		opts   NodeOptions
		want   *corev1.Node
	}{
		{
			name:   "kubelet defaults",
			reason: "a kubelet with --cloud-provider=external registers the uninitialized taint and the hostname label, no providerID",
			want: &corev1.Node{
				ObjectMeta: metav1.ObjectMeta{Name: "n1", Labels: map[string]string{"kubernetes.io/hostname": "n1"}},
				Spec: corev1.NodeSpec{Taints: []corev1.Taint{
					{Key: "node.cloudprovider.kubernetes.io/uninitialized", Value: "true", Effect: corev1.TaintEffectNoSchedule},
				}},
			},
		},
		{
			name:   "pod CIDRs, labels, provided IP",
			reason: "options become spec.podCIDR(s), extra labels and the provided-node-ip annotation",
			opts:   NodeOptions{PodCIDRs: []string{"10.244.1.0/24", "fd00::/64"}, Labels: map[string]string{"a": "b"}, ProvidedNodeIP: "10.0.0.9"},
			want: &corev1.Node{
				ObjectMeta: metav1.ObjectMeta{
					Name:        "n1",
					Labels:      map[string]string{"kubernetes.io/hostname": "n1", "a": "b"},
					Annotations: map[string]string{"alpha.kubernetes.io/provided-node-ip": "10.0.0.9"},
				},
				Spec: corev1.NodeSpec{
					PodCIDR:  "10.244.1.0/24",
					PodCIDRs: []string{"10.244.1.0/24", "fd00::/64"},
					Taints: []corev1.Taint{
						{Key: "node.cloudprovider.kubernetes.io/uninitialized", Value: "true", Effect: corev1.TaintEffectNoSchedule},
					},
				},
			},
		},
		{
			name:   "provider ID",
			reason: "a kubelet with --provider-id registers spec.providerID, still with the uninitialized taint",
			opts:   NodeOptions{ProviderID: "fake://i-7"},
			want: &corev1.Node{
				ObjectMeta: metav1.ObjectMeta{Name: "n1", Labels: map[string]string{"kubernetes.io/hostname": "n1"}},
				Spec: corev1.NodeSpec{
					ProviderID: "fake://i-7",
					Taints: []corev1.Taint{
						{Key: "node.cloudprovider.kubernetes.io/uninitialized", Value: "true", Effect: corev1.TaintEffectNoSchedule},
					},
				},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Node("n1", tt.opts)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("%s: Node() (-want +got):\n%s", tt.reason, diff)
			}
			if Initialized(got) {
				t.Errorf("%s: Initialized(new node) = true, want false", tt.reason)
			}
		})
	}
}

func TestInitialized(t *testing.T) {
	n := Node("n1", NodeOptions{})
	n.Spec.ProviderID = "fake://i-1"
	if Initialized(n) {
		t.Error("Initialized = true with the uninitialized taint still on")
	}
	n.Spec.Taints = nil
	if Initialized(n) {
		t.Error("Initialized = true without addresses (the controller sets them right after the taint)")
	}
	n.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "10.0.0.1"}}
	if !Initialized(n) {
		t.Error("Initialized = false with a providerID, addresses and no taint")
	}
	n.Spec.ProviderID = ""
	if Initialized(n) {
		t.Error("Initialized = true without a providerID")
	}
}

func TestLoadBalancerService(t *testing.T) {
	got := LoadBalancerService("ns", "web", 80, 443)
	want := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web"},
		Spec: corev1.ServiceSpec{
			Type:     corev1.ServiceTypeLoadBalancer,
			Selector: map[string]string{"app": "web"},
			Ports: []corev1.ServicePort{
				{Name: "p80", Protocol: corev1.ProtocolTCP, Port: 80, TargetPort: intstr.FromInt32(80)},
				{Name: "p443", Protocol: corev1.ProtocolTCP, Port: 443, TargetPort: intstr.FromInt32(443)},
			},
		},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("LoadBalancerService (-want +got):\n%s", diff)
	}
	got.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: "192.0.2.1"}, {Hostname: "lb.example"}}
	if diff := cmp.Diff([]string{"192.0.2.1", "lb.example"}, IngressIPs(got)); diff != "" {
		t.Errorf("IngressIPs (-want +got):\n%s", diff)
	}
	if d := DescribeService(got); !strings.Contains(d, "ns/web") || !strings.Contains(d, "192.0.2.1") {
		t.Errorf("DescribeService = %q, want the name and the ingress", d)
	}
}

func TestPoll(t *testing.T) {
	calls := 0
	err := Poll(t.Context(), time.Minute, "the third call", func(context.Context) (bool, string) {
		calls++
		return calls == 3, ""
	})
	if err != nil || calls != 3 {
		t.Errorf("Poll = %v after %d calls, want nil after 3", err, calls)
	}
	err = Poll(t.Context(), 300*time.Millisecond, "godot", func(context.Context) (bool, string) {
		return false, "nobody came"
	})
	if err == nil || !strings.Contains(err.Error(), "waiting for godot") || !strings.Contains(err.Error(), "last seen: nobody came") || !strings.Contains(err.Error(), "timed out after") {
		t.Errorf("Poll timeout error = %v, want what was awaited, for how long and the last state", err)
	}
}

func TestDecodeManifests(t *testing.T) {
	tests := []struct {
		name    string
		reason  string
		in      string
		want    []string // kind/name
		wantErr string
	}{
		{
			name:   "multi-document with comments and empty documents",
			reason: "every non-empty document becomes one object, in order",
			in:     "# c\n---\napiVersion: v1\nkind: ServiceAccount\nmetadata:\n  name: a\n---\n---\napiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata:\n  name: b\n",
			want:   []string{"ServiceAccount/a", "ClusterRole/b"},
		},
		{
			name:    "missing kind",
			reason:  "an object without kind cannot be applied; the error names the document",
			in:      "apiVersion: v1\nmetadata:\n  name: a\n",
			wantErr: "document 1",
		},
		{
			name:    "bad YAML",
			reason:  "a syntax error names the document",
			in:      "apiVersion: v1\nkind: A\nmetadata:\n  name: a\n---\nkind: [\n",
			wantErr: "document 2",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			objs, err := DecodeManifests([]byte(tt.in))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("%s: err = %v, want one containing %q", tt.reason, err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("%s: %v", tt.reason, err)
			}
			var got []string
			for _, o := range objs {
				got = append(got, o.GetKind()+"/"+o.GetName())
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("%s: (-want +got):\n%s", tt.reason, diff)
			}
		})
	}
}
