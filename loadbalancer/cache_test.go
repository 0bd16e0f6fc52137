package loadbalancer_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/cloud-provider/api"
	"k8s.io/utils/clock"

	"github.com/ccmkit/ccmkit/internal/throttle"
	"github.com/ccmkit/ccmkit/loadbalancer"
)

// listingDriver is the package's memDriver with a List, the
// loadbalancer.ListDriver a Cache wraps: it counts Lists, and lets a test
// fail a List (listErr), run code before it reads the cloud (onList) or
// hold it between reading and returning (afterRead).
type listingDriver struct {
	*memDriver
	lists atomic.Int64
	// loseAnswers makes each Apply and Delete take effect and then fail,
	// as when the cloud's answer is lost.
	loseAnswers atomic.Bool
	// nilAnswers makes each Apply but a creation answer without a load
	// balancer, as the Driver contract allows ("exactly the action was
	// applied").
	nilAnswers atomic.Bool
	// busyAnswers makes each Apply that took effect answer
	// loadbalancer.Busy too: the cloud is busy with the load balancer.
	busyAnswers atomic.Bool

	hookMu    sync.Mutex
	listErr   error
	onList    func(ctx context.Context) error
	afterRead func()
}

func newListingDriver() *listingDriver { return &listingDriver{memDriver: newMemDriver()} }

func (d *listingDriver) List(ctx context.Context) ([]*loadbalancer.LoadBalancer, error) {
	d.lists.Add(1)
	d.hookMu.Lock()
	onList, afterRead, listErr := d.onList, d.afterRead, d.listErr
	d.hookMu.Unlock()
	if onList != nil {
		if err := onList(ctx); err != nil {
			return nil, err
		}
	}
	if listErr != nil {
		return nil, listErr
	}
	var out []*loadbalancer.LoadBalancer
	for _, lb := range d.stored() {
		out = append(out, lb)
	}
	if afterRead != nil {
		afterRead()
	}
	return out, nil
}

func (d *listingDriver) Apply(ctx context.Context, a loadbalancer.Action) (*loadbalancer.LoadBalancer, error) {
	lb, err := d.memDriver.Apply(ctx, a)
	if err == nil && d.loseAnswers.Load() {
		return nil, errLost
	}
	if err == nil && d.nilAnswers.Load() && a.Kind != loadbalancer.ActionCreate {
		lb = nil
	}
	if err == nil && d.busyAnswers.Load() {
		err = loadbalancer.Busy(time.Second, "PENDING_UPDATE")
	}
	return lb, err
}

func (d *listingDriver) Delete(ctx context.Context, lb *loadbalancer.LoadBalancer) error {
	err := d.memDriver.Delete(ctx, lb)
	if err == nil && d.loseAnswers.Load() {
		return errLost
	}
	return err
}

// errLost is the error of a write whose answer was lost.
var errLost = errors.New("connection reset: the answer was lost")

// setHooks sets the List hooks (nil: none) and error under hookMu.
func (d *listingDriver) setHooks(onList func(context.Context) error, afterRead func(), listErr error) {
	d.hookMu.Lock()
	defer d.hookMu.Unlock()
	d.onList, d.afterRead, d.listErr = onList, afterRead, listErr
}

// put stores lb in the cloud behind the Cache's back (another replica, the
// cloud's console).
func (d *listingDriver) put(lb *loadbalancer.LoadBalancer) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.lbs[lb.ID] = lb.Clone()
}

// lbCalls are the calls a listingDriver received.
type lbCalls struct{ List, Find, Apply, Delete int }

func (d *listingDriver) calls() lbCalls {
	d.mu.Lock()
	defer d.mu.Unlock()
	return lbCalls{List: int(d.lists.Load()), Find: d.finds, Apply: len(d.applied), Delete: len(d.deleted)}
}

func checkLBCalls(t *testing.T, d *listingDriver, want lbCalls, why string) {
	t.Helper()
	if diff := cmp.Diff(want, d.calls()); diff != "" {
		t.Errorf("driver calls (-want +got):\n%s\n(%s)", diff, why)
	}
}

// fakeClock is a manually advanced clock for CacheOptions.Clock; onNow,
// when set, is called (without the lock) on every reading. A Cache reads
// only Now and Since: the timer methods of the embedded nil clock.Clock
// are never called.
type fakeClock struct {
	clock.Clock
	mu    sync.Mutex
	t     time.Time
	onNow func()
}

var clockStart = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	t, hook := c.t, c.onNow
	c.mu.Unlock()
	if hook != nil {
		hook()
	}
	return t
}

func (c *fakeClock) Since(t time.Time) time.Duration { return c.Now().Sub(t) }

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

func (c *fakeClock) setOnNow(f func()) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.onNow = f
}

// elapsed is how far the clock has been advanced.
func (c *fakeClock) elapsed() time.Duration { return c.Now().Sub(clockStart) }

// cacheFixture is a Reconciler over a Cache over a listingDriver, on a
// fake clock.
type cacheFixture struct {
	d     *listingDriver
	clock *fakeClock
	cache *loadbalancer.Cache
	r     *loadbalancer.Reconciler
}

func newCacheFixture(t testing.TB, opts loadbalancer.CacheOptions) *cacheFixture {
	t.Helper()
	f := &cacheFixture{d: newListingDriver(), clock: &fakeClock{t: clockStart}}
	opts.Clock = f.clock
	var err error
	if f.cache, err = loadbalancer.NewCache(f.d, opts); err != nil {
		t.Fatal(err)
	}
	if f.r, err = loadbalancer.NewReconciler(f.cache, loadbalancer.Options{Capabilities: allCaps, MaxThrottleWait: -1}); err != nil {
		t.Fatal(err)
	}
	return f
}

// withLoadBalancer is newCacheFixture after the Reconciler created the
// load balancer of lbService() with threeNodes(); it returns the Service
// and the load balancer as the cloud has it.
func withLoadBalancer(t *testing.T, opts loadbalancer.CacheOptions) (*cacheFixture, *v1.Service, *loadbalancer.LoadBalancer) {
	t.Helper()
	f := newCacheFixture(t, opts)
	svc := lbService()
	if _, err := f.r.EnsureLoadBalancer(t.Context(), "c1", svc, threeNodes()); err != nil {
		t.Fatalf("EnsureLoadBalancer: %v", err)
	}
	return f, svc, onlyLB(t, f.d.memDriver)
}

// numberedService is LoadBalancer Service number i of the shop namespace.
func numberedService(i int) *v1.Service {
	return lbService(func(s *v1.Service) {
		s.Name, s.UID = fmt.Sprintf("web-%04d", i), types.UID(fmt.Sprintf("uid-%04d", i))
	})
}

// selector is the Find query of svc's load balancer in cluster c1.
func selector(svc *v1.Service) loadbalancer.Query {
	return loadbalancer.Query{Tags: loadbalancer.OwnerOf("c1", svc).Selector()}
}

// TestCacheNodeSyncWithoutReads is the acceptance test: once N Services
// have their load balancers, a node sync (UpdateLoadBalancer for each)
// within the TTL makes no read, and one added node is exactly N backend
// writes, where the Reconciler over the Driver alone makes N Finds.
func TestCacheNodeSyncWithoutReads(t *testing.T) {
	const n = 200
	f := newCacheFixture(t, loadbalancer.CacheOptions{TTL: time.Minute})
	for i := range n {
		mustEnsure(t, f.r, "c1", numberedService(i), threeNodes())
	}
	checkLBCalls(t, f.d, lbCalls{List: 1, Find: n - 1, Apply: n},
		"bring-up: one List, made by the first Service's look-up, whose miss it answers; each later Service's miss by tags is confirmed by the cloud before its create (its name step trusts the list)")
	sync := func(nodes []*v1.Node) {
		t.Helper()
		for i := range n {
			if err := f.r.UpdateLoadBalancer(t.Context(), "c1", numberedService(i), nodes); err != nil {
				t.Fatalf("UpdateLoadBalancer %d: %v", i, err)
			}
			f.clock.Advance(time.Minute / (4 * n)) // time passes, within the TTL
		}
	}
	sync(threeNodes())
	checkLBCalls(t, f.d, lbCalls{List: 1, Find: n - 1, Apply: n}, "a node sync that changes nothing reads nothing")
	sync(append(threeNodes(), node("n4", "10.0.0.4")))
	checkLBCalls(t, f.d, lbCalls{List: 1, Find: n - 1, Apply: 2 * n}, "one added node: one backend write per Service, no read")
	for id, lb := range f.d.stored() {
		if len(lb.Spec.Backends) != 4 {
			t.Errorf("load balancer %s has %d backends, want 4", id, len(lb.Spec.Backends))
		}
	}
	f.clock.Advance(time.Minute)
	sync(append(threeNodes(), node("n4", "10.0.0.4")))
	checkLBCalls(t, f.d, lbCalls{List: 2, Find: n - 1, Apply: 2 * n}, "after the TTL, one List serves the next sync")
}

// TestCacheAnswersAsTheDriver checks that for every kind of Query the
// Cache answers what the Driver answers (the oracle), from the list when
// it has a match and with one direct Find when it has none or the Query is
// not one the Driver contract allows.
func TestCacheAnswersAsTheDriver(t *testing.T) {
	seed := []*loadbalancer.LoadBalancer{
		{ID: "lb-1", Name: "a", Tags: map[string]string{"k1": "v1", "k2": "v2"}},
		{ID: "lb-2", Name: "b", Tags: map[string]string{"k1": "v1"}},
		{ID: "lb-3", Name: "a", Tags: map[string]string{"k1": "other", "k2": ""}},
	}
	tests := []struct {
		name    string
		reason  string
		q       loadbalancer.Query
		wantIDs []string
		finds   int
		lists   int  // -1: the Driver answers, without the list
		cold    bool // no List before the look-up: it makes one
	}{
		{name: "miss on a cold cache", reason: "the List the look-up made answers \"none\" as the cloud: no Find", q: loadbalancer.Query{ID: "lb-9"}, cold: true},
		{name: "by ID", reason: "the listed load balancer", q: loadbalancer.Query{ID: "lb-2"}, wantIDs: []string{"lb-2"}},
		{name: "unknown ID", reason: "a miss is confirmed", q: loadbalancer.Query{ID: "lb-9"}, finds: 1},
		{name: "by name", reason: "every exact match, in ID order", q: loadbalancer.Query{Name: "a"}, wantIDs: []string{"lb-1", "lb-3"}},
		{name: "name is exact", reason: "no case folding: a miss, confirmed", q: loadbalancer.Query{Name: "A"}, finds: 1},
		{name: "one tag", reason: "every load balancer with the tag and its value", q: loadbalancer.Query{Tags: map[string]string{"k1": "v1"}}, wantIDs: []string{"lb-1", "lb-2"}},
		{name: "all tags", reason: "every tag of the query must be there with its value", q: loadbalancer.Query{Tags: map[string]string{"k1": "v1", "k2": "v2"}}, wantIDs: []string{"lb-1"}},
		{name: "empty tag value", reason: "an empty value matches only a tag set to empty", q: loadbalancer.Query{Tags: map[string]string{"k2": ""}}, wantIDs: []string{"lb-3"}},
		{name: "tag without its value", reason: "a tag with another value is no match: confirmed", q: loadbalancer.Query{Tags: map[string]string{"k1": "v2"}}, finds: 1},
		{name: "no field", reason: "not a query of the contract: the Driver answers it", q: loadbalancer.Query{}, finds: 1, lists: -1},
		{name: "two fields", reason: "not a query of the contract: the Driver answers it", q: loadbalancer.Query{ID: "lb-1", Name: "a"}, wantIDs: []string{"lb-1"}, finds: 1, lists: -1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newCacheFixture(t, loadbalancer.CacheOptions{})
			for _, lb := range seed {
				lb = lb.Clone()
				lb.Ingress = []loadbalancer.Ingress{{IP: "203.0.113.9"}}
				f.d.put(lb)
			}
			if !tt.cold && tt.lists == 0 {
				if _, err := f.cache.List(t.Context()); err != nil { // the list a later look-up finds
					t.Fatal(err)
				}
			}
			got, err := f.cache.Find(t.Context(), tt.q)
			if err != nil {
				t.Fatal(err)
			}
			want, err := f.d.memDriver.Find(t.Context(), tt.q) // the oracle, counted below
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(ids(sorted(want)), ids(sorted(got))); diff != "" {
				t.Errorf("Find(%+v): IDs differ from the driver's (-driver +cache): %s\n%s", tt.q, tt.reason, diff)
			}
			if diff := cmp.Diff(tt.wantIDs, ids(sorted(got))); diff != "" {
				t.Errorf("Find(%+v) (-want +got): %s\n%s", tt.q, tt.reason, diff)
			}
			if diff := cmp.Diff(sorted(want), sorted(got), cmpOpts); diff != "" {
				t.Errorf("Find(%+v): load balancers differ from the driver's (-driver +cache):\n%s", tt.q, diff)
			}
			checkLBCalls(t, f.d, lbCalls{List: 1 + tt.lists, Find: tt.finds + 1}, tt.reason+" (and the oracle's own Find)")
		})
	}
}

func ids(lbs []*loadbalancer.LoadBalancer) []string {
	var out []string
	for _, lb := range lbs {
		out = append(out, lb.ID)
	}
	return out
}

// sorted returns a copy of lbs in ID order.
func sorted(lbs []*loadbalancer.LoadBalancer) []*loadbalancer.LoadBalancer {
	return slices.SortedFunc(slices.Values(lbs), func(a, b *loadbalancer.LoadBalancer) int { return strings.Compare(a.ID, b.ID) })
}

// TestCacheMissIsConfirmed checks that a load balancer created behind the
// Cache's back after its List is found, and so never created twice: by a
// second replica of the cluster, whose Cache listed before the first
// replica created it.
func TestCacheMissIsConfirmed(t *testing.T) {
	a := newCacheFixture(t, loadbalancer.CacheOptions{})
	b := newCacheFixture(t, loadbalancer.CacheOptions{})
	b.d = &listingDriver{memDriver: a.d.memDriver} // one cloud, two API clients
	var err error
	if b.cache, err = loadbalancer.NewCache(b.d, loadbalancer.CacheOptions{Clock: b.clock}); err != nil {
		t.Fatal(err)
	}
	b.r = newReconcilerOver(t, b.cache, loadbalancer.Options{})
	svc := lbService()
	if _, exists, err := b.r.GetLoadBalancer(t.Context(), "c1", svc); exists || err != nil {
		t.Fatalf("replica b, before anything exists: GetLoadBalancer = (%v, %v), want (false, nil)", exists, err)
	}
	mustEnsure(t, a.r, "c1", svc, threeNodes()) // replica a creates it; b's list does not have it
	a.d.writes()
	mustEnsure(t, b.r, "c1", svc, threeNodes())
	if applied, _ := a.d.writes(); len(applied) != 0 {
		t.Errorf("replica b wrote %v; want nothing: the load balancer exists", applied)
	}
	if n := len(a.d.stored()); n != 1 {
		t.Errorf("%d load balancers in the cloud, want 1: a miss must be confirmed before a create", n)
	}
	if n := b.d.lists.Load(); n != 1 {
		t.Errorf("replica b listed %d times, want 1 (within the TTL)", n)
	}
}

// TestCacheKeptCurrentByWrites checks that Apply and Delete through the
// Cache update what it answers, without another read.
func TestCacheKeptCurrentByWrites(t *testing.T) {
	f, svc, _ := withLoadBalancer(t, loadbalancer.CacheOptions{})
	checkLBCalls(t, f.d, lbCalls{List: 1, Apply: 1}, "create: the miss by tags answered by the List the look-up made")
	four := append(threeNodes(), node("n4", "10.0.0.4"))
	if err := f.r.UpdateLoadBalancer(t.Context(), "c1", svc, four); err != nil {
		t.Fatal(err)
	}
	got, err := f.cache.Find(t.Context(), selector(svc))
	if err != nil || len(got) != 1 {
		t.Fatalf("Find = %v, %v; want the one load balancer", got, err)
	}
	if diff := cmp.Diff(onlyLB(t, f.d.memDriver), got[0], cmpOpts); diff != "" {
		t.Errorf("after an Apply, the cached load balancer differs from the cloud's (-cloud +cache):\n%s", diff)
	}
	mustEnsure(t, f.r, "c1", svc, four)
	checkLBCalls(t, f.d, lbCalls{List: 1, Apply: 2}, "the Apply's result answers the next look-ups: no read, no write")
	if err := f.r.EnsureLoadBalancerDeleted(t.Context(), "c1", svc); err != nil {
		t.Fatal(err)
	}
	if _, exists, err := f.r.GetLoadBalancer(t.Context(), "c1", svc); exists || err != nil {
		t.Errorf("GetLoadBalancer after the delete = (%v, %v), want (false, nil)", exists, err)
	}
	checkLBCalls(t, f.d, lbCalls{List: 1, Find: 1, Apply: 2, Delete: 1}, "deleted: the look-up by tags misses, and the cloud confirms it")
}

// TestCacheWriteErrorAsksTheCloud checks that after a failed Apply or
// Delete the next look-up of that load balancer asks the cloud, which may
// have changed, instead of answering from the Cache; and that after a
// write refused before it changed anything (throttle.ErrRefused: the
// governor's refusal, the fake's rate limit; loadbalancer.ErrRefused, the
// same value, from a provider's Driver) it does not, while a plain
// throttled error (a cloud's 429, which may come half-way) or a 409 the
// Driver does not mark still asks.
func TestCacheWriteErrorAsksTheCloud(t *testing.T) {
	refused := func() error {
		return fmt.Errorf("governor: refused: %w%w", throttle.ErrRefused, api.NewRetryError("", time.Second))
	}
	throttled := func() error { return api.NewRetryError("HTTP 429", time.Second) }
	driverRefused := func() error {
		return fmt.Errorf("HTTP 409 Conflict: the listener is immutable: %w", loadbalancer.ErrRefused)
	}
	busyRefused := func() error {
		// A minute: more than Options.MaxBusyWait, so the call stops at once.
		return errors.Join(errors.New("HTTP 409 Conflict"), loadbalancer.Busy(time.Minute, "PENDING_UPDATE"), loadbalancer.ErrRefused)
	}
	conflict := func() error { return errors.New("HTTP 409 Conflict: the listener is immutable") }
	tests := []struct {
		name      string
		reason    string
		lost      bool // the write takes effect, its answer is lost
		del       bool // the failing write is a Delete
		fail      func() error
		trusted   bool // the look-up after it is answered from the list
		wantWrite []loadbalancer.ActionKind
		exists    bool
	}{
		{name: "refused apply", reason: "nothing changed, and the error says so: the list still vouches for it", fail: refused, trusted: true, wantWrite: kinds(loadbalancer.ActionAddBackends), exists: true},
		{name: "refused delete", reason: "it still exists, and the error says nothing changed", del: true, fail: refused, trusted: true, exists: true},
		{name: "throttled apply", reason: "a 429 may come after part of the change: ask", fail: throttled, wantWrite: kinds(loadbalancer.ActionAddBackends), exists: true},
		{name: "driver's refused apply", reason: "a provider's Driver wraps loadbalancer.ErrRefused in its 409: the list still vouches for it", fail: driverRefused, trusted: true, wantWrite: kinds(loadbalancer.ActionAddBackends), exists: true},
		{name: "driver's busy refusal", reason: "a 409 while busy, with loadbalancer.ErrRefused: nothing changed", fail: busyRefused, trusted: true, wantWrite: kinds(loadbalancer.ActionAddBackends), exists: true},
		{name: "driver's refused delete", reason: "a 409 with loadbalancer.ErrRefused: it still exists, unchanged", del: true, fail: driverRefused, trusted: true, exists: true},
		{name: "unmarked 409", reason: "the Driver does not say nothing changed: ask", fail: conflict, wantWrite: kinds(loadbalancer.ActionAddBackends), exists: true},
		{name: "failed apply", reason: "nothing changed: the next Ensure writes again", wantWrite: kinds(loadbalancer.ActionAddBackends), exists: true},
		{name: "lost apply answer", reason: "it changed: the next Ensure sees the change and writes nothing", lost: true, exists: true},
		{name: "failed delete", reason: "it still exists: the cloud says so", del: true, exists: true},
		{name: "lost delete answer", reason: "it is gone: the cloud says so", del: true, lost: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, svc, _ := withLoadBalancer(t, loadbalancer.CacheOptions{})
			four := append(threeNodes(), node("n4", "10.0.0.4"))
			f.d.writes()
			boom := func() error { return errors.New("HTTP 500") }
			if tt.fail != nil {
				boom = tt.fail
			}
			if tt.lost {
				f.d.loseAnswers.Store(true)
			} else {
				f.d.onApply = func(loadbalancer.Action) error { return boom() }
				f.d.onDelete = func(*loadbalancer.LoadBalancer) error { return boom() }
			}
			var err error
			if tt.del {
				err = f.r.EnsureLoadBalancerDeleted(t.Context(), "c1", svc)
			} else {
				err = f.r.UpdateLoadBalancer(t.Context(), "c1", svc, four)
			}
			if err == nil {
				t.Fatal("the write succeeded; want the injected failure")
			}
			f.d.loseAnswers.Store(false)
			f.d.onApply, f.d.onDelete = nil, nil
			f.d.writes()
			finds := f.d.calls().Find
			_, exists, err := f.r.GetLoadBalancer(t.Context(), "c1", svc)
			if exists != tt.exists || err != nil {
				t.Errorf("GetLoadBalancer = (%v, %v), want (%v, nil): %s", exists, err, tt.exists, tt.reason)
			}
			switch got := f.d.calls().Find - finds; {
			case tt.trusted && got != 0:
				t.Errorf("GetLoadBalancer after the refused write made %d Finds; want none: %s", got, tt.reason)
			case !tt.trusted && got < 1:
				t.Errorf("GetLoadBalancer after the failed write made %d Finds; want the cloud asked", got)
			}
			if !tt.del {
				mustEnsure(t, f.r, "c1", svc, four)
				if applied, _ := f.d.writes(); !cmp.Equal(tt.wantWrite, applied) {
					t.Errorf("Ensure after the failed write wrote %v, want %v: %s", applied, tt.wantWrite, tt.reason)
				}
			}
		})
	}
}

// TestCacheProvisioningAsksTheCloud checks that a load balancer listed
// without an address is looked up in the cloud until it has one, so its
// address shows at once, not a TTL later.
func TestCacheProvisioningAsksTheCloud(t *testing.T) {
	f, svc, lb := withLoadBalancer(t, loadbalancer.CacheOptions{})
	lb.Ingress = nil // provisioning, as the cloud reports it
	f.d.put(lb)
	f.cache.Invalidate()
	get := func() *v1.LoadBalancerStatus {
		t.Helper()
		st, exists, err := f.r.GetLoadBalancer(t.Context(), "c1", svc)
		if !exists || err != nil {
			t.Fatalf("GetLoadBalancer = (%v, %v, %v), want it to exist", st, exists, err)
		}
		return st
	}
	before := f.d.calls()
	if st := get(); len(st.Ingress) != 0 {
		t.Errorf("status while provisioning = %v, want no ingress", st)
	}
	checkLBCalls(t, f.d, lbCalls{List: before.List + 1, Find: before.Find + 1, Apply: before.Apply}, "listed without an address: asked again")
	lb.Ingress = []loadbalancer.Ingress{{IP: "203.0.113.7"}}
	f.d.put(lb) // provisioned
	if st := get(); len(st.Ingress) != 1 || st.Ingress[0].IP != "203.0.113.7" {
		t.Errorf("status once provisioned = %v, want 203.0.113.7 at once", st)
	}
	get()
	checkLBCalls(t, f.d, lbCalls{List: before.List + 1, Find: before.Find + 2, Apply: before.Apply}, "the address the direct Find saw answers the next look-ups")
}

// TestCacheCopies checks that what Find and List return belongs to the
// caller: changing it changes nothing the Cache answers later.
func TestCacheCopies(t *testing.T) {
	f, svc, want := withLoadBalancer(t, loadbalancer.CacheOptions{})
	getters := []func() ([]*loadbalancer.LoadBalancer, error){
		func() ([]*loadbalancer.LoadBalancer, error) { return f.cache.Find(t.Context(), selector(svc)) },
		func() ([]*loadbalancer.LoadBalancer, error) { return f.cache.List(t.Context()) },
	}
	one := func(get func() ([]*loadbalancer.LoadBalancer, error)) *loadbalancer.LoadBalancer {
		t.Helper()
		got, err := get()
		if err != nil || len(got) != 1 {
			t.Fatalf("got %v, %v; want one load balancer", got, err)
		}
		return got[0]
	}
	for _, get := range getters {
		got := one(get)
		got.Tags["x"] = "y"
		got.Spec.Backends[0].NodeName = "changed"
		got.Ingress[0].IP = "192.0.2.1"
		got.Name = "changed"
	}
	for _, get := range getters {
		if diff := cmp.Diff(want, one(get), cmpOpts); diff != "" {
			t.Errorf("after the caller changed an earlier answer (-cloud +cache):\n%s", diff)
		}
	}
	checkLBCalls(t, f.d, lbCalls{List: 1, Apply: 1}, "every look-up after the create answered from the Cache")
}

// TestCacheTTL checks the default TTL (one minute from the List's start)
// and Invalidate.
func TestCacheTTL(t *testing.T) {
	f := newCacheFixture(t, loadbalancer.CacheOptions{}) // zero TTL: the default, one minute
	list := func() {
		t.Helper()
		if _, err := f.cache.List(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	list()
	f.clock.Advance(time.Minute - time.Nanosecond)
	list()
	checkLBCalls(t, f.d, lbCalls{List: 1}, "still within the default TTL of one minute")
	f.clock.Advance(time.Nanosecond)
	list()
	list()
	checkLBCalls(t, f.d, lbCalls{List: 2}, "a TTL after the first List started, the list is refreshed once")
	f.cache.Invalidate()
	list()
	checkLBCalls(t, f.d, lbCalls{List: 3}, "Invalidate drops the list")
}

// TestCacheListErrors checks that a failed List is an error for every
// look-up, never an empty answer, and is remembered for ErrorTTL.
func TestCacheListErrors(t *testing.T) {
	tests := []struct {
		name      string
		reason    string
		err       error
		errorTTL  time.Duration
		wantLists int
	}{
		{name: "remembered", reason: "the failure is remembered for ErrorTTL: one List, no direct Find", err: errors.New("HTTP 503"), errorTTL: 10 * time.Second, wantLists: 1},
		{name: "not remembered", reason: "a negative ErrorTTL: every look-up lists again", err: errors.New("HTTP 503"), errorTTL: -1, wantLists: 3},
		{name: "not-found list", reason: "a List failing with ErrNotFound says nothing of one load balancer", err: fmt.Errorf("list: %w", loadbalancer.ErrNotFound), errorTTL: -1, wantLists: 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, svc, _ := withLoadBalancer(t, loadbalancer.CacheOptions{ErrorTTL: tt.errorTTL})
			f.d.writes()
			f.cache.Invalidate()
			f.d.setHooks(nil, nil, tt.err)
			before := f.d.calls()
			_, exists, err := f.r.GetLoadBalancer(t.Context(), "c1", svc)
			if err == nil || !strings.Contains(err.Error(), tt.err.Error()) {
				t.Errorf("GetLoadBalancer = (%v, %v), want the List error", exists, err)
			}
			if errors.Is(err, loadbalancer.ErrNotFound) {
				t.Errorf("GetLoadBalancer error %v matches ErrNotFound: a failed List is not gone", err)
			}
			for _, q := range []loadbalancer.Query{{ID: "lb-1"}, {Name: "nothing"}} {
				if lbs, err := f.cache.Find(t.Context(), q); err == nil || lbs != nil {
					t.Errorf("Find(%+v) = (%v, %v), want (nil, an error)", q, lbs, err)
				}
			}
			checkLBCalls(t, f.d, lbCalls{List: before.List + tt.wantLists, Find: before.Find, Apply: before.Apply}, tt.reason)
			f.d.setHooks(nil, nil, nil)
			f.clock.Advance(10 * time.Second)
			if _, exists, err := f.r.GetLoadBalancer(t.Context(), "c1", svc); !exists || err != nil {
				t.Errorf("after ErrorTTL: GetLoadBalancer = (%v, %v), want (true, nil)", exists, err)
			}
		})
	}
}

// throttled is a driver error saying "throttled, retry after d", as a
// Driver is documented to return it.
func throttled(d time.Duration) error {
	return fmt.Errorf("acme API: HTTP 429: %w", api.NewRetryError("too many requests", d))
}

// checkThrottled fails unless err is a throttled error asking for retry
// after want.
func checkThrottled(t *testing.T, what string, err error, want time.Duration) {
	t.Helper()
	var re *api.RetryError
	if !errors.As(err, &re) || re.RetryAfter() != want {
		t.Errorf("%s: error %v: want an *api.RetryError with RetryAfter %v first", what, err, want)
	}
}

// lookupAll makes one look-up of each kind on the Cache and returns their
// errors.
func lookupAll(t *testing.T, c *loadbalancer.Cache) map[string]error {
	t.Helper()
	_, byID := c.Find(t.Context(), loadbalancer.Query{ID: "lb-1"})
	_, byTags := c.Find(t.Context(), selector(lbService()))
	_, list := c.List(t.Context())
	return map[string]error{"Find by ID": byID, "Find by tags": byTags, "List": list}
}

// TestCacheThrottledListBacksOff checks the back-off after a throttled
// List: no List before the delay has passed, for max(ErrorTTL, D), every
// look-up in the window answered without a driver call with a RetryError
// carrying the time left, and Invalidate does not cut it short.
func TestCacheThrottledListBacksOff(t *testing.T) {
	tests := []struct {
		name     string
		reason   string
		errorTTL time.Duration
		retry    time.Duration
		window   time.Duration // expected back-off
	}{
		{name: "delay longer than ErrorTTL", reason: "the cloud's delay wins over the shorter ErrorTTL", errorTTL: 5 * time.Second, retry: 30 * time.Second, window: 30 * time.Second},
		{name: "ErrorTTL longer than the delay", reason: "a failure is still remembered for ErrorTTL", errorTTL: time.Minute, retry: 10 * time.Second, window: time.Minute},
		{name: "ErrorTTL disabled", reason: "a negative ErrorTTL disables remembering failures, not the cloud's back-off", errorTTL: -1, retry: 10 * time.Second, window: 10 * time.Second},
		{name: "default ErrorTTL", reason: "zero ErrorTTL is the documented default, five seconds, longer than this delay", retry: time.Second, window: 5 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newCacheFixture(t, loadbalancer.CacheOptions{ErrorTTL: tt.errorTTL})
			f.d.setHooks(nil, nil, errors.Join(loadbalancer.ErrNotFound, throttled(tt.retry)))
			_, err := f.cache.Find(t.Context(), loadbalancer.Query{ID: "lb-1"})
			checkThrottled(t, "the throttled List's own look-up", err, tt.retry)
			checkLBCalls(t, f.d, lbCalls{List: 1}, "one List, and no direct Find after it failed")
			for _, at := range []time.Duration{tt.window / 3, tt.window - time.Millisecond} {
				f.clock.Advance(at - f.clock.elapsed())
				f.cache.Invalidate() // keeps the cloud's back-off
				for what, err := range lookupAll(t, f.cache) {
					checkThrottled(t, fmt.Sprintf("%s %v after the throttle", what, at), err, tt.window-at)
					if errors.Is(err, loadbalancer.ErrNotFound) {
						t.Errorf("%s: error %v matches ErrNotFound: a throttled List is not gone", what, err)
					}
				}
			}
			checkLBCalls(t, f.d, lbCalls{List: 1}, "no driver call inside the back-off window: "+tt.reason)
			f.d.setHooks(nil, nil, nil)
			f.clock.Advance(tt.window - f.clock.elapsed())
			for what, err := range lookupAll(t, f.cache) {
				if err != nil {
					t.Errorf("%s once the window has passed: %v", what, err)
				}
			}
			checkLBCalls(t, f.d, lbCalls{List: 2, Find: 1}, "one List once the window has passed, which answers the first look-up's miss; the second miss confirmed")
		})
	}
}

// TestCacheThrottledDirectFind checks that a throttled direct Find returns
// the Driver's error unchanged: throttled, never "none".
func TestCacheThrottledDirectFind(t *testing.T) {
	f := newCacheFixture(t, loadbalancer.CacheOptions{})
	if _, err := f.cache.List(t.Context()); err != nil {
		t.Fatal(err)
	}
	thr := &throttledFind{listingDriver: f.d, err: throttled(3 * time.Second)}
	c, err := loadbalancer.NewCache(thr, loadbalancer.CacheOptions{Clock: f.clock})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.List(t.Context()); err != nil { // listed: a miss then asks the cloud
		t.Fatal(err)
	}
	lbs, err := c.Find(t.Context(), selector(lbService()))
	if lbs != nil || !errors.Is(err, thr.err) {
		t.Errorf("Find = (%v, %v), want (nil, the driver's throttle unchanged)", lbs, err)
	}
	checkThrottled(t, "Find", err, 3*time.Second)
}

// throttledFind is a listingDriver whose Find fails with err.
type throttledFind struct {
	*listingDriver
	err error
}

func (d *throttledFind) Find(context.Context, loadbalancer.Query) ([]*loadbalancer.LoadBalancer, error) {
	return nil, d.err
}

// TestCacheConcurrentLookupsShareOneList starts many look-ups while the
// first List is still running (it waits until every worker has asked) and
// checks they share that one List.
func TestCacheConcurrentLookupsShareOneList(t *testing.T) {
	const workers = 32
	f := newCacheFixture(t, loadbalancer.CacheOptions{})
	for i := range workers {
		mustEnsure(t, f.r, "c1", numberedService(i), threeNodes())
	}
	f.cache.Invalidate()
	var reads atomic.Int64
	allAsked := make(chan struct{})
	f.clock.setOnNow(func() {
		if reads.Add(1) == workers {
			close(allAsked)
		}
	})
	f.d.setHooks(func(ctx context.Context) error {
		select {
		case <-allAsked: // every worker is now the lister or waiting for it
			return nil
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(30 * time.Second): // deadlock guard, not a timing assertion
			return errors.New("workers never all asked: look-ups are not running concurrently")
		}
	}, nil, nil)
	before := f.d.calls()
	var wg sync.WaitGroup
	for i := range workers {
		wg.Go(func() {
			if _, exists, err := f.r.GetLoadBalancer(t.Context(), "c1", numberedService(i)); !exists || err != nil {
				t.Errorf("Service %d: GetLoadBalancer = (%v, %v), want (true, nil)", i, exists, err)
			}
		})
	}
	wg.Wait()
	checkLBCalls(t, f.d, lbCalls{List: before.List + 1, Find: before.Find, Apply: before.Apply}, "concurrent look-ups share one List")
}

// TestCacheCanceledLookups checks that a waiting look-up returns when its
// own context ends, and that when the look-up running List gives up, a
// waiter with a live context lists again instead of failing.
func TestCacheCanceledLookups(t *testing.T) {
	tests := []struct {
		name      string
		reason    string
		cancel    string // "waiter" or "lister"
		wantLists int64
	}{
		{name: "waiter canceled", reason: "the waiter stops with its ctx.Err(); the List goes on", cancel: "waiter", wantLists: 1},
		{name: "lister canceled", reason: "the canceled List is not remembered; the waiter lists again", cancel: "lister", wantLists: 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newCacheFixture(t, loadbalancer.CacheOptions{})
			listing, release := make(chan struct{}), make(chan struct{})
			var first atomic.Bool
			f.d.setHooks(func(ctx context.Context) error {
				if !first.CompareAndSwap(false, true) {
					return nil
				}
				close(listing)
				select {
				case <-release:
					return nil
				case <-ctx.Done():
					return ctx.Err()
				}
			}, nil, nil)
			listerCtx, cancelLister := context.WithCancel(t.Context())
			listerErr := make(chan error, 1)
			go func() {
				_, err := f.cache.List(listerCtx)
				listerErr <- err
			}()
			<-listing
			waiterCtx, cancelWaiter := context.WithCancel(t.Context())
			var reads atomic.Int64
			f.clock.setOnNow(func() {
				if reads.Add(1) == 1 { // the waiter has looked and is about to wait
					if tt.cancel == "lister" {
						go cancelLister()
					} else {
						go cancelWaiter()
					}
				}
			})
			_, err := f.cache.Find(waiterCtx, loadbalancer.Query{ID: "lb-1"})
			f.clock.setOnNow(nil)
			if tt.cancel == "waiter" {
				if !errors.Is(err, context.Canceled) {
					t.Errorf("waiter: error %v, want context.Canceled", err)
				}
				close(release)
				if err := <-listerErr; err != nil {
					t.Errorf("lister: %v", err)
				}
			} else {
				if err != nil {
					t.Errorf("waiter: %v, want an answer from its own List", err)
				}
				if err := <-listerErr; !errors.Is(err, context.Canceled) {
					t.Errorf("lister: error %v, want context.Canceled", err)
				}
			}
			cancelWaiter()
			cancelLister()
			if got := f.d.lists.Load(); got != tt.wantLists {
				t.Errorf("%d Lists, want %d: %s", got, tt.wantLists, tt.reason)
			}
		})
	}
}

// TestCacheWriteDuringList checks that a List which read the cloud before
// an Apply through the Cache, and returned after it, does not undo that
// Apply in the Cache: the next look-up answers with the written state,
// without a read.
func TestCacheWriteDuringList(t *testing.T) {
	f, svc, lb := withLoadBalancer(t, loadbalancer.CacheOptions{})
	f.clock.Advance(time.Minute) // the next look-up lists
	read, release := holdFirstList(f.d)
	listed := make(chan error, 1)
	go func() {
		_, err := f.cache.List(t.Context())
		listed <- err
	}()
	<-read // the List has read three backends
	add := loadbalancer.Action{Kind: loadbalancer.ActionAddBackends, LoadBalancerID: lb.ID,
		Backends: []loadbalancer.Backend{{NodeName: "n4", ProviderID: "test://n4", IPv4: addr("10.0.0.4")}}}
	if _, err := f.cache.Apply(t.Context(), add); err != nil {
		t.Fatal(err)
	}
	close(release)
	if err := <-listed; err != nil {
		t.Fatal(err)
	}
	before := f.d.calls()
	got, err := f.cache.Find(t.Context(), selector(svc))
	if err != nil || len(got) != 1 {
		t.Fatalf("Find = %v, %v; want one load balancer", got, err)
	}
	if n := len(got[0].Spec.Backends); n != 4 {
		t.Errorf("Find after the List returned: %d backends, want 4: the List read before the Apply undid it", n)
	}
	checkLBCalls(t, f.d, before, "answered from the Cache")
}

// TestCacheInvalidateDuringList checks that a List that started before an
// Invalidate is not kept: the look-up made after Invalidate lists again.
func TestCacheInvalidateDuringList(t *testing.T) {
	f := newCacheFixture(t, loadbalancer.CacheOptions{})
	read, release := holdFirstList(f.d)
	before := make(chan error, 1)
	go func() {
		_, err := f.cache.List(t.Context())
		before <- err
	}()
	<-read // the first List has read an empty cloud
	mustEnsureDirect(t, f, lbService())
	f.cache.Invalidate()
	after := make(chan []*loadbalancer.LoadBalancer, 1)
	go func() {
		lbs, err := f.cache.List(t.Context())
		if err != nil {
			t.Errorf("List after Invalidate: %v", err)
		}
		after <- lbs
	}()
	select {
	case lbs := <-after:
		if len(lbs) != 1 {
			t.Errorf("List after Invalidate = %d load balancers, want the one created", len(lbs))
		}
	case <-time.After(10 * time.Second): // a deadlock guard, not a timing assertion
		t.Error("the look-up made after Invalidate joined the List that started before it")
	}
	close(release)
	if err := <-before; err != nil {
		t.Error(err)
	}
	if lbs, err := f.cache.List(t.Context()); err != nil || len(lbs) != 1 {
		t.Errorf("List once both Lists ended = %d, %v; want 1: the stale List was kept", len(lbs), err)
	}
	if n := f.d.lists.Load(); n != 2 {
		t.Errorf("%d Lists, want 2: one before Invalidate, one after", n)
	}
}

// holdFirstList makes d's next List read the cloud, close read, and wait
// for release to be closed before it returns; later Lists do not wait.
func holdFirstList(d *listingDriver) (read, release chan struct{}) {
	read, release = make(chan struct{}), make(chan struct{})
	var once sync.Once
	d.setHooks(nil, func() {
		first := false
		once.Do(func() { first = true }) // not the wait itself: a later List must not block on it
		if first {
			close(read)
			<-release
		}
	}, nil)
	return read, release
}

// mustEnsureDirect creates svc's load balancer through a Reconciler over
// the Cache's Driver itself: behind the Cache's back.
func mustEnsureDirect(t *testing.T, f *cacheFixture, svc *v1.Service) {
	t.Helper()
	mustEnsure(t, newReconcilerOver(t, f.d.memDriver, loadbalancer.Options{}), "c1", svc, threeNodes())
}

// TestCacheListPanics checks that a panicking List reaches its caller and
// leaves neither waiters blocked nor the Cache stuck.
func TestCacheListPanics(t *testing.T) {
	f := newCacheFixture(t, loadbalancer.CacheOptions{ErrorTTL: -1})
	var first atomic.Bool
	f.d.setHooks(func(context.Context) error {
		if first.CompareAndSwap(false, true) {
			panic("driver bug")
		}
		return nil
	}, nil, nil)
	func() {
		defer func() {
			if r := recover(); r != "driver bug" {
				t.Errorf("recovered %v, want the driver's panic to propagate", r)
			}
		}()
		_, _ = f.cache.List(t.Context())
	}()
	if _, err := f.cache.List(t.Context()); err != nil {
		t.Errorf("after the panic: List = %v, want nil", err)
	}
	checkLBCalls(t, f.d, lbCalls{List: 2}, "the Cache lists again after a panic")
}

func TestNewCacheErrors(t *testing.T) {
	var typedNil *listingDriver
	tests := []struct {
		name   string
		reason string
		driver loadbalancer.ListDriver
		opts   loadbalancer.CacheOptions
		msg    string
	}{
		{name: "nil driver", reason: "nothing to cache", msg: "loadbalancer.NewCache: driver is nil: expected a non-nil loadbalancer.ListDriver"},
		{name: "typed nil driver", reason: "a nil *T in the interface would panic at the first List", driver: typedNil, msg: "loadbalancer.NewCache: driver is a nil *loadbalancer_test.listingDriver: expected a non-nil loadbalancer.ListDriver"},
		{name: "negative TTL", reason: "a list remembered for no time is no cache: an error, not clamped", driver: newListingDriver(), opts: loadbalancer.CacheOptions{TTL: -time.Second}, msg: "loadbalancer.NewCache: CacheOptions.TTL -1s: expected 0 (the default, 1m0s) or positive"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := loadbalancer.NewCache(tt.driver, tt.opts)
			if c != nil || err == nil || err.Error() != tt.msg {
				t.Errorf("NewCache = (%v, %v): expected nil and the error %q (%s)", c, err, tt.msg, tt.reason)
			}
		})
	}
}

// TestCacheUpdateTrustsAMiss: UpdateLoadBalancer of a Service whose load
// balancer is not in the list answers ErrNotFound from the list, with no
// cloud call (it creates nothing), while EnsureLoadBalancer for the same
// Service still asks the cloud before it creates.
func TestCacheUpdateTrustsAMiss(t *testing.T) {
	f, _, _ := withLoadBalancer(t, loadbalancer.CacheOptions{TTL: time.Minute})
	before := lbCalls{List: 1, Apply: 1}
	none := numberedService(7)
	err := f.r.UpdateLoadBalancer(t.Context(), "c1", none, threeNodes())
	if !errors.Is(err, loadbalancer.ErrNotFound) {
		t.Errorf("UpdateLoadBalancer of a Service without a load balancer: %v, want ErrNotFound", err)
	}
	checkLBCalls(t, f.d, before, "Update's miss answered from the list: no cloud call")
	mustEnsure(t, f.r, "c1", none, threeNodes())
	checkLBCalls(t, f.d, lbCalls{List: 1, Find: 1, Apply: 2}, "Ensure's miss by tags confirmed by the cloud, then the create")
}

// TestCacheGetAfterUpdateMiss: the GetLoadBalancer the service controller
// makes after a failed UpdateLoadBalancer is answered from the list when
// that Update found none, once; any other GetLoadBalancer, and one for a
// Service being deleted (whose "does not exist" would skip the delete),
// asks the cloud.
func TestCacheGetAfterUpdateMiss(t *testing.T) {
	tests := []struct {
		name      string
		update    bool // an UpdateLoadBalancer that finds none comes first
		deleting  bool // the Service has a deletion timestamp at the Get
		wantFinds int
		reason    string
	}{
		{name: "after Update's miss", update: true, wantFinds: 0, reason: "the controller only asks whether Update's failure matters"},
		{name: "without Update", wantFinds: 1, reason: "a miss is confirmed by the cloud"},
		{name: "being deleted", update: true, deleting: true, wantFinds: 1, reason: "its \"does not exist\" skips the delete: never from the list"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, _, _ := withLoadBalancer(t, loadbalancer.CacheOptions{TTL: time.Minute})
			none := numberedService(7)
			if tt.update {
				if err := f.r.UpdateLoadBalancer(t.Context(), "c1", none, threeNodes()); !errors.Is(err, loadbalancer.ErrNotFound) {
					t.Fatalf("UpdateLoadBalancer: %v, want ErrNotFound", err)
				}
			}
			if tt.deleting {
				now := metav1.Now()
				none.DeletionTimestamp = &now
			}
			finds := f.d.calls().Find
			for i := range 2 {
				_, exists, err := f.r.GetLoadBalancer(t.Context(), "c1", none)
				if exists || err != nil {
					t.Fatalf("GetLoadBalancer %d = (%v, %v), want (false, nil)", i+1, exists, err)
				}
				want := tt.wantFinds + i // the second Get follows no Update: it asks
				if got := f.d.calls().Find - finds; got != want {
					t.Errorf("after GetLoadBalancer %d: %d Finds, want %d: %s", i+1, got, want, tt.reason)
				}
			}
		})
	}
}

// TestCacheDerivesNilAnswers: an Apply the Driver answers without a load
// balancer took effect exactly as the action says; the Cache lays it over
// its own copy, so the look-ups after it are answered from the list (no
// Find), and a converged Ensure then reads and writes nothing. A busy
// answer that took effect (a BusyError without ErrRefused) is kept the
// same way.
func TestCacheDerivesNilAnswers(t *testing.T) {
	for _, tc := range []struct {
		name, reason string
		full, busy   bool
	}{
		{name: "nil", reason: "answered (nil, nil): derived"},
		{name: "nil and busy", reason: "answered (nil, Busy): applied, the cloud busy; derived", busy: true},
		{name: "busy with the load balancer", reason: "answered (lb, Busy): applied, the cloud busy; lb kept", full: true, busy: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, svc, _ := withLoadBalancer(t, loadbalancer.CacheOptions{})
			f.d.nilAnswers.Store(!tc.full)
			f.d.busyAnswers.Store(tc.busy)
			four := append(threeNodes(), node("n4", "10.0.0.4"))
			before := f.d.calls()
			if err := f.r.UpdateLoadBalancer(t.Context(), "c1", svc, four); err != nil {
				t.Fatalf("UpdateLoadBalancer: %v", err)
			}
			if _, exists, err := f.r.GetLoadBalancer(t.Context(), "c1", svc); !exists || err != nil {
				t.Fatalf("GetLoadBalancer = %v, %v; want true, nil", exists, err)
			}
			mustEnsure(t, f.r, "c1", svc, four)
			want := before
			want.Apply++
			checkLBCalls(t, f.d, want, "one write; the Get and the Ensure answered from the derived copy: "+tc.reason)
			if n := len(onlyLB(t, f.d.memDriver).Spec.Backends); n != 4 {
				t.Errorf("%d backends in the cloud; want 4", n)
			}
		})
	}

	// A load balancer the list does not hold: nothing to derive from, in
	// doubt, and the look-up asks the cloud.
	f, _, lb := withLoadBalancer(t, loadbalancer.CacheOptions{})
	other := lb.Clone()
	other.ID, other.Name = "lb-behind", "behind"
	f.d.put(other)
	f.d.nilAnswers.Store(true)
	if _, err := f.cache.Apply(t.Context(), loadbalancer.Action{Kind: loadbalancer.ActionUpdateSourceRanges, LoadBalancerID: other.ID}); err != nil {
		t.Fatalf("Apply: %v", err)
	}
	finds := f.d.calls().Find
	if got, err := f.cache.Find(t.Context(), loadbalancer.Query{ID: other.ID}); err != nil || len(got) != 1 {
		t.Fatalf("Find = %v, %v; want the load balancer", got, err)
	}
	if got := f.d.calls().Find - finds; got != 1 {
		t.Errorf("the look-up of a load balancer written without an answer, unknown to the list, made %d Finds; want 1", got)
	}
}
