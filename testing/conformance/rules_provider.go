package conformance

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	cloudprovider "k8s.io/cloud-provider"

	"github.com/ccmkit/ccmkit/internal/check"
)

// ruleProviderAccessors checks what the callers of the accessors rely on:
// a true bool promises a usable value (cloud.go Interface: "returns true if
// the interface is supported"), on which the controllers call methods
// (controllers/nodelifecycle/node_lifecycle_controller.go
// ensureNodeExistsByProviderID, controllers/service/controller.go New,
// app/core.go startRouteController). With false, no caller looks at the
// value (controllers/node/node_controller.go getInstanceMetadata even checks
// both), so any value is fine there.
func ruleProviderAccessors(r *rt) {
	cloud := r.target().Cloud
	cl := r.cfg.Claims
	check := func(name string, v any, ok, claimed bool) {
		switch {
		case ok && check.IsNil(v):
			r.Errorf("%s() returned (%s, true), expected (impl, true) or false: the controllers call methods on the value whenever the bool is true", name, describe(v))
		case claimed && !ok:
			r.Errorf("%s() returned false, but Claims.%s is true", name, name)
		}
	}
	lb, ok := cloud.LoadBalancer()
	check("LoadBalancer", lb, ok, cl.LoadBalancer)
	in, ok := cloud.Instances()
	check("Instances", in, ok, false)
	i2, ok := cloud.InstancesV2()
	check("InstancesV2", i2, ok, cl.InstancesV2)
	z, ok := cloud.Zones()
	check("Zones", z, ok, cl.Zones)
	c, ok := cloud.Clusters()
	check("Clusters", c, ok, false)
	rs, ok := cloud.Routes()
	check("Routes", rs, ok, cl.Routes)
}

func ruleProviderName(r *rt) {
	cloud := r.target().Cloud
	name := cloud.ProviderName()
	switch {
	case name == "":
		r.Errorf("ProviderName() is empty, expected the name the provider is registered under (provider IDs start with \"<name>://\")")
	case strings.Contains(name, "://") || strings.ContainsAny(name, " \t\n/"):
		r.Errorf("ProviderName() %q contains \"://\", \"/\" or white space, expected a bare name such as \"acme\"", name)
	}
	if again := cloud.ProviderName(); again != name {
		r.Errorf("ProviderName() returned %q, then %q, expected a constant", name, again)
	}
	if r.cfg.ProviderName != "" && name != r.cfg.ProviderName {
		r.Errorf("ProviderName() is %q, but Config.ProviderName is %q, expected them equal", name, r.cfg.ProviderName)
	}
}

func ruleProviderClusterID(r *rt) {
	if r.cfg.AllowUntaggedCloud {
		r.Skipf("Config.AllowUntaggedCloud: the CCM runs with --allow-untagged-cloud")
	}
	if !r.target().Cloud.HasClusterID() {
		r.Errorf("HasClusterID() is false: the cloud-controller-manager exits at start unless --allow-untagged-cloud (set Config.AllowUntaggedCloud if you rely on it)")
	}
}

// build calls the registered factory with config in a goroutine, turning a
// panic into an error and a factory that does not return within
// Config.Timeout into a failure (the upstream registry lock is held while it
// runs: a factory calling RegisterCloudProvider deadlocks).
func (r *rt) build(config io.Reader, what string) (cloudprovider.Interface, error) {
	type out struct {
		c   cloudprovider.Interface
		err error
	}
	ch := make(chan out, 1)
	go func() {
		defer func() {
			if p := recover(); p != nil {
				ch <- out{err: fmt.Errorf("factory panicked: %v", p)}
			}
		}()
		c, err := cloudprovider.GetCloudProvider(r.cfg.ProviderName, config)
		ch <- out{c, err}
	}()
	select {
	case o := <-ch:
		return o.c, o.err
	case <-time.After(r.cfg.Timeout):
		r.Fatalf("the factory of %q with %s did not return within %v: does it call RegisterCloudProvider? (plugins.go GetCloudProvider holds the registry lock)", r.cfg.ProviderName, what, r.cfg.Timeout)
		return nil, nil
	}
}

func ruleProviderRegistration(r *rt) {
	name := r.cfg.ProviderName
	if name == "" {
		r.Skipf("Config.ProviderName is empty")
	}
	if !cloudprovider.IsCloudProvider(name) {
		r.Fatalf("no cloud provider is registered as %q: call cloudprovider.RegisterCloudProvider (or provider.Register) in an init function or before the CCM starts", name)
	}
	var cfg io.Reader // nil: no --cloud-config, passed as an untyped nil (plugins.go InitCloudProvider)
	what := "a nil reader (no --cloud-config)"
	if r.cfg.CloudConfig != "" {
		// The nil reader must not panic even when a config is required.
		if _, err := r.build(nil, "a nil reader"); err != nil && strings.HasPrefix(err.Error(), "factory panicked") {
			r.Errorf("the factory of %q with a nil reader (no --cloud-config): %v, expected an error", name, err)
		}
		cfg, what = strings.NewReader(r.cfg.CloudConfig), "Config.CloudConfig"
	}
	cloud, err := r.build(cfg, what)
	switch {
	case err != nil:
		r.Errorf("the factory of %q with %s: %v, expected a provider", name, what, err)
	case check.IsNil(cloud):
		r.Errorf("the factory of %q with %s returned (%s, nil): InitCloudProvider reports \"unknown cloud provider\"", name, what, describe(cloud))
	case cloud.ProviderName() != name:
		r.Errorf("the provider built by the factory of %q calls itself %q (ProviderName), expected %q", name, cloud.ProviderName(), name)
	}
}

func ruleProviderBadConfig(r *rt) {
	if r.cfg.ProviderName == "" || r.cfg.BadCloudConfig == "" {
		r.Skipf("needs Config.ProviderName and Config.BadCloudConfig")
	}
	if !cloudprovider.IsCloudProvider(r.cfg.ProviderName) {
		// GetCloudProvider returns (nil, nil) for an unknown name.
		r.Skipf("precondition failed: no cloud provider is registered as %q: see PROVIDER-REGISTRATION", r.cfg.ProviderName)
	}
	cloud, err := r.build(strings.NewReader(r.cfg.BadCloudConfig), "Config.BadCloudConfig")
	if err == nil {
		r.Errorf("the factory of %q accepted Config.BadCloudConfig and returned %s, expected an error naming what is wrong", r.cfg.ProviderName, describe(cloud))
	} else if strings.HasPrefix(err.Error(), "factory panicked") {
		r.Errorf("the factory of %q with Config.BadCloudConfig: %v, expected an error", r.cfg.ProviderName, err)
	}
}

// caps are the claimed capabilities whose accessors work, each retrying
// calls that fail with an api.RetryError (see retrying); nil when absent.
type caps struct {
	lb    cloudprovider.LoadBalancer
	inst  cloudprovider.InstancesV2
	rs    cloudprovider.Routes
	zones cloudprovider.Zones
}

// caps returns the claimed capabilities whose accessors work, skipping the
// rule when there is none.
func (r *rt) caps() caps {
	var c caps
	cloud := r.target().Cloud
	cl := r.cfg.Claims
	if v, ok := cloud.LoadBalancer(); cl.LoadBalancer && ok && !check.IsNil(v) {
		c.lb = retryLB{r, guarded(r, v)}
	}
	if v, ok := cloud.InstancesV2(); cl.InstancesV2 && ok && !check.IsNil(v) {
		c.inst = retryInst{r, guarded(r, v)}
	}
	if v, ok := cloud.Routes(); cl.Routes && ok && !check.IsNil(v) {
		c.rs = retryRoutes{r, guarded(r, v)}
	}
	if v, ok := cloud.Zones(); cl.Zones && ok && !check.IsNil(v) {
		c.zones = retryZones{r, guarded(r, v)}
	}
	if c.lb == nil && c.inst == nil && c.rs == nil && c.zones == nil {
		r.Skipf("no claimed capability with a working accessor")
	}
	return c
}

// ruleSentinelsUnwrapped checks ImplementedElsewhere exactly where upstream
// compares it with == and acts on the answer, and nowhere else:
//
//   - controllers/service/controller.go syncLoadBalancerIfNeeded: `err ==
//     cloudprovider.ImplementedElsewhere` on EnsureLoadBalancer (always
//     called) and on EnsureLoadBalancerDeleted (called when GetLoadBalancer
//     reports exists=true); a wrapped one is a failed sync, retried forever,
//     and a deleted Service keeps its finalizer.
//   - lockedUpdateLoadBalancerHosts: the same on UpdateLoadBalancer; a
//     wrapped one is ignored when GetLoadBalancer then reports exists=false,
//     and is a failed update (a Warning event, a retry) otherwise.
//
// Every other comparison in k8s.io/cloud-provider@v0.37.2 is errors.Is, on
// the provider's error or on one wrapped with %w first, which a wrapped
// sentinel satisfies: cloud.go GetInstanceProviderID compares the
// InstanceNotFound and NotImplemented of legacy Instances.InstanceID with
// ==, but only to decide whether to wrap them with %w, and all its callers
// (controllers/node/node_controller.go getInstanceMetadata,
// controllers/nodelifecycle/node_lifecycle_controller.go getProviderID and
// its callers) use errors.Is; so do observeInstanceOp and every InstancesV2
// caller. Zones, GetLoadBalancer and Routes errors are compared with no
// sentinel at all.
func ruleSentinelsUnwrapped(r *rt) {
	lb := r.lb()
	nodes := r.nodes(1)
	cl := r.cfg.ClusterName
	const where = "controllers/service/controller.go syncLoadBalancerIfNeeded"
	check := func(what, where string, err error) {
		if err != cloudprovider.ImplementedElsewhere && errors.Is(err, cloudprovider.ImplementedElsewhere) { //nolint:errorlint // the rule: the controller compares it with ==, so a wrapped one is the failure
			r.Errorf("%s returned %q, which wraps cloudprovider.ImplementedElsewhere: %s compares it with ==, expected the sentinel itself", what, err, where)
		}
	}
	svc := service("sentinels")
	_, err := lb.EnsureLoadBalancer(r.ctx, cl, svc, nodes)
	check("EnsureLoadBalancer", where, err)
	// Upstream calls Update and Delete, and acts on their sentinel, only for
	// a load balancer GetLoadBalancer reports (or cannot rule out).
	if _, exists, err := lb.GetLoadBalancer(r.ctx, cl, svc); err == nil && !exists {
		return
	}
	check("UpdateLoadBalancer", "controllers/service/controller.go lockedUpdateLoadBalancerHosts", lb.UpdateLoadBalancer(context.TODO(), cl, svc, nodes))
	check("EnsureLoadBalancerDeleted", where, lb.EnsureLoadBalancerDeleted(r.ctx, cl, svc))
}

// unchanged calls f and reports any change to args, the arguments f passes
// to the provider, as seen through view (nil: every field).
func (r *rt) unchanged(what string, view func(any) any, args []any, f func()) {
	if view == nil {
		view = deepCopy
	}
	before := make([]any, len(args))
	for i, a := range args {
		before[i] = view(a)
	}
	f()
	for i, a := range args {
		if d := cmp.Diff(before[i], view(a), cmpOpts); d != "" {
			r.Errorf("%s modified its argument #%d (%T) (-before +after): %s\n%s", what, i+1, a, argNeeds[fmt.Sprintf("%T", a)], d)
		}
	}
}

// argNeeds says, per argument type, why upstream needs it unmodified.
var argNeeds = map[string]string{
	"*v1.Service":          "the controllers pass objects from the shared informer cache (cloud.go LoadBalancer: \"treat the *v1.Service parameter as read-only\")",
	"[]*v1.Node":           "the controllers pass objects from the shared informer cache (cloud.go LoadBalancer: \"treat the *v1.Service and *v1.Node parameters as read-only\")",
	"*v1.Node":             "the controllers read these fields of their copy after the call (controllers/node/node_controller.go syncNode, UpdateNodeStatus, updateNodeAddress; controllers/nodelifecycle/node_lifecycle_controller.go MonitorNodes)",
	"*cloudprovider.Route": "the route controller marks DestinationCIDR done after CreateRoute, and TargetNodeAddresses is the Node's status.addresses from the informer cache (controllers/route/route_controller.go reconcile)",
}

func deepCopy(a any) any {
	switch v := a.(type) {
	case *v1.Service:
		return v.DeepCopy()
	case []*v1.Node:
		return copyNodes(v)
	}
	panic(fmt.Sprintf("conformance: deepCopy of %T", a))
}

// instNodeView is what upstream reads of the Node copy it passed to an
// InstancesV2 call, after the call: its name and UID (MonitorNodes deletes
// or taints by name), spec.providerID and annotations
// (getNodeModifiersFromCloudProvider: a provider ID found set is not set
// again; the provided node IP), taints and addresses (updateNodeAddress,
// whose status patch is computed against the copy). The controllers pass
// copies (DeepCopy), so the rest is the provider's business.
func instNodeView(a any) any {
	n := a.(*v1.Node)
	return v1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: n.Name, UID: n.UID, Annotations: maps.Clone(n.Annotations)},
		Spec:       v1.NodeSpec{ProviderID: n.Spec.ProviderID, Taints: slices.Clone(n.Spec.Taints)},
		Status:     v1.NodeStatus{Addresses: slices.Clone(n.Status.Addresses)},
	}
}

// createRouteView is what upstream reads of the Route it passed to
// CreateRoute, after the call: its DestinationCIDR (reconcile marks that
// CIDR's action done), and the elements of TargetNodeAddresses, the Node's
// status.addresses in the informer cache. route.Name is ignored in a
// create (cloud.go Routes.CreateRoute), and the Route itself is the
// controller's own.
func createRouteView(shared []v1.NodeAddress) func(any) any {
	return func(a any) any {
		type view struct {
			DestinationCIDR string
			NodeAddresses   []v1.NodeAddress
		}
		return view{a.(*cloudprovider.Route).DestinationCIDR, slices.Clone(shared)}
	}
}

// ruleArgsNotMutated checks the arguments of each call where upstream needs
// them unmodified (see argNeeds). DeleteRoute is not checked: its Route is one
// ListRoutes returned, which upstream does not read after the call.
func ruleArgsNotMutated(r *rt) {
	c := r.caps()
	nodes := r.nodes(1)
	cl := r.cfg.ClusterName
	if c.lb != nil {
		svc := service("args", withLocalTraffic(32200))
		r.unchanged("EnsureLoadBalancer", nil, []any{svc, nodes}, func() { _, _ = c.lb.EnsureLoadBalancer(r.ctx, cl, svc, nodes) })
		r.unchanged("GetLoadBalancer", nil, []any{svc}, func() { _, _, _ = c.lb.GetLoadBalancer(r.ctx, cl, svc) })
		r.unchanged("GetLoadBalancerName", nil, []any{svc}, func() { _ = c.lb.GetLoadBalancerName(r.ctx, cl, svc) })
		r.unchanged("UpdateLoadBalancer", nil, []any{svc, nodes}, func() { _ = c.lb.UpdateLoadBalancer(context.TODO(), cl, svc, nodes) })
		r.unchanged("EnsureLoadBalancerDeleted", nil, []any{svc}, func() { _ = c.lb.EnsureLoadBalancerDeleted(r.ctx, cl, svc) })
	}
	if c.inst != nil {
		for _, l := range r.lookups(nodes[0]) {
			n := l.node
			r.unchanged("InstanceExists "+l.how, instNodeView, []any{n}, func() { _, _ = c.inst.InstanceExists(r.ctx, n) })
			r.unchanged("InstanceShutdown "+l.how, instNodeView, []any{n}, func() { _, _ = c.inst.InstanceShutdown(r.ctx, n) })
			r.unchanged("InstanceMetadata "+l.how, instNodeView, []any{n}, func() { _, _ = c.inst.InstanceMetadata(r.ctx, n) })
		}
	}
	if c.rs != nil {
		s := newRoute(withUID(nodes)[0], r.podCIDRs(0)[0])
		shared := s.route.TargetNodeAddresses
		r.unchanged("CreateRoute", createRouteView(shared), []any{s.route}, func() { _ = c.rs.CreateRoute(r.ctx, cl, s.nameHint, s.route) })
	}
}

func ruleCtxCancelled(r *rt) { cancelledCalls(r, false) }

func ruleCtxCancelledPrompt(r *rt) { cancelledCalls(r, true) }

// cancelledCalls makes every call with a cancelled context. Checking the
// answers (CTX-CANCELLED), it waits for each call as long as the rule may
// run; checking the time (prompt, CTX-CANCELLED-PROMPT), it bounds each by
// Config.Timeout and ignores the answers, CTX-CANCELLED's.
func cancelledCalls(r *rt, prompt bool) {
	cc := cancelledCaller{r: r, call: func(_ string, f func()) { f() }, wrong: r.Errorf, done: cancelled()}
	if prompt {
		cc.call = r.within
		cc.wrong = func(string, ...any) {}
	}
	c := r.caps()
	nodes := r.nodes(1)
	if c.lb != nil {
		cc.loadBalancer(c.lb, nodes)
	}
	if c.inst != nil {
		cc.instances(c.inst, nodes[0])
	}
	if c.rs != nil {
		cc.routes(c.rs, withUID(nodes)[0])
	}
	if c.zones != nil {
		cc.call("GetZoneByNodeName with a cancelled context", func() { _, _ = c.zones.GetZoneByNodeName(cc.done, types.NodeName(nodes[0].Name)) })
	}
}

// cancelledCaller makes the calls of cancelledCalls: call runs one (timed
// or not), wrong reports a wrong answer (or nothing), done is the
// cancelled context.
type cancelledCaller struct {
	r     *rt
	call  func(what string, f func())
	wrong func(format string, args ...any)
	done  context.Context
}

// loadBalancer calls every LoadBalancer method with the cancelled context,
// for an existing load balancer.
func (cc cancelledCaller) loadBalancer(lb cloudprovider.LoadBalancer, nodes []*v1.Node) {
	r, cl, done := cc.r, cc.r.cfg.ClusterName, cc.done
	svc := service("cancelled")
	r.mustEnsure(lb, cl, svc, nodes)
	cc.call("GetLoadBalancer with a cancelled context", func() {
		if _, ok, err := lb.GetLoadBalancer(done, cl, svc); err == nil && !ok {
			cc.wrong("GetLoadBalancer(%s) with a cancelled context returned exists=false and no error for an existing load balancer, expected an error (or the truth)", svcKey(svc))
		}
	})
	cc.call("EnsureLoadBalancer with a cancelled context", func() {
		if st, err := lb.EnsureLoadBalancer(done, cl, svc, nodes); err == nil && (st == nil || len(st.Ingress) == 0) {
			cc.wrong("EnsureLoadBalancer(%s) with a cancelled context returned status %v and no error, expected an error or a full status", svcKey(svc), st)
		}
	})
	cc.call("UpdateLoadBalancer with a cancelled context", func() { _ = lb.UpdateLoadBalancer(done, cl, svc, nodes) })
	cc.call("EnsureLoadBalancerDeleted with a cancelled context", func() {
		if err := lb.EnsureLoadBalancerDeleted(done, cl, svc); err == nil && r.exists(lb, cl, svc) {
			cc.wrong("EnsureLoadBalancerDeleted(%s) with a cancelled context returned nil, but the load balancer still exists: the controller would drop the finalizer", svcKey(svc))
		}
	})
}

// instances calls every InstancesV2 method with the cancelled context, for
// n's running instance.
func (cc cancelledCaller) instances(inst cloudprovider.InstancesV2, n *v1.Node) {
	done := cc.done
	cc.call("InstanceExists with a cancelled context", func() {
		if ok, err := inst.InstanceExists(done, n); err == nil && !ok {
			cc.wrong("InstanceExists(%s) with a cancelled context = (false, nil) for a running instance: the Node would be deleted: expected an error", n.Name)
		}
	})
	cc.call("InstanceShutdown with a cancelled context", func() { _, _ = inst.InstanceShutdown(done, n) })
	cc.call("InstanceMetadata with a cancelled context", func() {
		if md, err := inst.InstanceMetadata(done, n); err == nil && md == nil {
			cc.wrong("InstanceMetadata(%s) with a cancelled context = (nil, nil), expected an error or the metadata", n.Name)
		}
	})
}

// routes calls every Routes method with the cancelled context, for a route
// of n that exists (list, delete) and one that does not (create).
func (cc cancelledCaller) routes(rs cloudprovider.Routes, n *v1.Node) {
	r, cl, done := cc.r, cc.r.cfg.ClusterName, cc.done
	cidrs := r.podCIDRs(0)
	s := newRoute(n, cidrs[0])
	r.createRoute(rs, cl, s)
	cc.call("ListRoutes with a cancelled context", func() {
		if list, err := rs.ListRoutes(done, cl); err == nil && len(findRoutes(list, s.route.DestinationCIDR)) == 0 {
			cc.wrong("ListRoutes with a cancelled context returned no error and a list without route %q, expected an error or the full list", s.route.DestinationCIDR)
		}
	})
	for _, rt := range findRoutes(r.listRoutes(rs, cl), s.route.DestinationCIDR) {
		cc.call("DeleteRoute with a cancelled context", func() { _ = rs.DeleteRoute(done, cl, rt) })
	}
	if len(cidrs) > 1 {
		other := newRoute(n, cidrs[len(cidrs)-1])
		cc.call("CreateRoute with a cancelled context", func() {
			if err := rs.CreateRoute(done, cl, other.nameHint, other.route); err == nil && len(findRoutes(r.listRoutes(rs, cl), other.route.DestinationCIDR)) == 0 {
				cc.wrong("CreateRoute(%q) with a cancelled context returned nil, but the route is not listed", other.route.DestinationCIDR)
			}
		})
	}
}
