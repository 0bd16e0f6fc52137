package conformance_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/types"
	cloudprovider "k8s.io/cloud-provider"
	"k8s.io/cloud-provider/api"

	"github.com/ccmkit/ccmkit/testing/conformance"
)

// brokenLB returns the broken providers of the load-balancer lifecycle rules:
// LB-ENSURE-STATUS to LB-RECREATE, LB-BACKENDS, LB-PORTS,
// LB-CLUSTER-ISOLATION, LB-CONCURRENT and LB-OUTAGE.
func brokenLB() []brokenCase {
	type bc = brokenCase
	return narrowed(lbOnly, []bc{
		// LB-ENSURE-STATUS
		{
			name: "ensure-requires-subnet-annotation", want: "LB-ENSURE-STATUS", clause: "succeeds for a plain TCP Service",
			also:    []string{"CTRL-SERVICE-LB"},
			reason:  "EnsureLoadBalancer requires a provider annotation naming a subnet, so a plain Service without it fails; CTRL-SERVICE-LB fails too: the service controller makes the same Ensure",
			timeout: brokenTimeout,
			b: lbShortCircuit(lbEnsure, func(_ context.Context, s *v1.Service, _ []*v1.Node) (bool, error) {
				if _, ok := s.Annotations["example.com/lb-subnet"]; ok {
					return false, nil
				}
				return true, fmt.Errorf("service %s/%s: annotation example.com/lb-subnet is required", s.Namespace, s.Name)
			}),
		},
		{
			name: "ensure-rejects-no-backends", want: "LB-NO-NODES", clause: "EnsureLoadBalancer of a Service with no nodes succeeds",
			reason: "EnsureLoadBalancer without nodes fails with \"no backends\", as GCE's provider does: upstream retries it (a recommendation fails, and every upstream contract passes: the controller scenarios start the Service with its Node ready, as a kubelet-first cluster does, and CTRL-SERVICE-BEFORE-NODES waits for the retry)",
			b:      rejectNoNodes(lbEnsure),
		},
		{
			name: "update-rejects-no-nodes", want: "LB-NO-NODES", clause: "UpdateLoadBalancer with no nodes succeeds",
			reason: "UpdateLoadBalancer with no nodes fails with \"no backends\": upstream retries it, and every upstream contract passes",
			b:      rejectNoNodes(lbUpdate),
		},
		{
			name: "ensure-nil-status-on-create", want: "LB-ENSURE-STATUS", clause: "with a non-nil status",
			also:    []string{"CTRL-SERVICE-LB"},
			reason:  "the EnsureLoadBalancer that creates a load balancer returns a nil status and no error; CTRL-SERVICE-LB fails too: the service controller fails with \"service status returned by EnsureLoadBalancer is nil\" and retries only after 5s",
			timeout: brokenTimeout,
			b: lbWrap(func(b *wrappedLB) {
				var calls counter
				b.ensure = func(next cloudprovider.LoadBalancer, ctx context.Context, c string, s *v1.Service, n []*v1.Node) (*v1.LoadBalancerStatus, error) {
					st, err := next.EnsureLoadBalancer(ctx, c, s, n)
					if err == nil && calls.add(lbKey(c, s)) == 1 {
						return nil, nil
					}
					return st, err
				}
			}),
		},
		{
			name: "ensure-nil-status-without-backends", want: "LB-NO-NODES", clause: "with an ingress",
			reason: "EnsureLoadBalancer without nodes builds the load balancer but returns a nil status and no error: the service controller fails with \"service status returned by EnsureLoadBalancer is nil\" and retries",
			b: lbWrap(func(b *wrappedLB) {
				b.ensure = func(next cloudprovider.LoadBalancer, ctx context.Context, c string, s *v1.Service, n []*v1.Node) (*v1.LoadBalancerStatus, error) {
					st, err := next.EnsureLoadBalancer(ctx, c, s, n)
					if err == nil && len(n) == 0 {
						return nil, nil
					}
					return st, err
				}
			}),
		},
		{
			name: "ensure-empty-status-while-provisioning", want: "LB-ENSURE-STATUS", clause: "holding at least one ingress",
			also:    []string{"CTRL-SERVICE-LB"},
			reason:  "the first EnsureLoadBalancer of a load balancer returns an empty status and no error while its address is being assigned, instead of an api.RetryError; CTRL-SERVICE-LB fails too: the service controller, told all is well, never asks again, and the Service never gets an ingress",
			timeout: brokenTimeout,
			b: lbWrap(func(b *wrappedLB) {
				var calls counter
				b.ensure = func(next cloudprovider.LoadBalancer, ctx context.Context, c string, s *v1.Service, n []*v1.Node) (*v1.LoadBalancerStatus, error) {
					st, err := next.EnsureLoadBalancer(ctx, c, s, n)
					if err == nil && calls.add(lbKey(c, s)) == 1 {
						return &v1.LoadBalancerStatus{}, nil
					}
					return st, err
				}
			}),
		},
		{
			name: "ensure-never-ready", want: "LB-ENSURE-STATUS", clause: "once it stops returning api.RetryError",
			also:    []string{"CTRL-SERVICE-LB"},
			reason:  "a load balancer never gets an address: EnsureLoadBalancer answers an api.RetryError forever; CTRL-SERVICE-LB fails too",
			timeout: brokenTimeout,
			b: lbWrap(func(b *wrappedLB) {
				b.ensure = func(_ cloudprovider.LoadBalancer, _ context.Context, _ string, s *v1.Service, _ []*v1.Node) (*v1.LoadBalancerStatus, error) {
					return nil, fmt.Errorf("load balancer of %s/%s: %w", s.Namespace, s.Name, api.NewRetryError("no address yet", 100*time.Millisecond))
				}
			}),
		},
		{
			name: "ensure-never-ready-without-backends", want: "LB-NO-NODES", clause: "EnsureLoadBalancer of a Service with no nodes succeeds",
			reason: "a load balancer without backends never gets an address: EnsureLoadBalancer answers an api.RetryError forever until one is attached",
			b: lbWrap(func(b *wrappedLB) {
				b.ensure = func(next cloudprovider.LoadBalancer, ctx context.Context, c string, s *v1.Service, n []*v1.Node) (*v1.LoadBalancerStatus, error) {
					st, err := next.EnsureLoadBalancer(ctx, c, s, n)
					if err != nil || len(n) > 0 {
						return st, err
					}
					return nil, fmt.Errorf("load balancer of %s/%s: %w", s.Namespace, s.Name, api.NewRetryError("no address until a backend is attached", 100*time.Millisecond))
				}
			}),
		},

		// LB-GET-EXISTS
		{
			name: "get-exists-unless-deleted", want: "LB-GET-EXISTS", clause: "exists=false before the first Ensure",
			also:   []string{"CTRL-SERVICE-CLASS", "LB-CLUSTER-ISOLATION"},
			reason: "GetLoadBalancer reports exists=true, with an empty status, for every Service whose load balancer it has not deleted itself: it assumes every LoadBalancer Service has one; CTRL-SERVICE-CLASS and LB-CLUSTER-ISOLATION fail too: they ask about a load balancer never created (a Service with a loadBalancerClass; the other cluster's, before it creates it)",
			b: func() wrapped {
				// Shared by every LoadBalancer the case hands out, the service
				// controller's and the rules': a deletion through either is
				// known to both.
				var deleted sync.Map
				return lbWrap(func(b *wrappedLB) {
					b.get = func(next cloudprovider.LoadBalancer, ctx context.Context, c string, s *v1.Service) (*v1.LoadBalancerStatus, bool, error) {
						st, ok, err := next.GetLoadBalancer(ctx, c, s)
						if _, gone := deleted.Load(lbKey(c, s)); err == nil && !ok && !gone {
							return &v1.LoadBalancerStatus{}, true, nil
						}
						return st, ok, err
					}
					b.del = func(next cloudprovider.LoadBalancer, ctx context.Context, c string, s *v1.Service) error {
						err := next.EnsureLoadBalancerDeleted(ctx, c, s)
						if err == nil {
							deleted.Store(lbKey(c, s), true)
						}
						return err
					}
				})
			}(),
		},
		{
			name: "get-caches-not-found", want: "LB-GET-EXISTS", clause: "true after it",
			reason: "GetLoadBalancer caches exists=false answers, and EnsureLoadBalancer does not drop them: a load balancer looked up before it was created stays missing",
			b: lbWrap(func(b *wrappedLB) {
				var missing sync.Map
				b.get = func(next cloudprovider.LoadBalancer, ctx context.Context, c string, s *v1.Service) (*v1.LoadBalancerStatus, bool, error) {
					if _, ok := missing.Load(lbKey(c, s)); ok {
						return nil, false, nil
					}
					st, ok, err := next.GetLoadBalancer(ctx, c, s)
					if err == nil && !ok {
						missing.Store(lbKey(c, s), true)
					}
					return st, ok, err
				}
			}),
		},
		{
			name: "get-not-exists-without-backends", want: "LB-GET-EXISTS", clause: "also with no backends",
			reason: "Get finds the load balancer through its backends, so one without backends is reported missing",
			b: lbWrap(func(b *wrappedLB) {
				var backends counter
				b.ensure = func(next cloudprovider.LoadBalancer, ctx context.Context, c string, s *v1.Service, n []*v1.Node) (*v1.LoadBalancerStatus, error) {
					backends.set(lbKey(c, s), len(n))
					return next.EnsureLoadBalancer(ctx, c, s, n)
				}
				b.update = func(next cloudprovider.LoadBalancer, ctx context.Context, c string, s *v1.Service, n []*v1.Node) error {
					backends.set(lbKey(c, s), len(n))
					return next.UpdateLoadBalancer(ctx, c, s, n)
				}
				b.get = func(next cloudprovider.LoadBalancer, ctx context.Context, c string, s *v1.Service) (*v1.LoadBalancerStatus, bool, error) {
					if n, ok := backends.get(lbKey(c, s)); ok && n == 0 {
						return nil, false, nil
					}
					return next.GetLoadBalancer(ctx, c, s)
				}
			}),
		},

		// LB-IDEMPOTENT
		{
			name: "ensure-errors-when-converged", want: "LB-IDEMPOTENT", clause: "succeeds",
			also:   []string{"LB-CONCURRENT"},
			reason: "EnsureLoadBalancer of a load balancer that already matches the Service and nodes fails with \"nothing to change\"; LB-CONCURRENT fails too: its concurrent Ensure calls repeat that of its converged shared Service",
			b: lbRemembering(func(b *wrappedLB, mem *lbMemory) {
				b.ensure = func(next cloudprovider.LoadBalancer, ctx context.Context, c string, s *v1.Service, n []*v1.Node) (*v1.LoadBalancerStatus, error) {
					if last, ok := mem.get(lbKey(c, s)); ok && last.same(s, n) {
						return nil, fmt.Errorf("load balancer of %s/%s: nothing to change", s.Namespace, s.Name)
					}
					return next.EnsureLoadBalancer(ctx, c, s, n)
				}
			}),
		},
		{
			name: "ensure-rebuilds-on-node-order", want: "LB-IDEMPOTENT", clause: "the same nodes in any order",
			reason: "EnsureLoadBalancer compares the nodes with the last ones position by position, and rebuilds the load balancer when the same nodes come in another order",
			b: lbRemembering(func(b *wrappedLB, mem *lbMemory) {
				b.ensure = func(next cloudprovider.LoadBalancer, ctx context.Context, c string, s *v1.Service, n []*v1.Node) (*v1.LoadBalancerStatus, error) {
					if last, ok := mem.get(lbKey(c, s)); ok && last.same(s, n) && !slices.Equal(lbNodeNames(last.nodes), lbNodeNames(n)) {
						if err := next.EnsureLoadBalancerDeleted(ctx, c, s); err != nil {
							return nil, err
						}
					}
					return next.EnsureLoadBalancer(ctx, c, s, n)
				}
			}),
		},
		{
			name: "ensure-new-ip", want: "LB-IDEMPOTENT", clause: "returns the same ingress",
			reason: "every Ensure after the first reports a new IP, as if it allocated an address each time",
			b: lbWrap(func(b *wrappedLB) {
				var calls counter
				b.ensure = func(next cloudprovider.LoadBalancer, ctx context.Context, c string, s *v1.Service, n []*v1.Node) (*v1.LoadBalancerStatus, error) {
					st, err := next.EnsureLoadBalancer(ctx, c, s, n)
					if k := calls.add(lbKey(c, s)); err == nil && k > 1 && len(st.Ingress) > 0 {
						st = st.DeepCopy()
						st.Ingress[0].IP = fmt.Sprintf("198.19.255.%d", k%250+1)
					}
					return st, err
				}
			}),
		},
		{
			name: "ensure-creates-a-copy-each-call", want: "LB-IDEMPOTENT", clause: "creates nothing",
			also:   []string{"LB-CONVERGED"},
			reason: "every EnsureLoadBalancer after the first also creates a new load balancer under a fresh name (a create request without a client token, never deduplicated), and the old ones leak; LB-CONVERGED fails too: creating is a cloud write",
			b: lbWrap(func(b *wrappedLB) {
				var calls counter
				b.ensure = func(next cloudprovider.LoadBalancer, ctx context.Context, c string, s *v1.Service, n []*v1.Node) (*v1.LoadBalancerStatus, error) {
					st, err := next.EnsureLoadBalancer(ctx, c, s, n)
					if k := calls.add(lbKey(c, s)); err == nil && k > 1 {
						if _, err := next.EnsureLoadBalancer(ctx, c, lbCompanion(s, fmt.Sprintf("copy-%d", k)), n); err != nil {
							return nil, err
						}
					}
					return st, err
				}
			}),
		},

		// LB-CONVERGED
		{
			name: "ensure-rewrites-backends", want: "LB-CONVERGED", clause: "EnsureLoadBalancer",
			reason: "Ensure removes and re-adds a backend on every call: the right end state, but writes when converged",
			b: lbWrap(func(b *wrappedLB) {
				b.ensure = func(next cloudprovider.LoadBalancer, ctx context.Context, c string, s *v1.Service, n []*v1.Node) (*v1.LoadBalancerStatus, error) {
					if len(n) > 0 {
						_ = next.UpdateLoadBalancer(ctx, c, s, n[:len(n)-1])
					}
					return next.EnsureLoadBalancer(ctx, c, s, n)
				}
			}),
		},
		{
			name: "update-rewrites-backends", want: "LB-CONVERGED", clause: "UpdateLoadBalancer on a converged load balancer",
			reason: "Update removes and re-adds a backend on every call: the right end state, but writes when nothing changed",
			b: lbWrap(func(b *wrappedLB) {
				b.update = func(next cloudprovider.LoadBalancer, ctx context.Context, c string, s *v1.Service, n []*v1.Node) error {
					if len(n) > 0 {
						if err := next.UpdateLoadBalancer(ctx, c, s, n[:len(n)-1]); err != nil {
							return err
						}
					}
					return next.UpdateLoadBalancer(ctx, c, s, n)
				}
			}),
		},

		// LB-DELETE
		{
			name: "get-caches-found", want: "LB-DELETE", clause: "GetLoadBalancer reports exists=false",
			also:   []string{"LB-DELETE-STALE"}, // asks GetLoadBalancer before deleting, as the service controller does
			reason: "GetLoadBalancer caches exists=true answers, and EnsureLoadBalancerDeleted does not drop them: a deleted load balancer is still reported",
			b: lbWrap(func(b *wrappedLB) {
				var found sync.Map
				b.get = func(next cloudprovider.LoadBalancer, ctx context.Context, c string, s *v1.Service) (*v1.LoadBalancerStatus, bool, error) {
					if st, ok := found.Load(lbKey(c, s)); ok {
						return st.(*v1.LoadBalancerStatus), true, nil
					}
					st, ok, err := next.GetLoadBalancer(ctx, c, s)
					if err == nil && ok {
						found.Store(lbKey(c, s), st)
					}
					return st, ok, err
				}
			}),
		},
		{
			name: "delete-leaves-firewall", want: "LB-DELETE", clause: "nothing the provider created remains",
			also:   []string{"LB-DELETE-STALE", "LB-DELETE-SHARED", "LB-CLUSTER-ISOLATION", "CTRL-SERVICE-DELETE"},
			reason: "EnsureLoadBalancer with nodes opens a firewall for them (here a second cloud load balancer), which UpdateLoadBalancer closes when the last node goes, but EnsureLoadBalancerDeleted forgets; LB-DELETE-STALE, LB-DELETE-SHARED, LB-CLUSTER-ISOLATION and CTRL-SERVICE-DELETE fail too: they delete load balancers with nodes, as a cluster does, and check what remains",
			b: lbWrap(func(b *wrappedLB) {
				b.ensure = func(next cloudprovider.LoadBalancer, ctx context.Context, c string, s *v1.Service, n []*v1.Node) (*v1.LoadBalancerStatus, error) {
					if len(n) > 0 {
						if _, err := next.EnsureLoadBalancer(ctx, c, lbCompanion(s, "fw"), nil); err != nil {
							return nil, err
						}
					}
					return next.EnsureLoadBalancer(ctx, c, s, n)
				}
				b.update = func(next cloudprovider.LoadBalancer, ctx context.Context, c string, s *v1.Service, n []*v1.Node) error {
					if len(n) == 0 {
						if err := next.EnsureLoadBalancerDeleted(ctx, c, lbCompanion(s, "fw")); err != nil {
							return err
						}
					}
					return next.UpdateLoadBalancer(ctx, c, s, n)
				}
			}),
		},

		// LB-DELETE-UNKNOWN
		{
			name: "delete-unknown-errors", want: "LB-DELETE-UNKNOWN", clause: "that never existed",
			reason: "deleting a load balancer that is not there is an error",
			b: lbWrap(func(b *wrappedLB) {
				b.del = func(next cloudprovider.LoadBalancer, ctx context.Context, c string, s *v1.Service) error {
					if _, ok, err := next.GetLoadBalancer(ctx, c, s); err == nil && !ok {
						return fmt.Errorf("load balancer of %s/%s not found", s.Namespace, s.Name)
					}
					return next.EnsureLoadBalancerDeleted(ctx, c, s)
				}
			}),
		},
		{
			name: "delete-twice-errors", want: "LB-DELETE-UNKNOWN", clause: "is already gone",
			reason: "EnsureLoadBalancerDeleted keeps a tombstone of every load balancer it deleted and answers \"already deleted\" when asked again",
			b: lbWrap(func(b *wrappedLB) {
				var deleted sync.Map
				b.del = func(next cloudprovider.LoadBalancer, ctx context.Context, c string, s *v1.Service) error {
					if _, ok := deleted.Load(lbKey(c, s)); ok {
						return fmt.Errorf("load balancer of %s/%s: already deleted", s.Namespace, s.Name)
					}
					_, existed, err := next.GetLoadBalancer(ctx, c, s)
					if err != nil {
						return err
					}
					if err := next.EnsureLoadBalancerDeleted(ctx, c, s); err != nil {
						return err
					}
					if existed {
						deleted.Store(lbKey(c, s), true)
					}
					return nil
				}
			}),
		},

		// LB-DELETE-STALE
		{
			name: "get-needs-lb-type", want: "LB-DELETE-STALE", clause: "GetLoadBalancer reports the load balancer",
			reason: "GetLoadBalancer reports exists=false for a Service that is no longer type LoadBalancer, so the service controller never deletes its load balancer",
			b: lbWrap(func(b *wrappedLB) {
				b.get = func(next cloudprovider.LoadBalancer, ctx context.Context, c string, s *v1.Service) (*v1.LoadBalancerStatus, bool, error) {
					if s.Spec.Type != v1.ServiceTypeLoadBalancer {
						return nil, false, nil
					}
					return next.GetLoadBalancer(ctx, c, s)
				}
			}),
		},
		{
			name: "delete-needs-lb-type", want: "LB-DELETE-STALE", clause: "type ClusterIP",
			reason: "Delete does nothing for a Service that is no longer type LoadBalancer",
			b: lbShortCircuit(lbDelete, func(_ context.Context, s *v1.Service, _ []*v1.Node) (bool, error) {
				return s.Spec.Type != v1.ServiceTypeLoadBalancer, nil
			}),
		},
		{
			name: "delete-by-node-ports", want: "LB-DELETE-STALE", clause: "node ports 0",
			reason: "Delete finds the listeners to remove by the Service's node ports, and removes nothing when they are 0",
			b: lbShortCircuit(lbDelete, func(ctx context.Context, s *v1.Service, _ []*v1.Node) (bool, error) {
				return ctx.Err() == nil && !slices.ContainsFunc(s.Spec.Ports, func(p v1.ServicePort) bool { return p.NodePort != 0 }), nil
			}),
		},
		{
			name: "delete-by-status-ip", want: "LB-DELETE-STALE", clause: "no status",
			reason: "Delete finds the load balancer by the IP in the Service's status, and does nothing when the status is empty",
			b: lbShortCircuit(lbDelete, func(ctx context.Context, s *v1.Service, _ []*v1.Node) (bool, error) {
				return ctx.Err() == nil && len(s.Status.LoadBalancer.Ingress) == 0, nil
			}),
		},

		// LB-RECREATE
		{
			name: "ensure-from-status-cache", want: "LB-RECREATE", clause: "builds the load balancer again",
			reason: "EnsureLoadBalancer answers a request equal to the last one from its status cache without asking the cloud, and EnsureLoadBalancerDeleted does not drop the cache: a deleted load balancer is never built again",
			b: lbWrap(func(b *wrappedLB) {
				var mu sync.Mutex
				type entry struct {
					req lbRequest
					st  *v1.LoadBalancerStatus
				}
				cache := map[string]entry{}
				b.ensure = func(next cloudprovider.LoadBalancer, ctx context.Context, c string, s *v1.Service, n []*v1.Node) (*v1.LoadBalancerStatus, error) {
					k := lbKey(c, s)
					mu.Lock()
					e, ok := cache[k]
					mu.Unlock()
					if ok && e.req.same(s, n) {
						return e.st.DeepCopy(), nil
					}
					st, err := next.EnsureLoadBalancer(ctx, c, s, n)
					if err == nil && st != nil {
						mu.Lock()
						cache[k] = entry{lbRequestOf(s, n), st.DeepCopy()}
						mu.Unlock()
					}
					return st, err
				}
			}),
		},

		// LB-BACKENDS
		{
			name: "update-only-adds-backends", want: "LB-BACKENDS", clause: "The backends are exactly the nodes given",
			also:   []string{"LB-NODE-SYNC"},
			reason: "UpdateLoadBalancer adds the nodes it is given but never removes a backend; LB-NODE-SYNC fails too: its node leaves every Service",
			b: lbRemembering(func(b *wrappedLB, mem *lbMemory) {
				b.update = func(next cloudprovider.LoadBalancer, ctx context.Context, c string, s *v1.Service, n []*v1.Node) error {
					all := slices.Clone(n)
					if last, ok := mem.get(lbKey(c, s)); ok {
						for _, old := range last.nodes {
							if !slices.Contains(lbNodeNames(all), old.Name) {
								all = append(all, old)
							}
						}
					}
					return next.UpdateLoadBalancer(ctx, c, s, all)
				}
			}),
		},
		{
			name: "ensure-keeps-backends", want: "LB-BACKENDS", clause: "the last Ensure or Update",
			reason: "EnsureLoadBalancer of an existing load balancer leaves its backends as they are, assuming UpdateLoadBalancer keeps them",
			b: lbRemembering(func(b *wrappedLB, mem *lbMemory) {
				b.ensure = func(next cloudprovider.LoadBalancer, ctx context.Context, c string, s *v1.Service, n []*v1.Node) (*v1.LoadBalancerStatus, error) {
					if last, ok := mem.get(lbKey(c, s)); ok {
						n = last.nodes
					}
					return next.EnsureLoadBalancer(ctx, c, s, n)
				}
			}),
		},
		{
			name: "drops-notready-nodes", want: "LB-BACKENDS", clause: "NotReady nodes",
			reason: "NotReady nodes are filtered out, which the service controller deliberately does not do",
			b:      lbFilterNodes(readyFalse),
		},
		{
			name: "drops-nodes-without-addresses", want: "LB-BACKENDS", clause: "nodes whose addresses are not set yet included",
			reason: "nodes without an InternalIP are left out as not ready to serve, but the service controller never gives them again once the cloud node controller sets their addresses",
			b: lbFilterNodes(func(n *v1.Node) bool {
				return !slices.ContainsFunc(n.Status.Addresses, func(a v1.NodeAddress) bool { return a.Type == v1.NodeInternalIP })
			}),
		},

		// LB-PORTS
		{
			name: "ensure-keeps-old-ports", want: "LB-PORTS", clause: "a changed port replaces the old one",
			also:   []string{"CTRL-SERVICE-PORT"},
			reason: "EnsureLoadBalancer adds a listener for every port it is given but never removes one, so a changed port leaves the old listener open; CTRL-SERVICE-PORT fails too: it changes a port through the service controller",
			b: lbRebuildFromLast(func(last, s *v1.Service) {
				for _, p := range last.Spec.Ports {
					if !slices.ContainsFunc(s.Spec.Ports, func(q v1.ServicePort) bool { return q.Port == p.Port && q.Protocol == p.Protocol }) {
						s.Spec.Ports = append(s.Spec.Ports, p)
					}
				}
			}),
		},
		{
			name: "ensure-never-adds-ports", want: "LB-PORTS", clause: "an added port is added",
			reason: "EnsureLoadBalancer of an existing load balancer updates its listeners in place, one per port it had, and ignores ports added since",
			b: lbRebuildFromLast(func(last, s *v1.Service) {
				s.Spec.Ports = s.Spec.Ports[:min(len(s.Spec.Ports), len(last.Spec.Ports))]
			}),
		},

		// LB-CLUSTER-ISOLATION
		{
			name: "cross-cluster-hijack", want: "LB-CLUSTER-ISOLATION", clause: "never see", sharesLBs: true,
			reason: "load balancers are identified by namespace/name alone, ignoring the cluster (and so the Service UID)",
			b:      lbByNamespaceName(),
		},
		{
			name: "other-cluster-gets-by-uid", want: "LB-CLUSTER-ISOLATION", clause: "never see",
			reason: "with Target.OtherCluster: GetLoadBalancer looks load balancers up by cluster name and Service UID (both equal in the two clusters) instead of its own cluster ID, so it reports the other cluster's",
			target: lbOtherClusterSharing(true, false, false),
		},
		{
			name: "other-cluster-updates-by-uid", want: "LB-CLUSTER-ISOLATION", clause: "update",
			reason: "with Target.OtherCluster: UpdateLoadBalancer finds its load balancer by cluster name and Service UID (both equal in the two clusters), so it sets the other cluster's backends",
			target: lbOtherClusterSharing(false, true, false),
		},
		{
			name: "other-cluster-deletes-by-uid", want: "LB-CLUSTER-ISOLATION", clause: "delete each other's load balancer",
			reason: "with Target.OtherCluster: EnsureLoadBalancerDeleted finds its load balancer by cluster name and Service UID (both equal in the two clusters), so it deletes the other cluster's",
			target: lbOtherClusterSharing(false, false, true),
		},
		{
			name: "lb-ignores-cluster-name", want: "LB-CLUSTER-ISOLATION", clause: "Two clusters with a Service of the same namespace and name",
			reason: "without Target.OtherCluster: load balancers are identified by namespace/name alone, ignoring the clusterName argument and the Service UID, so two clusters' Services of one namespace and name share a load balancer",
			// Without OtherCluster the fake's routes, owned by its cluster ID
			// as well, fail ROUTE-CLUSTER-SCOPE: not claimed here.
			claims: func(c *conformance.Claims) { c.Routes = false },
			target: oneClusterTarget,
			b:      lbByNamespaceName(),
		},
		{
			name: "lb-keyed-by-uid-across-clusters", want: "LB-CLUSTER-ISOLATION", clause: "also the same UID and cluster name",
			reason: "with Target.OtherCluster: the other cluster's provider finds load balancers by cluster name and Service UID, both equal, not by its own cluster ID",
			target: twoClusters(true, false),
		},

		// LB-CONCURRENT
		{
			name: "concurrent-conflict", want: "LB-CONCURRENT", clause: "all succeed",
			reason: "a call on a load balancer that another call is changing fails with \"operation in progress\" instead of waiting for it",
			b: lbWrap(func(b *wrappedLB) {
				var busy lbBusy
				b.ensure = ensureAlone(&busy, "operation in progress")
				b.update = func(next cloudprovider.LoadBalancer, ctx context.Context, c string, s *v1.Service, n []*v1.Node) error {
					defer busy.enter(lbKey(c, s))()
					if err := busy.refuse(c, s, "operation in progress"); err != nil {
						return err
					}
					return next.UpdateLoadBalancer(ctx, c, s, n)
				}
			}),
		},
		{
			name: "concurrent-shared-request", want: "LB-CONCURRENT", clause: "leave every load balancer converged",
			reason: "EnsureLoadBalancer builds its request in one field shared by all calls, so concurrent calls for several Services build one of them, and all report success",
			b: lbWrap(func(b *wrappedLB) {
				var mu sync.Mutex
				var pending *v1.Service // the request being built
				b.ensure = func(next cloudprovider.LoadBalancer, ctx context.Context, c string, s *v1.Service, n []*v1.Node) (*v1.LoadBalancerStatus, error) {
					mu.Lock()
					pending = s
					mu.Unlock()
					lbOverlap() // building the request takes a while
					mu.Lock()
					s = pending
					mu.Unlock()
					return next.EnsureLoadBalancer(ctx, c, s, n)
				}
			}),
		},

		{
			name: "ensure-once-at-a-time", want: "", // correct: passes every rule
			reason: "an EnsureLoadBalancer of a Service while another Ensure of it is in flight fails (GCE's provider races itself there: each Ensure reserves the static IP and releases it); the service controller's workqueue never makes that call, so LB-CONCURRENT must not either",
			b: lbWrap(func(b *wrappedLB) {
				var ensuring lbBusy
				b.ensure = ensureAlone(&ensuring, "static IP address released by a concurrent Ensure")
			}),
		},

		// LB-OUTAGE
		{
			name: "get-not-exists-on-error", want: "LB-OUTAGE", clause: "GetLoadBalancer returns an error, never exists=false",
			reason: "any cloud error from the look-up is taken for \"not found\"",
			b: lbWrap(func(b *wrappedLB) {
				b.get = func(next cloudprovider.LoadBalancer, ctx context.Context, c string, s *v1.Service) (*v1.LoadBalancerStatus, bool, error) {
					st, ok, err := next.GetLoadBalancer(ctx, c, s)
					if err != nil && ctx.Err() == nil {
						return nil, false, nil
					}
					return st, ok, err
				}
			}),
		},
	})
}

// clausesLB returns the clauses of the statements of the rules of this
// file, each quoted from its statement (see TestBrokenCoverage).
func clausesLB() map[string][]string {
	return map[string][]string{
		"LB-ENSURE-STATUS":     {"succeeds for a plain TCP Service", "with a non-nil status", "holding at least one ingress", "once it stops returning api.RetryError"},
		"LB-NO-NODES":          {"EnsureLoadBalancer of a Service with no nodes succeeds", "with an ingress", "UpdateLoadBalancer with no nodes succeeds"},
		"LB-GET-EXISTS":        {"exists=false before the first Ensure", "true after it", "also with no backends"},
		"LB-IDEMPOTENT":        {"succeeds", "the same nodes in any order", "returns the same ingress", "creates nothing"},
		"LB-CONVERGED":         {"EnsureLoadBalancer", "UpdateLoadBalancer on a converged load balancer"},
		"LB-DELETE":            {"GetLoadBalancer reports exists=false", "nothing the provider created remains"},
		"LB-DELETE-UNKNOWN":    {"that never existed", "is already gone"},
		"LB-DELETE-STALE":      {"GetLoadBalancer reports the load balancer", "type ClusterIP", "node ports 0", "no status"},
		"LB-RECREATE":          {"builds the load balancer again"},
		"LB-BACKENDS":          {"The backends are exactly the nodes given", "the last Ensure or Update", "NotReady nodes", "nodes whose addresses are not set yet included"},
		"LB-PORTS":             {"a changed port replaces the old one", "an added port is added"},
		"LB-CLUSTER-ISOLATION": {"Two clusters with a Service of the same namespace and name", "never see", "update", "delete each other's load balancer", "also the same UID and cluster name"},
		"LB-CONCURRENT":        {"all succeed", "leave every load balancer converged"},
		"LB-OUTAGE":            {"GetLoadBalancer returns an error, never exists=false"},
	}
}

// lbOnly narrows the claims to the LoadBalancer capability (and its
// features), for the broken providers that break load balancers alone: the
// rules of the other capabilities never call it, and pass or fail alike
// without them (see narrowed).
func lbOnly(c *conformance.Claims) { c.InstancesV2, c.Routes, c.Zones = false, false, false }

// lbByNamespaceName breaks every LoadBalancer method by identifying load
// balancers by the Service's namespace/name alone: every cluster's Service
// of that namespace and name is mapped to the UID of the first one seen and
// to one cluster name.
func lbByNamespaceName() wrapped {
	return lbWrap(func(b *wrappedLB) {
		var mu sync.Mutex
		uids := map[string]types.UID{}
		one := func(s *v1.Service) *v1.Service {
			mu.Lock()
			defer mu.Unlock()
			k := s.Namespace + "/" + s.Name
			if _, ok := uids[k]; !ok {
				uids[k] = s.UID
			}
			s = s.DeepCopy()
			s.UID = uids[k]
			return s
		}
		const c0 = "conformance"
		b.get = func(next cloudprovider.LoadBalancer, ctx context.Context, _ string, s *v1.Service) (*v1.LoadBalancerStatus, bool, error) {
			return next.GetLoadBalancer(ctx, c0, one(s))
		}
		b.ensure = func(next cloudprovider.LoadBalancer, ctx context.Context, _ string, s *v1.Service, n []*v1.Node) (*v1.LoadBalancerStatus, error) {
			return next.EnsureLoadBalancer(ctx, c0, one(s), n)
		}
		b.update = func(next cloudprovider.LoadBalancer, ctx context.Context, _ string, s *v1.Service, n []*v1.Node) error {
			return next.UpdateLoadBalancer(ctx, c0, one(s), n)
		}
		b.del = func(next cloudprovider.LoadBalancer, ctx context.Context, _ string, s *v1.Service) error {
			return next.EnsureLoadBalancerDeleted(ctx, c0, one(s))
		}
	})
}

// lbCall names a LoadBalancer call that lbShortCircuit breaks.
type lbCall int

const (
	lbEnsure lbCall = iota
	lbUpdate
	lbDelete
)

// lbShortCircuit breaks the call named: when answer reports done for a
// call's context, Service and nodes (nil for lbDelete), the call returns
// answer's error (and no status) without reaching the cloud; the other
// calls reach it.
func lbShortCircuit(call lbCall, answer func(ctx context.Context, s *v1.Service, n []*v1.Node) (done bool, err error)) wrapped {
	return lbWrap(func(b *wrappedLB) {
		switch call {
		case lbEnsure:
			b.ensure = func(next cloudprovider.LoadBalancer, ctx context.Context, c string, s *v1.Service, n []*v1.Node) (*v1.LoadBalancerStatus, error) {
				if done, err := answer(ctx, s, n); done {
					return nil, err
				}
				return next.EnsureLoadBalancer(ctx, c, s, n)
			}
		case lbUpdate:
			b.update = func(next cloudprovider.LoadBalancer, ctx context.Context, c string, s *v1.Service, n []*v1.Node) error {
				if done, err := answer(ctx, s, n); done {
					return err
				}
				return next.UpdateLoadBalancer(ctx, c, s, n)
			}
		case lbDelete:
			b.del = func(next cloudprovider.LoadBalancer, ctx context.Context, c string, s *v1.Service) error {
				if done, err := answer(ctx, s, nil); done {
					return err
				}
				return next.EnsureLoadBalancerDeleted(ctx, c, s)
			}
		default:
			panic(fmt.Sprintf("lbShortCircuit: unknown lbCall %d", call))
		}
	})
}

// lbFilterNodes breaks EnsureLoadBalancer and UpdateLoadBalancer by leaving
// out the nodes for which drop is true.
func lbFilterNodes(drop func(*v1.Node) bool) wrapped {
	keep := func(n []*v1.Node) []*v1.Node { return slices.DeleteFunc(slices.Clone(n), drop) }
	return lbWrap(func(b *wrappedLB) {
		b.ensure = func(next cloudprovider.LoadBalancer, ctx context.Context, c string, s *v1.Service, n []*v1.Node) (*v1.LoadBalancerStatus, error) {
			return next.EnsureLoadBalancer(ctx, c, s, keep(n))
		}
		b.update = func(next cloudprovider.LoadBalancer, ctx context.Context, c string, s *v1.Service, n []*v1.Node) error {
			return next.UpdateLoadBalancer(ctx, c, s, keep(n))
		}
	})
}

// lbRemembering is lbWrap for a provider that remembers the last request
// that succeeded for each load balancer (mem, tracking the methods set
// sets).
func lbRemembering(set func(b *wrappedLB, mem *lbMemory)) wrapped {
	return lbWrap(func(b *wrappedLB) {
		var mem lbMemory
		set(b, &mem)
		mem.track(b)
	})
}

// lbRebuildFromLast breaks EnsureLoadBalancer of an existing load
// balancer: it builds what f makes of a copy of the Service s, given last,
// the Service as built by the last Ensure that succeeded, and remembers
// what it built; Delete forgets it.
func lbRebuildFromLast(f func(last, s *v1.Service)) wrapped {
	return lbWrap(func(b *wrappedLB) {
		var mem lbMemory
		b.ensure = func(next cloudprovider.LoadBalancer, ctx context.Context, c string, s *v1.Service, n []*v1.Node) (*v1.LoadBalancerStatus, error) {
			if last, ok := mem.get(lbKey(c, s)); ok {
				s = s.DeepCopy()
				f(last.svc, s)
			}
			st, err := next.EnsureLoadBalancer(ctx, c, s, n)
			if err == nil {
				mem.put(lbKey(c, s), s, n)
			}
			return st, err
		}
		b.del = func(next cloudprovider.LoadBalancer, ctx context.Context, c string, s *v1.Service) error {
			err := next.EnsureLoadBalancerDeleted(ctx, c, s)
			if err == nil {
				mem.drop(lbKey(c, s))
			}
			return err
		}
	})
}

// lbCompanion returns a copy of s under another name and UID (suffixed with
// what): a second cloud load balancer standing for a resource a provider
// creates next to the one of s.
func lbCompanion(s *v1.Service, what string) *v1.Service {
	c := s.DeepCopy()
	c.Name += "-" + what
	c.UID += types.UID("-" + what)
	return c
}

// lbRequest is what a provider was asked for a load balancer: the Service,
// and the nodes in the order given.
type lbRequest struct {
	svc   *v1.Service
	nodes []*v1.Node
}

func lbRequestOf(s *v1.Service, n []*v1.Node) lbRequest {
	objs := make([]*v1.Node, len(n))
	for i, node := range n {
		objs[i] = node.DeepCopy()
	}
	return lbRequest{svc: s.DeepCopy(), nodes: objs}
}

// same reports whether s and n ask for what q asked for: an equal spec and
// annotations, and the same nodes in any order.
func (q lbRequest) same(s *v1.Service, n []*v1.Node) bool {
	return equality.Semantic.DeepEqual(q.svc.Spec, s.Spec) && maps.Equal(q.svc.Annotations, s.Annotations) &&
		slices.Equal(lbSorted(lbNodeNames(q.nodes)), lbSorted(lbNodeNames(n)))
}

func lbNodeNames(n []*v1.Node) []string {
	out := make([]string, len(n))
	for i, node := range n {
		out[i] = node.Name
	}
	return out
}

func lbSorted(s []string) []string {
	out := slices.Clone(s)
	slices.Sort(out)
	return out
}

// lbMemory is what a provider remembers of each load balancer (by lbKey):
// the last request that succeeded. It is safe for concurrent use.
type lbMemory struct {
	mu sync.Mutex
	m  map[string]lbRequest
}

func (m *lbMemory) get(k string) (lbRequest, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	q, ok := m.m[k]
	return q, ok
}

func (m *lbMemory) put(k string, s *v1.Service, n []*v1.Node) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.m == nil {
		m.m = map[string]lbRequest{}
	}
	m.m[k] = lbRequestOf(s, n)
}

func (m *lbMemory) drop(k string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.m, k)
}

// track makes b's Ensure and Update (as set so far) remember each request
// that succeeds, and its Delete forget the load balancer.
func (m *lbMemory) track(b *wrappedLB) {
	set := *b // the methods as set so far, over the same next
	b.ensure = func(_ cloudprovider.LoadBalancer, ctx context.Context, c string, s *v1.Service, n []*v1.Node) (*v1.LoadBalancerStatus, error) {
		st, err := set.EnsureLoadBalancer(ctx, c, s, n)
		if err == nil {
			m.put(lbKey(c, s), s, n)
		}
		return st, err
	}
	b.update = func(_ cloudprovider.LoadBalancer, ctx context.Context, c string, s *v1.Service, n []*v1.Node) error {
		err := set.UpdateLoadBalancer(ctx, c, s, n)
		if err == nil {
			if last, ok := m.get(lbKey(c, s)); ok {
				m.put(lbKey(c, s), last.svc, n)
			}
		}
		return err
	}
	b.del = func(_ cloudprovider.LoadBalancer, ctx context.Context, c string, s *v1.Service) error {
		err := set.EnsureLoadBalancerDeleted(ctx, c, s)
		if err == nil {
			m.drop(lbKey(c, s))
		}
		return err
	}
}

// lbOverlapTime is how long a call of a broken provider that races its
// concurrent calls holds its window open: long enough for LB-CONCURRENT's
// calls, all started together, to meet in it.
const lbOverlapTime = 20 * time.Millisecond

func lbOverlap() { time.Sleep(lbOverlapTime) }

// lbBusy counts the calls in flight per load balancer, for a provider that
// refuses a call while another one is changing the same load balancer.
type lbBusy struct {
	mu sync.Mutex
	n  map[string]int
}

// enter counts a call on k for lbOverlapTime (the call's window) and
// returns the function that ends it.
func (b *lbBusy) enter(k string) (leave func()) {
	b.mu.Lock()
	if b.n == nil {
		b.n = map[string]int{}
	}
	b.n[k]++
	b.mu.Unlock()
	return func() {
		lbOverlap()
		b.mu.Lock()
		b.n[k]--
		b.mu.Unlock()
	}
}

// refuse returns the error, ending in why, that a call on the load
// balancer of s in cluster c fails with while another call on it is in
// flight, or nil.
func (b *lbBusy) refuse(c string, s *v1.Service, why string) error {
	if !b.others(lbKey(c, s)) {
		return nil
	}
	return fmt.Errorf("load balancer of %s/%s: %s", s.Namespace, s.Name, why)
}

// ensureAlone returns an EnsureLoadBalancer that counts itself in busy and
// fails (busy.refuse) while another call counted there is in flight on the
// same load balancer.
func ensureAlone(busy *lbBusy, why string) func(cloudprovider.LoadBalancer, context.Context, string, *v1.Service, []*v1.Node) (*v1.LoadBalancerStatus, error) {
	return func(next cloudprovider.LoadBalancer, ctx context.Context, c string, s *v1.Service, n []*v1.Node) (*v1.LoadBalancerStatus, error) {
		defer busy.enter(lbKey(c, s))()
		if err := busy.refuse(c, s, why); err != nil {
			return nil, err
		}
		return next.EnsureLoadBalancer(ctx, c, s, n)
	}
}

// others reports whether another call on k is in flight.
func (b *lbBusy) others(k string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.n[k] > 1
}

// lbOtherClusterSharing returns a NewTarget like newFakeTarget whose
// OtherCluster's provider makes the calls named (get, update, del) on
// Target.Cloud's load balancers instead of its own: a provider that finds
// load balancers by cluster name and Service UID in those calls, and by its
// own cluster ID in the others.
func lbOtherClusterSharing(get, update, del bool) func(context.Context) (*conformance.Target, error) {
	return targetWith(func(tgt *conformance.Target) error {
		shared, ok := tgt.Cloud.LoadBalancer()
		if !ok {
			return errors.New("the fake offers no LoadBalancer")
		}
		tgt.OtherCluster = &wrapped{Interface: tgt.OtherCluster, lb: func(b wrappedLB) cloudprovider.LoadBalancer {
			if get {
				b.get = func(_ cloudprovider.LoadBalancer, ctx context.Context, c string, s *v1.Service) (*v1.LoadBalancerStatus, bool, error) {
					return shared.GetLoadBalancer(ctx, c, s)
				}
			}
			if update {
				b.update = func(_ cloudprovider.LoadBalancer, ctx context.Context, c string, s *v1.Service, n []*v1.Node) error {
					return shared.UpdateLoadBalancer(ctx, c, s, n)
				}
			}
			if del {
				b.del = func(_ cloudprovider.LoadBalancer, ctx context.Context, c string, s *v1.Service) error {
					return shared.EnsureLoadBalancerDeleted(ctx, c, s)
				}
			}
			return b
		}}
		return nil
	})
}

// rejectNoNodes breaks call (lbEnsure or lbUpdate) by failing it with
// "no backends" whenever it is given no nodes, as GCE's provider does.
func rejectNoNodes(call lbCall) wrapped {
	return lbShortCircuit(call, func(_ context.Context, s *v1.Service, n []*v1.Node) (bool, error) {
		if len(n) > 0 {
			return false, nil
		}
		return true, fmt.Errorf("load balancer of %s/%s: no backends", s.Namespace, s.Name)
	})
}
