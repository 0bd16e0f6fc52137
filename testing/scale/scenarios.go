package scale

import (
	"context"
	"fmt"
	"slices"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	servicehelpers "k8s.io/cloud-provider/service/helpers"
)

// bringUp: Nodes join and Services are created, interleaved, over
// Config.Spread.
func (s *sim) bringUp(ctx context.Context) error {
	n, m := s.cfg.Nodes, s.cfg.Services
	return s.run(ctx, scenario{
		name: BringUp,
		act: func(ctx context.Context) error {
			if !s.cfg.NodesFirst {
				return s.bringUpSteps(ctx, n, m)
			}
			if err := s.bringUpSteps(ctx, n, 0); err != nil {
				return err
			}
			if err := s.await(ctx, scenario{name: BringUp, goal: s.nodesDone}); err != nil {
				return err
			}
			return s.bringUpSteps(ctx, 0, m)
		},
		goal:      s.all(s.nodesDone, s.servicesReady, s.backendsExact),
		minimum:   s.bringUpMinimum(),
		cloud:     bringUpCloudMinimum(s.shape(), s.costs, false),
		coalesced: bringUpCloudMinimum(s.shape(), s.costs, true),
		settle:    true,
		lbs:       m,
	})
}

// bringUpSteps adds n Nodes and the first m Services, interleaved,
// evenly over Config.Spread.
func (s *sim) bringUpSteps(ctx context.Context, n, m int) error {
	steps := max(n, m)
	for i := range steps {
		if i < n {
			if err := s.addNode(ctx); err != nil {
				return err
			}
		}
		if i < m {
			if _, err := s.kube.CoreV1().Services("default").Create(ctx, newService(i), metav1.CreateOptions{}); err != nil {
				return fmt.Errorf("creating Service %d: %w", i, err)
			}
		}
		sleep(ctx, s.cfg.Spread/time.Duration(steps))
	}
	return nil
}

// bringUpMinimum: every Node is new, so its metadata must be read once
// (controllers/node/node_controller.go syncNode); every Service needs its
// load balancer created, so one EnsureLoadBalancer each; a Service
// created before the last Node joined needs its backends updated at least
// once after its creation, one UpdateLoadBalancer each if every Node
// change in between were coalesced into one (none with
// Config.NodesFirst); every pod CIDR needs its route, one CreateRoute
// each, after at least one ListRoutes (route_controller.go reconcile
// creates only what the list lacks).
func (s *sim) bringUpMinimum() []Minimum {
	n, m := int64(s.cfg.Nodes), int64(s.cfg.Services)
	mins := []Minimum{{capInstances, "InstanceMetadata", n, "one per new Node (syncNode)"}}
	if s.hasLB() && m > 0 {
		mins = append(mins, Minimum{capLoadBalancer, "EnsureLoadBalancer", m, "one per new Service"})
	}
	if early := s.servicesBeforeLastNode(); s.hasLB() && early > 0 {
		mins = append(mins, Minimum{capLoadBalancer, "UpdateLoadBalancer", early, "one per Service created before the last Node joined"})
	}
	if s.hasRoutes() {
		mins = append(mins, Minimum{capRoutes, "CreateRoute", n, "one per pod CIDR"},
			Minimum{capRoutes, "ListRoutes", 1, "one read before the first create"})
	}
	return mins
}

// shape is what one simulation's scenarios do to the cloud, as their
// cloud minimums count it.
type shape struct {
	nodes, services int64
	// ports is the ports of each Service (newService).
	ports      int64
	nodesFirst bool
	// lb and routes report whether the provider offers LoadBalancer and
	// Routes.
	lb, routes bool
}

// shape returns the shape of s's scenarios.
func (s *sim) shape() shape {
	return shape{nodes: int64(s.cfg.Nodes), services: int64(s.cfg.Services), ports: servicePorts(),
		nodesFirst: s.cfg.NodesFirst, lb: s.hasLB(), routes: s.hasRoutes()}
}

// bringUpCloudMinimum: each new Node's instance is read once, and each
// new Service's "no load balancer yet" is confirmed once before its
// create (a list read earlier cannot vouch for it); the route table is
// read once. Each Service's load balancer is created (c's writes for its
// ports), each Node routed, and each Node joining after a load balancer
// exists written to the backends (bringUpBackendWrites).
//
// Coalesced, the Node changes are held back and written together: each
// load balancer created before the last Node joined is written once
// after it (coalescedBackendWrites), and with c.RouteTable the routes are
// one table write. That is the floor of any provider: a load balancer
// created before a Node joined cannot hold it without a write.
func bringUpCloudMinimum(w shape, c CloudCosts, coalesced bool) CloudMinimum {
	n, m := w.nodes, w.services
	var cm CloudMinimum
	cm.add(n, 0, "a read per new Node")
	if w.lb && m > 0 {
		cm.add(m, m*c.createWrites(w.ports), createWhy(c, w.ports))
		if coalesced {
			cm.add(0, coalescedBackendWrites(w, c), coalescedBackendWhy(c, w.ports))
		} else {
			cm.add(0, bringUpBackendWrites(w, c), bringUpBackendWhy(c, w.ports))
		}
	}
	if w.routes {
		if coalesced && c.RouteTable && n > 0 {
			cm.add(1, 1, "a route-table read, one table write with a route per Node (Target.CloudCosts: the route table written whole)")
		} else {
			cm.add(1, n, "a route-table read, a route per Node")
		}
	}
	return cm
}

// coalescedBackendWrites is the backend writes of the Nodes joining at
// bring-up when every change is held back and written together: the
// load balancers that exist when the last Node joins are each written
// once (per pool, at c's cost), the shared pool once, after its creation.
func coalescedBackendWrites(w shape, c CloudCosts) int64 {
	var writes int64
	if c.shared() {
		writes = 1
	}
	if w.nodes > 0 {
		writes += c.nodeWrites(lbsAtJoin(w, w.nodes-1), w.ports)
	}
	return writes
}

// coalescedBackendWhy says what the coalesced Node joins at bring-up
// write.
func coalescedBackendWhy(c CloudCosts, ports int64) string {
	if c.shared() {
		return fmt.Sprintf("the shared backend pool created, then %s to it once after the last Node joined", plural(int64(c.NodeWrites), "write"))
	}
	writes, costs := c.perLoadBalancerWhy(ports)
	return fmt.Sprintf("once after the last Node joined, %s created before it %s", writes, costs)
}

// createWhy says what creating each Service's load balancer costs.
func createWhy(c CloudCosts, ports int64) string {
	if c.flatCreate() {
		return "a confirming read and a create per Service"
	}
	return fmt.Sprintf("a confirming read and %s per Service (Target.CloudCosts)", writesFormula(c.CreateWrites, c.CreateWritesPerPort, fmt.Sprint(ports)))
}

// bringUpBackendWrites is the backend writes of the Nodes joining at
// bring-up: each Node changes the backends of the load balancers of the
// Services created before it (lbsAtJoin), at c's cost; with shared pools,
// plus the pool's creation with the first load balancer. Each join is
// charged as it comes; a coalesced minimum would charge the joins
// between two creates once per pool instead.
func bringUpBackendWrites(w shape, c CloudCosts) int64 {
	var writes int64
	if c.shared() {
		writes = 1
	}
	for i := range w.nodes {
		writes += c.nodeWrites(lbsAtJoin(w, i), w.ports)
	}
	return writes
}

// lbsAtJoin is how many load balancers exist when bring-up adds Node i:
// bringUpSteps creates Node i, then Service i, at step i, so Services 0
// to i-1 come before it when interleaved; none with NodesFirst.
func lbsAtJoin(w shape, i int64) int64 {
	if w.nodesFirst {
		return 0
	}
	return min(i, w.services)
}

// bringUpBackendWhy says what the Nodes joining at bring-up write.
func bringUpBackendWhy(c CloudCosts, ports int64) string {
	switch {
	case c.flatNodes():
		return "the shared backend pool created, then written per Node joining after it"
	case c.shared():
		return fmt.Sprintf("the shared backend pool created, then %s to it per Node joining after it (Target.CloudCosts)", plural(int64(c.NodeWrites), "write"))
	}
	writes, costs := c.perLoadBalancerWhy(ports)
	return fmt.Sprintf("per Node joining, %s created before it %s", writes, costs)
}

// add adds reads and writes to c, with why.
func (c *CloudMinimum) add(reads, writes int64, why string) {
	c.Reads += reads
	c.Writes += writes
	if c.Why != "" {
		c.Why += "; "
	}
	c.Why += why
}

// servicesBeforeLastNode counts the Services bring-up creates before the
// last Node joins: bringUpSteps creates Node i, then Service i, at step
// i, so Services 0 to Nodes-2 come before Node Nodes-1.
func (s *sim) servicesBeforeLastNode() int64 {
	if s.cfg.NodesFirst {
		return 0
	}
	return int64(min(s.cfg.Services, s.cfg.Nodes-1))
}

// steady: nothing changes for Config.Steady of simulated time (an hour by
// default), compressed; the minimum is no call at all.
func (s *sim) steady(ctx context.Context) error {
	return s.run(ctx, scenario{
		name: Steady,
		act: func(ctx context.Context) error {
			sleep(ctx, s.cfg.Steady/time.Duration(s.cfg.Compression))
			return ctx.Err()
		},
		goal:  func(context.Context) (bool, string, error) { return true, "", nil },
		cloud: CloudMinimum{Why: "nothing changed"},
		lbs:   s.cfg.Services,
	})
}

// churn: the instances of ChurnPercent of the Nodes are terminated and
// their Nodes go NotReady, while as many new Nodes join.
func (s *sim) churn(ctx context.Context) error {
	if s.target.TerminateInstance == nil {
		s.report.Scenarios = append(s.report.Scenarios, ScenarioReport{Name: Churn, Skipped: "Target.TerminateInstance is nil"})
		return nil
	}
	r := (s.cfg.Nodes*s.cfg.ChurnPercent + 99) / 100
	return s.run(ctx, scenario{
		name:      Churn,
		act:       func(ctx context.Context) error { return s.replace(ctx, r) },
		goal:      s.all(s.nodesDone, s.backendsExact),
		minimum:   s.churnMinimum(int64(r)),
		cloud:     churnCloudMinimum(s.shape(), s.costs, int64(r), false),
		coalesced: churnCloudMinimum(s.shape(), s.costs, int64(r), true),
		settle:    true,
		lbs:       s.cfg.Services,
	})
}

// replace terminates the instances of the r oldest live Nodes, marks them
// NotReady, and adds r Nodes.
func (s *sim) replace(ctx context.Context, r int) error {
	names := make([]string, 0, len(s.live))
	for name := range s.live {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names[:r] {
		if err := s.target.TerminateInstance(ctx, name); err != nil {
			return fmt.Errorf("Target.TerminateInstance(%q): %w", name, err)
		}
		if err := s.markNotReady(ctx, name); err != nil {
			return err
		}
		delete(s.live, name)
	}
	for range r {
		if err := s.addNode(ctx); err != nil {
			return err
		}
	}
	return nil
}

// churnMinimum: each gone Node must be confirmed gone before it is deleted
// (nodelifecycle MonitorNodes asks InstanceExists of a NotReady Node);
// each new Node is read and routed as at bring-up; each gone Node's
// route is deleted; each load balancer's backends change, one update each
// if all changes come at once.
func (s *sim) churnMinimum(r int64) []Minimum {
	mins := []Minimum{
		{capInstances, "InstanceExists", r, "one per NotReady Node (MonitorNodes)"},
		{capInstances, "InstanceMetadata", r, "one per new Node (syncNode)"},
	}
	if s.hasLB() && s.cfg.Services > 0 {
		mins = append(mins, Minimum{capLoadBalancer, "UpdateLoadBalancer", int64(s.cfg.Services), "one backend update per load balancer"})
	}
	if s.hasRoutes() {
		mins = append(mins, Minimum{capRoutes, "CreateRoute", r, "one per new pod CIDR"},
			Minimum{capRoutes, "DeleteRoute", r, "one per gone Node's route"})
	}
	return mins
}

// churnCloudMinimum: each gone instance is confirmed gone and each new
// one read, once each; each gone Node leaves and each new one joins the
// backends of every load balancer, at c's cost; each new Node's route is
// created and each gone one's deleted. Coalesced, every Node leaving and
// joining is one write to each pool (at c's cost), and with c.RouteTable
// the routes one table write.
func churnCloudMinimum(w shape, c CloudCosts, r int64, coalesced bool) CloudMinimum {
	var cm CloudMinimum
	cm.add(2*r, 0, "a read per gone and per new instance")
	if w.lb && w.services > 0 && r > 0 {
		if coalesced {
			cm.add(0, c.nodeWrites(w.services, w.ports), coalescedChurnWhy(c, w.ports))
		} else {
			cm.add(0, 2*r*c.nodeWrites(w.services, w.ports), churnBackendWhy(c, w.ports))
		}
	}
	if w.routes && r > 0 {
		if coalesced && c.RouteTable {
			cm.add(0, 1, "one route-table write creating the new Nodes' routes and deleting the gone ones' (Target.CloudCosts: the route table written whole)")
		} else {
			cm.add(0, 2*r, "a route created per new Node, deleted per gone one")
		}
	}
	return cm
}

// coalescedChurnWhy says what churn's Node changes, written together,
// write.
func coalescedChurnWhy(c CloudCosts, ports int64) string {
	if c.shared() {
		return fmt.Sprintf("the Nodes leaving and joining in one change, %s to the shared backend pool", plural(int64(c.NodeWrites), "write"))
	}
	writes, costs := c.perLoadBalancerWhy(ports)
	return fmt.Sprintf("the Nodes leaving and joining in one change, %s %s", writes, costs)
}

// churnBackendWhy says what each Node leaving or joining writes.
func churnBackendWhy(c CloudCosts, ports int64) string {
	switch {
	case c.flatNodes():
		return "a backend-pool write per Node leaving or joining"
	case c.shared():
		return fmt.Sprintf("%s to the shared backend pool per Node leaving or joining (Target.CloudCosts)", plural(int64(c.NodeWrites), "write"))
	}
	writes, costs := c.perLoadBalancerWhy(ports)
	return fmt.Sprintf("per Node leaving or joining, %s %s", writes, costs)
}

// restart: the controllers stop and new ones start, over a new provider
// of the same cloud when Target.Restart is set.
func (s *sim) restart(ctx context.Context) error {
	return s.run(ctx, scenario{
		name: Restart,
		act: func(ctx context.Context) error {
			s.ccm.stop()
			t := s.target
			if t.Restart != nil {
				nt, err := t.Restart(ctx)
				if err != nil {
					return fmt.Errorf("Target.Restart: %w", err)
				}
				t = nt
			}
			return s.start(ctx, t)
		},
		goal:    s.all(s.nodesDone, s.servicesReady, s.restartSynced),
		minimum: s.restartMinimum(),
		cloud:   restartCloudMinimum(s.shape()),
		settle:  true,
		lbs:     s.cfg.Services,
	})
}

// restartCloudMinimum: a new provider knows nothing, so it reads the state
// of each capability it has once (its instances, its load balancers, its
// route table), and writes nothing, whatever the cloud's costs.
func restartCloudMinimum(w shape) CloudMinimum {
	var cm CloudMinimum
	cm.add(1, 0, "a read of the instances")
	if w.lb && w.services > 0 {
		cm.add(1, 0, "a read of the load balancers")
	}
	if w.routes {
		cm.add(1, 0, "a read of the route table")
	}
	return cm
}

// restartSynced reports whether the new service controller has ensured
// every Service again (it syncs each Service it learns of:
// controllers/service/controller.go syncService) and the new route
// controller has listed the routes.
func (s *sim) restartSynced(context.Context) (bool, string, error) {
	c := s.meter.snapshot()
	ensured, listed := succeeded(c, "EnsureLoadBalancer"), succeeded(c, "ListRoutes")
	if s.hasLB() && ensured < int64(s.cfg.Services) {
		return false, fmt.Sprintf("%d of %d Services ensured again", ensured, s.cfg.Services), nil
	}
	if s.hasRoutes() && listed == 0 {
		return false, "routes not listed yet", nil
	}
	return true, "", nil
}

// restartMinimum: everything has converged, so nothing needs writing; the
// new route controller must read the table once to know that.
func (s *sim) restartMinimum() []Minimum {
	if !s.hasRoutes() {
		return nil
	}
	return []Minimum{{capRoutes, "ListRoutes", 1, "one read of the table"}}
}

// deletion: every Service is deleted.
func (s *sim) deletion(ctx context.Context) error {
	m := int64(s.cfg.Services)
	var mins []Minimum
	if s.hasLB() && m > 0 {
		mins = []Minimum{{capLoadBalancer, "EnsureLoadBalancerDeleted", m, "one per deleted Service"}}
	}
	return s.run(ctx, scenario{
		name: Deletion,
		act: func(ctx context.Context) error {
			for j := range s.cfg.Services {
				if err := s.markDeleted(ctx, newService(j).Name); err != nil {
					return err
				}
			}
			return nil
		},
		goal:    s.deleted,
		minimum: mins,
		cloud:   deletionCloudMinimum(s.shape(), s.costs),
		settle:  true,
	})
}

// deletionCloudMinimum: the load balancers are read once, each is
// deleted at c's cost, and with shared pools the pool after the last.
func deletionCloudMinimum(w shape, c CloudCosts) CloudMinimum {
	var cm CloudMinimum
	if !w.lb || w.services == 0 {
		return cm
	}
	writes := w.services * c.deleteWrites(w.ports)
	if c.shared() {
		writes++
	}
	cm.add(1, writes, deletionWhy(c, w.ports))
	return cm
}

// deletionWhy says what deleting every Service's load balancer costs.
func deletionWhy(c CloudCosts, ports int64) string {
	const read = "a read of the load balancers, "
	del := writesFormula(c.DeleteWrites, c.DeleteWritesPerPort, fmt.Sprint(ports)) + " to delete each Service's load balancer"
	switch {
	case c.flatDelete() && c.shared():
		return read + "a delete per Service and of the shared backend pool"
	case c.shared():
		return read + del + " and a delete of the shared backend pool (Target.CloudCosts)"
	}
	if c.flatDelete() {
		del = "a delete per Service"
	}
	_, costs := c.perLoadBalancerWhy(ports)
	return read + del + " " + costs
}

// deleted reports whether the service controller has finished with every
// Service: it removes the load-balancer cleanup finalizer once the load
// balancer is gone, or once GetLoadBalancer says there is none
// (controllers/service/controller.go processLoadBalancerDelete).
func (s *sim) deleted(ctx context.Context) (bool, string, error) {
	if !s.hasLB() {
		return true, "", nil
	}
	list, err := s.kube.CoreV1().Services("default").List(ctx, metav1.ListOptions{})
	if err != nil {
		return false, "", fmt.Errorf("listing Services: %w", err)
	}
	left := 0
	for i := range list.Items {
		if servicehelpers.HasLBFinalizer(&list.Items[i]) {
			left++
		}
	}
	if left > 0 {
		return false, fmt.Sprintf("%d of %d Services still with the finalizer %s", left, s.cfg.Services, servicehelpers.LoadBalancerCleanupFinalizer), nil
	}
	return true, "", nil
}

func (s *sim) hasLB() bool     { _, ok := s.meter.LoadBalancer(); return ok }
func (s *sim) hasRoutes() bool { _, ok := s.meter.Routes(); return ok }

// all is the goal that holds when each of goals holds.
func (s *sim) all(goals ...func(context.Context) (bool, string, error)) func(context.Context) (bool, string, error) {
	return func(ctx context.Context) (bool, string, error) {
		for _, g := range goals {
			if ok, missing, err := g(ctx); !ok || err != nil {
				return ok, missing, err
			}
		}
		return true, "", nil
	}
}

// sleep waits d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) {
	if d <= 0 {
		return
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// markDeleted deletes Service name as the API server does with an object
// that has finalizers: it sets its deletion timestamp, and the service
// controller deletes the load balancer and then removes its finalizer
// (controllers/service/controller.go needsCleanup). The fake clientset
// would remove the object at once, before the controller has seen it.
func (s *sim) markDeleted(ctx context.Context, name string) error {
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		svc, err := s.kube.CoreV1().Services("default").Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		svc.DeletionTimestamp = &metav1.Time{Time: time.Now()}
		_, err = s.kube.CoreV1().Services("default").Update(ctx, svc, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		return fmt.Errorf("deleting Service %s: %w", name, err)
	}
	return nil
}
