package loadbalancer

import (
	"context"
	"errors"
	"fmt"

	v1 "k8s.io/api/core/v1"
)

// ErrStale is the error of RepairLoadBalancer when the Service or Nodes it
// was called with are no longer the current ones: nothing was changed.
// Errors are wrapped: test with errors.Is.
var ErrStale = errors.New("the Service or Nodes are no longer current")

// currentKey is the context key of RepairLoadBalancer's check.
type currentKey struct{}

// stillCurrent reports whether the check RepairLoadBalancer put in ctx, if
// any, holds. It is called with the Service's lock held.
func stillCurrent(ctx context.Context) bool {
	current, ok := ctx.Value(currentKey{}).(func() bool)
	return !ok || current()
}

// RepairLoadBalancer is EnsureLoadBalancer for a controller that works
// from its own view of the Service and Nodes (drift repair), which may be
// older than the service controller's: once the call holds the Service's
// turn (every LoadBalancer method for one Service takes it), and before it
// looks up or changes anything in the cloud, it calls current, and when
// current reports false it returns an error wrapping ErrStale having
// changed nothing. So a call made with a Service the service controller
// has since updated, or is deleting, or with Nodes it has since synced,
// never undoes the service controller's newer work. current must be
// cheap and must not call the Reconciler (it runs under the lock).
//
// Unlike EnsureLoadBalancer, a throttled call returns the Driver's
// RetryError as it is: the back-off EnsureLoadBalancer gives the service
// controller for the Service is neither lengthened nor reset by it.
// Everything else is EnsureLoadBalancer's: the same lookups, plan and
// status, zero writes when the cloud matches.
func (r *Reconciler) RepairLoadBalancer(ctx context.Context, clusterName string, svc *v1.Service, nodes []*v1.Node, current func() bool) (*v1.LoadBalancerStatus, error) {
	if current == nil {
		return nil, errors.New("RepairLoadBalancer: current is nil: expected a function reporting whether the Service and Nodes are still current")
	}
	return r.ensure(context.WithValue(ctx, currentKey{}, current), clusterName, svc, nodes)
}

// StoredID returns the load-balancer ID svc's Options.IDAnnotation holds,
// and false when the Reconciler has no IDAnnotation or svc has no
// well-formed value: the load balancer svc claims, which an orphan
// collector must not delete even when another Service's tags are on it.
func (r *Reconciler) StoredID(svc *v1.Service) (string, bool) {
	a := r.opts.IDAnnotation
	if a == nil || svc == nil {
		return "", false
	}
	id, set, err := a.Text(svc.Annotations)
	return id, set && err == nil
}

// The methods here serve controllers beyond the upstream ones: drift
// repair, which re-ensures every Service on a period and must see the
// cloud as it is, not as a cache last listed it; and orphan collection,
// which lists what this cluster owns to find load balancers whose Service
// is gone. See package housekeeping.

// Invalidate makes the next look-ups ask the cloud: when the Driver the
// Reconciler was built over has an Invalidate method (a Cache, or a
// wrapper that forwards to one), it calls it; otherwise every look-up
// asks the cloud already and Invalidate does nothing. A controller that
// checks the cloud against the Services on a period (drift repair) calls
// it once per period, so that a change made in the cloud behind the CCM's
// back is seen within the period at the cost of one List, not one Find per
// Service. Safe for concurrent use.
func (r *Reconciler) Invalidate() {
	if c, ok := r.driver.(interface{ Invalidate() }); ok {
		c.Invalidate()
	}
}

// ListOwned returns every load balancer tagged for this cluster (the
// Options.ClusterID, or clusterName when that is empty): those whose
// TagCluster is the cluster identity, in ID order. It is one Driver.Find
// by the cluster tag, which a Cache answers from its list (one List per
// TTL for every caller); a load balancer the list does not hold yet is
// not reported, which is what an orphan collector wants: it is seen at a
// later pass. A load balancer without TagServiceUID is returned too (the
// caller decides what to do with it; OwnerFromTags reports its owner
// with an empty UID). Errors wrap the Driver's; an empty cluster identity
// is an error.
func (r *Reconciler) ListOwned(ctx context.Context, clusterName string) ([]*LoadBalancer, error) {
	cluster := r.cluster(clusterName)
	if cluster == "" {
		return nil, errEmptyCluster
	}
	lbs, err := r.findDriver(withMissTrusted(ctx), Query{Tags: map[string]string{TagCluster: cluster}})
	if err != nil {
		return nil, fmt.Errorf("ListOwned: find load balancers of cluster %q: %w", cluster, err)
	}
	owned := lbs[:0:0]
	for _, lb := range lbs {
		if lb.Tags[TagCluster] == cluster { // a Driver may return more than asked
			owned = append(owned, lb)
		}
	}
	return sortedByID(owned), nil
}
