package instances_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	cloudprovider "k8s.io/cloud-provider"

	"github.com/ccmkit/ccmkit/instances"
)

// numbered returns a dual-stack running instance number n.
func numbered(n int) instances.Instance {
	return instances.Instance{
		ID:     fmt.Sprintf("i-%05d", n),
		Name:   fmt.Sprintf("node-%05d", n),
		Type:   "m1.small",
		Zone:   "eu-1a",
		Region: "eu-1",
		Addresses: []v1.NodeAddress{
			hostname(fmt.Sprintf("node-%05d", n)),
			internal(fmt.Sprintf("fd00::%x", n)),
			internal(fmt.Sprintf("10.%d.%d.%d", n>>16&255, n>>8&255, n&255)),
		},
	}
}

func numberedCloud(n int) *memCloud {
	c := newMemCloud()
	for i := range n {
		c.put(numbered(i))
	}
	return c
}

// numberedNode is the Node of instance n: with a provider ID for even n,
// without one (looked up by name) for odd n.
func numberedNode(n int) *v1.Node {
	if n%2 == 1 {
		return nodeWithProviderID(fmt.Sprintf("node-%05d", n), "")
	}
	return nodeWithProviderID(fmt.Sprintf("node-%05d", n), fmt.Sprintf("acme://i-%05d", n))
}

type cacheFixture struct {
	cloud   *memCloud
	clock   *fakeClock
	cache   *instances.Cache
	adapter *instances.Adapter
}

func newCacheFixture(t testing.TB, d instances.ListDriver, cloud *memCloud, opts instances.CacheOptions) *cacheFixture {
	t.Helper()
	clock := newFakeClock()
	opts.Clock = clock
	if d == nil {
		d = cloud
	}
	cache, err := instances.NewCache(d, opts)
	if err != nil {
		t.Fatal(err)
	}
	a, err := instances.NewAdapter(cache, acme, instances.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return &cacheFixture{cloud: cloud, clock: clock, cache: cache, adapter: a}
}

type calls struct{ List, GetByID, GetByName int64 }

func (c *memCloud) calls() calls {
	return calls{List: c.list.Load(), GetByID: c.getByID.Load(), GetByName: c.getByName.Load()}
}

func checkCalls(t *testing.T, c *memCloud, want calls, why string) {
	t.Helper()
	if diff := cmp.Diff(want, c.calls()); diff != "" {
		t.Errorf("driver calls (-want +got):\n%s\n(%s)", diff, why)
	}
}

// TestCache5000NodesOneList is the acceptance test: InstanceMetadata for
// 5,000 nodes within one TTL makes exactly one List call and no other cloud
// call, and answers exactly what the Driver would answer directly.
func TestCache5000NodesOneList(t *testing.T) {
	const n = 5000
	cloud := numberedCloud(n)
	f := newCacheFixture(t, nil, cloud, instances.CacheOptions{TTL: time.Minute})
	direct, err := instances.NewAdapter(numberedCloud(n), acme, instances.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		node := numberedNode(i)
		got, err := f.adapter.InstanceMetadata(t.Context(), node)
		if err != nil {
			t.Fatalf("node %d: %v", i, err)
		}
		want, err := direct.InstanceMetadata(t.Context(), node)
		if err != nil {
			t.Fatal(err)
		}
		if !cmp.Equal(want, got) {
			t.Fatalf("node %d: cached metadata differs from direct (-direct +cached):\n%s", i, cmp.Diff(want, got))
		}
		f.clock.Advance(time.Minute / (2 * n)) // time passes, but stays within the TTL
	}
	t.Logf("%d InstanceMetadata calls: %d List, %d GetByID, %d GetByName", n, cloud.list.Load(), cloud.getByID.Load(), cloud.getByName.Load())
	checkCalls(t, cloud, calls{List: 1}, "one List serves every look-up within the TTL")
}

// TestCacheConcurrentMissesCoalesce starts many look-ups while the first
// List is still running (the List waits until every worker has asked) and
// checks they share that one List.
func TestCacheConcurrentMissesCoalesce(t *testing.T) {
	const (
		n       = 5000
		workers = 64
	)
	cloud := numberedCloud(n)
	f := newCacheFixture(t, nil, cloud, instances.CacheOptions{})
	var reads atomic.Int64
	allAsked := make(chan struct{})
	f.clock.onNow = func() {
		if reads.Add(1) == workers {
			close(allAsked)
		}
	}
	cloud.onList = func(ctx context.Context) error {
		select {
		case <-allAsked: // every worker is now the lister or waiting for it
			return nil
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(30 * time.Second): // deadlock guard, not a timing assertion
			return errors.New("workers never all asked: look-ups are not running concurrently")
		}
	}
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for w := range workers {
		wg.Go(func() {
			for i := w; i < n; i += workers {
				exists, err := f.adapter.InstanceExists(t.Context(), numberedNode(i))
				if err != nil || !exists {
					errs <- fmt.Errorf("node %d: InstanceExists = (%v, %v)", i, exists, err) //nolint:errorlint // err is nil when exists is false: %v prints <nil> where %w would print %!w(<nil>)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	t.Logf("%d concurrent InstanceExists calls on %d workers: %d List", n, workers, cloud.list.Load())
	checkCalls(t, cloud, calls{List: 1}, "concurrent misses coalesce into one List")
}

func TestCacheTTL(t *testing.T) {
	cloud := numberedCloud(3)
	f := newCacheFixture(t, nil, cloud, instances.CacheOptions{}) // zero TTL: the default, one minute
	node := numberedNode(0)
	ask := func() {
		t.Helper()
		if _, err := f.adapter.InstanceMetadata(t.Context(), node); err != nil {
			t.Fatal(err)
		}
	}
	ask()
	f.clock.Advance(time.Minute - time.Nanosecond) // CacheOptions.TTL's documented default
	ask()
	checkCalls(t, cloud, calls{List: 1}, "still within the default TTL of one minute")
	f.clock.Advance(time.Nanosecond)
	ask()
	ask()
	checkCalls(t, cloud, calls{List: 2}, "TTL after the first List started, the list is refreshed once")
	f.cache.Invalidate()
	ask()
	checkCalls(t, cloud, calls{List: 3}, "Invalidate drops the list")
}

// TestCacheNeverGoneFromListAlone checks that every "gone" answer comes from
// a direct look-up, and every doubt is an error.
func TestCacheNeverGoneFromListAlone(t *testing.T) {
	t.Run("missing from the list but alive", func(t *testing.T) {
		cloud := numberedCloud(3)
		cloud.hidden["i-00002"] = true // an eventually consistent List
		f := newCacheFixture(t, nil, cloud, instances.CacheOptions{})
		for _, node := range []*v1.Node{numberedNode(2), nodeWithProviderID("node-00002", "")} {
			exists, err := f.adapter.InstanceExists(t.Context(), node)
			if !exists || err != nil {
				t.Errorf("InstanceExists(%s) = (%v, %v), want (true, nil): confirmed by a direct look-up", node.Name, exists, err)
			}
		}
		checkCalls(t, cloud, calls{List: 1, GetByID: 1, GetByName: 1}, "a miss is confirmed with GetByID or GetByName")
	})
	t.Run("deleted after the list", func(t *testing.T) {
		cloud := numberedCloud(3)
		f := newCacheFixture(t, nil, cloud, instances.CacheOptions{TTL: time.Minute})
		node := numberedNode(2)
		if exists, err := f.adapter.InstanceExists(t.Context(), node); !exists || err != nil {
			t.Fatalf("InstanceExists = (%v, %v), want (true, nil)", exists, err)
		}
		cloud.remove("i-00002")
		f.clock.Advance(30 * time.Second)
		// Documented staleness: within the TTL the listed instance is still
		// reported; never the other way round.
		if exists, err := f.adapter.InstanceExists(t.Context(), node); !exists || err != nil {
			t.Fatalf("within the TTL: InstanceExists = (%v, %v), want the listed (true, nil)", exists, err)
		}
		f.clock.Advance(30 * time.Second)
		exists, err := f.adapter.InstanceExists(t.Context(), node)
		if exists || err != nil {
			t.Fatalf("after the TTL: InstanceExists = (%v, %v), want (false, nil)", exists, err)
		}
		checkCalls(t, cloud, calls{List: 2, GetByID: 1}, "gone only after the direct GetByID said not found")
	})
	t.Run("missing from the list, direct look-up fails", func(t *testing.T) {
		cloud := numberedCloud(3)
		cloud.remove("i-00002")
		cloud.setGetErr(errors.New("HTTP 503"))
		f := newCacheFixture(t, nil, cloud, instances.CacheOptions{})
		exists, err := f.adapter.InstanceExists(t.Context(), numberedNode(2))
		if exists || err == nil || !strings.Contains(err.Error(), "HTTP 503") {
			t.Errorf("InstanceExists = (%v, %v), want (false, the driver's error)", exists, err)
		}
		checkCalls(t, cloud, calls{List: 1, GetByID: 1}, "the miss was confirmed and failed")
	})
	t.Run("terminated in the list is confirmed", func(t *testing.T) {
		cloud := numberedCloud(3)
		cloud.put(withState(numbered(2), instances.StateTerminated))
		f := newCacheFixture(t, nil, cloud, instances.CacheOptions{})
		exists, err := f.adapter.InstanceExists(t.Context(), numberedNode(2))
		if exists || err != nil {
			t.Errorf("InstanceExists = (%v, %v), want (false, nil)", exists, err)
		}
		checkCalls(t, cloud, calls{List: 1, GetByID: 1}, "a terminated listing is confirmed directly")
	})
	t.Run("name reused after the list", func(t *testing.T) {
		cloud := numberedCloud(3)
		cloud.put(withState(numbered(1), instances.StateTerminated))
		f := newCacheFixture(t, nil, cloud, instances.CacheOptions{})
		if _, err := f.cache.List(t.Context()); err != nil {
			t.Fatal(err)
		}
		replacement := numbered(1)
		replacement.ID = "i-new"
		cloud.put(replacement)
		m, err := f.adapter.InstanceMetadata(t.Context(), numberedNode(1)) // by name
		if err != nil || m.ProviderID != "acme://i-new" {
			t.Errorf("InstanceMetadata = (%+v, %v), want the replacement acme://i-new", m, err)
		}
		checkCalls(t, cloud, calls{List: 1, GetByName: 1}, "the listed name held only a terminated instance")
	})
	// A name shared by two live instances, and an ID listed twice, are
	// inconsistent lists: TestCacheInconsistentList.
}

// TestCacheListErrors checks that a failed List is an error for every
// look-up (never "gone") and is remembered for ErrorTTL.
func TestCacheListErrors(t *testing.T) {
	cloud := numberedCloud(3)
	cloud.setListErr(errors.New("HTTP 429 rate limited"))
	f := newCacheFixture(t, nil, cloud, instances.CacheOptions{ErrorTTL: 10 * time.Second})
	for _, node := range []*v1.Node{numberedNode(0), numberedNode(1), nodeWithProviderID("x", "acme://i-unknown")} {
		exists, err := f.adapter.InstanceExists(t.Context(), node)
		if exists || err == nil || !strings.Contains(err.Error(), "HTTP 429") {
			t.Errorf("InstanceExists(%s) = (%v, %v), want (false, the List error)", node.Name, exists, err)
		}
		m, err := f.adapter.InstanceMetadata(t.Context(), node)
		if m != nil || err == nil || errors.Is(err, cloudprovider.InstanceNotFound) {
			t.Errorf("InstanceMetadata(%s) = (%v, %v), want (nil, an error that is not InstanceNotFound)", node.Name, m, err)
		}
	}
	checkCalls(t, cloud, calls{List: 1}, "the failure is remembered for ErrorTTL: one List, no direct look-ups")
	f.clock.Advance(10 * time.Second)
	cloud.setListErr(nil)
	if exists, err := f.adapter.InstanceExists(t.Context(), numberedNode(0)); !exists || err != nil {
		t.Errorf("after ErrorTTL: InstanceExists = (%v, %v), want (true, nil)", exists, err)
	}
	checkCalls(t, cloud, calls{List: 2}, "listed again after ErrorTTL")
}

func TestCacheListNotFoundIsNotGone(t *testing.T) {
	cloud := numberedCloud(1)
	cloud.setListErr(fmt.Errorf("list: %w", instances.ErrNotFound))
	f := newCacheFixture(t, nil, cloud, instances.CacheOptions{ErrorTTL: -1})
	for range 2 {
		exists, err := f.adapter.InstanceExists(t.Context(), numberedNode(0))
		if exists || err == nil || errors.Is(err, instances.ErrNotFound) {
			t.Errorf("InstanceExists = (%v, %v), want (false, an error not matching ErrNotFound)", exists, err)
		}
	}
	checkCalls(t, cloud, calls{List: 2}, "negative ErrorTTL: every look-up lists again")
}

// TestCacheListerCanceled checks that when the look-up that runs List gives
// up, a waiting look-up with a live context lists again instead of failing.
func TestCacheListerCanceled(t *testing.T) {
	cloud := numberedCloud(3)
	f := newCacheFixture(t, nil, cloud, instances.CacheOptions{})
	listing := make(chan struct{})
	var first atomic.Bool
	cloud.onList = func(ctx context.Context) error {
		if first.CompareAndSwap(false, true) {
			close(listing)
			<-ctx.Done()
			return ctx.Err()
		}
		return nil
	}
	leaderCtx, cancelLeader := context.WithCancel(t.Context())
	leaderErr := make(chan error, 1)
	go func() {
		_, err := f.adapter.InstanceExists(leaderCtx, numberedNode(0))
		leaderErr <- err
	}()
	<-listing
	var reads atomic.Int64
	f.clock.onNow = func() {
		if reads.Add(1) == 1 { // the waiter has looked and is about to wait
			go cancelLeader()
		}
	}
	exists, err := f.adapter.InstanceExists(t.Context(), numberedNode(1))
	if !exists || err != nil {
		t.Errorf("waiter: InstanceExists = (%v, %v), want (true, nil)", exists, err)
	}
	if err := <-leaderErr; !errors.Is(err, context.Canceled) {
		t.Errorf("leader: error %v, want context.Canceled", err)
	}
	f.clock.onNow = nil
	if exists, err := f.adapter.InstanceExists(t.Context(), numberedNode(2)); !exists || err != nil {
		t.Errorf("after: InstanceExists = (%v, %v), want (true, nil)", exists, err)
	}
	checkCalls(t, cloud, calls{List: 2}, "the canceled List is not remembered; the waiter listed again")
}

// TestCacheWaiterCanceled checks that a waiting look-up returns when its own
// context ends, with that context's error.
func TestCacheWaiterCanceled(t *testing.T) {
	cloud := numberedCloud(3)
	f := newCacheFixture(t, nil, cloud, instances.CacheOptions{})
	listing, release := make(chan struct{}), make(chan struct{})
	cloud.onList = func(context.Context) error {
		close(listing)
		<-release
		return nil
	}
	leaderErr := make(chan error, 1)
	go func() {
		_, err := f.adapter.InstanceExists(t.Context(), numberedNode(0))
		leaderErr <- err
	}()
	<-listing
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	exists, err := f.adapter.InstanceExists(ctx, numberedNode(1))
	if exists || !errors.Is(err, context.Canceled) {
		t.Errorf("canceled waiter: InstanceExists = (%v, %v), want (false, context.Canceled)", exists, err)
	}
	close(release)
	if err := <-leaderErr; err != nil {
		t.Errorf("leader: %v", err)
	}
	checkCalls(t, cloud, calls{List: 1}, "one List")
}

// TestCacheListPanics checks that a panicking List does not leave waiters
// blocked or the Cache stuck.
func TestCacheListPanics(t *testing.T) {
	cloud := numberedCloud(3)
	f := newCacheFixture(t, nil, cloud, instances.CacheOptions{ErrorTTL: -1})
	var first atomic.Bool
	cloud.onList = func(context.Context) error {
		if first.CompareAndSwap(false, true) {
			panic("driver bug")
		}
		return nil
	}
	func() {
		defer func() {
			if r := recover(); r != "driver bug" {
				t.Errorf("recovered %v, want the driver's panic to propagate", r)
			}
		}()
		_, _ = f.adapter.InstanceExists(t.Context(), numberedNode(0))
	}()
	if exists, err := f.adapter.InstanceExists(t.Context(), numberedNode(0)); !exists || err != nil {
		t.Errorf("after the panic: InstanceExists = (%v, %v), want (true, nil)", exists, err)
	}
	checkCalls(t, cloud, calls{List: 2}, "the Cache lists again after a panic")
}

func TestCacheList(t *testing.T) {
	cloud := numberedCloud(3)
	f := newCacheFixture(t, nil, cloud, instances.CacheOptions{})
	got, err := f.cache.List(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	want := []instances.Instance{numbered(0), numbered(1), numbered(2)}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("List (-want +got):\n%s", diff)
	}
	got[0] = instances.Instance{}
	again, err := f.cache.List(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, again); diff != "" {
		t.Errorf("List after changing the first result (-want +got):\n%s", diff)
	}
	checkCalls(t, cloud, calls{List: 1}, "List is served from the cache too")
}

func TestNewCacheErrors(t *testing.T) {
	var typedNil *memCloud
	tests := []struct {
		name   string
		reason string
		driver instances.ListDriver
		opts   instances.CacheOptions
		msg    string
	}{
		{name: "nil driver", reason: "nothing to cache", msg: "instances.NewCache: driver is nil: expected a non-nil instances.ListDriver"},
		{name: "typed nil driver", reason: "a nil *T in the interface would panic at the first List", driver: typedNil, msg: "instances.NewCache: driver is a nil *instances_test.memCloud: expected a non-nil instances.ListDriver"},
		{name: "negative TTL", reason: "a list remembered for no time is no cache: an error, not clamped", driver: newMemCloud(), opts: instances.CacheOptions{TTL: -time.Second}, msg: "instances.NewCache: CacheOptions.TTL -1s: expected 0 (the default, 1m0s) or positive"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := instances.NewCache(tt.driver, tt.opts)
			if c != nil || err == nil || !strings.Contains(err.Error(), tt.msg) {
				t.Errorf("NewCache = (%v, %v): expected nil and an error containing %q (%s)", c, err, tt.msg, tt.reason)
			}
		})
	}
}

// TestCacheInvalidateDuringList checks that a List which read the state
// before an Invalidate is not kept: the look-up made after Invalidate lists
// again and sees the change, instead of the old list for a whole TTL.
func TestCacheInvalidateDuringList(t *testing.T) {
	cloud := numberedCloud(2)
	// The first List reads the state, then waits for release before
	// returning it: a List that reads before a change and returns after it.
	read, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	cloud.afterList = func() {
		first := false
		once.Do(func() { first = true }) // not the wait itself: a later List must not block on it
		if first {
			close(read)
			<-release
		}
	}
	f := newCacheFixture(t, nil, cloud, instances.CacheOptions{})

	before := make(chan bool, 1)
	go func() {
		shutdown, _ := f.adapter.InstanceShutdown(t.Context(), numberedNode(0))
		before <- shutdown
	}()
	<-read // the first List has read instance 0 running

	stopped := numbered(0)
	stopped.State = instances.StateStopped
	cloud.put(stopped)
	f.cache.Invalidate()

	after := make(chan bool, 1)
	go func() {
		shutdown, err := f.adapter.InstanceShutdown(t.Context(), numberedNode(0))
		if err != nil {
			t.Errorf("InstanceShutdown after Invalidate: %v", err)
		}
		after <- shutdown
	}()
	select {
	case got := <-after:
		if !got {
			t.Error("InstanceShutdown after the stop and Invalidate = false")
		}
		close(release)
	case <-time.After(10 * time.Second):
		// A deadlock guard, not a timing assertion: the look-up is waiting
		// for the List that started before Invalidate.
		close(release)
		<-after
		t.Error("the look-up made after Invalidate joined the List that started before it")
	}
	<-before // the waiter of the old List may see either state

	if got, err := f.adapter.InstanceShutdown(t.Context(), numberedNode(0)); err != nil || !got {
		t.Errorf("InstanceShutdown once both Lists ended = (%v, %v), want (true, nil): the stale List was kept", got, err)
	}
	checkCalls(t, cloud, calls{List: 2}, "one List before Invalidate, one after; the stale one is not cached")
}
