package conformance

import (
	"fmt"
	"slices"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	cloudproviderapi "k8s.io/cloud-provider/api"
	nodehelpers "k8s.io/cloud-provider/node/helpers"
	servicehelpers "k8s.io/cloud-provider/service/helpers"
	"k8s.io/utils/ptr"

	"github.com/ccmkit/ccmkit/internal/throttle"
)

// initializedNodes returns copies of the fixture nodes as the cloud node
// controller leaves them: provider ID set (from InstanceMetadata when the
// fixture has none and InstancesV2 works), no uninitialized taint.
func (r *rt) initializedNodes(atLeast int) []*v1.Node {
	return r.initNodes(withUID(r.nodes(atLeast)))
}

// initNodes sets the provider ID of each of nodes that has none from
// InstanceMetadata, when InstancesV2 works, and clears ResourceVersion.
func (r *rt) initNodes(nodes []*v1.Node) []*v1.Node {
	inst, ok := r.anyInst()
	for _, n := range nodes {
		n.ResourceVersion = ""
		if n.Spec.ProviderID != "" || !ok {
			continue
		}
		if md, err := inst.InstanceMetadata(r.ctx, n); err == nil && md != nil {
			n.Spec.ProviderID = md.ProviderID
		}
	}
	return nodes
}

func (h *harness) createNode(n *v1.Node) {
	if _, err := h.kube.CoreV1().Nodes().Create(h.r.ctx, n, metav1.CreateOptions{}); err != nil {
		h.r.Fatalf("creating Node %s: %v", n.Name, err)
	}
}

func (h *harness) node(name string) (*v1.Node, error) {
	return h.kube.CoreV1().Nodes().Get(h.r.ctx, name, metav1.GetOptions{})
}

func (h *harness) service(name string) *v1.Service {
	s, err := h.kube.CoreV1().Services(namespace).Get(h.r.ctx, name, metav1.GetOptions{})
	if err != nil {
		h.r.Fatalf("getting Service %s/%s: %v", namespace, name, err)
	}
	return s
}

func hasTaint(n *v1.Node, key string) bool {
	return slices.ContainsFunc(n.Spec.Taints, func(t v1.Taint) bool { return t.Key == key })
}

// cloudLabels are the labels the cloud node controller sets from
// InstanceMetadata (controllers/node/node_controller.go
// getNodeModifiersFromCloudProvider): a kubelet registering with
// --cloud-provider=external sets none of them.
var cloudLabels = []string{
	v1.LabelInstanceType, v1.LabelInstanceTypeStable,
	v1.LabelFailureDomainBetaZone, v1.LabelTopologyZone,
	v1.LabelFailureDomainBetaRegion, v1.LabelTopologyRegion,
}

// registered returns a copy of n, a Node as the cloud node controller
// initialized it, as a kubelet with --cloud-provider=external registers it:
// no provider ID (the provider finds the node by name), none of cloudLabels,
// and of the addresses only a Hostname (n's, else its name), which the
// controller keeps when the cloud reports none (updateNodeAddress).
//
// Not none at all, although a kubelet without --node-ip leaves them to the
// cloud: the controller patches addresses right after initializing the
// Node, and again in its status update, whose first run at start may race
// it; from an empty list each patch is a strategic merge that merges by
// address type (k8s.io/component-helpers/node/util PatchNodeStatus replaces
// the list only when it was not empty), so the second one turns a
// dual-stack node's two InternalIPs into one IP twice. That race is
// upstream's, not the provider's.
func registered(n *v1.Node) *v1.Node {
	c := byName(n)
	c.ResourceVersion = ""
	c.Status.Addresses = slices.DeleteFunc(c.Status.Addresses, func(a v1.NodeAddress) bool { return a.Type != v1.NodeHostName })
	if len(c.Status.Addresses) == 0 {
		c.Status.Addresses = []v1.NodeAddress{{Type: v1.NodeHostName, Address: c.Name}}
	}
	for _, l := range cloudLabels {
		delete(c.Labels, l)
	}
	return c
}

// withoutCloudTaint returns a copy of n without the uninitialized taint.
func withoutCloudTaint(n *v1.Node) *v1.Node {
	c := n.DeepCopy()
	c.Spec.Taints = slices.DeleteFunc(c.Spec.Taints, func(t v1.Taint) bool { return t.Key == cloudproviderapi.TaintExternalCloudProvider })
	return c
}

// ruleCtrlNodeInit registers the fixture nodes as a kubelet does and waits
// for the cloud node controller to initialize them. What each Node must get
// is the provider's answer for it without the taint (the answer every later
// call gets), and the provider ID of the fixture node when it has one: an
// answer that differs while the node is uninitialized is what initialization
// writes, and (addresses aside, see nodeStatusPeriod) what the Node keeps.
func ruleCtrlNodeInit(r *rt) {
	h := r.harness()
	inst := r.inst()
	fixtures := withUID(r.namedNodes(1))
	nodes := make([]*v1.Node, len(fixtures))
	for i, n := range fixtures {
		n = registered(n)
		n.Spec.Taints = append(n.Spec.Taints, v1.Taint{Key: cloudproviderapi.TaintExternalCloudProvider, Value: "true", Effect: v1.TaintEffectNoSchedule})
		nodes[i] = n
	}
	h.startNodeController()
	for _, n := range nodes {
		h.createNode(n)
	}
	for i, n := range nodes {
		md := r.mustMetadata(inst, withoutCloudTaint(n))
		providerID := fixtures[i].Spec.ProviderID
		if providerID == "" {
			providerID = md.ProviderID
		}
		addrs := md.NodeAddresses
		if ann := n.Annotations[providedNodeIP]; ann != "" {
			if a, err := nodehelpers.GetNodeAddressesFromNodeIP(ann, addrs); err == nil {
				addrs = a
			}
		}
		var last *v1.Node
		r.eventually(fmt.Sprintf("node %s to lose the taint %s and get its addresses", n.Name, cloudproviderapi.TaintExternalCloudProvider), func() (bool, string) {
			got, err := h.node(n.Name)
			if err != nil {
				return false, err.Error()
			}
			last = got
			missing := slices.ContainsFunc(addrs, func(a v1.NodeAddress) bool { return !slices.Contains(got.Status.Addresses, a) })
			return !hasTaint(got, cloudproviderapi.TaintExternalCloudProvider) && !missing,
				fmt.Sprintf("taints %v, addresses %v (want %v), provider calls %v", got.Spec.Taints, got.Status.Addresses, addrs, h.g.summary(n.Name))
		})
		if last.Spec.ProviderID != providerID {
			r.Errorf("node %s has spec.providerID %q, expected %q (the fixture node's, which InstanceMetadata reports for it)", n.Name, last.Spec.ProviderID, providerID)
		}
		for label, v := range map[string]string{v1.LabelTopologyZone: md.Zone, v1.LabelTopologyRegion: md.Region, v1.LabelInstanceTypeStable: md.InstanceType} {
			if v != "" && last.Labels[label] != v {
				r.Errorf("node %s has label %s=%q, expected %q from InstanceMetadata", n.Name, label, last.Labels[label], v)
			}
		}
	}
}

// lifecycleNodes creates the fixture nodes initialized and NotReady (the
// node lifecycle controller only asks the cloud about NotReady nodes), starts
// the node lifecycle controller, and waits until it has asked about each
// node at least twice.
func (h *harness) lifecycleNodes() []*v1.Node {
	nodes := h.r.initializedNodes(1)
	for _, n := range nodes {
		setCondition(n, v1.NodeReady, v1.ConditionFalse)
		h.createNode(n)
	}
	h.startNodeLifecycleController()
	h.monitorPasses(nodes, func(n *v1.Node) string {
		return fmt.Sprintf("Node %s of a running instance is gone before any instance changed, expected it kept", n.Name)
	})
	return nodes
}

func ruleCtrlNodeTerminated(r *rt) {
	h := r.harness()
	r.inst()
	term := r.target().Hooks.TerminateInstance
	r.needHook("TerminateInstance", term)
	nodes := h.lifecycleNodes()
	r.changeCloud("TerminateInstance", term, nodes[0])
	r.eventuallyChanged(fmt.Sprintf("Node %s of a terminated instance to be deleted", nodes[0].Name), func() (bool, string) {
		_, err := h.node(nodes[0].Name)
		return apierrors.IsNotFound(err), fmt.Sprintf("Get: %v, provider calls %v", err, h.g.summary(nodes[0].Name))
	})
	h.monitorPasses(nodes[1:], func(n *v1.Node) string {
		return fmt.Sprintf("Node %s of a running instance is gone after another instance was terminated, expected it kept", n.Name)
	})
}

// monitorPasses waits until the node lifecycle controller has asked twice
// more about each of keep, whose Nodes must stay: one deleted meanwhile
// fails the rule at once, with what gone says of it.
func (h *harness) monitorPasses(keep []*v1.Node, gone func(n *v1.Node) string) {
	asked := func(name string) int {
		return h.g.count(func(c call) bool { return c.method == "InstanceExists" && c.key == name })
	}
	before := map[string]int{}
	for _, n := range keep {
		before[n.Name] = asked(n.Name)
	}
	h.r.eventually("two more monitoring passes", func() (bool, string) {
		for _, n := range keep {
			if _, err := h.node(n.Name); apierrors.IsNotFound(err) {
				h.r.Fatalf("%s: the node lifecycle controller deleted it; provider calls %v", gone(n), h.g.summary(n.Name))
			}
		}
		for _, n := range keep {
			if c := asked(n.Name); c < before[n.Name]+2 {
				return false, fmt.Sprintf("%d InstanceExists calls about node %s", c, n.Name)
			}
		}
		return true, ""
	})
}

func ruleCtrlNodeShutdown(r *rt) {
	h := r.harness()
	r.inst()
	stop := r.target().Hooks.StopInstance
	r.needHook("StopInstance", stop)
	nodes := h.lifecycleNodes()
	r.changeCloud("StopInstance", stop, nodes[0])
	r.eventuallyChanged(fmt.Sprintf("Node %s of a stopped instance to get the taint %s", nodes[0].Name, cloudproviderapi.TaintNodeShutdown), func() (bool, string) {
		n, err := h.node(nodes[0].Name)
		if apierrors.IsNotFound(err) {
			r.Fatalf("the node lifecycle controller deleted Node %s of a stopped instance, expected it kept with the taint %s: InstanceExists must stay true while the instance exists; provider calls %v", nodes[0].Name, cloudproviderapi.TaintNodeShutdown, h.g.summary(nodes[0].Name))
		}
		if err != nil {
			return false, fmt.Sprintf("Get: %v", err)
		}
		return hasTaint(n, cloudproviderapi.TaintNodeShutdown), fmt.Sprintf("taints %v, provider calls %v", n.Spec.Taints, h.g.summary(n.Name))
	})
	h.monitorPasses(nodes, func(n *v1.Node) string {
		if n == nodes[0] {
			return fmt.Sprintf("Node %s of a stopped instance is gone after it got the shutdown taint, expected it kept", n.Name)
		}
		return fmt.Sprintf("Node %s of a running instance is gone, expected it kept", n.Name)
	})
	for _, n := range nodes[1:] {
		if got, err := h.node(n.Name); err != nil {
			r.Errorf("Node %s of a running instance: %v", n.Name, err)
		} else if hasTaint(got, cloudproviderapi.TaintNodeShutdown) {
			r.Errorf("Node %s of a running instance has the shutdown taint", n.Name)
		}
	}
}

// serviceScenario follows a cluster's order, kubelets first: a Node
// (Ready, initialized) is there when the service controller starts; svc is
// created and must get the finalizer and an ingress; then a second Node
// joins, and the controller must put it behind the load balancer with
// UpdateLoadBalancer. It returns svc as stored. When the finalizer and
// ingress, or that update, do not come, the rule fails if it is
// CTRL-SERVICE-LB (owner) and is skipped, pointing at that rule,
// otherwise. A Service created before any Node is
// CTRL-SERVICE-BEFORE-NODES' scenario.
//
// The order avoids a data race of k8s.io/cloud-provider@v0.37.2
// controllers/service/controller.go, so that -race reports only the
// provider's races (see pastNodes): the first Node joined before the
// controller had any Service, and the second one's event is handled after
// the Service has been synced and observed; the Service changes again only
// after that handling has been observed, so every access is ordered.
func (h *harness) serviceScenario(svc *v1.Service, owner bool) *v1.Service {
	nodes := h.r.initializedNodes(2)
	for _, n := range nodes[:2] {
		setCondition(n, v1.NodeReady, v1.ConditionTrue)
	}
	first, joining := nodes[0], nodes[1]
	h.createNode(first)
	lister := h.r.inf.Core().V1().Nodes().Lister() // asks for the informer
	h.startInformers()
	h.r.eventually(fmt.Sprintf("Node %s in the informer cache", first.Name), func() (bool, string) {
		_, err := lister.Get(first.Name)
		return err == nil, fmt.Sprint(err)
	})
	h.startServiceController(first)
	h.createService(svc)
	h.awaitScenario(owner, fmt.Sprintf("Service %s (created with Node %s ready) to get the finalizer %s and an ingress", svcKey(svc), first.Name, servicehelpers.LoadBalancerCleanupFinalizer), func() (bool, string) {
		return h.provisioned(svc)
	})
	h.createNode(joining)
	h.awaitScenario(owner, fmt.Sprintf("UpdateLoadBalancer(%s) to put new Node %s behind the load balancer", svcKey(svc), joining.Name), func() (bool, string) {
		c := h.g.count(func(c call) bool {
			return c.method == "UpdateLoadBalancer" && c.key == svcKey(svc) && c.err == nil && c.nodes == 2
		})
		return c > 0, fmt.Sprintf("provider calls %v", h.g.summary(svcKey(svc)))
	})
	return h.service(svc.Name)
}

// createService creates svc through the clientset.
func (h *harness) createService(svc *v1.Service) {
	svc.ResourceVersion = ""
	if _, err := h.kube.CoreV1().Services(namespace).Create(h.r.ctx, svc, metav1.CreateOptions{}); err != nil {
		h.r.Fatalf("creating Service %s: %v", svcKey(svc), err)
	}
}

// provisioned reports whether svc, as stored, has the cleanup finalizer
// and an ingress, and describes it.
func (h *harness) provisioned(svc *v1.Service) (bool, string) {
	got := h.service(svc.Name)
	return servicehelpers.HasLBFinalizer(got) && len(got.Status.LoadBalancer.Ingress) > 0,
		fmt.Sprintf("finalizers %v, ingress %v, provider calls %v", got.Finalizers, got.Status.LoadBalancer.Ingress, h.g.summary(svcKey(svc)))
}

// serviceRetryDelay is the service controller's first delay before it
// syncs a Service again after an error (controllers/service/controller.go
// minRetryDelay).
const serviceRetryDelay = 5 * time.Second

// ruleCtrlServiceBeforeNodes creates a Service before any Node, as a
// cluster whose kubelets are not up yet does, waits until the controller's
// sync of it settles with no nodes (an answer that is not an
// api.RetryError: success, or an error it retries only after
// serviceRetryDelay), and then lets a Node join.
//
// Settled, the Service is not written again until the Node's sync has read
// it: with an ingress it is left alone, after an error it is retried no
// sooner than serviceRetryDelay later, while the node sync follows the
// Node's creation within milliseconds. That keeps the data race described
// at serviceScenario out of the way. A provider that keeps answering
// api.RetryError with no nodes never settles (its Service is synced again
// and again): the rule is skipped, LB-NO-NODES reports it.
func ruleCtrlServiceBeforeNodes(r *rt) {
	h := r.harness()
	r.lb()
	n := r.initializedNodes(1)[0]
	setCondition(n, v1.NodeReady, v1.ConditionTrue)
	svc := service("ctrl-before-nodes")
	h.startServiceController()
	h.createService(svc)
	settled := func() (bool, string) {
		if ok, desc := h.provisioned(svc); ok {
			return true, desc
		}
		var last *call
		h.g.each(func(c call) {
			if c.method == "EnsureLoadBalancer" && c.key == svcKey(svc) {
				last = &c
			}
		})
		if last == nil {
			return false, "no EnsureLoadBalancer yet"
		}
		_, retry := throttle.RetryAfter(last.err)
		return !retry, fmt.Sprintf("last EnsureLoadBalancer: %s (error: %v)", last.result, last.err)
	}
	if why := r.awaited(r.cfg.Timeout, "Config.Timeout", fmt.Sprintf("the service controller's sync of %s, created before any Node, to settle (an EnsureLoadBalancer answer other than api.RetryError)", svcKey(svc)), settled); why != "" {
		r.Skipf("precondition failed: %s: see LB-NO-NODES", why)
	}
	h.createNode(n)
	why := r.awaited(r.cfg.Timeout+serviceRetryDelay, fmt.Sprintf("Config.Timeout %v + the service controller's first retry delay %v", r.cfg.Timeout, serviceRetryDelay),
		fmt.Sprintf("Service %s, created before any Node, to get the finalizer %s and an ingress once Node %s is ready", svcKey(svc), servicehelpers.LoadBalancerCleanupFinalizer, n.Name), func() (bool, string) {
			return h.provisioned(svc)
		})
	if why != "" {
		// A Service created with its Node ready is CTRL-SERVICE-LB's
		// scenario, run on a fresh target: when it fails too, the order is
		// not the problem.
		r.harness().serviceScenario(service("ctrl-after-nodes"), false)
		r.Fatalf("%s", why)
	}
	if r.target().Hooks.Backends == nil {
		r.Logf("Hooks.Backends is nil: the backends were not checked")
		return
	}
	want := []string{n.Name}
	r.eventually(fmt.Sprintf("Node %s behind the load balancer of %s", n.Name, svcKey(svc)), func() (bool, string) {
		got, err := r.target().Hooks.Backends(r.ctx, r.cfg.ClusterName, svc)
		if err != nil {
			return false, fmt.Sprintf("Hooks.Backends: %v", err)
		}
		slices.Sort(got)
		return slices.Equal(want, got), fmt.Sprintf("backends %v, provider calls %v", got, h.g.summary(svcKey(svc)))
	})
}

// awaitScenario polls cond for Config.Timeout; when it does not come, it
// fails the rule if owner (CTRL-SERVICE-LB) and skips it, pointing at that
// rule, otherwise: one mistake, one failing rule.
func (h *harness) awaitScenario(owner bool, what string, cond func() (bool, string)) {
	if why := h.r.awaited(h.r.cfg.Timeout, "Config.Timeout", what, cond); why != "" {
		if owner {
			h.r.Fatalf("%s", why)
		}
		h.r.Skipf("precondition failed: %s: see CTRL-SERVICE-LB", why)
	}
}

// summary renders the calls made for key, for failure messages.
func (g *guard) summary(key string) []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	var out []string
	for _, c := range g.calls {
		if c.key == key {
			s := c.method
			if c.result != "" {
				s += " " + c.result
			}
			if c.err != nil {
				s += fmt.Sprintf(" (error: %v)", c.err)
			}
			out = append(out, s)
		}
	}
	if len(out) > 10 {
		out = append(out[:5], append([]string{fmt.Sprintf("… %d more …", len(out)-10)}, out[len(out)-5:]...)...)
	}
	return out
}

func ruleCtrlServiceLB(r *rt) {
	h := r.harness()
	lb := r.lb()
	svc := h.serviceScenario(service("ctrl-lb"), true)
	if !r.exists(lb, r.cfg.ClusterName, svc) {
		r.Errorf("Service %s has an ingress, but GetLoadBalancer reports exists=false", svcKey(svc))
	}
}

func ruleCtrlServicePort(r *rt) {
	h := r.harness()
	r.lb()
	svc := h.serviceScenario(service("ctrl-port"), false)
	svc.Spec.Ports[0].Port = 8080
	svc.Spec.Ports[0].NodePort = 30081
	if _, err := h.kube.CoreV1().Services(namespace).Update(r.ctx, svc, metav1.UpdateOptions{}); err != nil {
		r.Fatalf("updating Service %s: %v", svcKey(svc), err)
	}
	if r.target().Hooks.Listeners != nil {
		want := r.wantListeners(svc)
		r.eventually(fmt.Sprintf("the listeners of %s to follow port 80 changed to 8080", svcKey(svc)), func() (bool, string) {
			got, err := r.target().Hooks.Listeners(r.ctx, r.cfg.ClusterName, svc)
			if err != nil {
				return false, err.Error()
			}
			d := cmp.Diff(want, sortListeners(got), cmpOpts, ignoreAppProtocol)
			return d == "", "(-want +got):\n" + d
		})
		return
	}
	r.eventually(fmt.Sprintf("a successful EnsureLoadBalancer(%s) with port 8080", svcKey(svc)), func() (bool, string) {
		n := h.g.count(func(c call) bool {
			return c.method == "EnsureLoadBalancer" && c.key == svcKey(svc) && c.err == nil && len(c.ports) > 0 && c.ports[0].Port == 8080
		})
		return n > 0, fmt.Sprintf("provider calls %v", h.g.summary(svcKey(svc)))
	})
}

func ruleCtrlServiceDelete(r *rt) {
	h := r.harness()
	lb := r.lb()
	before := r.owned()
	svc := h.serviceScenario(service("ctrl-delete"), false)
	// The fake clientset ignores finalizers: play the API server's part of a
	// graceful delete by setting the deletion timestamp.
	now := metav1.NewTime(time.Now())
	svc.DeletionTimestamp = &now
	if _, err := h.kube.CoreV1().Services(namespace).Update(r.ctx, svc, metav1.UpdateOptions{}); err != nil {
		r.Fatalf("marking Service %s deleted: %v", svcKey(svc), err)
	}
	r.eventually(fmt.Sprintf("the finalizer of deleted Service %s to be removed", svcKey(svc)), func() (bool, string) {
		s := h.service(svc.Name)
		return !servicehelpers.HasLBFinalizer(s), fmt.Sprintf("finalizers %v, provider calls %v", s.Finalizers, h.g.summary(svcKey(svc)))
	})
	if r.exists(lb, r.cfg.ClusterName, svc) {
		r.Errorf("the finalizer of deleted Service %s is gone, but GetLoadBalancer reports exists=true: the load balancer leaks", svcKey(svc))
	}
	r.checkOwned(fmt.Sprintf("after Service %s was deleted", svcKey(svc)), before)
}

func ruleCtrlServiceClass(r *rt) {
	h := r.harness()
	lb := r.lb()
	class := service("ctrl-class")
	class.Spec.LoadBalancerClass = ptr.To("example.com/another-controller")
	class.ResourceVersion = ""
	if _, err := h.kube.CoreV1().Services(namespace).Create(r.ctx, class, metav1.CreateOptions{}); err != nil {
		r.Fatalf("creating Service %s: %v", svcKey(class), err)
	}
	h.serviceScenario(service("ctrl-class-barrier"), false)
	got := h.service(class.Name)
	if servicehelpers.HasLBFinalizer(got) || len(got.Status.LoadBalancer.Ingress) > 0 {
		r.Errorf("Service %s with spec.loadBalancerClass got finalizers %v and ingress %v, expected neither", svcKey(class), got.Finalizers, got.Status.LoadBalancer.Ingress)
	}
	if calls := h.g.summary(svcKey(class)); len(calls) > 0 {
		r.Errorf("the provider was called for Service %s with spec.loadBalancerClass: %v", svcKey(class), calls)
	}
	if r.exists(lb, r.cfg.ClusterName, class) {
		r.Errorf("GetLoadBalancer(%s) reports a load balancer for a Service with spec.loadBalancerClass", svcKey(class))
	}
}

// awaitNetworkAvailable waits for the route controller to mark every node
// NetworkUnavailable=False, which it does once the node's routes exist.
func (r *rt) awaitNetworkAvailable(h *harness, nodes []*v1.Node) {
	for _, n := range nodes {
		r.eventually(fmt.Sprintf("node %s to get NetworkUnavailable=False", n.Name), func() (bool, string) {
			got, err := h.node(n.Name)
			if err != nil {
				return false, err.Error()
			}
			for _, c := range got.Status.Conditions {
				if c.Type == v1.NodeNetworkUnavailable {
					return c.Status == v1.ConditionFalse, fmt.Sprintf("%s=%s (%s)", c.Type, c.Status, c.Reason)
				}
			}
			return false, "no NetworkUnavailable condition"
		})
	}
}

func ruleCtrlRoutes(r *rt) {
	h := r.harness()
	rs := r.routes()
	nodes := r.initNodes(withUID(r.namedNodes(1))) // Route.TargetNode is the Node name
	want := map[string]string{}
	for i, n := range nodes {
		cidr, ok := r.cfg.podCIDR(i, false)
		if !ok {
			cidr, _ = r.cfg.podCIDR(i, true)
		}
		n.Spec.PodCIDR, n.Spec.PodCIDRs = cidr, []string{cidr}
		want[cidr] = n.Name
		h.createNode(n)
	}
	h.startRouteController()
	listed := func() (map[string]string, string) {
		list, err := rs.Routes.ListRoutes(r.ctx, r.cfg.ClusterName) // polled: an api.RetryError is "not yet"
		if err != nil {
			return nil, err.Error()
		}
		got := map[string]string{}
		for _, rt := range list {
			if rt != nil {
				got[rt.DestinationCIDR] = string(rt.TargetNode)
			}
		}
		return got, fmt.Sprintf("routes %v", got)
	}
	r.eventually("routes for every node's pod CIDR", func() (bool, string) {
		got, s := listed()
		return got != nil && cmp.Equal(want, got), fmt.Sprintf("%s: expected %v", s, want)
	})
	r.awaitNetworkAvailable(h, nodes)
	lists := h.g.count(func(c call) bool { return c.method == "ListRoutes" })
	r.eventually("three more route reconciliations", func() (bool, string) {
		n := h.g.count(func(c call) bool { return c.method == "ListRoutes" })
		return n >= lists+3, fmt.Sprintf("%d ListRoutes calls", n)
	})
	creates := h.g.count(func(c call) bool { return c.method == "CreateRoute" && c.err == nil })
	deletes := h.g.count(func(c call) bool { return c.method == "DeleteRoute" })
	if creates != len(want) || deletes != 0 {
		r.Errorf("with nothing changing, the route controller made %d successful CreateRoute and %d DeleteRoute calls, expected %d and 0: the listed routes do not match what was created", creates, deletes, len(want))
	}
	gone := nodes[len(nodes)-1]
	if err := h.kube.CoreV1().Nodes().Delete(r.ctx, gone.Name, metav1.DeleteOptions{}); err != nil {
		r.Fatalf("deleting Node %s: %v", gone.Name, err)
	}
	delete(want, gone.Spec.PodCIDRs[0])
	r.eventually(fmt.Sprintf("the route of deleted Node %s to go away", gone.Name), func() (bool, string) {
		got, s := listed()
		return got != nil && cmp.Equal(want, got, cmpOpts), fmt.Sprintf("%s: expected %v", s, want)
	})
}
