package loadbalancer

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	v1 "k8s.io/api/core/v1"
	cloudprovider "k8s.io/cloud-provider"
	"k8s.io/klog/v2"

	"github.com/ccmkit/ccmkit/internal/throttle"
)

// desiredInput is the input of Desired the Reconciler uses for clusterName.
func (r *Reconciler) desiredInput(clusterName string) DesiredInput {
	return DesiredInput{
		Cluster:               r.cluster(clusterName),
		Namer:                 r.namer,
		Capabilities:          r.opts.Capabilities,
		Annotations:           r.opts.Annotations,
		RequestedIPAnnotation: r.opts.RequestedIPAnnotation,
		AppProtocolAnnotation: r.opts.AppProtocolAnnotation,
		HealthCheckAnnotation: r.opts.HealthCheckAnnotation,
	}
}

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
	res, err := r.begin(ctx, op, clusterName, svc, findCreate)
	if err != nil {
		return nil, err
	}
	defer func() { res.unlock() }()
	if err := r.checkLookup(ctx, svc, res); err != nil {
		return nil, r.fail(ctx, op, svc, err)
	}
	deferred, err := r.usePool(ctx, svc, res.owner.Cluster, &desired.Spec, desired.Spec.IPFamilies, eligible, r.opts.CoalesceWindow > 0)
	if err != nil {
		return nil, r.fail(ctx, op, svc, err)
	}
	lb, err := r.converge(ctx, svc, func(*LoadBalancer) *LoadBalancer { return desired }, res.target(), eligible)
	if err != nil && res.target() == nil && errors.Is(err, ErrNameTaken) {
		res, lb, err = r.ensureNameTaken(ctx, svc, res, desired, eligible, err)
	}
	if err != nil {
		return nil, r.fail(ctx, op, svc, err)
	}
	if deferred {
		// The shared pool's members are node sync's: this Service's nodes
		// join the window's next write of it (see Options.CoalesceWindow).
		if err := r.deferUpdate(ctx, clusterName, svc, nodes); err != nil {
			return nil, r.fail(ctx, op, svc, err)
		}
	}
	r.releasedPool(ctx, svc, res.owner.Cluster, res.target(), lb)
	return r.status(lb, res.owner)
}

// checkLookup returns what stops EnsureLoadBalancer in res (a conflict, a
// missing stored ID), and logs a Service that owns several load balancers.
func (r *Reconciler) checkLookup(ctx context.Context, svc *v1.Service, res *lookup) error {
	if res.err != nil {
		return res.err
	}
	if len(res.owned) > 1 {
		klog.FromContext(ctx).Info("Service owns several load balancers; managing the first, the others are deleted with the Service",
			"service", klog.KObj(svc), "ids", ids(res.owned))
	}
	return nil
}

// ensureNameTaken is EnsureLoadBalancer after its create was refused
// because the name is taken (Capabilities.UniqueNames; taken is the
// refusal): a load balancer created since the Cache's list, by a second
// creator or a create whose answer was lost. With the Service's lock still
// held, the lookup runs again asking the cloud at every step (findConfirm)
// and the one it finds is converged; a name taken by another owner is the
// conflict it reports. It returns the new lookup, whose unlock is res's.
func (r *Reconciler) ensureNameTaken(ctx context.Context, svc *v1.Service, res *lookup, desired *LoadBalancer, eligible []*v1.Node, taken error) (*lookup, *LoadBalancer, error) {
	klog.FromContext(ctx).V(2).Info("Load balancer name taken since the list; looking it up again", "service", klog.KObj(svc), "err", taken)
	again, err := r.find(ctx, res.owner, svc, findConfirm)
	if err != nil {
		return res, nil, err
	}
	again.unlock = res.unlock
	if err := r.checkLookup(ctx, svc, again); err != nil {
		return again, nil, err
	}
	if again.target() == nil {
		// The cloud said the name is taken and then that nothing has
		// it: gone in between, or a Driver whose Find and create
		// disagree. Return the refusal: the next call creates it.
		return again, nil, taken
	}
	lb, err := r.converge(ctx, svc, func(*LoadBalancer) *LoadBalancer { return desired }, again.target(), eligible)
	return again, lb, err
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
		desired.Spec.setBackends(r.key().backends(eligible, desired.Spec.IPFamilies))
	}
	return desired, eligible, nil
}

// convergeSpare is what converge allows beyond twice the actions of the
// first plan (see converge).
const convergeSpare = 2

// converge plans and applies the actions that bring lb (nil: none yet) to
// desiredOf(lb), and returns the load balancer as the last write left it
// (the Driver's answer, or derived: see apply). It applies a plan's
// actions in order, each on the result of the one before, and plans again
// from the latest result only after a creation and after a busy answer
// that came with a load balancer: either may be partial (Driver.Apply).
// Before each write it waits out the cloud's busy answer to the write
// before (awaitBusy); a write the cloud refused because it was busy is
// made again after the wait. A converged plan ends it: what is still busy
// after the last write is not waited for.
//
// It makes at most 2·len(P)+convergeSpare writes that the cloud took, P
// being the first plan of an existing load balancer (for a new one, the
// plan after its creation, the creation not counted): each action once,
// once more after a partial result, and two to spare. A Driver whose
// results never show its writes gets an error naming the bound, rather
// than a loop; a refused write is not counted, each one waits for the
// cloud within Options.MaxBusyWait.
func (r *Reconciler) converge(ctx context.Context, svc *v1.Service, desiredOf func(*LoadBalancer) *LoadBalancer, lb *LoadBalancer, eligible []*v1.Node) (*LoadBalancer, error) {
	var w writes
	for {
		actions, err := Plan(desiredOf(lb), lb)
		if err == nil {
			actions, err = r.checkTargets(ctx, svc, actions, eligible)
		}
		if err != nil {
			return nil, err
		}
		if len(actions) == 0 {
			return lb, nil
		}
		if !w.bounded {
			w.limit = w.took + 2*len(actions) + convergeSpare
			w.bounded = actions[0].Kind != ActionCreate
		}
		var again bool
		if lb, again, err = r.applyPlan(ctx, svc, lb, actions, &w); err != nil || !again {
			return lb, err
		}
	}
}

// writes is what one converge has written: the writes the cloud took, their
// bound, and the busy answer of the last write, to wait out before the
// next one.
type writes struct {
	took, limit int
	bounded     bool          // limit is set from a plan of an existing load balancer
	busy        error         // the last write's busy answer (busyOf), or nil
	delay       time.Duration // how long the cloud is busy after it
}

// applyPlan applies actions in order from lb (see converge) and returns
// the last result, and whether to plan again from it.
func (r *Reconciler) applyPlan(ctx context.Context, svc *v1.Service, lb *LoadBalancer, actions []Action, w *writes) (*LoadBalancer, bool, error) {
	for i := 0; i < len(actions); {
		if w.busy != nil {
			if err := r.awaitBusy(ctx, w.busy, w.delay); err != nil {
				return nil, false, err
			}
			w.busy = nil
		}
		if w.took >= w.limit {
			return nil, false, fmt.Errorf("load balancer %q (id %q) not converged after %d writes, the most one call makes (twice the %d actions of its first plan, and %d): expected Driver results that show each write (see Driver.Apply)",
				lb.Name, lb.ID, w.took, (w.limit-convergeSpare)/2, convergeSpare)
		}
		s, err := r.apply(ctx, svc, lb, actions[i])
		if err != nil {
			return nil, false, err
		}
		w.busy, w.delay = s.busy, s.delay
		if s.refused {
			continue // nothing changed: the same action, once the cloud is free
		}
		w.took++
		lb = s.lb
		if s.replan {
			return lb, true, nil
		}
		i++
	}
	return lb, false, nil
}

// step is the outcome of one Driver.Apply (apply).
type step struct {
	lb      *LoadBalancer // the load balancer after the action: the Driver's, or derived; nil when refused
	refused bool          // the cloud refused the action because it was busy: nothing changed
	replan  bool          // plan again from lb: a creation, or a busy answer with the Driver's load balancer
	busy    error         // the Driver's busy answer, wrapped with the action, or nil
	delay   time.Duration // how long the cloud is busy (busyOf)
}

// apply performs a through the Driver on prev, the load balancer a was
// planned on (nil for a creation), and reads the answer as Driver
// documents: applied (nil, or a busy answer without ErrRefused), refused
// because busy (a busy answer with ErrRefused), or failed (any other
// error, which it returns wrapped with the action and the load balancer).
// An applied action the Driver answered without a load balancer is
// derived: prev with a applied (Apply), except a creation, whose new ID
// only the Driver knows.
func (r *Reconciler) apply(ctx context.Context, svc *v1.Service, prev *LoadBalancer, a Action) (step, error) {
	klog.FromContext(ctx).V(2).Info("Applying load balancer action", "service", klog.KObj(svc), "action", a.Kind, "id", a.LoadBalancerID, "reason", a.Reason)
	if a.Kind != ActionCreate {
		a.Current = prev // see Action.Current
	}
	lb, err := callFor(ctx, r, func() (*LoadBalancer, error) {
		return r.calls.Apply(ctx, a)
	})
	b, delay := busyOf(err)
	s := step{lb: lb, delay: delay, refused: b != nil && throttle.Refused(err)}
	switch {
	case s.refused:
		s.lb = nil
	case err == nil || b != nil:
		s.replan = a.Kind == ActionCreate || (b != nil && lb != nil)
		if lb == nil {
			var derr error
			if s.lb, derr = derived(prev, a); derr != nil {
				err, b = derr, nil // applied, but the answer is unusable: a failure
			}
		}
	}
	if r.opts.Hooks.Action != nil {
		r.opts.Hooks.Action(ctx, svc, a, err)
	}
	if err != nil {
		err = fmt.Errorf("%s on load balancer %q: %w", a.Kind, a.LoadBalancerID, err)
	}
	if b == nil {
		return s, err
	}
	s.busy = err
	return s, nil
}

// derived is the result of an Apply that the Driver answered without a
// load balancer: prev, the load balancer a was planned on, with a applied
// by the package's reference implementation (Apply). A creation must be
// answered with the load balancer created: only the Driver knows its ID.
func derived(prev *LoadBalancer, a Action) (*LoadBalancer, error) {
	if a.Kind == ActionCreate {
		return nil, errors.New("driver returned no load balancer: expected the one created, with its new ID")
	}
	lb, err := Apply(prev, a)
	if err != nil {
		return nil, fmt.Errorf("driver returned no load balancer, and the action does not apply to the one it was planned on (%w): expected the load balancer as it is now", err)
	}
	return lb, nil
}

// status is EnsureLoadBalancer's status of lb: a notReady RetryError after
// Options.RetryAfter while it has no address, else its validated ingress.
func (r *Reconciler) status(lb *LoadBalancer, owner Owner) (*v1.LoadBalancerStatus, error) {
	if len(lb.Ingress) == 0 {
		return nil, notReady(fmt.Sprintf("load balancer %q (id %q) of service %s has no address yet", lb.Name, lb.ID, owner.namespacedName()), r.opts.RetryAfter)
	}
	st, err := buildStatus(lb.Ingress)
	if err != nil {
		return nil, fmt.Errorf("load balancer %q (id %q): driver reported an invalid address: %w", lb.Name, lb.ID, err)
	}
	return st, nil
}

// withBackends returns UpdateLoadBalancer's desired load balancer for a
// load balancer lb: lb with the backends of want (its BackendKey, Backends
// and BackendPool; under ListenerPools, the members of every pool lb
// has), and nothing else changed. A listener without a pool keeps none:
// UpdateLoadBalancer creates nothing, the next EnsureLoadBalancer does.
func withBackends(want Spec) func(lb *LoadBalancer) *LoadBalancer {
	return func(lb *LoadBalancer) *LoadBalancer {
		d := *lb
		d.Spec.BackendKey, d.Spec.BackendPool, d.Spec.ListenerPools = want.BackendKey, want.BackendPool, want.ListenerPools
		d.Spec.setBackends(want.Backends)
		return &d
	}
}
