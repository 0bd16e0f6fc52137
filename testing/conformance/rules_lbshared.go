package conformance

import (
	"context"
	"fmt"

	v1 "k8s.io/api/core/v1"
)

// The rules of several Services at once: what a node sync and a deletion
// must leave of every Service's load balancer, whether the provider keeps
// backends per load balancer or in a backend pool that load balancers
// share (loadbalancer.Capabilities.SharedBackendPools in ccmkit).

// sharedServices returns n plain TCP Services named prefix-0… and ensures
// each with nodes (a precondition: see mustEnsure), returning them with
// the status Ensure reported, as the service controller's informer holds
// them.
func (r *rt) sharedServices(lb retryLB, prefix string, n int, nodes []*v1.Node) []*v1.Service {
	var out []*v1.Service
	for i := range n {
		svc := service(fmt.Sprintf("%s-%d", prefix, i))
		out = append(out, withStatus(svc, r.mustEnsure(lb, r.cfg.ClusterName, svc, nodes)))
	}
	return out
}

// nodeSync calls UpdateLoadBalancer for every Service of svcs with nodes,
// concurrently, as the service controller's node sync does
// (controllers/service/controller.go updateLoadBalancerHosts: its workers
// run in parallel, each with context.TODO(), lockedUpdateLoadBalancerHosts).
// Each goroutine gets copies of its Service and Nodes.
func (r *rt) nodeSync(lb retryLB, svcs []*v1.Service, nodes []*v1.Node) {
	var waits []func()
	for _, s := range svcs {
		waits = append(waits, r.Go(func() {
			if err := lb.UpdateLoadBalancer(context.TODO(), r.cfg.ClusterName, s.DeepCopy(), copyNodes(nodes)); err != nil {
				r.Errorf("UpdateLoadBalancer(%s, %v) in a node sync: %v", svcKey(s), names(nodes), err)
			}
		}))
	}
	for _, w := range waits {
		w()
	}
}

func ruleLBNodeSync(r *rt) {
	lb := r.lb()
	r.needHook("Backends", r.target().Hooks.Backends)
	nodes := r.nodes(2)
	svcs := r.sharedServices(lb, "node-sync", 3, nodes[:1])
	for _, step := range []struct {
		what  string
		nodes []*v1.Node
	}{
		{"after a node joined", nodes},
		{"after a node left", nodes[1:]},
	} {
		r.nodeSync(lb, svcs, step.nodes)
		for _, s := range svcs {
			r.checkBackends(step.what+" (UpdateLoadBalancer of every Service with the same nodes)", r.cfg.ClusterName, s, step.nodes)
		}
	}
}

func ruleLBDeleteShared(r *rt) {
	lb := r.lb()
	r.needHook("Backends", r.target().Hooks.Backends)
	nodes := r.nodes(2)
	c := r.cfg.ClusterName
	before := r.owned()
	svcs := r.sharedServices(lb, "delete-shared", 3, nodes)
	for i, s := range svcs {
		if err := lb.EnsureLoadBalancerDeleted(r.ctx, c, s); err != nil {
			r.Fatalf("EnsureLoadBalancerDeleted(%s), %d of %d: %v", svcKey(s), i+1, len(svcs), err)
		}
		for _, other := range svcs[i+1:] {
			r.checkBackends(fmt.Sprintf("after EnsureLoadBalancerDeleted(%s)", svcKey(s)), c, other, nodes)
		}
	}
	r.checkOwned(fmt.Sprintf("after EnsureLoadBalancerDeleted of all %d Services", len(svcs)), before)
}

func ruleLBSharedPoolWrites(r *rt) {
	if !r.cfg.Claims.SharedBackendPools {
		r.Skipf("shared backend pools are not claimed (Config.Claims.SharedBackendPools)")
	}
	lb := r.lb()
	r.needHook("Writes", r.target().Hooks.Writes)
	nodes := r.nodes(2)
	const n = 4
	svcs := r.sharedServices(lb, "pool-writes", n, nodes[:1])
	writes := r.target().Hooks.Writes
	w0 := writes()
	r.nodeSync(lb, svcs, nodes)
	if w := writes() - w0; w != 1 {
		r.Errorf("a node joining %d Services (UpdateLoadBalancer of each with the same nodes) made %d cloud writes, expected 1: the shared backend pool's", n, w)
	}
}
