package loadbalancer_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/ccmkit/ccmkit/internal/cloudmetrics"
	"github.com/ccmkit/ccmkit/internal/listcache"
	"github.com/ccmkit/ccmkit/loadbalancer"
)

// repeating is a listingPoolDriver whose List and ListPools list one load
// balancer and one pool twice while set: a Driver over a paged API that
// repeats an item, or one that merges two answers. The copy has the name
// copyName when it is set.
type repeating struct {
	*listingPoolDriver
	repeatMu           sync.Mutex
	lbTwice, poolTwice string // the IDs listed twice ("": none)
	copyName           string
}

func (d *repeating) set(lbTwice, poolTwice string) {
	d.repeatMu.Lock()
	defer d.repeatMu.Unlock()
	d.lbTwice, d.poolTwice = lbTwice, poolTwice
}

func (d *repeating) List(ctx context.Context) ([]*loadbalancer.LoadBalancer, error) {
	lbs, err := d.listingPoolDriver.List(ctx)
	d.repeatMu.Lock()
	defer d.repeatMu.Unlock()
	return withCopy(lbs, d.lbTwice, func(lb *loadbalancer.LoadBalancer) *string { return &lb.ID }, func(lb *loadbalancer.LoadBalancer) *string { return &lb.Name }, d.copyName), err
}

func (d *repeating) ListPools(ctx context.Context) ([]*loadbalancer.Pool, error) {
	pools, err := d.listingPoolDriver.ListPools(ctx)
	d.repeatMu.Lock()
	defer d.repeatMu.Unlock()
	return withCopy(pools, d.poolTwice, func(p *loadbalancer.Pool) *string { return &p.ID }, func(p *loadbalancer.Pool) *string { return &p.Name }, d.copyName), err
}

// withCopy returns items with a copy of the one whose ID is id appended,
// renamed to name unless name is "".
func withCopy[T interface{ Clone() T }](items []T, id string, idOf, nameOf func(T) *string, name string) []T {
	for _, o := range items {
		if *idOf(o) == id {
			dup := o.Clone()
			if name != "" {
				*nameOf(dup) = name
			}
			return append(items, dup)
		}
	}
	return items
}

// inconsistentAnswers reads ccmkit_cloud_inconsistent_answers_total of the
// loadbalancer capability by operation.
func inconsistentAnswers(t *testing.T) map[string]float64 {
	t.Helper()
	c, err := cloudmetrics.Read()
	if err != nil {
		t.Fatal(err)
	}
	return c.InconsistentOf("loadbalancer")
}

// checkInconsistent checks that err wraps ErrInconsistent, is never "not
// found", and quotes every one of names.
func checkInconsistent(t *testing.T, what string, err error, names ...string) {
	t.Helper()
	if bad := listcache.CheckInconsistent(err, loadbalancer.ErrNotFound, names...); bad != nil {
		t.Errorf("%s: %v", what, bad)
	}
}

// TestCacheInconsistentList checks that a List or ListPools that lists an
// ID twice (an exact copy, or a copy under another name) is refused as a
// whole: every look-up of that kind fails with an error naming the ID and
// its names, never with two copies or one picked; the Reconciler writes
// nothing; the refusal is counted once and remembered for ErrorTTL; and
// once the Driver lists each ID once, the Cache answers from its list.
func TestCacheInconsistentList(t *testing.T) {
	for _, tc := range []struct {
		name     string
		copyName string
		reason   string
	}{
		{name: "exact copy", reason: "each ID once, copies included: a Driver over a paged API that repeats items drops them itself"},
		{name: "copy under another name", copyName: "lb-other", reason: "which copy is the cloud's is unknown"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := &repeating{listingPoolDriver: newListingPoolDriver(), copyName: tc.copyName}
			clock := &fakeClock{t: clockStart}
			const errorTTL = 10 * time.Second
			cache, err := loadbalancer.NewCache(d, loadbalancer.CacheOptions{Clock: clock, ErrorTTL: errorTTL})
			if err != nil {
				t.Fatal(err)
			}
			r := newReconcilerOver(t, cache, loadbalancer.Options{Capabilities: pooledCaps, MaxThrottleWait: -1})
			svc := lbService()
			mustEnsure(t, r, "c1", svc, threeNodes())
			lb := onlyLB(t, d.memDriver)
			var pool *loadbalancer.Pool
			for _, p := range d.pools.storedPools() {
				pool = p
			}
			if pool == nil {
				t.Fatal("no pool stored after EnsureLoadBalancer with SharedBackendPools")
			}
			d.set(lb.ID, pool.ID)
			cache.Invalidate()
			d.takePoolCalls()
			before, beforeCalls := inconsistentAnswers(t), d.calls()
			// checkCounts checks the Driver's lists since before, and that
			// the inconsistent answers counted are the first ones.
			checkCounts := func(lists int, why string) {
				t.Helper()
				checkLBCalls(t, d.listingDriver, lbCalls{List: beforeCalls.List + lists, Find: beforeCalls.Find, Apply: beforeCalls.Apply, Delete: beforeCalls.Delete}, why)
				if diff := cmp.Diff(poolCalls{ListPools: 1}, d.takePoolCalls()); diff != "" {
					t.Errorf("pool calls (-want +got):\n%s\n(%s)", diff, why)
				}
				if diff := cmp.Diff(map[string]float64{"List": 1, "ListPools": 1}, cloudmetrics.Since(inconsistentAnswers(t), before)); diff != "" {
					t.Errorf("ccmkit_cloud_inconsistent_answers_total (-want +got):\n%s\n(%s)", diff, why)
				}
			}
			lbNames := []string{lb.ID, lb.Name}
			if tc.copyName != "" {
				lbNames = append(lbNames, tc.copyName)
			}

			lbs, err := cache.Find(t.Context(), selector(svc))
			if lbs != nil {
				t.Errorf("Find by tags = %d load balancers, want none with the error: %s", len(lbs), tc.reason)
			}
			checkInconsistent(t, "Find by tags", err, lbNames...)
			_, err = cache.Find(t.Context(), loadbalancer.Query{ID: lb.ID})
			checkInconsistent(t, "Find by ID", err, lbNames...)
			_, err = cache.List(t.Context())
			checkInconsistent(t, "List", err, lbNames...)
			if err := r.UpdateLoadBalancer(t.Context(), "c1", svc, threeNodes()[:2]); !errors.Is(err, loadbalancer.ErrInconsistent) {
				t.Errorf("UpdateLoadBalancer = %v, want an ErrInconsistent error", err)
			}
			if _, err := r.EnsureLoadBalancer(t.Context(), "c1", svc, threeNodes()); !errors.Is(err, loadbalancer.ErrInconsistent) {
				t.Errorf("EnsureLoadBalancer = %v, want an ErrInconsistent error", err)
			}
			if err := r.EnsureLoadBalancerDeleted(t.Context(), "c1", svc); !errors.Is(err, loadbalancer.ErrInconsistent) {
				t.Errorf("EnsureLoadBalancerDeleted = %v, want an ErrInconsistent error, and nothing deleted", err)
			}
			_, err = cache.FindPools(t.Context(), loadbalancer.PoolQuery{ID: pool.ID})
			checkInconsistent(t, "FindPools", err, pool.ID, pool.Name)
			_, err = cache.ListPools(t.Context())
			checkInconsistent(t, "ListPools", err, pool.ID, pool.Name)

			checkCounts(1, "one List and one ListPools, refused and remembered for ErrorTTL: no direct Find, no write")
			d.set("", "") // the Driver is fixed
			clock.Advance(errorTTL - time.Nanosecond)
			if _, err := cache.Find(t.Context(), selector(svc)); !errors.Is(err, loadbalancer.ErrInconsistent) {
				t.Errorf("Find within ErrorTTL: error %v, want the remembered ErrInconsistent one", err)
			}
			clock.Advance(time.Nanosecond)
			lbs, err = cache.Find(t.Context(), selector(svc))
			if err != nil || len(lbs) != 1 || lbs[0].ID != lb.ID {
				t.Errorf("Find by tags after ErrorTTL = (%v, %v), want the one load balancer %s", lbs, err, lb.ID)
			}
			pools, err := cache.FindPools(t.Context(), loadbalancer.PoolQuery{ID: pool.ID})
			if err != nil || len(pools) != 1 || pools[0].ID != pool.ID {
				t.Errorf("FindPools after ErrorTTL = (%v, %v), want the one pool %s", pools, err, pool.ID)
			}
			checkCounts(2, "after ErrorTTL one List and one ListPools answer from their lists; consistent lists are not counted")
		})
	}
}
