package instances

import (
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
	// and every look-up after it lists again. A List that failed because its caller's context
	// ended is never remembered. A throttled List (its error wraps an
	// *api.RetryError with a positive RetryAfter D) is remembered for
	// max(ErrorTTL, D) whatever ErrorTTL is; see Cache.
	ErrorTTL time.Duration
	// Clock is the Cache's clock: TTL and ErrorTTL are measured on it.
	// Nil means the real clock; tests pass a
	// k8s.io/utils/clock/testing.FakeClock and step it. It is read
	// concurrently and with the Cache's lock held, so it must be safe for
	// concurrent use and must not call the Cache.
	Clock clock.Clock
}

// Cache is a Driver that answers GetByID and GetByName from the result of
// one List call on the wrapped ListDriver, refreshed when it is older than
// TTL. Wrap a ListDriver in a Cache and give the Cache to NewAdapter.
//
// Exactly one List runs at a time: look-ups that find no fresh list while a
// List is running wait for it and share its result (a waiter whose own
// context ends stops waiting with ctx.Err(); when the List fails only
// because its caller's context ended, waiters with live contexts start a
// new one).
//
// "Gone" is never decided from the list alone. An instance that is missing
// from the list or listed as StateTerminated is looked up directly with
// the wrapped GetByID or GetByName, and that answer is returned. A failed
// List is returned as an error (wrapped, and never matching ErrNotFound),
// never as "not found".
//
// Inconsistent lists: the Cache never picks one of two instances for one
// Node. The upstream node controller matches a Node to an instance by
// spec.providerID, or by name while the Node has none
// (k8s.io/cloud-provider controllers/node/node_controller.go, syncNode
// and getNodeModifiersFromCloudProvider: the instance's provider ID is
// written to the Node once, never reconciled, with its zone, region,
// type and addresses), and the node-lifecycle controller deletes or taints
// a Node from the state of the instance it matched
// (controllers/nodelifecycle/node_lifecycle_controller.go, MonitorNodes:
// ensureNodeExistsByProviderID, shutdownInCloudProvider). A picked
// instance may be another VM's: its Node would get that VM's addresses
// and zone, keep its provider ID for good, and be deleted or tainted
// shut down from that VM's state. So:
//
//   - A List that holds an ID more than once, under two names, with two
//     States, or as an exact copy, is refused as a whole: the ID is the
//     instance's identity (Instance.ID is unique within the provider), so
//     the list is a Driver bug (a paging error, two regions merged, a
//     mapping bug), no copy can be trusted over the other, and the fix is
//     in the Driver, which is where a paged API that repeats an item must
//     drop the repeat. Every look-up (GetByID, GetByName, List) returns
//     an error wrapping ErrInconsistent that names the IDs and their
//     names (the first few, with a count of the rest); the list is not
//     kept: it is a failed List, remembered for ErrorTTL, and the first
//     look-up after that lists again.
//   - A name held by more than one live (not terminated) instance can be
//     the cloud's true state where names are not unique (Driver.GetByName
//     must then fail too): the list is kept, the look-ups by ID, which
//     every initialized Node uses, are answered from it, and only
//     GetByName of that name fails, without a direct call, with an error
//     wrapping ErrInconsistent that names the instances' IDs, until a List
//     no longer shares the name. A name held by one live instance and by
//     terminated ones is no conflict (a replacement).
//
// Each such List is counted in
// ccmkit_cloud_inconsistent_answers_total{capability="instances",
// operation="List"} (see the package doc, Metrics).
//
// Throttling: when List fails with an error wrapping an *api.RetryError
// (k8s.io/cloud-provider/api) whose RetryAfter D is positive, the Cache
// backs off: it makes no List call before D has passed, and remembers the
// failure for max(ErrorTTL, D), even across Invalidate. Every look-up in
// that window returns at once, without calling the wrapped Driver, an error
// that wraps the List error and whose first *api.RetryError (errors.As)
// has RetryAfter equal to the time left in the window. A direct GetByID or
// GetByName look-up that is throttled returns the Driver's error unchanged,
// so it stays a RetryError and never means "gone".
//
// Staleness: an instance found in the list is reported as it was when that
// List started, for at most TTL. Within that window a state change (running
// to stopped, or to terminated or deleted), and changed addresses, type,
// zone, region or labels are reported late; so InstanceExists may still say
// true for up to TTL after an instance is deleted, and the shutdown taint
// may come up to TTL late. Instances created after the List are found by the
// direct look-up (one direct call per look-up until the next List). Call
// Invalidate to drop the list at once, for example after the provider itself
// deleted or created an instance. MaxStaleness reports that window.
//
// Metrics: a Cache records its calls to the wrapped Driver and each
// look-up as a hit or a miss (see the package doc, Metrics).
//
// Instances returned share their Path, Addresses and Labels with the List
// result; callers must not modify them (the Adapter does not). A Cache never
// starts goroutines; List runs on the goroutine of the look-up that needed
// it. It is safe for concurrent use if the wrapped ListDriver is. Create it
// with NewCache; the zero value is not usable.
type Cache struct {
	selfMetered                            //nolint:unused // a marker found by cloudmetrics.MetersItself through its promoted method: it records its calls to d; see meteredDriver
	d           ListDriver                 // the wrapped ListDriver, metered
	lists       *listcache.List[*snapshot] // the List results: TTL, single flight, failures
	given       ListDriver                 // d as given, unmetered (MaxStaleness)
	ttl         time.Duration              // CacheOptions.TTL, with its default
}

var (
	_ ListDriver         = (*Cache)(nil)
	_ provider.Staleness = (*Cache)(nil)
)

// NewCache returns a Cache over d. It returns an error when d is nil (a
// typed nil included) or opts.TTL is negative. It starts nothing and does
// not call d.
func NewCache(d ListDriver, opts CacheOptions) (*Cache, error) {
	if err := check.Driver("instances.NewCache", d, "instances.ListDriver"); err != nil {
		return nil, err
	}
	if opts.TTL < 0 {
		return nil, fmt.Errorf("instances.NewCache: CacheOptions.TTL %v: expected 0 (the default, %v) or positive", opts.TTL, defaultCacheTTL)
	}
	opts = opts.withDefaults()
	c := &Cache{d: metered{d}, given: d, ttl: opts.TTL}
	c.lists = listcache.New[*snapshot](listcache.Options{TTL: opts.TTL, ErrorTTL: opts.ErrorTTL, Clock: opts.Clock,
		Err: listError, Name: "instances cache: List"})
	return c, nil
}

// withDefaults returns o with its zero fields set to their documented
// defaults.
func (o CacheOptions) withDefaults() CacheOptions {
	if o.TTL == 0 {
		o.TTL = defaultCacheTTL
	}
	if o.ErrorTTL == 0 {
		o.ErrorTTL = defaultCacheErrorTTL
	}
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	return o
}

// GetByID returns the listed instance with ID id.ID when it is not
// terminated; otherwise it returns the wrapped Driver's GetByID answer
// unchanged. A failed List, an inconsistent one included, is returned as
// an error; see Cache.
func (c *Cache) GetByID(ctx context.Context, id provider.ProviderID) (Instance, error) {
	s, fresh, err := c.snapshot(ctx)
	if err != nil {
		cloudmetrics.CacheLookup(cacheName, false)
		return Instance{}, err
	}
	i, ok := s.byID[id.ID]
	hit := ok && s.items[i].State != StateTerminated
	cloudmetrics.CacheLookup(cacheName, hit && fresh)
	if hit {
		return s.items[i], nil
	}
	return c.d.GetByID(ctx, id)
}

// GetByName returns the one live (not terminated) listed instance named
// name; when there is none, it returns the wrapped Driver's GetByName
// answer unchanged. When the list has more than one, it returns an error
// wrapping ErrInconsistent naming their IDs. A failed List is returned as
// an error; see Cache.
func (c *Cache) GetByName(ctx context.Context, name string) (Instance, error) {
	s, fresh, err := c.snapshot(ctx)
	if err != nil {
		cloudmetrics.CacheLookup(cacheName, false)
		return Instance{}, err
	}
	i, hit := s.byName[name]
	shared := s.shared[name]
	cloudmetrics.CacheLookup(cacheName, (hit || shared != nil) && fresh)
	switch {
	case hit:
		return s.items[i], nil
	case shared != nil:
		return Instance{}, shared
	}
	return c.d.GetByName(ctx, name)
}

// List returns a copy of the cached list, listing first when it is missing
// or older than TTL. The Instances share their slices and maps with the
// wrapped List result; do not modify them.
func (c *Cache) List(ctx context.Context) ([]Instance, error) {
	s, fresh, err := c.snapshot(ctx)
	cloudmetrics.CacheLookup(cacheName, err == nil && fresh)
	if err != nil {
		return nil, err
	}
	return append([]Instance(nil), s.items...), nil
}

// Invalidate drops the cached list and any remembered List failure, so the
// next look-up lists again; a throttled List's back-off is kept (the cloud
// asked for no List before it ends; see Cache). A List already running when
// Invalidate is called may have read the state from before the change that
// prompted it: its result still answers the look-ups that were waiting for
// it, but it is not kept, and look-ups that start after Invalidate run a new
// List.
func (c *Cache) Invalidate() { c.lists.Invalidate() }

// MaxStaleness implements provider.Staleness: the longest a look-up may
// answer from a List that no longer matches the cloud, CacheOptions.TTL
// (one minute by default; see Cache, Staleness), plus the MaxStaleness
// of the wrapped ListDriver when it implements provider.Staleness (0 for
// a Driver that reads the cloud on every call). ErrorTTL does not count:
// a failed List is returned as an error, never as a stale answer, and
// the list it did not replace is not served past its TTL. Direct
// look-ups (GetByID, GetByName of the wrapped Driver) are as fresh as
// that Driver. It is safe for concurrent use and calls nothing of the
// wrapped ListDriver but its MaxStaleness.
func (c *Cache) MaxStaleness() time.Duration { return c.ttl + staleness.Of(c.given) }

// snapshot is one List result with its indexes. It is immutable once built.
type snapshot struct {
	items  []Instance
	byID   map[string]int   // index into items
	byName map[string]int   // index of the one live instance named so
	shared map[string]error // the error of each name held by more than one live instance
}

// newSnapshot indexes items, one List's answer, or returns the error
// wrapping ErrInconsistent of an answer that lists an ID more than once
// (see Cache, Inconsistent lists). An instance without an ID or a name is
// not indexed under it: its look-ups are direct.
func newSnapshot(items []Instance) (*snapshot, error) {
	if err := listcache.IDsOnce(items, instanceID, instanceName); err != nil {
		return nil, err
	}
	s := &snapshot{
		items:  items,
		byID:   make(map[string]int, len(items)),
		byName: make(map[string]int, len(items)),
	}
	for i, inst := range items {
		if inst.ID != "" {
			s.byID[inst.ID] = i
		}
		if name := liveName(inst); name != "" {
			s.byName[name] = i
		}
	}
	for _, r := range listcache.Repeats(items, liveName, instanceID) {
		if s.shared == nil {
			s.shared = map[string]error{}
		}
		s.shared[r.Key] = sharedName(r)
		delete(s.byName, r.Key)
	}
	return s, nil
}

// instanceID, instanceName and liveName are the keys the Cache indexes
// on: liveName is the name of an instance that is not terminated, the
// one a look-up by name may answer with.
func instanceID(i Instance) string   { return i.ID }
func instanceName(i Instance) string { return i.Name }
func liveName(i Instance) string {
	if i.State == StateTerminated {
		return ""
	}
	return i.Name
}

// sharedName returns the error of a look-up of r.Key, a name the List
// gave to more than one live instance: it wraps ErrInconsistent and names
// their IDs.
func sharedName(r listcache.Repeat) error {
	err := listcache.Inconsistent([]listcache.Repeat{r}, "name", "ID",
		"each name held by one live instance at most, so that a Node without a provider ID matches one instance")
	return fmt.Errorf("instances cache: %w", err)
}

// snapshot returns a fresh list, running or joining the one List call;
// cached reports that the list was already in the Cache (no List was
// run or waited for).
func (c *Cache) snapshot(ctx context.Context) (s *snapshot, cached bool, err error) {
	s, from, err := c.lists.Get(ctx, c.run)
	return s, from == listcache.Cached, err
}

// run is the one List call snapshot starts.
func (c *Cache) run() listcache.Run[*snapshot] {
	return listcache.Run[*snapshot]{List: c.listSnapshot}
}

// listSnapshot is the List of the Cache's list: the wrapped List, indexed.
func (c *Cache) listSnapshot(ctx context.Context) (*snapshot, error) {
	items, err := c.d.List(ctx)
	if err != nil {
		return nil, err
	}
	s, err := newSnapshot(items)
	if err != nil || s.shared != nil {
		cloudmetrics.Inconsistent(capability, "List")
	}
	return s, err
}

// listError wraps the error of a failed List. Not-found from List says
// nothing about one instance: the text is kept and the sentinel dropped,
// so that it is never read as "gone" (the list cache restores a
// throttle's RetryError).
func listError(err error) error {
	if errors.Is(err, ErrNotFound) {
		return fmt.Errorf("instances cache: listing instances: %v", err) //nolint:errorlint // drops ErrNotFound on purpose, see above
	}
	return fmt.Errorf("instances cache: listing instances: %w", err)
}
