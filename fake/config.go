package fake

import (
	"errors"
	"fmt"
	"math"
	"net"
	"net/netip"
	"strconv"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"

	"github.com/ccmkit/ccmkit/governor"
	"github.com/ccmkit/ccmkit/provider"
)

// Defaults of Config, used for its zero-valued fields (each field's doc
// states its value).
const (
	defaultInstanceCIDR = "10.0.0.0/16"
	// RFC 2544 benchmarking space: 131,070 usable addresses.
	defaultIPv4Pool = "198.18.0.0/15"
	// Inside the RFC 3849 documentation prefix.
	defaultIPv6Pool     = "2001:db8:1b::/112"
	defaultZone         = "zone-a"
	defaultRegion       = "region-1"
	defaultInstanceType = "fake.small"
)

// Defaults of the realistic mode (Config.Realistic), used for the fields it
// governs that the cloud-config leaves unset. They suit tests and the demo:
// a load balancer is ready a moment after it is created, and a cluster of
// 100 nodes and 50 LoadBalancer Services converges within the rate limit
// after some throttled calls.
const (
	realisticProvisioningDelay = 2 * time.Second
	realisticReadsPerSecond    = 20.0
	realisticWritesPerSecond   = 10.0
	realisticBurst             = 20
	realisticBackends          = BackendsInstanceID
)

// hierarchicalBusyAfterWrite is the default of
// LoadBalancerSection.BusyAfterWrite on a hierarchical cloud: about how
// long Octavia keeps a load balancer PENDING_UPDATE after a small change.
const hierarchicalBusyAfterWrite = time.Second

// Config is the fake's configuration and the format of its --cloud-config
// file (YAML or JSON, decoded strictly by provider.DecodeConfig: an unknown
// or repeated field is an error). Every field is optional; the zero value is
// a cloud without instances, without a cluster ID (HasClusterID is false),
// with the default address pools, synchronous, unthrottled, keeping load
// balancer backends by Node name, each load balancer one object that is
// never busy, and without the admin endpoint. See the
// annotated example/cloud-config.yaml at the repository root.
//
// A Config is a plain value; New copies what it needs.
type Config struct {
	// ClusterID is this cluster's identity in the cloud: it owns the load
	// balancers and routes this Cloud creates (loadbalancer.Options.ClusterID
	// and routes.Options.ClusterID), whatever --cluster-name the controllers
	// pass, so two clusters that both run with the default
	// --cluster-name=kubernetes on one cloud never touch each other's
	// resources. HasClusterID reports whether it is set. Empty: the
	// --cluster-name of each call owns them, as in upstream providers.
	ClusterID string `json:"clusterID,omitempty"`
	// Realistic turns on the realistic mode: for each of its fields the
	// cloud-config leaves unset, LoadBalancers.ProvisioningDelay defaults
	// to 2s, LoadBalancers.Backends to instanceID, and RateLimit to 20
	// reads and 10 writes per second with a burst of 20.
	// A field that is set keeps its value (provisioningDelay: 0s switches
	// the delay off). False: every such field defaults to today's
	// behaviour (no delay, no rate limit, backends by Node name).
	Realistic bool `json:"realistic,omitempty"`
	// Instances are created, in order, when the cloud is built. Two of
	// them may not have the same ID, the same address (internal or
	// external), or the same name unless one is terminated.
	Instances []Instance `json:"instances,omitempty"`
	// InstanceCIDRs are at most one IPv4 and one IPv6 network. An instance
	// added without InternalIPs gets the next free address of each of them.
	// Empty means ["10.0.0.0/16"].
	InstanceCIDRs []string `json:"instanceCIDRs,omitempty"`
	// InstanceCacheTTL is how long one instance list answers look-ups
	// (instances.CacheOptions.TTL); zero means its default, one minute.
	// Instances changed through the control surface or the admin endpoint
	// are seen at the next look-up whatever the TTL. A Go duration string,
	// such as "90s"; anything else is an error naming the field.
	InstanceCacheTTL provider.Duration `json:"instanceCacheTTL,omitempty"`
	// LoadBalancerCacheTTL is how long one load-balancer list answers
	// load-balancer look-ups (loadbalancer.CacheOptions.TTL); zero means
	// its default, one minute. A look-up the list has no match for, or
	// whose match is still provisioning, is asked of the cloud whatever the
	// TTL, and the Cloud's own writes are seen at once; a change a peer
	// (NewPeer) made to a listed load balancer is seen within the TTL, one
	// another process made (StateFile) at the next look-up. A Go duration
	// string, such as "90s"; anything else is an error naming the field.
	LoadBalancerCacheTTL provider.Duration `json:"loadBalancerCacheTTL,omitempty"`
	// LoadBalancers configures load-balancer addresses, provisioning,
	// backends and how the cloud keeps a load balancer (Hierarchical).
	LoadBalancers LoadBalancerSection `json:"loadBalancers,omitempty"`
	// Routes configures the route table.
	Routes RoutesSection `json:"routes,omitempty"`
	// RateLimit limits the cloud API calls of every driver (see
	// RateLimit). Unset rates are unlimited unless Realistic.
	RateLimit RateLimit `json:"rateLimit,omitempty"`
	// Governor, when set, is the provider's own client-side budget of
	// cloud calls (package governor), shared by its load-balancer,
	// instance and route drivers, below the caches: a call over the
	// budget is refused at once with a RetryError, without reaching the
	// cloud, and a throttled answer (RateLimit) pauses its class for the
	// Retry-After. Unset: no governor, in every mode.
	Governor *GovernorSection `json:"governor,omitempty"`
	// Admin configures the admin HTTP endpoint (off unless Address is set).
	Admin AdminSection `json:"admin,omitempty"`
	// StateFile, when set, is the absolute path of a JSON file that holds
	// the whole cloud, shared by every process (and every Cloud) built
	// with the same path: cloud-controller-manager replicas, a restarted
	// one, a test. The file is created, from the seeded instances, when it
	// does not exist; when it does, its state is used and the seeds are
	// ignored. Every operation locks <StateFile>.lock (flock, so Unix
	// only), reloads the file if another process changed it and saves it
	// atomically if it changed anything. InstanceCIDRs and LoadBalancers
	// (but for ProvisioningDelay, BusyAfterWrite and CoalesceWindow) must
	// be the same in every process; the rate limit, the provisioning
	// delay, BusyAfterWrite and CoalesceWindow apply per process. Empty keeps the state in memory,
	// private to the Cloud. New needs the file opened as
	// Options.Persistence (statefile.Open; the registered provider opens
	// it): package fake/statefile documents the file.
	StateFile string `json:"stateFile,omitempty"`
}

// LoadBalancerSection is the loadBalancers section of Config (checked by
// Config.Validate): how load balancers are addressed, how long they take
// to provision, what they keep of their backends, and whether the cloud
// keeps each as one object or as a tree of objects (Hierarchical).
type LoadBalancerSection struct {
	// IPv4Pool and IPv6Pool are the networks VIPs are allocated from, one
	// per IP family of the Service; an address is released when its load
	// balancer is deleted or changes family. The first address of each
	// pool, and the last of an IPv4 pool, are never allocated. Empty means
	// "198.18.0.0/15" (RFC 2544 benchmarking space: 131,070 usable
	// addresses) and "2001:db8:1b::/112" (inside the RFC 3849
	// documentation prefix).
	IPv4Pool string `json:"ipv4Pool,omitempty"`
	IPv6Pool string `json:"ipv6Pool,omitempty"`
	// HostnameSuffix, when set, switches to hostname mode: the ingress of a
	// load balancer is the hostname "<name>.<HostnameSuffix>" instead of
	// its VIPs (which are still allocated). It must be a DNS-1123 subdomain.
	HostnameSuffix string `json:"hostnameSuffix,omitempty"`
	// IPMode is the ipMode reported with each VIP: "" (unset), "VIP" or
	// "Proxy". It must be empty in hostname mode.
	IPMode v1.LoadBalancerIPMode `json:"ipMode,omitempty"`
	// ProvisioningDelay makes load-balancer creation asynchronous, as in
	// most clouds: a load balancer reports no ingress (Find returns it
	// with an empty Ingress, GetLoadBalancer "exists" with an empty status,
	// EnsureLoadBalancer an api.RetryError) until this long after its
	// creation, then its VIPs or hostname. Each load balancer keeps the
	// moment it is ready (in the state file too), so a later change of the
	// delay (the admin endpoint's PUT /provisioning) applies to load
	// balancers created after it. Nil (unset): 2s with Realistic, else no
	// delay; "0s" is no delay; negative is an error.
	ProvisioningDelay *provider.Duration `json:"provisioningDelay,omitempty"`
	// Backends is what the cloud keeps of each load-balancer backend:
	// BackendsNodeName (the whole backend, Node name included) or
	// BackendsInstanceID (only the instance, as hcloud, DigitalOcean or
	// OpenStack do; see BackendsInstanceID). Empty: BackendsInstanceID
	// with Realistic, else BackendsNodeName.
	Backends BackendMode `json:"backends,omitempty"`
	// BackendPools is how load balancers hold their backends:
	// BackendPoolsPerService (each its own) or BackendPoolsShared (the
	// cloud has backend pools that many load balancers reference, and the
	// fake's provider declares loadbalancer.Capabilities.SharedBackendPools;
	// see BackendPoolsShared). Empty: BackendPoolsPerService, in every
	// mode, Realistic too: sharing a pool is a provider's design, not a
	// behaviour of the cloud that realistic mode models (delays, rate
	// limits, instance targets), and the cloud-call figures and tests of
	// the realistic mode stay those of a provider with backends per
	// Service.
	BackendPools BackendPoolMode `json:"backendPools,omitempty"`
	// Hierarchical makes the cloud keep each load balancer as separate
	// objects, as OpenStack Octavia does: the load balancer, its listeners,
	// a pool per listener, the pool's members and a health monitor per
	// pool, each created, changed and deleted by a write of its own (one
	// Apply), and the fake's provider declares
	// loadbalancer.Capabilities.ListenerPools. Creating a load balancer
	// creates it alone (no listeners: the Reconciler adds them, their
	// pools, members and monitors as actions of their own); each new
	// listener and pool gets a cloud ID ("lis-<n>", "pool-<n>"); a
	// listener's port and protocol are immutable; deleting a load balancer
	// deletes its children with it; and every write leaves the load
	// balancer busy for BusyAfterWrite. It combines with Realistic (delays,
	// rate limits, instance-ID members), not with BackendPools shared.
	// False (the default, Realistic too): each load balancer is one
	// object, written whole.
	Hierarchical bool `json:"hierarchical,omitempty"`
	// BusyAfterWrite is how long a load balancer stays busy after each
	// successful write to it, as Octavia's PENDING_UPDATE: the write
	// returns its result with an error saying the cloud is busy for about
	// that long, and a write (Apply or Delete) to it before then is refused
	// with a 409 that changes nothing (Calls.Busy counts them). Each load
	// balancer keeps the moment it is busy until (in the state file too),
	// so each process may have its own value. Nil (unset): 1s with
	// Hierarchical, else 0; "0s": never busy; negative is an error.
	BusyAfterWrite *provider.Duration `json:"busyAfterWrite,omitempty"`
	// UniqueNames makes the cloud refuse to create a load balancer whose
	// name another one has, as AWS, GCE, Azure and Hetzner do: the create
	// fails with a 409 wrapping loadbalancer.ErrNameTaken (and
	// loadbalancer.ErrRefused: nothing changed), and the fake's provider
	// declares loadbalancer.Capabilities.UniqueNames, so its Reconciler
	// creates without first confirming the Cache's miss with a Find.
	// False (the default, Realistic too): names may repeat, as on
	// OpenStack Octavia and DigitalOcean. The example
	// cloud-controller-manager's cloud-config sets it.
	UniqueNames bool `json:"uniqueNames,omitempty"`
	// CoalesceWindow is the fake's provider's
	// loadbalancer.Options.CoalesceWindow: UpdateLoadBalancer keeps a
	// Service's node set and writes the latest one once per window (the
	// backends, or with BackendPools shared the pool's members). This is
	// the provider's behaviour, not the cloud's, in every mode. Unset or
	// "0s": written in each call (the default of the option); the example
	// cloud-controller-manager's cloud-config sets
	// loadbalancer.RecommendedCoalesceWindow (2s); negative is an error.
	CoalesceWindow *provider.Duration `json:"coalesceWindow,omitempty"`
}

// BackendPoolMode is how the fake's load balancers hold their backends
// (LoadBalancerSection.BackendPools).
type BackendPoolMode string

// The backend pool modes.
const (
	// BackendPoolsPerService: each load balancer keeps its own backends
	// (loadbalancer.Spec.Backends), and the cloud has no backend pools: a
	// load balancer referencing one is refused.
	BackendPoolsPerService BackendPoolMode = "perService"
	// BackendPoolsShared: the cloud has shared backend pools
	// (loadbalancer.Pool, kept as the model and changed with
	// loadbalancer.ApplyPool; backends kept as LoadBalancerSection.Backends
	// says), which many load balancers reference
	// (loadbalancer.Spec.BackendPool), and the Cloud's provider serves
	// them (loadbalancer.Capabilities.SharedBackendPools): the load
	// balancers of every Service whose backends are the same set reference
	// one pool, so a Node change is one write of the pool however many
	// Services there are. The cloud refuses a load balancer referencing a
	// pool that does not exist, and refuses to delete a pool a load
	// balancer references (loadbalancer.ErrPoolInUse). Pool calls are
	// operations of their own (OpFindBackendPools, OpListBackendPools,
	// OpApplyBackendPool, OpDeleteBackendPool), counted, rate limited and
	// interceptable (Funcs) like the others.
	BackendPoolsShared BackendPoolMode = "shared"
)

// BackendMode is what the fake keeps of a load-balancer backend
// (LoadBalancerSection.Backends).
type BackendMode string

// The backend modes.
const (
	// BackendsNodeName keeps each backend whole (Node name, provider ID,
	// addresses) and the Reconciler matches backends by Node name
	// (loadbalancer.BackendKeyNodeName): a Node needs an InternalIP of the
	// Service's family to be a backend.
	BackendsNodeName BackendMode = "nodeName"
	// BackendsInstanceID keeps only each backend's provider ID, the
	// instance, and reports nothing else, like a cloud whose targets are
	// VM IDs. It rejects an ActionCreate or ActionAddBackends whose
	// provider ID does not parse as "fake://<id>" or names an unknown or
	// terminated instance, with an error naming it. The Reconciler matches
	// backends by provider ID (loadbalancer.BackendKeyProviderID) and
	// checks Nodes' provider IDs with the fake's codec
	// (loadbalancer.Options.Codec): a Node whose name differs from its
	// instance's is a backend like any other.
	BackendsInstanceID BackendMode = "instanceID"
)

// RateLimit limits the fake's cloud API calls with two token buckets, one
// for reads and one for writes (see the Op constants): each holds up to Burst tokens,
// refills at its rate, and every call takes one. A call that finds its
// bucket empty fails at once, changes nothing, is counted (Calls.Throttled)
// and returns an error wrapping an *api.RetryError
// (k8s.io/cloud-provider/api) whose RetryAfter is the time until a token is
// free: ccmkit's one way for a Driver to say "throttled, retry after D".
// The limit applies to every driver call of the Cloud and of its peers
// (NewPeer: one cloud account), not to the control surface.
//
// A nil rate is unlimited (in the cloud-config: unset; with
// Config.Realistic, the realistic default). JSON and YAML field names are
// the json tags.
type RateLimit struct {
	// ReadsPerSecond refills the read bucket; it must be positive (and
	// finite) when set.
	ReadsPerSecond *float64 `json:"readsPerSecond,omitempty"`
	// WritesPerSecond refills the write bucket; it must be positive (and
	// finite) when set.
	WritesPerSecond *float64 `json:"writesPerSecond,omitempty"`
	// Burst is the capacity of each bucket: how many calls of a class may
	// pass at once after an idle period. It must be at least 1 when a
	// rate is set, and 0 when none is. In a cloud-config 0 (unset) means
	// 20 with Config.Realistic.
	Burst int `json:"burst,omitempty"`
}

// GovernorSection configures the fake's client-side budget of cloud
// calls, a governor.Governor (Config.Governor). Zero values are the
// governor's defaults (governor.Limit); JSON and YAML field names are the
// json tags.
type GovernorSection struct {
	// ReadsPerSecond and WritesPerSecond are the budgets' rates
	// (governor.Limit.Rate); 0 means the governor's default (20 and 10).
	ReadsPerSecond  float64 `json:"readsPerSecond,omitempty"`
	WritesPerSecond float64 `json:"writesPerSecond,omitempty"`
	// Burst is the capacity of each budget (governor.Limit.Burst); 0 means
	// the governor's default (20).
	Burst int `json:"burst,omitempty"`
}

// options are the governor.Options of g on clk.
func (g *GovernorSection) options(clk clock.PassiveClock) governor.Options {
	return governor.Options{
		Reads:  governor.Limit{Rate: g.ReadsPerSecond, Burst: g.Burst},
		Writes: governor.Limit{Rate: g.WritesPerSecond, Burst: g.Burst},
		Clock:  clk,
	}
}

// validate checks g with the governor's own validation; path names it.
func (g *GovernorSection) validate(path *field.Path) field.ErrorList {
	if g == nil {
		return nil
	}
	if _, err := governor.New(g.options(nil)); err != nil {
		return field.ErrorList{field.Invalid(path, fmt.Sprintf("%+v", *g), err.Error())}
	}
	return nil
}

// limited reports whether r limits any class.
func (r RateLimit) limited() bool { return r.ReadsPerSecond != nil || r.WritesPerSecond != nil }

// validate checks r as it applies (defaults filled in); path names it in
// errors.
func (r RateLimit) validate(path *field.Path) field.ErrorList {
	var errs field.ErrorList
	for _, rate := range []struct {
		name string
		v    *float64
	}{{"readsPerSecond", r.ReadsPerSecond}, {"writesPerSecond", r.WritesPerSecond}} {
		if rate.v != nil && !(*rate.v > 0 && !math.IsInf(*rate.v, 1)) {
			errs = append(errs, field.Invalid(path.Child(rate.name), *rate.v, "expected a positive number of calls per second (leave it unset for no limit)"))
		}
	}
	switch {
	case r.limited() && r.Burst < 1:
		errs = append(errs, field.Invalid(path.Child("burst"), r.Burst, "expected at least 1 with a rate set: the calls of a class that may pass at once"))
	case !r.limited() && r.Burst != 0:
		errs = append(errs, field.Invalid(path.Child("burst"), r.Burst, "expected readsPerSecond or writesPerSecond with a burst, or no burst"))
	}
	return errs
}

// clone returns a copy of r that shares no pointer with it.
func (r RateLimit) clone() RateLimit {
	out := RateLimit{Burst: r.Burst}
	if r.ReadsPerSecond != nil {
		out.ReadsPerSecond = ptr.To(*r.ReadsPerSecond)
	}
	if r.WritesPerSecond != nil {
		out.WritesPerSecond = ptr.To(*r.WritesPerSecond)
	}
	return out
}

// RoutesSection is the routes section of Config: how the route table
// behaves (see routes.Options).
type RoutesSection struct {
	// IPv4Only rejects IPv6 destinations (routes.ErrIPv6Unsupported).
	IPv4Only bool `json:"ipv4Only,omitempty"`
	// EnableNodeAddresses lists routes with EnableNodeAddresses, so the
	// route controller compares their TargetNodeAddresses.
	EnableNodeAddresses bool `json:"enableNodeAddresses,omitempty"`
	// ListTTL is how long the route table answers ListRoutes from its last
	// answer (routes.Options.ListTTL): the route controller lists every
	// 10s. The table's own writes, the control surface's route and
	// instance changes, and a state file reload that finds them changed
	// drop the answer. Unset or 0: every ListRoutes reads the cloud, in
	// every mode.
	ListTTL provider.Duration `json:"listTTL,omitempty"`
}

// AdminSection is the admin section of Config (checked by
// Config.Validate): the admin HTTP endpoint.
type AdminSection struct {
	// Address is the loopback "host:port" the endpoint listens on, such as
	// "127.0.0.1:8089", "[::1]:8089" or "localhost:0" (localhost means
	// 127.0.0.1; port 0 picks a free port). Any other host is rejected.
	// Empty means no endpoint.
	Address string `json:"address,omitempty"`
	// AddressFile, when set, is a file the fake writes the address it
	// actually listens on to ("host:port", no newline; useful with port
	// 0), once it listens. It is replaced atomically.
	AddressFile string `json:"addressFile,omitempty"`
}

// ListenAddress returns the address the admin endpoint listens on:
// Address with localhost spelled 127.0.0.1. It returns an error, naming
// the problem, for an Address that is not a loopback host:port (which
// Config.Validate refuses), and "" and nil for an empty one.
func (s AdminSection) ListenAddress() (string, error) {
	if s.Address == "" {
		return "", nil
	}
	return loopbackAddress(s.Address)
}

// withDefaults returns c with the documented defaults filled in.
func (c Config) withDefaults() Config {
	if len(c.InstanceCIDRs) == 0 {
		c.InstanceCIDRs = []string{defaultInstanceCIDR}
	}
	if c.LoadBalancers.IPv4Pool == "" {
		c.LoadBalancers.IPv4Pool = defaultIPv4Pool
	}
	if c.LoadBalancers.IPv6Pool == "" {
		c.LoadBalancers.IPv6Pool = defaultIPv6Pool
	}
	delay, backends := time.Duration(0), BackendsNodeName
	if c.Realistic {
		delay, backends = realisticProvisioningDelay, realisticBackends
	}
	if c.LoadBalancers.ProvisioningDelay == nil {
		c.LoadBalancers.ProvisioningDelay = &provider.Duration{Duration: delay}
	} else {
		c.LoadBalancers.ProvisioningDelay = ptr.To(*c.LoadBalancers.ProvisioningDelay)
	}
	if c.LoadBalancers.Backends == "" {
		c.LoadBalancers.Backends = backends
	}
	if c.LoadBalancers.CoalesceWindow == nil {
		c.LoadBalancers.CoalesceWindow = &provider.Duration{}
	} else {
		c.LoadBalancers.CoalesceWindow = ptr.To(*c.LoadBalancers.CoalesceWindow)
	}
	if c.LoadBalancers.BackendPools == "" {
		c.LoadBalancers.BackendPools = BackendPoolsPerService
	}
	c.LoadBalancers.BusyAfterWrite = busyAfterWrite(c.LoadBalancers)
	c.RateLimit = c.rateLimit()
	return c
}

// busyAfterWrite returns lbs.BusyAfterWrite as it applies, as a copy:
// when unset, hierarchicalBusyAfterWrite with Hierarchical, else 0.
func busyAfterWrite(lbs LoadBalancerSection) *provider.Duration {
	if d := lbs.BusyAfterWrite; d != nil {
		return ptr.To(*d)
	}
	if lbs.Hierarchical {
		return &provider.Duration{Duration: hierarchicalBusyAfterWrite}
	}
	return &provider.Duration{}
}

// rateLimit returns the rate limit that applies: RateLimit with the
// realistic defaults filled in when Realistic, as a copy.
func (c *Config) rateLimit() RateLimit {
	r := c.RateLimit.clone()
	if !c.Realistic {
		return r
	}
	if r.ReadsPerSecond == nil {
		r.ReadsPerSecond = ptr.To(realisticReadsPerSecond)
	}
	if r.WritesPerSecond == nil {
		r.WritesPerSecond = ptr.To(realisticWritesPerSecond)
	}
	if r.Burst == 0 {
		r.Burst = realisticBurst
	}
	return r
}

// parsePool parses a pool CIDR, which must be in canonical (masked) form
// and hold at least one allocatable address.
func parsePool(s string) (netip.Prefix, error) {
	p, err := netip.ParsePrefix(s)
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("expected a CIDR such as 10.0.0.0/16 or fd00::/64")
	}
	if p != p.Masked() {
		return netip.Prefix{}, fmt.Errorf("expected the network address %s (host bits set)", p.Masked())
	}
	if p.Addr().BitLen()-p.Bits() < 2 {
		return netip.Prefix{}, fmt.Errorf("expected a prefix length of at most /%d, to leave allocatable addresses", p.Addr().BitLen()-2)
	}
	return p, nil
}

// loopbackAddress parses an admin address and returns it with "localhost"
// spelled 127.0.0.1. It refuses any host that is not a loopback IP.
func loopbackAddress(addr string) (string, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", errors.New("expected host:port, such as 127.0.0.1:8089")
	}
	if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
		return "", fmt.Errorf("port %s: expected a number from 0 to 65535", clip(port))
	}
	if host == "localhost" {
		host = "127.0.0.1"
	}
	ip, err := netip.ParseAddr(host)
	if err != nil || !ip.IsLoopback() || ip.Zone() != "" {
		return "", fmt.Errorf("host %s: expected a loopback address (127.0.0.1, ::1 or localhost): the admin endpoint has no authentication", clip(host))
	}
	return net.JoinHostPort(ip.String(), port), nil
}
