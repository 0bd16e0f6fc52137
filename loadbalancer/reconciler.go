package loadbalancer

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	cloudprovider "k8s.io/cloud-provider"
	"k8s.io/klog/v2"

	"github.com/ccmkit/ccmkit/annotation"
	"github.com/ccmkit/ccmkit/internal/check"
	"github.com/ccmkit/ccmkit/internal/staleness"
	"github.com/ccmkit/ccmkit/internal/throttle"
	"github.com/ccmkit/ccmkit/provider"
)

// Reconciler implements cloudprovider.LoadBalancer over a Driver.
//
// Guarantees (see the k8s.io/cloud-provider contract in cloud.go,
// LoadBalancer, and controllers/service/controller.go):
//   - EnsureLoadBalancer is idempotent: when the cloud matches the Service
//     it makes no Driver.Apply call and returns the same status.
//   - UpdateLoadBalancer changes backends only: the load balancer's own,
//     or, for a Service served from a shared pool, the pool's members and
//     the load balancer's reference to it.
//   - EnsureLoadBalancerDeleted is idempotent, returns nil when there is
//     nothing to delete, and needs only the Service's namespace, name, UID
//     and annotations (it works from a stale Service of type ClusterIP
//     with node ports 0).
//   - GetLoadBalancer reports exists while the Driver finds any owned load
//     balancer (the Driver reports partial ones).
//   - Calls for one Service (namespace/name) are serialized; calls for
//     different Services run concurrently. A panic in a Driver method
//     reaches the caller unchanged and releases the Service's lock.
//   - cloudprovider.ImplementedElsewhere is returned unwrapped (Services
//     with spec.loadBalancerClass); an api.RetryError from the Driver is
//     returned wrapped by EnsureLoadBalancer, so errors.As finds it.
//   - A busy cloud (a *BusyError from the Driver) is waited out within
//     Options.MaxBusyWait, and past it EnsureLoadBalancer asks to be
//     called again after exactly the cloud's delay: it is not throttling.
//   - Service and Node arguments are never modified.
//   - A load balancer owned by another cluster or Service is never
//     changed or deleted, nor a shared pool of another cluster; a pool is
//     deleted only when no load balancer references it (the cloud refuses
//     otherwise, see PoolDriver.DeletePool).
//
// A Reconciler is safe for concurrent use. It starts no goroutines, but
// for the event recorder of Initialize, which stop with its context.
type Reconciler struct {
	driver Driver     // as given: a Cache, a provider's Driver
	calls  Driver     // driver as the Reconciler calls it: metered unless a Cache (meteredDriver)
	pools  PoolDriver // calls, when driver can serve pools (poolDriverOf); else nil
	opts   Options    // with defaults
	namer  *Namer

	mu           sync.Mutex
	locks        map[string]*serviceLock
	recorder     record.EventRecorder // set by Initialize
	throttles    map[string]int       // Service → consecutive throttled Ensures
	hasThrottles atomic.Bool          // len(throttles) > 0
	// updateMisses are the UIDs of the Services whose last
	// UpdateLoadBalancer found no load balancer in the Cache's list
	// (see GetLoadBalancer).
	updateMisses map[types.UID]bool

	skipMu  sync.Mutex
	skipped map[string]string // stage/node name → provider ID and reason last reported
}

type serviceLock struct {
	mu   sync.Mutex
	refs int
}

var (
	_ cloudprovider.LoadBalancer = (*Reconciler)(nil)
	_ provider.Initializer       = (*Reconciler)(nil)
	_ provider.Staleness         = (*Reconciler)(nil)
)

// NewReconciler returns a Reconciler that manages load balancers through
// d, configured by opts. Errors (not wrapped) start with
// "loadbalancer.NewReconciler: " and name the argument or the Options
// field: a nil d (a typed nil included), an invalid Naming, an annotation
// of the wrong kind or not declared in Annotations, a negative RetryAfter,
// an unknown Capabilities.BackendKey.
func NewReconciler(d Driver, opts Options) (*Reconciler, error) {
	const fn = "loadbalancer.NewReconciler"
	if err := check.Driver(fn, d, "loadbalancer.Driver"); err != nil {
		return nil, err
	}
	namer, err := newNamer(fn+": Options.Naming.", opts.Naming)
	if err != nil {
		return nil, err
	}
	for _, c := range []struct {
		field string
		a     *annotation.Annotation
		kind  annotation.Kind
	}{{"RequestedIPAnnotation", opts.RequestedIPAnnotation, annotation.KindIP}, {"IDAnnotation", opts.IDAnnotation, annotation.KindString}} {
		if c.a == nil {
			continue
		}
		if c.a.Kind != c.kind {
			return nil, fmt.Errorf("%s: Options.%s %q is of kind %s: expected %s", fn, c.field, c.a.Name, c.a.Kind, c.kind)
		}
		if d, ok := opts.Annotations.Lookup(c.a.Name); !ok || d != c.a {
			return nil, fmt.Errorf("%s: Options.%s %q is not declared in Options.Annotations: expected an annotation returned by its Declare", fn, c.field, c.a.Name)
		}
	}
	if err := checkAppProtocolAnnotation(fn+": Options.AppProtocolAnnotation", opts.AppProtocolAnnotation, opts.Capabilities); err != nil {
		return nil, err
	}
	if a := opts.AppProtocolAnnotation; a != nil {
		if d, ok := opts.Annotations.Lookup(a.Name); !ok || d != a {
			return nil, fmt.Errorf("%s: Options.AppProtocolAnnotation %q is not declared in Options.Annotations: expected an annotation returned by its Declare", fn, a.Name)
		}
	}
	if opts.Capabilities.ListenerPools && opts.Capabilities.SharedBackendPools {
		return nil, fmt.Errorf("%s: Options.Capabilities: ListenerPools and SharedBackendPools are both true: expected at most one (a listener's pool is its own)", fn)
	}
	if opts.RetryAfter < 0 {
		return nil, fmt.Errorf("%s: Options.RetryAfter %v: expected 0 (the default, %v) or more", fn, opts.RetryAfter, defaultRetryAfter)
	}
	if err := opts.Capabilities.BackendKey.check(fn + ": Options.Capabilities.BackendKey"); err != nil {
		return nil, err
	}
	calls, pools := meteredDriver(d)
	if opts.Capabilities.SharedBackendPools && pools == nil {
		return nil, fmt.Errorf("%s: Options.Capabilities.SharedBackendPools is true, but the driver (%T) cannot serve pools: expected a loadbalancer.PoolDriver, or a loadbalancer.Cache over a loadbalancer.PoolListDriver", fn, d)
	}
	return &Reconciler{driver: d, calls: calls, pools: pools, opts: opts.withDefaults(), namer: namer,
		locks: map[string]*serviceLock{}, skipped: map[string]string{}, throttles: map[string]int{}, updateMisses: map[types.UID]bool{}}, nil
}

// MaxStaleness implements provider.Staleness: the longest MaxStaleness of
// the Reconciler's Driver (a Cache's TTL; it serves the shared pools too)
// and of Options.Instances (it decides which backends are added: a Node
// whose instance was terminated is added until Instances reports it
// gone), counting a part that does not implement provider.Staleness as
// 0. The Reconciler itself remembers nothing of the cloud between calls.
// It is safe for concurrent use and calls no Driver method but
// MaxStaleness.
func (r *Reconciler) MaxStaleness() time.Duration {
	return staleness.Max(r.driver, r.opts.Instances)
}

// desiredInput is the input of Desired the Reconciler uses for clusterName.
func (r *Reconciler) desiredInput(clusterName string) DesiredInput {
	return DesiredInput{
		Cluster:               r.cluster(clusterName),
		Namer:                 r.namer,
		Capabilities:          r.opts.Capabilities,
		Annotations:           r.opts.Annotations,
		RequestedIPAnnotation: r.opts.RequestedIPAnnotation,
		AppProtocolAnnotation: r.opts.AppProtocolAnnotation,
	}
}

func (r *Reconciler) cluster(clusterName string) string {
	return cmp.Or(r.opts.ClusterID, clusterName)
}

// lock serializes calls for one Service and returns the unlock function.
func (r *Reconciler) lock(svc *v1.Service) func() {
	return r.lockKey(svc.Namespace + "/" + svc.Name)
}

// lockKey serializes the holders of key (a Service's namespace/name, or a
// shared pool's lockKey) and returns the unlock function. A pool's lock is
// only ever taken while holding a Service's, never the other way round.
func (r *Reconciler) lockKey(key string) func() {
	r.mu.Lock()
	l := r.locks[key]
	if l == nil {
		l = &serviceLock{}
		r.locks[key] = l
	}
	l.refs++
	r.mu.Unlock()
	l.mu.Lock()
	return func() {
		l.mu.Unlock()
		r.mu.Lock()
		if l.refs--; l.refs == 0 {
			delete(r.locks, key)
		}
		r.mu.Unlock()
	}
}

// GetLoadBalancerName returns the cloud name the Service's load balancer
// is created with (Namer.Name). An adopted load balancer, or one created
// under other NamerOptions, keeps its own name. A nil svc gets "".
func (r *Reconciler) GetLoadBalancerName(_ context.Context, clusterName string, svc *v1.Service) string {
	if svc == nil {
		return ""
	}
	return r.namer.Name(r.cluster(clusterName), svc)
}

// GetLoadBalancer reports whether the Service has a load balancer (any
// owned one, following the lookup order) and its status. A load balancer
// without an address yet exists with an empty status. Errors from the
// Driver are wrapped; an invalid address reported by the Driver is an
// error with exists=true.
//
// Over a Cache, the look-up is answered from the Cache's list without a
// confirming Find when the call follows an UpdateLoadBalancer of the same
// Service that found none there, and the Service still wants a load
// balancer (type LoadBalancer, no deletion timestamp): the service
// controller asks GetLoadBalancer after every failed UpdateLoadBalancer,
// only to know whether the failure matters
// (k8s.io/cloud-provider@v0.37.2 controllers/service/controller.go
// lockedUpdateLoadBalancerHosts), and during a bring-up that is every
// Service whose Ensure has not run yet. A Service being deleted is always
// looked up in the cloud: its "does not exist" skips the delete.
func (r *Reconciler) GetLoadBalancer(ctx context.Context, clusterName string, svc *v1.Service) (*v1.LoadBalancerStatus, bool, error) {
	ctx = r.waitThrottles(ctx)
	if r.takeUpdateMiss(svc) {
		ctx = withMissTrusted(ctx)
	}
	res, err := r.begin(ctx, "GetLoadBalancer", clusterName, svc)
	if err != nil {
		return nil, false, err
	}
	defer res.unlock()
	if len(res.owned) == 0 {
		return nil, false, nil
	}
	lb := res.owned[0]
	if len(lb.Ingress) == 0 {
		return &v1.LoadBalancerStatus{}, true, nil
	}
	st, err := buildStatus(lb.Ingress)
	if err != nil {
		return nil, true, fmt.Errorf("load balancer %q (id %q): %w", lb.Name, lb.ID, err)
	}
	return st, true, nil
}

// EnsureLoadBalancer creates or converges the Service's load balancer and
// returns its status. Returns cloudprovider.ImplementedElsewhere,
// unwrapped, for a Service with spec.loadBalancerClass. Otherwise errors
// are wrapped: the Desired errors (before any cloud call), an
// *OwnershipError (also when the ID annotation names an untagged load
// balancer while the Service already owns another; see the package doc),
// ErrNotFound for a stored ID that does not exist, Driver
// errors, and an api.RetryError after RetryAfter when the load balancer has
// no address yet.
//
// A throttled cloud call (an error wrapping an api.RetryError from the
// Driver or Options.Instances, see Driver) is returned with a RetryError of
// its own first in the chain (errors.As finds it; what the Driver returned
// stays findable): the Driver's delay, at least a second, doubled for each
// consecutive throttled call for the same Service up to 5 minutes,
// plus up to as much again at random. The service controller requeues
// after exactly the delay it is given (controllers/service/controller.go,
// processNextServiceItem), so without the spread every throttled Service
// would come back at the same moment, each taking one token of the
// cloud's budget and none getting the several reads a creation needs.
//
// A busy cloud is not throttled (see Driver and BusyError): after a busy
// answer the next write waits for the cloud's delay D when that fits in
// what is left of Options.MaxBusyWait. When it does not, EnsureLoadBalancer
// stops, keeping what it wrote, and returns a RetryError of exactly D,
// neither doubled nor spread, nor counted as a throttled call, with the
// Driver's *BusyError wrapped behind it (errors.As finds both): the
// service controller comes back after D, when the cloud takes writes
// again, and that call plans what is left.
func (r *Reconciler) EnsureLoadBalancer(ctx context.Context, clusterName string, svc *v1.Service, nodes []*v1.Node) (*v1.LoadBalancerStatus, error) {
	st, err := r.ensure(r.waitBusy(ctx), clusterName, svc, nodes)
	return st, r.spread(svc, comeBackAfter(err))
}

// maxThrottleDelay bounds the back-off EnsureLoadBalancer asks of the
// service controller for a Service whose calls keep being throttled, before
// the random part (see EnsureLoadBalancer).
const maxThrottleDelay = 5 * time.Minute

// minThrottleDelay is the shortest back-off after a throttled call: a
// throttled cloud is not helped by retries within the second.
const minThrottleDelay = time.Second

// spread returns err with the back-off of a throttled call (see
// EnsureLoadBalancer), and counts consecutive throttled calls per Service:
// any other outcome resets the count. A RetryError of the Reconciler's own
// (comeBack: no address yet, a busy cloud) is no throttle: it is returned
// as it is.
func (r *Reconciler) spread(svc *v1.Service, err error) error {
	if svc == nil {
		return err
	}
	key := svc.Namespace + "/" + svc.Name
	d, throttled := throttle.RetryAfter(err)
	var own *comeBack
	if !throttled || errors.As(err, &own) {
		if r.hasThrottles.Load() {
			r.mu.Lock()
			delete(r.throttles, key)
			r.hasThrottles.Store(len(r.throttles) > 0)
			r.mu.Unlock()
		}
		return err
	}
	r.mu.Lock()
	r.throttles[key]++
	n := r.throttles[key]
	r.hasThrottles.Store(true)
	r.mu.Unlock()
	return throttle.Delay(err, backoff(d, n))
}

// backoff is the delay after the n-th consecutive throttled call whose
// cloud asked for d: max(d, minThrottleDelay) doubled n-1 times, at most
// maxThrottleDelay, plus a random part of up to as much again.
func backoff(d time.Duration, n int) time.Duration {
	d = max(d, minThrottleDelay)
	for i := 1; i < n && d < maxThrottleDelay; i++ {
		d *= 2
	}
	d = min(d, maxThrottleDelay)
	return d + rand.N(d)
}

// ensure is EnsureLoadBalancer before the throttle back-off (spread): it
// builds the desired load balancer, converges the one the lookup found
// and reports its status.
func (r *Reconciler) ensure(ctx context.Context, clusterName string, svc *v1.Service, nodes []*v1.Node) (*v1.LoadBalancerStatus, error) {
	const op = "EnsureLoadBalancer"
	if svc != nil && svc.Spec.LoadBalancerClass != nil {
		return nil, cloudprovider.ImplementedElsewhere
	}
	if _, err := r.owner(clusterName, svc); err != nil {
		return nil, err
	}
	desired, eligible, err := r.desired(ctx, clusterName, svc, nodes)
	if err != nil {
		return nil, r.fail(ctx, op, svc, err)
	}
	res, err := r.begin(ctx, op, clusterName, svc)
	if err != nil {
		return nil, err
	}
	defer res.unlock()
	if res.err != nil {
		return nil, r.fail(ctx, op, svc, res.err)
	}
	if len(res.owned) > 1 {
		klog.FromContext(ctx).Info("Service owns several load balancers; managing the first, the others are deleted with the Service",
			"service", klog.KObj(svc), "ids", ids(res.owned))
	}
	if err := r.usePool(ctx, svc, res.owner.Cluster, &desired.Spec, desired.Spec.IPFamilies, eligible); err != nil {
		return nil, r.fail(ctx, op, svc, err)
	}
	lb, err := r.converge(ctx, svc, func(*LoadBalancer) *LoadBalancer { return desired }, res.target(), eligible)
	if err != nil {
		return nil, r.fail(ctx, op, svc, err)
	}
	r.releasedPool(ctx, svc, res.owner.Cluster, res.target(), lb)
	return r.status(lb, res.owner)
}

// desired returns the load balancer svc should have and the nodes that can
// be its backends (eligible). Desired is pure: a Service we cannot build
// costs no cloud call; only a valid one costs address look-ups (see
// Options.Instances).
func (r *Reconciler) desired(ctx context.Context, clusterName string, svc *v1.Service, nodes []*v1.Node) (*LoadBalancer, []*v1.Node, error) {
	desired, err := Desired(svc, nodes, r.desiredInput(clusterName))
	if err != nil {
		return nil, nil, err
	}
	eligible, err := r.eligible(ctx, svc, nodes)
	if err != nil {
		return nil, nil, err
	}
	if !slices.Equal(eligible, nodes) {
		desired.Spec.setBackends(r.key().backends(eligible, desired.Spec.IPFamilies))
	}
	return desired, eligible, nil
}

// convergeSpare is what converge allows beyond twice the actions of the
// first plan (see converge).
const convergeSpare = 2

// converge plans and applies the actions that bring lb (nil: none yet) to
// desiredOf(lb), and returns the load balancer as the last write left it
// (the Driver's answer, or derived: see apply). It applies a plan's
// actions in order, each on the result of the one before, and plans again
// from the latest result only after a creation and after a busy answer
// that came with a load balancer: either may be partial (Driver.Apply).
// Before each write it waits out the cloud's busy answer to the write
// before (awaitBusy); a write the cloud refused because it was busy is
// made again after the wait. A converged plan ends it: what is still busy
// after the last write is not waited for.
//
// It makes at most 2·len(P)+convergeSpare writes that the cloud took, P
// being the first plan of an existing load balancer (for a new one, the
// plan after its creation, the creation not counted): each action once,
// once more after a partial result, and two to spare. A Driver whose
// results never show its writes gets an error naming the bound, rather
// than a loop; a refused write is not counted, each one waits for the
// cloud within Options.MaxBusyWait.
func (r *Reconciler) converge(ctx context.Context, svc *v1.Service, desiredOf func(*LoadBalancer) *LoadBalancer, lb *LoadBalancer, eligible []*v1.Node) (*LoadBalancer, error) {
	var w writes
	for {
		actions, err := Plan(desiredOf(lb), lb)
		if err == nil {
			actions, err = r.checkTargets(ctx, svc, actions, eligible)
		}
		if err != nil {
			return nil, err
		}
		if len(actions) == 0 {
			return lb, nil
		}
		if !w.bounded {
			w.limit = w.took + 2*len(actions) + convergeSpare
			w.bounded = actions[0].Kind != ActionCreate
		}
		var again bool
		if lb, again, err = r.applyPlan(ctx, svc, lb, actions, &w); err != nil || !again {
			return lb, err
		}
	}
}

// writes is what one converge has written: the writes the cloud took, their
// bound, and the busy answer of the last write, to wait out before the
// next one.
type writes struct {
	took, limit int
	bounded     bool          // limit is set from a plan of an existing load balancer
	busy        error         // the last write's busy answer (busyOf), or nil
	delay       time.Duration // how long the cloud is busy after it
}

// applyPlan applies actions in order from lb (see converge) and returns
// the last result, and whether to plan again from it.
func (r *Reconciler) applyPlan(ctx context.Context, svc *v1.Service, lb *LoadBalancer, actions []Action, w *writes) (*LoadBalancer, bool, error) {
	for i := 0; i < len(actions); {
		if w.busy != nil {
			if err := r.awaitBusy(ctx, w.busy, w.delay); err != nil {
				return nil, false, err
			}
			w.busy = nil
		}
		if w.took >= w.limit {
			return nil, false, fmt.Errorf("load balancer %q (id %q) not converged after %d writes, the most one call makes (twice the %d actions of its first plan, and %d): expected Driver results that show each write (see Driver.Apply)",
				lb.Name, lb.ID, w.took, (w.limit-convergeSpare)/2, convergeSpare)
		}
		s, err := r.apply(ctx, svc, lb, actions[i])
		if err != nil {
			return nil, false, err
		}
		w.busy, w.delay = s.busy, s.delay
		if s.refused {
			continue // nothing changed: the same action, once the cloud is free
		}
		w.took++
		lb = s.lb
		if s.replan {
			return lb, true, nil
		}
		i++
	}
	return lb, false, nil
}

// step is the outcome of one Driver.Apply (apply).
type step struct {
	lb      *LoadBalancer // the load balancer after the action: the Driver's, or derived; nil when refused
	refused bool          // the cloud refused the action because it was busy: nothing changed
	replan  bool          // plan again from lb: a creation, or a busy answer with the Driver's load balancer
	busy    error         // the Driver's busy answer, wrapped with the action, or nil
	delay   time.Duration // how long the cloud is busy (busyOf)
}

// apply performs a through the Driver on prev, the load balancer a was
// planned on (nil for a creation), and reads the answer as Driver
// documents: applied (nil, or a busy answer without ErrRefused), refused
// because busy (a busy answer with ErrRefused), or failed (any other
// error, which it returns wrapped with the action and the load balancer).
// An applied action the Driver answered without a load balancer is
// derived: prev with a applied (Apply), except a creation, whose new ID
// only the Driver knows.
func (r *Reconciler) apply(ctx context.Context, svc *v1.Service, prev *LoadBalancer, a Action) (step, error) {
	klog.FromContext(ctx).V(2).Info("Applying load balancer action", "service", klog.KObj(svc), "action", a.Kind, "id", a.LoadBalancerID, "reason", a.Reason)
	if a.Kind != ActionCreate {
		a.Current = prev // see Action.Current
	}
	lb, err := callFor(ctx, r, func() (*LoadBalancer, error) {
		return r.calls.Apply(ctx, a)
	})
	b, delay := busyOf(err)
	s := step{lb: lb, delay: delay, refused: b != nil && throttle.Refused(err)}
	switch {
	case s.refused:
		s.lb = nil
	case err == nil || b != nil:
		s.replan = a.Kind == ActionCreate || (b != nil && lb != nil)
		if lb == nil {
			var derr error
			if s.lb, derr = derived(prev, a); derr != nil {
				err, b = derr, nil // applied, but the answer is unusable: a failure
			}
		}
	}
	if r.opts.Hooks.Action != nil {
		r.opts.Hooks.Action(ctx, svc, a, err)
	}
	if err != nil {
		err = fmt.Errorf("%s on load balancer %q: %w", a.Kind, a.LoadBalancerID, err)
	}
	if b == nil {
		return s, err
	}
	s.busy = err
	return s, nil
}

// derived is the result of an Apply that the Driver answered without a
// load balancer: prev, the load balancer a was planned on, with a applied
// by the package's reference implementation (Apply). A creation must be
// answered with the load balancer created: only the Driver knows its ID.
func derived(prev *LoadBalancer, a Action) (*LoadBalancer, error) {
	if a.Kind == ActionCreate {
		return nil, errors.New("driver returned no load balancer: expected the one created, with its new ID")
	}
	lb, err := Apply(prev, a)
	if err != nil {
		return nil, fmt.Errorf("driver returned no load balancer, and the action does not apply to the one it was planned on (%w): expected the load balancer as it is now", err)
	}
	return lb, nil
}

// maxDeleteCalls bounds the Delete calls for one load balancer in one
// EnsureLoadBalancerDeleted: a cascade delete answered busy (see
// Driver.Delete) takes one call per step.
const maxDeleteCalls = 16

// delete deletes lb, calling Driver.Delete again after each busy answer
// once the cloud's delay has passed (awaitBusy), at most maxDeleteCalls
// times.
func (r *Reconciler) delete(ctx context.Context, lb *LoadBalancer) error {
	for calls := 1; ; calls++ {
		err := r.call(ctx, func() error { return r.calls.Delete(ctx, lb) })
		b, d := busyOf(err)
		switch {
		case b == nil:
			return err
		case calls == maxDeleteCalls:
			return &stillBusy{err: err, after: d, why: fmt.Sprintf("busy after %d Delete calls, the most one call makes", calls)}
		}
		if err := r.awaitBusy(ctx, err, d); err != nil {
			return err
		}
	}
}

// noteUpdateMiss records whether UpdateLoadBalancer found no load balancer
// at all for svc, for the GetLoadBalancer that follows (takeUpdateMiss).
func (r *Reconciler) noteUpdateMiss(svc *v1.Service, none bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if none {
		r.updateMisses[svc.UID] = true
	} else {
		delete(r.updateMisses, svc.UID)
	}
}

// takeUpdateMiss reports, once, whether the last UpdateLoadBalancer of svc
// found no load balancer, and svc still wants one: type LoadBalancer and
// no deletion timestamp.
func (r *Reconciler) takeUpdateMiss(svc *v1.Service) bool {
	if svc == nil {
		return false
	}
	r.mu.Lock()
	missed := r.updateMisses[svc.UID]
	delete(r.updateMisses, svc.UID)
	r.mu.Unlock()
	return missed && svc.DeletionTimestamp == nil && svc.Spec.Type == v1.ServiceTypeLoadBalancer
}

// status is EnsureLoadBalancer's status of lb: a notReady RetryError after
// Options.RetryAfter while it has no address, else its validated ingress.
func (r *Reconciler) status(lb *LoadBalancer, owner Owner) (*v1.LoadBalancerStatus, error) {
	if len(lb.Ingress) == 0 {
		return nil, notReady(fmt.Sprintf("load balancer %q (id %q) of service %s has no address yet", lb.Name, lb.ID, owner.namespacedName()), r.opts.RetryAfter)
	}
	st, err := buildStatus(lb.Ingress)
	if err != nil {
		return nil, fmt.Errorf("load balancer %q (id %q): driver reported an invalid address: %w", lb.Name, lb.ID, err)
	}
	return st, nil
}

// UpdateLoadBalancer sets the backends of the Service's load balancer to
// nodes (see BackendKey) and changes nothing else. For a Service served
// from a shared pool it converges the pool's members (nothing to write
// when another Service's call already did) and the load balancer's
// reference to it (see the package doc, "Shared backend pools"). It returns
// cloudprovider.ImplementedElsewhere, unwrapped, for a Service with
// spec.loadBalancerClass, ErrNotFound (wrapped) when the Service has no
// load balancer, and Driver errors wrapped.
//
// A busy cloud (see Driver) is waited out within Options.MaxBusyWait; past
// it UpdateLoadBalancer stops, keeping what it wrote, and returns the
// Driver's busy answer wrapped (errors.As finds the *BusyError), not a
// RetryError: the service controller does not honour a delay from it, it
// sends a Service whose node sync failed to its service queue
// (k8s.io/cloud-provider@v0.37.2 controllers/service/controller.go,
// nodeSyncService and processNextNodeItem), whose EnsureLoadBalancer then
// finishes the change.
func (r *Reconciler) UpdateLoadBalancer(ctx context.Context, clusterName string, svc *v1.Service, nodes []*v1.Node) error {
	const op = "UpdateLoadBalancer"
	if svc != nil && svc.Spec.LoadBalancerClass != nil {
		return cloudprovider.ImplementedElsewhere
	}
	ctx = r.waitBusy(r.waitThrottles(ctx))
	// A load balancer the Cache's list does not hold is "none" here without
	// asking the cloud: Update creates nothing, and after its ErrNotFound
	// the service controller only asks GetLoadBalancer whether the failure
	// matters (noteUpdateMiss).
	res, err := r.begin(withMissTrusted(ctx), op, clusterName, svc)
	if err != nil {
		return err
	}
	defer res.unlock()
	lb := res.target()
	if lb == nil || !res.owner.Owns(lb.Tags) {
		// Not a user error: the controller calls Update for every
		// LoadBalancer Service on node changes, also before Ensure
		// succeeded, and then checks GetLoadBalancer.
		r.noteUpdateMiss(svc, lb == nil && len(res.owned) == 0)
		return fmt.Errorf("%s for service %s: %w: nothing to update", op, res.owner.namespacedName(), ErrNotFound)
	}
	families, err := serviceFamilies(svc)
	if err != nil {
		families = lb.Spec.IPFamilies
	}
	nodes, err = r.eligible(ctx, svc, nodes)
	if err != nil {
		return r.fail(ctx, op, svc, err)
	}
	want := Spec{BackendKey: r.key(), Backends: r.key().backends(nodes, families), ListenerPools: r.opts.Capabilities.ListenerPools}
	if err := r.usePool(ctx, svc, res.owner.Cluster, &want, families, nodes); err != nil {
		return r.fail(ctx, op, svc, err)
	}
	after, err := r.converge(ctx, svc, withBackends(want), lb, nodes)
	if err != nil {
		return r.fail(ctx, op, svc, err)
	}
	r.releasedPool(ctx, svc, res.owner.Cluster, lb, after)
	return nil
}

// withBackends returns UpdateLoadBalancer's desired load balancer for a
// load balancer lb: lb with the backends of want (its BackendKey, Backends
// and BackendPool; under ListenerPools, the members of every pool lb
// has), and nothing else changed. A listener without a pool keeps none:
// UpdateLoadBalancer creates nothing, the next EnsureLoadBalancer does.
func withBackends(want Spec) func(lb *LoadBalancer) *LoadBalancer {
	return func(lb *LoadBalancer) *LoadBalancer {
		d := *lb
		d.Spec.BackendKey, d.Spec.BackendPool, d.Spec.ListenerPools = want.BackendKey, want.BackendPool, want.ListenerPools
		d.Spec.setBackends(want.Backends)
		return &d
	}
}

// EnsureLoadBalancerDeleted deletes every load balancer the Service owns
// in this cluster (found by stored ID, tags or name, always with an
// ownership check) and returns nil when none is left, including when there
// was none. It ignores spec.type, ports and loadBalancerClass. Then, with a
// Driver that serves pools, it deletes every shared pool of the cluster
// that no load balancer references any more: the Service's, when it was the
// last user, and any left behind by an earlier failure. Driver errors are
// wrapped and joined.
//
// A Delete answered busy (a cascade delete in steps, see Driver.Delete) is
// called again once the cloud's delay has passed, within
// Options.MaxBusyWait and at most maxDeleteCalls (16) times per load
// balancer; past either, the busy answer is returned wrapped, not as a
// RetryError: the service controller retries a failed delete after its
// own exponential back-off (controllers/service/controller.go,
// syncLoadBalancerIfNeeded, which formats the error with %v, and
// processNextServiceItem's AddRateLimited).
func (r *Reconciler) EnsureLoadBalancerDeleted(ctx context.Context, clusterName string, svc *v1.Service) error {
	const op = "EnsureLoadBalancerDeleted"
	ctx = r.waitBusy(r.waitThrottles(ctx))
	r.takeUpdateMiss(svc) // forget it: a Service going away asks no more
	res, err := r.begin(ctx, op, clusterName, svc)
	if err != nil {
		return err
	}
	defer res.unlock()
	var errs []error
	for _, lb := range res.owned {
		klog.FromContext(ctx).V(2).Info("Deleting load balancer", "service", klog.KObj(svc), "id", lb.ID, "name", lb.Name)
		if err := r.delete(ctx, lb); err != nil {
			errs = append(errs, fmt.Errorf("delete load balancer %q (id %q): %w", lb.Name, lb.ID, err))
		}
	}
	if len(errs) == 0 {
		// The pools the Service's load balancers referenced, if nothing
		// else does, and any other pool of the cluster left unreferenced.
		errs = append(errs, r.collectPools(ctx, res.owner.Cluster))
	}
	return errors.Join(errs...)
}

// begin checks the arguments, takes the Service's lock and runs the lookup.
// The caller must call res.unlock when err is nil. If the Driver's Find
// panics (or calls runtime.Goexit), the lock is released and the panic goes
// on unchanged, so a caller that recovers can call again for the Service.
func (r *Reconciler) begin(ctx context.Context, op, clusterName string, svc *v1.Service) (*lookup, error) {
	owner, err := r.owner(clusterName, svc)
	if err != nil {
		return nil, err
	}
	unlock := r.lock(svc)
	returned := false
	defer func() {
		if !returned {
			unlock() // find (or the check) did not return: do not recover, only release
		}
	}()
	var res *lookup
	err = ErrStale
	if stillCurrent(ctx) { // RepairLoadBalancer's check, under the lock
		res, err = r.find(ctx, owner, svc)
	}
	returned = true
	if err != nil {
		unlock()
		return nil, r.fail(ctx, op, svc, err)
	}
	res.unlock = unlock
	return res, nil
}

// errEmptyCluster is the error of a call without a cluster identity.
var errEmptyCluster = errors.New("loadbalancer: the cluster identity is empty: expected a clusterName argument (--cluster-name) or Options.ClusterID")

func (r *Reconciler) owner(clusterName string, svc *v1.Service) (Owner, error) {
	if svc == nil {
		return Owner{}, errNilService
	}
	cluster := r.cluster(clusterName)
	if cluster == "" {
		return Owner{}, errEmptyCluster
	}
	if svc.UID == "" {
		return Owner{}, invalidService("service %s/%s: metadata.uid is empty: expected the Service's UID", svc.Namespace, svc.Name)
	}
	return OwnerOf(cluster, svc), nil
}

// fail wraps err with the Service, reports user-facing errors
// (reportUserError) and returns the wrapped error.
func (r *Reconciler) fail(ctx context.Context, op string, svc *v1.Service, err error) error {
	if reason, ok := userErrorReason(err); ok {
		r.reportUserError(ctx, op, svc, reason, err)
	}
	return fmt.Errorf("%s for service %s/%s: %w", op, svc.Namespace, svc.Name, err)
}
