package routes_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	cloudprovider "k8s.io/cloud-provider"
	"k8s.io/cloud-provider/api"

	"github.com/ccmkit/ccmkit/routes"
)

// throttledTableOf returns a Table of the given kind over a throttled
// in-memory driver seeded with seed, and a function listing what it stores.
func throttledTableOf(t *testing.T, kind string, c routes.Options, th *throttler, seed ...routes.Entry) (*routes.Table, func() []routes.Entry) {
	t.Helper()
	var (
		tbl    *routes.Table
		stored func() []routes.Entry
		err    error
	)
	switch kind {
	case "per-route":
		d := &memRoutes{entries: seed}
		d.throttle = th
		tbl, err = routes.NewTable(d, c)
		stored = d.snapshot
	case "whole-table":
		d := &memTable{entries: seed}
		d.throttle = th
		tbl, err = routes.NewWholeTable(d, c)
		stored = d.snapshot
	default:
		t.Fatalf("unknown driver kind %q", kind)
	}
	if err != nil {
		t.Fatal(err)
	}
	return tbl, stored
}

// seeded is a route of this cluster on node-a, stored before the test.
func seeded(t *testing.T) routes.Entry {
	n, err := routes.NewNamer(routes.NamerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return routes.Entry{Name: n.Name(uidA, "10.244.1.0/24"), Cluster: cluster, DestinationCIDR: "10.244.1.0/24", TargetNode: "node-a"}
}

// action is one Table call of the route controller and what the driver
// stores after it succeeded.
type action struct {
	name string
	call func(ctx context.Context, tbl *routes.Table, seed routes.Entry) error
	want func(seed routes.Entry) int // routes stored afterwards
}

var actions = []action{
	{"ListRoutes", func(ctx context.Context, tbl *routes.Table, seed routes.Entry) error {
		got, err := tbl.ListRoutes(ctx, cluster)
		if err == nil && (len(got) != 1 || got[0].Name != seed.Name) {
			return fmt.Errorf("listed %+v, want the seeded route %q", got, seed.Name)
		}
		return err
	}, func(routes.Entry) int { return 1 }},
	{"CreateRoute", func(ctx context.Context, tbl *routes.Table, _ routes.Entry) error {
		return tbl.CreateRoute(ctx, cluster, uidB, route("node-b", "10.244.2.0/24"))
	}, func(routes.Entry) int { return 2 }},
	{"DeleteRoute", func(ctx context.Context, tbl *routes.Table, seed routes.Entry) error {
		return tbl.DeleteRoute(ctx, cluster, &cloudprovider.Route{Name: seed.Name, TargetNode: seed.TargetNode, DestinationCIDR: seed.DestinationCIDR})
	}, func(routes.Entry) int { return 0 }},
	{"DeleteRoute without a name", func(ctx context.Context, tbl *routes.Table, seed routes.Entry) error {
		return tbl.DeleteRoute(ctx, cluster, &cloudprovider.Route{TargetNode: seed.TargetNode, DestinationCIDR: seed.DestinationCIDR})
	}, func(routes.Entry) int { return 0 }},
}

func actionNamed(t *testing.T, name string) action {
	for _, a := range actions {
		if a.name == name {
			return a
		}
	}
	t.Fatalf("no action %q", name)
	return action{}
}

// retryAfterOf returns the delay of the first *api.RetryError in err's
// chain, or -1 when there is none.
func retryAfterOf(err error) time.Duration {
	var re *api.RetryError
	if !errors.As(err, &re) {
		return -1
	}
	return re.RetryAfter()
}

// TestThrottledDriverCallsAreRetried checks that a throttled driver call
// does not fail the route controller's call: the Table waits the delay and
// calls again, and the call succeeds with the table right.
func TestThrottledDriverCallsAreRetried(t *testing.T) {
	tests := []struct {
		name     string
		reason   string
		kind     string
		action   string
		throttle map[string]int
		calls    map[string]int // driver calls, throttled ones included
	}{
		{
			name: "whole-table list", reason: "a throttled read is read again",
			kind: "whole-table", action: "ListRoutes", throttle: map[string]int{"ReadTable": 2},
			calls: map[string]int{"ReadTable": 3},
		},
		{
			name: "whole-table create, read throttled", reason: "the batch is retried from its read",
			kind: "whole-table", action: "CreateRoute", throttle: map[string]int{"ReadTable": 2},
			calls: map[string]int{"ReadTable": 3, "WriteTable": 1},
		},
		{
			name: "whole-table create, write throttled", reason: "the batch is reread and rewritten",
			kind: "whole-table", action: "CreateRoute", throttle: map[string]int{"WriteTable": 2},
			calls: map[string]int{"ReadTable": 3, "WriteTable": 3},
		},
		{
			name: "whole-table delete, write throttled", reason: "deletes are batched the same way",
			kind: "whole-table", action: "DeleteRoute", throttle: map[string]int{"WriteTable": 1},
			calls: map[string]int{"ReadTable": 2, "WriteTable": 2},
		},
		{
			name: "per-route list", reason: "a throttled list is listed again",
			kind: "per-route", action: "ListRoutes", throttle: map[string]int{"ListRoutes": 2},
			calls: map[string]int{"ListRoutes": 3},
		},
		{
			name: "per-route create", reason: "a throttled create is created again",
			kind: "per-route", action: "CreateRoute", throttle: map[string]int{"CreateRoute": 2},
			calls: map[string]int{"CreateRoute": 3},
		},
		{
			name: "per-route delete", reason: "a throttled delete is deleted again",
			kind: "per-route", action: "DeleteRoute", throttle: map[string]int{"DeleteRoute": 2},
			calls: map[string]int{"DeleteRoute": 3},
		},
		{
			name: "per-route delete by listing", reason: "a route without a name is found by a list that may be throttled too, within one budget",
			kind: "per-route", action: "DeleteRoute without a name", throttle: map[string]int{"ListRoutes": 1, "DeleteRoute": 1},
			calls: map[string]int{"ListRoutes": 2, "DeleteRoute": 2},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var throttled uint64
			for _, n := range tt.throttle {
				throttled += uint64(n) //nolint:gosec // G115: throttle counts of the table, small and positive
			}
			th := newThrottler(time.Millisecond, tt.throttle)
			seed := seeded(t)
			tbl, stored := throttledTableOf(t, tt.kind, routes.Options{MaxThrottleWait: time.Minute}, th, seed)
			a := actionNamed(t, tt.action)
			if err := a.call(t.Context(), tbl, seed); err != nil {
				t.Fatalf("%s: %v, want success after the throttles (%s)", a.name, err, tt.reason)
			}
			if got, want := len(stored()), a.want(seed); got != want {
				t.Errorf("the driver stores %d routes after %s, want %d", got, a.name, want)
			}
			if diff := cmp.Diff(tt.calls, th.calls); diff != "" {
				t.Errorf("driver calls (-want +got):\n%s\n(%s)", diff, tt.reason)
			}
			if got := tbl.Stats().Throttled; got != throttled {
				t.Errorf("Stats.Throttled = %d, want %d", got, throttled)
			}
		})
	}
}

// TestThrottleBudget checks the bound: a call gives up, with the
// RetryError still findable, once the delays it waited for would exceed
// Options.MaxThrottleWait, or at once when the delay is unusable or past the
// caller's deadline; it never sleeps for such a delay.
func TestThrottleBudget(t *testing.T) {
	type row struct {
		name     string
		reason   string
		max      time.Duration
		delay    time.Duration
		deadline time.Duration // 0: none
		tries    int           // driver calls of the throttled op
		mention  string
	}
	rows := []row{
		{
			name: "budget used up", reason: "1ms delays within a 3ms budget: three retries, then the error",
			max: 3 * time.Millisecond, delay: time.Millisecond, tries: 4, mention: "MaxThrottleWait",
		},
		{
			name: "delay longer than the budget", reason: "an hour's delay under the one-minute default is not waited for at all",
			delay: time.Hour, tries: 1, mention: "MaxThrottleWait 1m0s",
		},
		{
			name: "waiting disabled", reason: "a negative MaxThrottleWait fails throttled calls at once",
			max: -1, delay: time.Millisecond, tries: 1, mention: "MaxThrottleWait 0s",
		},
		{
			name: "zero delay", reason: "a RetryAfter of 0 gives nothing to wait for: retrying at once would busy-loop",
			max: time.Hour, delay: 0, tries: 1, mention: "expected a positive delay",
		},
		{
			name: "past the deadline", reason: "the caller's context would end before the delay has passed",
			max: 3 * time.Hour, delay: time.Hour, deadline: time.Minute, tries: 1, mention: "deadline",
		},
	}
	ops := []struct{ kind, action, op string }{
		{"whole-table", "ListRoutes", "ReadTable"},
		{"whole-table", "CreateRoute", "ReadTable"},
		{"whole-table", "DeleteRoute", "WriteTable"},
		{"per-route", "ListRoutes", "ListRoutes"},
		{"per-route", "CreateRoute", "CreateRoute"},
		{"per-route", "DeleteRoute", "DeleteRoute"},
	}
	for _, tt := range rows {
		for _, o := range ops {
			t.Run(tt.name+"/"+o.kind+"/"+o.action, func(t *testing.T) {
				th := newThrottler(tt.delay, map[string]int{o.op: -1})
				seed := seeded(t)
				tbl, stored := throttledTableOf(t, o.kind, routes.Options{MaxThrottleWait: tt.max}, th, seed)
				ctx := t.Context()
				if tt.deadline > 0 {
					var cancel context.CancelFunc
					ctx, cancel = context.WithTimeout(ctx, tt.deadline)
					defer cancel()
				}
				err := actionNamed(t, o.action).call(ctx, tbl, seed)
				if got := retryAfterOf(err); got != tt.delay {
					t.Errorf("error %v: RetryAfter %v, want the driver's RetryError (%v) wrapped (%s)", err, got, tt.delay, tt.reason)
				}
				if err != nil && !strings.Contains(err.Error(), tt.mention) {
					t.Errorf("error %q does not say why the Table gave up (%q)", err, tt.mention)
				}
				if got := th.count(o.op); got != tt.tries {
					t.Errorf("%s called %d times, want %d (%s)", o.op, got, tt.tries, tt.reason)
				}
				if diff := cmp.Diff([]routes.Entry{seed}, stored()); diff != "" {
					t.Errorf("the table changed although every call was throttled (-want +got):\n%s", diff)
				}
			})
		}
	}
}

// TestThrottleWaitEndsWithContext checks that a call waiting out a long
// throttle returns as soon as its context ends, for either driver kind,
// with an error that says so.
func TestThrottleWaitEndsWithContext(t *testing.T) {
	for _, kind := range []string{"per-route", "whole-table"} {
		for _, a := range actions {
			t.Run(kind+"/"+a.name, func(t *testing.T) {
				th := newThrottler(time.Hour, map[string]int{"ReadTable": -1, "WriteTable": -1, "ListRoutes": -1, "CreateRoute": -1, "DeleteRoute": -1})
				throttled := make(chan struct{})
				var once sync.Once
				th.onThrot = func(string) { once.Do(func() { close(throttled) }) }
				tbl, _ := throttledTableOf(t, kind, routes.Options{MaxThrottleWait: 2 * time.Hour}, th, seeded(t))
				ctx, cancel := context.WithCancel(t.Context())
				done := make(chan error, 1)
				go func() { done <- a.call(ctx, tbl, seeded(t)) }()
				<-throttled
				cancel() // the call now waits for an hour, or is about to
				err := <-done
				if !errors.Is(err, context.Canceled) {
					t.Errorf("%s after its context ended while throttled: %v, want context.Canceled", a.name, err)
				}
				// Wrapped with what it waited for, and the driver's answer.
				if err != nil && (!strings.Contains(err.Error(), "throttle") || !strings.Contains(err.Error(), "HTTP 429")) {
					t.Errorf("%s after its context ended while throttled: %q; want it to say it waited out a throttle, and the driver's error", a.name, err)
				}
			})
		}
	}
}

// TestWholeTableThrottledBatchRetriedAsWhole runs the route controller's
// 200 concurrent CreateRoute calls into a table whose first write is
// throttled: the batch is retried as one read and one write, not as 200
// retries, and every call succeeds.
func TestWholeTableThrottledBatchRetriedAsWhole(t *testing.T) {
	for _, op := range []string{"ReadTable", "WriteTable"} {
		t.Run(op, func(t *testing.T) {
			th := newThrottler(time.Millisecond, map[string]int{op: 1})
			d := &memTable{throttle: th}
			// One batch of all 200 calls: the window ends when the batch is full.
			tbl, err := routes.NewWholeTable(d, routes.Options{BatchWindow: time.Hour, MaxBatch: 200})
			if err != nil {
				t.Fatal(err)
			}
			createConcurrently(t, tbl, d) // no call may fail because of the throttle
			want := map[string]int{"ReadTable": 2, "WriteTable": 1}
			if op == "WriteTable" {
				want["WriteTable"] = 2
			}
			if diff := cmp.Diff(want, th.calls); diff != "" {
				t.Errorf("driver calls (-want +got):\n%s\n(one throttle is one retry of the batch)", diff)
			}
			if diff := cmp.Diff(routes.Stats{Batches: 2, Writes: uint64(want["WriteTable"]), Calls: 400, Throttled: 1}, tbl.Stats()); diff != "" { //nolint:gosec // G115: a call count, never negative
				t.Errorf("Stats (-want +got):\n%s", diff)
			}
		})
	}
}

// TestWholeTableThrottledBatchOutlivesCaller checks that when one caller of
// a throttled batch gives up, the others' retry still runs (whichever of
// them led the batch) and the abandoned change is not applied.
func TestWholeTableThrottledBatchOutlivesCaller(t *testing.T) {
	th := newThrottler(time.Millisecond, map[string]int{"ReadTable": 1})
	d := &memTable{throttle: th}
	tbl, err := routes.NewWholeTable(d, routes.Options{BatchWindow: time.Hour, MaxBatch: 2})
	if err != nil {
		t.Fatal(err)
	}
	ctxA, cancelA := context.WithCancel(t.Context())
	th.onThrot = func(string) { cancelA() }
	var errA, errB error
	var wg sync.WaitGroup
	wg.Go(func() { errA = tbl.CreateRoute(ctxA, cluster, uidA, route("node-a", "10.244.1.0/24")) })
	wg.Go(func() { errB = tbl.CreateRoute(t.Context(), cluster, uidB, route("node-b", "10.244.2.0/24")) })
	wg.Wait()
	if !errors.Is(errA, context.Canceled) {
		t.Errorf("caller A, cancelled while throttled: %v, want context.Canceled", errA)
	}
	if errB != nil {
		t.Errorf("caller B: %v, want success after the throttle", errB)
	}
	want := []routeID{{tbl.Namer().Name(uidB, "10.244.2.0/24"), "10.244.2.0/24", "node-b"}}
	if diff := cmp.Diff(want, storedIDs(d.snapshot(), cluster)); diff != "" {
		t.Errorf("table (-want +got):\n%s", diff)
	}
}
