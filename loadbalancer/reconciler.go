package loadbalancer

import (
	"context"
	"errors"
	"fmt"
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
// for the event recorder of Initialize and, with Options.CoalesceWindow,
// one per Service with a deferred backend change (its window's timer),
// which stop with Initialize's context.
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

	co coalescer // deferred backend changes (Options.CoalesceWindow), under mu
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
	if err := checkHealthCheckAnnotation(fn+": Options.HealthCheckAnnotation", opts.HealthCheckAnnotation, opts.Capabilities); err != nil {
		return nil, err
	}
	for _, c := range []struct {
		field string
		a     *annotation.Annotation
	}{{"AppProtocolAnnotation", opts.AppProtocolAnnotation}, {"HealthCheckAnnotation", opts.HealthCheckAnnotation}} {
		if c.a == nil {
			continue
		}
		if d, ok := opts.Annotations.Lookup(c.a.Name); !ok || d != c.a {
			return nil, fmt.Errorf("%s: Options.%s %q is not declared in Options.Annotations: expected an annotation returned by its Declare", fn, c.field, c.a.Name)
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
	if opts.CoalesceWindow < 0 {
		return nil, fmt.Errorf("%s: Options.CoalesceWindow %v: expected 0 (off, the default) or more, such as loadbalancer.RecommendedCoalesceWindow (%v)", fn, opts.CoalesceWindow, RecommendedCoalesceWindow)
	}
	return &Reconciler{driver: d, calls: calls, pools: pools, opts: opts.withDefaults(), namer: namer,
		locks: map[string]*serviceLock{}, skipped: map[string]string{}, throttles: map[string]int{}, updateMisses: map[types.UID]bool{},
		co: coalescer{pending: map[string]*pendingWrite{}, failed: map[string]failedWrite{}, life: context.Background(), workers: make(chan struct{}, coalesceWorkers)}}, nil
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
	seq := r.seqNow()
	st, err := r.ensure(r.waitBusy(ctx), clusterName, svc, nodes)
	if svc != nil && converged(err) {
		// Its nodes were listed after every deferred change that
		// arrived before the call: they are written.
		r.supersede(svc.Namespace+"/"+svc.Name, seq)
	}
	return st, r.spread(svc, comeBackAfter(err))
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
	if svc != nil && svc.Spec.LoadBalancerClass != nil {
		return cloudprovider.ImplementedElsewhere
	}
	if r.opts.CoalesceWindow > 0 {
		return r.deferUpdate(ctx, clusterName, svc, nodes)
	}
	owner, err := r.owner(clusterName, svc)
	if err != nil {
		return err
	}
	return r.updateLocked(ctx, owner, svc, nodes, r.lock(svc))
}

// updateLocked is UpdateLoadBalancer's write, with the Service's lock held
// (unlock releases it, and is called before it returns). owner is svc's,
// from the call's cluster name (owner).
func (r *Reconciler) updateLocked(ctx context.Context, owner Owner, svc *v1.Service, nodes []*v1.Node, unlock func()) error {
	const op = "UpdateLoadBalancer"
	ctx = r.waitBusy(r.waitThrottles(ctx))
	// A load balancer the Cache's list does not hold is "none" here without
	// asking the cloud: Update creates nothing, and after its ErrNotFound
	// the service controller only asks GetLoadBalancer whether the failure
	// matters (noteUpdateMiss).
	res, err := r.beginLocked(withMissTrusted(ctx), op, owner, svc, unlock, findDefault)
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
	if _, err := r.usePool(ctx, svc, res.owner.Cluster, &want, families, nodes, false); err != nil {
		return r.fail(ctx, op, svc, err)
	}
	after, err := r.converge(ctx, svc, withBackends(want), lb, nodes)
	if err != nil {
		return r.fail(ctx, op, svc, err)
	}
	r.releasedPool(ctx, svc, res.owner.Cluster, lb, after)
	return nil
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
	if svc != nil {
		r.supersede(svc.Namespace+"/"+svc.Name, r.seqNow()) // nothing of it is written after this
	}
	res, err := r.begin(ctx, op, clusterName, svc, findDefault)
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

// begin checks the arguments, takes the Service's lock and runs the lookup
// (in mode: see findMode).
// The caller must call res.unlock when err is nil. If the Driver's Find
// panics (or calls runtime.Goexit), the lock is released and the panic goes
// on unchanged, so a caller that recovers can call again for the Service.
func (r *Reconciler) begin(ctx context.Context, op, clusterName string, svc *v1.Service, mode findMode) (*lookup, error) {
	owner, err := r.owner(clusterName, svc)
	if err != nil {
		return nil, err
	}
	return r.beginLocked(ctx, op, owner, svc, r.lock(svc), mode)
}

// beginLocked is begin once the Service's lock is held: unlock releases
// it, on an error before beginLocked returns, else through res.unlock.
func (r *Reconciler) beginLocked(ctx context.Context, op string, owner Owner, svc *v1.Service, unlock func(), mode findMode) (*lookup, error) {
	returned := false
	defer func() {
		if !returned {
			unlock() // find (or the check) did not return: do not recover, only release
		}
	}()
	var res *lookup
	err := ErrStale
	if stillCurrent(ctx) { // RepairLoadBalancer's check, under the lock
		res, err = r.find(ctx, owner, svc, mode)
	}
	returned = true
	if err != nil {
		unlock()
		return nil, r.fail(ctx, op, svc, err)
	}
	res.unlock = unlock
	return res, nil
}
