package housekeeping

import (
	"context"
	"math/rand/v2"
	"strconv"
	"time"

	v1 "k8s.io/api/core/v1"
	servicecontroller "k8s.io/cloud-provider/controllers/service"
	servicehelper "k8s.io/cloud-provider/service/helpers"
	"k8s.io/utils/clock"
)

// wantsLoadBalancer reports whether the upstream service controller
// manages svc's load balancer: type LoadBalancer without a
// loadBalancerClass (k8s.io/cloud-provider controllers/service/controller.go
// wantsLoadBalancer).
func wantsLoadBalancer(svc *v1.Service) bool {
	return svc.Spec.Type == v1.ServiceTypeLoadBalancer && svc.Spec.LoadBalancerClass == nil
}

// provisioned reports whether the service controller has taken svc in
// hand and finished its first EnsureLoadBalancer: it wants a load
// balancer, carries the cleanup finalizer (added before the first Ensure,
// controllers/service/controller.go syncLoadBalancerIfNeeded), is not being
// deleted, and has an ingress.
func provisioned(svc *v1.Service) bool {
	return wantsLoadBalancer(svc) && servicehelper.HasLBFinalizer(svc) &&
		svc.DeletionTimestamp == nil && len(svc.Status.LoadBalancer.Ingress) > 0
}

// inBackends reports whether the service controller passes node to
// EnsureLoadBalancer: its stableNodeSetPredicates
// (controllers/service/controller.go: nodeNotDeletedPredicate,
// nodeIncludedPredicate, nodeUnTaintedPredicate). Drift repair must pass
// the same Nodes, or it and the service controller would undo each other.
func inBackends(node *v1.Node) bool {
	if node.DeletionTimestamp != nil {
		return false
	}
	if v, ok := node.Labels[v1.LabelNodeExcludeBalancers]; ok {
		exclude, err := strconv.ParseBool(v)
		if err != nil || exclude { // a malformed value excludes, as upstream
			return false
		}
	}
	for _, t := range node.Spec.Taints {
		if t.Key == servicecontroller.ToBeDeletedTaint {
			return false
		}
	}
	return true
}

// sleep waits d on c, or until ctx is done; it reports whether ctx is
// still live. A d of zero or less returns at once.
func sleep(ctx context.Context, c clock.Clock, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := c.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C():
		return true
	}
}

// every calls fn every period until ctx is done: first at a random moment
// of the first period (rand.N), then period after the start of the last
// call, or at once when that call overran its period.
func every(ctx context.Context, c clock.Clock, period time.Duration, fn func()) {
	next := c.Now().Add(rand.N(period)) //nolint:gosec // G404: jitter of a timer, not a secret
	for sleep(ctx, c, next.Sub(c.Now())) {
		start := c.Now()
		fn()
		next = start.Add(period)
	}
}
