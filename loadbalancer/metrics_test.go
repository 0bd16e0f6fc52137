package loadbalancer_test

import (
	"context"
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
	wantTimed := map[string]uint64{"Find": uint64(finds), "Apply": uint64(applies), "Delete": uint64(deletes)} //nolint:gosec // G115: call counts, never negative
	if diff := cmp.Diff(wantTimed, gotTimed); diff != "" {
		t.Errorf("ccmkit_cloud_request_duration_seconds samples added (-want +got):\n%s", diff)
	}
	if finds == 0 || applies < 3 || deletes != 2 {
		t.Errorf("the Driver saw %d finds, %d applies, %d deletes; want some of each (create, throttled and retried add, failed and retried delete)", finds, applies, deletes)
	}
}

// forwarding is a provider's Driver in front of a Cache: it forwards every
// call, as a provider's own wrapper would. It embeds the *Cache, which is
// how a wrapper tells the Reconciler that the Cache below records the
// cloud calls (a wrapper holding the Cache in a field is metered too: see
// the package doc, Metrics).
type forwarding struct{ *loadbalancer.Cache }

func (f forwarding) Find(ctx context.Context, q loadbalancer.Query) ([]*loadbalancer.LoadBalancer, error) {
	return f.Cache.Find(ctx, q)
}

func (f forwarding) Apply(ctx context.Context, a loadbalancer.Action) (*loadbalancer.LoadBalancer, error) {
	return f.Cache.Apply(ctx, a)
}

func (f forwarding) Delete(ctx context.Context, lb *loadbalancer.LoadBalancer) error {
	return f.Cache.Delete(ctx, lb)
}

// cacheRecorded returns what legacyregistry holds for the loadbalancer
// capability, keyed "<operation> <result>", and for the loadbalancers
// cache, keyed "cache <result>".
func cacheRecorded(t *testing.T) map[string]float64 {
	t.Helper()
	c, err := cloudmetrics.Read()
	if err != nil {
		t.Fatal(err)
	}
	out := c.Of("loadbalancer")
	for k, v := range c.Cache {
		if result, ok := strings.CutPrefix(k, "loadbalancers/"); ok {
			out["cache "+result] += v
		}
	}
	return out
}

// TestCacheMetrics checks what a Reconciler over a Cache records, with
// the Cache given to it directly and behind a provider's Driver that
// embeds it: a look-up the Cache answers from its list is a
// cache hit and no cloud call; a miss is a cache miss and exactly one
// direct Find; a List is one cloud call; and the cloud calls recorded by
// operation are the Driver's own counts (none is counted twice). The test
// does not run in parallel: the registry is process-wide.
func TestCacheMetrics(t *testing.T) {
	for _, wrap := range []struct {
		name string
		wrap func(*loadbalancer.Cache) loadbalancer.Driver
	}{
		{name: "reconciler over the cache", wrap: func(c *loadbalancer.Cache) loadbalancer.Driver { return c }},
		{name: "provider driver in front of the cache", wrap: func(c *loadbalancer.Cache) loadbalancer.Driver { return forwarding{c} }},
	} {
		t.Run(wrap.name, func(t *testing.T) {
			f := newCacheFixture(t, loadbalancer.CacheOptions{TTL: time.Minute})
			r := newReconcilerOver(t, wrap.wrap(f.cache), loadbalancer.Options{})
			svc, none := lbService(), numberedService(1)
			steps := []struct {
				name   string
				reason string
				do     func() error
				want   map[string]float64
			}{
				{
					name: "create", reason: "one List, made by the look-up by tags, whose miss it answers (a cache miss: not from a list it had), the name step a trusted miss (a hit), the create",
					do:   func() error { _, err := r.EnsureLoadBalancer(t.Context(), "c1", svc, threeNodes()); return err },
					want: map[string]float64{"List ok": 1, "Apply ok": 1, "cache miss": 1, "cache hit": 1},
				},
				{
					name: "cached find", reason: "answered from the list: a hit, no cloud call",
					do:   func() error { _, _, err := r.GetLoadBalancer(t.Context(), "c1", svc); return err },
					want: map[string]float64{"cache hit": 1},
				},
				{
					name: "miss", reason: "a Service without a load balancer: the look-up by tags a miss and exactly one direct Find, the one by name a trusted miss",
					do:   func() error { _, _, err := r.GetLoadBalancer(t.Context(), "c1", none); return err },
					want: map[string]float64{"Find ok": 1, "cache miss": 1, "cache hit": 1},
				},
				{
					name: "expired", reason: "after the TTL: one List, then the answer from it",
					do: func() error {
						f.clock.Advance(time.Minute)
						_, _, err := r.GetLoadBalancer(t.Context(), "c1", svc)
						return err
					},
					want: map[string]float64{"List ok": 1, "cache miss": 1},
				},
			}
			for _, step := range steps {
				before, calls := cacheRecorded(t), f.d.calls()
				if err := step.do(); err != nil {
					t.Fatalf("%s: %v", step.name, err)
				}
				got := cloudmetrics.Since(cacheRecorded(t), before)
				if diff := cmp.Diff(step.want, got); diff != "" {
					t.Errorf("%s: recorded (-want +got): %s\n%s", step.name, step.reason, diff)
				}
				after := f.d.calls()
				driver := map[string]float64{"List ok": float64(after.List - calls.List), "Find ok": float64(after.Find - calls.Find), "Apply ok": float64(after.Apply - calls.Apply)}
				for k, v := range driver {
					if v != got[k] {
						t.Errorf("%s: recorded %s %v, the driver counted %v", step.name, k, got[k], v)
					}
				}
			}
		})
	}
}
