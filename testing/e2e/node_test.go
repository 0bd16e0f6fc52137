package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/ccmkit/ccmkit/fake"
	"github.com/ccmkit/ccmkit/testing/e2e/ccm"
	"github.com/ccmkit/ccmkit/testing/e2e/workload"
)

// TestNodeInitialization: Nodes registered by kubelets with
// --cloud-provider=external get their provider ID, addresses, topology and
// instance-type labels from the cloud, and lose the uninitialized taint.
func TestNodeInitialization(t *testing.T) {
	s := newScenario(t, "node-init")
	cloud := fake.Config{
		InstanceCIDRs: []string{"10.0.0.0/16", "fd00:10::/64"},
		Instances: []fake.Instance{
			{
				ID: "i-big", Name: "node-init-1", Zone: "zone-b", Region: "region-2", Type: "fake.large",
				InternalIPs: []string{"10.0.0.21", "fd00:10::21"}, ExternalIPs: []string{"203.0.113.21"},
				Labels: map[string]string{"fake.ccmkit.io/rack": "r7"},
			},
			{ID: "i-small", Name: "node-init-2"},
			{Name: "node-init-3"},
		},
	}
	s.startCCM("ccm", cloud, ccm.Config{})
	names := []string{"node-init-1", "node-init-2"}
	s.createNodes(names, nil)
	s.waitNodesInitialized(names, initTimeout)

	tests := []struct {
		node       string
		reason     string
		providerID string
		labels     map[string]string
		addresses  []corev1.NodeAddress
	}{
		{
			node:       "node-init-1",
			reason:     "every field of the instance reaches the Node",
			providerID: "fake://i-big",
			labels: map[string]string{
				corev1.LabelTopologyZone:       "zone-b",
				corev1.LabelTopologyRegion:     "region-2",
				corev1.LabelInstanceTypeStable: "fake.large",
				"fake.ccmkit.io/rack":          "r7",
			},
			addresses: []corev1.NodeAddress{
				{Type: corev1.NodeInternalIP, Address: "10.0.0.21"},
				{Type: corev1.NodeInternalIP, Address: "fd00:10::21"},
				{Type: corev1.NodeExternalIP, Address: "203.0.113.21"},
				{Type: corev1.NodeHostName, Address: "node-init-1"},
			},
		},
		{
			node:       "node-init-2",
			reason:     "an instance seeded with a name only gets the fake's defaults and addresses from both instance CIDRs",
			providerID: "fake://i-small",
			labels: map[string]string{
				corev1.LabelTopologyZone:       "zone-a",
				corev1.LabelTopologyRegion:     "region-1",
				corev1.LabelInstanceTypeStable: "fake.small",
			},
		},
	}
	for _, tt := range tests {
		n := s.node(tt.node)
		if n.Spec.ProviderID != tt.providerID {
			t.Errorf("%s: node %s providerID = %q, want %q", tt.reason, tt.node, n.Spec.ProviderID, tt.providerID)
		}
		for k, v := range tt.labels {
			if got := n.Labels[k]; got != v {
				t.Errorf("%s: node %s label %s = %q, want %q", tt.reason, tt.node, k, got, v)
			}
		}
		if workload.HasTaint(n, workload.UninitializedTaint) {
			t.Errorf("%s: node %s still has taint %s", tt.reason, tt.node, workload.UninitializedTaint)
		}
		if tt.addresses != nil {
			// The order is the provider's canonical one; compare as sets
			// so that this test is about content, and check stability
			// separately below.
			got := sortedAddresses(n.Status.Addresses)
			if diff := cmp.Diff(sortedAddresses(tt.addresses), got); diff != "" {
				t.Errorf("%s: node %s addresses (-want +got):\n%s", tt.reason, tt.node, diff)
			}
		} else {
			var v4, v6 bool
			for _, a := range n.Status.Addresses {
				if a.Type == corev1.NodeInternalIP {
					v4 = v4 || !containsColon(a.Address)
					v6 = v6 || containsColon(a.Address)
				}
			}
			if !v4 || !v6 {
				t.Errorf("%s: node %s addresses %v, want an IPv4 and an IPv6 InternalIP", tt.reason, tt.node, n.Status.Addresses)
			}
		}
	}

	// Initialization is done once: the addresses stay as they are (a
	// provider that reordered them would rewrite the Node every sync).
	before := s.node("node-init-1")
	s.createNodes([]string{"node-init-3"}, nil)
	s.waitNodesInitialized([]string{"node-init-3"}, initTimeout)
	after := s.node("node-init-1")
	if diff := cmp.Diff(before.Status.Addresses, after.Status.Addresses); diff != "" {
		t.Errorf("node node-init-1 addresses changed without a cloud change (-before +after):\n%s", diff)
	}
}

func containsColon(s string) bool { return strings.Contains(s, ":") }

func sortedAddresses(in []corev1.NodeAddress) []corev1.NodeAddress {
	out := slices.Clone(in)
	slices.SortFunc(out, func(a, b corev1.NodeAddress) int {
		if c := strings.Compare(string(a.Type), string(b.Type)); c != 0 {
			return c
		}
		return strings.Compare(a.Address, b.Address)
	})
	return out
}

// TestTerminatedInstanceNodeDeleted: when an instance is terminated in the
// cloud, the node-lifecycle controller deletes its Node (and only its Node).
func TestTerminatedInstanceNodeDeleted(t *testing.T) {
	s := newScenario(t, "terminate")
	_, admin, _ := s.startWithNodes("terminate", 2, ccm.Config{})
	if _, err := admin.TerminateInstance(t.Context(), "i-terminate-1"); err != nil {
		t.Fatal(err)
	}
	s.poll(changeTimeout, "node terminate-1 to be deleted after its instance i-terminate-1 was terminated", func(ctx context.Context) (bool, string) {
		n, err := s.client.CoreV1().Nodes().Get(ctx, "terminate-1", metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return true, ""
		}
		if err != nil {
			return false, err.Error()
		}
		return false, workload.DescribeNode(n)
	})
	// The other node was checked in the same monitor pass and survives.
	if n := s.node("terminate-2"); n.DeletionTimestamp != nil {
		t.Errorf("node terminate-2, whose instance runs, is being deleted")
	}
}

// TestStoppedInstanceNodeTainted: when an instance is stopped, the
// node-lifecycle controller taints its Node shutdown; when the instance
// runs again and its kubelet reports Ready, the taint is removed.
func TestStoppedInstanceNodeTainted(t *testing.T) {
	s := newScenario(t, "stop")
	_, admin, _ := s.startWithNodes("stop", 2, ccm.Config{})
	if _, err := admin.StopInstance(t.Context(), "i-stop-1"); err != nil {
		t.Fatal(err)
	}
	waitTaint := func(node string, want bool, why string) {
		s.poll(changeTimeout, fmt.Sprintf("node %s to %s taint %s (%s)", node, map[bool]string{true: "get", false: "lose"}[want], workload.ShutdownTaint, why),
			func(ctx context.Context) (bool, string) {
				n, err := s.client.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
				if err != nil {
					return false, err.Error()
				}
				return workload.HasTaint(n, workload.ShutdownTaint) == want, workload.DescribeNode(n)
			})
	}
	waitTaint("stop-1", true, "its instance i-stop-1 was stopped")
	if n := s.node("stop-2"); workload.HasTaint(n, workload.ShutdownTaint) {
		t.Errorf("node stop-2, whose instance runs, has the shutdown taint: %s", workload.DescribeNode(n))
	}
	// A stopped instance still exists: its Node must not be deleted.
	if n := s.node("stop-1"); n.DeletionTimestamp != nil {
		t.Errorf("node stop-1 of a stopped (not terminated) instance is being deleted")
	}

	// Start the instance again and report Ready, as its kubelet would.
	if _, err := admin.StartInstance(t.Context(), "i-stop-1"); err != nil {
		t.Fatal(err)
	}
	n := s.node("stop-1")
	n.Status.Conditions = []corev1.NodeCondition{{
		Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady",
		LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now(),
	}}
	if _, err := s.client.CoreV1().Nodes().UpdateStatus(t.Context(), n, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("reporting node stop-1 Ready: %v", err)
	}
	waitTaint("stop-1", false, "its instance runs again and the node is Ready")
}
