package housekeeping

import (
	"cmp"
	"context"
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	coreinformers "k8s.io/client-go/informers/core/v1"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	cloudprovider "k8s.io/cloud-provider"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/ccmkit/ccmkit/governor"
	"github.com/ccmkit/ccmkit/internal/check"
	"github.com/ccmkit/ccmkit/loadbalancer"
)

// OrphanCollectionName is the orphan collection controller's name in a
// CCM's controller map: --controllers=-orphan-collection turns it off.
const OrphanCollectionName = "orphan-collection"

const (
	defaultOrphanPeriod = 5 * time.Minute
	defaultOrphanGrace  = 15 * time.Minute
)

// Owners is what OrphanCollector needs of a provider's LoadBalancer:
// EnsureLoadBalancerDeleted, a list of the load balancers tagged for the
// cluster, and the load balancer a Service claims by a stored ID.
// loadbalancer.Reconciler implements it (ListOwned: one Driver.Find by
// the cluster tag, answered from its Cache's list when it has one).
type Owners interface {
	cloudprovider.LoadBalancer
	// ListOwned returns every load balancer tagged for the cluster
	// (loadbalancer.TagCluster), with its tags.
	ListOwned(ctx context.Context, clusterName string) ([]*loadbalancer.LoadBalancer, error)
	// StoredID returns the ID of the load balancer svc names in the
	// provider's ID annotation, if any.
	StoredID(svc *v1.Service) (string, bool)
}

// OrphanCollectorOptions configures an OrphanCollector.
type OrphanCollectorOptions struct {
	// ClusterName is the clusterName argument of every call: the CCM's
	// --cluster-name. Required.
	ClusterName string
	// Period is how often the owned load balancers are listed. 0 means 5m;
	// negative or positive below MinPeriod (1s) is an error.
	Period time.Duration
	// GracePeriod is how long a load balancer must stay orphaned before it
	// is deleted, from the pass that first saw it: long enough for any
	// informer to see a Service just created. 0 means 15m; negative means
	// none (deleted at the first pass that sees it, after the check
	// against the API server).
	GracePeriod time.Duration
	// DryRun only reports: a log line and an event per orphan when it is
	// first seen and when it is due, and no deletion.
	DryRun bool
	// Recorder records events (reasons OrphanedLoadBalancer,
	// DeletedOrphanedLoadBalancer) on the gone Service, by namespace, name
	// and UID, so `kubectl get events -n <namespace>` shows them. nil
	// means no events; the log lines are written either way.
	Recorder record.EventRecorder
	// Clock paces the passes and dates the orphans. nil means the real
	// clock.
	Clock clock.Clock
}

// withDefaults fills in the zero fields of o (CONTRIBUTING.md A3).
func (o OrphanCollectorOptions) withDefaults() OrphanCollectorOptions {
	o.Period = cmp.Or(o.Period, defaultOrphanPeriod)
	o.GracePeriod = cmp.Or(o.GracePeriod, defaultOrphanGrace)
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	return o
}

// OrphanCollector deletes the load balancers of this cluster whose
// Service is gone (see the package doc).
//
// A pass, once per Period: ListOwned, then findOrphans against the
// Services of the informer. An orphan is due once it has been orphaned
// for GracePeriod, no Service of its namespace/name under a new UID is
// still on its way (settled), and no Service names it in the provider's
// ID annotation (Owners.StoredID: a user keeping that load balancer, and
// its address, for another Service). Before deleting a due orphan the collector
// asks the API server, not the informer, whether a Service with its UID
// exists; then it calls EnsureLoadBalancerDeleted with a Service carrying
// only the orphan's namespace, name and UID, which (with a
// loadbalancer.Reconciler) deletes only load balancers owned by that
// cluster and UID, and shared pools no longer referenced.
//
// An OrphanCollector is used by one Run at a time. Run starts no
// goroutine.
type OrphanCollector struct {
	lb       Owners
	client   kubernetes.Interface
	services corelisters.ServiceLister
	synced   cache.InformerSynced
	opts     OrphanCollectorOptions
	seen     map[string]time.Time // load-balancer ID → first seen orphaned
	due      map[string]bool      // dry run: the due orphans already reported
}

// NewOrphanCollector returns an OrphanCollector of lb's load balancers,
// reading Services from the informer (which the caller starts) and
// confirming through client. Errors (not wrapped) start with
// "housekeeping.NewOrphanCollector: " and name the argument or field: a
// nil lb, client or informer, an empty ClusterName, a negative Period.
func NewOrphanCollector(lb Owners, client kubernetes.Interface, services coreinformers.ServiceInformer, opts OrphanCollectorOptions) (*OrphanCollector, error) {
	const fn = "housekeeping.NewOrphanCollector"
	if err := check.Driver(fn, lb, "housekeeping.Owners"); err != nil {
		return nil, err
	}
	if err := checkArgs(fn, arg{"client", client}, arg{"services informer", services}); err != nil {
		return nil, err
	}
	if err := checkCommon(fn, opts.ClusterName, "Period", opts.Period, defaultOrphanPeriod); err != nil {
		return nil, err
	}
	register()
	return &OrphanCollector{lb: lb, client: client, opts: opts.withDefaults(), services: services.Lister(),
		synced: services.Informer().HasSynced, seen: map[string]time.Time{}}, nil
}

// Name returns OrphanCollectionName (k8s.io/controller-manager
// controller.Interface).
func (o *OrphanCollector) Name() string { return OrphanCollectionName }

// Run waits for the informer to sync, then makes a pass every Period, the
// first at a random moment of the first Period, until ctx is done; it
// returns nil then.
func (o *OrphanCollector) Run(ctx context.Context) error {
	logger := klog.FromContext(ctx).WithName(OrphanCollectionName)
	ctx = klog.NewContext(ctx, logger)
	if !cache.WaitForCacheSync(ctx.Done(), o.synced) {
		return nil
	}
	logger.Info("Starting orphan collection", "period", o.opts.Period, "gracePeriod", o.opts.GracePeriod, "dryRun", o.opts.DryRun, "cluster", o.opts.ClusterName)
	every(ctx, o.opts.Clock, o.opts.Period, func() {
		if err := o.pass(ctx); err != nil {
			logger.Error(err, "Orphan collection pass failed; retrying at the next pass")
		}
	})
	return nil
}

// pass lists, decides and deletes what is due (see OrphanCollector).
func (o *OrphanCollector) pass(ctx context.Context) error {
	owned, err := o.lb.ListOwned(ctx, o.opts.ClusterName)
	if err != nil {
		return err
	}
	svcs, err := o.services.List(labels.Everything())
	if err != nil {
		return err
	}
	claims := map[string]*v1.Service{}
	for _, s := range svcs {
		if id, ok := o.lb.StoredID(s); ok {
			claims[id] = s
		}
	}
	orphans, seen := findOrphans(orphansInput{owned: owned, services: svcs, claims: claims,
		seen: o.seen, now: o.opts.Clock.Now(), grace: o.opts.GracePeriod})
	counts := map[orphanState]int{}
	due := map[string]bool{}
	for _, or := range orphans {
		counts[or.state]++
		if _, known := o.seen[or.lb.ID]; !known {
			o.report(ctx, or, "found")
		}
		switch {
		case or.state != orphanDue:
		case o.opts.DryRun:
			if !o.due[or.lb.ID] {
				o.report(ctx, or, "due")
			}
			due[or.lb.ID] = true
		case o.collect(ctx, or):
			delete(seen, or.lb.ID)
		}
	}
	o.seen, o.due = seen, due
	for _, s := range []orphanState{orphanWaiting, orphanHeld, orphanDue} {
		orphansSeen.WithLabelValues(orphanStateNames[s]).Set(float64(counts[s]))
	}
	return nil
}

// report logs an orphan, and records an event on its gone Service.
func (o *OrphanCollector) report(ctx context.Context, or orphan, what string) {
	logger := klog.FromContext(ctx)
	kv := []any{"id", or.lb.ID, "name", or.lb.Name, "service", klog.KRef(or.owner.Namespace, or.owner.Name), "uid", or.owner.UID, "dryRun", o.opts.DryRun}
	var msg string
	switch {
	case what == "found" && o.opts.DryRun:
		msg = fmt.Sprintf("Load balancer %q (id %q) belongs to a Service UID that no longer exists; dry run: it will not be deleted", or.lb.Name, or.lb.ID)
	case what == "found":
		msg = fmt.Sprintf("Load balancer %q (id %q) belongs to a Service UID that no longer exists; it will be deleted after the grace period (%v)", or.lb.Name, or.lb.ID, o.opts.GracePeriod)
	default:
		msg = fmt.Sprintf("Load balancer %q (id %q) is past the grace period; dry run: not deleting it", or.lb.Name, or.lb.ID)
	}
	logger.Info(msg, kv...)
	o.event(or, v1.EventTypeWarning, "OrphanedLoadBalancer", msg)
}

// event records an event on the orphan's gone Service, when its
// namespace and name are known.
func (o *OrphanCollector) event(or orphan, eventType, reason, msg string) {
	if o.opts.Recorder == nil || or.owner.Namespace == "" || or.owner.Name == "" {
		return
	}
	o.opts.Recorder.Event(goneService(or.owner), eventType, reason, msg)
}

// goneService is the Service EnsureLoadBalancerDeleted is called with for
// an orphan: its namespace, name and UID, type LoadBalancer.
func goneService(owner loadbalancer.Owner) *v1.Service {
	return &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: owner.Namespace, Name: owner.Name, UID: owner.UID},
		Spec:       v1.ServiceSpec{Type: v1.ServiceTypeLoadBalancer},
	}
}

// collect deletes a due orphan once the API server confirms that its
// Service UID is gone. It reports whether the orphan is dealt with:
// deleted, or found to have a Service after all.
func (o *OrphanCollector) collect(ctx context.Context, or orphan) bool {
	logger := klog.FromContext(ctx)
	exists, err := o.uidExists(ctx, or.owner)
	if err != nil {
		logger.Error(err, "Checking an orphaned load balancer's Service; retrying at the next pass", "id", or.lb.ID, "uid", or.owner.UID)
		return false
	}
	if exists {
		logger.V(2).Info("Load balancer's Service exists after all; not an orphan", "id", or.lb.ID, "uid", or.owner.UID)
		return true
	}
	// Background: no Service waits on it (governor.AtPriority).
	if err := o.lb.EnsureLoadBalancerDeleted(governor.AtPriority(ctx, governor.Background), o.opts.ClusterName, goneService(or.owner)); err != nil {
		logger.Error(err, "Deleting an orphaned load balancer; retrying at the next pass", "id", or.lb.ID, "uid", or.owner.UID)
		return false
	}
	orphansDeleted.Inc()
	msg := fmt.Sprintf("Deleted load balancer %q (id %q): its Service UID no longer exists", or.lb.Name, or.lb.ID)
	logger.Info(msg, "id", or.lb.ID, "service", klog.KRef(or.owner.Namespace, or.owner.Name), "uid", or.owner.UID, "orphanedFor", o.opts.Clock.Since(or.since))
	o.event(or, v1.EventTypeNormal, "DeletedOrphanedLoadBalancer", msg)
	return true
}

// uidExists asks the API server whether a Service with owner's UID
// exists: by namespace and name when the load balancer recorded them (one
// List with a field selector: the CCM's RBAC grants list, not get), else
// among all Services.
func (o *OrphanCollector) uidExists(ctx context.Context, owner loadbalancer.Owner) (bool, error) {
	opts := metav1.ListOptions{}
	ns := ""
	if owner.Name != "" {
		ns = owner.Namespace
		opts.FieldSelector = fields.OneTermEqualSelector("metadata.name", owner.Name).String()
	}
	list, err := o.client.CoreV1().Services(ns).List(ctx, opts)
	if err != nil {
		return false, err
	}
	for _, s := range list.Items {
		if s.UID == owner.UID {
			return true, nil
		}
	}
	return false, nil
}
