package fake

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"maps"
	"net/netip"
	"slices"
	"strconv"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/ccmkit/ccmkit/instances"
	"github.com/ccmkit/ccmkit/loadbalancer"
)

// lbDriver is the fake's loadbalancer.Driver: load balancers are stored as
// the loadbalancer model, changed with loadbalancer.Apply (the reference
// semantics of each action), plus VIPs from the pools, the moment each is
// provisioned and the moment each stops being busy. With
// LoadBalancerSection.Backends instanceID it keeps only the provider ID of
// each backend, as a cloud whose targets are instances; with
// LoadBalancerSection.Hierarchical it keeps each as a tree of objects and
// enforces that cloud's rules (hierarchical.go).
type lbDriver struct{ s *store }

var _ loadbalancer.ListDriver = lbDriver{}

// Find returns copies of the load balancers matching q, using the name and
// Service-UID indexes, as reported now (no ingress while provisioning).
func (d lbDriver) Find(ctx context.Context, q loadbalancer.Query) (out []*loadbalancer.LoadBalancer, err error) {
	err = d.s.readCtx(ctx, func() error {
		now := d.s.now()
		var ids iter.Seq[string]
		switch uid, byUID := q.Tags[loadbalancer.TagServiceUID]; {
		case q.ID != "":
			ids = slices.Values([]string{q.ID})
		case q.Name != "":
			ids = maps.Keys(d.s.lbNames[q.Name])
		case byUID:
			ids = maps.Keys(d.s.lbUIDs[uid])
		default:
			ids = maps.Keys(d.s.lbs)
		}
		out = []*loadbalancer.LoadBalancer{}
		for id := range ids {
			r := d.s.lbs[id]
			if r != nil && hasTags(r.lb.Tags, q.Tags) {
				out = append(out, r.reported(now))
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// List returns copies of every load balancer, as reported now, in ID
// order.
func (d lbDriver) List(ctx context.Context) (out []*loadbalancer.LoadBalancer, err error) {
	err = d.s.readCtx(ctx, func() error {
		now := d.s.now()
		out = make([]*loadbalancer.LoadBalancer, 0, len(d.s.lbs))
		for _, r := range d.s.sortedLoadBalancers() {
			out = append(out, r.reported(now))
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// freshLoadBalancers is the loadbalancer.Driver in front of the
// loadbalancer.Cache when the state is shared through a file: before each
// look-up it brings the state up to date, which drops the cache when
// another process changed a load balancer (store.reload), so such a change
// is seen at the next look-up. It makes no cloud API call.
type freshLoadBalancers struct {
	s    *store
	next loadbalancer.Driver
}

func (d freshLoadBalancers) Find(ctx context.Context, q loadbalancer.Query) ([]*loadbalancer.LoadBalancer, error) {
	if err := d.s.sync(ctx); err != nil {
		return nil, err
	}
	return d.next.Find(ctx, q)
}

func (d freshLoadBalancers) Apply(ctx context.Context, a loadbalancer.Action) (*loadbalancer.LoadBalancer, error) {
	return d.next.Apply(ctx, a)
}

func (d freshLoadBalancers) Delete(ctx context.Context, lb *loadbalancer.LoadBalancer) error {
	return d.next.Delete(ctx, lb)
}

func hasTags(tags, want map[string]string) bool {
	for k, v := range want {
		if got, ok := tags[k]; !ok || got != v {
			return false
		}
	}
	return true
}

// Apply performs one action atomically and returns the load balancer as
// reported now: on error nothing changes, but for errBusy's, which comes
// with the result of a write that left the load balancer busy
// (LoadBalancerSection.BusyAfterWrite). A write to a busy load balancer,
// or one the cloud's rules refuse (store.admit), fails with an error
// wrapping throttle.ErrRefused.
func (d lbDriver) Apply(ctx context.Context, a loadbalancer.Action) (out *loadbalancer.LoadBalancer, err error) {
	var busy time.Duration
	err = d.s.writeCtx(ctx, func() (bool, error) {
		now := d.s.now()
		a, err := d.s.admit(a, now)
		if err != nil {
			return false, err
		}
		next, err := d.s.applyLB(a)
		if err != nil {
			return false, err
		}
		busy = d.s.markBusy(next, now)
		out = next.reported(now)
		return true, nil
	})
	if err != nil {
		return nil, err
	}
	if busy > 0 {
		return out, errBusy(out.ID, busy)
	}
	return out, nil
}

// applyLB performs a on the stored load balancers (mu held for writing)
// and returns the stored result; on a hierarchical cloud an ActionCreate
// makes the load balancer alone (createAlone) and new listeners and pools
// get their IDs (assignIDs). On error nothing changes.
func (s *store) applyLB(a loadbalancer.Action) (*lbRecord, error) {
	if s.lbCfg.Hierarchical {
		a = createAlone(a)
	}
	if s.lbCfg.Backends == BackendsInstanceID {
		var err error
		if a, err = s.instanceTargets(a); err != nil {
			return nil, err
		}
	}
	if err := s.checkPoolRef(a); err != nil {
		return nil, err
	}
	if err := s.checkNameFree(a); err != nil {
		return nil, err
	}
	var cur *lbRecord
	if a.Kind != loadbalancer.ActionCreate {
		if cur = s.lbs[a.LoadBalancerID]; cur == nil {
			return nil, errors.New("fake: 404 load balancer not found")
		}
	}
	var curLB *loadbalancer.LoadBalancer
	if cur != nil {
		curLB = cur.lb
	}
	next, err := loadbalancer.Apply(curLB, a)
	if err != nil {
		return nil, fmt.Errorf("fake: %w", err)
	}
	rec := &lbRecord{lb: next}
	switch a.Kind {
	case loadbalancer.ActionCreate:
		next.ID = "lb-" + strconv.Itoa(s.nextLB+1)
		if rec.vips, err = s.allocateVIPs(nil, next.Spec); err != nil {
			return nil, fmt.Errorf("fake: %w", err)
		}
		s.nextLB++
		if d := time.Duration(s.delay.Load()); d > 0 {
			rec.readyAt = s.now().Add(d)
		}
	case loadbalancer.ActionUpdateFrontend:
		if rec.vips, err = s.allocateVIPs(cur.vips, next.Spec); err != nil {
			return nil, fmt.Errorf("fake: %w", err)
		}
	default:
		rec.vips = cur.vips
	}
	if cur != nil {
		rec.readyAt, rec.busyUntil = cur.readyAt, cur.busyUntil
	}
	if s.lbCfg.Hierarchical {
		s.assignIDs(next)
	}
	next.Ingress = s.ingress(next.Name, rec.vips)
	if cur != nil {
		s.unindexLB(cur.lb)
	}
	s.lbs[next.ID] = rec
	s.indexLB(next)
	return rec, nil
}

// checkNameFree refuses an ActionCreate of a name a stored load balancer
// has, with LoadBalancerSection.UniqueNames (mu held): a 409 wrapping
// loadbalancer.ErrNameTaken and loadbalancer.ErrRefused.
func (s *store) checkNameFree(a loadbalancer.Action) error {
	if !s.lbCfg.UniqueNames || a.Kind != loadbalancer.ActionCreate || a.Create == nil {
		return nil
	}
	ids := s.lbNames[a.Create.Name]
	if len(ids) == 0 {
		return nil
	}
	return fmt.Errorf("fake: 409 load balancer name %s is taken by %s: %w", clipValue(a.Create.Name), slices.Sorted(maps.Keys(ids))[0], errors.Join(loadbalancer.ErrNameTaken, loadbalancer.ErrRefused))
}

// errInvalidBackend is wrapped by the error of an ActionCreate or
// ActionAddBackends that LoadBalancerSection.Backends instanceID rejects, as
// a real cloud rejects a target that is not one of its instances: a
// backend whose provider ID does not parse as "fake://<id>", or names an
// unknown or terminated instance. The error names the provider ID (and the
// Node, when the backend has its name).
var errInvalidBackend = kindOf(ErrInvalid, "fake: invalid load-balancer backend")

// instanceTargets returns a with each backend reduced to what a cloud of
// instance targets keeps, its provider ID, and a created load balancer
// keyed by it (mu held). It returns an error wrapping errInvalidBackend
// when a backend to add is not a live instance of this cloud.
func (s *store) instanceTargets(a loadbalancer.Action) (loadbalancer.Action, error) {
	var err error
	switch a.Kind {
	case loadbalancer.ActionCreate:
		if a.Create == nil {
			return a, nil // loadbalancer.Apply names the problem
		}
		a.Create = a.Create.Clone()
		a.Create.Spec.BackendKey = loadbalancer.BackendKeyProviderID
		a.Create.Spec.Backends, err = s.targets(a.Create.Spec.Backends, true)
	case loadbalancer.ActionAddBackends, loadbalancer.ActionRemoveBackends:
		a.Backends, err = s.targets(a.Backends, a.Kind == loadbalancer.ActionAddBackends)
	}
	return a, err
}

// targets returns a copy of bs with each backend reduced to what a cloud
// of instance targets keeps, its provider ID; when they are being added
// (adding), each is first checked to be a live instance (checkTarget; mu
// held).
func (s *store) targets(bs []loadbalancer.Backend, adding bool) ([]loadbalancer.Backend, error) {
	out := make([]loadbalancer.Backend, len(bs))
	for i, b := range bs {
		if adding {
			if err := s.checkTarget(b); err != nil {
				return nil, err // wraps errInvalidBackend, which says "fake: "
			}
		}
		out[i] = loadbalancer.Backend{ProviderID: b.ProviderID}
	}
	return out, nil
}

// checkTarget returns an error wrapping errInvalidBackend unless b's
// provider ID names a live (running or stopped) instance (mu held).
func (s *store) checkTarget(b loadbalancer.Backend) error {
	what := fmt.Sprintf("backend %q", b.ProviderID)
	if b.NodeName != "" {
		what += fmt.Sprintf(" (node %q)", b.NodeName)
	}
	id, err := codec.Parse(b.ProviderID)
	if err != nil {
		return fmt.Errorf("%w: %s: %w", errInvalidBackend, what, err)
	}
	switch in := s.instances[id.ID]; {
	case in == nil:
		return fmt.Errorf("%w: %s: no instance %q: expected an instance of this cloud", errInvalidBackend, what, id.ID)
	case in.State == instances.StateTerminated:
		return fmt.Errorf("%w: %s: instance %q is terminated: expected a running or stopped instance", errInvalidBackend, what, id.ID)
	}
	return nil
}

// Delete removes lb, with its listeners, pools, members and monitors on a
// hierarchical cloud, and releases its VIPs; a missing one is not an
// error. A busy one is refused (errRefusedBusy), changing nothing.
func (d lbDriver) Delete(ctx context.Context, lb *loadbalancer.LoadBalancer) error {
	if lb == nil {
		return nil
	}
	return d.s.writeCtx(ctx, func() (bool, error) {
		r := d.s.lbs[lb.ID]
		if r == nil {
			return false, nil
		}
		if err := r.checkIdle(d.s.now()); err != nil {
			return false, err
		}
		for _, ip := range r.vips {
			d.s.lbPools[ip.Is4()].release(ip)
		}
		d.s.unindexLB(r.lb)
		delete(d.s.lbs, lb.ID)
		return true, nil
	})
}

func (st *cloudState) indexLB(lb *loadbalancer.LoadBalancer) {
	st.lbNames.add(lb.Name, lb.ID)
	if uid, ok := lb.Tags[loadbalancer.TagServiceUID]; ok {
		st.lbUIDs.add(uid, lb.ID)
	}
}

func (st *cloudState) unindexLB(lb *loadbalancer.LoadBalancer) {
	st.lbNames.remove(lb.Name, lb.ID)
	if uid, ok := lb.Tags[loadbalancer.TagServiceUID]; ok {
		st.lbUIDs.remove(uid, lb.ID)
	}
}

// allocateVIPs returns one VIP per family of spec: the requested address
// of that family if any, else the current VIP of that family, else the next
// free one. Current VIPs not kept are released; on error nothing changes.
func (s *store) allocateVIPs(current []netip.Addr, spec loadbalancer.Spec) ([]netip.Addr, error) {
	var taken, out []netip.Addr
	undo := func() {
		for _, ip := range taken {
			s.lbPools[ip.Is4()].release(ip)
		}
	}
	for _, fam := range spec.IPFamilies {
		is4 := fam == v1.IPv4Protocol
		p := s.lbPools[is4]
		var want, have netip.Addr
		for _, ip := range spec.RequestedIPs {
			if ip.Is4() == is4 {
				want = ip
			}
		}
		for _, ip := range current {
			if ip.Is4() == is4 {
				have = ip
			}
		}
		switch {
		case want.IsValid() && want == have, !want.IsValid() && have.IsValid():
			out = append(out, have)
		case want.IsValid():
			if !p.contains(want) {
				undo()
				return nil, fmt.Errorf("requested IP %s is outside the %s pool %s: expected an address of the pool", want, fam, p.prefix)
			}
			if err := p.take(want); err != nil {
				undo()
				return nil, fmt.Errorf("requested IP %s: %w", want, err)
			}
			taken, out = append(taken, want), append(out, want)
		default:
			ip, err := p.allocate()
			if err != nil {
				undo()
				return nil, err
			}
			taken, out = append(taken, ip), append(out, ip)
		}
	}
	for _, ip := range current {
		if !slices.Contains(out, ip) {
			s.lbPools[ip.Is4()].release(ip)
		}
	}
	return out, nil
}

// ingress is what a load balancer reports: its hostname in hostname mode,
// otherwise its VIPs with the configured ipMode.
func (s *store) ingress(name string, vips []netip.Addr) []loadbalancer.Ingress {
	if s.lbCfg.HostnameSuffix != "" {
		return []loadbalancer.Ingress{{Hostname: name + "." + s.lbCfg.HostnameSuffix}}
	}
	out := make([]loadbalancer.Ingress, 0, len(vips))
	for _, ip := range vips {
		out = append(out, loadbalancer.Ingress{IP: ip.String(), IPMode: s.lbCfg.IPMode})
	}
	return out
}

// Invalidate forwards to the cache behind d (loadbalancer.Cache.Invalidate),
// so that loadbalancer.Reconciler.Invalidate reaches it through d.
func (d freshLoadBalancers) Invalidate() {
	if c, ok := d.next.(invalidator); ok {
		c.Invalidate()
	}
}

// invalidator is a Driver with a cache to drop (loadbalancer.Cache).
type invalidator interface{ Invalidate() }

func (a cloudAPI) Find(ctx context.Context, q loadbalancer.Query) ([]*loadbalancer.LoadBalancer, error) {
	return gate(ctx, a, OpFindLoadBalancers, func(f *Funcs, next cloudAPI) ([]*loadbalancer.LoadBalancer, error) {
		if f == nil || f.FindLoadBalancers == nil {
			return lbDriver{a.s}.Find(ctx, q)
		}
		return f.FindLoadBalancers(ctx, next, q)
	})
}

func (a cloudAPI) List(ctx context.Context) ([]*loadbalancer.LoadBalancer, error) {
	return gate(ctx, a, OpListLoadBalancers, func(f *Funcs, next cloudAPI) ([]*loadbalancer.LoadBalancer, error) {
		if f == nil || f.ListLoadBalancers == nil {
			return lbDriver{a.s}.List(ctx)
		}
		return f.ListLoadBalancers(ctx, next)
	})
}

func (a cloudAPI) Apply(ctx context.Context, act loadbalancer.Action) (*loadbalancer.LoadBalancer, error) {
	return gate(ctx, a, OpApplyLoadBalancer, func(f *Funcs, next cloudAPI) (*loadbalancer.LoadBalancer, error) {
		if f == nil || f.ApplyLoadBalancer == nil {
			return lbDriver{a.s}.Apply(ctx, act)
		}
		return f.ApplyLoadBalancer(ctx, next, act)
	})
}

func (a cloudAPI) Delete(ctx context.Context, lb *loadbalancer.LoadBalancer) error {
	return gateErr(ctx, a, OpDeleteLoadBalancer, func(f *Funcs, next cloudAPI) error {
		if f == nil || f.DeleteLoadBalancer == nil {
			return lbDriver{a.s}.Delete(ctx, lb)
		}
		return f.DeleteLoadBalancer(ctx, next, lb)
	})
}

func (a cloudAPI) FindPools(ctx context.Context, q loadbalancer.PoolQuery) ([]*loadbalancer.Pool, error) {
	return gate(ctx, a, OpFindBackendPools, func(f *Funcs, next cloudAPI) ([]*loadbalancer.Pool, error) {
		if f == nil || f.FindBackendPools == nil {
			return lbDriver{a.s}.FindPools(ctx, q)
		}
		return f.FindBackendPools(ctx, next, q)
	})
}

func (a cloudAPI) ListPools(ctx context.Context) ([]*loadbalancer.Pool, error) {
	return gate(ctx, a, OpListBackendPools, func(f *Funcs, next cloudAPI) ([]*loadbalancer.Pool, error) {
		if f == nil || f.ListBackendPools == nil {
			return lbDriver{a.s}.ListPools(ctx)
		}
		return f.ListBackendPools(ctx, next)
	})
}

func (a cloudAPI) ApplyPool(ctx context.Context, act loadbalancer.PoolAction) (*loadbalancer.Pool, error) {
	return gate(ctx, a, OpApplyBackendPool, func(f *Funcs, next cloudAPI) (*loadbalancer.Pool, error) {
		if f == nil || f.ApplyBackendPool == nil {
			return lbDriver{a.s}.ApplyPool(ctx, act)
		}
		return f.ApplyBackendPool(ctx, next, act)
	})
}

func (a cloudAPI) DeletePool(ctx context.Context, p *loadbalancer.Pool) error {
	return gateErr(ctx, a, OpDeleteBackendPool, func(f *Funcs, next cloudAPI) error {
		if f == nil || f.DeleteBackendPool == nil {
			return lbDriver{a.s}.DeletePool(ctx, p)
		}
		return f.DeleteBackendPool(ctx, next, p)
	})
}
