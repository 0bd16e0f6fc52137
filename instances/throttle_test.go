package instances_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	cloudprovider "k8s.io/cloud-provider"
	"k8s.io/cloud-provider/api"

	"github.com/ccmkit/ccmkit/instances"
	"github.com/ccmkit/ccmkit/provider"
)

// throttle is a driver error saying "throttled, retry after d", as a Driver
// is documented to return it.
func throttle(d time.Duration) error {
	return fmt.Errorf("acme API: HTTP 429: %w", api.NewRetryError("too many requests", d))
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

// checkThrottled fails unless err is a throttled error asking for retry
// after want and is not "gone" in any spelling.
func checkThrottled(t *testing.T, what string, err error, want time.Duration) {
	t.Helper()
	if got := retryAfterOf(err); got != want {
		t.Errorf("%s: error %v: RetryAfter %v, want an *api.RetryError with %v", what, err, got, want)
	}
	if errors.Is(err, cloudprovider.InstanceNotFound) {
		t.Errorf("%s: error %v matches InstanceNotFound: a throttled call is not gone", what, err)
	}
}

// TestAdapterThrottledIsNeverGone checks that a throttled Driver answer is
// (false, err) with the RetryError findable, never (false, nil), which
// would delete the Node.
func TestAdapterThrottledIsNeverGone(t *testing.T) {
	tests := []struct {
		name   string
		reason string
		err    error
		node   *v1.Node
	}{
		{
			name: "by provider ID", reason: "the usual case: the node controller's look-up is throttled",
			err: throttle(2 * time.Second), node: nodeWithProviderID("node-1", "acme://i-1"),
		},
		{
			name: "by name", reason: "a Node without spec.providerID is looked up by name, throttled the same way",
			err: throttle(2 * time.Second), node: nodeWithProviderID("node-1", ""),
		},
		{
			name: "unwrapped RetryError", reason: "the bare upstream type counts as well as a wrapped one",
			err: api.NewRetryError("slow down", 2*time.Second), node: nodeWithProviderID("node-1", "acme://i-1"),
		},
		{
			name: "throttled and not-found at once", reason: "a 429 that also carries the not-found sentinel is doubt: throttling wins",
			err: errors.Join(instances.ErrNotFound, throttle(2*time.Second)), node: nodeWithProviderID("node-1", "acme://i-1"),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, err := instances.NewAdapter(returns(instances.Instance{}, tt.err), acme, instances.Options{})
			if err != nil {
				t.Fatal(err)
			}
			exists, err := a.InstanceExists(t.Context(), tt.node)
			if exists || err == nil {
				t.Errorf("InstanceExists = (%v, %v), want (false, an error) (%s)", exists, err, tt.reason)
			}
			checkThrottled(t, "InstanceExists", err, 2*time.Second)
			shutdown, err := a.InstanceShutdown(t.Context(), tt.node)
			if shutdown {
				t.Errorf("InstanceShutdown = true on a throttled look-up")
			}
			checkThrottled(t, "InstanceShutdown", err, 2*time.Second)
			meta, err := a.InstanceMetadata(t.Context(), tt.node)
			if meta != nil {
				t.Errorf("InstanceMetadata = %v on a throttled look-up, want nil", meta)
			}
			checkThrottled(t, "InstanceMetadata", err, 2*time.Second)
		})
	}
}

// lookupAll makes one look-up of each kind (by ID, by name, List) on the
// Cache and returns their errors.
func lookupAll(t *testing.T, c *instances.Cache) map[string]error {
	t.Helper()
	ctx := t.Context()
	_, byID := c.GetByID(ctx, mustParse(t, "acme://i-00000"))
	_, byName := c.GetByName(ctx, "node-00001")
	_, list := c.List(ctx)
	return map[string]error{"GetByID": byID, "GetByName": byName, "List": list}
}

// TestCacheThrottledListBacksOff checks the Cache's back-off after a
// throttled List: no List before the delay has passed, for max(ErrorTTL,
// D), and every look-up in the window answered without a driver call, with
// a RetryError carrying the time left.
func TestCacheThrottledListBacksOff(t *testing.T) {
	tests := []struct {
		name     string
		reason   string
		errorTTL time.Duration
		retry    time.Duration
		window   time.Duration // expected back-off
	}{
		{
			name: "delay longer than ErrorTTL", reason: "the cloud's delay wins over the shorter ErrorTTL",
			errorTTL: 5 * time.Second, retry: 30 * time.Second, window: 30 * time.Second,
		},
		{
			name: "ErrorTTL longer than the delay", reason: "a failure is still remembered for ErrorTTL; the RetryError says when the Cache lists again",
			errorTTL: time.Minute, retry: 10 * time.Second, window: time.Minute,
		},
		{
			name: "ErrorTTL disabled", reason: "a negative ErrorTTL disables remembering failures, not the cloud's back-off",
			errorTTL: -1, retry: 10 * time.Second, window: 10 * time.Second,
		},
		{
			name: "default ErrorTTL", reason: "zero ErrorTTL is the documented default, five seconds, longer than this delay",
			retry: time.Second, window: 5 * time.Second,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cloud := numberedCloud(2)
			cloud.setListErr(throttle(tt.retry))
			f := newCacheFixture(t, nil, cloud, instances.CacheOptions{ErrorTTL: tt.errorTTL})

			_, err := f.cache.GetByID(t.Context(), mustParse(t, "acme://i-00000"))
			checkThrottled(t, "the throttled List's own look-up", err, tt.retry)
			checkCalls(t, cloud, calls{List: 1}, "one List, and no direct look-up after it failed")

			for _, at := range []time.Duration{tt.window / 3, tt.window - time.Millisecond} {
				f.clock.Advance(at - f.elapsed())
				for what, err := range lookupAll(t, f.cache) {
					checkThrottled(t, fmt.Sprintf("%s %v after the throttle", what, at), err, tt.window-at)
				}
				exists, err := f.adapter.InstanceExists(t.Context(), numberedNode(0))
				if exists || err == nil {
					t.Errorf("InstanceExists %v after the throttle = (%v, %v), want (false, an error) (%s)", at, exists, err, tt.reason)
				}
				checkThrottled(t, "InstanceExists", err, tt.window-at)
			}
			checkCalls(t, cloud, calls{List: 1}, "no driver call inside the back-off window: "+tt.reason)

			cloud.setListErr(nil)
			f.clock.Advance(tt.window - f.elapsed())
			for what, err := range lookupAll(t, f.cache) {
				if err != nil {
					t.Errorf("%s once the window has passed: %v", what, err)
				}
			}
			checkCalls(t, cloud, calls{List: 2}, "one List once the window has passed serves every look-up")
		})
	}
}

// TestCacheThrottleSurvivesInvalidate checks that Invalidate does not cut
// the cloud's back-off short, while it still drops an ordinary failure.
func TestCacheThrottleSurvivesInvalidate(t *testing.T) {
	tests := []struct {
		name      string
		reason    string
		err       error
		wantLists int64
	}{
		{name: "throttled", reason: "the cloud asked for no List for 30s", err: throttle(30 * time.Second), wantLists: 1},
		{name: "other failure", reason: "Invalidate drops a remembered ordinary failure", err: errors.New("HTTP 503"), wantLists: 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cloud := numberedCloud(1)
			cloud.setListErr(tt.err)
			f := newCacheFixture(t, nil, cloud, instances.CacheOptions{ErrorTTL: 5 * time.Second})
			if _, err := f.cache.List(t.Context()); err == nil {
				t.Fatal("List succeeded, want the injected failure")
			}
			f.clock.Advance(time.Second)
			f.cache.Invalidate()
			_, err := f.cache.List(t.Context())
			if err == nil {
				t.Fatal("List after Invalidate succeeded, want the injected failure")
			}
			if got := cloud.list.Load(); got != tt.wantLists {
				t.Errorf("List calls = %d, want %d (%s)", got, tt.wantLists, tt.reason)
			}
			if tt.wantLists == 1 {
				checkThrottled(t, "List after Invalidate", err, 29*time.Second)
			}
		})
	}
}

// TestCacheThrottledNotFoundList checks that a throttled List error that
// also carries the not-found sentinel is a back-off, never "gone".
func TestCacheThrottledNotFoundList(t *testing.T) {
	cloud := numberedCloud(1)
	cloud.setListErr(errors.Join(instances.ErrNotFound, throttle(10*time.Second)))
	f := newCacheFixture(t, nil, cloud, instances.CacheOptions{ErrorTTL: -1})
	for i := range 2 {
		exists, err := f.adapter.InstanceExists(t.Context(), numberedNode(0))
		if exists || err == nil {
			t.Errorf("look-up %d: InstanceExists = (%v, %v), want (false, an error)", i, exists, err)
		}
		checkThrottled(t, fmt.Sprintf("look-up %d", i), err, 10*time.Second)
		if errors.Is(err, instances.ErrNotFound) {
			t.Errorf("look-up %d: error %v matches ErrNotFound", i, err)
		}
	}
	checkCalls(t, cloud, calls{List: 1}, "the throttle is honoured although ErrorTTL is disabled")
}

// TestCacheThrottledDirectLookup checks that a direct look-up (an instance
// missing from the list) that is throttled returns the throttle, never
// "gone", and that the Cache passes it on unchanged.
func TestCacheThrottledDirectLookup(t *testing.T) {
	tests := []struct {
		name   string
		reason string
		node   *v1.Node
		want   calls
	}{
		{
			name: "by provider ID", reason: "an unlisted ID is confirmed with GetByID, which is throttled",
			node: nodeWithProviderID("node-new", "acme://i-new"), want: calls{List: 1, GetByID: 1},
		},
		{
			name: "by name", reason: "an unlisted name is confirmed with GetByName, which is throttled",
			node: nodeWithProviderID("node-new", ""), want: calls{List: 1, GetByName: 1},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cloud := numberedCloud(1)
			f := newCacheFixture(t, nil, cloud, instances.CacheOptions{})
			cloud.setGetErr(throttle(3 * time.Second))
			exists, err := f.adapter.InstanceExists(t.Context(), tt.node)
			if exists || err == nil {
				t.Errorf("InstanceExists = (%v, %v), want (false, an error): (false, nil) would delete the Node (%s)", exists, err, tt.reason)
			}
			checkThrottled(t, "InstanceExists", err, 3*time.Second)
			checkCalls(t, cloud, tt.want, tt.reason)

			cloud.setGetErr(nil)
			exists, err = f.adapter.InstanceExists(t.Context(), tt.node)
			if exists || err != nil {
				t.Errorf("unthrottled: InstanceExists = (%v, %v), want (false, nil): the instance really is unknown", exists, err)
			}
		})
	}
}

// TestCacheThrottledListWaiters checks that look-ups waiting for a List
// that is throttled share its answer: one List, every waiter throttled.
func TestCacheThrottledListWaiters(t *testing.T) {
	cloud := numberedCloud(2)
	f := newCacheFixture(t, nil, cloud, instances.CacheOptions{})
	listing, release := make(chan struct{}), make(chan struct{})
	cloud.onList = func(context.Context) error {
		close(listing)
		<-release
		return throttle(20 * time.Second)
	}
	waiter := make(chan error, 1)
	go func() {
		_, err := f.cache.GetByName(t.Context(), "node-00001")
		waiter <- err
	}()
	<-listing
	reads := make(chan struct{})
	var once sync.Once
	f.clock.onNow = func() { once.Do(func() { close(reads) }) }
	go func() {
		<-reads // the second look-up has read the clock and will join the List
		close(release)
	}()
	_, err := f.cache.GetByID(t.Context(), mustParse(t, "acme://i-00000"))
	checkThrottled(t, "second look-up", err, 20*time.Second)
	checkThrottled(t, "first look-up", <-waiter, 20*time.Second)
	checkCalls(t, cloud, calls{List: 1}, "the waiter shares the throttled List")
}

// elapsed is how far the fixture's clock has been advanced.
func (f *cacheFixture) elapsed() time.Duration {
	return f.clock.Now().Sub(newFakeClock().Now())
}

func mustParse(t *testing.T, pid string) provider.ProviderID {
	t.Helper()
	id, err := acme.Parse(pid)
	if err != nil {
		t.Fatal(err)
	}
	return id
}
