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
	"k8s.io/cloud-provider/api"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/ccmkit/ccmkit/annotation"
	"github.com/ccmkit/ccmkit/internal/check"
	"github.com/ccmkit/ccmkit/internal/cloudmetrics"
	"github.com/ccmkit/ccmkit/internal/throttle"
	"github.com/ccmkit/ccmkit/provider"
)

// The defaults of Options (CONTRIBUTING.md A5: stated in the field docs,
// not exported).
const (
	defaultRetryAfter      = 10 * time.Second
	defaultMaxThrottleWait = time.Minute
)

// Options configures a Reconciler. Every field is optional: the zero value
// of each is a documented default.
type Options struct {
	// ClusterID, if set, is the cluster identity used for ownership and
	// naming instead of the clusterName argument of each call (the CCM's
	// --cluster-name). See the package doc.
	ClusterID string
	// Naming configures load-balancer names. The zero value is the
	// default: see NamerOptions.
	Naming NamerOptions
	// Capabilities are what the provider's load balancers support. The
	// zero value is single-stack TCP only, see Capabilities.
	Capabilities Capabilities
	// Annotations are the provider's declared annotations. nil means none.
	Annotations *annotation.Set
	// RequestedIPAnnotation, if set, is a declared annotation.KindIP
	// annotation requesting an address (see
	// DesiredInput.RequestedIPAnnotation). It must come from Annotations.
	RequestedIPAnnotation *annotation.Annotation
	// IDAnnotation, if set, is a declared annotation.KindString annotation
	// holding a stored cloud load-balancer ID: the first step of the
	// lookup order and the way to adopt an existing load balancer (see the
	// package doc). It must come from Annotations.
	IDAnnotation *annotation.Annotation
	// RetryAfter is how long the service controller waits before calling
	// EnsureLoadBalancer again when the load balancer has no address yet
	// (an api.RetryError). 0 means 10s; negative is an error.
	RetryAfter time.Duration
	// MaxThrottleWait bounds how long GetLoadBalancer, UpdateLoadBalancer
	// and EnsureLoadBalancerDeleted wait, in all, for the delays of
	// throttled cloud calls (see Driver) before they call again: the
	// service controller honours an api.RetryError only from
	// EnsureLoadBalancer and retries the others after a back-off of its
	// own, the same for every Service (controllers/service/controller.go:
	// processServiceDeletion, nodeSyncService), so failing fast would bring
	// every throttled Service back at once. EnsureLoadBalancer never waits:
	// it returns its RetryError. 0 means 1m; negative means never wait.
	MaxThrottleWait time.Duration
	// Clock is the clock the waits for throttled cloud calls run on
	// (MaxThrottleWait). Nil means the real clock; tests pass a
	// k8s.io/utils/clock/testing.FakeClock and step it.
	Clock clock.Clock
	// Hooks are optional callbacks for events and logs.
	Hooks Hooks
	// Instances, if set, supplies the addresses of a Node that has a
	// spec.providerID but no InternalIP yet (through InstanceMetadata). The
	// cloud-node controller sets spec.providerID before it patches the
	// Node's addresses, and the service controller syncs backends on the
	// provider-ID change but never on an address change
	// (controllers/service/controller.go, shouldSyncUpdatedNode): without
	// Instances such a node is left out of the load balancer until some
	// other node changes. Pass the provider's InstancesV2 (the instances
	// package's Adapter, ideally over its Cache: one List serves every
	// node). nil means such nodes are left out (see BackendKey).
	Instances cloudprovider.InstancesV2
	// Codec, when its Scheme is set, checks every Node's spec.providerID:
	// a Node whose provider ID it rejects (another provider's scheme, or
	// malformed) cannot be a target of this cloud and is left out of the
	// backends, reported once through Hooks.NodeSkipped; the other Nodes
	// are served. Set it to the Codec the provider's instances use; with
	// Capabilities.BackendKey = BackendKeyProviderID it is what keeps a
	// foreign Node from failing every Driver.Apply. The zero value checks
	// nothing.
	Codec provider.Codec
}

// withDefaults fills in the zero fields of o (CONTRIBUTING.md A3).
func (o Options) withDefaults() Options {
	o.RetryAfter = cmp.Or(o.RetryAfter, defaultRetryAfter)
	o.MaxThrottleWait = cmp.Or(o.MaxThrottleWait, defaultMaxThrottleWait)
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	return o
}

// Hooks are optional callbacks. They are called synchronously on the
// goroutine of the LoadBalancer method, while the Service's lock is held;
// they must not call the Reconciler for the same Service, and must treat
// svc as read-only. Nil hooks are skipped.
type Hooks struct {
	// UserError is called when a method fails because of something the
	// user can fix on the Service or in the cloud: a malformed annotation
	// (annotation.ErrInvalid), an invalid field (ErrInvalidService), an
	// unsupported feature (ErrUnsupported), a load balancer owned by
	// someone else (ErrNotOwned) or a stored ID that does not exist
	// (ErrNotFound from EnsureLoadBalancer). op is the method name, e.g.
	// "EnsureLoadBalancer"; err is the error before the method wraps it
	// with op and the Service. Nil: once Initialize has run, the
	// Reconciler records a Warning event on svc with a reason per class
	// (see the package doc, "Events"); set it to replace that event.
	UserError func(ctx context.Context, op string, svc *v1.Service, err error)
	// Action is called after each Driver.Apply, with its error (nil on
	// success), e.g. to record events or metrics.
	Action func(ctx context.Context, svc *v1.Service, a Action, err error)
	// NodeSkipped is called when a Node the service controller passed is
	// left out of the backends because of something wrong with the Node
	// itself, never a transient cloud error: its spec.providerID is
	// another provider's or malformed (see Options.Codec), or it has no
	// InternalIP and Options.Instances reports its instance gone or its
	// provider ID invalid. The other Nodes are served and the call does not
	// fail. It is called once per Node name, provider ID and reason for the
	// Reconciler's lifetime (again only when one of them changes), from
	// whichever call saw it first. Nil: the Reconciler logs it once, at
	// level 0, and, once Initialize has run, records a Warning event
	// (reason LoadBalancerBackendSkipped) on the Node and one on the
	// Service of that call (see the package doc, "Events").
	NodeSkipped func(ctx context.Context, node *v1.Node, reason error)
}

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
//   - Service and Node arguments are never modified.
//   - A load balancer owned by another cluster or Service is never
//     changed or deleted, nor a shared pool of another cluster; a pool is
//     deleted only when no load balancer references it (the cloud refuses
//     otherwise, see PoolDriver.DeletePool).
//
// A Reconciler is safe for concurrent use. It starts no goroutines, but
// for the event recorder of Initialize, which stop with its context.
type Reconciler struct {
	driver Driver
	pools  PoolDriver // driver, when it can serve pools (poolDriverOf); else nil
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
	if opts.RetryAfter < 0 {
		return nil, fmt.Errorf("%s: Options.RetryAfter %v: expected 0 (the default, %v) or more", fn, opts.RetryAfter, defaultRetryAfter)
	}
	if err := opts.Capabilities.BackendKey.check(fn + ": Options.Capabilities.BackendKey"); err != nil {
		return nil, err
	}
	pools := poolDriverOf(d)
	if opts.Capabilities.SharedBackendPools && pools == nil {
		return nil, fmt.Errorf("%s: Options.Capabilities.SharedBackendPools is true, but the driver (%T) cannot serve pools: expected a loadbalancer.PoolDriver, or a loadbalancer.Cache over a loadbalancer.PoolListDriver", fn, d)
	}
	return &Reconciler{driver: d, pools: pools, opts: opts.withDefaults(), namer: namer,
		locks: map[string]*serviceLock{}, skipped: map[string]string{}, throttles: map[string]int{}, updateMisses: map[types.UID]bool{}}, nil
}

// desiredInput is the input of Desired the Reconciler uses for clusterName.
func (r *Reconciler) desiredInput(clusterName string) DesiredInput {
	return DesiredInput{
		Cluster:               r.cluster(clusterName),
		Namer:                 r.namer,
		Capabilities:          r.opts.Capabilities,
		Annotations:           r.opts.Annotations,
		RequestedIPAnnotation: r.opts.RequestedIPAnnotation,
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
func (r *Reconciler) EnsureLoadBalancer(ctx context.Context, clusterName string, svc *v1.Service, nodes []*v1.Node) (*v1.LoadBalancerStatus, error) {
	st, err := r.ensure(ctx, clusterName, svc, nodes)
	return st, r.spread(svc, err)
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
// any other outcome resets the count.
func (r *Reconciler) spread(svc *v1.Service, err error) error {
	if svc == nil {
		return err
	}
	key := svc.Namespace + "/" + svc.Name
	d, throttled := throttle.RetryAfter(err)
	var nr *notReady
	if !throttled || errors.As(err, &nr) {
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

// notReady is the RetryError of a load balancer without an address yet:
// the load balancer is provisioning, nothing was throttled.
type notReady struct{ retry *api.RetryError }

func (e *notReady) Error() string { return e.retry.Error() }

func (e *notReady) Unwrap() error { return e.retry }

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
	lb, err := r.converge(ctx, svc, desired, res.target(), eligible)
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
		desired.Spec.Backends = r.key().backends(eligible, desired.Spec.IPFamilies)
	}
	return desired, eligible, nil
}

// converge plans and applies the actions that bring lb (nil: none yet) to
// desired and returns the load balancer as the Driver last reported it. A
// creation may be partial (see Driver.Apply), so after one it plans once
// more.
func (r *Reconciler) converge(ctx context.Context, svc *v1.Service, desired, lb *LoadBalancer, eligible []*v1.Node) (*LoadBalancer, error) {
	for round := 0; round < 2; round++ {
		actions, err := Plan(desired, lb)
		if err == nil {
			actions, err = r.checkTargets(ctx, svc, actions, eligible)
		}
		if err != nil {
			return nil, err
		}
		if len(actions) == 0 {
			break
		}
		for _, a := range actions {
			if lb, err = r.apply(ctx, svc, a); err != nil {
				return nil, err
			}
		}
		if actions[0].Kind != ActionCreate {
			break
		}
	}
	return lb, nil
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
		return nil, &notReady{api.NewRetryError(fmt.Sprintf("load balancer %q (id %q) of service %s has no address yet", lb.Name, lb.ID, owner.namespacedName()), r.opts.RetryAfter)}
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
func (r *Reconciler) UpdateLoadBalancer(ctx context.Context, clusterName string, svc *v1.Service, nodes []*v1.Node) error {
	const op = "UpdateLoadBalancer"
	if svc != nil && svc.Spec.LoadBalancerClass != nil {
		return cloudprovider.ImplementedElsewhere
	}
	ctx = r.waitThrottles(ctx)
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
	desired := *lb
	desired.Spec.BackendKey = r.key()
	desired.Spec.Backends = r.key().backends(nodes, families)
	err = r.usePool(ctx, svc, res.owner.Cluster, &desired.Spec, families, nodes)
	var actions []Action
	if err == nil {
		actions, err = Plan(&desired, lb)
	}
	if err == nil {
		actions, err = r.checkTargets(ctx, svc, actions, nodes)
	}
	if err != nil {
		return r.fail(ctx, op, svc, err)
	}
	after := lb
	for _, a := range actions {
		if after, err = r.apply(ctx, svc, a); err != nil {
			return r.fail(ctx, op, svc, err)
		}
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
func (r *Reconciler) EnsureLoadBalancerDeleted(ctx context.Context, clusterName string, svc *v1.Service) error {
	const op = "EnsureLoadBalancerDeleted"
	ctx = r.waitThrottles(ctx)
	r.takeUpdateMiss(svc) // forget it: a Service going away asks no more
	res, err := r.begin(ctx, op, clusterName, svc)
	if err != nil {
		return err
	}
	defer res.unlock()
	var errs []error
	for _, lb := range res.owned {
		klog.FromContext(ctx).V(2).Info("Deleting load balancer", "service", klog.KObj(svc), "id", lb.ID, "name", lb.Name)
		del := func() error {
			return cloudmetrics.Meter(ctx, capability, "Delete", func(ctx context.Context) error { return r.driver.Delete(ctx, lb) })
		}
		if err := r.call(ctx, del); err != nil {
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

func (r *Reconciler) apply(ctx context.Context, svc *v1.Service, a Action) (*LoadBalancer, error) {
	klog.FromContext(ctx).V(2).Info("Applying load balancer action", "service", klog.KObj(svc), "action", a.Kind, "id", a.LoadBalancerID, "reason", a.Reason)
	lb, err := callFor(ctx, r, func() (*LoadBalancer, error) {
		return metered(ctx, "Apply", func(ctx context.Context) (*LoadBalancer, error) { return r.driver.Apply(ctx, a) })
	})
	if err == nil && lb == nil {
		err = fmt.Errorf("driver returned no load balancer")
	}
	if r.opts.Hooks.Action != nil {
		r.opts.Hooks.Action(ctx, svc, a, err)
	}
	if err != nil {
		return nil, fmt.Errorf("%s on load balancer %q: %w", a.Kind, a.LoadBalancerID, err)
	}
	return lb, nil
}

// fail wraps err with the Service, reports user-facing errors
// (reportUserError) and returns the wrapped error.
func (r *Reconciler) fail(ctx context.Context, op string, svc *v1.Service, err error) error {
	if reason, ok := userErrorReason(err); ok {
		r.reportUserError(ctx, op, svc, reason, err)
	}
	return fmt.Errorf("%s for service %s/%s: %w", op, svc.Namespace, svc.Name, err)
}

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

// find follows the documented lookup order: stored ID, ownership tags,
// name with an ownership check. A Driver error is returned (wrapped, naming
// the step); what stops EnsureLoadBalancer is in lookup.err.
func (r *Reconciler) find(ctx context.Context, owner Owner, svc *v1.Service) (*lookup, error) {
	f := finder{r: r, lookup: lookup{owner: owner}, seen: map[string]bool{}}
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
// balancer with that name, never a second one of this Service.
func (f *finder) byName(ctx context.Context, svc *v1.Service) error {
	name := f.r.namer.Name(f.owner.Cluster, svc)
	lbs, err := f.r.findDriver(withMissTrusted(ctx), Query{Name: name})
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
// result (a Driver bug that would otherwise panic the caller).
func (r *Reconciler) findDriver(ctx context.Context, q Query) ([]*LoadBalancer, error) {
	lbs, err := callFor(ctx, r, func() ([]*LoadBalancer, error) {
		return metered(ctx, "Find", func(ctx context.Context) ([]*LoadBalancer, error) { return r.driver.Find(ctx, q) })
	})
	if err != nil {
		return nil, err
	}
	if i := slices.Index(lbs, nil); i >= 0 {
		return nil, fmt.Errorf("driver Find returned a nil load balancer at index %d of %d: expected only non-nil load balancers", i, len(lbs))
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

// key is the BackendKey of the Reconciler's cloud.
func (r *Reconciler) key() BackendKey { return r.opts.Capabilities.BackendKey }

// eligible returns the nodes that can be backends, each with the addresses
// the backend key needs. A Node that cannot be a target of this cloud
// because of the Node itself is left out and reported once (skip): a
// spec.providerID that Options.Codec rejects, or, where addresses are needed
// (every key but BackendKeyProviderID), no InternalIP and a
// Options.Instances that reports its instance gone or its provider ID
// invalid. A Node with a provider ID and no InternalIP gets a copy carrying
// the addresses Options.Instances reports (see Options.Instances). Any other
// look-up error (the cloud is down or throttled) is returned: leaving the
// Node out would not be the Node's fault. nodes and its Nodes are never
// modified; when nothing is left out or replaced, nodes itself is
// returned.
func (r *Reconciler) eligible(ctx context.Context, svc *v1.Service, nodes []*v1.Node) ([]*v1.Node, error) {
	needAddrs := r.opts.Instances != nil && r.key() != BackendKeyProviderID
	checkIDs := r.opts.Codec.Scheme != ""
	if !needAddrs && !checkIDs {
		return nodes, nil
	}
	anySkipped := r.hasSkipped()
	var out []*v1.Node // a copy of nodes, made at the first change
	change := func(i int, n *v1.Node) {
		if out == nil {
			out = slices.Clone(nodes)
		}
		out[i] = n
	}
	for i, n := range nodes {
		if n == nil || n.Spec.ProviderID == "" {
			continue
		}
		if checkIDs {
			if _, err := r.opts.Codec.Parse(n.Spec.ProviderID); err != nil {
				r.skip(ctx, stageNode, svc, n, err)
				change(i, nil)
				continue
			}
		}
		if !needAddrs || hasInternalIP(n) {
			if anySkipped {
				r.unskip(stageNode, n)
			}
			continue
		}
		md, err := callFor(ctx, r, func() (*cloudprovider.InstanceMetadata, error) { return r.opts.Instances.InstanceMetadata(ctx, n) })
		switch {
		case errors.Is(err, cloudprovider.InstanceNotFound):
			r.skip(ctx, stageNode, svc, n, fmt.Errorf("it has no InternalIP yet and its instance does not exist (%w)", err))
			change(i, nil)
		case isProviderIDError(err):
			r.skip(ctx, stageNode, svc, n, err)
			change(i, nil)
		case err != nil:
			return nil, fmt.Errorf("node %q (providerID %q) has no InternalIP yet and its cloud addresses could not be read: %w", cut(n.Name), cut(n.Spec.ProviderID), err)
		case md != nil && len(md.NodeAddresses) > 0:
			if anySkipped {
				r.unskip(stageNode, n)
			}
			cp := *n // shallow: only Status.Addresses is replaced, nothing shared is written
			cp.Status.Addresses = md.NodeAddresses
			change(i, &cp)
		}
	}
	if out == nil {
		return nodes, nil
	}
	return slices.DeleteFunc(out, func(n *v1.Node) bool { return n == nil }), nil
}

// checkTargets drops from the backends that actions add (ActionCreate's and
// ActionAddBackends') those whose instance Options.Instances reports gone,
// under BackendKeyProviderID only: a cloud whose targets are instances
// rejects an unknown one, which would fail the whole action and so every
// other new backend. Only backends being added are checked, so a converged
// load balancer costs no look-up; with an instances.Cache a check is no
// cloud call. Each dropped Node is reported once (skip); a look-up error is
// returned. nodes are the Nodes the backends were built from.
func (r *Reconciler) checkTargets(ctx context.Context, svc *v1.Service, actions []Action, nodes []*v1.Node) ([]Action, error) {
	return liveActions(ctx, r, svc, actions, nodes, func(a *Action) (*[]Backend, bool) {
		switch a.Kind {
		case ActionCreate:
			a.Create = a.Create.Clone()
			return &a.Create.Spec.Backends, true
		case ActionAddBackends:
			return &a.Backends, false
		}
		return nil, false
	})
}

// liveActions is checkTargets for actions of any type A: adds returns a
// pointer to the backends a (a copy the caller owns) adds, nil when it adds
// none, and whether a stays when none of them is left (a creation) or goes
// (an addition).
func liveActions[A any](ctx context.Context, r *Reconciler, svc *v1.Service, actions []A, nodes []*v1.Node, adds func(a *A) (bs *[]Backend, keepEmpty bool)) ([]A, error) {
	byID := r.targetNodes(nodes)
	if byID == nil {
		return actions, nil
	}
	out := make([]A, 0, len(actions))
	for _, a := range actions {
		if bs, keepEmpty := adds(&a); bs != nil {
			kept, err := r.liveTargets(ctx, svc, *bs, byID)
			if err != nil {
				return nil, err
			}
			if *bs = kept; len(kept) == 0 && !keepEmpty {
				continue
			}
		}
		out = append(out, a)
	}
	return out, nil
}

// targetNodes returns nodes by provider ID when checkTargets checks the
// backends it adds (BackendKeyProviderID and Options.Instances), else nil.
func (r *Reconciler) targetNodes(nodes []*v1.Node) map[string]*v1.Node {
	if r.key() != BackendKeyProviderID || r.opts.Instances == nil {
		return nil
	}
	byID := map[string]*v1.Node{}
	for _, n := range nodes {
		if n != nil && n.Spec.ProviderID != "" {
			byID[n.Spec.ProviderID] = n
		}
	}
	return byID
}

// liveTargets returns bs without the backends whose Node (byID, see
// targetNodes) has no instance, each reported once (skip); a backend not
// built from byID's Nodes is kept. bs itself is returned when nothing is
// dropped.
func (r *Reconciler) liveTargets(ctx context.Context, svc *v1.Service, bs []Backend, byID map[string]*v1.Node) ([]Backend, error) {
	var out []Backend
	for i, b := range bs {
		n := byID[b.ProviderID]
		if n == nil {
			if out != nil {
				out = append(out, b)
			}
			continue // not built from nodes: keep
		}
		ok, err := callFor(ctx, r, func() (bool, error) { return r.opts.Instances.InstanceExists(ctx, n) })
		if err != nil {
			return nil, fmt.Errorf("node %q (providerID %q): checking that its instance exists before adding it as a backend: %w", cut(n.Name), cut(n.Spec.ProviderID), err)
		}
		if !ok {
			r.skip(ctx, stageTarget, svc, n, errors.New("its instance does not exist"))
			if out == nil {
				out = slices.Clone(bs[:i])
			}
			continue
		}
		r.unskip(stageTarget, n)
		if out != nil {
			out = append(out, b)
		}
	}
	if out == nil {
		return bs, nil
	}
	return out, nil
}

// isProviderIDError reports whether err says a provider ID is not ours or
// not well formed: a fault of the Node, not of the cloud.
func isProviderIDError(err error) bool {
	return errors.Is(err, provider.ErrForeignProviderID) || errors.Is(err, provider.ErrMalformedProviderID) ||
		errors.Is(err, provider.ErrEmptyProviderID)
}

// maxSkipped bounds the memory of reported Nodes; past it the memory is
// cleared, so a Node may be reported once more.
const maxSkipped = 10000

// The stages that leave a Node out, each with its own memory of reported
// Nodes, so that one stage finding a Node good does not make another
// report it again.
const (
	stageNode   = "node"   // eligible: the Node's provider ID or addresses
	stageTarget = "target" // checkTargets: the Node's instance
)

// skip reports node as left out of svc's backends for reason
// (reportSkipped), unless stage reported the same node, provider ID and
// reason before, for any Service.
func (r *Reconciler) skip(ctx context.Context, stage string, svc *v1.Service, node *v1.Node, reason error) {
	key, memo := stage+"/"+node.Name, node.Spec.ProviderID+"\x00"+reason.Error()
	r.skipMu.Lock()
	if r.skipped[key] == memo {
		r.skipMu.Unlock()
		return
	}
	if len(r.skipped) >= maxSkipped {
		clear(r.skipped)
	}
	r.skipped[key] = memo
	r.skipMu.Unlock()
	r.reportSkipped(ctx, svc, node, reason)
}

// unskip forgets that stage reported node, so that it is reported again if
// it goes bad again.
func (r *Reconciler) unskip(stage string, node *v1.Node) {
	r.skipMu.Lock()
	defer r.skipMu.Unlock()
	delete(r.skipped, stage+"/"+node.Name)
}

// hasSkipped reports whether any Node is remembered as reported.
func (r *Reconciler) hasSkipped() bool {
	r.skipMu.Lock()
	defer r.skipMu.Unlock()
	return len(r.skipped) > 0
}

func hasInternalIP(n *v1.Node) bool {
	for _, a := range n.Status.Addresses {
		if a.Type == v1.NodeInternalIP {
			return true
		}
	}
	return false
}

// throttleBudget is the context key of the *throttle.Budget of a method
// that waits for throttled cloud calls (see Options.MaxThrottleWait).
type throttleBudget struct{}

// waitThrottles returns ctx carrying a budget of Options.MaxThrottleWait for
// all the cloud calls of the method it is given to: each is retried after a
// throttle while the waits so far fit in it (call).
func (r *Reconciler) waitThrottles(ctx context.Context) context.Context {
	return context.WithValue(ctx, throttleBudget{}, throttle.NewBudget(r.opts.MaxThrottleWait, r.opts.Clock))
}

// call makes one cloud call (fn) and, in a method that waits for throttles
// (waitThrottles), calls again after each throttle within the method's
// budget; see throttle.Retry. In EnsureLoadBalancer it calls fn once.
func (r *Reconciler) call(ctx context.Context, fn func() error) error {
	b, _ := ctx.Value(throttleBudget{}).(*throttle.Budget)
	return throttle.Retry(ctx, b, fn)
}

// callFor is r.call for a cloud call that returns a value with its error.
func callFor[T any](ctx context.Context, r *Reconciler, fn func() (T, error)) (T, error) {
	var v T
	err := r.call(ctx, func() (err error) {
		v, err = fn()
		return err
	})
	return v, err
}

// capability is the capability label of the Reconciler's cloud calls in
// internal/cloudmetrics (see the package doc, "Metrics").
const capability = "loadbalancer"

// metered makes one call of the Driver method op through
// cloudmetrics.Meter, which records it unless a Cache received it (a Cache
// records the cloud calls it makes itself). fn must call the Driver with
// the ctx it is given. The Driver contract has no not-found error (Find
// reports none as an empty slice, Delete a gone load balancer as nil), so
// no error counts as not-found.
func metered[T any](ctx context.Context, op string, fn func(ctx context.Context) (T, error)) (T, error) {
	var v T
	err := cloudmetrics.Meter(ctx, capability, op, func(ctx context.Context) (err error) {
		v, err = fn(ctx)
		return err
	})
	return v, err
}
