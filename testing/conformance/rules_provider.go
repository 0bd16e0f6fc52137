package conformance

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	cloudprovider "k8s.io/cloud-provider"
)

func ruleProviderAccessors(r *rt) {
	cloud := r.target().Cloud
	cl := r.cfg.Claims
	check := func(name string, v any, ok, claimed bool) {
		switch {
		case ok && isNil(v):
			r.Errorf("%s() returned (%s, true), expected (impl, true) or (nil, false): the controllers call methods on the value whenever the bool is true", name, describe(v))
		case !ok && v != nil:
			r.Errorf("%s() returned (%s, false), expected (nil, false)", name, describe(v))
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
	case isNil(cloud):
		r.Errorf("the factory of %q with %s returned (%s, nil): InitCloudProvider reports \"unknown cloud provider\"", name, what, describe(cloud))
	case cloud.ProviderName() != name:
		r.Errorf("the provider built by the factory of %q calls itself %q (ProviderName), expected %q", name, cloud.ProviderName(), name)
	}
}

func ruleProviderBadConfig(r *rt) {
	if r.cfg.ProviderName == "" || r.cfg.BadCloudConfig == "" {
		r.Skipf("needs Config.ProviderName and Config.BadCloudConfig")
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
	if v, ok := cloud.LoadBalancer(); cl.LoadBalancer && ok && !isNil(v) {
		c.lb = retryLB{r, v}
	}
	if v, ok := cloud.InstancesV2(); cl.InstancesV2 && ok && !isNil(v) {
		c.inst = retryInst{r, v}
	}
	if v, ok := cloud.Routes(); cl.Routes && ok && !isNil(v) {
		c.rs = retryRoutes{r, v}
	}
	if v, ok := cloud.Zones(); cl.Zones && ok && !isNil(v) {
		c.zones = retryZones{r, v}
	}
	if c.lb == nil && c.inst == nil && c.rs == nil && c.zones == nil {
		r.Skipf("no claimed capability with a working accessor")
	}
	return c
}

// wrappedSentinel returns the one of want that err wraps without being it.
func wrappedSentinel(err error, want ...error) error {
	for _, s := range want {
		if err != s && errors.Is(err, s) {
			return s
		}
	}
	return nil
}

// ruleSentinelsUnwrapped checks the sentinels exactly where upstream
// compares them with ==, and nowhere else: every other comparison in
// k8s.io/cloud-provider@v0.37.2 is errors.Is, which a wrapped sentinel
// satisfies.
//
//   - cloud.go GetInstanceProviderID: `err == NotImplemented`, `err ==
//     InstanceNotFound` on Instances.InstanceID (legacy Instances, used by
//     controllers/node/node_controller.go getInstanceMetadata and
//     controllers/nodelifecycle/node_lifecycle_controller.go getProviderID
//     when there is no InstancesV2). A wrapped one is wrapped again with
//     "failed to get instance ID from cloud provider: %w" instead of being
//     returned as the documented ("", InstanceNotFound).
//   - controllers/service/controller.go syncLoadBalancerIfNeeded: `err ==
//     cloudprovider.ImplementedElsewhere` on EnsureLoadBalancerDeleted and
//     EnsureLoadBalancer; lockedUpdateLoadBalancerHosts: the same on
//     UpdateLoadBalancer. A wrapped one is a failed sync, retried forever.
//
// Compared with errors.Is, so free to wrap: InstanceNotFound and
// NotImplemented in controllers/nodelifecycle/node_lifecycle_controller.go
// (ensureNodeExistsByProviderID, shutdownInCloudProvider,
// observeInstanceOp) and controllers/node/node_controller.go
// getInstanceMetadata; every InstancesV2, Zones, GetLoadBalancer and Routes
// error, which upstream compares with no sentinel at all.
func ruleSentinelsUnwrapped(r *rt) {
	c := r.caps()
	nodes := r.nodes(1)
	missing := missingNode(nodes[0].Spec.ProviderID)
	ran := false
	check := func(what, where string, err error, want ...error) {
		ran = true
		if s := wrappedSentinel(err, want...); s != nil {
			r.Errorf("%s returned %q, which wraps cloudprovider sentinel %q: %s compares it with ==, expected the sentinel itself", what, err, s, where)
		}
	}
	if in, ok := r.target().Cloud.Instances(); ok && !isNil(in) {
		_, err := in.InstanceID(r.ctx, types.NodeName(missing.Name))
		check("Instances.InstanceID of a missing node", "cloud.go GetInstanceProviderID", err, cloudprovider.InstanceNotFound, cloudprovider.NotImplemented)
	}
	if c.lb != nil {
		svc := service("sentinels")
		const where = "controllers/service/controller.go syncLoadBalancerIfNeeded"
		check("EnsureLoadBalancerDeleted of a missing load balancer", where, c.lb.EnsureLoadBalancerDeleted(r.ctx, r.cfg.ClusterName, svc), cloudprovider.ImplementedElsewhere)
		check("UpdateLoadBalancer of a missing load balancer", "controllers/service/controller.go lockedUpdateLoadBalancerHosts", c.lb.UpdateLoadBalancer(context.TODO(), r.cfg.ClusterName, svc, nodes), cloudprovider.ImplementedElsewhere)
		_, err := c.lb.EnsureLoadBalancer(r.ctx, r.cfg.ClusterName, svc, nodes)
		check("EnsureLoadBalancer", where, err, cloudprovider.ImplementedElsewhere)
		if err == nil {
			check("EnsureLoadBalancerDeleted", where, c.lb.EnsureLoadBalancerDeleted(r.ctx, r.cfg.ClusterName, svc), cloudprovider.ImplementedElsewhere)
		}
	}
	if !ran {
		r.Skipf("neither legacy Instances nor a claimed LoadBalancer: upstream compares no other sentinel with ==")
	}
}

// unchanged calls f and reports any change to args, the arguments f passes
// to the provider.
func (r *rt) unchanged(what string, args []any, f func()) {
	before := make([]any, len(args))
	for i, a := range args {
		before[i] = deepCopy(a)
	}
	f()
	for i, a := range args {
		if d := cmp.Diff(before[i], a, cmpOpts); d != "" {
			r.Errorf("%s modified its argument #%d (%T) (-before +after): the controllers pass objects from the shared informer cache\n%s", what, i+1, a, d)
		}
	}
}

func deepCopy(a any) any {
	switch v := a.(type) {
	case *v1.Service:
		return v.DeepCopy()
	case []*v1.Node:
		out := make([]*v1.Node, len(v))
		for i, n := range v {
			out[i] = n.DeepCopy()
		}
		return out
	case *v1.Node:
		return v.DeepCopy()
	case *cloudprovider.Route:
		c := *v
		c.TargetNodeAddresses = append([]v1.NodeAddress(nil), v.TargetNodeAddresses...)
		return &c
	}
	panic(fmt.Sprintf("conformance: deepCopy of %T", a))
}

func ruleArgsNotMutated(r *rt) {
	c := r.caps()
	nodes := r.nodes(1)
	cl := r.cfg.ClusterName
	if c.lb != nil {
		svc := service("args", withLocalTraffic(32200))
		r.unchanged("EnsureLoadBalancer", []any{svc, nodes}, func() { _, _ = c.lb.EnsureLoadBalancer(r.ctx, cl, svc, nodes) })
		r.unchanged("GetLoadBalancer", []any{svc}, func() { _, _, _ = c.lb.GetLoadBalancer(r.ctx, cl, svc) })
		r.unchanged("GetLoadBalancerName", []any{svc}, func() { _ = c.lb.GetLoadBalancerName(r.ctx, cl, svc) })
		r.unchanged("UpdateLoadBalancer", []any{svc, nodes}, func() { _ = c.lb.UpdateLoadBalancer(context.TODO(), cl, svc, nodes) })
		r.unchanged("EnsureLoadBalancerDeleted", []any{svc}, func() { _ = c.lb.EnsureLoadBalancerDeleted(r.ctx, cl, svc) })
	}
	if c.inst != nil {
		for _, l := range r.lookups(nodes[0]) {
			n := l.node
			r.unchanged("InstanceExists "+l.how, []any{n}, func() { _, _ = c.inst.InstanceExists(r.ctx, n) })
			r.unchanged("InstanceShutdown "+l.how, []any{n}, func() { _, _ = c.inst.InstanceShutdown(r.ctx, n) })
			r.unchanged("InstanceMetadata "+l.how, []any{n}, func() { _, _ = c.inst.InstanceMetadata(r.ctx, n) })
		}
	}
	if c.rs != nil {
		s := newRoute(withUID(nodes)[0], r.podCIDRs(0)[0])
		r.unchanged("CreateRoute", []any{s.route}, func() { _ = c.rs.CreateRoute(r.ctx, cl, s.nameHint, s.route) })
		for _, rt := range findRoutes(r.listRoutes(c.rs, cl), s.route.DestinationCIDR) {
			r.unchanged("DeleteRoute", []any{rt}, func() { _ = c.rs.DeleteRoute(r.ctx, cl, rt) })
		}
	}
}

func ruleCtxCancelled(r *rt) {
	c := r.caps()
	nodes := r.nodes(1)
	cl := r.cfg.ClusterName
	done := cancelled()
	if c.lb != nil {
		svc := service("cancelled")
		r.mustEnsure(c.lb, cl, svc, nodes)
		r.within("GetLoadBalancer with a cancelled context", func() {
			if _, ok, err := c.lb.GetLoadBalancer(done, cl, svc); err == nil && !ok {
				r.Errorf("GetLoadBalancer(%s) with a cancelled context returned exists=false and no error for an existing load balancer, expected an error (or the truth)", svcKey(svc))
			}
		})
		r.within("EnsureLoadBalancer with a cancelled context", func() {
			if st, err := c.lb.EnsureLoadBalancer(done, cl, svc, nodes); err == nil && (st == nil || len(st.Ingress) == 0) {
				r.Errorf("EnsureLoadBalancer(%s) with a cancelled context returned status %v and no error, expected an error or a full status", svcKey(svc), st)
			}
		})
		r.within("UpdateLoadBalancer with a cancelled context", func() { _ = c.lb.UpdateLoadBalancer(done, cl, svc, nodes) })
		r.within("EnsureLoadBalancerDeleted with a cancelled context", func() {
			if err := c.lb.EnsureLoadBalancerDeleted(done, cl, svc); err == nil && r.exists(c.lb, cl, svc) {
				r.Errorf("EnsureLoadBalancerDeleted(%s) with a cancelled context returned nil, but the load balancer still exists: the controller would drop the finalizer", svcKey(svc))
			}
		})
	}
	if c.inst != nil {
		n := nodes[0]
		r.within("InstanceExists with a cancelled context", func() {
			if ok, err := c.inst.InstanceExists(done, n); err == nil && !ok {
				r.Errorf("InstanceExists(%s) with a cancelled context = (false, nil) for a running instance: the Node would be deleted; expected an error", n.Name)
			}
		})
		r.within("InstanceShutdown with a cancelled context", func() { _, _ = c.inst.InstanceShutdown(done, n) })
		r.within("InstanceMetadata with a cancelled context", func() {
			if md, err := c.inst.InstanceMetadata(done, n); err == nil && md == nil {
				r.Errorf("InstanceMetadata(%s) with a cancelled context = (nil, nil), expected an error or the metadata", n.Name)
			}
		})
	}
	if c.rs != nil {
		n := withUID(nodes)[0]
		cidrs := r.podCIDRs(0)
		s := newRoute(n, cidrs[0])
		r.createRoute(c.rs, cl, s)
		r.within("ListRoutes with a cancelled context", func() {
			if list, err := c.rs.ListRoutes(done, cl); err == nil && len(findRoutes(list, s.route.DestinationCIDR)) == 0 {
				r.Errorf("ListRoutes with a cancelled context returned no error and a list without route %q, expected an error or the full list", s.route.DestinationCIDR)
			}
		})
		if len(cidrs) > 1 {
			other := newRoute(n, cidrs[len(cidrs)-1])
			r.within("CreateRoute with a cancelled context", func() {
				if err := c.rs.CreateRoute(done, cl, other.nameHint, other.route); err == nil && len(findRoutes(r.listRoutes(c.rs, cl), other.route.DestinationCIDR)) == 0 {
					r.Errorf("CreateRoute(%q) with a cancelled context returned nil, but the route is not listed", other.route.DestinationCIDR)
				}
			})
		}
	}
	if c.zones != nil {
		r.within("GetZoneByNodeName with a cancelled context", func() { _, _ = c.zones.GetZoneByNodeName(done, types.NodeName(nodes[0].Name)) })
	}
}
