package routes_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/types"

	"github.com/ccmkit/ccmkit/internal/cloudmetrics"
	"github.com/ccmkit/ccmkit/routes"
)

// cloudRequests returns ccmkit_cloud_requests_total for capability
// routes as the CCM would serve it (legacyregistry), keyed
// "<operation> <result>".
func cloudRequests(t *testing.T) map[string]float64 {
	t.Helper()
	c, err := cloudmetrics.Read()
	if err != nil {
		t.Fatal(err)
	}
	return c.Of("routes")
}

// requestsSince returns what cloudRequests counted since before.
func requestsSince(t *testing.T, before map[string]float64) map[string]float64 {
	t.Helper()
	return cloudmetrics.Since(cloudRequests(t), before)
}

// opTotals sums counts keyed "<operation> <result>" by operation.
func opTotals(counts map[string]float64) map[string]float64 {
	out := map[string]float64{}
	for k, v := range counts {
		op, _, _ := strings.Cut(k, " ")
		out[op] += v
	}
	return out
}

// TestMetricsCountEveryDriverCall drives a Table of each kind through
// the route controller's calls (a throttled one, an idempotent create and
// delete, a list with an InstanceChecker) and checks that the Table
// recorded each driver call once, by operation and result, with no code
// from the provider: the totals equal the driver's own call counts. The
// test does not run in parallel: the registry is process-wide.
func TestMetricsCountEveryDriverCall(t *testing.T) {
	for _, tc := range []struct {
		kind     string
		throttle string // the driver method throttled once
		want     map[string]float64
		reason   string
	}{
		{
			kind:     "per-route",
			throttle: "CreateRoute",
			want: map[string]float64{
				"CreateRoute throttled": 1, "CreateRoute ok": 2, "CreateRoute error": 1, // ErrAlreadyExists is the cloud's error, turned into success by the Table
				"DeleteRoute ok": 1, "DeleteRoute not-found": 1,
				"ListRoutes ok": 1, "GoneTargets ok": 1,
			},
			reason: "each RouteDriver call once, a throttled create retried, ErrNotFound read as not-found",
		},
		{
			kind:     "whole-table",
			throttle: "ReadTable",
			want: map[string]float64{
				"ReadTable throttled": 1, "ReadTable ok": 6, "WriteTable ok": 3,
				"GoneTargets ok": 1,
			},
			reason: "one read per batch and per list, one write per batch that changes the table, the throttled read retried",
		},
	} {
		t.Run(tc.kind, func(t *testing.T) {
			var checks atomic.Int64
			checker := instanceCheckerFunc(func(context.Context, []types.NodeName) ([]types.NodeName, error) {
				checks.Add(1)
				return nil, nil
			})
			th := newThrottler(time.Millisecond, map[string]int{tc.throttle: 1})
			tbl, _ := throttledTableOf(t, tc.kind, routes.Options{Instances: checker}, th)
			before := cloudRequests(t)
			mustCreate(t, tbl, uidA, route("node-a", "10.244.1.0/24"))
			mustCreate(t, tbl, uidB, route("node-b", "10.244.2.0/24"))
			mustCreate(t, tbl, uidB, route("node-b", "10.244.2.0/24")) // exists already
			listed := mustList(t, tbl)
			for range 2 { // the second finds nothing to delete
				if err := tbl.DeleteRoute(t.Context(), cluster, listed[0]); err != nil {
					t.Fatalf("DeleteRoute(%s): %v", listed[0].Name, err)
				}
			}
			got := requestsSince(t, before)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("ccmkit_cloud_requests_total{capability=\"routes\"} by operation and result (-want +got): %s\n%s", tc.reason, diff)
			}
			driverCalls := map[string]float64{"GoneTargets": float64(checks.Load())}
			for _, op := range []string{"ListRoutes", "CreateRoute", "DeleteRoute", "ReadTable", "WriteTable"} {
				if n := th.count(op); n > 0 {
					driverCalls[op] = float64(n)
				}
			}
			if diff := cmp.Diff(driverCalls, opTotals(got)); diff != "" {
				t.Errorf("recorded calls by operation differ from the driver's own counts (-driver +recorded):\n%s", diff)
			}
		})
	}
}
