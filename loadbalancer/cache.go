package loadbalancer

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/ccmkit/ccmkit/internal/check"
	"github.com/ccmkit/ccmkit/internal/cloudmetrics"
	"github.com/ccmkit/ccmkit/internal/throttle"
)

// The defaults of CacheOptions, stated in its field docs.
const (
	defaultCacheTTL      = time.Minute
	defaultCacheErrorTTL = 5 * time.Second
)

// cacheName labels the Cache's look-ups in internal/cloudmetrics (see the
// package doc, Metrics).
const cacheName = "loadbalancers"

// CacheOptions configures a Cache. The zero value is usable: a one-minute
// TTL, failed List calls remembered for five seconds (longer when the cloud
// asks for a longer back-off), and time.Now.
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
	// Now returns the current time; nil means time.Now. Tests inject a
	// fake clock here. It is called concurrently and with the Cache's lock
	// held, so it must be safe for concurrent use and must not call the
	// Cache.
	Now func() time.Time
}

// withDefaults returns o with its zero fields set to their documented
// defaults.
func (o CacheOptions) withDefaults() CacheOptions {
	o.TTL = cmp.Or(o.TTL, defaultCacheTTL)
	o.ErrorTTL = cmp.Or(o.ErrorTTL, defaultCacheErrorTTL)
	if o.Now == nil {
		o.Now = time.Now
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
// Apply and Delete call the wrapped Driver. On success the Cache keeps the
// result: the load balancer Apply returned replaces the one with its ID (a
// created one is added), a deleted one is removed. On an error the load
// balancer the call named is marked in doubt, so the next look-up that
// would answer with it asks the cloud. A result that comes in while a List
// is running is laid over that List's result, so a List that read the
// cloud before a write never undoes it in the Cache.
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
// change.
//
// Metrics: a Cache records its calls to the wrapped Driver and each Find
// and List as a cache hit or miss (see the package doc, Metrics).
//
// Every load balancer the Cache returns is a deep copy that belongs to the
// caller. A Cache never starts goroutines; List runs on the goroutine of
// the look-up that needed it. It is safe for concurrent use if the wrapped
// ListDriver is. Create it with NewCache; the zero value is not usable.
type Cache struct {
	d        ListDriver // the wrapped ListDriver, metered
	ttl      time.Duration
	errorTTL time.Duration
	now      func() time.Time

	mu        sync.Mutex
	seq       uint64  // orders what the Cache observes: List starts, direct Find starts, write ends
	view      *view   // nil until the first successful List, and after Invalidate
	flight    *flight // the List in progress, or nil
	gen       uint64  // incremented by Invalidate; a List of an older generation is not kept
	failErr   error   // the last failed List, remembered until failUntil
	failUntil time.Time
	throttled bool // failErr was throttled: look-ups get a RetryError, Invalidate keeps it
}

var _ ListDriver = (*Cache)(nil)

// NewCache returns a Cache over d. It returns an error when d is nil (a
// typed nil included) or opts.TTL is negative. It starts nothing and does
// not call d.
func NewCache(d ListDriver, opts CacheOptions) (*Cache, error) {
	if err := check.Driver("loadbalancer.NewCache", d, "loadbalancer.ListDriver"); err != nil {
		return nil, err
	}
	if opts.TTL < 0 {
		return nil, fmt.Errorf("loadbalancer.NewCache: CacheOptions.TTL %v: expected 0 (the default, %v) or positive", opts.TTL, defaultCacheTTL)
	}
	opts = opts.withDefaults()
	return &Cache{d: meteredList{d}, ttl: opts.TTL, errorTTL: opts.ErrorTTL, now: opts.Now}, nil
}

// Find returns the load balancers matching q: from the list when it can
// vouch for every match, otherwise the wrapped Driver's Find answer,
// unchanged (see Cache). A Query with no field or more than one set goes
// to the wrapped Find as it is. A failed List is returned as an error.
func (c *Cache) Find(ctx context.Context, q Query) ([]*LoadBalancer, error) {
	cloudmetrics.MarkAnswered(ctx)
	if !oneField(q) {
		cloudmetrics.CacheLookup(cacheName, false)
		return c.d.Find(ctx, q)
	}
	v, cached, err := c.fresh(ctx)
	if err != nil {
		cloudmetrics.CacheLookup(cacheName, false)
		return nil, err
	}
	c.mu.Lock()
	out, trusted := vouch(v.match(q))
	c.seq++
	at := c.seq
	c.mu.Unlock()
	cloudmetrics.CacheLookup(cacheName, trusted && cached)
	if trusted {
		return out, nil
	}
	return c.findDirect(ctx, q, at)
}

// oneField reports whether exactly one field of q is set, as the Driver
// contract requires.
func oneField(q Query) bool {
	n := 0
	for _, set := range []bool{q.ID != "", q.Name != "", len(q.Tags) > 0} {
		if set {
			n++
		}
	}
	return n == 1
}

// vouch returns copies of the load balancers of matches, and whether the
// Cache may answer with them: there is at least one, and none is in
// doubt or without Ingress (see Cache).
func vouch(matches []*entry) ([]*LoadBalancer, bool) {
	if len(matches) == 0 {
		return nil, false
	}
	out := make([]*LoadBalancer, len(matches))
	for i, r := range matches {
		if r.doubt || len(r.lb.Ingress) == 0 {
			return nil, false
		}
		out[i] = r.lb.Clone()
	}
	return out, true
}

// findDirect is the wrapped Find of q, begun at Cache.seq at; what it
// found is remembered.
func (c *Cache) findDirect(ctx context.Context, q Query, at uint64) ([]*LoadBalancer, error) {
	lbs, err := c.d.Find(ctx, q)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	var ps []patch
	seen := map[string]bool{}
	for _, lb := range lbs {
		if lb != nil && lb.ID != "" {
			ps = append(ps, patch{id: lb.ID, lb: lb.Clone(), at: at})
			seen[lb.ID] = true
		}
	}
	switch {
	case q.ID != "" && !seen[q.ID]:
		ps = append(ps, patch{id: q.ID, at: at}) // the cloud says it does not exist
	case c.view != nil && q.ID == "":
		for _, r := range c.view.match(q) {
			if !seen[r.lb.ID] {
				// Listed as a match, not found now: deleted or changed.
				ps = append(ps, patch{id: r.lb.ID, lb: r.lb, doubt: true, at: at})
			}
		}
	}
	c.observe(ps...)
	return lbs, nil
}

// Apply performs a with the wrapped Driver and returns its answer
// unchanged, keeping the Cache current (see Cache).
func (c *Cache) Apply(ctx context.Context, a Action) (*LoadBalancer, error) {
	cloudmetrics.MarkAnswered(ctx)
	lb, err := c.d.Apply(ctx, a)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.seq++
	var ps []patch
	if err == nil && lb != nil && lb.ID != "" {
		ps = append(ps, patch{id: lb.ID, lb: lb.Clone(), at: c.seq})
	}
	if a.Kind != ActionCreate && a.LoadBalancerID != "" && (err != nil || lb == nil || lb.ID != a.LoadBalancerID) {
		ps = append(ps, patch{id: a.LoadBalancerID, doubt: true, at: c.seq})
	}
	c.observe(ps...)
	return lb, err
}

// Delete deletes lb with the wrapped Driver and returns its error
// unchanged, keeping the Cache current (see Cache).
func (c *Cache) Delete(ctx context.Context, lb *LoadBalancer) error {
	cloudmetrics.MarkAnswered(ctx)
	err := c.d.Delete(ctx, lb)
	if lb == nil || lb.ID == "" {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.seq++
	p := patch{id: lb.ID, at: c.seq} // deleted
	if err != nil {
		p.lb, p.doubt = lb.Clone(), true
	}
	c.observe(p)
	return err
}

// List returns copies of every load balancer the Cache knows, in ID order,
// listing first when the list is missing or older than TTL. A failed List
// is returned as an error.
func (c *Cache) List(ctx context.Context) ([]*LoadBalancer, error) {
	cloudmetrics.MarkAnswered(ctx)
	v, cached, err := c.fresh(ctx)
	cloudmetrics.CacheLookup(cacheName, err == nil && cached)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]*LoadBalancer, 0, len(v.lbs))
	for _, r := range v.lbs {
		if r.lb != nil {
			out = append(out, r.lb.Clone())
		}
	}
	return sortedByID(out), nil
}

// Invalidate drops the list, what the Cache learnt since, and any
// remembered List failure, so the next look-up lists again; a throttled
// List's back-off is kept (the cloud asked for no List before it ends; see
// Cache). A List already running when Invalidate is called may have read
// the cloud from before the change that prompted it: its result still
// answers the look-ups that were waiting for it, but it is not kept, and
// look-ups that start after Invalidate run a new List.
func (c *Cache) Invalidate() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.view = nil
	if !c.throttled {
		c.failErr = nil
	}
	c.gen++
	c.flight = nil
}

// observe applies what the Cache learnt to the view and, when a List is
// running, remembers it to lay over that List's result (c.mu held).
func (c *Cache) observe(ps ...patch) {
	for _, p := range ps {
		if c.view != nil {
			c.view.apply(p)
		}
		if c.flight != nil {
			c.flight.patches = append(c.flight.patches, p)
		}
	}
}

// view is what the Cache knows of the cloud's load balancers: one List's
// result, with what the Cache observed since laid over it. It is guarded
// by Cache.mu.
type view struct {
	listed  uint64 // Cache.seq when its List started
	expires time.Time
	lbs     map[string]*entry // by ID
	byName  index             // name → IDs of live entries
	byTag   index             // tagKey → IDs of live entries
}

// entry is what a view holds of one load balancer ID.
type entry struct {
	lb    *LoadBalancer // the Cache's own copy; nil: deleted
	at    uint64        // Cache.seq of the observation
	doubt bool          // a failed write, or a direct Find, put it in doubt
}

// patch is one observation of a load balancer: as found or written (lb),
// deleted (lb nil), or in doubt (lb its last known state, if any).
type patch struct {
	id    string
	lb    *LoadBalancer
	doubt bool
	at    uint64 // Cache.seq: when a read began, or a write ended
}

// index maps a key to a set of IDs.
type index map[string]map[string]struct{}

func (ix index) add(key, id string) {
	if ix[key] == nil {
		ix[key] = map[string]struct{}{}
	}
	ix[key][id] = struct{}{}
}

func (ix index) remove(key, id string) {
	delete(ix[key], id)
	if len(ix[key]) == 0 {
		delete(ix, key)
	}
}

// tagKey is the byTag key of the tag k=v.
func tagKey(k, v string) string { return k + "\x00" + v }

// newView indexes items, the result of a List begun at Cache.seq listed,
// which serves until expires. Nil load balancers and those without an ID
// are left out: a look-up they would match asks the cloud.
func newView(items []*LoadBalancer, listed uint64, expires time.Time) *view {
	v := &view{listed: listed, expires: expires, lbs: make(map[string]*entry, len(items)), byName: index{}, byTag: index{}}
	for _, lb := range items {
		if lb == nil || lb.ID == "" {
			continue
		}
		// An ID listed twice is a Driver bug: the cloud decides.
		_, twice := v.lbs[lb.ID]
		v.set(lb.ID, entry{lb: lb, at: listed, doubt: twice})
	}
	return v
}

// apply lays p over v, unless v already knows something newer of p.id. A
// doubt keeps the load balancer v holds (to find the look-ups it would
// answer), or the one p carries when v holds none.
func (v *view) apply(p patch) {
	lb := p.lb
	if r := v.lbs[p.id]; p.doubt && r != nil && r.lb != nil {
		lb = r.lb
	}
	v.set(p.id, entry{lb: lb, at: p.at, doubt: p.doubt})
}

// set replaces the entry of id with r when r is newer than both the list
// and the entry, keeping the indexes.
func (v *view) set(id string, r entry) {
	old := v.lbs[id]
	if r.at < v.listed || (old != nil && r.at < old.at) {
		return
	}
	if old != nil && old.lb != nil {
		v.byName.remove(old.lb.Name, id)
		for k, val := range old.lb.Tags {
			v.byTag.remove(tagKey(k, val), id)
		}
	}
	v.lbs[id] = &r
	if r.lb != nil {
		v.byName.add(r.lb.Name, id)
		for k, val := range r.lb.Tags {
			v.byTag.add(tagKey(k, val), id)
		}
	}
}

// match returns the live entries matching q (exactly one field set), in
// ID order.
func (v *view) match(q Query) []*entry {
	if q.ID != "" {
		if r := v.lbs[q.ID]; r != nil && r.lb != nil {
			return []*entry{r}
		}
		return nil
	}
	ids := v.byName[q.Name]
	if q.Name == "" {
		// The fewest candidates: those of the rarest tag of q.
		first := true
		for k, val := range q.Tags {
			if s := v.byTag[tagKey(k, val)]; first || len(s) < len(ids) {
				ids, first = s, false
			}
		}
	}
	var out []*entry
	for id := range ids {
		if r := v.lbs[id]; hasTags(r.lb.Tags, q.Tags) {
			out = append(out, r)
		}
	}
	slices.SortFunc(out, func(a, b *entry) int { return cmp.Compare(a.lb.ID, b.lb.ID) })
	return out
}

// hasTags reports whether tags has every tag of want with its value.
func hasTags(tags, want map[string]string) bool {
	for k, v := range want {
		if got, ok := tags[k]; !ok || got != v {
			return false
		}
	}
	return true
}

// flight is one List call in progress; done is closed when view or err
// is set.
type flight struct {
	done     chan struct{}
	view     *view
	err      error
	canceled bool    // the List failed and its caller's context had ended
	gen      uint64  // Cache.gen when the List started
	at       uint64  // Cache.seq when the List started
	patches  []patch // what the Cache observed while it ran
}

// fresh returns a fresh view, running or joining the one List call;
// cached reports that the view was already in the Cache (no List was run
// or waited for). The view is read and changed with c.mu held.
func (c *Cache) fresh(ctx context.Context) (v *view, cached bool, err error) {
	for {
		c.mu.Lock()
		now := c.now()
		if v := c.view; v != nil && now.Before(v.expires) {
			c.mu.Unlock()
			return v, true, nil
		}
		if c.failErr != nil && now.Before(c.failUntil) {
			err := c.failErr
			if c.throttled {
				err = throttle.Delay(err, c.failUntil.Sub(now))
			}
			c.mu.Unlock()
			return nil, false, err
		}
		if f := c.flight; f != nil {
			c.mu.Unlock()
			select {
			case <-f.done:
			case <-ctx.Done():
				return nil, false, ctx.Err()
			}
			if f.canceled && ctx.Err() == nil {
				continue // the caller that listed gave up; list again
			}
			return f.view, false, f.err
		}
		c.seq++
		f := &flight{done: make(chan struct{}), gen: c.gen, at: c.seq}
		c.flight = f
		c.mu.Unlock()
		v, err := c.list(ctx, f, now)
		return v, false, err
	}
}

// list runs List for flight f, started at time start, and publishes the
// result, with what the Cache observed meanwhile laid over it, to f's
// waiters and the Cache.
func (c *Cache) list(ctx context.Context, f *flight, start time.Time) (v *view, err error) {
	var (
		items   []*LoadBalancer
		backoff time.Duration // positive when List was throttled
	)
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("load-balancer cache: List panicked: %v", r)
			defer panic(r)
		}
		c.mu.Lock()
		defer c.mu.Unlock()
		if c.flight == f {
			c.flight = nil
		}
		if backoff > 0 {
			err = throttle.Delay(err, backoff)
		}
		if err == nil {
			f.view = newView(items, f.at, start.Add(c.ttl))
			for _, p := range f.patches {
				f.view.apply(p)
			}
		}
		c.remember(ctx, f, err, backoff)
		v, f.err = f.view, err
		close(f.done)
	}()
	items, err = c.d.List(ctx)
	if err != nil {
		if d, ok := throttle.RetryAfter(err); ok && d > 0 {
			backoff = d
		}
		return nil, listError(err)
	}
	return nil, nil
}

// listError wraps the error of a failed List. Not-found from List says
// nothing about one load balancer: the text is kept and the sentinel
// dropped, so that it is never read as "gone" (throttle.Delay restores a
// throttle's RetryError).
func listError(err error) error {
	if errors.Is(err, ErrNotFound) {
		return fmt.Errorf("load-balancer cache: listing load balancers: %v", err)
	}
	return fmt.Errorf("load-balancer cache: listing load balancers: %w", err)
}

// remember records the outcome of flight f's List in the Cache (c.mu
// held): its view, or its failure for ErrorTTL (for the back-off of a
// throttled List at least).
func (c *Cache) remember(ctx context.Context, f *flight, err error, backoff time.Duration) {
	switch {
	case backoff > 0:
		// The cloud asked for no List before backoff has passed: honour
		// it whatever the generation, ctx or ErrorTTL.
		c.failErr, c.failUntil, c.throttled = err, c.now().Add(max(c.errorTTL, backoff)), true
	case f.gen != c.gen:
		// Invalidate ran during this List: answer its waiters, keep nothing.
	case err == nil:
		c.view, c.failErr, c.throttled = f.view, nil, false
	case ctx.Err() != nil:
		f.canceled = true
	case c.errorTTL > 0:
		c.failErr, c.failUntil, c.throttled = err, c.now().Add(c.errorTTL), false
	}
}

// meteredList is the ListDriver a Cache calls: d, with each cloud call
// recorded under its method's name (see metered).
type meteredList struct{ d ListDriver }

func (m meteredList) Find(ctx context.Context, q Query) ([]*LoadBalancer, error) {
	return metered(ctx, "Find", func(ctx context.Context) ([]*LoadBalancer, error) { return m.d.Find(ctx, q) })
}

func (m meteredList) Apply(ctx context.Context, a Action) (*LoadBalancer, error) {
	return metered(ctx, "Apply", func(ctx context.Context) (*LoadBalancer, error) { return m.d.Apply(ctx, a) })
}

func (m meteredList) Delete(ctx context.Context, lb *LoadBalancer) error {
	return cloudmetrics.Meter(ctx, capability, "Delete", func(ctx context.Context) error { return m.d.Delete(ctx, lb) })
}

func (m meteredList) List(ctx context.Context) ([]*LoadBalancer, error) {
	return metered(ctx, "List", func(ctx context.Context) ([]*LoadBalancer, error) { return m.d.List(ctx) })
}
