package fake

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"net/netip"
	"reflect"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/ccmkit/ccmkit/instances"
	"github.com/ccmkit/ccmkit/loadbalancer"
	"github.com/ccmkit/ccmkit/routes"
)

// Errors of the control surface, of the kinds in errors.go. They are
// wrapped with the instance ID.
var (
	// errInstanceNotFound: no instance has this ID.
	errInstanceNotFound = kindOf(ErrNotFound, "fake: instance not found")
	// errInstanceExists: AddInstance with an ID that is taken.
	errInstanceExists = kindOf(ErrConflict, "fake: instance ID already exists")
	// errInstanceTerminated: starting or stopping a terminated instance.
	errInstanceTerminated = kindOf(ErrConflict, "fake: instance is terminated")
	// errInvalidInstance: AddInstance with invalid fields (the error
	// names each field, its value and what was expected).
	errInvalidInstance = kindOf(ErrInvalid, "fake: invalid instance")
)

// store is the fake cloud's state and the one place that decides how it
// is kept: in memory only, or (with Options.Persistence, such as the state
// file of Config.StateFile) also shared with other processes. Every access
// goes through readCtx or writeCtx (read and write wait without a
// deadline), which take the locks, bring the state up to date with the
// shared one and save what changed.
type store struct {
	mu sync.RWMutex
	// file keeps the shared state (Options.Persistence); nil keeps the
	// state in memory only.
	file Persistence
	// cfg is the cloud-config (with defaults) a shared state must match.
	cfg Config
	// persisted reports whether file held a state or saved one (guarded
	// by mu): a cloud that exists is not seeded again.
	persisted bool
	// lbCfg decides how ingress is reported and what is kept of backends;
	// it never changes (its ProvisioningDelay is only the initial delay).
	lbCfg LoadBalancerSection
	// now is the cloud's clock (Options.Clock): provisioning and the rate
	// limit read it. It never changes.
	now func() time.Time
	// delay is the provisioning delay of load balancers created from now
	// on, a time.Duration (SetProvisioningDelay).
	delay atomic.Int64
	// busyAfter is how long a load balancer stays busy after each write
	// of the cloud API (LoadBalancerSection.BusyAfterWrite, with its
	// default); 0: never. It never changes.
	busyAfter time.Duration
	// limits is the rate limit of the cloud account, shared by every Cloud
	// over this store.
	limits *limiter
	// onInstanceChange are called (with mu held) after every change of an
	// instance, made here or, with a state file, seen in the file: each
	// Cloud over the store drops its instance cache there. Appended to
	// with mu held.
	onInstanceChange []func()
	// onLBChange are called (with mu held) when a reload of the state
	// file finds a load balancer changed by another process: each Cloud
	// over the store drops its load-balancer cache there. Appended to with
	// mu held.
	onLBChange []func()
	// onRouteChange are called (with mu held) after a route is added
	// through the control surface, or when a reload of the state file
	// finds the route table changed by another process: each Cloud over
	// the store drops its remembered route lists there. Appended to with
	// mu held.
	onRouteChange []func()

	cloudState // guarded by mu
}

// cloudState is the whole state of the cloud: what a state file holds.
type cloudState struct {
	instances    map[string]*Instance // by ID; values are replaced, never mutated
	instByName   index                // name → IDs
	instIPs      map[netip.Addr]string
	instPools    []*pool // at most one per family
	nextInstance int

	lbs     map[string]*lbRecord // by ID
	lbNames index                // name → IDs
	lbUIDs  index                // loadbalancer.TagServiceUID value → IDs
	lbPools map[bool]*pool       // by Is4
	nextLB  int
	// nextListener and nextListenerPool count the listener and pool IDs
	// of a hierarchical cloud ("lis-<n>", "pool-<n>").
	nextListener, nextListenerPool int

	bpools    map[string]*loadbalancer.Pool // shared backend pools by ID; values are replaced, never mutated
	nextBPool int

	routes   []routes.Entry // replaced as a whole, never mutated
	routeRev uint64
	routeIdx *routeIndex // of routes; changed only with them (setRoutes)
}

// lbRecord is a stored load balancer: the model, its VIPs, when it is
// provisioned and until when it is busy. lb.Ingress is what it reports
// once ready.
type lbRecord struct {
	lb        *loadbalancer.LoadBalancer
	vips      []netip.Addr // one per family, in lb.Spec.IPFamilies order
	readyAt   time.Time    // zero: ready since its creation
	busyUntil time.Time    // zero: never busy (LoadBalancerSection.BusyAfterWrite)
}

// provisioning reports whether r is still being provisioned at now: it
// reports no ingress yet.
func (r *lbRecord) provisioning(now time.Time) bool { return now.Before(r.readyAt) }

// reported returns a copy of the load balancer as the cloud reports it at
// now: without ingress while it is provisioning, and a hierarchical one's
// listeners as reportTree says.
func (r *lbRecord) reported(now time.Time) *loadbalancer.LoadBalancer {
	out := r.lb.Clone()
	if r.provisioning(now) {
		out.Ingress = nil
	}
	reportTree(&out.Spec)
	return out
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

// emptyState returns a cloud with the pools of cfg (with defaults
// applied) and nothing else.
func emptyState(cfg Config) (cloudState, error) {
	st := cloudState{
		instances: map[string]*Instance{}, instByName: index{}, instIPs: map[netip.Addr]string{},
		lbs: map[string]*lbRecord{}, lbNames: index{}, lbUIDs: index{}, lbPools: map[bool]*pool{},
		bpools: map[string]*loadbalancer.Pool{}, routeIdx: newRouteIndex(),
	}
	for _, c := range cfg.InstanceCIDRs {
		p, err := newPool(c)
		if err != nil {
			return cloudState{}, fmt.Errorf("fake: instanceCIDRs: %w", err)
		}
		st.instPools = append(st.instPools, p)
	}
	for _, c := range []string{cfg.LoadBalancers.IPv4Pool, cfg.LoadBalancers.IPv6Pool} {
		p, err := newPool(c)
		if err != nil {
			return cloudState{}, fmt.Errorf("fake: loadBalancers: %w", err)
		}
		st.lbPools[p.prefix.Addr().Is4()] = p
	}
	return st, nil
}

// newStore builds the state of cfg (with defaults applied) on the clock
// now: pools, then the seeded instances in order. With a Persistence p it
// loads the shared state instead, seeding it only when it does not exist
// yet. A cfg.StateFile without p is an error: package fake/statefile
// opens the file.
func newStore(cfg Config, now func() time.Time, p Persistence) (*store, error) {
	if cfg.StateFile != "" && p == nil {
		return nil, fmt.Errorf("fake.New: Config.StateFile %q without Options.Persistence: expected the file opened as it (statefile.Open)", cfg.StateFile)
	}
	st, err := emptyState(cfg)
	if err != nil {
		return nil, err
	}
	s := &store{lbCfg: cfg.LoadBalancers, now: now, limits: newLimiter(now, cfg.RateLimit), cloudState: st, file: p, cfg: cfg}
	s.delay.Store(int64(cfg.LoadBalancers.ProvisioningDelay.Duration))
	s.busyAfter = cfg.LoadBalancers.BusyAfterWrite.Duration
	err = s.write(func() (bool, error) {
		if s.persisted {
			return false, nil // an existing cloud: already seeded
		}
		for i, in := range cfg.Instances {
			if _, err := s.addInstance(in); err != nil {
				return false, fmt.Errorf("fake: instances[%d]: %w", i, err)
			}
		}
		return true, nil
	})
	if err != nil {
		return nil, err
	}
	return s, nil
}

// sync brings the state up to date with the state file (a no-op without
// one), dropping the instance cache when another process changed an
// instance. It returns an error wrapping ErrStateFile (and, when ctx ended
// while it waited for the file, ctx.Err()).
func (s *store) sync(ctx context.Context) error {
	return s.readCtx(ctx, func() error { return nil })
}

// read is readCtx without a deadline: with a state file it waits for the
// file lock as long as another process holds it. It serves the control
// surface, whose methods take no context.
func (s *store) read(fn func() error) error { return s.readCtx(context.Background(), fn) }

// readCtx runs fn, which must not change the state, with the state up to
// date. Without a state file it holds a read lock, so reads run in
// parallel, and ctx is not consulted. With one it runs as a transaction
// (see transact), reloading the file first if another process (or another
// store of this process) changed it. It returns fn's error unchanged, or
// an error wrapping ErrStateFile (and ctx.Err() when ctx ended before the
// file lock was taken; fn has not run then).
func (s *store) readCtx(ctx context.Context, fn func() error) error {
	if s.file == nil {
		s.mu.RLock()
		defer s.mu.RUnlock()
		return fn()
	}
	return s.transact(ctx, func() (bool, error) { return false, fn() })
}

// write is writeCtx without a deadline (see read).
func (s *store) write(fn func() (changed bool, err error)) error {
	return s.writeCtx(context.Background(), fn)
}

// writeCtx runs fn, which changes the state and reports whether it did,
// under the write lock. With a state file it runs as a transaction (see
// transact): it also holds the file lock, reloads the file first if it
// changed, and saves the new state (atomically) before unlocking when fn
// reports a change and no error. fn must leave the state unchanged when it
// returns an error. It returns fn's error unchanged, or an error wrapping
// ErrStateFile (and ctx.Err() when ctx ended before the file lock was
// taken: fn has not run and nothing changed); after a failed save the
// change is dropped (the next access reloads the file). Without a state
// file ctx is not consulted.
func (s *store) writeCtx(ctx context.Context, fn func() (changed bool, err error)) error {
	if s.file == nil {
		s.mu.Lock()
		defer s.mu.Unlock()
		_, err := fn()
		return err
	}
	return s.transact(ctx, fn)
}

// transact is one operation on a store with a Persistence: it takes the
// shared state's lock, waiting at most until ctx is done, then mu; brings
// the state up to date with the shared one; runs fn; and saves the state
// when fn reports a change and no error. Waiting is the only part ctx
// bounds: once fn runs, the transaction completes.
func (s *store) transact(ctx context.Context, fn func() (changed bool, err error)) error {
	unlock, err := s.file.Lock(ctx)
	if err != nil {
		return err
	}
	defer unlock()
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.reload(); err != nil {
		return err
	}
	changed, err := fn()
	if err != nil || !changed {
		return err
	}
	if err := s.file.Save(s.cloudState.saved(s.cfg)); err != nil {
		return err
	}
	s.persisted = true
	return nil
}

// reload brings the state up to date with the shared one (its lock and mu
// held), dropping the instance caches when an instance changed, the route
// lists when the route table did, and the load-balancer caches when a
// load balancer or a backend pool did.
func (s *store) reload() error {
	var next cloudState
	changed, err := s.file.Load(func(saved *SavedState) (err error) {
		next, err = restoreState(saved, s.cfg)
		return err
	})
	if err != nil || !changed {
		return err
	}
	s.persisted = true
	old := s.cloudState
	s.cloudState = next
	if !sameInstances(old.instances, s.instances) {
		s.instanceChanged()
	}
	if old.routeRev != s.routeRev {
		s.routeChanged()
	}
	if !sameLoadBalancers(old.lbs, s.lbs) || !maps.EqualFunc(old.bpools, s.bpools, samePool) {
		for _, f := range s.onLBChange {
			f()
		}
	}
	return nil
}

// sameLoadBalancers reports whether two load-balancer maps hold equal
// load balancers (a nil and an empty map or slice count as different: a
// reload that cannot tell only drops the caches once more).
func sameLoadBalancers(a, b map[string]*lbRecord) bool {
	return maps.EqualFunc(a, b, func(x, y *lbRecord) bool {
		return reflect.DeepEqual(x.lb, y.lb) && slices.Equal(x.vips, y.vips) && x.readyAt.Equal(y.readyAt) && x.busyUntil.Equal(y.busyUntil)
	})
}

// samePool reports whether two backend pools are equal.
func samePool(a, b *loadbalancer.Pool) bool { return reflect.DeepEqual(a, b) }

// sameInstances reports whether two instance maps hold equal instances.
func sameInstances(a, b map[string]*Instance) bool {
	return maps.EqualFunc(a, b, func(x, y *Instance) bool {
		return x.ID == y.ID && x.Name == y.Name && x.Zone == y.Zone && x.Region == y.Region &&
			x.Type == y.Type && x.Hostname == y.Hostname && x.State == y.State &&
			slices.Equal(x.InternalIPs, y.InternalIPs) && slices.Equal(x.ExternalIPs, y.ExternalIPs) &&
			maps.Equal(x.Labels, y.Labels)
	})
}

// addInstance validates in, fills in the defaults and stores it (mu held
// for writing).
func (s *store) addInstance(in Instance) (Instance, error) {
	if errs := validateInstance(field.NewPath("instance"), in); len(errs) > 0 {
		return Instance{}, fmt.Errorf("%w: %w", errInvalidInstance, errs.ToAggregate())
	}
	in = in.clone()
	if in.ID == "" {
		for in.ID == "" || s.instances[in.ID] != nil {
			s.nextInstance++
			in.ID = "i-" + strconv.Itoa(s.nextInstance)
		}
	} else if s.instances[in.ID] != nil {
		return Instance{}, fmt.Errorf("%w: %q", errInstanceExists, in.ID)
	}
	in.Zone = cmp.Or(in.Zone, defaultZone)
	in.Region = cmp.Or(in.Region, defaultRegion)
	in.Type = cmp.Or(in.Type, defaultInstanceType)
	in.Hostname = cmp.Or(in.Hostname, in.Name) // validate: Name is a DNS-1123 subdomain
	ips, err := s.instanceIPs(in)
	if err != nil {
		return Instance{}, err
	}
	in.InternalIPs = make([]string, len(ips))
	for i, ip := range ips {
		in.InternalIPs[i] = ip.String()
		s.instIPs[ip] = in.ID
	}
	for i, e := range in.ExternalIPs {
		in.ExternalIPs[i] = netip.MustParseAddr(e).String() // validated
	}
	s.instances[in.ID] = &in
	s.instByName.add(in.Name, in.ID)
	s.instanceChanged()
	return in.clone(), nil
}

// createInstance is addInstance under the write lock, waiting for a
// state file's lock at most until ctx ends (see writeCtx).
func (s *store) createInstance(ctx context.Context, in Instance) (out Instance, err error) {
	err = s.writeCtx(ctx, func() (bool, error) {
		out, err = s.addInstance(in)
		return err == nil, err
	})
	return out, err
}

// instanceIPs reserves the internal addresses of in: the given ones, or
// the next free address of each instance pool. Nothing is reserved on
// error.
func (s *store) instanceIPs(in Instance) ([]netip.Addr, error) {
	var ips []netip.Addr
	undo := func() {
		for _, ip := range ips {
			s.releaseInstanceIP(ip)
		}
	}
	if len(in.InternalIPs) == 0 {
		for _, p := range s.instPools {
			ip, err := p.allocate()
			if err != nil {
				undo()
				return nil, fmt.Errorf("instance %q: internal IP: %w", in.Name, err)
			}
			ips = append(ips, ip)
		}
		return ips, nil
	}
	for _, str := range in.InternalIPs {
		ip := netip.MustParseAddr(str) // validated
		if owner, taken := s.instIPs[ip]; taken {
			undo()
			return nil, fmt.Errorf("%w: internalIPs: %s is the address of instance %q: expected a free address", errInvalidInstance, ip, owner)
		}
		for _, p := range s.instPools {
			if p.contains(ip) {
				if err := p.take(ip); err != nil {
					undo()
					return nil, fmt.Errorf("%w: internalIPs: %w", errInvalidInstance, err)
				}
			}
		}
		ips = append(ips, ip)
	}
	return ips, nil
}

func (s *store) releaseInstanceIP(ip netip.Addr) {
	for _, p := range s.instPools {
		if p.contains(ip) {
			p.release(ip)
		}
	}
}

// setState moves instance id to state, following the allowed
// transitions, waiting for a state file's lock at most until ctx ends.
func (s *store) setState(ctx context.Context, id string, state instances.State) (out Instance, err error) {
	err = s.writeCtx(ctx, func() (bool, error) {
		in := s.instances[id]
		if in == nil {
			return false, fmt.Errorf("%w: %q", errInstanceNotFound, id)
		}
		if in.State == instances.StateTerminated && state != instances.StateTerminated {
			return false, fmt.Errorf("%w: %q cannot become %s", errInstanceTerminated, id, state)
		}
		out = in.clone()
		if in.State == state {
			return false, nil
		}
		out.State = state
		next := out.clone()
		s.instances[id] = &next
		s.instanceChanged()
		return true, nil
	})
	return out, err
}

// removeInstance forgets instance id and frees its addresses, waiting for
// a state file's lock at most until ctx ends.
func (s *store) removeInstance(ctx context.Context, id string) error {
	return s.writeCtx(ctx, func() (bool, error) {
		in := s.instances[id]
		if in == nil {
			return false, fmt.Errorf("%w: %q", errInstanceNotFound, id)
		}
		for _, str := range in.InternalIPs {
			ip := netip.MustParseAddr(str)
			delete(s.instIPs, ip)
			s.releaseInstanceIP(ip)
		}
		delete(s.instances, id)
		s.instByName.remove(in.Name, id)
		s.instanceChanged()
		return true, nil
	})
}

// instanceChanged reports a change of an instance to onInstanceChange.
func (s *store) instanceChanged() {
	for _, f := range s.onInstanceChange {
		f()
	}
}

// watchInstances adds f to the functions called after every change of an
// instance.
func (s *store) watchInstances(f func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.onInstanceChange = append(s.onInstanceChange, f)
}

// routeChanged reports a change of the route table made outside a Table
// to onRouteChange.
func (s *store) routeChanged() {
	for _, f := range s.onRouteChange {
		f()
	}
}

// watchRoutes adds f to the functions called after a route changed
// outside a Table (routeChanged).
func (s *store) watchRoutes(f func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.onRouteChange = append(s.onRouteChange, f)
}

// watchLoadBalancers adds f to the functions called when a reload of the
// state file finds a load balancer changed by another process.
func (s *store) watchLoadBalancers(f func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.onLBChange = append(s.onLBChange, f)
}

// instance returns a copy of instance id, and false when there is none,
// waiting for a state file's lock at most until ctx ends.
func (s *store) instance(ctx context.Context, id string) (out Instance, ok bool, err error) {
	err = s.readCtx(ctx, func() error {
		if in := s.instances[id]; in != nil {
			out, ok = in.clone(), true
		}
		return nil
	})
	return out, ok, err
}

// snapshot copies the whole state, waiting for a state file's lock at
// most until ctx ends.
func (s *store) snapshot(ctx context.Context, clusterID string) (st State, err error) {
	st = emptyView(clusterID)
	err = s.readCtx(ctx, func() error {
		s.cloudState.view(&st, s.now())
		return nil
	})
	return st, err
}

// staleSnapshot copies the state last loaded, without consulting the
// state file.
func (s *store) staleSnapshot(clusterID string) State {
	st := emptyView(clusterID)
	s.mu.RLock()
	defer s.mu.RUnlock()
	s.cloudState.view(&st, s.now())
	return st
}

// staleInstance is instance from the state last loaded, without consulting
// the state file.
func (s *store) staleInstance(id string) (Instance, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if in := s.instances[id]; in != nil {
		return in.clone(), true
	}
	return Instance{}, false
}

// emptyView is a State with empty (not nil) lists, so they encode as [].
func emptyView(clusterID string) State {
	return State{ClusterID: clusterID, Instances: []Instance{}, LoadBalancers: []LoadBalancer{}, Routes: []Route{}}
}

// view adds the instances, load balancers (as reported at now), routes and
// pools of st to out, in the order State documents.
func (st *cloudState) view(out *State, now time.Time) {
	out.Instances = st.appendInstances(out.Instances)
	for _, r := range st.sortedLoadBalancers() {
		out.LoadBalancers = append(out.LoadBalancers, viewLoadBalancer(r, now))
	}
	for _, p := range st.sortedBackendPools() {
		out.BackendPools = append(out.BackendPools, *p.Clone())
	}
	for _, e := range st.routes {
		out.Routes = append(out.Routes, viewRoute(e))
	}
	slices.SortFunc(out.Routes, func(a, b Route) int {
		return cmp.Or(cmp.Compare(a.Cluster, b.Cluster), cmp.Compare(a.DestinationCIDR, b.DestinationCIDR), cmp.Compare(a.Name, b.Name))
	})
	for _, p := range st.instPools {
		out.AddressPools = append(out.AddressPools, p.usage("instances"))
	}
	for _, is4 := range []bool{true, false} {
		out.AddressPools = append(out.AddressPools, st.lbPools[is4].usage("loadBalancers"))
	}
}

// appendInstances appends copies of the instances to out, sorted by ID.
func (st *cloudState) appendInstances(out []Instance) []Instance {
	for _, in := range st.instances {
		out = append(out, in.clone())
	}
	slices.SortFunc(out, func(a, b Instance) int { return compareIDs(a.ID, b.ID) })
	return out
}

// sortedLoadBalancers returns the load balancers sorted by ID.
func (st *cloudState) sortedLoadBalancers() []*lbRecord {
	return slices.SortedFunc(maps.Values(st.lbs), func(a, b *lbRecord) int { return compareIDs(a.lb.ID, b.lb.ID) })
}

// sortedBackendPools returns the shared backend pools sorted by ID.
func (st *cloudState) sortedBackendPools() []*loadbalancer.Pool {
	return slices.SortedFunc(maps.Values(st.bpools), func(a, b *loadbalancer.Pool) int { return compareIDs(a.ID, b.ID) })
}

// compareIDs orders "i-2" before "i-10": by length, then bytes.
func compareIDs(a, b string) int {
	return cmp.Or(cmp.Compare(len(a), len(b)), cmp.Compare(a, b))
}

func viewRoute(e routes.Entry) Route {
	r := Route{Cluster: e.Cluster, Name: e.Name, DestinationCIDR: e.DestinationCIDR, TargetNode: string(e.TargetNode)}
	for _, a := range e.TargetNodeAddresses {
		r.TargetNodeAddresses = append(r.TargetNodeAddresses, a.Address)
	}
	return r
}

// viewLoadBalancer returns a copy of r as the fake reports it at now
// (Snapshot, GET /loadbalancers): without ingress while it is
// provisioning.
func viewLoadBalancer(r *lbRecord, now time.Time) LoadBalancer {
	out := LoadBalancer{LoadBalancer: *r.reported(now), VIPs: make([]string, 0, len(r.vips)), ReadyAt: r.readyAt, Provisioning: r.provisioning(now), BusyUntil: r.busyUntil}
	for _, ip := range r.vips {
		out.VIPs = append(out.VIPs, ip.String())
	}
	return out
}
