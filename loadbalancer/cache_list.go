package loadbalancer

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/ccmkit/ccmkit/internal/cloudmetrics"
	"github.com/ccmkit/ccmkit/internal/listcache"
	"github.com/ccmkit/ccmkit/internal/throttle"
)

// cached is what a listCache holds: *LoadBalancer or *Pool. Its methods
// give the fields look-ups match on, whether the Cache may answer with it
// from the list, and a deep copy.
type cached[T any] interface {
	comparable
	cacheID() string
	cacheName() string
	cacheTags() map[string]string
	// settled is false while the cloud may still change it on its own
	// (a load balancer without an address yet): look-ups ask the cloud.
	settled() bool
	Clone() T
}

func (lb *LoadBalancer) cacheID() string              { return lb.ID }
func (lb *LoadBalancer) cacheName() string            { return lb.Name }
func (lb *LoadBalancer) cacheTags() map[string]string { return lb.Tags }
func (lb *LoadBalancer) settled() bool                { return len(lb.Ingress) > 0 }

func (p *Pool) cacheID() string              { return p.ID }
func (p *Pool) cacheName() string            { return p.Name }
func (p *Pool) cacheTags() map[string]string { return p.Tags }
func (p *Pool) settled() bool                { return true }

// query is a look-up of a listCache: exactly one field set (Query's and
// PoolQuery's fields).
type query struct {
	id, name string
	tags     map[string]string
}

// oneField reports whether exactly one field of q is set, as the Driver
// contract requires.
func (q query) oneField() bool {
	n := 0
	for _, set := range []bool{q.id != "", q.name != "", len(q.tags) > 0} {
		if set {
			n++
		}
	}
	return n == 1
}

// listCache is the list cache of one kind of cloud object (see Cache for
// what it promises): one List per TTL, look-ups answered from it when it
// can vouch for them, kept current from the results of writes.
type listCache[T cached[T]] struct {
	metric string // the cache label of cloudmetrics.CacheLookup
	op     string // the operation label of list ("List", "ListPools")
	list   func(ctx context.Context) ([]T, error)
	find   func(ctx context.Context, q query) ([]T, error)

	mu      sync.Mutex                // guards the fields below, and lists (its Locker)
	lists   *listcache.List[*view[T]] // the List results: TTL, single flight, failures
	seq     uint64                    // orders what the cache observes: List starts, direct Find starts, write ends
	listing *listing[T]               // the List in progress, or nil
}

// newListCache returns the listCache of what ("load balancers", "backend
// pools": for errors) over list, the Driver method op, and find, with
// opts' TTLs and clock.
func newListCache[T cached[T]](what, metric, op string, list func(context.Context) ([]T, error), find func(context.Context, query) ([]T, error), opts CacheOptions) *listCache[T] {
	c := &listCache[T]{metric: metric, op: op, list: list, find: find}
	c.lists = listcache.New[*view[T]](listcache.Options{TTL: opts.TTL, ErrorTTL: opts.ErrorTTL, Clock: opts.Clock, Locker: &c.mu,
		Err: func(err error) error { return listError(what, err) }, Name: "load-balancer cache: listing " + what})
	return c
}

// lookup is Cache.Find for this kind: from the list when it can vouch for
// every match, otherwise the direct find's answer, unchanged.
func (c *listCache[T]) lookup(ctx context.Context, q query) ([]T, error) {
	if !q.oneField() {
		cloudmetrics.CacheLookup(c.metric, false)
		return c.find(ctx, q)
	}
	v, from, err := c.fresh(ctx)
	if err != nil {
		cloudmetrics.CacheLookup(c.metric, false)
		return nil, err
	}
	c.mu.Lock()
	matches := v.match(q)
	out, trusted := vouch(matches)
	if len(matches) == 0 && (from == listcache.Listed || missTrusted(ctx)) {
		// A List this look-up started answered after it began: its
		// "none" is the cloud's, as a direct Find's would be.
		out, trusted = nil, true
	}
	c.seq++
	at := c.seq
	c.mu.Unlock()
	cloudmetrics.CacheLookup(c.metric, trusted && from == listcache.Cached)
	if trusted {
		return out, nil
	}
	return c.findDirect(ctx, q, at)
}

// missTrustedKey is the context key under which the Reconciler tells its
// Cache that a miss in the list may be answered as "none" without asking
// the cloud (withMissTrusted).
type missTrustedKey struct{}

// withMissTrusted returns ctx for look-ups whose "none" neither leads to a
// creation nor says that something is gone: the Reconciler's
// UpdateLoadBalancer (a Service whose load balancer is not in the list
// gets ErrNotFound, and the service controller calls again on the next
// Node change), and the name step of a look-up whose tag step asked the
// cloud (see finder.byName).
func withMissTrusted(ctx context.Context) context.Context {
	return context.WithValue(ctx, missTrustedKey{}, true)
}

func missTrusted(ctx context.Context) bool {
	trusted, _ := ctx.Value(missTrustedKey{}).(bool)
	return trusted
}

// vouch returns copies of the objects of matches, and whether the cache
// may answer with them: there is at least one, and none is in doubt or
// unsettled (see Cache).
func vouch[T cached[T]](matches []*entry[T]) ([]T, bool) {
	if len(matches) == 0 {
		return nil, false
	}
	out := make([]T, len(matches))
	for i, r := range matches {
		if r.doubt || !r.obj.settled() {
			return nil, false
		}
		out[i] = r.obj.Clone()
	}
	return out, true
}

// findDirect is the direct find of q, begun at seq at; what it found is
// remembered.
func (c *listCache[T]) findDirect(ctx context.Context, q query, at uint64) ([]T, error) {
	objs, err := c.find(ctx, q)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	var zero T
	var ps []patch[T]
	seen := map[string]bool{}
	for _, o := range objs {
		if o != zero && o.cacheID() != "" {
			ps = append(ps, patch[T]{id: o.cacheID(), obj: o.Clone(), at: at})
			seen[o.cacheID()] = true
		}
	}
	switch {
	case q.id != "" && !seen[q.id]:
		ps = append(ps, patch[T]{id: q.id, at: at}) // the cloud says it does not exist
	case q.id == "":
		v, ok := c.lists.Kept()
		if !ok {
			break
		}
		for _, r := range v.match(q) {
			if !seen[r.obj.cacheID()] {
				// Listed as a match, not found now: deleted or changed.
				ps = append(ps, patch[T]{id: r.obj.cacheID(), obj: r.obj, doubt: true, at: at})
			}
		}
	}
	c.observe(ps...)
	return objs, nil
}

// written keeps the cache current after a write to target (empty for a
// creation) that answered obj and err: when the write took effect (no
// error, or a busy answer that was not refused: appliedBusy), obj replaces
// the one with its ID; on an error, no obj, or an answer about another
// object, target is in doubt, unless the error is a refusal that changed
// nothing (throttle.Refused, which ErrRefused is).
func (c *listCache[T]) written(target string, obj T, err error) {
	unchanged := throttle.Refused(err)
	took := err == nil || appliedBusy(err)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.seq++
	var zero T
	var ps []patch[T]
	if took && obj != zero && obj.cacheID() != "" {
		ps = append(ps, patch[T]{id: obj.cacheID(), obj: obj.Clone(), at: c.seq})
	}
	if target != "" && !unchanged && (!took || obj == zero || obj.cacheID() != target) {
		ps = append(ps, patch[T]{id: target, doubt: true, at: c.seq})
	}
	c.observe(ps...)
}

// derivedWrite keeps the cache current after a write to target that took
// effect and answered no object: the cache's copy of target, with the
// write laid over it by derive, replaces it (as much in doubt as the copy
// was); when the cache holds no copy, or derive fails, target is in doubt.
func (c *listCache[T]) derivedWrite(target string, derive func(old T) (T, error)) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.seq++
	p := patch[T]{id: target, doubt: true, at: c.seq}
	var zero T
	if v, ok := c.lists.Kept(); ok {
		if r := v.objs[target]; r != nil && r.obj != zero {
			if obj, err := derive(r.obj); err == nil && obj != zero && obj.cacheID() == target {
				p.obj, p.doubt = obj, r.doubt
			}
		}
	}
	c.observe(p)
}

// deleted keeps the cache current after a delete of obj that returned
// err: gone, or in doubt, unless the error left it as it was: a refusal
// that changed nothing (throttle.Refused), or inUse, the cloud keeping an
// object still in use.
func (c *listCache[T]) deleted(obj T, err error, inUse bool) {
	var zero T
	if obj == zero || obj.cacheID() == "" || inUse || throttle.Refused(err) {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.seq++
	p := patch[T]{id: obj.cacheID(), at: c.seq} // deleted
	if err != nil {
		p.obj, p.doubt = obj.Clone(), true
	}
	c.observe(p)
}

// all is Cache.List for this kind: copies of every object known, in ID
// order, listing first when the list is missing or stale.
func (c *listCache[T]) all(ctx context.Context) ([]T, error) {
	v, from, err := c.fresh(ctx)
	cloudmetrics.CacheLookup(c.metric, err == nil && from == listcache.Cached)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	var zero T
	out := make([]T, 0, len(v.objs))
	for _, r := range v.objs {
		if r.obj != zero {
			out = append(out, r.obj.Clone())
		}
	}
	slices.SortFunc(out, func(a, b T) int { return cmp.Compare(a.cacheID(), b.cacheID()) })
	return out, nil
}

// invalidate is Cache.Invalidate for this kind.
func (c *listCache[T]) invalidate() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.lists.Invalidate()
	c.listing = nil
}

// observe applies what the cache learnt to the view and, when a List is
// running, remembers it to lay over that List's result (c.mu held).
func (c *listCache[T]) observe(ps ...patch[T]) {
	v, kept := c.lists.Kept()
	for _, p := range ps {
		if kept {
			v.apply(p)
		}
		if c.listing != nil {
			c.listing.patches = append(c.listing.patches, p)
		}
	}
}

// view is what the cache knows of the cloud's objects: one List's result,
// with what the cache observed since laid over it. It is guarded by
// listCache.mu.
type view[T cached[T]] struct {
	listed uint64               // listCache.seq when its List started
	objs   map[string]*entry[T] // by ID
	byName index                // name → IDs of live entries
	byTag  index                // tagKey → IDs of live entries
}

// entry is what a view holds of one ID.
type entry[T cached[T]] struct {
	obj   T      // the cache's own copy; zero: deleted
	at    uint64 // listCache.seq of the observation
	doubt bool   // a failed write, or a direct find, put it in doubt
}

// patch is one observation of an object: as found or written (obj),
// deleted (obj zero), or in doubt (obj its last known state, if any).
type patch[T cached[T]] struct {
	id    string
	obj   T
	doubt bool
	at    uint64 // listCache.seq: when a read began, or a write ended
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

// newView indexes items, the result of a List begun at seq listed, or
// returns the error wrapping ErrInconsistent of a List that holds an ID
// more than once (see Cache, Inconsistent lists). Nil objects and those
// without an ID are left out: a look-up they would match asks the cloud.
func newView[T cached[T]](items []T, listed uint64) (*view[T], error) {
	if err := listcache.IDsOnce(items, listedID[T], T.cacheName); err != nil {
		return nil, err
	}
	v := &view[T]{listed: listed, objs: make(map[string]*entry[T], len(items)), byName: index{}, byTag: index{}}
	for _, o := range items {
		if id := listedID(o); id != "" {
			v.set(id, entry[T]{obj: o, at: listed})
		}
	}
	return v, nil
}

// listedID is the ID of a listed object, "" for a nil one.
func listedID[T cached[T]](o T) string {
	var zero T
	if o == zero {
		return ""
	}
	return o.cacheID()
}

// apply lays p over v, unless v already knows something newer of p.id. A
// doubt keeps the object v holds (to find the look-ups it would answer),
// or the one p carries when v holds none.
func (v *view[T]) apply(p patch[T]) {
	var zero T
	obj := p.obj
	if r := v.objs[p.id]; p.doubt && r != nil && r.obj != zero {
		obj = r.obj
	}
	v.set(p.id, entry[T]{obj: obj, at: p.at, doubt: p.doubt})
}

// set replaces the entry of id with r when r is newer than both the list
// and the entry, keeping the indexes.
func (v *view[T]) set(id string, r entry[T]) {
	var zero T
	old := v.objs[id]
	if r.at < v.listed || (old != nil && r.at < old.at) {
		return
	}
	if old != nil && old.obj != zero {
		v.byName.remove(old.obj.cacheName(), id)
		for k, val := range old.obj.cacheTags() {
			v.byTag.remove(tagKey(k, val), id)
		}
	}
	v.objs[id] = &r
	if r.obj != zero {
		v.byName.add(r.obj.cacheName(), id)
		for k, val := range r.obj.cacheTags() {
			v.byTag.add(tagKey(k, val), id)
		}
	}
}

// match returns the live entries matching q (exactly one field set), in
// ID order.
func (v *view[T]) match(q query) []*entry[T] {
	var zero T
	if q.id != "" {
		if r := v.objs[q.id]; r != nil && r.obj != zero {
			return []*entry[T]{r}
		}
		return nil
	}
	ids := v.byName[q.name]
	if q.name == "" {
		// The fewest candidates: those of the rarest tag of q.
		first := true
		for k, val := range q.tags {
			if s := v.byTag[tagKey(k, val)]; first || len(s) < len(ids) {
				ids, first = s, false
			}
		}
	}
	var out []*entry[T]
	for id := range ids {
		if r := v.objs[id]; hasTags(r.obj.cacheTags(), q.tags) {
			out = append(out, r)
		}
	}
	slices.SortFunc(out, func(a, b *entry[T]) int { return cmp.Compare(a.obj.cacheID(), b.obj.cacheID()) })
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

// listing is what the cache observed while its List runs, to lay over
// that List's result.
type listing[T cached[T]] struct {
	at      uint64     // listCache.seq when the List started
	patches []patch[T] // what the cache observed while it ran
}

// fresh returns a fresh view, running or joining the one List call, and
// where it came from. The view is read and changed with c.mu held.
func (c *listCache[T]) fresh(ctx context.Context) (*view[T], listcache.Origin, error) {
	return c.lists.Get(ctx, c.begin)
}

// begin starts a List (c.mu held): the observations from now on are laid
// over its result, so a List that read the cloud before a write never
// undoes it in the cache.
func (c *listCache[T]) begin() listcache.Run[*view[T]] {
	c.seq++
	l := &listing[T]{at: c.seq}
	c.listing = l
	return listcache.Run[*view[T]]{
		List: func(ctx context.Context) (*view[T], error) {
			items, err := c.list(ctx)
			if err != nil {
				return nil, err
			}
			v, err := newView(items, l.at)
			if err != nil {
				cloudmetrics.Inconsistent(capability, c.op)
			}
			return v, err
		},
		Done: func(v *view[T], err error) *view[T] {
			if c.listing == l {
				c.listing = nil
			}
			if err == nil {
				for _, p := range l.patches {
					v.apply(p)
				}
			}
			return v
		},
	}
}

// listError wraps the error of a failed List of what. Not-found from List
// says nothing about one object: the text is kept and the sentinel
// dropped, so that it is never read as "gone" (the list cache restores a
// throttle's RetryError).
func listError(what string, err error) error {
	if errors.Is(err, ErrNotFound) {
		return fmt.Errorf("load-balancer cache: listing %s: %v", what, err) //nolint:errorlint // drops ErrNotFound on purpose, see above
	}
	return fmt.Errorf("load-balancer cache: listing %s: %w", what, err)
}
