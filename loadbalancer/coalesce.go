package loadbalancer

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"github.com/ccmkit/ccmkit/internal/clip"
	"github.com/ccmkit/ccmkit/internal/cloudmetrics"
	"github.com/ccmkit/ccmkit/internal/throttle"
)

// RecommendedCoalesceWindow is the Options.CoalesceWindow the fake cloud
// and the example cloud-controller-manager use, chosen by measurement on
// the real control plane (BENCHMARKS.md, "Coalesced node sync"): it turns
// the backend writes of 50 Nodes joining 50 load balancers from one per
// load balancer per node-sync round into a few per load balancer, while a
// single Node change reaches the cloud within it.
const RecommendedCoalesceWindow = 2 * time.Second

// maxCoalesceRetry bounds the delay between the attempts of a coalesced
// write that keeps failing.
const maxCoalesceRetry = 5 * time.Minute

// coalesceWorkers bounds the coalesced writes made at once: the service
// controller makes its node-sync calls one Service at a time by default
// (--concurrent-service-syncs 1, k8s.io/cloud-provider@v0.37.2
// controllers/service/config/v1alpha1/defaults.go), so windows that end
// together must not turn into a burst on the cloud's rate limit.
const coalesceWorkers = 4

// eventReasonUpdateFailed is the reason of the Warning event a coalesced
// write that failed records on its Service: the reason the service
// controller gives a failed UpdateLoadBalancer
// (controllers/service/controller.go lockedUpdateLoadBalancerHosts), so
// that what watches for one sees the other.
const eventReasonUpdateFailed = "UpdateLoadBalancerFailed"

// pendingWrite is the backend change of one Service that UpdateLoadBalancer
// accepted and the Reconciler has not written yet: the latest call's
// arguments, which replace the earlier ones'. For a Service served from a
// shared pool it is the pool's change (pool), which the calls of every
// Service of that pool replace: the pool's members follow the latest
// Nodes, and its load balancers' reference to it does not change with them.
type pendingWrite struct {
	pool    bool
	cluster string
	svc     *v1.Service
	nodes   []*v1.Node
	seq     uint64        // sequence number of the latest call folded in
	calls   int           // calls folded in
	stop    chan struct{} // closed when the entry leaves the map
}

// failedWrite is the last failure of a Service's coalesced write, kept
// until one succeeds, the Service's load balancer is ensured or deleted.
type failedWrite struct {
	n   int
	err error
}

// coalescer holds the pending writes of a Reconciler whose
// Options.CoalesceWindow is positive.
type coalescer struct {
	pending map[string]*pendingWrite // by Service namespace/name
	failed  map[string]failedWrite
	seq     uint64
	life    context.Context // the Reconciler's, from Initialize
	// initialized: Initialize has set life.
	initialized bool
	workers     chan struct{}
}

// deferUpdate is UpdateLoadBalancer with a coalescing window: it checks
// the arguments, keeps svc and nodes as the Service's pending change
// (replacing an earlier one) and, for a Service with none pending, starts
// the window at whose end the change is written. It returns the last
// failure of the Service's coalesced write, if one is still unresolved, so
// that the service controller retries the Service and records its event.
func (r *Reconciler) deferUpdate(ctx context.Context, clusterName string, svc *v1.Service, nodes []*v1.Node) error {
	if _, err := r.owner(clusterName, svc); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("UpdateLoadBalancer for service %s/%s: nothing deferred: %w", svc.Namespace, svc.Name, err)
	}
	key, pool := r.pendingKey(clusterName, svc)
	r.mu.Lock()
	c := &r.co
	c.seq++
	e := c.pending[key]
	if e == nil {
		e = &pendingWrite{pool: pool, stop: make(chan struct{})}
		c.pending[key] = e
		r.scheduleLocked(key, e, r.windowLeft())
	}
	e.cluster, e.svc, e.nodes, e.seq = clusterName, svc, append([]*v1.Node(nil), nodes...), c.seq
	e.calls++
	f, failing := c.failed[key]
	r.mu.Unlock()
	cloudmetrics.Coalesced(cloudmetrics.CoalesceDeferred)
	klog.FromContext(ctx).V(4).Info("Backend change deferred", "service", klog.KObj(svc), "nodes", len(nodes), "window", r.opts.CoalesceWindow)
	if failing {
		return fmt.Errorf("UpdateLoadBalancer for service %s: the last coalesced backend write failed (%d attempts; retried, with this change, within %v): %w", key, f.n, r.opts.CoalesceWindow, f.err)
	}
	return nil
}

// pendingKey is the key of svc's pending change: its shared pool's lock
// key when svc is served from one (its families known), else the
// Service's namespace/name.
func (r *Reconciler) pendingKey(clusterName string, svc *v1.Service) (string, bool) {
	if r.pooled(svc) {
		if families, err := serviceFamilies(svc); err == nil {
			return poolLock(desiredPool(r.cluster(clusterName), r.namer, r.key(), families, nil).Tags), true
		}
	}
	return svc.Namespace + "/" + svc.Name, false
}

// windowLeft is the time from now to the end of the current window:
// windows end at multiples of Options.CoalesceWindow on the Clock, so that
// the changes of one node-sync round, for every Service, are written
// together (a shared pool once), and no change waits longer than a
// window.
func (r *Reconciler) windowLeft() time.Duration {
	w := r.opts.CoalesceWindow
	return w - time.Duration(r.opts.Clock.Now().UnixNano()%int64(w))
}

// scheduleLocked starts the timer that writes e after d, unless e leaves
// the map first or the Reconciler's context ends. r.mu must be held.
func (r *Reconciler) scheduleLocked(key string, e *pendingWrite, d time.Duration) {
	t := r.opts.Clock.NewTimer(d)
	life, stop := r.co.life, e.stop // read under r.mu: retry replaces e
	go func() {
		defer t.Stop()
		select {
		case <-t.C():
			_ = r.flushOne(life, key, e)
		case <-stop:
		case <-life.Done():
		}
	}()
}

// takeLocked removes e from the pending writes, if it is still key's, and
// reports whether it was. r.mu must be held.
func (r *Reconciler) takeLocked(key string, e *pendingWrite) bool {
	if r.co.pending[key] != e {
		return false
	}
	delete(r.co.pending, key)
	close(e.stop)
	return true
}

// flushOne writes e, key's pending change, under the Service's lock, if it
// is still pending when the lock is taken (EnsureLoadBalancer and
// EnsureLoadBalancerDeleted supersede it). A failure is kept for the next
// UpdateLoadBalancer of the Service to return, recorded as a Warning event
// and metric, and retried after a back-off, with the latest change if a
// newer one arrived. It returns the write's error; "no load balancer" is
// no error (UpdateLoadBalancer creates nothing: the Service's next
// EnsureLoadBalancer writes its backends).
func (r *Reconciler) flushOne(ctx context.Context, key string, e *pendingWrite) error {
	select {
	case r.co.workers <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err() // e stays pending, its timer running
	}
	defer func() { <-r.co.workers }()
	if e.pool {
		return r.flushPool(ctx, key, e)
	}
	unlock := r.lockKey(key)
	r.mu.Lock()
	taken := r.takeLocked(key, e)
	life := r.co.life
	r.mu.Unlock()
	if !taken {
		unlock()
		return nil
	}
	ctx = klog.NewContext(ctx, klog.FromContext(ctx).WithValues("service", klog.KObj(e.svc)))
	owner, err := r.owner(e.cluster, e.svc) // checked when deferred: fails only if the Options did
	if err != nil {
		unlock()
		return r.flushed(ctx, life, key, e, err)
	}
	return r.flushed(ctx, life, key, e, r.updateLocked(ctx, owner, e.svc, e.nodes, unlock))
}

// flushPool writes e, the pending change of the shared pool whose lock key
// is key: the members of the latest Nodes given for any of its Services
// (e.svc, the latest), if the pool still exists (a pool no load balancer
// references any more has been deleted: it is not created again).
func (r *Reconciler) flushPool(ctx context.Context, key string, e *pendingWrite) error {
	r.mu.Lock()
	taken := r.takeLocked(key, e)
	life := r.co.life
	r.mu.Unlock()
	if !taken {
		return nil
	}
	ctx = klog.NewContext(ctx, klog.FromContext(ctx).WithValues("pool", key, "service", klog.KObj(e.svc)))
	return r.flushed(ctx, life, key, e, r.writePool(r.waitBusy(r.waitThrottles(ctx)), e))
}

// writePool converges the shared pool of e's Service to e's Nodes.
func (r *Reconciler) writePool(ctx context.Context, e *pendingWrite) error {
	families, err := serviceFamilies(e.svc)
	if err != nil {
		return err
	}
	nodes, err := r.eligible(ctx, e.svc, e.nodes)
	if err != nil {
		return err
	}
	desired := desiredPool(r.cluster(e.cluster), r.namer, r.key(), families, r.key().backends(nodes, families))
	_, _, err = r.ensurePool(ctx, e.svc, desired, nodes, poolExistingOnly)
	return err
}

// flushed ends a flush of e (key's) whose write returned err: a success,
// or no load balancer to update, clears key's failure; a failure while
// life lasts is retried (retry).
func (r *Reconciler) flushed(ctx, life context.Context, key string, e *pendingWrite, err error) error {
	switch {
	case err == nil, errors.Is(err, ErrNotFound):
		r.mu.Lock()
		delete(r.co.failed, key)
		r.mu.Unlock()
		r.takeUpdateMiss(e.svc) // no GetLoadBalancer follows a deferred call's miss
		cloudmetrics.Coalesced(cloudmetrics.CoalesceWritten)
		klog.FromContext(ctx).V(4).Info("Coalesced backend change written", "calls", e.calls, "nodes", len(e.nodes), "loadBalancer", err == nil)
		return nil
	case life.Err() != nil:
		return err // the Reconciler is stopping: the next leader ensures every Service
	}
	r.retry(ctx, key, e, err)
	return err
}

// retry keeps err as key's last failure and schedules the next attempt,
// with e's change unless a newer one is pending. The attempt is a copy of
// e: e itself stays as the failed flush and its old timer saw it, so that
// what they still read is never written (a later call's change is folded
// into the copy).
func (r *Reconciler) retry(ctx context.Context, key string, e *pendingWrite, err error) {
	cloudmetrics.Coalesced(cloudmetrics.CoalesceFailed)
	r.mu.Lock()
	f := r.co.failed[key]
	f.n++
	f.err = err
	r.co.failed[key] = f
	delay := coalesceRetry(r.opts.CoalesceWindow, f.n, err)
	if r.co.pending[key] == nil {
		next := *e
		next.stop = make(chan struct{})
		r.co.pending[key] = &next
		r.scheduleLocked(key, &next, delay)
	}
	r.mu.Unlock()
	klog.FromContext(ctx).Error(err, "Coalesced backend write failed; retrying", "attempts", f.n, "retryIn", delay)
	if rec := r.events(); rec != nil {
		rec.Event(e.svc, v1.EventTypeWarning, eventReasonUpdateFailed, clip.Value(fmt.Sprintf("Error updating load balancer with new hosts (%d nodes; attempt %d, retried within %v): %v", len(e.nodes), f.n, delay, err), maxEventMessage))
	}
}

// coalesceRetry is the delay before attempt n+1 of a coalesced write that
// failed n times, the last with err: the window doubled n-1 times, at
// least the delay a throttled cloud asked for, at most maxCoalesceRetry.
func coalesceRetry(window time.Duration, n int, err error) time.Duration {
	d := window
	for i := 1; i < n && d < maxCoalesceRetry; i++ {
		d *= 2
	}
	if after, ok := throttle.RetryAfter(err); ok {
		d = max(d, after)
	}
	return min(d, maxCoalesceRetry)
}

// supersede drops key's pending change when it arrived before seq (the
// sequence number when a call that wrote the whole load balancer began),
// and its failure: that call wrote backends as new as the change's.
func (r *Reconciler) supersede(key string, seq uint64) {
	if r.opts.CoalesceWindow <= 0 {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	e := r.co.pending[key]
	if e != nil && e.seq <= seq {
		r.takeLocked(key, e)
		cloudmetrics.Coalesced(cloudmetrics.CoalesceSuperseded)
		e = nil
	}
	if e == nil {
		delete(r.co.failed, key) // a newer change keeps the failure until written
	}
}

// seqNow is the sequence number of the latest UpdateLoadBalancer call.
func (r *Reconciler) seqNow() uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.co.seq
}

// Flush writes every backend change UpdateLoadBalancer has deferred (see
// Options.CoalesceWindow) now, instead of at the end of its window, and
// returns when they are written, or ctx ends. Errors name the Service (or
// the shared pool) and are joined; a failed write stays pending, retried
// as at a window's end.
// A cloud-controller-manager calls it before it stops leading, tests
// before they inspect the cloud. With no window it does nothing.
func (r *Reconciler) Flush(ctx context.Context) error {
	r.mu.Lock()
	keys := maps.Clone(r.co.pending)
	r.mu.Unlock()
	var errs []error
	for k, e := range keys {
		if err := ctx.Err(); err != nil {
			return errors.Join(append(errs, err)...)
		}
		if err := r.flushOne(ctx, k, e); err != nil {
			errs = append(errs, fmt.Errorf("flush %s: %w", k, err))
		}
	}
	return errors.Join(errs...)
}
