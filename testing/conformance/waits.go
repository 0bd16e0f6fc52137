package conformance

import (
	"context"
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	cloudprovider "k8s.io/cloud-provider"

	"github.com/ccmkit/ccmkit/internal/throttle"
)

// Bounds of the wait before a provider call that failed with an
// api.RetryError is made again (see retrying).
const (
	minRetryWait = 10 * time.Millisecond
	maxRetryWait = time.Second
)

// retrying makes the provider call f, made with ctx, again while it fails
// with an error for which errors.As finds an *api.RetryError, as the
// controllers do, and returns the first other result. The controllers
// retry every failed call: controllers/service/controller.go
// processNextServiceItem requeues a Service after RetryAfter when
// syncLoadBalancerIfNeeded returns a RetryError from EnsureLoadBalancer
// (wrapped with %w) and with exponential backoff on any other error
// (the RetryError of GetLoadBalancer and EnsureLoadBalancerDeleted is
// wrapped with %v there); nodeSyncService hands a Service whose
// UpdateLoadBalancer failed back to that queue;
// controllers/nodelifecycle/node_lifecycle_controller.go MonitorNodes asks
// again every monitor period; controllers/node/node_controller.go
// processNextWorkItem requeues the Node (AddRateLimited); and
// controllers/route/route_controller.go reconcile runs again every period.
// So a RetryError is "not yet", never a wrong answer, from any call.
//
// Each wait is RetryAfter clamped to [minRetryWait, maxRetryWait]: the
// suite may call sooner than asked (a controller also calls at once on the
// next change of the object), never much later. retrying gives up after
// Config.Timeout from the first call, and at once when ctx or the rule is
// done (a controller stops requeueing when it stops), returning the last
// error, wrapped with %w and a note of the retries when there were any.
func retrying[T any](r *rt, ctx context.Context, f func() (T, error)) (T, error) {
	start := time.Now()
	for calls := 1; ; calls++ {
		v, err := f()
		delay, throttled := throttle.RetryAfter(err)
		if !throttled || ctx.Err() != nil {
			return v, err
		}
		left := r.cfg.Timeout - time.Since(start)
		if left <= 0 {
			return v, fmt.Errorf("%w (still an api.RetryError after %d calls in %v (Config.Timeout), each made again after its RetryAfter as the controllers requeue it)", err, calls, r.cfg.Timeout)
		}
		t := time.NewTimer(min(max(delay, minRetryWait), maxRetryWait, left))
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return v, err
		case <-r.ctx.Done():
			t.Stop()
			return v, err
		}
	}
}

// retryErr is retrying for a call that returns only an error.
func retryErr(r *rt, ctx context.Context, f func() error) error {
	_, err := retrying(r, ctx, func() (struct{}, error) { return struct{}{}, f() })
	return err
}

// retryLB is the provider's LoadBalancer as the service controller sees it
// over time: each call is made again while it returns an api.RetryError
// (see retrying). The embedded LoadBalancer is the provider's own, for the
// rules that need a single answer (an outage).
type retryLB struct {
	r *rt
	cloudprovider.LoadBalancer
}

func (l retryLB) GetLoadBalancer(ctx context.Context, cluster string, svc *v1.Service) (*v1.LoadBalancerStatus, bool, error) {
	type got struct {
		st *v1.LoadBalancerStatus
		ok bool
	}
	g, err := retrying(l.r, ctx, func() (got, error) {
		st, ok, err := l.LoadBalancer.GetLoadBalancer(ctx, cluster, svc)
		return got{st, ok}, err
	})
	return g.st, g.ok, err
}

// EnsureLoadBalancer, once the provider's call succeeds, flushes what a
// write-behind provider deferred (see Flusher).
func (l retryLB) EnsureLoadBalancer(ctx context.Context, cluster string, svc *v1.Service, nodes []*v1.Node) (*v1.LoadBalancerStatus, error) {
	st, err := retrying(l.r, ctx, func() (*v1.LoadBalancerStatus, error) {
		return l.LoadBalancer.EnsureLoadBalancer(ctx, cluster, svc, nodes)
	})
	if err == nil {
		err = l.flush(ctx, "EnsureLoadBalancer")
	}
	return st, err
}

// flush calls the provider's Flush, if it has one (see Flusher).
func (l retryLB) flush(ctx context.Context, after string) error {
	f, ok := flusherOf(l.LoadBalancer)
	if !ok {
		return nil
	}
	if err := f.Flush(ctx); err != nil {
		return fmt.Errorf("Flush after %s: %w", after, err) //nolint:staticcheck // ST1005: starts with the name of the provider's method, Flush
	}
	return nil
}

// UpdateLoadBalancer, once the provider's call succeeds, flushes what a
// write-behind provider deferred (see Flusher), so that the rule inspects
// the cloud as the provider will leave it.
func (l retryLB) UpdateLoadBalancer(ctx context.Context, cluster string, svc *v1.Service, nodes []*v1.Node) error {
	err := retryErr(l.r, ctx, func() error { return l.LoadBalancer.UpdateLoadBalancer(ctx, cluster, svc, nodes) })
	if err == nil {
		err = l.flush(ctx, "UpdateLoadBalancer")
	}
	return err
}

// Flusher is implemented by a LoadBalancer whose UpdateLoadBalancer writes
// behind: it returns before the cloud is written and writes later (a
// loadbalancer.Reconciler with Options.CoalesceWindow). Upstream allows it:
// the service controller only retries an UpdateLoadBalancer that returned
// an error (controllers/service/controller.go, nodeSyncService); and one
// whose EnsureLoadBalancer leaves a shared pool's member change to the
// same window. Flush writes what was deferred and returns the writes'
// errors. The rules that call UpdateLoadBalancer or EnsureLoadBalancer
// themselves call Flush after each call that succeeded and check the
// cloud then; the controller rules (CTRL-*) call
// nothing: their waits (Config.Timeout) cover the provider's own window.
// A write-behind provider without Flush fails the rules that inspect the
// cloud right after UpdateLoadBalancer.
type Flusher interface {
	Flush(ctx context.Context) error
}

// flusherOf returns lb's Flusher, looking through the suite's guard.
func flusherOf(lb cloudprovider.LoadBalancer) (Flusher, bool) {
	if g, ok := lb.(guardLB); ok {
		lb = g.lb
	}
	f, ok := lb.(Flusher)
	return f, ok
}

func (l retryLB) EnsureLoadBalancerDeleted(ctx context.Context, cluster string, svc *v1.Service) error {
	return retryErr(l.r, ctx, func() error { return l.LoadBalancer.EnsureLoadBalancerDeleted(ctx, cluster, svc) })
}

// retryInst is the provider's InstancesV2 as the node and node lifecycle
// controllers see it over time (see retrying).
type retryInst struct {
	r *rt
	cloudprovider.InstancesV2
}

func (i retryInst) InstanceExists(ctx context.Context, n *v1.Node) (bool, error) {
	return retrying(i.r, ctx, func() (bool, error) { return i.InstancesV2.InstanceExists(ctx, n) })
}

func (i retryInst) InstanceShutdown(ctx context.Context, n *v1.Node) (bool, error) {
	return retrying(i.r, ctx, func() (bool, error) { return i.InstancesV2.InstanceShutdown(ctx, n) })
}

func (i retryInst) InstanceMetadata(ctx context.Context, n *v1.Node) (*cloudprovider.InstanceMetadata, error) {
	return retrying(i.r, ctx, func() (*cloudprovider.InstanceMetadata, error) { return i.InstancesV2.InstanceMetadata(ctx, n) })
}

// retryRoutes is the provider's Routes as the route controller sees it over
// time (see retrying).
type retryRoutes struct {
	r *rt
	cloudprovider.Routes
}

func (rs retryRoutes) ListRoutes(ctx context.Context, cluster string) ([]*cloudprovider.Route, error) {
	return retrying(rs.r, ctx, func() ([]*cloudprovider.Route, error) { return rs.Routes.ListRoutes(ctx, cluster) })
}

func (rs retryRoutes) CreateRoute(ctx context.Context, cluster, hint string, route *cloudprovider.Route) error {
	return retryErr(rs.r, ctx, func() error { return rs.Routes.CreateRoute(ctx, cluster, hint, route) })
}

func (rs retryRoutes) DeleteRoute(ctx context.Context, cluster string, route *cloudprovider.Route) error {
	return retryErr(rs.r, ctx, func() error { return rs.Routes.DeleteRoute(ctx, cluster, route) })
}

// retryZones is the provider's Zones as the node controller sees it over
// time (see retrying).
type retryZones struct {
	r *rt
	cloudprovider.Zones
}

func (z retryZones) GetZone(ctx context.Context) (cloudprovider.Zone, error) {
	return retrying(z.r, ctx, func() (cloudprovider.Zone, error) { return z.Zones.GetZone(ctx) })
}

func (z retryZones) GetZoneByProviderID(ctx context.Context, id string) (cloudprovider.Zone, error) {
	return retrying(z.r, ctx, func() (cloudprovider.Zone, error) { return z.Zones.GetZoneByProviderID(ctx, id) })
}

func (z retryZones) GetZoneByNodeName(ctx context.Context, name types.NodeName) (cloudprovider.Zone, error) {
	return retrying(z.r, ctx, func() (cloudprovider.Zone, error) { return z.Zones.GetZoneByNodeName(ctx, name) })
}

// eventually polls cond until it reports true or Config.Timeout passes, and
// then fails the rule with cond's last description. Provider calls in cond
// are made once per poll (the embedded capability of retryLB, retryInst,
// retryRoutes): polling is the retry, and an api.RetryError is "not yet".
func (r *rt) eventually(what string, cond func() (bool, string)) {
	r.await(r.cfg.Timeout, "Config.Timeout", what, cond)
}

// eventuallyChanged is eventually for a change the suite made behind the
// provider's back (see changeCloud): the provider may answer from state up
// to Config.MaxStaleness old, so the wait is that much longer.
func (r *rt) eventuallyChanged(what string, cond func() (bool, string)) {
	st := r.maxStaleness()
	r.await(r.cfg.Timeout+st, fmt.Sprintf("Config.Timeout %v + MaxStaleness %v", r.cfg.Timeout, st), what, cond)
}

// await polls cond until it reports true or budget (described as
// budgetName) passes, and then fails the rule with cond's last description.
func (r *rt) await(budget time.Duration, budgetName, what string, cond func() (bool, string)) {
	if why := r.awaited(budget, budgetName, what, cond); why != "" {
		r.Fatalf("%s", why)
	}
}

// awaited polls cond as await does and returns "" when it held, else why
// the wait ended, with cond's last description.
func (r *rt) awaited(budget time.Duration, budgetName, what string, cond func() (bool, string)) string {
	if ok, last := r.poll(budget, cond); !ok {
		return fmt.Sprintf("%s waiting for %s; last observed: %s", r.pollEnd(budget, budgetName), what, last)
	}
	return ""
}

// poll polls cond, at growing intervals of up to 100ms, until it reports
// true, budget passes or the rule is done. It returns whether cond held,
// and its last description.
func (r *rt) poll(budget time.Duration, cond func() (bool, string)) (bool, string) {
	deadline := time.Now().Add(budget)
	delay := 5 * time.Millisecond
	for {
		before := r.directUnimplemented()
		ok, last := cond()
		if ok || time.Now().After(deadline) {
			return ok, last
		}
		if r.directUnimplemented() > before {
			// cond's own call answered NotImplemented from a method
			// another rule owns: it will not change its mind.
			return false, last
		}
		select {
		case <-r.ctx.Done():
			return false, last
		case <-time.After(delay):
		}
		delay = min(2*delay, 100*time.Millisecond)
	}
}

// pollEnd says why a poll of budget (described as budgetName) ended
// without its condition.
func (r *rt) pollEnd(budget time.Duration, budgetName string) string {
	if err := r.ctx.Err(); err != nil {
		return err.Error()
	}
	return fmt.Sprintf("timed out after %v (%s)", budget, budgetName)
}

// changeCloud runs hook, the Hooks field called name, on node, and then
// tells the provider its cloud changed (cloudChanged). A failing hook fails
// the rule.
func (r *rt) changeCloud(name string, hook func(context.Context, *v1.Node) error, node *v1.Node) {
	if err := hook(r.ctx, node); err != nil {
		r.Fatalf("Hooks.%s(%s): %v", name, node.Name, err)
	}
	r.cloudChanged(name)
}

// cloudChanged calls Hooks.CloudChanged, if set, after the hook called
// after changed the cloud behind the provider's back. An error fails the
// rule.
func (r *rt) cloudChanged(after string) {
	if h := r.target().Hooks.CloudChanged; h != nil {
		if err := h(r.ctx); err != nil {
			r.Fatalf("Hooks.CloudChanged after Hooks.%s: %v", after, err)
		}
	}
}
