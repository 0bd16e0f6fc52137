package loadbalancer

import (
	"cmp"
	"context"
	"fmt"
	"slices"

	v1 "k8s.io/api/core/v1"

	"github.com/ccmkit/ccmkit/internal/cloudmetrics"
	"github.com/ccmkit/ccmkit/internal/listcache"
)

// lookup is the result of find, and of begin, which adds the lock.
type lookup struct {
	owner     Owner           // whose load balancers were looked for
	unlock    func()          // releases the Service's lock (set by begin)
	owned     []*LoadBalancer // owned by (cluster, UID); the stored-ID one first
	adoptable *LoadBalancer   // found by stored ID without ccmkit tags
	err       error           // what stops EnsureLoadBalancer: conflict or missing stored ID
}

// target is the load balancer EnsureLoadBalancer converges (nil: create).
func (l *lookup) target() *LoadBalancer {
	if len(l.owned) > 0 {
		return l.owned[0]
	}
	return l.adoptable
}

// findMode says which misses of a Cache's list a lookup takes as the
// cloud's "none" (see Cache and finder.byName).
type findMode int

const (
	// findDefault: only the name step's miss (byName).
	findDefault findMode = iota
	// findCreate is EnsureLoadBalancer's lookup, whose miss leads to a
	// create: with Capabilities.UniqueNames the tag step's miss too, as
	// the create's ErrNameTaken confirms it (see ensureCreated).
	findCreate
	// findConfirm: none, after a create was refused with ErrNameTaken.
	findConfirm
)

// find follows the documented lookup order: stored ID, ownership tags,
// name with an ownership check. A Driver error is returned (wrapped, naming
// the step); what stops EnsureLoadBalancer is in lookup.err.
func (r *Reconciler) find(ctx context.Context, owner Owner, svc *v1.Service, mode findMode) (*lookup, error) {
	f := finder{r: r, lookup: lookup{owner: owner}, seen: map[string]bool{}, mode: mode}
	if err := f.byStoredID(ctx, svc); err != nil {
		return nil, err
	}
	if err := f.byTags(ctx); err != nil {
		return nil, err
	}
	f.refuseAdoptionBesideOwned()
	if len(f.owned) == 0 && f.adoptable == nil {
		if err := f.byName(ctx, svc); err != nil {
			return nil, err
		}
	}
	return &f.lookup, nil
}

// finder builds the lookup of one find call, step by step.
type finder struct {
	r *Reconciler
	lookup
	seen map[string]bool // the IDs in owned
	mode findMode
}

// addOwned adds each load balancer of lbs that the owner owns to owned,
// once, in order, and returns the others.
func (f *finder) addOwned(lbs ...*LoadBalancer) (others []*LoadBalancer) {
	for _, lb := range lbs {
		switch {
		case !f.owner.Owns(lb.Tags):
			others = append(others, lb)
		case !f.seen[lb.ID]:
			f.seen[lb.ID] = true
			f.owned = append(f.owned, lb)
		}
	}
	return others
}

// byStoredID is step 1: the load balancer whose ID Options.IDAnnotation
// holds is owned, adoptable (no ccmkit tags) or a conflict. A malformed
// annotation, a missing load balancer or a conflict goes to f.err; only a
// Driver error is returned.
func (f *finder) byStoredID(ctx context.Context, svc *v1.Service) error {
	a := f.r.opts.IDAnnotation
	if a == nil {
		return nil
	}
	id, set, err := a.Text(svc.Annotations)
	if err != nil {
		f.err = err
		return nil
	}
	if !set {
		return nil
	}
	lbs, err := f.r.findDriver(ctx, Query{ID: id})
	if err != nil {
		return fmt.Errorf("find load balancer by id %q: %w", cut(id), err)
	}
	if len(lbs) == 0 {
		f.err = fmt.Errorf("%w: annotation %q names load balancer id %q, which does not exist: expected the ID of an existing load balancer", ErrNotFound, a.Name, cut(id))
		return nil
	}
	if f.addOwned(lbs[0]) == nil {
		return nil
	}
	if got, tagged := OwnerFromTags(lbs[0].Tags); tagged {
		f.err = &OwnershipError{ID: lbs[0].ID, Name: lbs[0].Name, Want: f.owner, Got: got, How: "id annotation " + a.Name}
	} else {
		f.adoptable = lbs[0]
	}
	return nil
}

// byTags is step 2: the load balancers carrying the ownership tags, in ID
// order (a Driver's order need not be stable).
func (f *finder) byTags(ctx context.Context) error {
	if f.mode == findCreate && f.r.opts.Capabilities.UniqueNames {
		ctx = withMissTrusted(ctx)
	}
	lbs, err := f.r.findDriver(ctx, Query{Tags: f.owner.Selector()})
	if err != nil {
		return fmt.Errorf("find load balancers by tags: %w", err)
	}
	f.addOwned(sortedByID(lbs)...)
	return nil
}

// refuseAdoptionBesideOwned turns an adoptable load balancer into a
// conflict when the Service already owns one (and nothing else stopped
// EnsureLoadBalancer yet).
func (f *finder) refuseAdoptionBesideOwned() {
	if f.adoptable != nil && len(f.owned) > 0 && f.err == nil {
		// Adopting would give the Service a second load balancer, and
		// managing the owned one would ignore the annotation: refuse.
		f.err = &OwnershipError{ID: f.adoptable.ID, Name: f.adoptable.Name, Want: f.owner,
			How: "id annotation " + f.r.opts.IDAnnotation.Name, Owned: ids(f.owned)}
		f.adoptable = nil
	}
}

// byName is step 3, when steps 1 and 2 found nothing: the load balancers
// named Namer.Name, in ID order. Only owned ones count; the first other one
// is a conflict (names are for people, ownership is a tag), recorded in
// f.err unless something already stopped EnsureLoadBalancer.
//
// Over a Cache, a name the list does not hold is taken as none, without
// asking the cloud: step 2 asked it for the ownership tags (the Cache
// never trusts a miss there), so every load balancer this Service owns is
// known; what a name adds is another owner's load balancer of that name,
// and one created since the list was taken makes, at worst, a second load
// balancer with that name, never a second one of this Service. After a
// create was refused because the name is taken (findConfirm), the cloud is
// asked: the name's load balancer is then this Service's or a conflict.
func (f *finder) byName(ctx context.Context, svc *v1.Service) error {
	name := f.r.namer.Name(f.owner.Cluster, svc)
	if f.mode != findConfirm {
		ctx = withMissTrusted(ctx)
	}
	lbs, err := f.r.findDriver(ctx, Query{Name: name})
	if err != nil {
		return fmt.Errorf("find load balancers by name %q: %w", name, err)
	}
	if others := f.addOwned(sortedByID(lbs)...); len(others) > 0 && f.err == nil {
		got, _ := OwnerFromTags(others[0].Tags)
		f.err = &OwnershipError{ID: others[0].ID, Name: others[0].Name, Want: f.owner, Got: got, How: "name"}
	}
	return nil
}

// sortedByID sorts lbs, in place, by ID and returns it.
func sortedByID(lbs []*LoadBalancer) []*LoadBalancer {
	slices.SortFunc(lbs, func(a, b *LoadBalancer) int { return cmp.Compare(a.ID, b.ID) })
	return lbs
}

// findDriver calls Driver.Find and rejects a nil load balancer in its
// result (a Driver bug that would otherwise panic the caller), and an
// answer that holds one ID more than once: two copies would look like two
// load balancers of one Service, and the duplicate handling would then
// delete one of them, the cloud's only one (see Cache, Inconsistent
// lists, which refuses a List that does so). Such an answer is counted in
// ccmkit_cloud_inconsistent_answers_total{capability="loadbalancer",
// operation="Find"}.
func (r *Reconciler) findDriver(ctx context.Context, q Query) ([]*LoadBalancer, error) {
	lbs, err := callFor(ctx, r, func() ([]*LoadBalancer, error) {
		return r.calls.Find(ctx, q)
	})
	if err != nil {
		return nil, err
	}
	if i := slices.Index(lbs, nil); i >= 0 {
		return nil, fmt.Errorf("driver Find returned a nil load balancer at index %d of %d: expected only non-nil load balancers", i, len(lbs))
	}
	if err := listcache.IDsOnce(lbs, (*LoadBalancer).cacheID, (*LoadBalancer).cacheName); err != nil {
		cloudmetrics.Inconsistent(capability, "Find")
		return nil, fmt.Errorf("driver Find: %w", err)
	}
	return lbs, nil
}

func ids(lbs []*LoadBalancer) []string {
	out := make([]string, len(lbs))
	for i, lb := range lbs {
		out[i] = lb.ID
	}
	return out
}
