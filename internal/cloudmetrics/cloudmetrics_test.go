package cloudmetrics

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"k8s.io/cloud-provider/api"
	"k8s.io/component-base/metrics/legacyregistry"
	"k8s.io/component-base/metrics/testutil"
)

func TestResultOf(t *testing.T) {
	notFound := errors.New("no such thing")
	for _, tc := range []struct {
		name   string
		err    error
		want   Result
		reason string
	}{
		{name: "nil", err: nil, want: OK, reason: "success"},
		{name: "plain", err: errors.New("boom"), want: Error, reason: "any other failure"},
		{name: "not found", err: fmt.Errorf("lb x: %w", notFound), want: NotFound, reason: "wraps the sentinel"},
		{name: "throttled", err: fmt.Errorf("429: %w", api.NewRetryError("slow down", time.Second)), want: Throttled, reason: "a RetryError"},
		{name: "throttled not-found", err: errors.Join(notFound, api.NewRetryError("slow down", time.Second)), want: Throttled, reason: "a throttle is never read as not-found"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := ResultOf(tc.err, notFound); got != tc.want {
				t.Errorf("ResultOf(%v) = %q, want %q: %s", tc.err, got, tc.want, tc.reason)
			}
		})
	}
}

// TestRegistered checks that a recorded call and a cache look-up appear
// in legacyregistry, the registry the CCM serves on /metrics.
func TestRegistered(t *testing.T) {
	resetSeries(requests, latency, cacheLookups)
	if err := Call("routes", "ReadTable", func() error { return nil }); err != nil {
		t.Fatal(err)
	}
	boom := errors.New("boom")
	if err := Call("routes", "WriteTable", func() error { return boom }); err != boom { //nolint:errorlint // f's error must come back unchanged, unwrapped
		t.Fatalf("Call returned %v, want f's error unchanged", err)
	}
	CacheLookup("instances", true)
	want := `
# HELP ccmkit_cloud_requests_total [ALPHA] Cloud API calls made by ccmkit's blocks through the provider's Drivers, by capability, operation and result (ok, error, throttled, not-found).
# TYPE ccmkit_cloud_requests_total counter
ccmkit_cloud_requests_total{capability="routes",operation="ReadTable",result="ok"} 1
ccmkit_cloud_requests_total{capability="routes",operation="WriteTable",result="error"} 1
# HELP ccmkit_cache_lookups_total [ALPHA] Look-ups answered by a ccmkit cache (hit) or that needed a cloud call (miss), by cache.
# TYPE ccmkit_cache_lookups_total counter
ccmkit_cache_lookups_total{cache="instances",result="hit"} 1
`
	if err := testutil.GatherAndCompare(legacyregistry.DefaultGatherer, strings.NewReader(want), "ccmkit_cloud_requests_total", "ccmkit_cache_lookups_total"); err != nil {
		t.Error(err)
	}
	c, err := Read()
	if err != nil {
		t.Fatal(err)
	}
	if c.Requests["routes/ReadTable/ok"] != 1 || c.Requests["routes/WriteTable/error"] != 1 || c.Timed["routes/WriteTable"] != 1 || c.Cache["instances/hit"] != 1 {
		t.Errorf("Read = %+v, want what was recorded: one ok ReadTable, one failed WriteTable (one latency sample), one cache hit", c)
	}
}

// TestInconsistentRegistered checks that an inconsistent answer appears
// in legacyregistry under its own name, and in Read.
func TestInconsistentRegistered(t *testing.T) {
	resetSeries(inconsistent)
	before, err := Read()
	if err != nil {
		t.Fatal(err)
	}
	Inconsistent("loadbalancer", "ListPools")
	want := `
# HELP ccmkit_cloud_inconsistent_answers_total [ALPHA] Driver answers a ccmkit cache found inconsistent (an ID listed twice, a name held by two live instances), by capability and operation.
# TYPE ccmkit_cloud_inconsistent_answers_total counter
ccmkit_cloud_inconsistent_answers_total{capability="loadbalancer",operation="ListPools"} 1
`
	if err := testutil.GatherAndCompare(legacyregistry.DefaultGatherer, strings.NewReader(want), "ccmkit_cloud_inconsistent_answers_total"); err != nil {
		t.Error(err)
	}
	after, err := Read()
	if err != nil {
		t.Fatal(err)
	}
	if got := Since(after.Inconsistent, before.Inconsistent); got["loadbalancer/ListPools"] != 1 || len(got) != 1 {
		t.Errorf("Read().Inconsistent grew by %v, want loadbalancer/ListPools by 1", got)
	}
}

// resetSeries drops every series of vecs, process-global vectors of
// legacyregistry, so that a test comparing what the registry serves with
// exact values sees only what it recorded itself, however often it runs
// in one process (go test -count). A vector not registered yet has none.
func resetSeries(vecs ...interface{ Reset() }) {
	for _, v := range vecs {
		v.Reset()
	}
}
