package loadbalancer

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"time"

	"k8s.io/utils/clock"

	"github.com/ccmkit/ccmkit/internal/check"
	"github.com/ccmkit/ccmkit/internal/cloudmetrics"
	"github.com/ccmkit/ccmkit/internal/listcache"
	"github.com/ccmkit/ccmkit/internal/staleness"
	"github.com/ccmkit/ccmkit/provider"
)

// The defaults of CacheOptions, stated in its field docs.
const (
	defaultCacheTTL      = time.Minute
	defaultCacheErrorTTL = 5 * time.Second
)

// The labels of the Cache's look-ups in internal/cloudmetrics (see the
// package doc, Metrics): of load balancers and of backend pools.
const (
	cacheName     = "loadbalancers"
	poolCacheName = "backendpools"
)

// ErrInconsistent is wrapped by the errors a Cache returns when its
// ListDriver's List (or ListPools) answers an ID more than once: the Cache
// refuses that list rather than pick one of the copies (see Cache,
// Inconsistent lists). It is a driver bug, never "none" or "gone". It is
// the same value as instances.ErrInconsistent.
var ErrInconsistent = listcache.ErrInconsistent

// CacheOptions configures a Cache. The zero value is usable: a one-minute
// TTL, failed List calls remembered for five seconds (longer when the cloud
// asks for a longer back-off), and the real clock.
type CacheOptions struct {
	// TTL is how long one successful List serves look-ups, measured from
	// the moment that List call started. 0 means one minute; negative is an
	// error.
	TTL time.Duration
	// ErrorTTL is how long a failed List is remembered: look-ups in that
	// period return the same error without calling List again, so a cloud
	// outage costs one List per ErrorTTL rather than one per look-up. 0
	// means five seconds; negative means none: a failure is not remembered
	// and every look-up after it lists again. A List that failed because
	// its caller's context ended is never remembered. A throttled List (its
	// error wraps an *api.RetryError with a positive RetryAfter D) is
	// remembered for max(ErrorTTL, D) whatever ErrorTTL is; see Cache.
	ErrorTTL time.Duration
	// Clock is the Cache's clock: TTL and ErrorTTL are measured on it.
	// Nil means the real clock; tests pass a
	// k8s.io/utils/clock/testing.FakeClock and step it. It is read
	// concurrently and with the Cache's lock held, so it must be safe for
	// concurrent use and must not call the Cache.
	Clock clock.Clock
}

// withDefaults returns o with its zero fields set to their documented
// defaults.
func (o CacheOptions) withDefaults() CacheOptions {
	o.TTL = cmp.Or(o.TTL, defaultCacheTTL)
	o.ErrorTTL = cmp.Or(o.ErrorTTL, defaultCacheErrorTTL)
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	return o
}

// Cache is a ListDriver that answers Find from the result of one List call
// on the wrapped ListDriver, refreshed when it is older than TTL, and kept
// current from the results of its own Apply and Delete. Give it to
// NewReconciler as the Driver: with N LoadBalancer Services, a node sync
// (the service controller calls UpdateLoadBalancer for each) is one List
// per TTL and the backend writes, instead of N Finds and the writes.
//
// Find answers a Query (exactly one field set, matched as Driver.Find
// documents: the ID; every tag with its value; the exact name) from the
// list when the list has at least one match and every match is one the
// Cache can vouch for. Otherwise it calls the wrapped Find with the same
// Query and returns that answer, remembering what it found:
//
//   - A miss is never trusted. When the list has no match, Find asks the
//     cloud, so a load balancer created after the List (by a second
//     replica, a failed-over leader, a concurrent creator, a creation whose
//     answer was lost) is found, and the Reconciler creates one only after
//     the cloud itself said "none": the Cache never causes a duplicate.
//     A List the look-up itself started (there was no fresh list, and
//     none running) is such an answer: it began after the look-up did,
//     as a Find would have. The other exceptions are the Reconciler's own look-ups whose "none"
//     neither leads to a creation nor says a load balancer is gone:
//     UpdateLoadBalancer's (it creates nothing; after its ErrNotFound the
//     service controller asks GetLoadBalancer only whether the failure
//     matters, and that one look-up is answered from the list too, unless
//     the Service is being deleted: see Reconciler.GetLoadBalancer), and
//     the look-up by name that follows a
//     look-up by ownership tags the cloud answered (see
//     Reconciler.EnsureLoadBalancer): there the list's miss is the answer.
//     With Capabilities.UniqueNames, EnsureLoadBalancer's look-up by tags
//     is one too: the create that follows its miss is refused when a
//     load balancer of that name exists (ErrNameTaken), and the
//     Reconciler then asks the cloud.
//   - A match without Ingress (still provisioning) is asked for again, so
//     the address shows at the service controller's next call, not a TTL
//     later.
//   - A match whose last Apply or Delete through this Cache failed is
//     asked for again: a failed or half-done call may have changed it.
//
// Exactly one List runs at a time: look-ups that find no fresh list while a
// List is running wait for it and share its result (a waiter whose own
// context ends stops waiting with ctx.Err(); when the List fails only
// because its caller's context ended, waiters with live contexts start a
// new one).
//
// Errors are never "gone": a failed List is returned by Find and List as
// an error (wrapped, and never matching ErrNotFound), never as an empty
// result. Throttling: when List fails with an error wrapping an
// *api.RetryError (k8s.io/cloud-provider/api) whose RetryAfter D is
// positive, the Cache makes no List call before D has passed and remembers
// the failure for max(ErrorTTL, D), even across Invalidate; every Find and
// List in that window returns at once, without calling the wrapped Driver,
// an error that wraps the List error and whose first *api.RetryError
// (errors.As) has RetryAfter equal to the time left in the window. The
// errors of a direct Find, Apply and Delete are the Driver's, unchanged.
//
// Inconsistent lists: a List or ListPools answer that holds an ID more
// than once, as an exact copy or not, is refused as a whole, never
// indexed by picking one copy. Two copies may differ, and which one is
// the cloud's is unknown; even equal ones, were both returned by a Find
// by tags, would look to the Reconciler like two load balancers of one
// Service, whose ownership and duplicate handling may then change or
// delete one of them, the real one. An ID is the object's identity, so
// such a list is a Driver bug (a paging error, two answers merged), the
// other objects of it cannot be trusted either, and the fix belongs in
// the Driver (which is where a paged API that repeats an item must drop
// the repeat). Every Find and List (FindPools and ListPools for a pool
// list) then returns an error wrapping ErrInconsistent that names the
// IDs and their names (the first few, with a count of the rest); the
// list is a failed List: not kept, remembered for ErrorTTL, listed again
// by the first look-up after that, and counted in
// ccmkit_cloud_inconsistent_answers_total{capability="loadbalancer",
// operation="List" or "ListPools"}. Names are not checked: two load
// balancers may share one (see Capabilities.UniqueNames). The Driver's
// direct Find answers are returned as they are; the Reconciler refuses
// one that holds an ID twice in the same way, counted with operation
// "Find".
//
// Apply and Delete call the wrapped Driver. When the call took effect (no
// error, or a *BusyError without ErrRefused: see Driver) the Cache keeps
// the result: the load balancer Apply returned replaces the one with its
// ID (a created one is added); an Apply answered without a load balancer
// (the Driver contract allows it for every kind but ActionCreate) is laid
// over the Cache's own copy of its target with the package's Apply, or,
// when the Cache holds none, marks the target in doubt; a deleted one is
// removed (a Delete answered busy is still in progress: in doubt). On an
// error the load balancer the call named is marked in doubt, so the next
// look-up that would answer with it asks the cloud, unless the error
// wraps ErrRefused, saying the call was refused before it changed
// anything (a provider's Driver on a 409 or 429 that changed nothing, a
// refusal of package governor, or of the fake cloud's rate limit): then
// the Cache keeps vouching for it. A result that comes in while a List is
// running is laid over that List's result, so a List that read the cloud
// before a write never undoes it in the Cache.
//
// Staleness: a change made other than through this Cache (a second
// replica's writes, the cloud's console, the cloud itself moving an
// address) is seen by the first List that starts after it: at most TTL
// after the change (when a look-up comes then), or at once after
// Invalidate. Until then a load balancer the list has is reported as that
// List, or this Cache's last write or direct Find, saw it: its tags, name,
// Spec and Ingress may be late; one deleted behind the Cache's back is
// still reported (a write to it fails, and the look-up after that asks the
// cloud); and one created behind its back is missing from a Find whose
// Query the list matches with another load balancer (never from one the
// list matches with none: that asks the cloud). Call Invalidate to drop
// the list at once, for example when the cloud notifies the provider of a
// change. MaxStaleness reports that window.
//
// Pools: when the wrapped Driver is a PoolListDriver, the Cache is one
// too, and caches the shared backend pools in the same way, in a list of
// their own (one ListPools per TTL): FindPools is answered from it under
// the rules of Find (a pool is always settled), ApplyPool and DeletePool
// keep it current, and Invalidate drops it too. A pool the cloud refused
// to delete because it is in use (ErrPoolInUse) is known unchanged, not in
// doubt. So after a Node change the Reconciler's pool look-up of every
// Service but the first is answered from the list, already holding the
// first one's write. Over a Driver that cannot list pools, the pool
// methods return an error wrapping ErrUnsupported, and NewReconciler
// refuses Capabilities.SharedBackendPools.
//
// Metrics: a Cache records its calls to the wrapped Driver and each Find,
// List, FindPools and ListPools as a cache hit or miss (see the package
// doc, Metrics).
//
// Every load balancer and pool the Cache returns is a deep copy that
// belongs to the caller. A Cache never starts goroutines; List runs on the goroutine of
// the look-up that needed it. It is safe for concurrent use if the wrapped
// ListDriver is. Create it with NewCache; the zero value is not usable.
type Cache struct {
	selfMetered                //nolint:unused // a marker found by cloudmetrics.MetersItself through its promoted method: it records its calls to d; see meteredDriver
	d           ListDriver     // the wrapped ListDriver, metered
	pd          PoolListDriver // the same, when it lists pools (metered); else nil
	lbs         *listCache[*LoadBalancer]
	pools       *listCache[*Pool] // nil with pd
	given       ListDriver        // d as given, unmetered (MaxStaleness)
	ttl         time.Duration     // CacheOptions.TTL, with its default: of both lists
}

var (
	_ PoolListDriver     = (*Cache)(nil)
	_ provider.Staleness = (*Cache)(nil)
)

// NewCache returns a Cache over d. It returns an error when d is nil (a
// typed nil included) or opts.TTL is negative. It starts nothing and does
// not call d. When d is a PoolListDriver the Cache caches its pools too.
func NewCache(d ListDriver, opts CacheOptions) (*Cache, error) {
	if err := check.Driver("loadbalancer.NewCache", d, "loadbalancer.ListDriver"); err != nil {
		return nil, err
	}
	if opts.TTL < 0 {
		return nil, fmt.Errorf("loadbalancer.NewCache: CacheOptions.TTL %v: expected 0 (the default, %v) or positive", opts.TTL, defaultCacheTTL)
	}
	opts = opts.withDefaults()
	m := metered{d}
	c := &Cache{d: m, given: d, ttl: opts.TTL, lbs: newListCache("load balancers", cacheName, "List", m.List,
		func(ctx context.Context, q query) ([]*LoadBalancer, error) {
			return m.Find(ctx, Query{ID: q.id, Name: q.name, Tags: q.tags})
		}, opts)}
	if _, ok := d.(PoolListDriver); ok {
		c.pd = m
		c.pools = newListCache("backend pools", poolCacheName, "ListPools", m.ListPools,
			func(ctx context.Context, q query) ([]*Pool, error) {
				return m.FindPools(ctx, PoolQuery{ID: q.id, Tags: q.tags})
			}, opts)
	}
	return c, nil
}

// MaxStaleness implements provider.Staleness: the longest a Find, List,
// FindPools or ListPools may answer from a List that no longer matches
// the cloud, CacheOptions.TTL (one minute by default; the load-balancer
// and the pool lists share it; see Cache, Staleness), plus the
// MaxStaleness of the wrapped ListDriver when it implements
// provider.Staleness (0 for a Driver that reads the cloud on every
// call). ErrorTTL does not count: a failed List is returned as an error,
// never as a stale answer. What the Cache learns from its own writes and
// direct Finds is newer than its list, and is dropped with it. It is safe
// for concurrent use and calls nothing of the wrapped ListDriver but its
// MaxStaleness.
func (c *Cache) MaxStaleness() time.Duration { return c.ttl + staleness.Of(c.given) }

// Find returns the load balancers matching q: from the list when it can
// vouch for every match, otherwise the wrapped Driver's Find answer,
// unchanged (see Cache). A Query with no field or more than one set goes
// to the wrapped Find as it is. A failed List is returned as an error.
func (c *Cache) Find(ctx context.Context, q Query) ([]*LoadBalancer, error) {
	return c.lbs.lookup(ctx, query{id: q.ID, name: q.Name, tags: q.Tags})
}

// Apply performs a with the wrapped Driver and returns its answer
// unchanged, keeping the Cache current (see Cache): an answer without a
// load balancer to an action that took effect is derived from the
// Cache's own copy.
func (c *Cache) Apply(ctx context.Context, a Action) (*LoadBalancer, error) {
	lb, err := c.d.Apply(ctx, a)
	target := a.LoadBalancerID
	if a.Kind == ActionCreate {
		target = ""
	}
	if lb == nil && target != "" && (err == nil || appliedBusy(err)) {
		c.lbs.derivedWrite(target, func(old *LoadBalancer) (*LoadBalancer, error) { return Apply(old, a) })
	} else {
		c.lbs.written(target, lb, err)
	}
	return lb, err
}

// Delete deletes lb with the wrapped Driver and returns its error
// unchanged, keeping the Cache current (see Cache).
func (c *Cache) Delete(ctx context.Context, lb *LoadBalancer) error {
	err := c.d.Delete(ctx, lb)
	c.lbs.deleted(lb, err, false)
	return err
}

// List returns copies of every load balancer the Cache knows, in ID order,
// listing first when the list is missing or older than TTL. A failed List
// is returned as an error.
func (c *Cache) List(ctx context.Context) ([]*LoadBalancer, error) {
	return c.lbs.all(ctx)
}

// hasPools reports whether the Cache serves pools: its Driver is a
// PoolListDriver.
func (c *Cache) hasPools() bool { return c.pools != nil }

// errNoPools is the error of a pool method of a Cache whose Driver is not
// a PoolListDriver.
func (c *Cache) errNoPools() error {
	return fmt.Errorf("%w: load-balancer cache: the driver it wraps cannot list backend pools: expected a loadbalancer.PoolListDriver", ErrUnsupported)
}

// FindPools is Find for pools: answered from the pool list under the same
// rules (a miss is confirmed by the wrapped FindPools). Without pools (the
// wrapped Driver is not a PoolListDriver) it returns an error wrapping
// ErrUnsupported.
func (c *Cache) FindPools(ctx context.Context, q PoolQuery) ([]*Pool, error) {
	if c.pools == nil {
		return nil, c.errNoPools()
	}
	return c.pools.lookup(ctx, query{id: q.ID, tags: q.Tags})
}

// ApplyPool is Apply for pools: the wrapped ApplyPool's answer, unchanged,
// kept in the pool list.
func (c *Cache) ApplyPool(ctx context.Context, a PoolAction) (*Pool, error) {
	if c.pools == nil {
		return nil, c.errNoPools()
	}
	p, err := c.pd.ApplyPool(ctx, a)
	target := a.PoolID
	if a.Kind == PoolActionCreate {
		target = ""
	}
	c.pools.written(target, p, err)
	return p, err
}

// DeletePool is Delete for pools: the wrapped DeletePool's error,
// unchanged. A pool the cloud refused to delete because it is in use
// (ErrPoolInUse) is as it was: the Cache keeps vouching for it.
func (c *Cache) DeletePool(ctx context.Context, p *Pool) error {
	if c.pools == nil {
		return c.errNoPools()
	}
	err := c.pd.DeletePool(ctx, p)
	c.pools.deleted(p, err, errors.Is(err, ErrPoolInUse))
	return err
}

// ListPools is List for pools.
func (c *Cache) ListPools(ctx context.Context) ([]*Pool, error) {
	if c.pools == nil {
		return nil, c.errNoPools()
	}
	return c.pools.all(ctx)
}

// Invalidate drops the lists (of load balancers and of pools), what the
// Cache learnt since, and any remembered List failure, so the next
// look-up lists again; a throttled List's back-off is kept (the cloud
// asked for no List before it ends; see Cache). A List already running
// when Invalidate is called may have read the cloud from before the
// change that prompted it: its result still answers the look-ups that
// were waiting for it, but it is not kept, and look-ups that start after
// Invalidate run a new List.
func (c *Cache) Invalidate() {
	c.lbs.invalidate()
	if c.pools != nil {
		c.pools.invalidate()
	}
}

// capability is the capability label of the Reconciler's cloud calls in
// internal/cloudmetrics (see the package doc, "Metrics").
const capability = "loadbalancer"

// selfMetered marks the Cache as recording its own cloud calls, so that
// a Reconciler over it (or over a provider's Driver embedding it) does not
// meter them again (meteredDriver). The alias keeps the embedded field
// unexported.
type selfMetered = cloudmetrics.SelfMetered //nolint:unused // embedded in Cache as a marker, found by cloudmetrics.MetersItself through its promoted method

// meteredDriver returns the Driver and PoolDriver (poolDriverOf d) a
// Reconciler calls for d: d itself when it records its own calls (a
// Cache, see selfMetered), else d metered.
func meteredDriver(d Driver) (Driver, PoolDriver) {
	pools := poolDriverOf(d)
	if cloudmetrics.MetersItself(d) {
		return d, pools
	}
	m := metered{d}
	if pools == nil {
		return m, nil
	}
	return m, m
}

// metered is d with each cloud call recorded under its method's name
// through cloudmetrics.Metered: the Driver a Reconciler calls (over a
// Driver that is no Cache) and the ListDriver, and PoolListDriver, a
// Cache calls. Its List and pool methods are called only when d has
// them. The Driver contract has no not-found error (Find reports none as
// an empty slice, Delete a gone load balancer as nil), so no error counts
// as not-found. An Apply or Delete answered busy and not refused (see
// Driver) took effect: it counts as "ok" (meterWrite). One refused because
// the load balancer was busy counts as "error", as the cloud answered it
// (a 409), and never as "throttled", the result of a RetryError, which
// stays the count of the cloud's rate limit.
type metered struct{ d Driver }

// meterWrite is cloudmetrics.Metered for a write (Apply, Delete) of
// metered: its busy answer that took effect (appliedBusy) is recorded as a
// success, and returned as it is.
func meterWrite[T any](ctx context.Context, operation string, f func(ctx context.Context) (T, error)) (T, error) {
	var busy error
	v, err := cloudmetrics.Metered(ctx, capability, operation, func(ctx context.Context) (T, error) {
		v, err := f(ctx)
		if appliedBusy(err) {
			busy, err = err, nil
		}
		return v, err
	})
	if busy != nil {
		return v, busy
	}
	return v, err
}

var (
	_ PoolListDriver = metered{}
	_ PoolListDriver = (*Cache)(nil)
)

func (m metered) Find(ctx context.Context, q Query) ([]*LoadBalancer, error) {
	return cloudmetrics.Metered(ctx, capability, "Find", func(ctx context.Context) ([]*LoadBalancer, error) { return m.d.Find(ctx, q) })
}

func (m metered) Apply(ctx context.Context, a Action) (*LoadBalancer, error) {
	return meterWrite(ctx, "Apply", func(ctx context.Context) (*LoadBalancer, error) { return m.d.Apply(ctx, a) })
}

func (m metered) Delete(ctx context.Context, lb *LoadBalancer) error {
	_, err := meterWrite(ctx, "Delete", func(ctx context.Context) (struct{}, error) { return struct{}{}, m.d.Delete(ctx, lb) })
	return err
}

func (m metered) List(ctx context.Context) ([]*LoadBalancer, error) {
	return cloudmetrics.Metered(ctx, capability, "List", func(ctx context.Context) ([]*LoadBalancer, error) { return m.d.(ListDriver).List(ctx) })
}

func (m metered) FindPools(ctx context.Context, q PoolQuery) ([]*Pool, error) {
	return cloudmetrics.Metered(ctx, capability, "FindPools", func(ctx context.Context) ([]*Pool, error) { return m.d.(PoolDriver).FindPools(ctx, q) })
}

func (m metered) ApplyPool(ctx context.Context, a PoolAction) (*Pool, error) {
	return cloudmetrics.Metered(ctx, capability, "ApplyPool", func(ctx context.Context) (*Pool, error) { return m.d.(PoolDriver).ApplyPool(ctx, a) })
}

func (m metered) DeletePool(ctx context.Context, p *Pool) error {
	return cloudmetrics.Meter(ctx, capability, "DeletePool", func(ctx context.Context) error { return m.d.(PoolDriver).DeletePool(ctx, p) })
}

func (m metered) ListPools(ctx context.Context) ([]*Pool, error) {
	return cloudmetrics.Metered(ctx, capability, "ListPools", func(ctx context.Context) ([]*Pool, error) { return m.d.(PoolListDriver).ListPools(ctx) })
}
