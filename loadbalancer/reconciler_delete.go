package loadbalancer

import (
	"context"
	"fmt"
)

// maxDeleteCalls bounds the Delete calls for one load balancer in one
// EnsureLoadBalancerDeleted: a cascade delete answered busy (see
// Driver.Delete) takes one call per step.
const maxDeleteCalls = 16

// delete deletes lb, calling Driver.Delete again after each busy answer
// once the cloud's delay has passed (awaitBusy), at most maxDeleteCalls
// times.
func (r *Reconciler) delete(ctx context.Context, lb *LoadBalancer) error {
	for calls := 1; ; calls++ {
		err := r.call(ctx, func() error { return r.calls.Delete(ctx, lb) })
		b, d := busyOf(err)
		switch {
		case b == nil:
			return err
		case calls == maxDeleteCalls:
			return &stillBusy{err: err, after: d, why: fmt.Sprintf("busy after %d Delete calls, the most one call makes", calls)}
		}
		if err := r.awaitBusy(ctx, err, d); err != nil {
			return err
		}
	}
}
