package conformance

// The rules of load-balancer changes that take a cloud several writes: a
// change converging on a busy cloud (LB-MULTI-STEP), what a listener
// serves and holds per port (LB-PER-PORT), and a load balancer repaired
// after part of it was removed behind the provider's back
// (LB-PARTIAL-REPAIR).

import (
	"fmt"
	"slices"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	cloudprovider "k8s.io/cloud-provider"
	"k8s.io/utils/ptr"

	"github.com/ccmkit/ccmkit/internal/throttle"
)

// maxBusyDelay is the longest api.RetryError delay LB-MULTI-STEP accepts:
// twice the cloud's busy period, and at least two seconds. A busy cloud is
// free again after Config.BusyAfterWrite, so that is when a provider asks
// to be called back; a delay that doubles from call to call is a
// throttle's back-off.
func (c *Config) maxBusyDelay() time.Duration { return 2 * max(c.BusyAfterWrite, time.Second) }

// maxBusyCall is the longest EnsureLoadBalancer call LB-MULTI-STEP
// accepts: maxBusyDelay and a second for the cloud calls themselves. A
// provider may ride out a busy answer or two inside the call
// (loadbalancer.Reconciler does, within Options.MaxBusyWait), not the
// busy periods of a whole change.
func (c *Config) maxBusyCall() time.Duration { return c.maxBusyDelay() + time.Second }

// changeBudget is how long a change of writes cloud writes may take to
// converge: for each write, the cloud's busy period and a second.
func (c *Config) changeBudget(writes int64) time.Duration {
	return time.Duration(max(writes, 1)) * (c.BusyAfterWrite + time.Second)
}

// maxChangeCalls bounds the EnsureLoadBalancer calls of one change in
// LB-MULTI-STEP: a provider that asks to be called back at once, again and
// again, fails instead of spinning until changeBudget runs out.
const maxChangeCalls = 100

// quiet waits Config.BusyAfterWrite, so that the next write of a rule
// finds the cloud free of the busy period of the last one.
func (r *rt) quiet() { r.sleep(r.cfg.BusyAfterWrite, "Config.BusyAfterWrite") }

// sleep waits d (what says which wait it is), ending the rule when the
// rule's context ends first.
func (r *rt) sleep(d time.Duration, what string) {
	if d <= 0 {
		return
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-r.ctx.Done():
		r.Fatalf("interrupted waiting %v (%s): %v", d, what, r.ctx.Err())
	}
}

// multiStepService is LB-MULTI-STEP's Service before the change: two TCP
// ports, so that changing every port is two writes on most clouds.
func multiStepService() *v1.Service {
	return service("multi-step", withPorts(tcpPort("http", 80, 30080), tcpPort("https", 443, 30443)))
}

// multiStepChange returns svc with every port changed and, with
// Claims.AppProtocols, a port of the first of them added, and the change
// in words.
func (r *rt) multiStepChange(svc *v1.Service) (*v1.Service, string) {
	s := svc.DeepCopy()
	for i := range s.Spec.Ports {
		p := &s.Spec.Ports[i]
		p.Port += 8000 // the target port stays: the pods do not move
		p.NodePort++
	}
	what := "every port changed"
	if apps := r.cfg.Claims.AppProtocols; len(apps) > 0 {
		p := tcpPort("app", 9000, 30900)
		p.AppProtocol = ptr.To(apps[0])
		s.Spec.Ports = append(s.Spec.Ports, p)
		what += fmt.Sprintf(" and port 9000 added with appProtocol %q", apps[0])
	}
	return s, what
}

// owningRule names the rules that own a change LB-MULTI-STEP cannot
// make at all: LB-PORTS, and LB-PER-PORT when the change adds a port of
// an application protocol.
func (r *rt) owningRule() string {
	if len(r.cfg.Claims.AppProtocols) > 0 {
		return "LB-PORTS and LB-PER-PORT"
	}
	return "LB-PORTS"
}

func ruleLBMultiStep(r *rt) {
	lb := r.lb()
	r.needHook("Writes", r.target().Hooks.Writes)
	r.needHook("Listeners", r.target().Hooks.Listeners)
	nodes := r.nodes(1)
	svc := multiStepService()
	r.mustEnsure(lb, r.cfg.ClusterName, svc, nodes)
	if d := cmp.Diff(r.wantListeners(svc), r.listeners(svc), cmpOpts, ignoreAppProtocol); d != "" {
		r.Skipf("precondition failed: the listeners of %s differ from its ports (-want +got): see LB-PORTS\n%s", svcKey(svc), d)
	}
	r.quiet()
	changed, what := r.multiStepChange(svc)
	r.driveChange(lb, changed, nodes, what)
}

// driveChange makes the change of svc (what says it) as the service
// controller's worker does (controllers/service/controller.go
// processNextServiceItem): it calls EnsureLoadBalancer and, while the call
// fails with an api.RetryError, calls again after exactly its delay. It
// fails the rule on a delay over maxBusyDelay or a call over maxBusyCall,
// and when the change has not converged (checkConverged) within
// changeBudget of the writes made so far (Hooks.Writes), granting the next
// call a write more.
func (r *rt) driveChange(lb retryLB, svc *v1.Service, nodes []*v1.Node, what string) {
	writes := r.target().Hooks.Writes
	w0 := writes()
	start := time.Now()
	for call := 1; call <= maxChangeCalls; call++ {
		st, err := r.timedEnsure(lb.LoadBalancer, svc, nodes, fmt.Sprintf("#%d with %s", call, what))
		made := writes() - w0
		if err == nil {
			r.checkConverged(lb, svc, nodes, st, what, made, time.Since(start))
			r.Logf("EnsureLoadBalancer(%s) with %s converged in %d call(s), %d cloud writes and %v", svcKey(svc), what, call, made, time.Since(start).Round(time.Millisecond))
			return
		}
		delay, retry := throttle.RetryAfter(err)
		if !retry {
			r.Skipf("precondition failed: EnsureLoadBalancer(%s) #%d with %s: %v: see %s", svcKey(svc), call, what, err, r.owningRule())
		}
		if limit := r.cfg.maxBusyDelay(); delay > limit {
			r.Fatalf("EnsureLoadBalancer(%s) #%d with %s returned an api.RetryError of %v, expected at most %v, 2 × max(Config.BusyAfterWrite %v, 1s): the service controller waits exactly that long (processNextServiceItem), and a busy cloud is free again after its busy period, while a delay that doubles is a throttle's back-off; error: %v",
				svcKey(svc), call, what, delay, limit, r.cfg.BusyAfterWrite, err)
		}
		if elapsed, budget := time.Since(start), r.cfg.changeBudget(made+1); elapsed+delay > budget {
			r.Fatalf("EnsureLoadBalancer(%s) with %s has not converged after %d calls, %d cloud writes and %v, and asks to be called again in %v: expected convergence within %v, (writes + 1) × (Config.BusyAfterWrite %v + 1s); last error: %v",
				svcKey(svc), what, call, made, elapsed.Round(time.Millisecond), delay, budget, r.cfg.BusyAfterWrite, err)
		}
		r.sleep(delay, "the RetryAfter of EnsureLoadBalancer")
	}
	r.Fatalf("EnsureLoadBalancer(%s) with %s has not converged after %d calls, each an api.RetryError", svcKey(svc), what, maxChangeCalls)
}

// timedEnsure calls lb's EnsureLoadBalancer (what says which call) once,
// as the service controller does, and fails the rule when the call lasts
// longer than maxBusyCall, or does not return within Config.Timeout (then
// it is abandoned).
func (r *rt) timedEnsure(lb cloudprovider.LoadBalancer, svc *v1.Service, nodes []*v1.Node, what string) (*v1.LoadBalancerStatus, error) {
	var st *v1.LoadBalancerStatus
	var err error
	returned := false
	done := make(chan struct{})
	start := time.Now()
	go func() {
		defer close(done)
		defer r.recoverPanic()
		st, err = lb.EnsureLoadBalancer(r.ctx, r.cfg.ClusterName, svc.DeepCopy(), copyNodes(nodes))
		returned = true
	}()
	t := time.NewTimer(r.cfg.Timeout)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
		r.Fatalf("EnsureLoadBalancer(%s) %s did not return within %v (Config.Timeout): expected a call of at most %v, returning an api.RetryError of the cloud's delay rather than waiting the busy cloud out, which holds one of the service controller's workers (1 by default) from every other Service", svcKey(svc), what, r.cfg.Timeout, r.cfg.maxBusyCall())
	case <-r.ctx.Done():
		r.Fatalf("EnsureLoadBalancer(%s) %s interrupted: %v", svcKey(svc), what, r.ctx.Err())
	}
	if !returned {
		r.Fatalf("EnsureLoadBalancer(%s) %s panicked", svcKey(svc), what)
	}
	if took, limit := time.Since(start), r.cfg.maxBusyCall(); took > limit {
		r.Fatalf("EnsureLoadBalancer(%s) %s took %v, expected at most %v, 2 × max(Config.BusyAfterWrite %v, 1s) + 1s: a call that waits the busy cloud out holds one of the service controller's workers (1 by default) from every other Service; return an api.RetryError of the cloud's delay instead",
			svcKey(svc), what, took.Round(time.Millisecond), limit, r.cfg.BusyAfterWrite)
	}
	return st, err
}

// checkConverged checks the change of svc (what) that EnsureLoadBalancer
// reported done with st, after made cloud writes and took since its first
// call: an ingress, listeners that follow the ports, and no more time than
// changeBudget. Listeners that follow the ports only after another
// Ensure fail the rule (the service controller makes no other call for an
// unchanged Service); listeners that never do are LB-PORTS's.
func (r *rt) checkConverged(lb retryLB, svc *v1.Service, nodes []*v1.Node, st *v1.LoadBalancerStatus, what string, made int64, took time.Duration) {
	if st == nil || len(st.Ingress) == 0 {
		r.Fatalf("EnsureLoadBalancer(%s) with %s succeeded with status %v, expected an ingress", svcKey(svc), what, st)
	}
	if d := cmp.Diff(r.wantListeners(svc), r.listeners(svc), cmpOpts, ignoreAppProtocol); d != "" {
		if _, err := lb.EnsureLoadBalancer(r.ctx, r.cfg.ClusterName, svc.DeepCopy(), copyNodes(nodes)); err != nil {
			r.Skipf("precondition failed: EnsureLoadBalancer(%s) with %s succeeded, but the listeners differ from the ports, and the next call fails: %v: see %s", svcKey(svc), what, err, r.owningRule())
		}
		if again := cmp.Diff(r.wantListeners(svc), r.listeners(svc), cmpOpts, ignoreAppProtocol); again != "" {
			r.Skipf("precondition failed: the listeners of %s differ from its ports with %s, also after another EnsureLoadBalancer (-want +got): see %s\n%s", svcKey(svc), what, r.owningRule(), again)
		}
		r.Fatalf("EnsureLoadBalancer(%s) with %s succeeded with part of the change made, and only another call made the rest: the service controller, told all is well, makes no other call for an unchanged Service; listeners after the first success (-want +got):\n%s", svcKey(svc), what, d)
	}
	if budget := r.cfg.changeBudget(made); took > budget {
		r.Errorf("EnsureLoadBalancer(%s) with %s converged after %v and %d cloud writes, expected within %v, writes × (Config.BusyAfterWrite %v + 1s)", svcKey(svc), what, took.Round(time.Millisecond), made, budget, r.cfg.BusyAfterWrite)
	}
}

// unclaimedAppProtocol is an application protocol of no claim: the
// appProtocol of LB-PER-PORT's port that must be rejected.
func unclaimedAppProtocol(claimed []string) string {
	app := "conformance.ccmkit.io/unclaimed"
	for slices.Contains(claimed, app) {
		app += "-x"
	}
	return app
}

// appProtocolPort is a TCP port of application protocol app, port
// 8000+i, node port 31000+i.
func appProtocolPort(i int, app string) v1.ServicePort {
	p := tcpPort(fmt.Sprintf("app-%d", i), int32(8000+i), int32(31000+i)) //nolint:gosec // G115: i numbers a Service's few ports
	p.AppProtocol = ptr.To(app)
	return p
}

func ruleLBPerPort(r *rt) {
	lb := r.lb()
	apps := r.cfg.Claims.AppProtocols
	if len(apps) == 0 {
		r.Skipf("Claims.AppProtocols is empty: no application protocol is claimed (Config.PortSetting is checked with them)")
	}
	r.needHook("Listeners", r.target().Hooks.Listeners)
	nodes := r.nodes(1)
	r.claimedAppProtocols(lb, nodes, apps)
	r.unclaimedAppProtocolRejected(lb, nodes, apps)
	if ps := r.cfg.PortSetting; ps != nil {
		r.portSetting(lb, nodes, ps)
	} else {
		r.Logf("Config.PortSetting is nil: per-port settings were not checked")
	}
}

// claimedAppProtocols checks that a Service with a port of each of apps
// gets listeners that report each port's appProtocol.
func (r *rt) claimedAppProtocols(lb retryLB, nodes []*v1.Node, apps []string) {
	var ports []v1.ServicePort
	for i, app := range apps {
		ports = append(ports, appProtocolPort(i, app))
	}
	svc := service("per-port-app", withPorts(ports...))
	st, err := lb.EnsureLoadBalancer(r.ctx, r.cfg.ClusterName, svc, nodes)
	if err != nil || st == nil || len(st.Ingress) == 0 {
		r.skipIfPlainFails(lb, "per-port-plain", nodes)
		r.Errorf("EnsureLoadBalancer(%s) with a port of each claimed application protocol %q = (%v, %v), expected a status with an ingress", svcKey(svc), apps, st, err)
		return
	}
	if d := cmp.Diff(r.wantListeners(svc), r.listeners(svc), cmpOpts); d != "" {
		r.Errorf("the listeners of %s differ from its ports and their appProtocol, expected each listener to serve its port's claimed application protocol (a Hooks.Listeners that leaves Listener.AppProtocol empty fails here) (-want +got):\n%s", svcKey(svc), d)
	}
}

// unclaimedAppProtocolRejected checks that EnsureLoadBalancer rejects a
// port of an application protocol outside apps, leaving no listener
// on it.
func (r *rt) unclaimedAppProtocolRejected(lb retryLB, nodes []*v1.Node, apps []string) {
	app := unclaimedAppProtocol(apps)
	p := appProtocolPort(100, app)
	svc := service("per-port-unclaimed", withPorts(p))
	st, err := lb.EnsureLoadBalancer(r.ctx, r.cfg.ClusterName, svc, nodes)
	if err == nil {
		r.Errorf("EnsureLoadBalancer(%s) with port %d of appProtocol %q, not among Claims.AppProtocols %q, returned %v and no error: expected an error, not a load balancer built as plain TCP", svcKey(svc), p.Port, app, apps, st)
		return
	}
	if !r.exists(lb, r.cfg.ClusterName, svc) {
		return
	}
	for _, l := range r.listeners(svc) {
		if l.Port == p.Port {
			r.Errorf("EnsureLoadBalancer(%s) with port %d of unclaimed appProtocol %q returned an error, but left listener %+v on it, expected none", svcKey(svc), p.Port, app, l)
		}
	}
}

// portSetting checks Config.PortSetting: with the setting of one of two
// ports converged, changing it is one cloud write (Hooks.Writes) and
// leaves the listener of the other port as it was.
func (r *rt) portSetting(lb retryLB, nodes []*v1.Node, ps *PortSetting) {
	writes := r.target().Hooks.Writes
	if writes == nil {
		r.Logf("Hooks.Writes is nil: Config.PortSetting was not checked")
		return
	}
	const port = 443
	entry := func(v string) string { return fmt.Sprintf("%d=%s", port, v) }
	svc := service("per-port-setting", withPorts(tcpPort("http", 80, 30080), tcpPort("https", port, 30443)), withAnnotation(ps.Annotation, entry(ps.Values[0])))
	if _, err := lb.EnsureLoadBalancer(r.ctx, r.cfg.ClusterName, svc, nodes); err != nil {
		r.skipIfPlainFails(lb, "per-port-setting-plain", nodes)
		r.Fatalf("EnsureLoadBalancer(%s) with %s=%q (Config.PortSetting): %v", svcKey(svc), ps.Annotation, entry(ps.Values[0]), err)
	}
	before := r.listeners(svc)
	r.quiet()
	changed := svc.DeepCopy()
	changed.Annotations[ps.Annotation] = entry(ps.Values[1])
	w0 := writes()
	if _, err := lb.EnsureLoadBalancer(r.ctx, r.cfg.ClusterName, changed, nodes); err != nil {
		r.Fatalf("EnsureLoadBalancer(%s) with %s changed from %q to %q: %v", svcKey(svc), ps.Annotation, entry(ps.Values[0]), entry(ps.Values[1]), err)
	}
	if w := writes() - w0; w != 1 {
		r.Errorf("changing %s of %s from %q to %q, the setting of port %d alone, made %d cloud writes, expected 1: port %d's listener changes, port 80's is left as it is", ps.Annotation, svcKey(svc), entry(ps.Values[0]), entry(ps.Values[1]), port, w, port)
	}
	other := func(ls []Listener) []Listener {
		return slices.DeleteFunc(ls, func(l Listener) bool { return l.Port == port })
	}
	if d := cmp.Diff(other(before), other(r.listeners(changed)), cmpOpts); d != "" {
		r.Errorf("changing the setting %s of port %d of %s changed the other listeners (-before +after):\n%s", ps.Annotation, port, svcKey(svc), d)
	}
}

func ruleLBPartialRepair(r *rt) {
	lb := r.lb()
	h := r.target().Hooks
	r.needHook("Damage", h.Damage)
	r.needHook("Backends", h.Backends)
	r.needHook("Listeners", h.Listeners)
	r.needHook("Writes", h.Writes)
	nodes := r.nodes(2)
	c := r.cfg.ClusterName
	svc := service("partial-repair")
	r.mustEnsure(lb, c, svc, nodes)
	listeners := r.converged(lb, svc, nodes)
	objects, err := h.Damage(r.ctx, c, svc.DeepCopy())
	switch {
	case err != nil:
		r.Fatalf("Hooks.Damage(%s): %v", svcKey(svc), err)
	case objects < 1:
		r.Fatalf("Hooks.Damage(%s) reports %d cloud objects removed, expected at least 1", svcKey(svc), objects)
	}
	r.cloudChanged("Damage")
	w0 := h.Writes()
	want := sortedStrings(names(nodes))
	r.eventuallyChanged(fmt.Sprintf("EnsureLoadBalancer(%s) to repair its load balancer after Hooks.Damage removed %d cloud objects", svcKey(svc), objects), func() (bool, string) {
		if _, err := lb.EnsureLoadBalancer(r.ctx, c, svc.DeepCopy(), copyNodes(nodes)); err != nil {
			return false, fmt.Sprintf("EnsureLoadBalancer: %v", err)
		}
		b, l := r.backends(c, svc), r.listeners(svc)
		return cmp.Equal(want, b, cmpOpts) && cmp.Equal(listeners, l, cmpOpts), fmt.Sprintf("backends %v (expected %v), listeners %+v (expected %+v)", b, want, l, listeners)
	})
	if w := h.Writes() - w0; w > int64(objects) {
		r.Errorf("repairing the load balancer of %s after Hooks.Damage removed %d cloud objects took %d cloud writes, expected at most %d, one per object removed: rebuilding what was not damaged spends writes and disturbs its traffic", svcKey(svc), objects, w, objects)
	}
	w1 := h.Writes()
	if _, err := lb.EnsureLoadBalancer(r.ctx, c, svc.DeepCopy(), copyNodes(nodes)); err != nil {
		r.Fatalf("EnsureLoadBalancer(%s) after the repair: %v", svcKey(svc), err)
	}
	if w := h.Writes() - w1; w != 0 {
		r.Errorf("EnsureLoadBalancer(%s) after the repair made %d cloud writes, expected 0: the repair left the load balancer unconverged", svcKey(svc), w)
	}
}

// converged returns the listeners of svc's load balancer, once it has
// the nodes as backends, listeners that follow the ports, and Ensure
// writes nothing to it, waiting Config.BusyAfterWrite first; otherwise
// it skips the rule, naming the rule that owns the precondition.
func (r *rt) converged(lb retryLB, svc *v1.Service, nodes []*v1.Node) []Listener {
	c := r.cfg.ClusterName
	if d := cmp.Diff(sortedStrings(names(nodes)), r.backends(c, svc), cmpOpts); d != "" {
		r.Skipf("precondition failed: the backends of %s differ from the nodes given (-want +got): see LB-BACKENDS\n%s", svcKey(svc), d)
	}
	listeners := r.listeners(svc)
	if d := cmp.Diff(r.wantListeners(svc), listeners, cmpOpts, ignoreAppProtocol); d != "" {
		r.Skipf("precondition failed: the listeners of %s differ from its ports (-want +got): see LB-PORTS\n%s", svcKey(svc), d)
	}
	r.quiet()
	writes := r.target().Hooks.Writes
	w0 := writes()
	if _, err := lb.EnsureLoadBalancer(r.ctx, c, svc.DeepCopy(), copyNodes(nodes)); err != nil {
		r.Skipf("precondition failed: EnsureLoadBalancer(%s) again: %v: see LB-IDEMPOTENT", svcKey(svc), err)
	}
	if w := writes() - w0; w != 0 {
		r.Skipf("precondition failed: EnsureLoadBalancer(%s) of a converged load balancer made %d cloud writes: see LB-CONVERGED", svcKey(svc), w)
	}
	return listeners
}
