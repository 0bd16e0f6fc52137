package housekeeping

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	coreinformers "k8s.io/client-go/informers/core/v1"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	cloudprovider "k8s.io/cloud-provider"
	servicehelper "k8s.io/cloud-provider/service/helpers"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/ccmkit/ccmkit/governor"
	"github.com/ccmkit/ccmkit/internal/check"
	"github.com/ccmkit/ccmkit/internal/cloudmetrics"
	"github.com/ccmkit/ccmkit/internal/throttle"
	"github.com/ccmkit/ccmkit/loadbalancer"
)

// DriftRepairName is the drift repair controller's name in a CCM's
// controller map: --controllers=-drift-repair turns it off.
const DriftRepairName = "drift-repair"

const defaultDriftPeriod = 10 * time.Minute

// DriftRepairOptions configures a DriftRepair.
type DriftRepairOptions struct {
	// ClusterName is the clusterName argument of every call: the CCM's
	// --cluster-name. Required.
	ClusterName string
	// Period is how often a pass starts: a drift that is there when a pass
	// lists the load balancers is repaired by that pass. 0 means 10m;
	// negative or positive below MinPeriod (1s) is an error.
	Period time.Duration
	// Recorder records a Normal event (reason LoadBalancerDriftRepaired)
	// on each Service whose load balancer was repaired. nil means no
	// events; the log line is written either way.
	Recorder record.EventRecorder
	// Clock paces the passes. nil means the real clock; tests inject a
	// fake one.
	Clock clock.Clock
}

// withDefaults fills in the zero fields of o (CONTRIBUTING.md A3).
func (o DriftRepairOptions) withDefaults() DriftRepairOptions {
	o.Period = cmp.Or(o.Period, defaultDriftPeriod)
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	return o
}

// Repairer is what DriftRepair needs of a provider's LoadBalancer:
// loadbalancer.Reconciler implements it.
type Repairer interface {
	// RepairLoadBalancer is EnsureLoadBalancer that changes nothing
	// (an error wrapping loadbalancer.ErrStale) when current reports,
	// once the call holds the Service's turn, that the Service or Nodes
	// it was given are no longer the current ones; see
	// loadbalancer.Reconciler.RepairLoadBalancer.
	RepairLoadBalancer(ctx context.Context, clusterName string, svc *v1.Service, nodes []*v1.Node, current func() bool) (*v1.LoadBalancerStatus, error)
	// Invalidate makes the next look-ups ask the cloud (a cache's list
	// is dropped).
	Invalidate()
}

// DriftRepair re-ensures every LoadBalancer Service on a period (see the
// package doc).
//
// A pass, every Period: Invalidate (so the pass sees the cloud as it is,
// at the cost of one List with a loadbalancer.Cache), then
// RepairLoadBalancer for each Service the service controller has
// provisioned (type LoadBalancer without a class, with its cleanup
// finalizer and an ingress, not being deleted), one at a time, in
// namespace/name order, with the Nodes the service controller would pass
// (inBackends). A call whose Service or Nodes changed in the informer
// since it read them changes nothing (loadbalancer.ErrStale): the newer
// state is the service controller's to apply, never undone here.
//
// The pace follows the cloud calls (counted by the blocks' metering): each
// call that made n cloud calls of its own (the pass's List is not one:
// ownCalls) is followed by a wait of n × Period/(number of Services), and
// a throttled one by at least the delay the cloud or the governor asked
// for. A converged cluster, whose calls are all answered from the one
// List, is checked at once, so a drift there when the pass lists is
// repaired within the period; a pass that repairs or reads per Service
// spreads its calls over the period. Its calls are
// admitted by a governor at background priority (governor.AtPriority),
// after everything the upstream controllers need, and a throttled call
// does not touch the back-off the service controller gets for the Service.
// A changed ingress is patched into the Service's status, as the service
// controller does (controllers/service/controller.go patchStatus).
//
// A DriftRepair is used by one Run at a time. Run starts no goroutine.
type DriftRepair struct {
	lb       Repairer
	client   kubernetes.Interface
	services corelisters.ServiceLister
	nodes    corelisters.NodeLister
	synced   []cache.InformerSynced
	opts     DriftRepairOptions
	// sleep waits between calls (the package's sleep; tests record).
	sleep func(ctx context.Context, c clock.Clock, d time.Duration) bool
}

// NewDriftRepair returns a DriftRepair of lb's load balancers, reading
// Services and Nodes from the informers (which the caller starts) and
// patching Service status through client. Errors (not wrapped) start with
// "housekeeping.NewDriftRepair: " and name the argument or field: a nil
// lb, client or informer, an empty ClusterName, a negative Period.
func NewDriftRepair(lb Repairer, client kubernetes.Interface, services coreinformers.ServiceInformer, nodes coreinformers.NodeInformer, opts DriftRepairOptions) (*DriftRepair, error) {
	const fn = "housekeeping.NewDriftRepair"
	if err := check.Driver(fn, lb, "housekeeping.Repairer"); err != nil {
		return nil, err
	}
	if err := checkArgs(fn, arg{"client", client}, arg{"services informer", services}, arg{"nodes informer", nodes}); err != nil {
		return nil, err
	}
	if err := checkCommon(fn, opts.ClusterName, "Period", opts.Period, defaultDriftPeriod); err != nil {
		return nil, err
	}
	register()
	return &DriftRepair{
		lb: lb, client: client, opts: opts.withDefaults(), sleep: sleep,
		services: services.Lister(), nodes: nodes.Lister(),
		synced: []cache.InformerSynced{services.Informer().HasSynced, nodes.Informer().HasSynced},
	}, nil
}

// arg is a required argument of a constructor, by name.
type arg struct {
	name string
	v    any
}

// checkArgs refuses a nil argument (a typed nil included).
func checkArgs(fn string, args ...arg) error {
	for _, a := range args {
		if check.IsNil(a.v) {
			return fmt.Errorf("%s: %s is nil: expected a non-nil %s", fn, a.name, a.name)
		}
	}
	return nil
}

// checkCommon checks the fields both controllers' options have.
func checkCommon(fn, clusterName, periodField string, period, def time.Duration) error {
	if clusterName == "" {
		return fmt.Errorf("%s: Options.ClusterName is empty: expected the CCM's --cluster-name", fn)
	}
	if err := check.ClusterName("Options.ClusterName", clusterName); err != nil {
		return fmt.Errorf("%s: %w", fn, err)
	}
	if period < 0 || (period > 0 && period < MinPeriod) {
		return fmt.Errorf("%s: Options.%s %v: expected 0 (the default, %v) or at least %v (MinPeriod: a shorter period is a busy loop against the cloud)", fn, periodField, period, def, MinPeriod)
	}
	return nil
}

// MinPeriod is the shortest Period the housekeeping controllers accept:
// each pass lists the cloud's load balancers, so a period of a
// nanosecond would be a busy loop against the cloud API. The scale
// simulator's compressed periods (a minute divided by 20) stay above it.
const MinPeriod = time.Second

// Name returns DriftRepairName (k8s.io/controller-manager controller.Interface).
func (d *DriftRepair) Name() string { return DriftRepairName }

// Run waits for the informers to sync, then makes a pass every Period
// until ctx is done, and returns nil then. The first pass comes at a
// random moment of the first Period: not at once (the service controller
// has just ensured every Service), and not a whole Period late on a CCM
// whose leader changes more often than that. A pass that overruns its
// period is followed by the next at once.
func (d *DriftRepair) Run(ctx context.Context) error {
	logger := klog.FromContext(ctx).WithName(DriftRepairName)
	ctx = klog.NewContext(ctx, logger)
	if !cache.WaitForCacheSync(ctx.Done(), d.synced...) {
		return nil
	}
	logger.Info("Starting drift repair", "period", d.opts.Period, "cluster", d.opts.ClusterName)
	every(ctx, d.opts.Clock, d.opts.Period, func() {
		start := d.opts.Clock.Now()
		r := d.pass(ctx)
		logger.V(2).Info("Drift repair pass done", "services", r.total(), "converged", r[driftConverged], "repaired", r[driftRepaired],
			"retry", r[driftRetry], "errors", r[driftError], "skipped", r[driftSkipped], "took", d.opts.Clock.Since(start))
	})
	return nil
}

// driftResult is what one Service's check came to.
type driftResult int

const (
	driftConverged driftResult = iota // no cloud write
	driftRepaired                     // cloud writes made
	driftRetry                        // throttled or provisioning: next pass
	driftError                        // any other error
	driftSkipped                      // gone, changed or no longer provisioned: the service controller's
	numDriftResults
)

var driftResultNames = [numDriftResults]string{"converged", "repaired", "retry", "error", "skipped"}

// passReport counts a pass's Services by result.
type passReport [numDriftResults]int

// total is the Services checked, the skipped ones left out.
func (r passReport) total() int {
	n := 0
	for _, c := range r[:driftSkipped] {
		n += c
	}
	return n
}

// pass checks every provisioned Service once (see DriftRepair).
func (d *DriftRepair) pass(ctx context.Context) passReport {
	var r passReport
	d.lb.Invalidate()
	keys, err := d.targets()
	if err != nil {
		klog.FromContext(ctx).Error(err, "Listing Services for drift repair")
		return r
	}
	share := d.opts.Period / time.Duration(max(len(keys), 1))
	for i, key := range keys {
		c := d.check(ctx, key)
		r[c.result]++
		driftChecks.WithLabelValues(driftResultNames[c.result]).Inc()
		if i == len(keys)-1 {
			break // the next pass is Run's to schedule
		}
		wait := share * time.Duration(c.calls)
		if c.result == driftRetry {
			wait = max(wait, share, min(c.retryAfter, d.opts.Period))
		}
		if !d.sleep(ctx, d.opts.Clock, wait) {
			break
		}
	}
	return r
}

// targets returns the namespace/name keys of the provisioned Services, in
// order.
func (d *DriftRepair) targets() ([]cache.ObjectName, error) {
	svcs, err := d.services.List(labels.Everything())
	if err != nil {
		return nil, err
	}
	var keys []cache.ObjectName
	for _, s := range svcs {
		if provisioned(s) {
			keys = append(keys, cache.MetaObjectToName(s))
		}
	}
	slices.SortFunc(keys, func(a, b cache.ObjectName) int { return cmp.Compare(a.String(), b.String()) })
	return keys, nil
}

// checked is what one Service's check came to: its result, the cloud
// calls it made, and the delay a throttled call asked for.
type checked struct {
	result     driftResult
	calls      int
	retryAfter time.Duration
}

// check repairs the Service key as the informer has it now.
func (d *DriftRepair) check(ctx context.Context, key cache.ObjectName) checked {
	logger := klog.FromContext(ctx)
	svc, nodes, err := d.view(key)
	if err != nil {
		logger.Error(err, "Drift repair: reading the Service and Nodes", "service", key)
		return checked{result: driftError}
	}
	if svc == nil {
		return checked{result: driftSkipped}
	}
	callCtx, tally := cloudmetrics.StartTally(governor.AtPriority(ctx, governor.Background))
	current := func() bool { return d.current(key, svc, nodes) }
	status, err := d.lb.RepairLoadBalancer(callCtx, d.opts.ClusterName, svc.DeepCopy(), nodes, current)
	c := checked{calls: ownCalls(tally.Calls())}
	var retry bool
	switch c.retryAfter, retry = throttle.RetryAfter(err); {
	case errors.Is(err, loadbalancer.ErrStale), errors.Is(err, cloudprovider.ImplementedElsewhere):
		c.result = driftSkipped
	case retry:
		logger.V(2).Info("Drift repair deferred to the next pass", "service", key, "err", err)
		c.result = driftRetry
	case err != nil:
		logger.Error(err, "Drift repair failed", "service", key)
		c.result = driftError
	default:
		c.result = d.repaired(ctx, svc, status, tally)
	}
	return c
}

// ownCalls counts the cloud calls a check made for its Service alone: not
// the Lists (of load balancers, pools or instances) a cache made during
// it, which answer the whole pass, so that the Services after the one
// whose check happened to make them are not held back by them.
func ownCalls(calls map[string]int) int {
	n := 0
	for op, c := range calls {
		if op != "List" && op != "ListPools" {
			n += c
		}
	}
	return n
}

// repaired reports a successful call: its writes (a log line, an event, a
// metric) and a changed ingress (patchStatus).
func (d *DriftRepair) repaired(ctx context.Context, svc *v1.Service, status *v1.LoadBalancerStatus, tally *cloudmetrics.Tally) driftResult {
	logger := klog.FromContext(ctx)
	res := driftConverged
	if w := tally.Writes(); w > 0 {
		res = driftRepaired
		driftWrites.Add(float64(w))
		logger.Info("Repaired load balancer drift", "service", klog.KObj(svc), "cloudWrites", w, "cloudCalls", tally.Calls())
		if d.opts.Recorder != nil {
			d.opts.Recorder.Eventf(svc, v1.EventTypeNormal, "LoadBalancerDriftRepaired", "Repaired the load balancer, which differed from the Service in the cloud: %d cloud writes", w)
		}
	}
	if err := d.patchStatus(svc, status); err != nil {
		logger.Error(err, "Patching the load balancer status after drift repair", "service", klog.KObj(svc))
		return driftError
	}
	return res
}

// view returns the Service key and the Nodes the service controller would
// pass for it, as the informers have them now; a nil Service when it is
// gone or not provisioned (the service controller's to handle).
func (d *DriftRepair) view(key cache.ObjectName) (*v1.Service, []*v1.Node, error) {
	svc, err := d.services.Services(key.Namespace).Get(key.Name)
	if apierrors.IsNotFound(err) || (err == nil && !provisioned(svc)) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, err
	}
	nodes, err := d.backends()
	return svc, nodes, err
}

// backends returns the Nodes the service controller passes to
// EnsureLoadBalancer (inBackends), in name order.
func (d *DriftRepair) backends() ([]*v1.Node, error) {
	nodes, err := d.nodes.List(labels.Everything())
	if err != nil {
		return nil, err
	}
	nodes = slices.DeleteFunc(nodes, func(n *v1.Node) bool { return !inBackends(n) })
	slices.SortFunc(nodes, func(a, b *v1.Node) int { return cmp.Compare(a.Name, b.Name) })
	return nodes, nil
}

// current reports whether svc and nodes are still what the informers
// have: the same Service (UID and resourceVersion), still provisioned,
// and the same backend Nodes by name and provider ID (what the service
// controller compares, controllers/service/controller.go
// nodesSufficientlyEqual). It runs under the Reconciler's lock for the
// Service (RepairLoadBalancer).
func (d *DriftRepair) current(key cache.ObjectName, svc *v1.Service, nodes []*v1.Node) bool {
	now, err := d.services.Services(key.Namespace).Get(key.Name)
	if err != nil || now.UID != svc.UID || now.ResourceVersion != svc.ResourceVersion || !provisioned(now) {
		return false
	}
	latest, err := d.backends()
	return err == nil && slices.EqualFunc(nodes, latest, func(a, b *v1.Node) bool {
		return a.Name == b.Name && a.Spec.ProviderID == b.Spec.ProviderID
	})
}

// patchStatus patches the Service's load-balancer status when status
// differs from it, as the service controller does
// (controllers/service/controller.go patchStatus): a load balancer
// recreated behind the CCM's back may have a new address.
func (d *DriftRepair) patchStatus(svc *v1.Service, status *v1.LoadBalancerStatus) error {
	if status == nil || servicehelper.LoadBalancerStatusEqual(&svc.Status.LoadBalancer, status) {
		return nil
	}
	updated := svc.DeepCopy()
	updated.Status.LoadBalancer = *status
	if _, err := servicehelper.PatchService(d.client.CoreV1(), svc, updated); err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	return nil
}
