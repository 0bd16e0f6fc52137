package conformance_test

import (
	"context"
	"errors"
	"slices"
	"sync"

	v1 "k8s.io/api/core/v1"
	cloudprovider "k8s.io/cloud-provider"

	"github.com/ccmkit/ccmkit/fake"
	"github.com/ccmkit/ccmkit/loadbalancer"
	"github.com/ccmkit/ccmkit/testing/conformance"
)

// clausesLBShared declares the clauses of the rules of several Services
// at once (rules_lbshared.go), each quoted from its statement.
func clausesLBShared() map[string][]string {
	return map[string][]string{
		"LB-NODE-SYNC": {"every Service's backends are exactly the nodes given", "also where their load balancers share a backend pool"},
		"LB-DELETE-SHARED": {"a backend pool they share is never emptied", "nor deleted while referenced",
			"deleting the last leaves nothing the provider created"},
		"LB-SHARED-POOL-WRITES": {"costs one cloud write"},
	}
}

// sharedPoolsTarget returns a NewTarget: the fake with shared backend
// pools, its cloud API intercepted by what funcs returns, built for each
// target so that the state of the Funcs is that target's own.
func sharedPoolsTarget(funcs func() fake.Funcs) func(context.Context) (*conformance.Target, error) {
	return func(context.Context) (*conformance.Target, error) {
		return fakeTarget(sharedPoolsConfig(), fake.Options{Interceptor: funcs()})
	}
}

// brokenLBShared returns the broken providers of LB-NODE-SYNC,
// LB-DELETE-SHARED and LB-SHARED-POOL-WRITES.
func brokenLBShared() []brokenCase {
	type bc = brokenCase
	return narrowed(lbOnly, []bc{
		// LB-NODE-SYNC
		{
			name: "update-skips-nodes-already-written", want: "LB-NODE-SYNC", clause: "every Service's backends are exactly the nodes given",
			reason: "UpdateLoadBalancer skips a call whose nodes are those it last wrote for any Service, as if every load balancer shared one backend pool: on load balancers with backends of their own, only the first Service of a node sync gets the new nodes",
			b: lbWrap(func(b *wrappedLB) {
				var mu sync.Mutex
				var last []string
				b.update = func(next cloudprovider.LoadBalancer, ctx context.Context, c string, s *v1.Service, n []*v1.Node) error {
					now := sortedNames(n)
					mu.Lock()
					skip := last != nil && slices.Equal(now, last)
					last = now
					mu.Unlock()
					if skip {
						return nil
					}
					return next.UpdateLoadBalancer(ctx, c, s, n)
				}
			}),
		},
		{
			name: "pool-ignores-member-removals", want: "LB-NODE-SYNC", clause: "also where their load balancers share a backend pool",
			also:   []string{"LB-BACKENDS"},
			reason: "the driver's removal of backend pool members sends IDs the cloud does not know, which it ignores: a node that left stays in the shared pool of every Service; LB-BACKENDS fails too: one Service's pool keeps its node as well",
			target: sharedPoolsTarget(func() fake.Funcs {
				return fake.Funcs{ApplyBackendPool: func(ctx context.Context, next loadbalancer.PoolDriver, a loadbalancer.PoolAction) (*loadbalancer.Pool, error) {
					if a.Kind == loadbalancer.PoolActionRemoveBackends {
						pools, err := next.FindPools(ctx, loadbalancer.PoolQuery{ID: a.PoolID})
						if err != nil || len(pools) == 0 {
							return nil, errors.Join(err, errors.New("no such pool"))
						}
						return pools[0], nil
					}
					return next.ApplyPool(ctx, a)
				}}
			}),
		},

		// LB-DELETE-SHARED
		{
			name: "delete-drains-backends-first", want: "LB-DELETE-SHARED", clause: "a backend pool they share is never emptied",
			reason: "EnsureLoadBalancerDeleted first drains the load balancer (UpdateLoadBalancer with no nodes), then deletes it: on a shared backend pool the drain takes every node from every other Service",
			target: sharedPoolsTarget(func() fake.Funcs { return fake.Funcs{} }),
			b: lbWrap(func(b *wrappedLB) {
				b.del = func(next cloudprovider.LoadBalancer, ctx context.Context, c string, s *v1.Service) error {
					_ = next.UpdateLoadBalancer(ctx, c, s, nil) // nothing to drain is no failure
					return next.EnsureLoadBalancerDeleted(ctx, c, s)
				}
			}),
		},
		{
			name: "lb-delete-takes-its-pool", want: "LB-DELETE-SHARED", clause: "nor deleted while referenced",
			reason: "the driver's Delete removes every cloud object the load balancer uses, its backend pool included, detaching the pool from the other load balancers first when the cloud reports it in use: the other Services' load balancers are left without backends",
			target: sharedPoolsTarget(func() fake.Funcs {
				return fake.Funcs{DeleteLoadBalancer: func(ctx context.Context, next loadbalancer.Driver, lb *loadbalancer.LoadBalancer) error {
					if err := next.Delete(ctx, lb); err != nil || lb.Spec.BackendPool == "" {
						return err
					}
					return forceDeletePool(ctx, next.(loadbalancer.PoolDriver), lb.Tags[loadbalancer.TagCluster], lb.Spec.BackendPool)
				}}
			}),
		},
		{
			name: "pool-delete-skips-pools-with-members", want: "LB-DELETE-SHARED", clause: "deleting the last leaves nothing the provider created",
			also:   []string{"LB-DELETE", "CTRL-SERVICE-DELETE"},
			reason: "the driver's DeletePool answers success without deleting a pool that still has members, as if the cloud drained and deleted it later: the pool outlives its last Service; LB-DELETE and CTRL-SERVICE-DELETE fail too: a Service alone is the last of its pool (LB-DELETE-STALE's Service, externalTrafficPolicy Local, has no pool)",
			target: sharedPoolsTarget(func() fake.Funcs {
				return fake.Funcs{DeleteBackendPool: func(ctx context.Context, next loadbalancer.PoolDriver, p *loadbalancer.Pool) error {
					if len(p.Spec.Backends) > 0 {
						return nil
					}
					return next.DeletePool(ctx, p)
				}}
			}),
		},

		// LB-SHARED-POOL-WRITES
		{
			name: "claims-shared-pools-keeps-backends-per-service", want: "LB-SHARED-POOL-WRITES", clause: "costs one cloud write",
			reason: "the provider claims shared backend pools but keeps backends per load balancer: a node joining costs a write per Service",
			claims: func(c *conformance.Claims) { c.SharedBackendPools = true },
		},
	})
}

// sortedNames returns the names of nodes, sorted.
func sortedNames(nodes []*v1.Node) []string {
	out := make([]string, 0, len(nodes))
	for _, n := range nodes {
		out = append(out, n.Name)
	}
	slices.Sort(out)
	return out
}

// forceDeletePool deletes backend pool id of cluster through d, detaching
// it first from every load balancer that references it: what the broken
// driver lb-delete-takes-its-pool does.
func forceDeletePool(ctx context.Context, d loadbalancer.PoolDriver, cluster, id string) error {
	lbs, err := d.Find(ctx, loadbalancer.Query{Tags: map[string]string{loadbalancer.TagCluster: cluster}})
	if err != nil {
		return err
	}
	for _, lb := range lbs {
		if lb.Spec.BackendPool == id {
			if _, err := d.Apply(ctx, loadbalancer.Action{Kind: loadbalancer.ActionUpdateBackendPool, LoadBalancerID: lb.ID}); err != nil {
				return err
			}
		}
	}
	return d.DeletePool(ctx, &loadbalancer.Pool{ID: id})
}
