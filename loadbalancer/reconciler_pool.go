package loadbalancer

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"

	v1 "k8s.io/api/core/v1"
	servicehelpers "k8s.io/cloud-provider/service/helpers"
	"k8s.io/klog/v2"
)

// poolDriverOf returns d as a PoolDriver, or nil when it cannot serve
// pools: it does not implement PoolDriver, or it is a Cache over a Driver
// that cannot list pools (see Cache).
func poolDriverOf(d Driver) PoolDriver {
	if c, ok := d.(*Cache); ok && !c.hasPools() {
		return nil
	}
	pd, _ := d.(PoolDriver)
	return pd
}

// pooled reports whether svc's load balancer sends traffic to a shared
// backend pool: with Capabilities.SharedBackendPools, unless svc's
// externalTrafficPolicy is Local. A Local Service's load balancer checks
// its nodes on the Service's own healthCheckNodePort (Desired), and on
// clouds where the health check belongs to the backend group (AWS target
// groups, GCE backend services) its group cannot be shared: it keeps
// backends of its own.
func (r *Reconciler) pooled(svc *v1.Service) bool {
	return r.opts.Capabilities.SharedBackendPools && r.pools != nil && !servicehelpers.RequestsOnlyLocalTraffic(svc)
}

// usePool makes spec, whose Backends are those of nodes for families, send
// traffic to the shared pool of those backends when svc is pooled: it
// ensures the pool and replaces Backends with BackendPool. Otherwise it
// clears BackendPool, so that a load balancer leaving a pool gets backends
// of its own.
//
// With deferMembers (EnsureLoadBalancer under Options.CoalesceWindow), a
// pool that exists is only referenced: its member changes are left to the
// window, and deferred reports that there were some.
func (r *Reconciler) usePool(ctx context.Context, svc *v1.Service, cluster string, spec *Spec, families []v1.IPFamily, nodes []*v1.Node, deferMembers bool) (deferred bool, err error) {
	spec.BackendPool = ""
	if !r.pooled(svc) {
		return false, nil
	}
	mode := poolConverge
	if deferMembers {
		mode = poolDeferMembers
	}
	id, deferred, err := r.ensurePool(ctx, svc, desiredPool(cluster, r.namer, spec.BackendKey, families, spec.Backends), nodes, mode)
	if err != nil {
		return false, err
	}
	spec.Backends, spec.BackendPool = nil, id
	return deferred, nil
}

// poolLock is the lockKey of the pool with tags: one Reconciler converges
// a pool for one Service at a time, so that after a node change the first
// Service's call writes the pool and the others find it converged.
func poolLock(tags map[string]string) string {
	return "pool:" + tags[TagCluster] + "/" + tags[TagPool]
}

// poolMode is what ensurePool may write.
type poolMode int

const (
	poolConverge     poolMode = iota // create the pool or converge its members
	poolDeferMembers                 // create it, or only report that an existing one's members differ
	poolExistingOnly                 // converge an existing pool's members; never create one
)

// ensurePool finds the pool desired describes (by its tags), creates it or
// converges its members to desired's, as mode allows, and returns its ID
// ("" when poolExistingOnly found none). nodes are the Nodes the members
// were built from (checkTargets). Under poolDeferMembers, deferred says an
// existing pool's members differ (see usePool). Errors name the pool.
func (r *Reconciler) ensurePool(ctx context.Context, svc *v1.Service, desired *Pool, nodes []*v1.Node, mode poolMode) (id string, deferred bool, err error) {
	defer r.lockKey(poolLock(desired.Tags))()
	actual, err := r.findPool(ctx, desired.Tags)
	if err != nil {
		return "", false, err
	}
	if actual == nil && mode == poolExistingOnly {
		return "", false, nil
	}
	actions, err := planPool(desired, actual)
	if err == nil && mode == poolDeferMembers && actual != nil {
		return actual.ID, len(actions) > 0, nil // planPool changes an existing pool's members only
	}
	if err == nil {
		actions, err = r.checkPoolTargets(ctx, svc, actions, nodes)
	}
	if err != nil {
		return "", false, err
	}
	for _, a := range actions {
		if actual, err = r.applyPool(ctx, svc, a); err != nil {
			return "", false, err
		}
	}
	return actual.ID, false, nil
}

// findPool returns the pool of this cluster carrying tags (TagCluster and
// TagPool), or nil when there is none. When a race of two replicas left
// several, it returns the one with the lowest ID, as every replica does:
// the load balancers end up referencing it, and the others, unreferenced,
// go at the next EnsureLoadBalancerDeleted (collectPools).
func (r *Reconciler) findPool(ctx context.Context, tags map[string]string) (*Pool, error) {
	pools, err := r.findPools(ctx, PoolQuery{Tags: tags})
	if err != nil {
		return nil, fmt.Errorf("find backend pool %s: %w", tags[TagPool], err)
	}
	pools = slices.DeleteFunc(pools, func(p *Pool) bool { return !hasTags(p.Tags, tags) })
	if len(pools) == 0 {
		return nil, nil
	}
	return slices.MinFunc(pools, func(a, b *Pool) int { return cmp.Compare(a.ID, b.ID) }), nil
}

// findPools calls PoolDriver.FindPools and rejects a nil pool in its
// result (a Driver bug that would otherwise panic the caller).
func (r *Reconciler) findPools(ctx context.Context, q PoolQuery) ([]*Pool, error) {
	pools, err := callFor(ctx, r, func() ([]*Pool, error) {
		return r.pools.FindPools(ctx, q)
	})
	if err != nil {
		return nil, err
	}
	if i := slices.Index(pools, nil); i >= 0 {
		return nil, fmt.Errorf("driver FindPools returned a nil pool at index %d of %d: expected only non-nil pools", i, len(pools))
	}
	return pools, nil
}

// checkPoolTargets is checkTargets for pool actions: it drops, from the
// members PoolActionCreate and PoolActionAddBackends add, the Nodes whose
// instance is gone.
func (r *Reconciler) checkPoolTargets(ctx context.Context, svc *v1.Service, actions []PoolAction, nodes []*v1.Node) ([]PoolAction, error) {
	return liveActions(ctx, r, svc, actions, nodes, func(a *PoolAction) (*[]Backend, bool) {
		switch a.Kind {
		case PoolActionCreate:
			a.Create = a.Create.Clone()
			return &a.Create.Spec.Backends, true
		case PoolActionAddBackends:
			return &a.Backends, false
		}
		return nil, false
	})
}

// applyPool performs a through the PoolDriver and returns the pool as it
// is afterwards; an answer without a pool, or a created pool without an
// ID, is an error.
func (r *Reconciler) applyPool(ctx context.Context, svc *v1.Service, a PoolAction) (*Pool, error) {
	klog.FromContext(ctx).V(2).Info("Applying backend pool action", "service", klog.KObj(svc), "action", a.Kind, "id", a.PoolID, "reason", a.Reason)
	p, err := callFor(ctx, r, func() (*Pool, error) {
		return r.pools.ApplyPool(ctx, a)
	})
	switch {
	case err != nil:
	case p == nil:
		err = errors.New("driver returned no backend pool")
	case p.ID == "":
		err = errors.New("driver returned a backend pool without an ID: expected the cloud's ID")
	}
	if err != nil {
		return nil, fmt.Errorf("%s on backend pool %q: %w", a.Kind, a.PoolID, err)
	}
	return p, nil
}

// deletePool deletes p through the PoolDriver. A pool still referenced
// (ErrPoolInUse) is not an error: another load balancer uses it.
func (r *Reconciler) deletePool(ctx context.Context, p *Pool) error {
	del := func() error { return r.pools.DeletePool(ctx, p) }
	err := r.call(ctx, del)
	if errors.Is(err, ErrPoolInUse) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("delete backend pool %q (id %q): %w", p.Name, p.ID, err)
	}
	klog.FromContext(ctx).V(2).Info("Deleted backend pool", "id", p.ID, "name", p.Name)
	return nil
}

// releasePool deletes the pool with ID id, which a load balancer of
// cluster no longer references, unless another one still does (the cloud
// refuses: ErrPoolInUse) or it is not cluster's. A failure is logged, not
// returned: the load balancer it was released by is converged, and the next
// EnsureLoadBalancerDeleted collects the pool (collectPools).
func (r *Reconciler) releasePool(ctx context.Context, svc *v1.Service, cluster, id string) {
	if r.pools == nil || id == "" {
		return
	}
	pools, err := r.findPools(ctx, PoolQuery{ID: id})
	for _, p := range pools {
		if err == nil && p.ID == id && ownsPool(cluster, p.Tags) {
			err = r.deletePool(ctx, p)
		}
	}
	if err != nil {
		klog.FromContext(ctx).Info("Could not delete a backend pool no longer used by this service; it is retried when a LoadBalancer Service is deleted",
			"service", klog.KObj(svc), "pool", id, "err", err)
	}
}

// collectPools deletes every pool of cluster that no load balancer
// references (the cloud refuses the others, ErrPoolInUse): the pools of a
// Service deleted last, and those a crash between deleting a load balancer
// and its pool left behind. Over a Cache it asks only for the pools no
// load balancer of the Cache's list references (listedPoolRefs), so that
// deleting one of N Services sharing a pool is no refused write. Errors
// are joined.
func (r *Reconciler) collectPools(ctx context.Context, cluster string) error {
	if r.pools == nil {
		return nil
	}
	pools, err := r.findPools(ctx, PoolQuery{Tags: map[string]string{TagCluster: cluster}})
	if err != nil {
		return fmt.Errorf("find the backend pools of cluster %q: %w", cluster, err)
	}
	inUse := r.listedPoolRefs(ctx)
	var errs []error
	for _, p := range pools {
		if ownsPool(cluster, p.Tags) && !inUse[p.ID] {
			errs = append(errs, r.deletePool(ctx, p))
		}
	}
	return errors.Join(errs...)
}

// listedPoolRefs returns the pools the load balancers of the Reconciler's
// Cache reference, from its list (no cloud call while the list is fresh);
// nil, so that every pool is asked for, when the Driver is no Cache or the
// list fails. The Cache's own deletes leave its list at once, so a pool's
// last user deleted through it never hides the pool; one deleted behind
// its back (the cloud console) keeps the pool until an
// EnsureLoadBalancerDeleted after the list's TTL.
func (r *Reconciler) listedPoolRefs(ctx context.Context) map[string]bool {
	c, ok := r.driver.(*Cache)
	if !ok {
		return nil
	}
	lbs, err := c.List(ctx)
	if err != nil {
		return nil
	}
	refs := map[string]bool{}
	for _, lb := range lbs {
		if lb.Spec.BackendPool != "" {
			refs[lb.Spec.BackendPool] = true
		}
	}
	return refs
}

// releasedPool releases (releasePool) the pool that before, the load
// balancer as found, referenced and after, the load balancer converged,
// no longer does. A nil before or after releases nothing.
func (r *Reconciler) releasedPool(ctx context.Context, svc *v1.Service, cluster string, before, after *LoadBalancer) {
	if before == nil || after == nil || before.Spec.BackendPool == after.Spec.BackendPool {
		return
	}
	r.releasePool(ctx, svc, cluster, before.Spec.BackendPool)
}
