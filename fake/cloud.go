package fake

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/util/validation/field"
	cloudprovider "k8s.io/cloud-provider"

	"github.com/ccmkit/ccmkit/instances"
	"github.com/ccmkit/ccmkit/loadbalancer"
	"github.com/ccmkit/ccmkit/provider"
	"github.com/ccmkit/ccmkit/routes"
)

// ProviderName is the name the fake is registered under and the scheme of
// its provider IDs ("fake://<instance ID>").
const ProviderName = "fake"

// codec formats and parses the fake's provider IDs.
var codec = provider.Codec{Scheme: ProviderName}

// AllLoadBalancerCapabilities is every load-balancer feature, which the
// fake supports unless WithLoadBalancerCapabilities says otherwise.
var AllLoadBalancerCapabilities = loadbalancer.Capabilities{
	UDP: true, SCTP: true, MixedProtocols: true, DualStack: true, NodePortless: true,
	SourceRanges: true, ClientIPAffinity: true, RequestedIP: true,
}

// Cloud is the fake cloud and its cloudprovider.Interface: the embedded
// provider.Cloud offers LoadBalancer (a loadbalancer.Reconciler), InstancesV2
// (an instances.Adapter over an instances.Cache) and Routes (a whole-table
// routes.Table); Instances, Zones and Clusters are absent. The other methods
// are the control surface for tests (instances, snapshots, faults, call
// counters) and the admin endpoint.
//
// Construct it with New. Every method is safe for concurrent use.
type Cloud struct {
	*provider.Cloud

	cfg   Config // with defaults
	store *store // shared with peers
	meter *meter
	cache *instances.Cache
	// instanceAPI is the metered instance driver under cache.
	instanceAPI instances.ListDriver
	cacheOpts   *instances.CacheOptions // WithInstanceCache, for peers
	lbCaps      loadbalancer.Capabilities
	routes      *routes.Table

	adminMu sync.Mutex
	admin   adminState
	adminWG sync.WaitGroup
}

var _ cloudprovider.Interface = (*Cloud)(nil)

// Option changes how New (or Peer) builds a Cloud.
type Option func(*options)

type options struct {
	instances []Instance
	funcs     Funcs
	lbCaps    *loadbalancer.Capabilities
	cache     *instances.CacheOptions
	clock     func() time.Time
	clockSet  bool
}

// WithInstances adds instances after those of Config.Instances. Not for
// Peer, whose cloud already has its instances (add them with AddInstance).
func WithInstances(in ...Instance) Option {
	return func(o *options) { o.instances = append(o.instances, in...) }
}

// WithInterceptor sets the interceptor Funcs (see SetInterceptor).
func WithInterceptor(f Funcs) Option { return func(o *options) { o.funcs = f } }

// WithLoadBalancerCapabilities narrows what the load balancers support
// (default AllLoadBalancerCapabilities); a Service asking for more is
// rejected with a loadbalancer.ErrUnsupported error. Its BackendKey must
// be the zero value or the one LoadBalancerConfig.Backends implies, which
// the fake sets.
func WithLoadBalancerCapabilities(c loadbalancer.Capabilities) Option {
	return func(o *options) { o.lbCaps = &c }
}

// WithInstanceCache sets the instances.Cache options, for example a fake
// clock; it overrides Config.InstanceCacheTTL and WithClock's clock for
// the cache.
func WithInstanceCache(c instances.CacheOptions) Option {
	return func(o *options) { o.cache = &c }
}

// WithClock sets the cloud's clock (default time.Now): when a load balancer
// is provisioned (LoadBalancerConfig.ProvisioningDelay), how the rate
// limit's buckets refill (RateLimit), and the instance cache's Now unless
// WithInstanceCache is given. Tests pass a fake clock to step time
// deterministically. With it, the load-balancer Reconciler and the route
// table never wait for a throttled call in real time (their
// MaxThrottleWait is negative): the delay is on the test's clock, so a
// throttled call fails at once. now is called concurrently, with the
// fake's locks held: it must be safe for concurrent use and must not call
// the Cloud. A nil now makes New fail. Not for Peer, which shares its
// cloud's clock.
func WithClock(now func() time.Time) Option {
	return func(o *options) { o.clock, o.clockSet = now, true }
}

// New builds a fake cloud from cfg and opts. It starts nothing: the admin
// endpoint, if configured, starts with Initialize. It returns an error
// (wrapping the field errors of Config.Validate, or naming the instance or
// the option) for an invalid cfg, a seeded instance that cannot be added
// (WithInstances' instances are checked against cfg.Instances' as
// Config.Validate checks those: an ID, an address or the name of a live
// instance of two instances, named instances[i] in the list they make
// together), a nil WithClock or a WithLoadBalancerCapabilities whose
// BackendKey contradicts LoadBalancerConfig.Backends. With cfg.StateFile it loads the
// shared state file, or creates it from the seeded instances when it does
// not exist; an error about the file wraps ErrStateFile and names it.
func New(cfg Config, opts ...Option) (*Cloud, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("fake: invalid Config: %w", err)
	}
	o := applyOptions(opts)
	if o.clockSet && o.clock == nil {
		return nil, errors.New("fake: WithClock(nil): expected a clock function such as time.Now")
	}
	if o.clock == nil {
		o.clock = time.Now
	}
	cfg = cfg.withDefaults()
	cfg.Instances = append(slices.Clone(cfg.Instances), o.instances...)
	if len(o.instances) > 0 {
		if errs := seedConflicts(field.NewPath("instances"), cfg.Instances); len(errs) > 0 {
			return nil, fmt.Errorf("fake: invalid instances (Config.Instances, then WithInstances): %w", errs.ToAggregate())
		}
	}
	st, err := newStore(cfg, o.clock)
	if err != nil {
		return nil, err
	}
	st.fakeClock = o.clockSet
	return compose(cfg, st, o)
}

// Peer returns another Cloud over the same cloud as c — the same
// instances, load balancers, routes, address pools, rate limit, clock,
// provisioning delay and, with Config.StateFile, the same file: one cloud
// account — configured as the cluster clusterID (its Config.ClusterID,
// which owns its load balancers and routes; empty: the --cluster-name of
// each call, as in New). It has its own call counters, faults, interceptor
// Funcs (none unless WithInterceptor is given) and instance cache (they
// model a provider's API client), c's load-balancer capabilities and
// instance-cache options unless WithLoadBalancerCapabilities or
// WithInstanceCache is given, and no admin endpoint (AdminHandler serves
// its API). Use it to run two clusters on one network, for example both
// with --cluster-name=kubernetes, or a second replica of one cluster (the
// same clusterID). It returns an error naming the problem for a clusterID
// with leading or trailing white space, for WithInstances or WithClock,
// which belong to the shared cloud, and for a WithLoadBalancerCapabilities
// whose BackendKey contradicts LoadBalancerConfig.Backends. Safe for
// concurrent use; c and the peer are independent afterwards (shutting one
// down does not stop the other).
func (c *Cloud) Peer(clusterID string, opts ...Option) (*Cloud, error) {
	o := applyOptions(opts)
	if len(o.instances) > 0 || o.clockSet {
		return nil, errors.New("fake: Peer: WithInstances and WithClock configure the shared cloud; expected only WithInterceptor, WithLoadBalancerCapabilities or WithInstanceCache (add instances with AddInstance)")
	}
	if o.lbCaps == nil {
		o.lbCaps = &c.lbCaps
	}
	if o.cache == nil {
		o.cache = c.cacheOpts
	}
	o.clock = c.store.now
	cfg := c.cfg
	cfg.ClusterID, cfg.Admin, cfg.Instances = clusterID, AdminConfig{}, nil
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("fake: Peer: %w", err)
	}
	return compose(cfg, c.store, o)
}

func applyOptions(opts []Option) options {
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	return o
}

// compose builds the Cloud of cfg (with defaults) over st: each driver,
// behind the instrumented cloud API, given to its ccmkit adapter, and the
// adapters composed with provider.New. This is the glue a real provider
// writes.
func compose(cfg Config, st *store, o options) (*Cloud, error) {
	c := &Cloud{cfg: cfg, store: st, meter: newMeter(st.limits), lbCaps: AllLoadBalancerCapabilities, cacheOpts: o.cache}
	c.meter.funcs = o.funcs
	if o.lbCaps != nil {
		c.lbCaps = *o.lbCaps
	}
	key := loadbalancer.BackendKeyNodeName
	if cfg.LoadBalancers.Backends == BackendsInstanceID {
		key = loadbalancer.BackendKeyProviderID
	}
	if c.lbCaps.BackendKey != "" && c.lbCaps.BackendKey != key {
		return nil, fmt.Errorf("fake: WithLoadBalancerCapabilities: BackendKey %q, but loadBalancers.backends %q keeps backends by %q; expected %q or the zero value", c.lbCaps.BackendKey, cfg.LoadBalancers.Backends, key, key)
	}
	c.lbCaps.BackendKey = key

	instanceAPI := instanceAPI{c.meter, instanceDriver{st}}
	c.instanceAPI = instanceAPI
	cacheOpts := instances.CacheOptions{TTL: cfg.InstanceCacheTTL.Duration, Now: o.clock}
	if o.cache != nil {
		cacheOpts = *o.cache
	}
	var err error
	if c.cache, err = instances.NewCache(instanceAPI, cacheOpts); err != nil {
		return nil, fmt.Errorf("fake: instances: %w", err)
	}
	var lookups instances.Driver = c.cache
	if st.file != nil {
		lookups = freshLookups{st, c.cache} // sees other processes' changes too
	}
	nodes, err := instances.NewAdapter(lookups, codec, instances.Options{})
	if err != nil {
		return nil, fmt.Errorf("fake: instances: %w", err)
	}
	lbCfg := loadbalancer.Config{
		Driver:       lbAPI{c.meter, lbDriver{st}},
		ClusterID:    cfg.ClusterID,
		Capabilities: c.lbCaps,
		Instances:    nodes, // addresses of nodes not yet patched by the CCM
		RetryAfter:   provisioningRetry(cfg.LoadBalancers.ProvisioningDelay.Duration),
	}
	var throttleWait time.Duration // the adapters' defaults
	if st.fakeClock {
		// A throttle's delay is on the test's clock: waiting for it in real
		// time would only spin until the adapter's budget is spent.
		throttleWait = -1
		lbCfg.MaxThrottleWait = throttleWait
	}
	if key == loadbalancer.BackendKeyProviderID {
		lbCfg.Codec = codec // a foreign Node is left out, not sent to the cloud
	}
	lbs, err := loadbalancer.NewReconciler(lbCfg)
	if err != nil {
		return nil, fmt.Errorf("fake: load balancers: %w", err)
	}
	c.routes, err = routes.NewWholeTable(routeAPI{c.meter, routeDriver{st}}, routes.Config{
		ClusterID:           cfg.ClusterID,
		Instances:           goneTargets{instanceAPI},
		IPv4Only:            cfg.Routes.IPv4Only,
		EnableNodeAddresses: cfg.Routes.EnableNodeAddresses,
		MaxThrottleWait:     throttleWait,
	})
	if err != nil {
		return nil, fmt.Errorf("fake: routes: %w", err)
	}
	c.Cloud = provider.New(ProviderName, provider.Options{
		ClusterID:    cfg.ClusterID,
		LoadBalancer: lbs,
		InstancesV2:  nodes,
		Routes:       checkedRoutes{Table: c.routes, s: st, clusterID: cfg.ClusterID},
	})
	// A change made through the control surface is seen at the next
	// look-up, not up to a TTL later: a real cloud's provider would learn
	// of it only when the cache expires.
	st.watchInstances(c.cache.Invalidate)
	return c, nil
}

// provisioningRetry is the Reconciler's RetryAfter for a provisioning
// delay: the service controller comes back when a new load balancer is
// ready, or after loadbalancer.DefaultRetryAfter for longer delays; 0 (the
// default) without a delay.
func provisioningRetry(delay time.Duration) time.Duration {
	if delay <= 0 {
		return 0
	}
	return min(delay, loadbalancer.DefaultRetryAfter)
}

// Initialize implements cloudprovider.Interface: provider.Cloud's
// Initialize, then the admin endpoint, when Config.Admin.Address is set,
// which serves until stop is closed or Shutdown is called. Calls after the
// first do nothing. A failure to listen is logged and reported by
// AdminAddr; it does not stop the cloud.
func (c *Cloud) Initialize(clientBuilder cloudprovider.ControllerClientBuilder, stop <-chan struct{}) {
	c.Cloud.Initialize(clientBuilder, stop)
	c.startAdmin(c.Cloud.Context())
}

// Shutdown stops what Initialize started, as closing its stop channel does,
// and waits for the admin endpoint's goroutines to end. It is safe to call
// more than once and before Initialize.
func (c *Cloud) Shutdown() {
	c.Cloud.Shutdown()
	c.adminWG.Wait()
}

// RouteStats returns the route table's batching counters (routes.Stats):
// how many CreateRoute and DeleteRoute calls were coalesced into how many
// table writes.
func (c *Cloud) RouteStats() routes.Stats { return c.routes.Stats() }

// InstanceAPI returns the fake's instance API as a provider's instances
// layer calls it: an instances.ListDriver (GetByID, GetByName, List) whose
// calls are counted, rate limited and failed by injected faults like every
// other call of the cloud, and not cached. The Cloud's own InstancesV2 is an
// instances.Adapter over an instances.Cache over it; a test that composes
// its own instances layer (another cache, TTL or wrapper) starts here. Safe
// for concurrent use.
func (c *Cloud) InstanceAPI() instances.ListDriver { return c.instanceAPI }
