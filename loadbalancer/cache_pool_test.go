package loadbalancer_test

import (
	"context"
	"errors"
	"slices"
	"sync/atomic"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/ccmkit/ccmkit/loadbalancer"
)

// listingPoolDriver is a listingDriver with the pools of a poolMemDriver
// over the same cloud, and a ListPools: the PoolListDriver a Cache caches
// pools for.
type listingPoolDriver struct {
	*listingDriver
	pools     *poolMemDriver
	poolLists atomic.Int64
}

var _ loadbalancer.PoolListDriver = (*listingPoolDriver)(nil)

func newListingPoolDriver() *listingPoolDriver {
	l := newListingDriver()
	return &listingPoolDriver{listingDriver: l, pools: &poolMemDriver{memDriver: l.memDriver, pools: map[string]*loadbalancer.Pool{}}}
}

// Apply is the poolMemDriver's, which refuses a reference to a missing pool.
func (d *listingPoolDriver) Apply(ctx context.Context, a loadbalancer.Action) (*loadbalancer.LoadBalancer, error) {
	return d.pools.Apply(ctx, a)
}

func (d *listingPoolDriver) FindPools(ctx context.Context, q loadbalancer.PoolQuery) ([]*loadbalancer.Pool, error) {
	return d.pools.FindPools(ctx, q)
}

func (d *listingPoolDriver) ApplyPool(ctx context.Context, a loadbalancer.PoolAction) (*loadbalancer.Pool, error) {
	return d.pools.ApplyPool(ctx, a)
}

func (d *listingPoolDriver) DeletePool(ctx context.Context, p *loadbalancer.Pool) error {
	return d.pools.DeletePool(ctx, p)
}

func (d *listingPoolDriver) ListPools(context.Context) ([]*loadbalancer.Pool, error) {
	d.poolLists.Add(1)
	var out []*loadbalancer.Pool
	for _, p := range d.pools.storedPools() {
		out = append(out, p)
	}
	return out, nil
}

// poolCalls are the pool calls a listingPoolDriver received.
type poolCalls struct {
	ListPools, FindPools int
	Writes               []string
}

func (d *listingPoolDriver) takePoolCalls() poolCalls {
	d.mu.Lock()
	finds := d.pools.poolFinds
	d.pools.poolFinds = 0
	d.mu.Unlock()
	return poolCalls{ListPools: int(d.poolLists.Swap(0)), FindPools: finds, Writes: d.pools.takePoolWrites()}
}

// newPooledCache returns a Reconciler with shared pools over a Cache over
// a new listingPoolDriver.
func newPooledCache(t *testing.T) (*loadbalancer.Reconciler, *loadbalancer.Cache, *listingPoolDriver) {
	t.Helper()
	d := newListingPoolDriver()
	clock := &fakeClock{t: clockStart}
	cache, err := loadbalancer.NewCache(d, loadbalancer.CacheOptions{Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	return newReconcilerOver(t, cache, loadbalancer.Options{Capabilities: pooledCaps, MaxThrottleWait: -1}), cache, d
}

// TestCachePooledNodeSync is the acceptance test of the pool cache: once N
// Services share a pool, a Node joining (UpdateLoadBalancer for each) is
// one pool write and no read at all.
func TestCachePooledNodeSync(t *testing.T) {
	const n = 20
	r, _, d := newPooledCache(t)
	svcs := services(n)
	for _, s := range svcs {
		mustEnsure(t, r, "c1", s, threeNodes()[:2])
	}
	got := d.takePoolCalls()
	// One ListPools, made by the first look-up, whose "none" is the
	// cloud's answer: no FindPools before the pool is created.
	if diff := cmp.Diff(poolCalls{ListPools: 1, Writes: []string{"CreatePool"}}, got); diff != "" {
		t.Errorf("bring-up of %d Services (-want +got):\n%s", n, diff)
	}
	lbs := d.calls()
	for _, s := range svcs {
		if err := r.UpdateLoadBalancer(t.Context(), "c1", s, threeNodes()); err != nil {
			t.Fatal(err)
		}
	}
	if diff := cmp.Diff(poolCalls{Writes: []string{"AddPoolBackends"}}, d.takePoolCalls()); diff != "" {
		t.Errorf("a Node joining %d Services (-want +got): one write, no read\n%s", n, diff)
	}
	if diff := cmp.Diff(lbs, d.calls()); diff != "" {
		t.Errorf("a Node joining: load-balancer calls (-before +after): want none\n%s", diff)
	}
}

// TestCachePoolMissIsConfirmed: a pool another replica created after the
// list is found by a direct FindPools, never created twice.
func TestCachePoolMissIsConfirmed(t *testing.T) {
	r, cache, d := newPooledCache(t)
	if _, err := cache.ListPools(t.Context()); err != nil { // an empty list
		t.Fatal(err)
	}
	other := newReconcilerOver(t, d, loadbalancer.Options{Capabilities: pooledCaps})
	svcs := services(2)
	mustEnsure(t, other, "c1", svcs[0], threeNodes()) // behind the Cache's back
	d.takePoolCalls()
	mustEnsure(t, r, "c1", svcs[1], threeNodes())
	if diff := cmp.Diff(poolCalls{FindPools: 1}, d.takePoolCalls()); diff != "" {
		t.Errorf("Ensure after another replica created the pool (-want +got): a direct FindPools, no new pool\n%s", diff)
	}
	if pools := d.pools.storedPools(); len(pools) != 1 {
		t.Errorf("%d pools; want 1", len(pools))
	}
}

// TestCachePoolInUseIsNoDoubt: deleting one of two users asks nothing of
// the pool (the list shows it in use); a delete the cloud refused
// (ErrPoolInUse) left the pool as it was, so the next look-up is still
// answered from the list; a delete that succeeded removes it from the
// list.
func TestCachePoolInUseIsNoDoubt(t *testing.T) {
	r, cache, d := newPooledCache(t)
	ctx := t.Context()
	svcs := services(2)
	for _, s := range svcs {
		mustEnsure(t, r, "c1", s, threeNodes())
	}
	d.takePoolCalls()
	if err := r.EnsureLoadBalancerDeleted(ctx, "c1", svcs[0]); err != nil {
		t.Fatal(err)
	}
	if got := d.takePoolCalls(); len(got.Writes) != 0 {
		t.Errorf("deleting one of two users over a Cache: pool writes %v; want none: the list shows the pool in use", got.Writes)
	}
	// A delete the cloud refuses leaves the pool known as it was.
	pools, err := cache.ListPools(ctx)
	if err != nil || len(pools) != 1 {
		t.Fatalf("ListPools = %v, %v", pools, err)
	}
	if err := cache.DeletePool(ctx, pools[0]); !errors.Is(err, loadbalancer.ErrPoolInUse) {
		t.Fatalf("DeletePool of the pool in use: %v; want ErrPoolInUse", err)
	}
	d.takePoolCalls()
	if err := r.UpdateLoadBalancer(ctx, "c1", svcs[1], threeNodes()); err != nil {
		t.Fatal(err)
	}
	if got := d.takePoolCalls(); got.FindPools+got.ListPools != 0 {
		t.Errorf("Update after a refused pool delete: %+v; want no pool read", got)
	}
	if err := r.EnsureLoadBalancerDeleted(ctx, "c1", svcs[1]); err != nil {
		t.Fatal(err)
	}
	pools, err = cache.ListPools(ctx)
	if err != nil || len(pools) != 0 {
		t.Errorf("ListPools after the last user went = %v, %v; want none", pools, err)
	}
}

func TestCacheWithoutPools(t *testing.T) {
	cache, err := loadbalancer.NewCache(newListingDriver(), loadbalancer.CacheOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	for name, err := range map[string]error{
		"FindPools":  second(cache.FindPools(ctx, loadbalancer.PoolQuery{ID: "p"})),
		"ApplyPool":  second(cache.ApplyPool(ctx, loadbalancer.PoolAction{Kind: loadbalancer.PoolActionCreate})),
		"DeletePool": cache.DeletePool(ctx, &loadbalancer.Pool{ID: "p"}),
		"ListPools":  second(cache.ListPools(ctx)),
	} {
		if !errors.Is(err, loadbalancer.ErrUnsupported) {
			t.Errorf("%s of a Cache over a Driver without pools: %v; want ErrUnsupported", name, err)
		}
	}
	if _, err := loadbalancer.NewReconciler(cache, loadbalancer.Options{Capabilities: pooledCaps}); err == nil {
		t.Errorf("NewReconciler with SharedBackendPools over a Cache without pools: nil error; want one")
	}
	// Without SharedBackendPools, such a Cache is no pool driver: deleting
	// a Service asks nothing of pools.
	r := newReconcilerOver(t, cache, loadbalancer.Options{})
	if err := r.EnsureLoadBalancerDeleted(ctx, "c1", lbService()); err != nil {
		t.Errorf("EnsureLoadBalancerDeleted over a Cache without pools: %v; want nil", err)
	}
}

func second[T any](_ T, err error) error { return err }

// TestCacheListsPoolsApart: the pool list is its own, with its own List
// call, and Invalidate drops it too.
func TestCacheListsPoolsApart(t *testing.T) {
	r, cache, d := newPooledCache(t)
	ctx := t.Context()
	mustEnsure(t, r, "c1", services(1)[0], threeNodes())
	d.takePoolCalls()
	pools, err := cache.ListPools(ctx)
	if err != nil || len(pools) != 1 || d.takePoolCalls().ListPools != 0 {
		t.Fatalf("ListPools = %d pools, %v; want the created pool, from the list", len(pools), err)
	}
	pools[0].Spec.Backends = nil // the caller's copy
	cache.Invalidate()
	again, err := cache.ListPools(ctx)
	if err != nil || len(again) != 1 || len(again[0].Spec.Backends) != 3 {
		t.Fatalf("ListPools after Invalidate = %v, %v; want the pool with its 3 members", again, err)
	}
	if got := d.takePoolCalls().ListPools; got != 1 {
		t.Errorf("ListPools calls after Invalidate: %d; want 1", got)
	}
	if !slices.Equal(members(again[0]), []string{"n1", "n2", "n3"}) {
		t.Errorf("members %v", members(again[0]))
	}
}
