package e2e

import (
	"context"
	"fmt"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/ccmkit/ccmkit/fake"
	"github.com/ccmkit/ccmkit/testing/e2e/ccm"
	"github.com/ccmkit/ccmkit/testing/e2e/fakecloud"
	"github.com/ccmkit/ccmkit/testing/e2e/workload"
)

// TestRoutes: with --cluster-cidr the route controller creates one cloud
// route per Node pod CIDR (IPv4 and IPv6), marks the Nodes' network
// available, deletes the routes of a deleted Node and adds those of a new
// one.
func TestRoutes(t *testing.T) {
	s := newScenario(t, "routes")
	c := s.startCCM("ccm", fake.Config{
		InstanceCIDRs: []string{"10.0.0.0/16", "fd00:10::/64"},
		Instances:     fakecloud.Instances("routes", 4),
	}, ccm.Config{ClusterCIDR: "10.244.0.0/16,fd00:244::/56"})
	podCIDRs := func(i int) []string {
		return []string{fmt.Sprintf("10.244.%d.0/24", i+1), fmt.Sprintf("fd00:244:0:%x::/64", i+1)}
	}
	nodes := []string{"routes-1", "routes-2", "routes-3"}
	s.createNodes(nodes, func(i int) workload.NodeOptions { return workload.NodeOptions{PodCIDRs: podCIDRs(i)} })
	admin := s.admin(c, initTimeout)

	// want maps "node cidr" for the nodes expected to have routes.
	waitRoutes := func(what string, want []string) {
		t.Helper()
		slices.Sort(want)
		s.poll(changeTimeout, what, func(ctx context.Context) (bool, string) {
			routes, err := admin.Routes(ctx, s.name)
			if err != nil {
				return false, err.Error()
			}
			var got []string
			for _, r := range routes {
				got = append(got, r.TargetNode+" "+r.DestinationCIDR)
			}
			slices.Sort(got)
			return slices.Equal(got, want), fmt.Sprintf("routes %v, want %v", got, want)
		})
	}
	var want []string
	for i, n := range nodes {
		for _, cidr := range podCIDRs(i) {
			want = append(want, n+" "+cidr)
		}
	}
	waitRoutes("one route per pod CIDR of routes-1..3 (cluster "+s.name+")", want)

	s.poll(changeTimeout, "the route controller to set NetworkUnavailable=False on every node", func(ctx context.Context) (bool, string) {
		for _, name := range nodes {
			n, err := s.client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, err.Error()
			}
			ok := slices.ContainsFunc(n.Status.Conditions, func(c corev1.NodeCondition) bool {
				return c.Type == corev1.NodeNetworkUnavailable && c.Status == corev1.ConditionFalse
			})
			if !ok {
				return false, fmt.Sprintf("node %s conditions %v", name, n.Status.Conditions)
			}
		}
		return true, ""
	})

	// A deleted node's routes go; a new node's routes come.
	if err := s.client.CoreV1().Nodes().Delete(t.Context(), "routes-2", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	s.createNodes([]string{"routes-4"}, func(int) workload.NodeOptions { return workload.NodeOptions{PodCIDRs: podCIDRs(3)} })
	want = nil
	for _, i := range []int{0, 2, 3} {
		for _, cidr := range podCIDRs(i) {
			want = append(want, fmt.Sprintf("routes-%d %s", i+1, cidr))
		}
	}
	waitRoutes("the routes of deleted node routes-2 to go and those of new node routes-4 to come", want)
}
