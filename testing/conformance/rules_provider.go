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

// wrappedSentinel returns the sentinel err wraps without being it.
func wrappedSentinel(err error) error {
	for _, s := range sentinels {
		if err != s && errors.Is(err, s) {
			return s
		}
	}
	return nil
}

func ruleSentinelsUnwrapped(r *rt) {
	c := r.caps()
	nodes := r.nodes(1)
	type call struct {
		what string
		err  error
	}
	var calls []call
	add := func(what string, err error) { calls = append(calls, call{what, err}) }
	missing := missingNode(nodes[0].Spec.ProviderID)
	if c.inst != nil {
		for _, l := range lookups(missing) {
			_, err := c.inst.InstanceMetadata(r.ctx, l.node)
			add("InstanceMetadata of a missing instance "+l.how, err)
			_, err = c.inst.InstanceExists(r.ctx, l.node)
			add("InstanceExists of a missing instance "+l.how, err)
			_, err = c.inst.InstanceShutdown(r.ctx, l.node)
			add("InstanceShutdown of a missing instance "+l.how, err)
		}
	}
	if in, ok := r.target().Cloud.Instances(); ok && !isNil(in) {
		_, err := in.InstanceID(r.ctx, types.NodeName(missing.Name))
		add("Instances.InstanceID of a missing node", err)
		_, err = in.NodeAddresses(r.ctx, types.NodeName(missing.Name))
		add("Instances.NodeAddresses of a missing node", err)
	}
	if c.zones != nil {
		_, err := c.zones.GetZoneByNodeName(r.ctx, types.NodeName(missing.Name))
		add("GetZoneByNodeName of a missing node", err)
		if missing.Spec.ProviderID != "" {
			_, err = c.zones.GetZoneByProviderID(r.ctx, missing.Spec.ProviderID)
			add("GetZoneByProviderID of a missing instance", err)
		}
	}
	if c.lb != nil {
		svc := service("sentinels")
		_, _, err := c.lb.GetLoadBalancer(r.ctx, r.cfg.ClusterName, svc)
		add("GetLoadBalancer of a missing load balancer", err)
		add("EnsureLoadBalancerDeleted of a missing load balancer", c.lb.EnsureLoadBalancerDeleted(r.ctx, r.cfg.ClusterName, svc))
		add("UpdateLoadBalancer of a missing load balancer", c.lb.UpdateLoadBalancer(context.TODO(), r.cfg.ClusterName, svc, nodes))
	}
	if c.rs != nil {
		n := withUID(nodes)[0]
		s := newRoute(n, r.podCIDRs(0)[0])
		add("DeleteRoute of a missing route", c.rs.DeleteRoute(r.ctx, r.cfg.ClusterName, s.route))
	}
	for _, k := range calls {
		if s := wrappedSentinel(k.err); s != nil {
			r.Errorf("%s returned %q, which wraps cloudprovider sentinel %q: the controllers compare with ==, expected the sentinel itself", k.what, k.err, s)
		}
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
		for _, l := range lookups(nodes[0]) {
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
