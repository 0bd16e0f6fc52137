package loadbalancer

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"sync"

	v1 "k8s.io/api/core/v1"
)

type serviceLock struct {
	mu   sync.Mutex
	refs int
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
