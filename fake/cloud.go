package fake

import (
	"fmt"
	"slices"
	"sync"

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

	cfg    Config // with defaults
	store  *store
	meter  *meter
	cache  *instances.Cache
	routes *routes.Table

	adminMu sync.Mutex
	admin   adminState
	adminWG sync.WaitGroup
}

var _ cloudprovider.Interface = (*Cloud)(nil)

// Option changes how New builds a Cloud.
type Option func(*options)

type options struct {
	instances []Instance
	funcs     Funcs
	lbCaps    loadbalancer.Capabilities
	cache     *instances.CacheOptions
}

// WithInstances adds instances after those of Config.Instances.
func WithInstances(in ...Instance) Option {
	return func(o *options) { o.instances = append(o.instances, in...) }
}

// WithInterceptor sets the interceptor Funcs (see SetInterceptor).
func WithInterceptor(f Funcs) Option { return func(o *options) { o.funcs = f } }

// WithLoadBalancerCapabilities narrows what the load balancers support
// (default AllLoadBalancerCapabilities); a Service asking for more is
// rejected with a loadbalancer.ErrUnsupported error.
func WithLoadBalancerCapabilities(c loadbalancer.Capabilities) Option {
	return func(o *options) { o.lbCaps = c }
}

// WithInstanceCache sets the instances.Cache options, for example a fake
// clock; it overrides Config.InstanceCacheTTL.
func WithInstanceCache(c instances.CacheOptions) Option {
	return func(o *options) { o.cache = &c }
}

// New builds a fake cloud from cfg and opts. It starts nothing: the admin
// endpoint, if configured, starts with Initialize. It returns an error
// (wrapping the field errors of Config.Validate, or naming the instance)
// for an invalid cfg or a seeded instance that cannot be added. With
// cfg.StateFile it loads the shared state file, or creates it from the
// seeded instances when it does not exist; an error about the file wraps
// ErrStateFile and names it.
func New(cfg Config, opts ...Option) (*Cloud, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("fake: invalid Config: %w", err)
	}
	o := options{lbCaps: AllLoadBalancerCapabilities}
	for _, opt := range opts {
		opt(&o)
	}
	cfg = cfg.withDefaults()
	cfg.Instances = append(slices.Clone(cfg.Instances), o.instances...)
	st, err := newStore(cfg)
	if err != nil {
		return nil, err
	}
	c := &Cloud{cfg: cfg, store: st, meter: newMeter()}
	c.meter.funcs = o.funcs

	// The glue: each driver, behind the instrumented cloud API, given to
	// its ccmkit adapter; the adapters composed with provider.New.
	instanceAPI := instanceAPI{c.meter, instanceDriver{st}}
	cacheOpts := instances.CacheOptions{TTL: cfg.InstanceCacheTTL.Duration}
	if o.cache != nil {
		cacheOpts = *o.cache
	}
	if c.cache, err = instances.NewCache(instanceAPI, cacheOpts); err != nil {
		return nil, fmt.Errorf("fake: instances: %w", err)
	}
	// A change made through the control surface is seen at the next
	// look-up, not up to a TTL later: a real cloud's provider would learn
	// of it only when the cache expires.
	st.onInstanceChange = c.cache.Invalidate
	var lookups instances.Driver = c.cache
	if st.file != nil {
		lookups = freshLookups{st, c.cache} // sees other processes' changes too
	}
	nodes, err := instances.NewAdapter(lookups, instances.Options{Codec: codec})
	if err != nil {
		return nil, fmt.Errorf("fake: instances: %w", err)
	}
	lbs, err := loadbalancer.NewReconciler(loadbalancer.Config{
		Driver:       lbAPI{c.meter, lbDriver{st}},
		Capabilities: o.lbCaps,
		Instances:    nodes, // addresses of nodes not yet patched by the CCM
	})
	if err != nil {
		return nil, fmt.Errorf("fake: load balancers: %w", err)
	}
	c.routes, err = routes.NewWholeTable(routeAPI{c.meter, routeDriver{st}}, routes.Config{
		Instances:           goneTargets{instanceAPI},
		IPv4Only:            cfg.Routes.IPv4Only,
		EnableNodeAddresses: cfg.Routes.EnableNodeAddresses,
	})
	if err != nil {
		return nil, fmt.Errorf("fake: routes: %w", err)
	}
	c.Cloud = provider.New(ProviderName, cfg.ClusterID, provider.Capabilities{
		LoadBalancer: lbs,
		InstancesV2:  nodes,
		Routes:       c.routes,
	})
	return c, nil
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
