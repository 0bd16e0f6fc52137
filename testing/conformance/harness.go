package conformance

import (
	"context"
	"fmt"
	"net"
	"runtime/debug"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	coreinformers "k8s.io/client-go/informers/core/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"
	cloudprovider "k8s.io/cloud-provider"
	nodecontroller "k8s.io/cloud-provider/controllers/node"
	nodelifecyclecontroller "k8s.io/cloud-provider/controllers/nodelifecycle"
	routecontroller "k8s.io/cloud-provider/controllers/route"
	servicecontroller "k8s.io/cloud-provider/controllers/service"
	controllersmetrics "k8s.io/component-base/metrics/prometheus/controllers"

	// The route controller reads its feature gates from the default gate.
	_ "k8s.io/controller-manager/pkg/features/register"

	"github.com/ccmkit/ccmkit/internal/check"
)

// Periods of the controllers the suite runs: short, so that scenarios end in
// well under a second against an in-memory provider, except
// nodeStatusPeriod.
//
// nodeStatusPeriod is the cloud node controller's periodic status update
// (controllers/node/node_controller.go UpdateNodeStatus, every
// --node-status-update-frequency, 5 minutes by default: options/options.go).
// It asks the provider again about every initialized Node and repairs its
// addresses, which would hide addresses that initialization (syncNode,
// then updateNodeAddress with the same metadata) got wrong: in a cluster
// the Node would go without them for minutes. Longer than any rule, it
// runs once when the controller starts, before the rule creates Nodes.
const (
	nodeStatusPeriod     = time.Hour
	nodeMonitorPeriod    = 50 * time.Millisecond
	routeReconcilePeriod = 50 * time.Millisecond
)

// harness runs upstream controllers against a fake clientset and the rule's
// target, seen through a guard that records calls and contains panics.
type harness struct {
	r       *rt
	g       *guard
	kube    *fake.Clientset
	ctx     context.Context
	wg      sync.WaitGroup
	metrics *controllersmetrics.ControllerManagerMetrics
}

// harness creates the rule's target and initializes it against a new, empty
// fake clientset, as the cloud-controller-manager does before starting its
// controllers. The controllers started later stop when the rule ends.
func (r *rt) harness() *harness {
	tgt := r.newTarget()
	kube := fake.NewClientset()
	r.initialize(tgt, kube)
	ctx, cancel := context.WithCancel(r.ctx)
	h := &harness{r: r, g: &guard{r: r, inner: tgt.Cloud}, kube: kube, ctx: ctx, metrics: controllersmetrics.NewControllerManagerMetrics("conformance")}
	r.Cleanup(func() {
		cancel()
		h.wg.Wait()
	})
	return h
}

func (h *harness) goRun(f func()) {
	h.wg.Add(1)
	go func() {
		defer h.wg.Done()
		f()
	}()
}

// startInformers starts the informers controllers asked for since the last
// call.
func (h *harness) startInformers() { h.r.inf.Start(h.r.stop) }

// startServiceController starts the service controller. Its node
// informer does not hand it the Add events of the Nodes in past (see
// pastNodes).
func (h *harness) startServiceController(past ...*v1.Node) {
	nodes := pastNodes{NodeInformer: h.r.inf.Core().V1().Nodes(), past: map[string]bool{}}
	for _, n := range past {
		nodes.past[n.Name] = true
	}
	sc, err := servicecontroller.New(h.g, h.kube, h.r.inf.Core().V1().Services(), nodes, h.r.cfg.ClusterName, utilfeature.DefaultFeatureGate)
	if err != nil {
		h.r.Fatalf("service controller: New: %v", err)
	}
	h.startInformers()
	h.goRun(func() { sc.Run(h.ctx, 1, h.metrics) })
}

// startNodeController starts the cloud node controller and waits for the
// first run of its periodic status update (see nodeStatusPeriod), which
// happens at start: a witness Node, initialized and of no instance, is
// asked about then. After it, the controller asks about Nodes the rule
// registers only to initialize them, so that what initialization writes
// is what the rule sees.
func (h *harness) startNodeController() {
	nc, err := nodecontroller.NewCloudNodeController(h.r.inf.Core().V1().Nodes(), h.kube, h.g, nodeStatusPeriod, 1, 1)
	if err != nil {
		h.r.Fatalf("cloud node controller: NewCloudNodeController: %v", err)
	}
	witness := missingNode("")
	h.createNode(witness)
	h.startInformers()
	h.r.eventually(fmt.Sprintf("witness Node %s in the informer cache", witness.Name), func() (bool, string) {
		_, err := h.r.inf.Core().V1().Nodes().Lister().Get(witness.Name)
		return err == nil, fmt.Sprint(err)
	})
	h.goRun(func() { nc.RunWithContext(h.ctx, h.metrics) })
	h.r.eventually("the cloud node controller's first status update", func() (bool, string) {
		c := h.g.count(func(c call) bool { return c.key == witness.Name })
		return c > 0, fmt.Sprintf("%d provider calls about witness Node %s", c, witness.Name)
	})
}

func (h *harness) startNodeLifecycleController() {
	lc, err := nodelifecyclecontroller.NewCloudNodeLifecycleController(h.r.inf.Core().V1().Nodes(), h.kube, h.g, nodeMonitorPeriod, 1)
	if err != nil {
		h.r.Fatalf("cloud node lifecycle controller: NewCloudNodeLifecycleController: %v", err)
	}
	h.startInformers()
	h.goRun(func() { lc.Run(h.ctx, h.metrics) })
}

func (h *harness) startRouteController() {
	rs, ok := h.g.Routes()
	if !ok {
		h.r.Fatalf("Routes() returned false")
	}
	var cidrs []*net.IPNet
	for _, s := range h.r.cfg.ClusterCIDRs {
		_, n, err := net.ParseCIDR(s)
		if err != nil {
			h.r.Fatalf("Config.ClusterCIDRs %q: %v", s, err)
		}
		cidrs = append(cidrs, n)
	}
	rc, err := routecontroller.New(rs, h.kube, h.r.inf.Core().V1().Nodes(), h.r.cfg.ClusterName, cidrs)
	if err != nil {
		h.r.Fatalf("route controller: New: %v", err)
	}
	h.startInformers()
	h.goRun(func() { rc.Run(h.ctx, routeReconcilePeriod, h.metrics) })
}

// call is one provider call made by a controller.
type call struct {
	method string
	key    string // namespace/name of a Service, node name, or route CIDR
	ports  []v1.ServicePort
	nodes  int // len(nodes) of Ensure and Update
	result string
	err    error
}

// guard is the cloudprovider.Interface the controllers get: it forwards to
// the provider under test, records each call of LoadBalancer, InstancesV2
// and Routes, and turns a panic of the provider into a failure of the rule
// and an error to the controller (the controllers re-panic, which would end
// the test binary).
//
// A direct guard (rt.direct) is the one of the rule's own calls: it records
// nothing, lets a panic through to the rule, and only notes NotImplemented
// answers.
type guard struct {
	r      *rt
	inner  cloudprovider.Interface
	direct bool

	mu    sync.Mutex
	calls []call
}

var _ cloudprovider.Interface = (*guard)(nil)

func (g *guard) do(c call, f func() (string, error)) {
	if g.direct {
		_, err := f()
		g.r.noteAnswer(c.method, err, true)
		return
	}
	defer func() {
		if p := recover(); p != nil {
			g.r.Errorf("the provider panicked in %s(%s), called by a controller: %v\n%s", c.method, c.key, p, debug.Stack())
			c.err = fmt.Errorf("conformance: the provider panicked: %v", p)
		}
		g.r.noteAnswer(c.method, c.err, false)
		g.mu.Lock()
		g.calls = append(g.calls, c)
		g.mu.Unlock()
	}()
	c.result, c.err = f()
}

// each calls f with every call recorded so far, in order.
func (g *guard) each(f func(call)) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, c := range g.calls {
		f(c)
	}
}

// count returns how many calls satisfy match.
func (g *guard) count(match func(call) bool) int {
	g.mu.Lock()
	defer g.mu.Unlock()
	n := 0
	for _, c := range g.calls {
		if match(c) {
			n++
		}
	}
	return n
}

func (g *guard) Initialize(cloudprovider.ControllerClientBuilder, <-chan struct{}) {}
func (g *guard) Instances() (cloudprovider.Instances, bool)                        { return g.inner.Instances() }
func (g *guard) Clusters() (cloudprovider.Clusters, bool)                          { return g.inner.Clusters() }
func (g *guard) ProviderName() string                                              { return g.inner.ProviderName() }
func (g *guard) HasClusterID() bool                                                { return g.inner.HasClusterID() }

func (g *guard) LoadBalancer() (cloudprovider.LoadBalancer, bool) {
	v, ok := g.inner.LoadBalancer()
	if !ok || check.IsNil(v) {
		return nil, false
	}
	return guardLB{g, v}, true
}

func (g *guard) InstancesV2() (cloudprovider.InstancesV2, bool) {
	v, ok := g.inner.InstancesV2()
	if !ok || check.IsNil(v) {
		return nil, false
	}
	return guardInst{g, v}, true
}

func (g *guard) Routes() (cloudprovider.Routes, bool) {
	v, ok := g.inner.Routes()
	if !ok || check.IsNil(v) {
		return nil, false
	}
	return guardRoutes{g, v}, true
}

func (g *guard) Zones() (cloudprovider.Zones, bool) {
	v, ok := g.inner.Zones()
	if !ok || check.IsNil(v) {
		return nil, false
	}
	return guardZones{g, v}, true
}

type guardLB struct {
	g  *guard
	lb cloudprovider.LoadBalancer
}

func lbCall(method string, svc *v1.Service) call {
	return call{method: method, key: svcKey(svc), ports: append([]v1.ServicePort(nil), svc.Spec.Ports...)}
}

func (l guardLB) GetLoadBalancer(ctx context.Context, cluster string, svc *v1.Service) (st *v1.LoadBalancerStatus, ok bool, err error) {
	l.g.do(lbCall("GetLoadBalancer", svc), func() (string, error) {
		st, ok, err = l.lb.GetLoadBalancer(ctx, cluster, svc)
		return fmt.Sprintf("exists=%v", ok), err
	})
	return st, ok, err
}

func (l guardLB) GetLoadBalancerName(ctx context.Context, cluster string, svc *v1.Service) (name string) {
	l.g.do(lbCall("GetLoadBalancerName", svc), func() (string, error) {
		name = l.lb.GetLoadBalancerName(ctx, cluster, svc)
		return name, nil
	})
	return name
}

func (l guardLB) EnsureLoadBalancer(ctx context.Context, cluster string, svc *v1.Service, nodes []*v1.Node) (st *v1.LoadBalancerStatus, err error) {
	c := lbCall("EnsureLoadBalancer", svc)
	c.nodes = len(nodes)
	l.g.do(c, func() (string, error) {
		st, err = l.lb.EnsureLoadBalancer(ctx, cluster, svc, nodes)
		if st == nil {
			return "nil status", err
		}
		return fmt.Sprintf("ingress %v", st.Ingress), err
	})
	return st, err
}

func (l guardLB) UpdateLoadBalancer(ctx context.Context, cluster string, svc *v1.Service, nodes []*v1.Node) (err error) {
	c := lbCall("UpdateLoadBalancer", svc)
	c.nodes = len(nodes)
	l.g.do(c, func() (string, error) {
		err = l.lb.UpdateLoadBalancer(ctx, cluster, svc, nodes)
		return "", err
	})
	return err
}

func (l guardLB) EnsureLoadBalancerDeleted(ctx context.Context, cluster string, svc *v1.Service) (err error) {
	l.g.do(lbCall("EnsureLoadBalancerDeleted", svc), func() (string, error) {
		err = l.lb.EnsureLoadBalancerDeleted(ctx, cluster, svc)
		return "", err
	})
	return err
}

type guardInst struct {
	g    *guard
	inst cloudprovider.InstancesV2
}

func (i guardInst) InstanceExists(ctx context.Context, n *v1.Node) (ok bool, err error) {
	i.g.do(call{method: "InstanceExists", key: n.Name}, func() (string, error) {
		ok, err = i.inst.InstanceExists(ctx, n)
		return fmt.Sprint(ok), err
	})
	return ok, err
}

func (i guardInst) InstanceShutdown(ctx context.Context, n *v1.Node) (down bool, err error) {
	i.g.do(call{method: "InstanceShutdown", key: n.Name}, func() (string, error) {
		down, err = i.inst.InstanceShutdown(ctx, n)
		return fmt.Sprint(down), err
	})
	return down, err
}

func (i guardInst) InstanceMetadata(ctx context.Context, n *v1.Node) (md *cloudprovider.InstanceMetadata, err error) {
	i.g.do(call{method: "InstanceMetadata", key: n.Name}, func() (string, error) {
		md, err = i.inst.InstanceMetadata(ctx, n)
		if md == nil {
			return "nil", err
		}
		return md.ProviderID, err
	})
	return md, err
}

type guardRoutes struct {
	g  *guard
	rs cloudprovider.Routes
}

func (r guardRoutes) ListRoutes(ctx context.Context, cluster string) (list []*cloudprovider.Route, err error) {
	r.g.do(call{method: "ListRoutes", key: cluster}, func() (string, error) {
		list, err = r.rs.ListRoutes(ctx, cluster)
		return fmt.Sprintf("%d routes", len(list)), err
	})
	return list, err
}

func (r guardRoutes) CreateRoute(ctx context.Context, cluster, hint string, rt *cloudprovider.Route) (err error) {
	r.g.do(call{method: "CreateRoute", key: rt.DestinationCIDR}, func() (string, error) {
		err = r.rs.CreateRoute(ctx, cluster, hint, rt)
		return "", err
	})
	return err
}

func (r guardRoutes) DeleteRoute(ctx context.Context, cluster string, rt *cloudprovider.Route) (err error) {
	r.g.do(call{method: "DeleteRoute", key: rt.DestinationCIDR}, func() (string, error) {
		err = r.rs.DeleteRoute(ctx, cluster, rt)
		return "", err
	})
	return err
}

type guardZones struct {
	g *guard
	z cloudprovider.Zones
}

func (z guardZones) GetZone(ctx context.Context) (zone cloudprovider.Zone, err error) {
	z.g.do(call{method: "GetZone"}, func() (string, error) {
		zone, err = z.z.GetZone(ctx)
		return zone.FailureDomain, err
	})
	return zone, err
}

func (z guardZones) GetZoneByProviderID(ctx context.Context, id string) (zone cloudprovider.Zone, err error) {
	z.g.do(call{method: "GetZoneByProviderID", key: id}, func() (string, error) {
		zone, err = z.z.GetZoneByProviderID(ctx, id)
		return zone.FailureDomain, err
	})
	return zone, err
}

func (z guardZones) GetZoneByNodeName(ctx context.Context, name types.NodeName) (zone cloudprovider.Zone, err error) {
	z.g.do(call{method: "GetZoneByNodeName", key: string(name)}, func() (string, error) {
		zone, err = z.z.GetZoneByNodeName(ctx, name)
		return zone.FailureDomain, err
	})
	return zone, err
}

// pastNodes is the Node informer of a service controller started in a
// cluster whose Nodes in past joined before it had any Service: their Add
// events reach its handlers as if handled then, that is not at all (a node
// sync of no Services calls nothing: controllers/service/controller.go
// syncNodes, updateLoadBalancerHosts), while its lister holds them as
// usual. Handling them now, concurrently with the first Service, would
// run into a data race of k8s.io/cloud-provider@v0.37.2: the Service
// worker's processServiceCreateOrUpdate writes cachedService.state outside
// the cache lock while the node worker's serviceCache.allServices reads
// it, and -race would report it against the provider.
type pastNodes struct {
	coreinformers.NodeInformer
	past map[string]bool
}

func (p pastNodes) Informer() cache.SharedIndexInformer {
	return pastInformer{p.NodeInformer.Informer(), p.past}
}

type pastInformer struct {
	cache.SharedIndexInformer
	past map[string]bool
}

func (p pastInformer) AddEventHandler(h cache.ResourceEventHandler) (cache.ResourceEventHandlerRegistration, error) {
	return p.SharedIndexInformer.AddEventHandler(pastHandler{h, p.past})
}

func (p pastInformer) AddEventHandlerWithResyncPeriod(h cache.ResourceEventHandler, resync time.Duration) (cache.ResourceEventHandlerRegistration, error) {
	return p.SharedIndexInformer.AddEventHandlerWithResyncPeriod(pastHandler{h, p.past}, resync)
}

type pastHandler struct {
	cache.ResourceEventHandler
	past map[string]bool
}

func (p pastHandler) OnAdd(obj any, initial bool) {
	if n, ok := obj.(*v1.Node); ok && p.past[n.Name] {
		return
	}
	p.ResourceEventHandler.OnAdd(obj, initial)
}
