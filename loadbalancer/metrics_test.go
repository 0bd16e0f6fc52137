package loadbalancer_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/cloud-provider/api"

	"github.com/ccmkit/ccmkit/internal/cloudmetrics"
	"github.com/ccmkit/ccmkit/loadbalancer"
)

// loadBalancerCalls returns, from legacyregistry (the CCM's /metrics), the
// count of ccmkit_cloud_requests_total for capability "loadbalancer" by
// "operation/result", and the sample count of
// ccmkit_cloud_request_duration_seconds by operation.
func loadBalancerCalls(t *testing.T) (requests map[string]float64, timed map[string]uint64) {
	t.Helper()
	c, err := cloudmetrics.Read()
	if err != nil {
		t.Fatal(err)
	}
	requests, timed = map[string]float64{}, map[string]uint64{}
	for k, v := range c.Requests {
		if rest, ok := strings.CutPrefix(k, "loadbalancer/"); ok {
			requests[rest] = v
		}
	}
	for k, v := range c.Timed {
		if op, ok := strings.CutPrefix(k, "loadbalancer/"); ok {
			timed[op] = v
		}
	}
	return requests, timed
}

// TestDriverCallMetrics: every Driver call the Reconciler makes, each
// retry after a throttle included, is one count in legacyregistry with
// its operation and result, and one latency sample; the counts match the
// Driver's own.
func TestDriverCallMetrics(t *testing.T) {
	r, d := newReconciler(t, loadbalancer.Options{MaxThrottleWait: time.Minute})
	beforeReq, beforeTimed := loadBalancerCalls(t)

	mustEnsure(t, r, "c1", lbService(), threeNodes()) // create
	mustEnsure(t, r, "c1", lbService(), threeNodes()) // converged: finds only
	throttled := 1
	d.onApply = func(loadbalancer.Action) error {
		if throttled > 0 {
			throttled--
			return fmt.Errorf("PATCH: %w", api.NewRetryError("429", time.Millisecond))
		}
		return nil
	}
	if err := r.UpdateLoadBalancer(t.Context(), "c1", lbService(), append(threeNodes(), node("n4", "10.0.0.4"))); err != nil {
		t.Fatalf("UpdateLoadBalancer (throttled once, waited out): %v", err)
	}
	failed := 1
	d.onDelete = func(*loadbalancer.LoadBalancer) error {
		if failed > 0 {
			failed--
			return errors.New("500 internal server error")
		}
		return nil
	}
	if err := r.EnsureLoadBalancerDeleted(t.Context(), "c1", lbService()); err == nil {
		t.Fatal("EnsureLoadBalancerDeleted with a failing Delete succeeded; want its error")
	}
	if err := r.EnsureLoadBalancerDeleted(t.Context(), "c1", lbService()); err != nil {
		t.Fatalf("EnsureLoadBalancerDeleted: %v", err)
	}

	afterReq, afterTimed := loadBalancerCalls(t)
	gotReq, gotTimed := map[string]float64{}, map[string]uint64{}
	for k, v := range afterReq {
		if delta := v - beforeReq[k]; delta != 0 {
			gotReq[k] = delta
		}
	}
	for k, v := range afterTimed {
		if delta := v - beforeTimed[k]; delta != 0 {
			gotTimed[k] = delta
		}
	}
	d.mu.Lock()
	finds, applies, deletes := d.finds, len(d.applied), len(d.deleted)
	d.mu.Unlock()
	wantReq := map[string]float64{
		"Find/ok":         float64(finds),
		"Apply/ok":        float64(applies - 1),
		"Apply/throttled": 1,
		"Delete/error":    1,
		"Delete/ok":       float64(deletes - 1),
	}
	if diff := cmp.Diff(wantReq, gotReq); diff != "" {
		t.Errorf("ccmkit_cloud_requests_total{capability=loadbalancer} added by the calls (-want: the Driver's own counts +got):\n%s", diff)
	}
	wantTimed := map[string]uint64{"Find": uint64(finds), "Apply": uint64(applies), "Delete": uint64(deletes)}
	if diff := cmp.Diff(wantTimed, gotTimed); diff != "" {
		t.Errorf("ccmkit_cloud_request_duration_seconds samples added (-want +got):\n%s", diff)
	}
	if finds == 0 || applies < 3 || deletes != 2 {
		t.Errorf("the Driver saw %d finds, %d applies, %d deletes; want some of each (create, throttled and retried add, failed and retried delete)", finds, applies, deletes)
	}
}
