package loadbalancer_test

import (
	"testing"
	"time"

	cloudprovider "k8s.io/cloud-provider"

	"github.com/ccmkit/ccmkit/fake"
	"github.com/ccmkit/ccmkit/loadbalancer"
	"github.com/ccmkit/ccmkit/provider"
)

// cacheOver returns a Cache with opts over d, failing t on an error.
func cacheOver(t *testing.T, d loadbalancer.ListDriver, opts loadbalancer.CacheOptions) *loadbalancer.Cache {
	t.Helper()
	c, err := loadbalancer.NewCache(d, opts)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// staleInstances returns the InstancesV2 of a fake cloud whose instance
// cache has TTL ttl: an instances.Adapter over an instances.Cache.
func staleInstances(t *testing.T, ttl time.Duration) cloudprovider.InstancesV2 {
	t.Helper()
	c, err := fake.New(fake.Config{InstanceCacheTTL: provider.Duration{Duration: ttl}}, fake.Options{})
	if err != nil {
		t.Fatal(err)
	}
	i, _ := c.InstancesV2()
	return i
}

// TestMaxStaleness checks the MaxStaleness of a Cache, and of a
// Reconciler over its Driver and Options.Instances.
func TestMaxStaleness(t *testing.T) {
	reconciler := func(d loadbalancer.Driver, nodes cloudprovider.InstancesV2) provider.Staleness {
		r, err := loadbalancer.NewReconciler(d, loadbalancer.Options{Instances: nodes})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	ttl := func(d time.Duration) loadbalancer.CacheOptions { return loadbalancer.CacheOptions{TTL: d} }
	tests := []struct {
		name   string
		reason string
		value  provider.Staleness
		want   time.Duration
	}{
		{name: "default cache", reason: "CacheOptions.TTL's documented default, one minute",
			value: cacheOver(t, newListingDriver(), loadbalancer.CacheOptions{}), want: time.Minute},
		{name: "cache TTL", reason: "the TTL given", value: cacheOver(t, newListingDriver(), ttl(10*time.Second)), want: 10 * time.Second},
		{name: "long ErrorTTL", reason: "a failed List is an error, never a stale answer: ErrorTTL does not count",
			value: cacheOver(t, newListingDriver(), loadbalancer.CacheOptions{TTL: 10 * time.Second, ErrorTTL: time.Hour}), want: 10 * time.Second},
		{name: "pool cache", reason: "the pool list shares the TTL", value: cacheOver(t, newListingPoolDriver(), ttl(30*time.Second)), want: 30 * time.Second},
		{name: "cache over a cache", reason: "a list of a list that is a minute late is a minute and its own TTL late",
			value: cacheOver(t, cacheOver(t, newListingDriver(), loadbalancer.CacheOptions{}), ttl(10*time.Second)), want: time.Minute + 10*time.Second},
		{name: "reconciler over a plain driver", reason: "a Driver without MaxStaleness reads the cloud on every call",
			value: reconciler(newMemDriver(), nil), want: 0},
		{name: "reconciler over a cache", reason: "the Cache's TTL, which its pools share",
			value: reconciler(cacheOver(t, newListingPoolDriver(), ttl(10*time.Second)), nil), want: 10 * time.Second},
		{name: "instances later", reason: "a terminated instance is added as a backend until Options.Instances reports it gone",
			value: reconciler(cacheOver(t, newListingDriver(), ttl(10*time.Second)), staleInstances(t, 2*time.Minute)), want: 2 * time.Minute},
		{name: "cache later", reason: "the longest of the parts, not their sum: each answers its own questions",
			value: reconciler(cacheOver(t, newListingDriver(), ttl(3*time.Minute)), staleInstances(t, 2*time.Minute)), want: 3 * time.Minute},
		{name: "fresh instances", reason: "an InstancesV2 without MaxStaleness counts 0",
			value: reconciler(newMemDriver(), &instanceBook{}), want: 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.value.MaxStaleness(); got != tt.want {
				t.Errorf("MaxStaleness() = %v, want %v (%s)", got, tt.want, tt.reason)
			}
		})
	}
}

// TestCacheMaxStalenessBoundsTheLag checks MaxStaleness against what the
// Cache does: a load balancer deleted behind its back is still reported
// until MaxStaleness after the List, and gone from then on.
func TestCacheMaxStalenessBoundsTheLag(t *testing.T) {
	f, svc, lb := withLoadBalancer(t, loadbalancer.CacheOptions{TTL: 20 * time.Second})
	lag := f.r.MaxStaleness()
	if lag != 20*time.Second {
		t.Fatalf("MaxStaleness() = %v, want the Cache's TTL, 20s", lag)
	}
	f.d.mu.Lock()
	delete(f.d.lbs, lb.ID) // the cloud's console
	f.d.mu.Unlock()
	exists := func(want bool, why string) {
		t.Helper()
		if _, got, err := f.r.GetLoadBalancer(t.Context(), "c1", svc); got != want || err != nil {
			t.Errorf("GetLoadBalancer exists = (%v, %v), want (%v, nil) (%s)", got, err, want, why)
		}
	}
	f.clock.Advance(lag - time.Nanosecond)
	exists(true, "the deletion is not seen before the list is MaxStaleness old")
	f.clock.Advance(time.Nanosecond)
	exists(false, "the deletion shows at MaxStaleness")
}
