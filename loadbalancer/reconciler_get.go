package loadbalancer

import (
	"context"
	"fmt"

	v1 "k8s.io/api/core/v1"
)

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
	res, err := r.begin(ctx, "GetLoadBalancer", clusterName, svc, findDefault)
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
