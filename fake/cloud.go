package fake

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/util/validation/field"
	cloudprovider "k8s.io/cloud-provider"
	"k8s.io/utils/clock"

	"github.com/ccmkit/ccmkit/governor"
	"github.com/ccmkit/ccmkit/instances"
	"github.com/ccmkit/ccmkit/internal/cloudmetrics"
	"github.com/ccmkit/ccmkit/loadbalancer"
	"github.com/ccmkit/ccmkit/provider"
	"github.com/ccmkit/ccmkit/routes"
)

// ProviderName is the name the fake is registered under and the scheme of
// its provider IDs ("fake://<instance ID>").
const ProviderName = "fake"

// codec formats and parses the fake's provider IDs.
var codec = provider.Codec{Scheme: ProviderName}

// allLoadBalancerCapabilities is every load-balancer feature: what the
// fake supports unless Options.LoadBalancerCapabilities says otherwise.
var allLoadBalancerCapabilities = loadbalancer.Capabilities{
	UDP: true, SCTP: true, MixedProtocols: true, DualStack: true, NodePortless: true,
	SourceRanges: true, ClientIPAffinity: true, RequestedIP: true,
	AppProtocols: []string{"http", "https", "kubernetes.io/h2c"},
}

// Cloud is the fake cloud and its cloudprovider.Interface: the embedded
// provider.Cloud offers LoadBalancer (a loadbalancer.Reconciler over a
// loadbalancer.Cache), InstancesV2 (an instances.Adapter over an
// instances.Cache) and Routes (a whole-table routes.Table); Instances, Zones
// and Clusters are absent. The other methods
// are the control surface for tests (instances, snapshots, faults, call
// counters, load balancers changed behind the CCM's back) and for the admin
// endpoint (package fake/admin). Its Initialize and Shutdown are
// provider.Cloud's: it starts nothing of its own.
//
// Construct it with New. Every method is safe for concurrent use.
type Cloud struct {
	*provider.Cloud

	cfg   Config // with defaults
	clock clock.Clock
	store *store // shared with peers
	meter *meter
	cache *instances.Cache
	// instanceAPI is the metered instance driver under cache.
	instanceAPI instances.ListDriver
	cacheOpts   *instances.CacheOptions // Options.InstanceCache, for peers
	lbCache     *loadbalancer.Cache
	lbCaps      loadbalancer.Capabilities
	routes      *routes.Table
	// gov is the client-side budget (Config.Governor) under the caches;
	// nil (none) governs nothing.
	gov *governor.Governor
}

var _ cloudprovider.Interface = (*Cloud)(nil)

// Options are the optional inputs of New; the zero Options is the
// default of each field.
type Options struct {
	// Instances are added after Config.Instances, and checked against
	// them as Config.Validate checks those (named instances[i] in the list
	// they make together).
	Instances []Instance
	// Interceptor intercepts the cloud API calls (see Funcs and
	// SetInterceptor). Zero: none.
	Interceptor Funcs
	// LoadBalancerCapabilities narrows what the load balancers support; a
	// Service asking for more is rejected with a loadbalancer.ErrUnsupported
	// error. Its BackendKey must be the zero value or the one
	// LoadBalancerSection.Backends implies, which the fake sets, and so
	// it sets SharedBackendPools (LoadBalancerSection.BackendPools) and
	// ListenerPools (LoadBalancerSection.Hierarchical). Nil:
	// every feature (UDP, SCTP, mixed protocols, dual stack, node-portless,
	// source ranges, client-IP affinity, requested IPs).
	LoadBalancerCapabilities *loadbalancer.Capabilities
	// InstanceCache sets the instances.Cache options, for example a fake
	// clock; it overrides Config.InstanceCacheTTL and Clock for the cache.
	// Nil: a TTL of Config.InstanceCacheTTL on Clock.
	InstanceCache *instances.CacheOptions
	// Clock is the cloud's clock: when a load balancer is provisioned
	// (LoadBalancerSection.ProvisioningDelay), how the rate limit's buckets
	// refill (RateLimit), the governor's buckets, the instance cache's
	// clock unless InstanceCache is set, the load-balancer cache's TTLs,
	// and the waits of the load-balancer Reconciler and the route table
	// for a throttled call and for a batch: every time the Cloud reads or
	// waits for. Tests pass a fake clock (k8s.io/utils/clock/testing) to
	// step time deterministically; a call waiting for a throttle on it
	// returns when the test steps the clock past the cloud's Retry-After.
	// It is used concurrently, with the fake's locks held: it must be
	// safe for concurrent use and must not call the Cloud. Nil:
	// clock.RealClock{}.
	Clock clock.Clock
	// Persistence keeps the cloud's state outside the Cloud, shared with
	// every Cloud over the same one: package fake/statefile's over the
	// file of Config.StateFile, which requires it (statefile.Open returns one).
	// Nil: the state lives in the Cloud.
	Persistence Persistence
}

// PeerOptions are the optional inputs of NewPeer: what a peer, which shares
// its cloud's instances and clock, has of its own. The zero PeerOptions is
// the default of each field.
type PeerOptions struct {
	// Interceptor intercepts the peer's cloud API calls (see Funcs). Zero:
	// none, whatever the Cloud it is a peer of has.
	Interceptor Funcs
	// LoadBalancerCapabilities is as Options.LoadBalancerCapabilities. Nil:
	// the capabilities of the Cloud it is a peer of.
	LoadBalancerCapabilities *loadbalancer.Capabilities
	// InstanceCache is as Options.InstanceCache. Nil: the instance-cache
	// options of the Cloud it is a peer of.
	InstanceCache *instances.CacheOptions
}

// New builds a fake cloud from cfg and opts. It starts nothing, and serves
// no admin endpoint whatever cfg.Admin says (package fake/admin serves it).
// It returns an error
// (wrapping the field errors of Config.Validate, or naming the instance or
// the option) for an invalid cfg, a seeded instance that cannot be added
// (two instances of cfg.Instances and opts.Instances with one ID, one
// address or the name of a live instance) or an
// opts.LoadBalancerCapabilities whose BackendKey contradicts
// LoadBalancerSection.Backends. With cfg.StateFile it loads the shared
// state file, or creates it from the seeded instances when it does not
// exist; an error about the file wraps ErrStateFile and names it.
func New(cfg Config, opts Options) (*Cloud, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("fake.New: invalid Config: %w", err)
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	cfg = cfg.withDefaults()
	cfg.Instances = append(slices.Clone(cfg.Instances), opts.Instances...)
	if len(opts.Instances) > 0 {
		if errs := seedConflicts(field.NewPath("instances"), cfg.Instances); len(errs) > 0 {
			return nil, fmt.Errorf("fake.New: invalid instances (Config.Instances, then Options.Instances): %w", errs.ToAggregate())
		}
	}
	st, err := newStore(cfg, opts.Clock.Now, opts.Persistence) // its errors say "fake: state file …"
	if err != nil {
		return nil, err
	}
	c, err := compose(cfg, st, opts)
	if err != nil {
		return nil, fmt.Errorf("fake.New: %w", err)
	}
	return c, nil
}

// NewPeer returns another Cloud over the same cloud as c — the same
// instances, load balancers, routes, address pools, rate limit, clock,
// provisioning delay and, with Config.StateFile, the same file: one cloud
// account — configured as the cluster clusterID (its Config.ClusterID,
// which owns its load balancers and routes; empty: the --cluster-name of
// each call, as in New). It has its own call counters, faults, interceptor
// Funcs and instance cache (they model a provider's API client), and no
// admin endpoint (admin.Handler serves its API); see PeerOptions for what
// it takes from c. Use it to run two clusters on one network, for example
// both with --cluster-name=kubernetes, or a second replica of one cluster
// (the same clusterID). It returns an error naming the problem for a
// clusterID with leading or trailing white space, and for an
// opts.LoadBalancerCapabilities whose BackendKey contradicts
// LoadBalancerSection.Backends. Safe for concurrent use; c and the peer
// are independent afterwards (shutting one down does not stop the other).
func NewPeer(c *Cloud, clusterID string, opts PeerOptions) (*Cloud, error) {
	o := Options{Interceptor: opts.Interceptor, LoadBalancerCapabilities: opts.LoadBalancerCapabilities, InstanceCache: opts.InstanceCache, Clock: c.clock}
	if o.LoadBalancerCapabilities == nil {
		o.LoadBalancerCapabilities = &c.lbCaps
	}
	if o.InstanceCache == nil {
		o.InstanceCache = c.cacheOpts
	}
	cfg := c.cfg
	cfg.ClusterID, cfg.Admin, cfg.Instances = clusterID, AdminSection{}, nil
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("fake.NewPeer: %w", err)
	}
	peer, err := compose(cfg, c.store, o)
	if err != nil {
		return nil, fmt.Errorf("fake.NewPeer: %w", err)
	}
	return peer, nil
}

// compose builds the Cloud of cfg (with defaults) over st: each driver,
// behind the instrumented cloud API, given to its ccmkit adapter, and the
// adapters composed with provider.New. This is the glue a real provider
// writes; each adapter is built in a step of its own, in the order
// instances, load balancers (which look up nodes through the instances
// adapter), routes.
func compose(cfg Config, st *store, o Options) (*Cloud, error) {
	c := &Cloud{cfg: cfg, clock: o.Clock, store: st, meter: newMeter(st.limits, o.Interceptor), cacheOpts: o.InstanceCache}
	var err error
	if c.lbCaps, err = lbCapabilities(cfg.LoadBalancers, o.LoadBalancerCapabilities); err != nil {
		return nil, err
	}
	if cfg.Governor != nil {
		// Validated with the Config: New cannot fail here.
		if c.gov, err = governor.New(cfg.Governor.options(o.Clock)); err != nil {
			return nil, fmt.Errorf("governor: %w", err)
		}
	}
	api := instanceAPI{m: c.meter, s: st}
	c.instanceAPI = api
	nodes, err := c.composeInstances(c.gov.InstanceList(api), o)
	if err != nil {
		return nil, err
	}
	lbs, err := c.composeLoadBalancers(nodes)
	if err != nil {
		return nil, err
	}
	if c.routes, err = c.composeRoutes(c.gov.InstanceList(api)); err != nil {
		return nil, err
	}
	if c.Cloud, err = provider.New(ProviderName, provider.Options{
		ClusterID:    cfg.ClusterID,
		LoadBalancer: lbs,
		InstancesV2:  nodes,
		Routes:       checkedRoutes{Table: c.routes, s: st, clusterID: cfg.ClusterID},
	}); err != nil {
		return nil, err
	}
	// A change made through the control surface is seen at the next
	// look-up, not up to a TTL later: a real cloud's provider would learn
	// of it only when the cache expires. So is a load balancer another
	// process changed in the state file.
	st.watchInstances(c.cache.Invalidate)
	st.watchInstances(c.routes.Invalidate) // a terminated target is Blackhole
	st.watchRoutes(c.routes.Invalidate)
	st.watchLoadBalancers(c.lbCache.Invalidate)
	return c, nil
}

// lbCapabilities returns the load-balancer capabilities of a Cloud whose
// loadBalancers section (with defaults) is lbs: narrowed (nil: every
// feature), with the BackendKey that lbs.Backends implies,
// SharedBackendPools as lbs.BackendPools says, ListenerPools as
// lbs.Hierarchical says and UniqueNames as lbs.UniqueNames says. A
// narrowed BackendKey other than that one or the zero value is an error
// naming both, and so is a narrowed SharedBackendPools without shared
// pools, ListenerPools on a cloud that is not hierarchical, or UniqueNames
// on a cloud that does not enforce them.
func lbCapabilities(lbs LoadBalancerSection, narrowed *loadbalancer.Capabilities) (loadbalancer.Capabilities, error) {
	caps := allLoadBalancerCapabilities
	if narrowed != nil {
		caps = *narrowed
	}
	key := loadbalancer.BackendKeyNodeName
	if lbs.Backends == BackendsInstanceID {
		key = loadbalancer.BackendKeyProviderID
	}
	if caps.BackendKey != "" && caps.BackendKey != key {
		return loadbalancer.Capabilities{}, fmt.Errorf("Options.LoadBalancerCapabilities: BackendKey %q, but loadBalancers.backends %q keeps backends by %q: expected %q or the zero value", caps.BackendKey, lbs.Backends, key, key)
	}
	shared := lbs.BackendPools == BackendPoolsShared
	if caps.SharedBackendPools && !shared {
		return loadbalancer.Capabilities{}, fmt.Errorf("Options.LoadBalancerCapabilities: SharedBackendPools true, but loadBalancers.backendPools is %q: expected false, or backendPools %q", lbs.BackendPools, BackendPoolsShared)
	}
	if caps.ListenerPools && !lbs.Hierarchical {
		return loadbalancer.Capabilities{}, errors.New("Options.LoadBalancerCapabilities: ListenerPools true, but loadBalancers.hierarchical is false: expected false, or hierarchical true")
	}
	if caps.UniqueNames && !lbs.UniqueNames {
		return loadbalancer.Capabilities{}, errors.New("Options.LoadBalancerCapabilities: UniqueNames true, but loadBalancers.uniqueNames is false: expected false, or uniqueNames true")
	}
	caps.BackendKey, caps.SharedBackendPools, caps.ListenerPools = key, shared, lbs.Hierarchical
	caps.UniqueNames = lbs.UniqueNames
	return caps, nil
}

// composeInstances sets c.cache, an instances.Cache over api, and returns
// the InstancesV2 adapter over it. Errors name the instances layer and wrap
// the constructor's.
func (c *Cloud) composeInstances(api instances.ListDriver, o Options) (*instances.Adapter, error) {
	cacheOpts := instances.CacheOptions{TTL: c.cfg.InstanceCacheTTL.Duration, Clock: o.Clock, ErrorTTL: c.errorTTL()}
	if o.InstanceCache != nil {
		cacheOpts = *o.InstanceCache
	}
	var err error
	if c.cache, err = instances.NewCache(api, cacheOpts); err != nil {
		return nil, fmt.Errorf("instances: %w", err)
	}
	var lookups instances.Driver = c.cache
	if c.store.file != nil {
		// sees other processes' changes too; makes no cloud call, so the
		// Cache below meters (cloudmetrics.SelfMetered)
		lookups = struct {
			freshLookups
			cloudmetrics.SelfMetered
		}{freshLookups: freshLookups{c.store, c.cache}}
	}
	nodes, err := instances.NewAdapter(lookups, codec, instances.Options{})
	if err != nil {
		return nil, fmt.Errorf("instances: %w", err)
	}
	return nodes, nil
}

// composeLoadBalancers sets c.lbCache, a loadbalancer.Cache over the
// metered lbDriver, and returns the load-balancer Reconciler over it, with
// c.lbCaps, looking up nodes with nodes. Errors wrap the constructors'.
func (c *Cloud) composeLoadBalancers(nodes *instances.Adapter) (*loadbalancer.Reconciler, error) {
	a := cloudAPI{m: c.meter, s: c.store}
	// Without shared pools, the Cache must not see pool methods.
	governed := c.gov.LoadBalancerList(struct{ loadbalancer.ListDriver }{a})
	shared := c.cfg.LoadBalancers.BackendPools == BackendPoolsShared
	if shared {
		governed = c.gov.LoadBalancerPools(a)
	}
	var err error
	c.lbCache, err = loadbalancer.NewCache(governed, loadbalancer.CacheOptions{
		TTL:      c.cfg.LoadBalancerCacheTTL.Duration,
		ErrorTTL: c.errorTTL(),
		Clock:    c.clock,
	})
	if err != nil {
		return nil, fmt.Errorf("load balancers: %w", err)
	}
	var lookups loadbalancer.Driver = c.lbCache
	// fresh sees other processes' changes too; it makes no cloud call,
	// so the Cache below meters (cloudmetrics.SelfMetered).
	switch fresh := (freshLoadBalancers{c.store, c.lbCache}); {
	case c.store.file != nil && shared:
		lookups = struct {
			freshPools
			cloudmetrics.SelfMetered
		}{freshPools: freshPools{fresh, c.lbCache}}
	case c.store.file != nil:
		lookups = struct {
			freshLoadBalancers
			cloudmetrics.SelfMetered
		}{freshLoadBalancers: fresh}
	}
	lbCfg := loadbalancer.Options{
		ClusterID:      c.cfg.ClusterID,
		Capabilities:   c.lbCaps,
		Instances:      nodes, // addresses of nodes not yet patched by the CCM
		RetryAfter:     provisioningRetry(c.cfg.LoadBalancers.ProvisioningDelay.Duration),
		CoalesceWindow: c.cfg.LoadBalancers.CoalesceWindow.Duration,
		Clock:          c.clock,
		// The fake's declared annotations (annotations.go): validated on
		// every Service, settings copied into Spec.Settings.
		Annotations:           annotations,
		IDAnnotation:          idAnnotation,
		RequestedIPAnnotation: requestedIPAnnotation,
		HealthCheckAnnotation: healthCheckAnnotation,
	}
	if len(c.lbCaps.AppProtocols) > 0 {
		lbCfg.AppProtocolAnnotation = appProtocolAnnotation
	}
	if c.lbCaps.BackendKey == loadbalancer.BackendKeyProviderID {
		lbCfg.Codec = codec // a foreign Node is left out, not sent to the cloud
	}
	lbs, err := loadbalancer.NewReconciler(lookups, lbCfg)
	if err != nil {
		return nil, fmt.Errorf("load balancers: %w", err)
	}
	return lbs, nil
}

// composeRoutes returns the whole-table route table over the metered
// routeDriver, which learns of gone targets through api. Errors wrap the
// constructor's.
func (c *Cloud) composeRoutes(api instances.ListDriver) (*routes.Table, error) {
	table, err := routes.NewWholeTable(c.gov.RouteTable(cloudAPI{m: c.meter, s: c.store}), routes.Options{
		ClusterID:           c.cfg.ClusterID,
		Instances:           goneTargets{api},
		IPv4Only:            c.cfg.Routes.IPv4Only,
		EnableNodeAddresses: c.cfg.Routes.EnableNodeAddresses,
		ListTTL:             c.cfg.Routes.ListTTL.Duration,
		Clock:               c.clock,
	})
	if err != nil {
		return nil, fmt.Errorf("routes: %w", err)
	}
	return table, nil
}

// errorTTL is the ErrorTTL of the Cloud's caches: their default, or, under
// a governor, none, so that a governor's refusal (a RetryError of a few
// milliseconds) is not remembered for the default five seconds
// (governor's doc, "Where it goes").
func (c *Cloud) errorTTL() time.Duration {
	if c.gov != nil {
		return -1
	}
	return 0
}

// provisioningRetry is the Reconciler's RetryAfter for a provisioning
// delay: the service controller comes back when a new load balancer is
// ready, or after lbRetryAfter for longer delays; 0 (the default) without
// a delay.
func provisioningRetry(delay time.Duration) time.Duration {
	if delay <= 0 {
		return 0
	}
	return min(delay, lbRetryAfter)
}

// lbRetryAfter is the default of loadbalancer.Options.RetryAfter, the
// longest the service controller waits for a provisioning load balancer.
const lbRetryAfter = 10 * time.Second

// InstanceAPI returns the fake's instance API as a provider's instances
// layer calls it: an instances.ListDriver (GetByID, GetByName, List) whose
// calls are counted, rate limited and intercepted like every
// other call of the cloud, and not cached. The Cloud's own InstancesV2 is an
// instances.Adapter over an instances.Cache over it; a test that composes
// its own instances layer (another cache, TTL or wrapper) starts here. Safe
// for concurrent use.
func (c *Cloud) InstanceAPI() instances.ListDriver { return c.instanceAPI }
