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
	"k8s.io/cloud-provider/api"
	servicehelper "k8s.io/cloud-provider/service/helpers"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/ccmkit/ccmkit/governor"
	"github.com/ccmkit/ccmkit/internal/check"
	"github.com/ccmkit/ccmkit/internal/cloudmetrics"
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
	// Period is how often every LoadBalancer Service is checked: a drift is
	// repaired within about one Period. 0 means 10m; negative is an error.
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

// Invalidator is what DriftRepair looks for on a provider's LoadBalancer
// to see the cloud as it is at each pass: loadbalancer.Reconciler
// implements it (Reconciler.Invalidate drops its Cache's list). A
// LoadBalancer without it is taken to ask the cloud at every call.
type Invalidator interface {
	Invalidate()
}

// DriftRepair re-ensures every LoadBalancer Service on a period (see the
// package doc).
//
// A pass, once per Period: it invalidates the provider's look-up cache
// (Invalidator), then calls EnsureLoadBalancer for each Service the
// service controller has provisioned (type LoadBalancer without a class,
// with its cleanup finalizer and an ingress, not being deleted), one at a
// time, in namespace/name order, with the Nodes the service controller
// would pass. The pace follows the cloud calls: with a ccmkit provider
// (an Invalidator) each Ensure that made cloud calls is followed by a wait
// of Period/(number of Services) per call, so a converged cluster, whose
// Ensures are all answered from the one List, is checked at once and a
// pass that repairs or reads per Service spreads its calls over the
// period; with another provider each Ensure gets an equal share of the
// period. Its calls are admitted by a governor at background priority
// (governor.AtPriority), after everything the upstream controllers need.
// A changed ingress is patched into the Service's status, as the service
// controller does (controllers/service/controller.go patchStatus).
//
// A DriftRepair is used by one Run at a time. Run starts no goroutine.
type DriftRepair struct {
	lb       cloudprovider.LoadBalancer
	client   kubernetes.Interface
	services corelisters.ServiceLister
	nodes    corelisters.NodeLister
	synced   []cache.InformerSynced
	opts     DriftRepairOptions
}

// NewDriftRepair returns a DriftRepair of lb's load balancers, reading
// Services and Nodes from the informers (which the caller starts) and
// patching Service status through client. Errors (not wrapped) start with
// "housekeeping.NewDriftRepair: " and name the argument or field: a nil
// lb, client or informer, an empty ClusterName, a negative Period.
func NewDriftRepair(lb cloudprovider.LoadBalancer, client kubernetes.Interface, services coreinformers.ServiceInformer, nodes coreinformers.NodeInformer, opts DriftRepairOptions) (*DriftRepair, error) {
	const fn = "housekeeping.NewDriftRepair"
	if err := check.Driver(fn, lb, "cloudprovider.LoadBalancer"); err != nil {
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
		lb: lb, client: client, opts: opts.withDefaults(),
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
	if period < 0 {
		return fmt.Errorf("%s: Options.%s %v: expected 0 (the default, %v) or more", fn, periodField, period, def)
	}
	return nil
}

// Name returns DriftRepairName (k8s.io/controller-manager controller.Interface).
func (d *DriftRepair) Name() string { return DriftRepairName }

// Run waits for the informers to sync, then makes a pass every Period,
// the first one Period after the start (the service controller has just
// ensured every Service then), until ctx is done; it returns nil then. A
// pass that overruns its period is followed by the next at once.
func (d *DriftRepair) Run(ctx context.Context) error {
	logger := klog.FromContext(ctx).WithName(DriftRepairName)
	ctx = klog.NewContext(ctx, logger)
	if !cache.WaitForCacheSync(ctx.Done(), d.synced...) {
		return nil
	}
	logger.Info("Starting drift repair", "period", d.opts.Period)
	next := d.opts.Clock.Now().Add(d.opts.Period)
	for sleep(ctx, d.opts.Clock, next.Sub(d.opts.Clock.Now())) {
		start := d.opts.Clock.Now()
		r := d.pass(ctx)
		logger.V(2).Info("Drift repair pass done", "services", r.total(), "converged", r[driftConverged], "repaired", r[driftRepaired], "retry", r[driftRetry], "errors", r[driftError], "took", d.opts.Clock.Since(start))
		next = start.Add(d.opts.Period)
	}
	return nil
}

// driftResult is what one Service's check came to.
type driftResult int

const (
	driftConverged driftResult = iota // no cloud write
	driftRepaired                     // cloud writes made
	driftRetry                        // throttled or provisioning: next pass
	driftError                        // any other error
	driftSkipped                      // gone or no longer provisioned
	numDriftResults
)

var driftResultNames = [numDriftResults]string{"converged", "repaired", "retry", "error", "skipped"}

// passReport counts a pass's Services by result.
type passReport [numDriftResults]int

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
	inv, paced := d.lb.(Invalidator)
	if paced {
		inv.Invalidate()
	}
	keys, err := d.targets()
	if err != nil {
		klog.FromContext(ctx).Error(err, "Listing Services for drift repair")
		return r
	}
	share := d.opts.Period / time.Duration(max(len(keys), 1))
	for i, key := range keys {
		res, calls := d.check(ctx, key)
		r[res]++
		if res != driftSkipped {
			driftChecks.WithLabelValues(driftResultNames[res]).Inc()
		}
		wait := share
		if paced {
			wait = share * time.Duration(calls)
		}
		if i == len(keys)-1 {
			break // the next pass is Run's to schedule
		}
		if !sleep(ctx, d.opts.Clock, wait) {
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

// check re-ensures the Service key as it is now in the informer, and
// returns what it came to and how many cloud calls it made (0 when the
// provider does not meter them).
func (d *DriftRepair) check(ctx context.Context, key cache.ObjectName) (driftResult, int) {
	logger := klog.FromContext(ctx)
	callCtx, tally := cloudmetrics.StartTally(governor.AtPriority(ctx, governor.Background))
	svc, status, err := d.ensure(callCtx, key)
	calls := 0
	for _, n := range tally.Calls() {
		calls += n
	}
	switch {
	case svc == nil:
		return driftSkipped, calls
	case err != nil:
		var retry *api.RetryError
		if errors.As(err, &retry) {
			logger.V(2).Info("Drift repair deferred to the next pass", "service", klog.KObj(svc), "err", err)
			return driftRetry, calls
		}
		logger.Error(err, "Drift repair failed", "service", klog.KObj(svc))
		return driftError, calls
	}
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
		return driftError, calls
	}
	return res, calls
}

// ensure calls EnsureLoadBalancer for the Service key as the informer has
// it, with the Nodes the service controller would pass, and returns the
// Service it ensured (nil when it is gone or no longer provisioned: the
// service controller's to handle). When the informer has a newer Service
// afterwards, it ensures that one too: the service controller may have
// ensured the newer one while this call, holding the older, waited for
// the Service's turn, and the cloud must not be left at the older spec.
func (d *DriftRepair) ensure(ctx context.Context, key cache.ObjectName) (*v1.Service, *v1.LoadBalancerStatus, error) {
	var svc *v1.Service
	for range 2 {
		current, err := d.services.Services(key.Namespace).Get(key.Name)
		if err != nil || !provisioned(current) {
			return nil, nil, nil
		}
		if svc != nil && current.ResourceVersion == svc.ResourceVersion {
			break
		}
		svc = current
		nodes, err := d.nodes.List(labels.Everything())
		if err != nil {
			return svc, nil, fmt.Errorf("listing Nodes: %w", err)
		}
		nodes = slices.DeleteFunc(nodes, func(n *v1.Node) bool { return !inBackends(n) })
		status, err := d.lb.EnsureLoadBalancer(ctx, d.opts.ClusterName, svc, nodes)
		if err != nil {
			return svc, nil, err
		}
		if latest, err := d.services.Services(key.Namespace).Get(key.Name); err != nil || latest.ResourceVersion == svc.ResourceVersion {
			return svc, status, nil
		}
	}
	return svc, nil, nil // ensured twice; a Service changing this fast is the service controller's
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
