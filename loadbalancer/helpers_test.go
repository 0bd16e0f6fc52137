package loadbalancer_test

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/cloud-provider/api"

	"github.com/ccmkit/ccmkit/internal/annotationtest"
	"github.com/ccmkit/ccmkit/loadbalancer"
)

// cmpOpts compares netip values by value.
var cmpOpts = cmp.Options{
	cmp.Comparer(func(a, b netip.Addr) bool { return a == b }),
	cmp.Comparer(func(a, b netip.Prefix) bool { return a == b }),
}

// lbService returns a TCP LoadBalancer Service shop/web with port 80 →
// node port 30080, modified by mods.
func lbService(mods ...func(*v1.Service)) *v1.Service {
	svc := &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web", UID: types.UID("uid-web")},
		Spec: v1.ServiceSpec{
			Type:                  v1.ServiceTypeLoadBalancer,
			Ports:                 []v1.ServicePort{{Name: "http", Protocol: v1.ProtocolTCP, Port: 80, NodePort: 30080}},
			IPFamilies:            []v1.IPFamily{v1.IPv4Protocol},
			ExternalTrafficPolicy: v1.ServiceExternalTrafficPolicyCluster,
		},
	}
	for _, m := range mods {
		m(svc)
	}
	return svc
}

// node returns a Node with a provider ID and the given InternalIPs.
func node(name string, ips ...string) *v1.Node {
	n := &v1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       v1.NodeSpec{ProviderID: "test://" + name},
	}
	for _, ip := range ips {
		n.Status.Addresses = append(n.Status.Addresses, v1.NodeAddress{Type: v1.NodeInternalIP, Address: ip})
	}
	return n
}

// testAnnotations declares one annotation of every kind, three of them
// provider settings.
var testAnnotations = annotationtest.EveryKind

func ptr[T any](v T) *T { return &v }

func addr(s string) netip.Addr     { return netip.MustParseAddr(s) }
func prefix(s string) netip.Prefix { return netip.MustParsePrefix(s) }

func tcp(f v1.IPFamily, port, nodePort int32) loadbalancer.Listener {
	return loadbalancer.Listener{ListenerKey: loadbalancer.ListenerKey{Family: f, Protocol: v1.ProtocolTCP, Port: port}, NodePort: nodePort}
}

// memDriver is the one hand-written Driver of this package's tests
// (CONTRIBUTING.md T3): an in-memory cloud that stores load balancers as
// the model and applies actions with loadbalancer.Apply (a real Driver maps
// each ActionKind to its cloud's API), records every call, and lets a test
// inject errors (nil funcs do nothing). Tests that need a behaviour no
// cloud should have (a partial create, a nil from Find, a panic) embed it
// and override one method. It is not the fake because these tests check
// the Reconciler's cloud calls one by one, and the fake's Driver sits
// behind its metering, throttling and provisioning.
type memDriver struct {
	mu      sync.Mutex
	lbs     map[string]*loadbalancer.LoadBalancer
	next    int
	finds   int
	applied []loadbalancer.ActionKind
	deleted []string

	onApply  func(a loadbalancer.Action) error
	onDelete func(lb *loadbalancer.LoadBalancer) error
	// uniqueNames refuses an ActionCreate of a name taken, as a cloud of
	// Capabilities.UniqueNames does.
	uniqueNames bool

	inflight atomic.Int32
	overlap  atomic.Bool
}

func newMemDriver() *memDriver { return &memDriver{lbs: map[string]*loadbalancer.LoadBalancer{}} }

// enter detects two calls in flight at once (the tests use one Service).
func (d *memDriver) enter() func() {
	if d.inflight.Add(1) > 1 {
		d.overlap.Store(true)
	}
	runtime.Gosched()
	return func() { d.inflight.Add(-1) }
}

func (d *memDriver) Find(_ context.Context, q loadbalancer.Query) ([]*loadbalancer.LoadBalancer, error) {
	defer d.enter()()
	d.mu.Lock()
	defer d.mu.Unlock()
	d.finds++
	var out []*loadbalancer.LoadBalancer
	for _, lb := range d.lbs {
		if matches(lb, q) {
			out = append(out, lb.Clone())
		}
	}
	return out, nil
}

func matches(lb *loadbalancer.LoadBalancer, q loadbalancer.Query) bool {
	switch {
	case q.ID != "":
		return lb.ID == q.ID
	case q.Name != "":
		return lb.Name == q.Name
	case len(q.Tags) > 0:
		for k, v := range q.Tags {
			if got, ok := lb.Tags[k]; !ok || got != v {
				return false
			}
		}
		return true
	}
	return false
}

func (d *memDriver) Apply(_ context.Context, a loadbalancer.Action) (*loadbalancer.LoadBalancer, error) {
	defer d.enter()()
	d.mu.Lock()
	d.applied = append(d.applied, a.Kind)
	hook := d.onApply
	d.mu.Unlock()
	if hook != nil {
		if err := hook(a); err != nil {
			return nil, err
		}
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.nameTaken(a); err != nil {
		return nil, err
	}
	lb, err := loadbalancer.Apply(d.lbs[a.LoadBalancerID], a)
	if err != nil {
		return nil, err
	}
	if a.Kind == loadbalancer.ActionCreate {
		d.next++
		lb.ID = fmt.Sprintf("lb-%d", d.next)
		lb.Ingress = []loadbalancer.Ingress{{IP: fmt.Sprintf("203.0.113.%d", d.next), IPMode: v1.LoadBalancerIPModeVIP}}
	}
	d.lbs[lb.ID] = lb
	return lb.Clone(), nil
}

// nameTaken is the refusal of a create whose name is taken, with
// uniqueNames (d.mu held).
func (d *memDriver) nameTaken(a loadbalancer.Action) error {
	if !d.uniqueNames || a.Kind != loadbalancer.ActionCreate || a.Create == nil {
		return nil
	}
	for _, lb := range d.lbs {
		if lb.Name == a.Create.Name {
			return fmt.Errorf("memdriver: 409 a load balancer named %q exists (%s): %w", lb.Name, lb.ID, errors.Join(loadbalancer.ErrNameTaken, loadbalancer.ErrRefused))
		}
	}
	return nil
}

func (d *memDriver) Delete(_ context.Context, lb *loadbalancer.LoadBalancer) error {
	defer d.enter()()
	d.mu.Lock()
	d.deleted = append(d.deleted, lb.ID)
	hook := d.onDelete
	d.mu.Unlock()
	if hook != nil {
		if err := hook(lb); err != nil {
			return err
		}
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	delete(d.lbs, lb.ID)
	return nil
}

// writes returns and resets the applied action kinds and deleted IDs.
func (d *memDriver) writes() (applied []loadbalancer.ActionKind, deleted []string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	applied, deleted = d.applied, d.deleted
	d.applied, d.deleted = nil, nil
	return applied, deleted
}

// findCalls returns the number of Find calls so far.
func (d *memDriver) findCalls() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.finds
}

// takeApplied returns and resets the applied action kinds (writes).
func (d *memDriver) takeApplied() []loadbalancer.ActionKind {
	a, _ := d.writes()
	return a
}

// stored returns a copy of every load balancer in the cloud, by ID.
func (d *memDriver) stored() map[string]*loadbalancer.LoadBalancer {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := map[string]*loadbalancer.LoadBalancer{}
	for id, lb := range d.lbs {
		out[id] = lb.Clone()
	}
	return out
}

// event is one event an eventLog recorded.
type event struct {
	Kind, Name, Type, Reason, Message string
}

// eventLog is a record.EventRecorder that keeps each event with the kind
// and name of its object (record.FakeRecorder keeps neither for objects
// without TypeMeta, as the service controller passes them).
type eventLog struct {
	mu     sync.Mutex
	events []event
}

func (l *eventLog) Event(obj k8sruntime.Object, eventtype, reason, message string) {
	e := event{Type: eventtype, Reason: reason, Message: message}
	switch o := obj.(type) {
	case *v1.Service:
		e.Kind, e.Name = "Service", o.Namespace+"/"+o.Name
	case *v1.Node:
		e.Kind, e.Name = "Node", o.Name
	default:
		e.Kind = fmt.Sprintf("%T", obj)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.events = append(l.events, e)
}

func (l *eventLog) Eventf(obj k8sruntime.Object, eventtype, reason, format string, args ...any) {
	l.Event(obj, eventtype, reason, fmt.Sprintf(format, args...))
}

func (l *eventLog) AnnotatedEventf(obj k8sruntime.Object, _ map[string]string, eventtype, reason, format string, args ...any) {
	l.Eventf(obj, eventtype, reason, format, args...)
}

// take returns and forgets the events recorded so far.
func (l *eventLog) take() []event {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := l.events
	l.events = nil
	return out
}

// poolMemDriver is memDriver with shared backend pools (a PoolDriver): it
// stores pools as the model and applies pool actions with
// loadbalancer.ApplyPool, and refuses what a cloud of shared pools
// refuses: a load balancer referencing a pool that does not exist, and
// deleting a pool a load balancer references (loadbalancer.ErrPoolInUse).
type poolMemDriver struct {
	*memDriver
	pools      map[string]*loadbalancer.Pool // guarded by memDriver.mu
	nextPool   int
	poolFinds  int
	poolWrites []string // pool action kinds and "DeletePool <id>", in order
}

var _ loadbalancer.PoolDriver = (*poolMemDriver)(nil)

func newPoolMemDriver() *poolMemDriver {
	return &poolMemDriver{memDriver: newMemDriver(), pools: map[string]*loadbalancer.Pool{}}
}

// Apply refuses a load balancer referencing a missing pool, then applies.
func (d *poolMemDriver) Apply(ctx context.Context, a loadbalancer.Action) (*loadbalancer.LoadBalancer, error) {
	ref := a.BackendPool
	if a.Kind == loadbalancer.ActionCreate && a.Create != nil {
		ref = a.Create.Spec.BackendPool
	}
	d.mu.Lock()
	_, ok := d.pools[ref]
	d.mu.Unlock()
	if ref != "" && !ok {
		return nil, fmt.Errorf("backend pool %q does not exist", ref)
	}
	return d.memDriver.Apply(ctx, a)
}

func (d *poolMemDriver) FindPools(_ context.Context, q loadbalancer.PoolQuery) ([]*loadbalancer.Pool, error) {
	runtime.Gosched() // let concurrent callers interleave, as a cloud's latency does
	d.mu.Lock()
	defer d.mu.Unlock()
	d.poolFinds++
	var out []*loadbalancer.Pool
	for _, p := range d.pools {
		if matches(&loadbalancer.LoadBalancer{ID: p.ID, Tags: p.Tags}, loadbalancer.Query{ID: q.ID, Tags: q.Tags}) {
			out = append(out, p.Clone())
		}
	}
	return out, nil
}

func (d *poolMemDriver) ApplyPool(_ context.Context, a loadbalancer.PoolAction) (*loadbalancer.Pool, error) {
	runtime.Gosched()
	d.mu.Lock()
	defer d.mu.Unlock()
	d.poolWrites = append(d.poolWrites, string(a.Kind))
	p, err := loadbalancer.ApplyPool(d.pools[a.PoolID], a)
	if err != nil {
		return nil, err
	}
	if a.Kind == loadbalancer.PoolActionCreate {
		d.nextPool++
		p.ID = fmt.Sprintf("pool-%d", d.nextPool)
	}
	d.pools[p.ID] = p
	return p.Clone(), nil
}

func (d *poolMemDriver) DeletePool(_ context.Context, p *loadbalancer.Pool) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.poolWrites = append(d.poolWrites, "DeletePool "+p.ID)
	for _, lb := range d.lbs {
		if lb.Spec.BackendPool == p.ID {
			return fmt.Errorf("load balancer %q references it: %w", lb.ID, loadbalancer.ErrPoolInUse)
		}
	}
	delete(d.pools, p.ID)
	return nil
}

// takePoolWrites returns and resets the pool writes.
func (d *poolMemDriver) takePoolWrites() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := d.poolWrites
	d.poolWrites = nil
	return out
}

// storedPools returns a copy of every pool in the cloud, by ID.
func (d *poolMemDriver) storedPools() map[string]*loadbalancer.Pool {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := map[string]*loadbalancer.Pool{}
	for id, p := range d.pools {
		out[id] = p.Clone()
	}
	return out
}

// busyCloud is memDriver as a hierarchical cloud that is busy with a load
// balancer for busy after each write to it (OpenStack Octavia's
// PENDING_UPDATE): a write within that time is refused, and changes
// nothing, with a 409 (a *loadbalancer.BusyError for the time left,
// wrapping loadbalancer.ErrRefused), and each write it takes is answered
// with loadbalancer.Busy(busy) and no load balancer (the Reconciler
// derives it), or, with full, the load balancer as Find would return it.
// A creation is always answered with the load balancer (it has a new ID).
// With throttle, the cloud says the same as a rate limit instead: it
// answers a write it takes plainly, and refuses one within busy with a
// 429 (an *api.RetryError for the time left, wrapping ErrRefused). Time
// is the clock of the test's synctest bubble (time.Now).
type busyCloud struct {
	*memDriver
	busy     time.Duration
	full     bool
	throttle bool

	last    map[string]time.Time // by load balancer ID: when its last write ended; guarded by memDriver.mu
	refused int                  // writes refused; guarded by memDriver.mu
}

func newBusyCloud(busy time.Duration) *busyCloud {
	return &busyCloud{memDriver: newMemDriver(), busy: busy, last: map[string]time.Time{}}
}

func (c *busyCloud) Apply(ctx context.Context, a loadbalancer.Action) (*loadbalancer.LoadBalancer, error) {
	c.mu.Lock()
	last, written := c.last[a.LoadBalancerID]
	if left := c.busy - time.Since(last); written && left > 0 {
		c.refused++
		c.mu.Unlock()
		if c.throttle {
			return nil, fmt.Errorf("HTTP 429 Too Many Requests: %w%w", api.NewRetryError("load balancer busy", left), loadbalancer.ErrRefused)
		}
		return nil, fmt.Errorf("HTTP 409 Conflict: %w%w", loadbalancer.Busy(left, "load balancer is PENDING_UPDATE"), loadbalancer.ErrRefused)
	}
	c.mu.Unlock()
	lb, err := c.memDriver.Apply(ctx, a)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	c.last[lb.ID] = time.Now()
	c.mu.Unlock()
	switch {
	case c.throttle:
		return lb, nil
	case c.full || a.Kind == loadbalancer.ActionCreate:
		return lb, loadbalancer.Busy(c.busy, "PENDING_UPDATE")
	}
	return nil, loadbalancer.Busy(c.busy, "PENDING_UPDATE")
}

// refusals returns the number of writes refused so far.
func (c *busyCloud) refusals() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.refused
}

// nilResults is memDriver as a Driver that answers every Apply but a
// creation without a load balancer ("exactly the action was applied"),
// as one over a cloud whose load balancer is a tree of objects, which
// would otherwise read the whole tree after each write.
type nilResults struct{ *memDriver }

func (d nilResults) Apply(ctx context.Context, a loadbalancer.Action) (*loadbalancer.LoadBalancer, error) {
	lb, err := d.memDriver.Apply(ctx, a)
	if err != nil || a.Kind == loadbalancer.ActionCreate {
		return lb, err
	}
	return nil, nil
}
