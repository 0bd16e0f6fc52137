package conformance

import (
	"context"
	"fmt"
	"runtime"
	"runtime/debug"
	"slices"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/informers"
	clientset "k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	restclient "k8s.io/client-go/rest"
	cloudprovider "k8s.io/cloud-provider"

	"github.com/ccmkit/ccmkit/internal/check"
	"github.com/ccmkit/ccmkit/internal/staleness"
)

// kind says what a rule checks: an upstream contract or a ccmkit
// recommendation.
type kind int

const (
	// upstream: a contract the upstream controllers' code needs, and
	// nothing stricter; the rule's source cites that code.
	upstream kind = iota
	// recommendation: a ccmkit policy beyond what upstream needs (its
	// source says why it is sound); Config.UpstreamOnly skips it.
	recommendation
)

// rule is one entry of the suite's table.
type rule struct {
	kind      kind
	id        string
	statement string
	source    string
	run       func(r *rt)
}

// cases returns the names of rl's cases (ruleCases), which Config.Skip
// accepts as "RULE/case".
func (rl *rule) cases() []string { return ruleCases[rl.id] }

// result is what one execution of a rule observed.
type result struct {
	skip string
	errs []string
	logs []string
}

// rt is the handle a rule body gets: it reports like testing.T (Errorf,
// Fatalf and Skipf end the rule goroutine with runtime.Goexit) and builds the
// fresh target lazily. It is safe for concurrent use by the goroutines a rule
// starts with r.Go.
type rt struct {
	ctx context.Context
	cfg *Config
	rl  *rule

	mu       sync.Mutex
	res      result
	done     bool
	cleanups []func()

	tgt  *Target
	inf  informers.SharedInformerFactory
	stop chan struct{}

	// start is when the rule started; staleness is the longest of
	// Config.MaxStaleness and what the target reports (see
	// reportedStaleness); limit is when the rule is abandoned, extended
	// with staleness. Guarded by mu.
	start     time.Time
	staleness time.Duration
	limit     *time.Timer

	// unimpl and directUnimpl record cloudprovider.NotImplemented answers
	// of methods other rules own (see noteAnswer); guarded by mu.
	unimpl       *unimplemented
	directUnimpl int
}

// execute runs one rule in its own goroutine and returns what it reported.
// The goroutine is abandoned, and the rule failed, when it outlives
// 4×(cfg.Timeout+cfg.MaxStaleness) or parent.
func execute(parent context.Context, cfg *Config, rl *rule) result {
	if reason, ok := cfg.Skip[rl.id]; ok {
		return result{skip: "skipped by Config.Skip: " + reason}
	}
	if rl.kind == recommendation && cfg.UpstreamOnly {
		return result{skip: "a ccmkit recommendation, not an upstream contract: skipped by Config.UpstreamOnly"}
	}
	ctx, cancel := context.WithCancel(parent)
	defer cancel()
	r := &rt{ctx: ctx, cfg: cfg, rl: rl, start: time.Now(), staleness: cfg.MaxStaleness}
	r.limit = time.NewTimer(r.ruleLimit())
	defer r.limit.Stop()
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		defer r.runCleanups()
		defer r.recoverPanic()
		rl.run(r)
	}()
	select {
	case <-finished:
	case <-parent.Done():
		r.errorf("rule interrupted: %v", parent.Err())
	case <-r.limit.C:
		cancel()
		r.mu.Lock()
		limit := r.ruleLimit()
		r.mu.Unlock()
		r.errorf("rule did not finish within %v (4×(Config.Timeout+MaxStaleness)+5s): a provider call or hook may be blocked", limit)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.done = true
	res := result{skip: r.res.skip, errs: slices.Clone(r.res.errs), logs: slices.Clone(r.res.logs)}
	if len(res.errs) > 0 {
		res.skip = ""
	}
	return r.ownedElsewhere(res)
}

// ruleLimit is how long the rule may run: 4×(Config.Timeout+staleness),
// plus the service controller's first retry delay, which
// CTRL-SERVICE-BEFORE-NODES waits for. The caller holds mu, or is alone.
func (r *rt) ruleLimit() time.Duration { return 4*(r.cfg.Timeout+r.staleness) + serviceRetryDelay }

// maxStaleness is how long the provider may answer from state read before
// a change the suite made behind its back: Config.MaxStaleness, or longer
// when the target reports longer (reportedStaleness).
func (r *rt) maxStaleness() time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.staleness
}

// learnStaleness raises the rule's staleness to what tgt reports, and its
// limit with it, logging where it came from. A target with
// Hooks.CloudChanged reports nothing: there the provider drops its caches
// when told of a change, and its answers are fresh after it.
func (r *rt) learnStaleness(tgt *Target) {
	if tgt.Hooks.CloudChanged != nil {
		return
	}
	d, from := reportedStaleness(tgt)
	r.mu.Lock()
	defer r.mu.Unlock()
	if d <= r.staleness {
		return
	}
	r.staleness = d
	r.limit.Reset(time.Until(r.start.Add(r.ruleLimit())))
	if !r.done {
		r.res.logs = append(r.res.logs, fmt.Sprintf("%s reports MaxStaleness %v, longer than Config.MaxStaleness %v: waits for changes made behind its back last Config.Timeout+%v", from, d, r.cfg.MaxStaleness, d))
	}
}

// reportedStaleness returns the longest MaxStaleness (provider.Staleness)
// reported by tgt.Cloud and the capabilities it offers, and which
// reported it: provider.Cloud reports its capabilities' itself, a
// provider of its own over ccmkit's adapters through them.
func reportedStaleness(tgt *Target) (time.Duration, string) {
	var best time.Duration
	var from string
	consider := func(name string, v any, ok bool) {
		if d := staleness.Of(v); ok && d > best {
			best, from = d, name
		}
	}
	c := tgt.Cloud
	consider("Target.Cloud", c, true)
	lb, ok := c.LoadBalancer()
	consider("Target.Cloud.LoadBalancer()", lb, ok)
	inst, ok := c.InstancesV2()
	consider("Target.Cloud.InstancesV2()", inst, ok)
	rs, ok := c.Routes()
	consider("Target.Cloud.Routes()", rs, ok)
	z, ok := c.Zones()
	consider("Target.Cloud.Zones()", z, ok)
	return best, from
}

// recoverPanic turns a panic of the rule goroutine (typically in the
// provider) into a failure of the rule.
func (r *rt) recoverPanic() {
	if p := recover(); p != nil {
		r.errorf("panic (in the provider or a hook): %v\n%s", p, debug.Stack())
	}
}

func (r *rt) runCleanups() {
	r.mu.Lock()
	cs := r.cleanups
	r.cleanups = nil
	r.mu.Unlock()
	for i := len(cs) - 1; i >= 0; i-- {
		func() {
			defer r.recoverPanic()
			cs[i]()
		}()
	}
}

// skipCase reports whether Config.Skip names the case name of the rule
// ("RULE/case"), and logs the reason when it does. name must be one of
// ruleCases[rule]: anything else is a bug of the suite, reported as a
// failure of the rule.
func (r *rt) skipCase(name string) bool {
	if !slices.Contains(r.rl.cases(), name) {
		r.Fatalf("conformance: internal error: case %q of %s is not declared in ruleCases", name, r.rl.id)
	}
	reason, ok := r.cfg.Skip[r.rl.id+"/"+name]
	if ok {
		r.Logf("case %s skipped by Config.Skip: %s", name, reason)
	}
	return ok
}

// Cleanup registers f to run when the rule ends, last registered first.
func (r *rt) Cleanup(f func()) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.cleanups = append(r.cleanups, f)
}

func (r *rt) errorf(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.done {
		return
	}
	r.res.errs = append(r.res.errs, fmt.Sprintf(format, args...))
}

// Errorf records a failure and continues.
func (r *rt) Errorf(format string, args ...any) { r.errorf(format, args...) }

// Fatalf records a failure and ends the rule.
func (r *rt) Fatalf(format string, args ...any) {
	r.errorf(format, args...)
	runtime.Goexit()
}

// Skipf ends the rule as skipped (unless it already failed).
func (r *rt) Skipf(format string, args ...any) {
	r.mu.Lock()
	if !r.done {
		r.res.skip = fmt.Sprintf(format, args...)
	}
	r.mu.Unlock()
	runtime.Goexit()
}

// Logf records a line shown by Run.
func (r *rt) Logf(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.done {
		r.res.logs = append(r.res.logs, fmt.Sprintf(format, args...))
	}
}

// Go runs f in a goroutine whose panics and Fatalf are reported to the rule,
// and returns a function that waits for it.
func (r *rt) Go(f func()) (wait func()) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer r.recoverPanic()
		f()
	}()
	return func() { <-done }
}

// target returns the rule's fresh target, initialized as the
// cloud-controller-manager initializes a provider, against a fake clientset
// that holds copies of the fixture nodes.
func (r *rt) target() *Target {
	if r.tgt == nil {
		tgt := r.newTarget()
		r.initialize(tgt, nodeClientset(allNodes(tgt)))
	}
	return r.tgt
}

// allNodes returns tgt's Nodes and RenamedNodes, in that order.
func allNodes(tgt *Target) []*v1.Node { return slices.Concat(tgt.Nodes, tgt.RenamedNodes) }

// nodeClientset returns a fake clientset holding copies of nodes.
func nodeClientset(nodes []*v1.Node) *fake.Clientset {
	objs := make([]k8sruntime.Object, len(nodes))
	for i, n := range nodes {
		objs[i] = n.DeepCopy()
	}
	return fake.NewClientset(objs...)
}

// newTarget calls Config.NewTarget and validates what it returns.
func (r *rt) newTarget() *Target {
	tgt, err := r.cfg.NewTarget(r.ctx)
	if err != nil {
		r.Fatalf("Config.NewTarget: %v", err)
	}
	if tgt == nil || check.IsNil(tgt.Cloud) {
		r.Fatalf("Config.NewTarget returned no Target.Cloud, expected the provider under test")
	}
	if tgt.Close != nil {
		r.Cleanup(tgt.Close)
	}
	if tgt.OtherCluster != nil && check.IsNil(tgt.OtherCluster) {
		r.Fatalf("Config.NewTarget returned Target.OtherCluster %s, expected nil or a second provider", describe(tgt.OtherCluster))
	}
	if tgt.OtherCluster != nil && same(tgt.OtherCluster, tgt.Cloud) {
		r.Fatalf("Config.NewTarget returned Target.OtherCluster equal to Target.Cloud, expected the provider of another cluster (another cluster ID) over the same cloud")
	}
	seen := map[string]bool{}
	for field, nodes := range map[string][]*v1.Node{"Nodes": tgt.Nodes, "RenamedNodes": tgt.RenamedNodes} {
		for i, n := range nodes {
			switch {
			case n == nil || n.Name == "":
				r.Fatalf("Config.NewTarget: Target.%s[%d] has no name, expected a Node as the cloud node controller initialized it", field, i)
			case seen[n.Name]:
				r.Fatalf("Config.NewTarget: Target.%s[%d] repeats node name %q, expected each Node once in Nodes and RenamedNodes", field, i, n.Name)
			case field == "RenamedNodes" && n.Spec.ProviderID == "":
				r.Fatalf("Config.NewTarget: Target.RenamedNodes[%d] (%s) has no spec.providerID, expected the provider ID its instance is found by", i, n.Name)
			}
			seen[n.Name] = true
		}
	}
	return tgt
}

// initialize initializes tgt.Cloud against kube, and tgt.OtherCluster, if
// any, against a clientset of its own holding copies of the fixture nodes.
// The controllers of controller rules use Cloud's informers (r.inf, r.stop).
func (r *rt) initialize(tgt *Target, kube *fake.Clientset) {
	r.tgt = tgt
	r.inf, r.stop = r.initCloud(tgt.Cloud, kube)
	if tgt.OtherCluster != nil {
		r.initCloud(tgt.OtherCluster, nodeClientset(allNodes(tgt)))
	}
	if tgt.Ready != nil {
		if err := tgt.Ready(r.ctx); err != nil {
			r.Fatalf("Target.Ready: %v, expected the initialized provider to become ready", err)
		}
	}
	r.learnStaleness(tgt)
}

// initCloud does to cloud what app/controllermanager.go startControllers
// does before starting controllers: cloud.Initialize(clientBuilder, stop),
// then SetInformers for a cloudprovider.InformerUser, then starts the
// informers. The builder's clients reach kube over HTTP (serveClientset).
// When the rule ends the stop channel closes and the informers shut down,
// then the server stops, ending the provider's open watches.
func (r *rt) initCloud(cloud cloudprovider.Interface, kube *fake.Clientset) (informers.SharedInformerFactory, chan struct{}) {
	cfg, stopServe := serveClientset(kube)
	r.Cleanup(stopServe) // cleanups run last registered first: after the one below
	stop := make(chan struct{})
	inf := informers.NewSharedInformerFactory(kube, 0)
	r.Cleanup(func() {
		close(stop)
		inf.Shutdown()
	})
	cloud.Initialize(clientBuilder{cfg}, stop)
	if iu, ok := cloud.(cloudprovider.InformerUser); ok {
		iu.SetInformers(inf)
	}
	inf.Start(stop)
	for typ, ok := range inf.WaitForCacheSync(r.ctx.Done()) {
		if !ok {
			r.Fatalf("informer for %v did not sync: %v", typ, r.ctx.Err())
		}
	}
	return inf, stop
}

// nodes returns deep copies of the fixture nodes, failing (skipping) the
// rule when there are fewer than n.
func (r *rt) nodes(n int) []*v1.Node {
	return r.needNodes(n, "Target.Nodes and Target.RenamedNodes", allNodes(r.target()))
}

// namedNodes returns copies of Target.Nodes alone, the nodes the provider
// can find by name, skipping the rule when there are fewer than n.
func (r *rt) namedNodes(n int) []*v1.Node {
	return r.needNodes(n, "Target.Nodes", r.target().Nodes)
}

// needNodes returns deep copies of nodes (from where), skipping the rule
// when there are fewer than n.
func (r *rt) needNodes(n int, where string, nodes []*v1.Node) []*v1.Node {
	if len(nodes) < n {
		r.Skipf("needs at least %d fixture nodes in %s, got %d", n, where, len(nodes))
	}
	return copyNodes(nodes)
}

// renamed reports whether n (a copy) is one of Target.RenamedNodes.
func (r *rt) renamed(n *v1.Node) bool {
	return slices.ContainsFunc(r.target().RenamedNodes, func(m *v1.Node) bool { return m.Name == n.Name })
}

// needHook skips the rule when hook (a func field of Hooks) is nil.
func (r *rt) needHook(name string, hook any) {
	if check.IsNil(hook) {
		r.Skipf("needs Hooks.%s", name)
	}
}

// capability returns the provider's capability through accessor, skipping
// the rule when it is not claimed or when the accessor breaks
// PROVIDER-ACCESSORS (that rule reports it, once).
func capability[T any](r *rt, name string, claimed bool, accessor func() (T, bool)) T {
	if !claimed {
		r.Skipf("%s is not claimed (Config.Claims.%s)", name, name)
	}
	r.target()
	v, ok := accessor()
	if !ok || check.IsNil(v) {
		r.Skipf("%s() returned (%v, %v): see PROVIDER-ACCESSORS", name, describe(v), ok)
	}
	return guarded(r, v)
}

// lb, inst, routes and zones return the claimed capability of Target.Cloud,
// retrying each call that fails with an api.RetryError (see retrying).
// Every call, retried or single, goes through a direct guard, which notes
// a cloudprovider.NotImplemented answer (see noteAnswer).
func (r *rt) lb() retryLB {
	return retryLB{r, capability(r, "LoadBalancer", r.cfg.Claims.LoadBalancer, func() (cloudprovider.LoadBalancer, bool) { return r.target().Cloud.LoadBalancer() })}
}

func (r *rt) inst() retryInst {
	return retryInst{r, capability(r, "InstancesV2", r.cfg.Claims.InstancesV2, func() (cloudprovider.InstancesV2, bool) { return r.target().Cloud.InstancesV2() })}
}

func (r *rt) routes() retryRoutes {
	return retryRoutes{r, capability(r, "Routes", r.cfg.Claims.Routes, func() (cloudprovider.Routes, bool) { return r.target().Cloud.Routes() })}
}

func (r *rt) zones() retryZones {
	return retryZones{r, capability(r, "Zones", r.cfg.Claims.Zones, func() (cloudprovider.Zones, bool) { return r.target().Cloud.Zones() })}
}

// guarded returns v, a capability of Target.Cloud or OtherCluster, behind
// the guard of the rule's own calls: one that records nothing, lets a
// panic through to the rule (recoverPanic) and notes NotImplemented
// answers as direct (noteAnswer). Every capability the rules call is
// guarded.
func guarded[T any](r *rt, v T) T {
	g := &guard{r: r, direct: true}
	var w any
	// By the capability T names, not by v's dynamic type: one value may
	// implement several (k8s.io/cloud-provider/fake does).
	switch c := any(v); any((*T)(nil)).(type) {
	case *cloudprovider.LoadBalancer:
		w = guardLB{g, c.(cloudprovider.LoadBalancer)}
	case *cloudprovider.InstancesV2:
		w = guardInst{g, c.(cloudprovider.InstancesV2)}
	case *cloudprovider.Routes:
		w = guardRoutes{g, c.(cloudprovider.Routes)}
	case *cloudprovider.Zones:
		w = guardZones{g, c.(cloudprovider.Zones)}
	default:
		return v
	}
	return w.(T)
}

// anyInst returns Target.Cloud's InstancesV2, retrying as inst does, when
// its accessor offers one, claimed or not: rules of other capabilities use
// it to learn what the node controller would have written to a Node.
func (r *rt) anyInst() (retryInst, bool) {
	v, ok := r.target().Cloud.InstancesV2()
	if !ok || check.IsNil(v) {
		return retryInst{}, false
	}
	return retryInst{r, guarded(r, v)}, true
}

// other returns Target.OtherCluster's capability through accessor (named
// name), retrying as Cloud's; ok is false when there is no OtherCluster. A
// missing capability fails the rule: OtherCluster is the same provider as
// Cloud, and offers what Cloud offers.
func other[T any](r *rt, name string, accessor func(cloudprovider.Interface) (T, bool)) (v T, ok bool) {
	oc := r.target().OtherCluster
	if oc == nil {
		return v, false
	}
	v, ok = accessor(oc)
	if !ok || check.IsNil(v) {
		r.Fatalf("Target.OtherCluster.%s() returned (%s, %v), expected the capability Target.Cloud offers: OtherCluster is the same provider, configured as another cluster", name, describe(v), ok)
	}
	return guarded(r, v), true
}

func (r *rt) needFeature(name string, claimed bool) {
	if !claimed {
		r.Skipf("feature %s is not claimed (Config.Claims.%s)", name, name)
	}
}

// same reports whether a and b are the same value, without panicking on
// dynamic types that are not comparable (those are never the same).
func same(a, b any) (eq bool) {
	defer func() {
		if recover() != nil {
			eq = false
		}
	}()
	return a == b
}

// describe renders an accessor's value for a message: "nil", "typed nil
// *pkg.T" or the dynamic type.
func describe(v any) string {
	if v == nil {
		return "nil"
	}
	if check.IsNil(v) {
		return fmt.Sprintf("typed nil %T", v)
	}
	return fmt.Sprintf("%T", v)
}

// clientBuilder is the cloudprovider.ControllerClientBuilder given to
// Initialize. Its clients are real clientsets (kubernetes.NewForConfig) over
// HTTP, served in-process by serveClientset from the rule's fake clientset:
// the very Nodes, Services, ConfigMaps, Events… that the suite's controllers
// see through the fake, with watches, so CoreV1().RESTClient() works and a
// ListWatch or informer of the provider sees every change the suite makes.
// Config gives the rest.Config of that server, to build other clients
// (dynamic, discovery, informer factories). As in the cloud-controller-manager
// (k8s.io/controller-manager pkg/clientbuilder SimpleControllerClientBuilder),
// each config is a copy with the user agent ".../name".
type clientBuilder struct{ cfg *restclient.Config }

// Config returns a copy of the served config with the user agent for name.
func (b clientBuilder) Config(name string) (*restclient.Config, error) {
	return restclient.AddUserAgent(restclient.CopyConfig(b.cfg), name), nil
}

// ConfigOrDie is Config, which does not fail.
func (b clientBuilder) ConfigOrDie(name string) *restclient.Config {
	cfg, _ := b.Config(name)
	return cfg
}

// Client returns a clientset over Config(name).
func (b clientBuilder) Client(name string) (clientset.Interface, error) {
	cfg, _ := b.Config(name)
	return clientset.NewForConfig(cfg)
}

// ClientOrDie is Client, panicking on an error.
func (b clientBuilder) ClientOrDie(name string) clientset.Interface {
	return clientset.NewForConfigOrDie(b.ConfigOrDie(name))
}
