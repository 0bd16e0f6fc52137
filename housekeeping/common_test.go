package housekeeping

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	servicecontroller "k8s.io/cloud-provider/controllers/service"
	"k8s.io/utils/clock"
)

// TestInBackends: the Nodes the service controller passes to
// EnsureLoadBalancer (its stableNodeSetPredicates), which drift repair
// must pass too.
func TestInBackends(t *testing.T) {
	now := metav1.Now()
	for _, tc := range []struct {
		name, reason string
		node         v1.Node
		want         bool
	}{
		{name: "plain", reason: "a Node is a backend", want: true},
		{name: "exclude label true", reason: "node.kubernetes.io/exclude-from-external-load-balancers=true",
			node: v1.Node{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{v1.LabelNodeExcludeBalancers: "true"}}}},
		{name: "exclude label false", reason: "=false keeps it", want: true,
			node: v1.Node{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{v1.LabelNodeExcludeBalancers: "false"}}}},
		{name: "exclude label malformed", reason: "a value ParseBool refuses excludes, as upstream",
			node: v1.Node{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{v1.LabelNodeExcludeBalancers: "maybe"}}}},
		{name: "being deleted", reason: "nodeNotDeletedPredicate", node: v1.Node{ObjectMeta: metav1.ObjectMeta{DeletionTimestamp: &now}}},
		{name: "autoscaler taint", reason: "nodeUnTaintedPredicate",
			node: v1.Node{Spec: v1.NodeSpec{Taints: []v1.Taint{{Key: servicecontroller.ToBeDeletedTaint, Effect: v1.TaintEffectNoSchedule}}}}},
		{name: "not ready", reason: "readiness is not a stable-set predicate", want: true,
			node: v1.Node{Status: v1.NodeStatus{Conditions: []v1.NodeCondition{{Type: v1.NodeReady, Status: v1.ConditionFalse}}}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := inBackends(&tc.node); got != tc.want {
				t.Errorf("inBackends = %v, want %v: %s", got, tc.want, tc.reason)
			}
		})
	}
}

// TestEvery: the first call comes within the first period, each next one
// a period after the start of the last. It runs in a synctest bubble on
// the real clock, whose time there is virtual: each timer fires at its
// exact deadline, at once.
func TestEvery(t *testing.T) { synctest.Test(t, testEvery) }

func testEvery(t *testing.T) {
	c := clock.RealClock{}
	ctx, cancel := context.WithCancel(t.Context())
	calls := make(chan time.Time, 10)
	done := make(chan struct{})
	start := c.Now()
	go func() {
		defer close(done)
		every(ctx, c, time.Minute, func() { calls <- c.Now() })
	}()
	var at []time.Time
	for len(at) < 3 {
		at = append(at, <-calls)
	}
	cancel()
	<-done
	if first := at[0].Sub(start); first >= time.Minute {
		t.Errorf("first call after %v: want within the first period (1m)", first)
	}
	for i := 1; i < len(at); i++ {
		if gap := at[i].Sub(at[i-1]); gap != time.Minute {
			t.Errorf("call %d came %v after the previous: want 1m", i, gap)
		}
	}
}
