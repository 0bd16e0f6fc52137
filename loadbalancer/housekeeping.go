package loadbalancer

import (
	"context"
	"fmt"
)

// The methods here serve controllers beyond the upstream ones: drift
// repair, which re-ensures every Service on a period and must see the
// cloud as it is, not as a cache last listed it; and orphan collection,
// which lists what this cluster owns to find load balancers whose Service
// is gone. See packages controllers/drift and controllers/orphans.

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
