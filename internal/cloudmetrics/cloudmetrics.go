// Package cloudmetrics is the one place ccmkit's blocks record their cloud
// API calls and cache look-ups as metrics, through
// k8s.io/component-base/metrics and its legacyregistry: the registry a
// cloud-controller-manager serves on /metrics, so a provider composed from
// ccmkit's blocks exports them with no code of its own.
//
// The metrics, all ALPHA:
//
//	ccmkit_cloud_requests_total{capability, operation, result}
//	ccmkit_cloud_request_duration_seconds{capability, operation}
//	ccmkit_cache_lookups_total{cache, result}
//	ccmkit_cloud_inconsistent_answers_total{capability, operation}
//	ccmkit_loadbalancer_coalesced_updates_total{result}
//
// capability is "loadbalancer", "routes" or "instances"; operation the
// Driver method ("Find", "Apply", "ReadTable", "GetByID", …); result one
// of the Result values; a cache look-up's result is "hit" or "miss"; a
// coalesced backend change's one of the CoalesceResult values. An
// inconsistent answer (Inconsistent) is a Driver call that succeeded,
// counted "ok" in ccmkit_cloud_requests_total, whose answer a cache found
// inconsistent (an ID listed twice, a name held by two live instances).
// Each Driver call is metered once, by Meter or Metered, where a block
// hands it to a Driver that is not one of ccmkit's caches (see
// SelfMetered); a call answered without the cloud wraps ErrNotCalled.
// Everything here is safe for concurrent use.
package cloudmetrics

import (
	"errors"
	"sync"
	"time"

	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"

	"github.com/ccmkit/ccmkit/internal/throttle"
)

// Result classifies the outcome of one cloud call.
type Result string

// The results of a cloud call.
const (
	// OK is a call that succeeded.
	OK Result = "ok"
	// Throttled is a call the cloud asked to retry later (an error
	// wrapping an *api.RetryError, the convention of internal/throttle),
	// whatever else it wraps.
	Throttled Result = "throttled"
	// NotFound is a definite "does not exist" (the capability's
	// ErrNotFound sentinel).
	NotFound Result = "not-found"
	// Error is any other failure.
	Error Result = "error"
)

// ResultOf classifies err: nil is OK, a throttle is Throttled (before
// anything else, as every block reads it), an error wrapping one of
// notFound is NotFound, anything else Error.
func ResultOf(err error, notFound ...error) Result {
	if err == nil {
		return OK
	}
	if _, throttled := throttle.RetryAfter(err); throttled {
		return Throttled
	}
	for _, nf := range notFound {
		if nf != nil && errors.Is(err, nf) {
			return NotFound
		}
	}
	return Error
}

var (
	requests = metrics.NewCounterVec(&metrics.CounterOpts{
		Namespace:      "ccmkit",
		Subsystem:      "cloud",
		Name:           "requests_total",
		Help:           "Cloud API calls made by ccmkit's blocks through the provider's Drivers, by capability, operation and result (ok, error, throttled, not-found).",
		StabilityLevel: metrics.ALPHA,
	}, []string{"capability", "operation", "result"})
	latency = metrics.NewHistogramVec(&metrics.HistogramOpts{
		Namespace:      "ccmkit",
		Subsystem:      "cloud",
		Name:           "request_duration_seconds",
		Help:           "Latency of the cloud API calls made through the provider's Drivers, by capability and operation.",
		Buckets:        []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30},
		StabilityLevel: metrics.ALPHA,
	}, []string{"capability", "operation"})
	cacheLookups = metrics.NewCounterVec(&metrics.CounterOpts{
		Namespace:      "ccmkit",
		Name:           "cache_lookups_total",
		Help:           "Look-ups answered by a ccmkit cache (hit) or that needed a cloud call (miss), by cache.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"cache", "result"})
	inconsistent = metrics.NewCounterVec(&metrics.CounterOpts{
		Namespace:      "ccmkit",
		Subsystem:      "cloud",
		Name:           "inconsistent_answers_total",
		Help:           "Driver answers a ccmkit cache found inconsistent (an ID listed twice, a name held by two live instances), by capability and operation.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"capability", "operation"})

	register sync.Once
)

// registerOnce registers the metrics with legacyregistry the first time a
// block records anything, so that importing ccmkit registers nothing.
func registerOnce() {
	register.Do(func() {
		legacyregistry.MustRegister(requests, latency, cacheLookups, inconsistent, coalesced)
	})
}

// Observe records one cloud call of capability's Driver method operation
// that took took and ended with r.
func Observe(capability, operation string, took time.Duration, r Result) {
	registerOnce()
	requests.WithLabelValues(capability, operation, string(r)).Inc()
	latency.WithLabelValues(capability, operation).Observe(took.Seconds())
}

// Call runs f, one call of capability's Driver method operation, and
// records it: its duration and ResultOf(its error, notFound...). It
// returns f's error unchanged.
func Call(capability, operation string, f func() error, notFound ...error) error {
	start := time.Now()
	err := f()
	Observe(capability, operation, time.Since(start), ResultOf(err, notFound...))
	return err
}

// CacheLookup records a look-up of cache that was a hit (answered from
// the cache) or a miss (it needed a cloud call).
func CacheLookup(cache string, hit bool) {
	registerOnce()
	result := "miss"
	if hit {
		result = "hit"
	}
	cacheLookups.WithLabelValues(cache, result).Inc()
}

// Inconsistent records an answer of capability's Driver method operation
// that a cache found inconsistent: a call already recorded (Meter) as
// "ok", whose answer the cache refused in whole or in part (see
// listcache.ErrInconsistent).
func Inconsistent(capability, operation string) {
	registerOnce()
	inconsistent.WithLabelValues(capability, operation).Inc()
}
