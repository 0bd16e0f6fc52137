package instances_test

import (
	"errors"
	"testing"
	"time"

	"github.com/ccmkit/ccmkit/instances"
	"github.com/ccmkit/ccmkit/provider"
)

// cacheOver returns a Cache with opts over d, or over a memCloud when d
// is nil.
func cacheOver(t *testing.T, d instances.ListDriver, opts instances.CacheOptions) *instances.Cache {
	t.Helper()
	return newCacheFixture(t, d, newMemCloud(), opts).cache
}

// TestMaxStaleness checks the MaxStaleness of a Cache, and of an Adapter
// over its Driver.
func TestMaxStaleness(t *testing.T) {
	adapter := func(d instances.Driver) provider.Staleness {
		a, err := instances.NewAdapter(d, acme, instances.Options{})
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	tests := []struct {
		name   string
		reason string
		value  provider.Staleness
		want   time.Duration
	}{
		{name: "default cache", reason: "CacheOptions.TTL's documented default, one minute",
			value: cacheOver(t, nil, instances.CacheOptions{}), want: time.Minute},
		{name: "cache TTL", reason: "the TTL given",
			value: cacheOver(t, nil, instances.CacheOptions{TTL: 10 * time.Second}), want: 10 * time.Second},
		{name: "long ErrorTTL", reason: "a failed List is an error, never a stale answer: ErrorTTL does not count",
			value: cacheOver(t, nil, instances.CacheOptions{TTL: 10 * time.Second, ErrorTTL: time.Hour}), want: 10 * time.Second},
		{name: "no ErrorTTL", reason: "nor does its absence",
			value: cacheOver(t, nil, instances.CacheOptions{TTL: 10 * time.Second, ErrorTTL: -1}), want: 10 * time.Second},
		{name: "cache over a cache", reason: "a list of a list that is a minute late is a minute and its own TTL late",
			value: cacheOver(t, cacheOver(t, nil, instances.CacheOptions{}), instances.CacheOptions{TTL: 10 * time.Second}), want: time.Minute + 10*time.Second},
		{name: "adapter over a plain driver", reason: "a Driver without MaxStaleness reads the cloud on every call",
			value: adapter(newMemCloud()), want: 0},
		{name: "adapter over a cache", reason: "the Cache's TTL",
			value: adapter(cacheOver(t, nil, instances.CacheOptions{TTL: 10 * time.Second})), want: 10 * time.Second},
		{name: "adapter over a driver embedding a cache", reason: "a provider's Driver that embeds a Cache reports through it",
			value: adapter(struct{ *instances.Cache }{cacheOver(t, nil, instances.CacheOptions{TTL: 2 * time.Minute})}), want: 2 * time.Minute},
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
// Cache does: an instance stopped behind its back is reported running
// until MaxStaleness after the List, and stopped from then on; and a List
// that fails after that is an error, never the old answer, whatever
// ErrorTTL is.
func TestCacheMaxStalenessBoundsTheLag(t *testing.T) {
	cloud := numberedCloud(1)
	f := newCacheFixture(t, nil, cloud, instances.CacheOptions{ErrorTTL: time.Hour})
	node := numberedNode(0)
	shutdown := func(want bool, why string) {
		t.Helper()
		got, err := f.adapter.InstanceShutdown(t.Context(), node)
		if got != want || err != nil {
			t.Errorf("InstanceShutdown = (%v, %v), want (%v, nil) (%s)", got, err, want, why)
		}
	}
	lag := f.adapter.MaxStaleness()
	if lag != time.Minute {
		t.Fatalf("MaxStaleness() = %v, want the default TTL, 1m0s", lag)
	}
	shutdown(false, "running")
	cloud.put(withState(numbered(0), instances.StateStopped))
	f.clock.Advance(lag - time.Nanosecond)
	shutdown(false, "the stop is not seen before the list is MaxStaleness old")
	f.clock.Advance(time.Nanosecond)
	shutdown(true, "the stop shows at MaxStaleness")

	cloud.setListErr(errors.New("HTTP 503"))
	f.clock.Advance(lag)
	if got, err := f.adapter.InstanceShutdown(t.Context(), node); err == nil {
		t.Errorf("InstanceShutdown with a failing List = (%v, nil), want the List error, not the list of MaxStaleness ago", got)
	}
}
