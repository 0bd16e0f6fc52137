package instances_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	"k8s.io/cloud-provider/api"

	"github.com/ccmkit/ccmkit/instances"
	"github.com/ccmkit/ccmkit/internal/cloudmetrics"
	"github.com/ccmkit/ccmkit/provider"
)

// recorded returns, as the CCM would serve them (legacyregistry), the
// instances capability's ccmkit_cloud_requests_total keyed
// "<operation> <result>" and the instances cache's
// ccmkit_cache_lookups_total keyed "cache <result>".
func recorded(t *testing.T) map[string]float64 {
	t.Helper()
	c, err := cloudmetrics.Read()
	if err != nil {
		t.Fatal(err)
	}
	out := c.Of("instances")
	for k, v := range c.Cache {
		if result, ok := strings.CutPrefix(k, "instances/"); ok {
			out["cache "+result] += v
		}
	}
	return out
}

// recordedSince returns what recorded counted since before.
func recordedSince(t *testing.T, before map[string]float64) map[string]float64 {
	t.Helper()
	return cloudmetrics.Since(recorded(t), before)
}

// forwarding is a provider's Driver in front of a Cache (as the fake's
// is with a state file): it forwards every look-up. It embeds the *Cache,
// which is how a wrapper tells the Adapter that the Cache below records
// the cloud calls (a wrapper holding the Cache in a field is metered too:
// see the package doc, Metrics).
type forwarding struct{ *instances.Cache }

func (f forwarding) GetByID(ctx context.Context, id provider.ProviderID) (instances.Instance, error) {
	return f.Cache.GetByID(ctx, id)
}

func (f forwarding) GetByName(ctx context.Context, name string) (instances.Instance, error) {
	return f.Cache.GetByName(ctx, name)
}

// TestMetricsCountEveryDriverCall looks nodes up through an Adapter over
// a Driver, over a Cache, and over a provider's Driver in front of a
// Cache, and checks what was recorded, with no code from the provider:
// each cloud call once by operation and result (the totals equal the
// driver's own counts, so a Cache's answer is never counted as a cloud
// call), and each Cache look-up as a hit or a miss. The test does not
// run in parallel: the registry is process-wide.
func TestMetricsCountEveryDriverCall(t *testing.T) {
	for _, tc := range []struct {
		name   string
		wrap   func(c *instances.Cache) instances.Driver // nil: the Adapter calls the memCloud directly
		want   map[string]float64
		reason string
	}{
		{
			name: "adapter over a driver",
			want: map[string]float64{
				"GetByID ok": 2, "GetByName ok": 1, "GetByID not-found": 1, "GetByID throttled": 1,
			},
			reason: "every look-up is a cloud call, ErrNotFound read as not-found, a RetryError as throttled",
		},
		{
			name: "adapter over a cache",
			wrap: func(c *instances.Cache) instances.Driver { return c },
			want: map[string]float64{
				"List ok": 2, "GetByID not-found": 1,
				"cache miss": 3, "cache hit": 2,
			},
			reason: "one List per TTL; a look-up that listed or needed a direct call is a miss; the throttled look-up is answered from the list",
		},
		{
			name: "provider driver in front of a cache",
			wrap: func(c *instances.Cache) instances.Driver { return forwarding{c} },
			want: map[string]float64{
				"List ok": 2, "GetByID not-found": 1,
				"cache miss": 3, "cache hit": 2,
			},
			reason: "the Cache's answers are not counted again by the Adapter above the provider's Driver",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cloud := numberedCloud(2)
			f := newCacheFixture(t, nil, cloud, instances.CacheOptions{TTL: time.Minute})
			a := mustAdapter(t, cloud)
			if tc.wrap != nil {
				a = mustAdapter(t, tc.wrap(f.cache))
			}
			before := recorded(t)
			lookUp(t, a, numberedNode(0))                                                            // List (miss), or GetByID
			lookUp(t, a, numberedNode(1))                                                            // by name: hit, or GetByName
			lookUp(t, a, nodeWithProviderID("node-9", "acme://i-9"))                                 // not listed: GetByID not-found
			cloud.setGetErr(fmt.Errorf("HTTP 429: %w", api.NewRetryError("slow down", time.Second))) // only a direct look-up sees it
			lookUp(t, a, numberedNode(0))                                                            // hit, or GetByID throttled
			cloud.setGetErr(nil)
			f.clock.Advance(time.Minute)
			lookUp(t, a, numberedNode(0)) // TTL over: List (miss), or GetByID
			got := recordedSince(t, before)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("recorded (-want +got): %s\n%s", tc.reason, diff)
			}
			c := cloud.calls()
			driver := map[string]float64{"List": float64(c.List), "GetByID": float64(c.GetByID), "GetByName": float64(c.GetByName)}
			calls := map[string]float64{"List": 0, "GetByID": 0, "GetByName": 0}
			for k, v := range got {
				if op, _, _ := strings.Cut(k, " "); op != "cache" {
					calls[op] += v
				}
			}
			if diff := cmp.Diff(driver, calls); diff != "" {
				t.Errorf("recorded cloud calls by operation differ from the driver's own counts (-driver +recorded):\n%s", diff)
			}
		})
	}
}

func mustAdapter(t *testing.T, d instances.Driver) *instances.Adapter {
	t.Helper()
	a, err := instances.NewAdapter(d, acme, instances.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// lookUp asks a whether node's instance exists; what it answers is
// checked by the Adapter's own tests, what it costs by the caller.
func lookUp(t *testing.T, a *instances.Adapter, node *v1.Node) {
	t.Helper()
	_, _ = a.InstanceExists(t.Context(), node)
}
