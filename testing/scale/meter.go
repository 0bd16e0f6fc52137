package scale

import (
	"context"
	"fmt"
	"slices"
	"sync"

	v1 "k8s.io/api/core/v1"
	cloudprovider "k8s.io/cloud-provider"

	"github.com/ccmkit/ccmkit/housekeeping"
	"github.com/ccmkit/ccmkit/internal/check"
	"github.com/ccmkit/ccmkit/internal/cloudmetrics"
	"github.com/ccmkit/ccmkit/loadbalancer"
	"github.com/ccmkit/ccmkit/routes"
)

// The capabilities the meter counts, spelled as internal/cloudmetrics
// spells them.
const (
	capLoadBalancer = "loadbalancer"
	capInstances    = "instances"
	capRoutes       = "routes"
)

// OpCount is what the simulator counted of one operation: one method of a
// capability of cloudprovider.Interface (at the interface boundary) or one
// operation of a provider's cloud API (at the Driver boundary).
type OpCount struct {
	// Capability is "loadbalancer", "instances" or "routes" at the
	// interface boundary; at the Driver boundary, what Target.DriverCalls
	// reports (FakeTarget: the same three, by the fake's operation).
	Capability string
	// Operation is the method (EnsureLoadBalancer, InstanceMetadata, …) or
	// the Driver boundary's operation name.
	Operation string
	// Write reports whether the operation may change the cloud.
	Write bool
	// Calls counts every call, failed and throttled ones included.
	Calls int64
	// Throttled counts the calls that failed with an error wrapping an
	// *api.RetryError (cloudmetrics.Throttled); they are in Calls.
	Throttled int64
	// NotFound counts the calls that failed with a definite "does not
	// exist" (cloudprovider.InstanceNotFound, or ccmkit's
	// loadbalancer.ErrNotFound or routes.ErrNotFound, wrapped); they are
	// in Calls. The service controller calls UpdateLoadBalancer for every
	// LoadBalancer Service on a Node change, also before its load
	// balancer exists.
	NotFound int64
	// Errors counts the other failed calls; they are in Calls.
	Errors int64
}

// writes are the cloudprovider methods that may change the cloud; every
// other metered method only reads it.
var writes = []string{"EnsureLoadBalancer", "UpdateLoadBalancer", "EnsureLoadBalancerDeleted", "CreateRoute", "DeleteRoute"}

// meter is the cloudprovider.Interface the controllers get: it forwards to
// the provider and counts each call of LoadBalancer, InstancesV2 and Routes
// by capability, method and result, whatever the provider does (a panic
// becomes an error to the controller, counted as failed). It offers
// nothing else (Instances, Zones and Clusters are absent), so that no call
// escapes the count: the controllers use InstancesV2 when it is offered
// (controllers/node/node_controller.go getInstanceMetadata). Safe for
// concurrent use.
type meter struct {
	inner cloudprovider.Interface

	mu     sync.Mutex
	counts map[[2]string]*OpCount
}

var _ cloudprovider.Interface = (*meter)(nil)

func newMeter(inner cloudprovider.Interface) *meter {
	return &meter{inner: inner, counts: map[[2]string]*OpCount{}}
}

// done, deferred by every metered method, counts its call with the error
// it returns. A panic of the provider becomes that error, counted as
// failed: the controllers re-panic (runtime.HandleCrash), which would end
// the simulation's process.
func (m *meter) done(capability, method string, err *error) {
	if p := recover(); p != nil {
		*err = fmt.Errorf("%s: the provider panicked: %v", method, p)
	}
	m.record(capability, method, *err)
}

// record counts one call of capability's method that returned err.
func (m *meter) record(capability, method string, err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	k := [2]string{capability, method}
	c := m.counts[k]
	if c == nil {
		c = &OpCount{Capability: capability, Operation: method, Write: slices.Contains(writes, method)}
		m.counts[k] = c
	}
	c.Calls++
	switch cloudmetrics.ResultOf(err, cloudprovider.InstanceNotFound, loadbalancer.ErrNotFound, routes.ErrNotFound) {
	case cloudmetrics.Throttled:
		c.Throttled++
	case cloudmetrics.NotFound:
		c.NotFound++
	case cloudmetrics.Error:
		c.Errors++
	}
}

// snapshot returns a copy of the counts, sorted by capability and
// operation.
func (m *meter) snapshot() []OpCount {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]OpCount, 0, len(m.counts))
	for _, c := range m.counts {
		out = append(out, *c)
	}
	sortCounts(out)
	return out
}

func (m *meter) Initialize(cloudprovider.ControllerClientBuilder, <-chan struct{}) {}
func (m *meter) Instances() (cloudprovider.Instances, bool)                        { return nil, false }
func (m *meter) Zones() (cloudprovider.Zones, bool)                                { return nil, false }
func (m *meter) Clusters() (cloudprovider.Clusters, bool)                          { return nil, false }
func (m *meter) ProviderName() string                                              { return m.inner.ProviderName() }
func (m *meter) HasClusterID() bool                                                { return m.inner.HasClusterID() }

func (m *meter) LoadBalancer() (cloudprovider.LoadBalancer, bool) {
	v, ok := m.inner.LoadBalancer()
	if !ok || check.IsNil(v) {
		return nil, false
	}
	if r, ok := v.(housekeeping.Repairer); ok {
		return repairingLB{meteredLB{m, v}, r}, true
	}
	return meteredLB{m, v}, true
}

// repairingLB is the metered LoadBalancer of a provider the drift-repair
// controller can run over (housekeeping.Repairer): RepairLoadBalancer is
// counted as its own method; Invalidate is no cloud call.
type repairingLB struct {
	meteredLB
	r housekeeping.Repairer
}

func (l repairingLB) RepairLoadBalancer(ctx context.Context, cluster string, svc *v1.Service, nodes []*v1.Node, current func() bool) (st *v1.LoadBalancerStatus, err error) {
	defer l.m.done(capLoadBalancer, "RepairLoadBalancer", &err)
	return l.r.RepairLoadBalancer(ctx, cluster, svc, nodes, current)
}

func (l repairingLB) Invalidate() { l.r.Invalidate() }

func (m *meter) InstancesV2() (cloudprovider.InstancesV2, bool) {
	v, ok := m.inner.InstancesV2()
	if !ok || check.IsNil(v) {
		return nil, false
	}
	return meteredInstances{m, v}, true
}

func (m *meter) Routes() (cloudprovider.Routes, bool) {
	v, ok := m.inner.Routes()
	if !ok || check.IsNil(v) {
		return nil, false
	}
	return meteredRoutes{m, v}, true
}

type meteredLB struct {
	m  *meter
	lb cloudprovider.LoadBalancer
}

func (l meteredLB) GetLoadBalancer(ctx context.Context, cluster string, svc *v1.Service) (st *v1.LoadBalancerStatus, ok bool, err error) {
	defer l.m.done(capLoadBalancer, "GetLoadBalancer", &err)
	return l.lb.GetLoadBalancer(ctx, cluster, svc)
}

// GetLoadBalancerName is not counted: it names, and calls no cloud API in
// any provider ccmkit knows of.
func (l meteredLB) GetLoadBalancerName(ctx context.Context, cluster string, svc *v1.Service) string {
	return l.lb.GetLoadBalancerName(ctx, cluster, svc)
}

func (l meteredLB) EnsureLoadBalancer(ctx context.Context, cluster string, svc *v1.Service, nodes []*v1.Node) (st *v1.LoadBalancerStatus, err error) {
	defer l.m.done(capLoadBalancer, "EnsureLoadBalancer", &err)
	return l.lb.EnsureLoadBalancer(ctx, cluster, svc, nodes)
}

func (l meteredLB) UpdateLoadBalancer(ctx context.Context, cluster string, svc *v1.Service, nodes []*v1.Node) (err error) {
	defer l.m.done(capLoadBalancer, "UpdateLoadBalancer", &err)
	return l.lb.UpdateLoadBalancer(ctx, cluster, svc, nodes)
}

func (l meteredLB) EnsureLoadBalancerDeleted(ctx context.Context, cluster string, svc *v1.Service) (err error) {
	defer l.m.done(capLoadBalancer, "EnsureLoadBalancerDeleted", &err)
	return l.lb.EnsureLoadBalancerDeleted(ctx, cluster, svc)
}

type meteredInstances struct {
	m    *meter
	inst cloudprovider.InstancesV2
}

func (i meteredInstances) InstanceExists(ctx context.Context, n *v1.Node) (ok bool, err error) {
	defer i.m.done(capInstances, "InstanceExists", &err)
	return i.inst.InstanceExists(ctx, n)
}

func (i meteredInstances) InstanceShutdown(ctx context.Context, n *v1.Node) (down bool, err error) {
	defer i.m.done(capInstances, "InstanceShutdown", &err)
	return i.inst.InstanceShutdown(ctx, n)
}

func (i meteredInstances) InstanceMetadata(ctx context.Context, n *v1.Node) (md *cloudprovider.InstanceMetadata, err error) {
	defer i.m.done(capInstances, "InstanceMetadata", &err)
	return i.inst.InstanceMetadata(ctx, n)
}

type meteredRoutes struct {
	m  *meter
	rs cloudprovider.Routes
}

func (r meteredRoutes) ListRoutes(ctx context.Context, cluster string) (list []*cloudprovider.Route, err error) {
	defer r.m.done(capRoutes, "ListRoutes", &err)
	return r.rs.ListRoutes(ctx, cluster)
}

func (r meteredRoutes) CreateRoute(ctx context.Context, cluster, hint string, rt *cloudprovider.Route) (err error) {
	defer r.m.done(capRoutes, "CreateRoute", &err)
	return r.rs.CreateRoute(ctx, cluster, hint, rt)
}

func (r meteredRoutes) DeleteRoute(ctx context.Context, cluster string, rt *cloudprovider.Route) (err error) {
	defer r.m.done(capRoutes, "DeleteRoute", &err)
	return r.rs.DeleteRoute(ctx, cluster, rt)
}
