package conformance

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	v1 "k8s.io/api/core/v1"
	cloudprovider "k8s.io/cloud-provider"
	"k8s.io/utils/ptr"
)

// mustEnsure is EnsureLoadBalancer as a precondition: when it does not
// succeed with an ingress, the rule is skipped and LB-ENSURE-STATUS reports
// the problem, once.
func (r *rt) mustEnsure(lb cloudprovider.LoadBalancer, cluster string, svc *v1.Service, nodes []*v1.Node) *v1.LoadBalancerStatus {
	st, err := lb.EnsureLoadBalancer(r.ctx, cluster, svc, nodes)
	if err != nil || st == nil || len(st.Ingress) == 0 {
		r.Skipf("precondition failed: EnsureLoadBalancer(%s) = (%v, %v): see LB-ENSURE-STATUS", svcKey(svc), st, err)
	}
	return st
}

// skipIfPlainFails is called by a rule whose EnsureLoadBalancer of a
// variant Service (Local traffic, source ranges, a claimed feature) failed,
// before it reports that: when a plain TCP Service (named name) fails as
// well, the variant is not the problem, and the rule is skipped
// (LB-ENSURE-STATUS reports it, once); otherwise it returns.
func (r *rt) skipIfPlainFails(lb retryLB, name string, nodes []*v1.Node) {
	plain := service(name)
	st, err := lb.EnsureLoadBalancer(r.ctx, r.cfg.ClusterName, plain, nodes)
	if err != nil || st == nil || len(st.Ingress) == 0 {
		r.Skipf("precondition failed: EnsureLoadBalancer(%s) of a plain TCP Service = (%v, %v) as well: see LB-ENSURE-STATUS", svcKey(plain), st, err)
	}
}

// withStatus returns a copy of svc with st as its load-balancer status: the
// Service as the service controller's informer holds it after patchStatus,
// which is what it passes to GetLoadBalancer and EnsureLoadBalancerDeleted
// (controllers/service/controller.go syncLoadBalancerIfNeeded).
func withStatus(svc *v1.Service, st *v1.LoadBalancerStatus) *v1.Service {
	s := svc.DeepCopy()
	if st != nil {
		s.Status.LoadBalancer = *st.DeepCopy()
	}
	return s
}

// exists calls GetLoadBalancer and fails the rule on an error.
func (r *rt) exists(lb cloudprovider.LoadBalancer, cluster string, svc *v1.Service) bool {
	_, ok, err := lb.GetLoadBalancer(r.ctx, cluster, svc)
	if err != nil {
		r.Fatalf("GetLoadBalancer(%s, %s): %v", cluster, svcKey(svc), err)
	}
	return ok
}

// owned returns Hooks.Owned sorted, or nil when the hook is missing.
func (r *rt) owned() []string {
	h := r.target().Hooks.Owned
	if h == nil {
		return nil
	}
	o, err := h(r.ctx)
	if err != nil {
		r.Fatalf("Hooks.Owned: %v", err)
	}
	return sortedStrings(o)
}

// checkOwned compares Hooks.Owned with want (sorted), when the hook exists.
func (r *rt) checkOwned(when string, want []string) {
	if r.target().Hooks.Owned == nil {
		return
	}
	if d := cmp.Diff(want, r.owned(), cmpOpts); d != "" {
		r.Errorf("%s, the cloud resources the provider owns differ (-want +got):\n%s", when, d)
	}
}

// backends returns Hooks.Backends sorted.
func (r *rt) backends(cluster string, svc *v1.Service) []string {
	b, err := r.target().Hooks.Backends(r.ctx, cluster, svc)
	if err != nil {
		r.Fatalf("Hooks.Backends(%s, %s): %v", cluster, svcKey(svc), err)
	}
	return sortedStrings(b)
}

// checkBackends compares Hooks.Backends with the names of want, when the hook
// exists.
func (r *rt) checkBackends(when, cluster string, svc *v1.Service, want []*v1.Node) {
	if r.target().Hooks.Backends == nil {
		return
	}
	if d := cmp.Diff(sortedStrings(names(want)), r.backends(cluster, svc), cmpOpts); d != "" {
		r.Errorf("%s, backends of %s differ from the nodes given (-want +got):\n%s", when, svcKey(svc), d)
	}
}

func ruleLBEnsureStatus(r *rt) {
	if p := r.ensureProblem(r.lb(), service("ensure-status"), r.nodes(1)); p != "" {
		r.Errorf("%s", p)
	}
}

// ensureProblem makes EnsureLoadBalancer(svc, nodes) and says what is
// wrong with its answer, or "" when it succeeds with an ingress.
func (r *rt) ensureProblem(lb retryLB, svc *v1.Service, nodes []*v1.Node) string {
	st, err := lb.EnsureLoadBalancer(r.ctx, r.cfg.ClusterName, svc, nodes)
	switch {
	case err != nil:
		return fmt.Sprintf("EnsureLoadBalancer(%s) with %d nodes: %v, expected success for a plain TCP Service", svcKey(svc), len(nodes), err)
	case st == nil:
		return fmt.Sprintf("EnsureLoadBalancer(%s) with %d nodes returned a nil status and no error: the service controller fails with \"service status returned by EnsureLoadBalancer is nil\"", svcKey(svc), len(nodes))
	case len(st.Ingress) == 0:
		return fmt.Sprintf("EnsureLoadBalancer(%s) with %d nodes returned no ingress, expected at least one IP or hostname", svcKey(svc), len(nodes))
	}
	return ""
}

// ruleLBNoNodes checks the calls upstream makes with no nodes: the first
// Ensure of a Service in a cluster whose Nodes are not ready yet, and the
// Update after the last Node left. The rest of the suite makes them only
// where it says so, and takes a refusal for "not checked" (noNodes).
func ruleLBNoNodes(r *rt) {
	lb := r.lb()
	nodes := r.nodes(1)
	c := r.cfg.ClusterName
	if p := r.ensureProblem(lb, service("no-nodes"), nil); p != "" {
		r.skipIfPlainFails(lb, "no-nodes-plain", nodes)
		r.Errorf("%s", p)
	}
	svc := service("no-nodes-update")
	r.mustEnsure(lb, c, svc, nodes)
	if err := lb.UpdateLoadBalancer(context.TODO(), c, svc, nil); err != nil {
		r.Errorf("UpdateLoadBalancer(%s) with no nodes: %v, expected success: the service controller makes it when the last Node leaves", svcKey(svc), err)
	}
}

// noNodes reports whether err, the answer to a call with no nodes (what),
// is a success; a refusal is logged as not checked, LB-NO-NODES' business.
func (r *rt) noNodes(what string, err error) bool {
	if err != nil {
		r.Logf("%s with no nodes was refused (%v): what follows from it was not checked; see LB-NO-NODES", what, err)
	}
	return err == nil
}

func ruleLBIngressValid(r *rt) {
	lb := r.lb()
	svc := service("ingress-valid")
	st := r.mustEnsure(lb, r.cfg.ClusterName, svc, r.nodes(1))
	for _, p := range ingressProblems(st, r.cfg.Claims.HostnameIngress) {
		r.Errorf("EnsureLoadBalancer(%s): %s", svcKey(svc), p)
	}
	got, ok, err := lb.GetLoadBalancer(r.ctx, r.cfg.ClusterName, svc)
	if err == nil && ok && got != nil {
		for _, p := range ingressProblems(got, r.cfg.Claims.HostnameIngress) {
			r.Errorf("GetLoadBalancer(%s): %s", svcKey(svc), p)
		}
	}
}

func ruleLBGetExists(r *rt) {
	lb := r.lb()
	nodes := r.nodes(1)
	c := r.cfg.ClusterName
	svc := service("get-exists")
	if r.exists(lb, c, svc) {
		r.Errorf("GetLoadBalancer(%s) before any Ensure reported exists=true, expected false", svcKey(svc))
	}
	r.mustEnsure(lb, c, svc, nodes)
	if !r.exists(lb, c, svc) {
		r.Errorf("GetLoadBalancer(%s) after EnsureLoadBalancer reported exists=false: the service controller would drop the finalizer without deleting", svcKey(svc))
	}
	if r.noNodes("UpdateLoadBalancer("+svcKey(svc)+")", lb.UpdateLoadBalancer(r.ctx, c, svc, nil)) && !r.exists(lb, c, svc) {
		r.Errorf("GetLoadBalancer(%s) after UpdateLoadBalancer with no nodes reported exists=false, expected true: the load balancer is still there", svcKey(svc))
	}
	empty := service("get-exists-no-nodes")
	if st, err := lb.EnsureLoadBalancer(r.ctx, c, empty, nil); r.noNodes("EnsureLoadBalancer("+svcKey(empty)+")", err) && st != nil && len(st.Ingress) > 0 && !r.exists(lb, c, empty) {
		r.Errorf("GetLoadBalancer(%s) after EnsureLoadBalancer with no nodes reported exists=false, expected true", svcKey(empty))
	}
}

func ruleLBIdempotent(r *rt) {
	lb := r.lb()
	nodes := r.nodes(1)
	c := r.cfg.ClusterName
	svc := service("idempotent")
	first := r.mustEnsure(lb, c, svc, nodes)
	before := r.owned()
	reversed := slices.Clone(nodes)
	slices.Reverse(reversed)
	for i, ns := range [][]*v1.Node{nodes, reversed} {
		// A restarted CCM sees an equal Service in a new object.
		st, err := lb.EnsureLoadBalancer(r.ctx, c, svc.DeepCopy(), ns)
		if err != nil {
			r.Errorf("EnsureLoadBalancer(%s) #%d on a converged load balancer: %v, expected success", svcKey(svc), i+2, err)
			continue
		}
		if st == nil {
			r.Errorf("EnsureLoadBalancer(%s) #%d returned a nil status", svcKey(svc), i+2)
			continue
		}
		if d := cmp.Diff(first.Ingress, st.Ingress, cmpOpts); d != "" {
			r.Errorf("EnsureLoadBalancer(%s) #%d returned another ingress than #1 (-first +now):\n%s", svcKey(svc), i+2, d)
		}
	}
	r.checkOwned("after repeating EnsureLoadBalancer", before)
}

func ruleLBConverged(r *rt) {
	lb := r.lb()
	r.needHook("Writes", r.target().Hooks.Writes)
	nodes := r.nodes(1)
	c := r.cfg.ClusterName
	svc := service("converged")
	r.mustEnsure(lb, c, svc, nodes)
	writes := r.target().Hooks.Writes
	w0 := writes()
	if _, err := lb.EnsureLoadBalancer(r.ctx, c, svc.DeepCopy(), nodes); err != nil {
		r.Skipf("precondition failed: EnsureLoadBalancer(%s) again: %v: see LB-IDEMPOTENT", svcKey(svc), err)
	}
	if w := writes(); w != w0 {
		r.Errorf("EnsureLoadBalancer(%s) on a converged load balancer made %d cloud writes, expected 0 (Ensure runs for every Service on every CCM restart)", svcKey(svc), w-w0)
	}
	w0 = writes()
	if err := lb.UpdateLoadBalancer(context.TODO(), c, svc, nodes); err != nil {
		r.Fatalf("UpdateLoadBalancer(%s) with the same nodes: %v", svcKey(svc), err)
	}
	if w := writes(); w != w0 {
		r.Errorf("UpdateLoadBalancer(%s) with unchanged nodes made %d cloud writes, expected 0", svcKey(svc), w-w0)
	}
}

func ruleLBDelete(r *rt) {
	lb := r.lb()
	nodes := r.nodes(1)
	c := r.cfg.ClusterName
	before := r.owned()
	// The service controller deletes the Service it holds, with the status
	// it patched, after asking GetLoadBalancer whether there is anything to
	// delete (controllers/service/controller.go syncLoadBalancerIfNeeded).
	svc := service("delete")
	svc = withStatus(svc, r.mustEnsure(lb, c, svc, nodes))
	if !r.exists(lb, c, svc) {
		r.Skipf("precondition failed: GetLoadBalancer(%s) after EnsureLoadBalancer reported exists=false: see LB-GET-EXISTS", svcKey(svc))
	}
	if err := lb.EnsureLoadBalancerDeleted(r.ctx, c, svc); err != nil {
		r.Fatalf("EnsureLoadBalancerDeleted(%s): %v", svcKey(svc), err)
	}
	if r.exists(lb, c, svc) {
		r.Errorf("GetLoadBalancer(%s) after EnsureLoadBalancerDeleted reported exists=true, expected false", svcKey(svc))
	}
	r.checkOwned("after EnsureLoadBalancerDeleted", before)
}

func ruleLBDeleteUnknown(r *rt) {
	lb := r.lb()
	nodes := r.nodes(1)
	c := r.cfg.ClusterName
	never := service("delete-unknown")
	if err := lb.EnsureLoadBalancerDeleted(r.ctx, c, never); err != nil {
		r.Errorf("EnsureLoadBalancerDeleted(%s) of a load balancer that never existed: %v, expected nil", svcKey(never), err)
	}
	if err := lb.EnsureLoadBalancerDeleted(r.ctx, c, stale(never)); err != nil {
		r.Errorf("EnsureLoadBalancerDeleted(%s) of a never-created load balancer, from a ClusterIP Service: %v, expected nil", svcKey(never), err)
	}
	svc := service("delete-twice")
	r.mustEnsure(lb, c, svc, nodes)
	if err := lb.EnsureLoadBalancerDeleted(r.ctx, c, svc); err != nil {
		r.Skipf("precondition failed: EnsureLoadBalancerDeleted(%s): %v: see LB-DELETE", svcKey(svc), err)
	}
	if err := lb.EnsureLoadBalancerDeleted(r.ctx, c, svc); err != nil {
		r.Errorf("EnsureLoadBalancerDeleted(%s) of an already deleted load balancer: %v, expected nil", svcKey(svc), err)
	}
}

func ruleLBDeleteStale(r *rt) {
	lb := r.lb()
	nodes := r.nodes(1)
	c := r.cfg.ClusterName
	before := r.owned()
	svc := service("delete-stale", withLocalTraffic(32100))
	if _, err := lb.EnsureLoadBalancer(r.ctx, c, svc, nodes); err != nil {
		svc = service("delete-stale")
		r.mustEnsure(lb, c, svc, nodes)
	}
	// The service controller asks GetLoadBalancer first, with the same
	// stale Service, and deletes only what it reports
	// (syncLoadBalancerIfNeeded): exists=false leaks the load balancer.
	if !r.exists(lb, c, stale(svc)) {
		r.Errorf("GetLoadBalancer(%s) from a stale Service (type ClusterIP, node ports 0, no status) reports exists=false for an existing load balancer, expected true: the service controller would not delete it", svcKey(svc))
	}
	if err := lb.EnsureLoadBalancerDeleted(r.ctx, c, stale(svc)); err != nil {
		r.Fatalf("EnsureLoadBalancerDeleted(%s) from a stale Service (type ClusterIP, node ports 0): %v, expected nil", svcKey(svc), err)
	}
	if r.exists(lb, c, svc) {
		r.Errorf("after EnsureLoadBalancerDeleted(%s) from a stale Service (type ClusterIP, node ports 0), GetLoadBalancer still reports exists=true", svcKey(svc))
	}
	r.checkOwned("after EnsureLoadBalancerDeleted from a stale Service", before)
}

func ruleLBRecreate(r *rt) {
	lb := r.lb()
	nodes := r.nodes(1)
	c := r.cfg.ClusterName
	svc := service("recreate")
	r.mustEnsure(lb, c, svc, nodes)
	if err := lb.EnsureLoadBalancerDeleted(r.ctx, c, svc); err != nil {
		r.Skipf("precondition failed: EnsureLoadBalancerDeleted(%s): %v: see LB-DELETE", svcKey(svc), err)
	}
	st, err := lb.EnsureLoadBalancer(r.ctx, c, svc, nodes)
	if err != nil || st == nil || len(st.Ingress) == 0 {
		r.Fatalf("EnsureLoadBalancer(%s) after EnsureLoadBalancerDeleted = (%v, %v), expected a status with an ingress", svcKey(svc), st, err)
	}
	if !r.exists(lb, c, svc) {
		r.Errorf("GetLoadBalancer(%s) after re-creating reported exists=false", svcKey(svc))
	}
	r.checkBackends("after re-creating", c, svc, nodes)
}

func ruleLBBackends(r *rt) {
	lb := r.lb()
	r.needHook("Backends", r.target().Hooks.Backends)
	nodes := r.nodes(2)
	c := r.cfg.ClusterName
	svc := service("backends")
	r.mustEnsure(lb, c, svc, nodes[:2])
	r.checkBackends("after EnsureLoadBalancer", c, svc, nodes[:2])
	// The node worker calls Update with context.TODO().
	steps := []struct {
		what  string
		nodes []*v1.Node
	}{
		{"after UpdateLoadBalancer with one node fewer", nodes[:1]},
		{"after UpdateLoadBalancer with a NotReady node (the controller does not filter on readiness)", []*v1.Node{nodes[0], notReady(nodes[1])}},
		{"after UpdateLoadBalancer with no nodes", nil},
		// The cloud-node controller sets the provider ID before it patches
		// the addresses, and the service controller syncs backends on the
		// provider-ID change only: a node left out now stays out.
		{"after UpdateLoadBalancer with a node whose addresses are not set yet (the service controller never resyncs on an address change)", []*v1.Node{withoutAddresses(nodes[0])}},
		{"after UpdateLoadBalancer with every node", nodes},
	}
	for _, s := range steps {
		err := lb.UpdateLoadBalancer(context.TODO(), c, svc, s.nodes)
		if len(s.nodes) == 0 && !r.noNodes("UpdateLoadBalancer("+svcKey(svc)+")", err) {
			continue
		}
		if err != nil {
			r.Errorf("UpdateLoadBalancer(%s, %v): %v", svcKey(svc), names(s.nodes), err)
			continue
		}
		r.checkBackends(s.what, c, svc, s.nodes)
	}
	if _, err := lb.EnsureLoadBalancer(r.ctx, c, svc, nodes[1:2]); err != nil {
		r.Fatalf("EnsureLoadBalancer(%s, %v): %v", svcKey(svc), names(nodes[1:2]), err)
	}
	r.checkBackends("after EnsureLoadBalancer with another node", c, svc, nodes[1:2])
}

// listeners returns Hooks.Listeners sorted by port.
func (r *rt) listeners(svc *v1.Service) []Listener {
	ls, err := r.target().Hooks.Listeners(r.ctx, r.cfg.ClusterName, svc)
	if err != nil {
		r.Fatalf("Hooks.Listeners(%s): %v", svcKey(svc), err)
	}
	return sortListeners(ls)
}

func sortListeners(ls []Listener) []Listener {
	ls = slices.Clone(ls)
	slices.SortFunc(ls, func(a, b Listener) int {
		if a.Port != b.Port {
			return int(a.Port - b.Port)
		}
		return strings.Compare(string(a.Protocol), string(b.Protocol))
	})
	return ls
}

// wantListeners are the listeners svc asks for, each with the
// appProtocol of its port, forwarding to its node port, or to none with
// Claims.PassThrough.
func (r *rt) wantListeners(svc *v1.Service) []Listener {
	var out []Listener
	for _, p := range svc.Spec.Ports {
		l := Listener{Protocol: p.Protocol, Port: p.Port, NodePort: p.NodePort, AppProtocol: ptr.Deref(p.AppProtocol, "")}
		if r.cfg.Claims.PassThrough {
			l.NodePort = 0
		}
		out = append(out, l)
	}
	return sortListeners(out)
}

// ignoreAppProtocol leaves Listener.AppProtocol out of a comparison: only
// LB-PER-PORT compares it, so that a Hooks.Listeners that does not report
// it passes every other rule.
var ignoreAppProtocol = cmpopts.IgnoreFields(Listener{}, "AppProtocol")

func ruleLBPorts(r *rt) {
	lb := r.lb()
	r.needHook("Listeners", r.target().Hooks.Listeners)
	nodes := r.nodes(1)
	c := r.cfg.ClusterName
	svc := service("ports")
	r.mustEnsure(lb, c, svc, nodes)
	check := func(what string) {
		if d := cmp.Diff(r.wantListeners(svc), r.listeners(svc), cmpOpts, ignoreAppProtocol); d != "" {
			r.Errorf("%s, the listeners of %s differ from its ports (-want +got):\n%s", what, svcKey(svc), d)
		}
	}
	check("after EnsureLoadBalancer")
	svc = svc.DeepCopy()
	svc.Spec.Ports[0].Port = 8080
	svc.Spec.Ports[0].NodePort = 30081
	if _, err := lb.EnsureLoadBalancer(r.ctx, c, svc, nodes); err != nil {
		r.Fatalf("EnsureLoadBalancer(%s) with port 80 changed to 8080: %v", svcKey(svc), err)
	}
	check("after changing port 80 to 8080")
	svc = svc.DeepCopy()
	svc.Spec.Ports = append(svc.Spec.Ports, tcpPort("https", 443, 30443))
	if _, err := lb.EnsureLoadBalancer(r.ctx, c, svc, nodes); err != nil {
		r.Fatalf("EnsureLoadBalancer(%s) with port 443 added: %v", svcKey(svc), err)
	}
	check("after adding port 443")
}

// isolatedClusters returns the two clusters of LB-CLUSTER-ISOLATION: with
// Target.OtherCluster, Cloud and OtherCluster with one clusterName and one
// Service (namespace, name and UID: two clusters restored from one etcd
// backup); without, Cloud under ClusterName and CrossClusterName with
// Services of the same namespace and name but their own UIDs.
func (r *rt) isolatedClusters(name string) (a, b lbCluster) {
	lb := r.lb()
	svc := service(name)
	a = lbCluster{lb, r.cfg.ClusterName, svc, fmt.Sprintf("cluster %q", r.cfg.ClusterName)}
	if other, ok := other(r, "LoadBalancer", cloudprovider.Interface.LoadBalancer); ok {
		a.desc = "Target.Cloud"
		return a, lbCluster{retryLB{r, other}, a.cluster, svc.DeepCopy(), fmt.Sprintf("Target.OtherCluster (also cluster name %q, the same Service UID)", a.cluster)}
	}
	return a, lbCluster{lb, r.cfg.CrossClusterName, service(name), fmt.Sprintf("cluster %q", r.cfg.CrossClusterName)}
}

func ruleLBClusterIsolation(r *rt) {
	nodes := r.nodes(2)
	a, b := r.isolatedClusters("shared-name")
	stA := r.mustEnsure(a.lb, a.cluster, a.svc, nodes)
	ownedA := r.owned()
	if r.exists(b.lb, b.cluster, b.svc) {
		r.Errorf("GetLoadBalancer(%s) through %s, which has created nothing yet, reports exists=true: it sees the load balancer of %s, and would adopt or delete it", svcKey(b.svc), b.desc, a.desc)
	}
	stB, err := b.lb.EnsureLoadBalancer(r.ctx, b.cluster, b.svc, nodes[:1])
	if err != nil {
		r.Fatalf("EnsureLoadBalancer(%s) of %s: %v", svcKey(b.svc), b.desc, err)
	}
	if err := b.lb.UpdateLoadBalancer(context.TODO(), b.cluster, b.svc, nodes[1:2]); err != nil {
		r.Fatalf("UpdateLoadBalancer(%s, %v) of %s: %v", svcKey(b.svc), names(nodes[1:2]), b.desc, err)
	}
	r.checkBackends(fmt.Sprintf("after %s updated its own %s", b.desc, svcKey(b.svc)), a.cluster, a.svc, nodes)
	if err := b.lb.EnsureLoadBalancerDeleted(r.ctx, b.cluster, withStatus(b.svc, stB)); err != nil {
		r.Fatalf("EnsureLoadBalancerDeleted(%s) of %s: %v", svcKey(b.svc), b.desc, err)
	}
	st, ok, err := a.lb.GetLoadBalancer(r.ctx, a.cluster, a.svc)
	if err != nil || !ok {
		r.Fatalf("after %s deleted its %s, GetLoadBalancer of %s = (exists %v, %v), expected its load balancer to remain", b.desc, svcKey(b.svc), a.desc, ok, err)
	}
	if st != nil {
		if d := cmp.Diff(stA.Ingress, st.Ingress, cmpOpts); d != "" {
			r.Errorf("the ingress of %s changed after the calls of %s (-before +after):\n%s", a.desc, b.desc, d)
		}
	}
	r.checkOwned(fmt.Sprintf("after %s created and deleted its own load balancer", b.desc), ownedA)
}

// ruleLBConcurrent makes the calls the service controller can have in
// flight at once (controllers/service/controller.go Run), and no others.
// Its service workers share one workqueue, which never hands a key to two
// workers at once (processNextServiceItem): the Ensure calls of one Service
// run one after another, those of different Services concurrently. Its
// node worker runs one syncNodes round at a time, which calls
// UpdateLoadBalancer once per Service (updateLoadBalancerHosts) with no
// lock against the service workers: one Update of a Service can overlap
// one Ensure of it. So the shared Service is ensured lbConcurrentRounds
// times in a row while it is updated as often beside them, and four other
// Services are ensured meanwhile. Two Ensure calls of one Service at once
// are never made: a provider need not survive them (GCE's, whose every
// Ensure reserves and releases the static IP, does not).
func ruleLBConcurrent(r *rt) {
	lb := r.lb()
	nodes := r.nodes(1)
	c := r.cfg.ClusterName
	shared := service("concurrent-shared")
	r.mustEnsure(lb, c, shared, nodes)
	var others []*v1.Service
	for i := range 4 {
		others = append(others, service(fmt.Sprintf("concurrent-%d", i)))
	}
	// Each call gets deep copies of its Service and Nodes: a provider that
	// modifies its arguments fails ARGS-NOT-MUTATED, and does not race the
	// other goroutines here (a data race would end the test binary).
	waits := []func(){
		r.Go(func() {
			for i := range lbConcurrentRounds {
				if _, err := lb.EnsureLoadBalancer(r.ctx, c, shared.DeepCopy(), copyNodes(nodes)); err != nil {
					r.Errorf("EnsureLoadBalancer(%s) #%d, concurrent with UpdateLoadBalancer of it and EnsureLoadBalancer of other Services: %v", svcKey(shared), i, err)
				}
			}
		}),
		r.Go(func() {
			for i := range lbConcurrentRounds {
				if err := lb.UpdateLoadBalancer(context.TODO(), c, shared.DeepCopy(), copyNodes(nodes)); err != nil {
					r.Errorf("UpdateLoadBalancer(%s) #%d, concurrent with EnsureLoadBalancer of it and of other Services: %v", svcKey(shared), i, err)
				}
			}
		}),
	}
	for _, s := range others {
		waits = append(waits, r.Go(func() {
			if _, err := lb.EnsureLoadBalancer(r.ctx, c, s.DeepCopy(), copyNodes(nodes)); err != nil {
				r.Errorf("concurrent EnsureLoadBalancer(%s): %v", svcKey(s), err)
			}
		}))
	}
	for _, w := range waits {
		w()
	}
	for _, s := range append(others, shared) {
		if !r.exists(lb, c, s) {
			r.Errorf("after concurrent Ensure calls, GetLoadBalancer(%s) reports exists=false", svcKey(s))
		}
		r.checkBackends("after concurrent Ensure and Update calls with the same nodes", c, s, nodes)
	}
}

// lbConcurrentRounds is how many Ensure and Update calls LB-CONCURRENT
// makes of its shared Service, each kind one after another.
const lbConcurrentRounds = 3

func ruleLBOutage(r *rt) {
	lb := r.lb()
	r.needHook("Outage", r.target().Hooks.Outage)
	c := r.cfg.ClusterName
	svc := service("outage")
	r.mustEnsure(lb, c, svc, r.nodes(1))
	restore := r.target().Hooks.Outage()
	defer restore()
	// One answer, not retried: an api.RetryError is an error, as asked.
	_, ok, err := lb.LoadBalancer.GetLoadBalancer(r.ctx, c, svc)
	if err == nil && !ok {
		r.Errorf("GetLoadBalancer(%s) during a cloud outage returned exists=false and no error: the service controller would remove the finalizer of a deleted Service and leak its load balancer: expected an error", svcKey(svc))
	}
}
