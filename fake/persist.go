package fake

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/ccmkit/ccmkit/loadbalancer"
	"github.com/ccmkit/ccmkit/routes"
)

// ErrStateFile is wrapped by every error about the shared state
// (Config.StateFile, kept by a Persistence such as package
// fake/statefile's): it cannot be locked, read or written, it is not a
// state of this format, it is corrupt, it was removed after it was
// loaded, or it was created from a cloud-config with other pools. The
// error names the file. The fake never replaces a state it cannot read. A
// cloud API call whose context ends while it waits for the lock (held by
// another process or Cloud, or by a call of this Cloud before it) fails
// with an ErrStateFile error that also wraps ctx.Err(), having changed
// nothing, and so does an admin endpoint request (503) at its deadline;
// the control surface, which takes no context, waits.
var ErrStateFile = errors.New("fake: state file")

// Persistence keeps the state of a cloud outside the Cloud, shared by
// every Cloud built over the same one, in this process or another
// (Options.Persistence): package fake/statefile implements it over the
// file Config.StateFile names. The fake keeps the model (what a state
// holds and whether it is valid); a Persistence keeps the bytes.
//
// A Cloud runs every operation on a shared cloud as one transaction:
// Lock, Load, the operation, Save when it changed the cloud, unlock.
// Load and Save are only called with the lock held, by one goroutine at a
// time. Every error a Persistence returns wraps ErrStateFile and names
// where the state is kept.
type Persistence interface {
	// Lock waits until the caller holds the shared state exclusively —
	// against other processes, other Clouds and this Cloud's other
	// operations — at most until ctx is done, and returns the function
	// that releases it. A free lock is taken even when ctx is done. When
	// ctx ends first the error also wraps ctx.Err(), and nothing is held.
	Lock(ctx context.Context) (unlock func(), err error)
	// Load calls restore with the state saved since this Persistence last
	// loaded or saved one (by any process), and reports whether it did: it
	// does not when nothing was saved since, nor when nothing was ever
	// saved (a cloud not created yet: the first Save creates it). When
	// restore fails, the state counts as not loaded and Load returns
	// restore's error, wrapped. A state removed after it was loaded is an
	// error.
	Load(restore func(*SavedState) error) (bool, error)
	// Save keeps st as the shared state, replacing the last one at once
	// (a reader never sees a partial state). After a failed Save the next
	// Load loads the kept state again.
	Save(st *SavedState) error
}

// SavedState is the whole state of a cloud as a Persistence keeps it:
// every field a Cloud needs to rebuild it. Lists are sorted (instances,
// load balancers and backend pools by ID, routes as the table has them).
type SavedState struct {
	// Cloud is the part of the cloud-config that defines the cloud: every
	// Cloud sharing a state must have the same.
	Cloud SavedCloud
	// NextInstance, NextLoadBalancer and NextBackendPool are the ID
	// counters; RouteRevision counts the route table's changes.
	NextInstance, NextLoadBalancer, NextBackendPool int
	RouteRevision                                   uint64
	// NextListener and NextListenerPool are the ID counters of a
	// hierarchical cloud's listeners and pools (zero on a flat one).
	NextListener, NextListenerPool int
	// Pools are the address pools' cursors: the next address each tries.
	Pools []SavedPool
	// Instances are the instances, with their State.
	Instances []Instance
	// LoadBalancers are the load balancers, with the ingress they report
	// once ready.
	LoadBalancers []SavedLoadBalancer
	// BackendPools are the shared backend pools (LoadBalancerSection.
	// BackendPools shared).
	BackendPools []loadbalancer.Pool
	// Routes is the route table. routes.Entry.Extra is the fake's own
	// index record: a Persistence need not keep it (the fake rebuilds it).
	Routes []routes.Entry
}

// SavedCloud is the part of a cloud-config that defines the cloud:
// InstanceCIDRs, and LoadBalancers (with defaults) but for
// ProvisioningDelay, which each process may change at run time (each load
// balancer keeps when it is ready), and BusyAfterWrite, which each process
// may have its own of (each load balancer keeps until when it is busy),
// nor CoalesceWindow (the provider's, not the cloud's), and with
// BackendPools empty unless shared.
type SavedCloud struct {
	InstanceCIDRs []string
	LoadBalancers LoadBalancerSection
}

// SavedPool is an address pool's allocation cursor: the next address it
// tries (Next) in the pool CIDR.
type SavedPool struct {
	CIDR, Next string
}

// SavedLoadBalancer is a load balancer as a Persistence keeps it: with the
// ingress it reports once ready (LoadBalancer, required; on a hierarchical
// cloud with its listeners' IDs, pools, members and monitors, and each
// listener's node port as it was set), its VIPs (one per family, in
// Spec.IPFamilies order), when it is ready (zero: since its creation) and
// until when it is busy (zero: never was).
type SavedLoadBalancer struct {
	LoadBalancer *loadbalancer.LoadBalancer
	VIPs         []netip.Addr
	ReadyAt      time.Time
	BusyUntil    time.Time
}

// savedCloud returns the part of cfg (with defaults) that defines the
// cloud.
func savedCloud(cfg Config) SavedCloud {
	lb := cfg.LoadBalancers
	lb.ProvisioningDelay, lb.BusyAfterWrite, lb.CoalesceWindow = nil, nil, nil
	if lb.BackendPools != BackendPoolsShared {
		lb.BackendPools = "" // absent otherwise, as in files written before it
	}
	return SavedCloud{InstanceCIDRs: slices.Clone(cfg.InstanceCIDRs), LoadBalancers: lb}
}

// saved returns st as a Persistence keeps it, for the cloud of cfg.
func (st *cloudState) saved(cfg Config) *SavedState {
	out := &SavedState{
		Cloud: savedCloud(cfg), NextInstance: st.nextInstance, NextLoadBalancer: st.nextLB, NextBackendPool: st.nextBPool,
		RouteRevision: st.routeRev, Instances: st.appendInstances(nil), Routes: slices.Clone(st.routes),
		NextListener: st.nextListener, NextListenerPool: st.nextListenerPool,
	}
	for _, p := range st.sortedBackendPools() {
		out.BackendPools = append(out.BackendPools, *p.Clone())
	}
	for _, r := range st.sortedLoadBalancers() {
		out.LoadBalancers = append(out.LoadBalancers, SavedLoadBalancer{LoadBalancer: r.lb.Clone(), VIPs: slices.Clone(r.vips), ReadyAt: r.readyAt, BusyUntil: r.busyUntil})
	}
	for _, p := range st.pools() {
		out.Pools = append(out.Pools, SavedPool{CIDR: p.prefix.String(), Next: p.next.String()})
	}
	return out
}

// pools returns the instance pools, then the IPv4 and IPv6 load-balancer
// pools.
func (st *cloudState) pools() []*pool {
	return append(slices.Clone(st.instPools), st.lbPools[true], st.lbPools[false])
}

// restoreState rebuilds the state saved holds, checking it against cfg
// (with defaults): its cloud (checkSameCloud), then counters, pool
// cursors, instances, backend pools, load balancers and routes, in that
// order, stopping at the first that is invalid (the error names it).
func restoreState(saved *SavedState, cfg Config) (cloudState, error) {
	if err := checkSameCloud(saved.Cloud, cfg); err != nil {
		return cloudState{}, err
	}
	st, err := emptyState(cfg)
	if err != nil {
		return cloudState{}, err
	}
	if saved.NextInstance < 0 || saved.NextLoadBalancer < 0 || saved.NextBackendPool < 0 || saved.NextListener < 0 || saved.NextListenerPool < 0 {
		return cloudState{}, fmt.Errorf("nextInstance %d, nextLoadBalancer %d, nextBackendPool %d, nextListener %d, nextListenerPool %d: expected counters of zero or more",
			saved.NextInstance, saved.NextLoadBalancer, saved.NextBackendPool, saved.NextListener, saved.NextListenerPool)
	}
	st.nextInstance, st.nextLB, st.nextBPool = saved.NextInstance, saved.NextLoadBalancer, saved.NextBackendPool
	st.nextListener, st.nextListenerPool = saved.NextListener, saved.NextListenerPool
	for i, sp := range saved.Pools {
		if err := st.setPoolNext(sp); err != nil {
			return cloudState{}, fmt.Errorf("pools[%d]: %w", i, err)
		}
	}
	for i, in := range saved.Instances {
		if err := st.loadInstance(field.NewPath("instances").Index(i), in); err != nil {
			return cloudState{}, err
		}
	}
	for i, p := range saved.BackendPools {
		if p.ID == "" || st.bpools[p.ID] != nil {
			return cloudState{}, fmt.Errorf("backendPools[%d] (id %q): id %q: expected a backend pool ID, each once", i, p.ID, p.ID)
		}
		st.bpools[p.ID] = p.Clone()
	}
	for i, v := range saved.LoadBalancers {
		if err := st.loadLoadBalancer(v); err != nil {
			return cloudState{}, fmt.Errorf("loadBalancers[%d] (id %q): %w", i, v.LoadBalancer.ID, err)
		}
	}
	// The route table's rules, as for every other way into it: a state
	// that breaks them is not loaded at all.
	if err := st.setRoutes(slices.Clone(saved.Routes), tablePath); err != nil {
		return cloudState{}, err
	}
	st.routeRev = saved.RouteRevision // the state's, not setRoutes' count
	return st, nil
}

// checkSameCloud returns an error naming the first difference between
// got, the cloud a state was saved for, and the cloud of cfg (with
// defaults): every process sharing a state must have the same.
func checkSameCloud(got SavedCloud, cfg Config) error {
	want := savedCloud(cfg)
	if !slices.Equal(got.InstanceCIDRs, want.InstanceCIDRs) {
		return fmt.Errorf("cloud.instanceCIDRs %v, but the cloud-config has instanceCIDRs %v: expected the same cloud-config in every process sharing a state file", got.InstanceCIDRs, want.InstanceCIDRs)
	}
	if got.LoadBalancers != want.LoadBalancers {
		return fmt.Errorf("cloud.loadBalancers %+v, but the cloud-config has loadBalancers %+v (with defaults): expected the same cloud-config in every process sharing a state file", got.LoadBalancers, want.LoadBalancers)
	}
	return nil
}

func (st *cloudState) setPoolNext(sp SavedPool) error {
	for _, p := range st.pools() {
		if p.prefix.String() != sp.CIDR {
			continue
		}
		a, err := netip.ParseAddr(sp.Next)
		if err != nil || !p.contains(a) {
			return fmt.Errorf("next %q: expected an allocatable address of %s", sp.Next, sp.CIDR)
		}
		p.next = a
		return nil
	}
	return fmt.Errorf("cidr %q: expected one of the configured pools", sp.CIDR)
}

// loadInstance adds a saved instance, taking its internal addresses; path
// names it in errors.
func (st *cloudState) loadInstance(path *field.Path, in Instance) error {
	if errs := validateInstance(path, in); len(errs) > 0 {
		return errs.ToAggregate()
	}
	switch {
	case in.ID == "":
		return fmt.Errorf("%s: expected the instance ID", path.Child("id"))
	case st.instances[in.ID] != nil:
		return fmt.Errorf("%s %q: expected each instance ID once", path.Child("id"), in.ID)
	}
	for j, s := range in.InternalIPs {
		ip := netip.MustParseAddr(s) // validated
		if owner, taken := st.instIPs[ip]; taken {
			return fmt.Errorf("%s %s: also the address of instance %q: expected distinct addresses", path.Child("internalIPs").Index(j), ip, owner)
		}
		for _, p := range st.instPools {
			if p.contains(ip) {
				_ = p.take(ip) // free: instIPs had no owner
			}
		}
		st.instIPs[ip] = in.ID
	}
	in = in.clone()
	st.instances[in.ID] = &in
	st.instByName.add(in.Name, in.ID)
	return nil
}

// loadLoadBalancer adds a saved load balancer, taking its VIPs.
func (st *cloudState) loadLoadBalancer(v SavedLoadBalancer) error {
	lb := v.LoadBalancer
	if lb.ID == "" || st.lbs[lb.ID] != nil {
		return fmt.Errorf("id %q: expected a load balancer ID, each once", lb.ID)
	}
	if lb.Spec.BackendPool != "" && st.bpools[lb.Spec.BackendPool] == nil {
		return fmt.Errorf("backendPool %q: expected the ID of a backend pool of the file", lb.Spec.BackendPool)
	}
	for j, ip := range v.VIPs {
		p := st.lbPools[ip.Is4()]
		if !p.contains(ip) {
			return fmt.Errorf("vips[%d] %s: expected an address of the pool %s", j, ip, p.prefix)
		}
		if err := p.take(ip); err != nil {
			return fmt.Errorf("vips[%d]: %w: expected each VIP once", j, err)
		}
	}
	rec := &lbRecord{lb: lb.Clone(), vips: slices.Clone(v.VIPs), readyAt: v.ReadyAt, busyUntil: v.BusyUntil}
	st.lbs[lb.ID] = rec
	st.indexLB(rec.lb)
	return nil
}
