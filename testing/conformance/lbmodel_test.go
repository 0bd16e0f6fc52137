package conformance_test

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	v1 "k8s.io/api/core/v1"
	cloudprovider "k8s.io/cloud-provider"

	"github.com/ccmkit/ccmkit/annotation"
	"github.com/ccmkit/ccmkit/fake"
	"github.com/ccmkit/ccmkit/loadbalancer"
	"github.com/ccmkit/ccmkit/testing/conformance"
)

// This file holds "pools", a load-balancer cloud the fake cannot be: every
// listener has a pool of its own, with its members and its health monitor
// (loadbalancer.Capabilities.ListenerPools, as in OpenStack Octavia), a
// listener serves an application protocol and holds a certificate per port
// (an annotation.PerPort setting), and a load balancer may stay busy after
// each write, refusing the next one meanwhile. Its provider is ccmkit's
// Reconciler over a Driver of the model's reference semantics
// (loadbalancer.Apply); instances and routes are the fake's.

// poolsAppProtocols are the application protocols of the pools cloud.
var poolsAppProtocols = []string{"http", "https"}

// poolsAnnotations are the pools provider's declared annotations: a
// certificate per port.
var (
	poolsAnnotations = &annotation.Set{}
	poolsCertificate = poolsAnnotations.MustDeclare(annotation.Annotation{
		Name: "pools.example.com/certificate", Kind: annotation.KindString, PerPort: true, Setting: true,
		Doc: "The certificate a port's listener presents, as PORT=NAME entries.",
	})
)

// poolsPortSetting is Config.PortSetting for the pools provider.
var poolsPortSetting = &conformance.PortSetting{Annotation: poolsCertificate.Name, Values: [2]string{"cert-a", "cert-b"}}

// poolsDamage says what Hooks.Damage removes from a pools load balancer.
type poolsDamage int

const (
	damageMember poolsDamage = iota // one member of the first listener's pool
	damagePool                      // the first listener's pool, with its members and health monitor
)

// poolsCloud is the pools cloud: load balancers by ID, each busy for
// busyAfter after a write (0: never). It is a loadbalancer.Driver, safe for
// concurrent use.
type poolsCloud struct {
	busyAfter time.Duration
	// rewriteAll breaks the cloud's API: updating a listener rewrites
	// every listener of the load balancer, one write each.
	rewriteAll bool

	writes atomic.Int64
	down   atomic.Bool // Hooks.Outage

	mu    sync.Mutex
	lbs   map[string]*loadbalancer.LoadBalancer // by ID
	until map[string]time.Time                  // by ID: busy until then
	last  int                                   // the last load-balancer number
}

var _ loadbalancer.Driver = (*poolsCloud)(nil)

// errPoolsOutage is every answer of the pools cloud during Hooks.Outage.
var errPoolsOutage = errors.New("pools: 503 service unavailable")

func (p *poolsCloud) Find(_ context.Context, q loadbalancer.Query) ([]*loadbalancer.LoadBalancer, error) {
	if p.down.Load() {
		return nil, errPoolsOutage
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	out := []*loadbalancer.LoadBalancer{}
	for _, id := range slices.Sorted(maps.Keys(p.lbs)) {
		lb := p.lbs[id]
		if (q.ID == "" || q.ID == id) && (q.Name == "" || q.Name == lb.Name) && hasAll(lb.Tags, q.Tags) {
			out = append(out, lb.Clone())
		}
	}
	return out, nil
}

func hasAll(tags, want map[string]string) bool {
	for k, v := range want {
		if got, ok := tags[k]; !ok || got != v {
			return false
		}
	}
	return true
}

// Apply performs a with the model's reference semantics; while the load
// balancer is busy it refuses (loadbalancer.Busy with ErrRefused), and
// after a write it answers loadbalancer.Busy, the load balancer busy for
// busyAfter.
func (p *poolsCloud) Apply(_ context.Context, a loadbalancer.Action) (*loadbalancer.LoadBalancer, error) {
	if p.down.Load() {
		return nil, errPoolsOutage
	}
	p.writes.Add(1)
	p.mu.Lock()
	defer p.mu.Unlock()
	now := time.Now()
	if left := p.until[a.LoadBalancerID].Sub(now); left > 0 {
		return nil, fmt.Errorf("pools: 409 PENDING_UPDATE: %w%w", loadbalancer.Busy(left, "PENDING_UPDATE"), loadbalancer.ErrRefused)
	}
	var cur *loadbalancer.LoadBalancer
	if a.Kind != loadbalancer.ActionCreate {
		if cur = p.lbs[a.LoadBalancerID]; cur == nil {
			return nil, fmt.Errorf("pools: 404 load balancer %s not found", a.LoadBalancerID)
		}
	}
	next, err := loadbalancer.Apply(cur, a)
	if err != nil {
		return nil, fmt.Errorf("pools: 400: %w", err)
	}
	if a.Kind == loadbalancer.ActionCreate {
		p.last++
		next.ID = fmt.Sprintf("lb-%d", p.last)
		next.Ingress = []loadbalancer.Ingress{{IP: fmt.Sprintf("203.0.113.%d", p.last%250+1)}}
	}
	if p.rewriteAll && a.Kind == loadbalancer.ActionUpdateListener {
		p.writes.Add(int64(len(cur.Spec.Listeners) - 1))
	}
	p.lbs[next.ID] = next
	if p.busyAfter <= 0 {
		return next.Clone(), nil
	}
	p.until[next.ID] = now.Add(p.busyAfter)
	return next.Clone(), fmt.Errorf("pools: 202 Accepted: %w", loadbalancer.Busy(p.busyAfter, "PENDING_UPDATE"))
}

func (p *poolsCloud) Delete(_ context.Context, lb *loadbalancer.LoadBalancer) error {
	if p.down.Load() {
		return errPoolsOutage
	}
	p.writes.Add(1)
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.lbs, lb.ID)
	delete(p.until, lb.ID)
	return nil
}

// of returns a copy of svc's load balancer in cluster, the one of lowest
// ID, or an error when there is none.
func (p *poolsCloud) of(cluster string, svc *v1.Service) (*loadbalancer.LoadBalancer, error) {
	lbs, _ := p.Find(context.Background(), loadbalancer.Query{Tags: loadbalancer.OwnerOf(cluster, svc).Selector()})
	if len(lbs) == 0 {
		return nil, fmt.Errorf("pools: no load balancer of %s/%s in cluster %q", svc.Namespace, svc.Name, cluster)
	}
	return lbs[0], nil
}

// damage removes part of the load balancer of svc in cluster, behind the
// provider's back (see poolsDamage), and returns how many cloud objects
// it removed.
func (p *poolsCloud) damage(cluster string, svc *v1.Service, what poolsDamage) (int, error) {
	lb, err := p.of(cluster, svc)
	if err != nil {
		return 0, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	cur := p.lbs[lb.ID].Clone()
	i := slices.IndexFunc(cur.Spec.Listeners, func(l loadbalancer.Listener) bool { return l.Pool != nil && len(l.Pool.Backends) > 0 })
	if i < 0 {
		return 0, fmt.Errorf("pools: load balancer %s has no listener with pool members to remove", lb.ID)
	}
	pool := cur.Spec.Listeners[i].Pool
	objects := 1
	switch what {
	case damagePool:
		objects += len(pool.Backends)
		if pool.HealthCheck != nil {
			objects++
		}
		cur.Spec.Listeners[i].Pool = nil
	default:
		pool.Backends = pool.Backends[1:]
	}
	p.lbs[lb.ID] = cur
	return objects, nil
}

// poolsOptions configures a pools target.
type poolsOptions struct {
	busyAfter  time.Duration
	rewriteAll bool
	damage     poolsDamage
}

// poolsTarget returns a NewTarget: newFakeTarget's instances and routes,
// with the load balancers of a fresh pools cloud configured by o, and
// Target.OtherCluster's over the same pools cloud as another cluster ID.
func poolsTarget(o poolsOptions) func(context.Context) (*conformance.Target, error) {
	return func(ctx context.Context) (*conformance.Target, error) {
		tgt, err := newFakeTarget(ctx)
		if err != nil {
			return nil, err
		}
		p := &poolsCloud{busyAfter: o.busyAfter, rewriteAll: o.rewriteAll, lbs: map[string]*loadbalancer.LoadBalancer{}, until: map[string]time.Time{}}
		cloud := tgt.Cloud.(*fake.Cloud)
		const cluster = "conformance" // fakeCloudConfig's ClusterID
		for _, side := range []struct {
			cloud *cloudprovider.Interface
			id    string
		}{{&tgt.Cloud, cluster}, {&tgt.OtherCluster, cluster + "-other"}} {
			rec, err := poolsReconciler(p, side.id, *side.cloud)
			if err != nil {
				tgt.Close()
				return nil, err
			}
			*side.cloud = &wrapped{Interface: *side.cloud, lb: func(wrappedLB) cloudprovider.LoadBalancer { return rec }}
		}
		poolsHooks(&tgt.Hooks, p, cloud, cluster, o.damage)
		return tgt, nil
	}
}

// poolsReconciler is the pools provider of cluster over p: ccmkit's
// Reconciler, with the instances of cloud for the addresses of nodes not
// yet patched.
func poolsReconciler(p *poolsCloud, cluster string, cloud cloudprovider.Interface) (*loadbalancer.Reconciler, error) {
	inst, _ := cloud.InstancesV2()
	return loadbalancer.NewReconciler(p, loadbalancer.Options{
		ClusterID: cluster,
		Capabilities: loadbalancer.Capabilities{UDP: true, MixedProtocols: true, SourceRanges: true,
			ListenerPools: true, AppProtocols: poolsAppProtocols},
		Annotations: poolsAnnotations,
		Instances:   inst,
	})
}

// poolsHooks replaces the load-balancer hooks of h, the fake's, with the
// pools cloud's, for the provider of cluster: the fake then only holds
// routes, and its writes and outage count with the pools cloud's.
func poolsHooks(h *conformance.Hooks, p *poolsCloud, cloud *fake.Cloud, cluster string, damage poolsDamage) {
	owned, outage := h.Owned, h.Outage
	h.Owned = func(ctx context.Context) ([]string, error) {
		out, err := owned(ctx)
		lbs, _ := p.Find(ctx, loadbalancer.Query{})
		for _, lb := range lbs {
			out = append(out, "pools/"+lb.ID)
			for _, l := range lb.Spec.Listeners {
				if l.Pool != nil {
					out = append(out, fmt.Sprintf("pools/%s/%s/%s/%d/pool", lb.ID, l.Family, l.Protocol, l.Port))
				}
			}
		}
		return out, err
	}
	h.Writes = func() int64 { return cloud.Calls().Writes + p.writes.Load() }
	h.Outage = func() func() {
		restore := outage()
		p.down.Store(true)
		return func() {
			p.down.Store(false)
			restore()
		}
	}
	h.Backends = func(_ context.Context, c string, svc *v1.Service) ([]string, error) {
		lb, err := p.of(cluster, svc)
		if err != nil {
			return nil, err
		}
		var out []string
		for _, l := range lb.Spec.Listeners {
			if l.Pool != nil {
				for _, b := range l.Pool.Backends {
					out = append(out, b.NodeName)
				}
			}
		}
		slices.Sort(out)
		return slices.Compact(out), nil
	}
	h.Listeners = func(_ context.Context, c string, svc *v1.Service) ([]conformance.Listener, error) {
		lb, err := p.of(cluster, svc)
		if err != nil {
			return nil, err
		}
		return lbListeners(lb.Spec.Listeners), nil
	}
	h.SourceRanges = func(_ context.Context, c string, svc *v1.Service) ([]string, error) {
		lb, err := p.of(cluster, svc)
		if err != nil {
			return nil, err
		}
		return prefixStrings(lb.Spec.SourceRanges), nil
	}
	h.HealthCheck = func(_ context.Context, c string, svc *v1.Service) (conformance.HealthCheck, error) {
		lb, err := p.of(cluster, svc)
		if err != nil {
			return conformance.HealthCheck{}, err
		}
		for _, l := range lb.Spec.Listeners {
			if l.Pool != nil && l.Pool.HealthCheck != nil {
				return conformance.HealthCheck{Port: l.Pool.HealthCheck.Port, Path: l.Pool.HealthCheck.Path}, nil
			}
		}
		return conformance.HealthCheck{}, fmt.Errorf("pools: load balancer %s has no pool with a health monitor", lb.ID)
	}
	h.Damage = func(_ context.Context, c string, svc *v1.Service) (int, error) {
		return p.damage(cluster, svc, damage)
	}
}

// lbListeners returns ls as Hooks.Listeners reports them: one per
// protocol and port (a dual-stack load balancer has one per family), with
// its node port and application protocol.
func lbListeners(ls []loadbalancer.Listener) []conformance.Listener {
	seen := map[conformance.Listener]bool{}
	var out []conformance.Listener
	for _, l := range ls {
		c := conformance.Listener{Protocol: cmp.Or(l.Protocol, v1.ProtocolTCP), Port: l.Port, NodePort: l.NodePort, AppProtocol: l.AppProtocol}
		if !seen[c] {
			seen[c] = true
			out = append(out, c)
		}
	}
	return out
}
