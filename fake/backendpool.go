package fake

import (
	"context"
	"fmt"
	"strconv"

	"github.com/ccmkit/ccmkit/loadbalancer"
)

// The shared backend pools of the cloud (BackendPoolsShared): lbDriver's
// pool methods, over the store's pools. Pools are stored as the model and
// changed with loadbalancer.ApplyPool, the reference semantics of each
// action; with LoadBalancerSection.Backends instanceID a pool keeps only
// its members' provider IDs, as a load balancer does.

var _ loadbalancer.PoolListDriver = lbDriver{}

// FindPools returns copies of the pools matching q.
func (d lbDriver) FindPools(ctx context.Context, q loadbalancer.PoolQuery) (out []*loadbalancer.Pool, err error) {
	err = d.s.readCtx(ctx, func() error {
		out = []*loadbalancer.Pool{}
		for _, p := range d.s.sortedBackendPools() {
			if (q.ID == "" || p.ID == q.ID) && hasTags(p.Tags, q.Tags) {
				out = append(out, p.Clone())
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// ListPools returns copies of every pool, in ID order.
func (d lbDriver) ListPools(ctx context.Context) ([]*loadbalancer.Pool, error) {
	return d.FindPools(ctx, loadbalancer.PoolQuery{})
}

// ApplyPool performs one pool action atomically and returns the pool as
// it is afterwards: on error nothing changes.
func (d lbDriver) ApplyPool(ctx context.Context, a loadbalancer.PoolAction) (out *loadbalancer.Pool, err error) {
	err = d.s.writeCtx(ctx, func() (bool, error) {
		next, err := d.s.applyPool(a)
		if err != nil {
			return false, err
		}
		out = next.Clone()
		return true, nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// applyPool performs a on the stored pools (mu held for writing) and
// returns the stored result. On error nothing changes.
func (s *store) applyPool(a loadbalancer.PoolAction) (*loadbalancer.Pool, error) {
	if s.lbCfg.Backends == BackendsInstanceID {
		var err error
		if a, err = s.poolTargets(a); err != nil {
			return nil, err
		}
	}
	cur := s.bpools[a.PoolID]
	if a.Kind != loadbalancer.PoolActionCreate && cur == nil {
		return nil, fmt.Errorf("fake: 404 backend pool %q not found", a.PoolID)
	}
	next, err := loadbalancer.ApplyPool(cur, a)
	if err != nil {
		return nil, fmt.Errorf("fake: %w", err)
	}
	if a.Kind == loadbalancer.PoolActionCreate {
		s.nextBPool++
		next.ID = "bp-" + strconv.Itoa(s.nextBPool)
	}
	s.bpools[next.ID] = next
	return next, nil
}

// poolTargets is instanceTargets for a pool action: the members it adds
// or removes reduced to their provider IDs, a created pool keyed by them,
// and the members it adds checked to be live instances (mu held).
func (s *store) poolTargets(a loadbalancer.PoolAction) (loadbalancer.PoolAction, error) {
	var err error
	switch a.Kind {
	case loadbalancer.PoolActionCreate:
		if a.Create == nil {
			return a, nil // loadbalancer.ApplyPool names the problem
		}
		a.Create = a.Create.Clone()
		a.Create.Spec.BackendKey = loadbalancer.BackendKeyProviderID
		a.Create.Spec.Backends, err = s.targets(a.Create.Spec.Backends, true)
	case loadbalancer.PoolActionAddBackends, loadbalancer.PoolActionRemoveBackends:
		a.Backends, err = s.targets(a.Backends, a.Kind == loadbalancer.PoolActionAddBackends)
	}
	return a, err
}

// DeletePool removes p; a missing one is not an error. While a load
// balancer references it, it refuses with an error wrapping
// loadbalancer.ErrPoolInUse and changes nothing.
func (d lbDriver) DeletePool(ctx context.Context, p *loadbalancer.Pool) error {
	if p == nil {
		return nil
	}
	return d.s.writeCtx(ctx, func() (bool, error) {
		if d.s.bpools[p.ID] == nil {
			return false, nil
		}
		if users := d.s.poolUsers(p.ID); len(users) > 0 {
			return false, fmt.Errorf("fake: 409 backend pool %q is referenced by load balancer %q (%d in all): %w", p.ID, users[0], len(users), loadbalancer.ErrPoolInUse)
		}
		delete(d.s.bpools, p.ID)
		return true, nil
	})
}

// poolUsers returns the IDs of the load balancers referencing pool id, in
// ID order (mu held).
func (st *cloudState) poolUsers(id string) []string {
	var out []string
	for _, r := range st.sortedLoadBalancers() {
		if r.lb.Spec.BackendPool == id {
			out = append(out, r.lb.ID)
		}
	}
	return out
}

// checkPoolRef returns an error when a makes a load balancer reference a
// pool that does not exist (mu held): a cloud refuses a reference to
// nothing, and without shared pools there is none to reference.
func (st *cloudState) checkPoolRef(a loadbalancer.Action) error {
	ref := a.BackendPool
	if a.Kind == loadbalancer.ActionCreate && a.Create != nil {
		ref = a.Create.Spec.BackendPool
	}
	if ref == "" || st.bpools[ref] != nil {
		return nil
	}
	return fmt.Errorf("fake: 404 backend pool %q not found: expected the ID of an existing backend pool", ref)
}

// freshPools is freshLoadBalancers with the pool calls of a Cloud with
// shared backend pools: each pool look-up first brings the state up to
// date with the state file (see freshLoadBalancers).
type freshPools struct {
	freshLoadBalancers
	next loadbalancer.PoolDriver
}

func (d freshPools) FindPools(ctx context.Context, q loadbalancer.PoolQuery) ([]*loadbalancer.Pool, error) {
	if err := d.s.sync(ctx); err != nil {
		return nil, err
	}
	return d.next.FindPools(ctx, q)
}

func (d freshPools) ApplyPool(ctx context.Context, a loadbalancer.PoolAction) (*loadbalancer.Pool, error) {
	return d.next.ApplyPool(ctx, a)
}

func (d freshPools) DeletePool(ctx context.Context, p *loadbalancer.Pool) error {
	return d.next.DeletePool(ctx, p)
}
